"""Frozen splits: planning and writing a build, its manifest, verifying a copy, reading it back, exporting it.

Lives here: ``build`` (plan, render units, journal, annotations, YOLO view; ``build_splits``), ``manifest``
(the manifest's fields, root hash and seal), ``verify`` (every file against a manifest), ``reader``
(``load_split``, the one sealed way to read a split's manifest; ``config_for``, a split's suite), ``measure`` (the
engine's calibration and realism statistics on a split, with the suite and unit its manifest records) and
``export_hf`` (a Hugging Face dataset of a split).
May import: ``aegis_data.errors``, ``extras``, ``compiled``, ``conditions``, ``files``, ``engine``, ``sources`` and
``executors`` (which runs the units it hands over). Never ``augment``.
"""
