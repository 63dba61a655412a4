"""Bytes on disk: the split's folder layout, strict JSON / YAML readers, image decoding and pixel hashes, and
the toolkit's own PNG writer (with its optional compiled deflate).

Lives here: ``layout`` (where each file of a split goes), ``readers`` (JSON/YAML/COCO parsing that refuses
what it cannot trust), ``imageio`` (decode, pixel SHA-256, atomic writes, output-path checks) and ``png``
(the deterministic PNG encoder).
May import: ``aegis_data.errors``, ``aegis_data.compiled``. The bottom floor: nothing else of the toolkit.
"""
