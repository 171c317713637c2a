"""Streamed copies between stores: one slab planner and region copier, used by
:func:`ptd.convert` (local and distributed drivers), memmap export and ``from_dict``."""
