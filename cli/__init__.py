"""The ``aegis`` command line: argument parsing and rendering only; the work lives in aegis_data/aegis_eval."""
