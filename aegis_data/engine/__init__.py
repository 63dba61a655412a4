"""The corruption engine: the suite config, its length unit, keyed randomness, the nine corruptions and their
calibration.

Lives here: ``config`` (the suite file, parsed and checked by ``config_schema``), ``scale`` (frame or object
units), ``seeding`` (keyed streams), ``kernels`` (exact numeric building blocks, with the optional compiled
loops), ``budget`` (each render priced before any pixel work), ``corruptions`` (parameter and draw records,
kernels, ``apply_corruption``) and ``corruptor`` (it bound to a suite and a unit), ``calibration`` (the severity
statistics), ``realism`` and ``realism_atmosphere`` (camera and atmosphere statistics measured against real
footage), ``visibility`` (the persons' detector-free Rose index) and ``grid`` (the severity picture). aegis-v2's
physical models: ``scene`` (the camera and geometry of an image), ``photometry`` (linear light), ``camera`` (low
light as a camera records it), ``motion`` (the trajectory blur), ``atmosphere`` and ``rain``, ``water``, ``glint``
and ``flood``.
May import: ``aegis_data.errors``, ``aegis_data.compiled``, ``aegis_data.conditions``, ``aegis_data.files``. Never
sources, split, executors or augment (they build on the engine, not the other way round).
"""
