"""Training-time augmentation with the benchmark's own corruptions, in a key namespace of its own.

Lives here: ``transform`` (policies, ``DisasterAugment``) and ``torchvision_v2`` (the same as a torchvision v2
transform). The policies of ``configs/augment`` ship beside the package as ``aegis_data/augment_policies``.
May import: ``aegis_data.errors``, ``files``, ``engine``. Never ``split`` or ``executors``.
"""
