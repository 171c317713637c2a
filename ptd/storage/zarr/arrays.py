"""Zarr array helpers: the layout its metadata describes (dtype, chunks, codecs; v2 and v3) and
reads of a selection through zarr."""

from __future__ import annotations

from typing import Any

import numpy as np

from ptd.storage.api import Selection, selection_shape
from ptd.storage.properties import describe_pipeline
from ptd.storage.zarr import properties as zarr_properties

__all__ = ["array_layout", "read_selection"]


def _sharding(codecs: Any) -> Any:
    """The sharding codec of a v3 array's codec list, or None."""
    for c in codecs:
        if type(c).__name__ == "ShardingCodec":
            return c
    return None


def array_layout(
    arr: Any,
) -> tuple[np.dtype, tuple[int, ...], str | None, tuple[int, ...] | None]:
    """``(dtype, chunks, compression, shards)`` of a zarr array: ``chunks`` is what one read
    decodes (the chunk shape inside the shards of a sharded array), ``shards`` the shard
    shape (None when unsharded); ``compression`` names the steps of its chunks' pipeline in
    order, filters included, serializer left out (``"delta(dtype=f8)+zstd(3)"``), or None."""
    md = arr.metadata
    shards = None
    if md.zarr_format == 3:
        dt = md.data_type.to_native_dtype()
        chunks = tuple(getattr(md.chunk_grid, "chunk_shape", None) or arr.chunks)
        inner = _sharding(md.codecs)
        if inner is not None:  # a sharded array: what a read decodes is an inner chunk
            shards, chunks = chunks, tuple(inner.chunk_shape)
    else:
        dt, chunks = arr.dtype, tuple(arr.chunks)
    # every step but the serializer, filters included (what a read decodes, and what keeps a
    # chunk from being mapped as it is): the pipeline as the backend's inventory states it
    compression = describe_pipeline(zarr_properties.pipeline(arr))
    return dt, chunks, compression, shards


def read_selection(arr: Any, selection: Selection) -> np.ndarray:
    """``arr[selection]`` through zarr (an index array orthogonally, like h5py)."""
    if not selection:
        return np.asarray(arr[...])
    out_shape = selection_shape(arr.shape, selection)
    if 0 in out_shape:
        return np.empty(out_shape, arr.dtype)
    if any(isinstance(s, np.ndarray) for s in selection):
        # an int among index arrays is asked as a one-element slice, its dim dropped after:
        # zarr 3.1.2's orthogonal read of sharded arrays fails on it (a broadcast error)
        kept = tuple(
            slice(int(s), int(s) + 1) if isinstance(s, (int, np.integer)) else s for s in selection
        )
        return np.asarray(arr.oindex[kept]).reshape(out_shape)
    return np.asarray(arr[selection])
