"""AegisBench data side: sources, seeding, the aegis-v1 corruption engine, tiling, frozen splits."""

__version__ = "0.2.0"
