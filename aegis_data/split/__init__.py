"""Frozen splits: planning and writing a build, its manifest, verifying a copy, reading it back, exporting it.

Lives here: ``build`` (plan, render units, journal, annotations, YOLO view; ``build_splits``), ``manifest``
(the manifest's fields, root hash and seal), ``verify`` (every file against a manifest), ``reader``
(``load_split``) and ``export_hf`` (a Hugging Face dataset of a split).
May import: ``aegis_data.errors``, ``extras``, ``compiled``, ``files``, ``engine``, ``sources`` and
``executors`` (which runs the units it hands over). Never ``augment``.
"""
