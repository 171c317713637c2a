"""Streamed copies between stores (torch-free): :func:`ptd.convert` and what it is made of.

``options`` (the arguments, checked once; the result), ``codecs`` (compression names and
options), ``attrs`` (attributes and strings between formats), ``plan`` (destination, chunks,
one plan per leaf), ``copy`` (the region copier, threaded), ``job`` (what the drivers share:
planning, publishing, cleaning up), ``convert`` (the local driver), ``distributed`` (the Dask
driver) and ``slabs`` (the one slab planner, also used by memmap export and ``from_dict``).
"""
