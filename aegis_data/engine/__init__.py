"""The corruption engine: the suite config, its length unit, keyed randomness, the nine corruptions and their
calibration.

Lives here: ``config`` (the suite file, parsed and checked by ``config_schema``), ``scale`` (frame or object
units), ``seeding`` (keyed streams), ``kernels`` (exact numeric building blocks, with the optional compiled
loops), ``corruptions`` (parameter and draw records, kernels, ``apply_corruption``), ``calibration`` (the
severity statistics), ``realism`` (camera statistics measured against real footage), ``visibility`` (the persons'
detector-free Rose index) and ``grid`` (the severity picture).
May import: ``aegis_data.errors``, ``aegis_data.compiled``, ``aegis_data.files``. Never sources, split,
executors or augment (they build on the engine, not the other way round).
"""
