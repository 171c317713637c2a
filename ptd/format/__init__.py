"""The on-disk formats, as pure functions and constants: no torch, no h5py, no zarr.

On-disk names (:mod:`~ptd.format.names`), the ``__tensordict__`` metadata model
(:mod:`~ptd.format.tdmeta`), batch-shape arithmetic on plain tuples (:mod:`~ptd.format.shapes`),
non-tensor payload encoding (:mod:`~ptd.format.payload`), the dtype table keyed by names
(:mod:`~ptd.format.dtypes`) and format detection (:mod:`~ptd.format.detect`).
"""
