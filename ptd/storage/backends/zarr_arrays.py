"""Zarr array helpers: the layout its metadata describes (dtype, chunks, codecs; v2 and v3) and
reads of a selection through zarr."""

from __future__ import annotations

from typing import Any

import numpy as np
from zarr.abc.codec import BytesBytesCodec

from ptd.storage.backends.base import Selection, selection_shape

__all__ = ["array_layout", "describe_codec", "read_selection"]


def _sharding(codecs: Any) -> Any:
    """The sharding codec of a v3 array's codec list, or None."""
    for c in codecs:
        if type(c).__name__ == "ShardingCodec":
            return c
    return None


def describe_codec(codec: Any) -> str:
    """A short name of a compressor for listings: ``zstd(0)``, ``blosc(lz4,5)``, ``gzip(4)``."""
    try:
        conf = codec.to_dict()
        name, conf = conf.get("name"), conf.get("configuration") or {}
    except Exception:  # noqa: BLE001 - numcodecs (zarr v2) codecs
        conf = dict(getattr(codec, "get_config", lambda: {})())
        name = conf.pop("id", type(codec).__name__)
    if name == "blosc" and "cname" in conf:
        return f"blosc({conf['cname']},{conf.get('clevel')})"
    level = conf.get("level", conf.get("clevel"))
    return f"{name}({level})" if level is not None else str(name)


def array_layout(
    arr: Any,
) -> tuple[np.dtype, tuple[int, ...], str | None, tuple[int, ...] | None]:
    """``(dtype, chunks, compression, shards)`` of a zarr array: ``chunks`` is what one read
    decodes (the chunk shape inside the shards of a sharded array), ``shards`` the shard
    shape (None when unsharded); ``compression`` names the bytes-to-bytes codecs of its
    chunks, or None."""
    md = arr.metadata
    shards = None
    if md.zarr_format == 3:
        dt = md.data_type.to_native_dtype()
        chunks = tuple(getattr(md.chunk_grid, "chunk_shape", None) or arr.chunks)
        compressors: Any = [c for c in md.codecs if isinstance(c, BytesBytesCodec)]
        inner = _sharding(md.codecs)
        if inner is not None:  # a sharded array: its chunks' codecs are inside the shards
            compressors = [c for c in inner.codecs if isinstance(c, BytesBytesCodec)]
            shards, chunks = chunks, tuple(inner.chunk_shape)
    else:
        dt, chunks, compressors = arr.dtype, tuple(arr.chunks), arr.compressors
    compression = "+".join(describe_codec(c) for c in compressors) if compressors else None
    return dt, chunks, compression, shards


def read_selection(arr: Any, selection: Selection) -> np.ndarray:
    """``arr[selection]`` through zarr (an index array orthogonally, like h5py)."""
    if not selection:
        return np.asarray(arr[...])
    out_shape = selection_shape(arr.shape, selection)
    if 0 in out_shape:
        return np.empty(out_shape, arr.dtype)
    if any(isinstance(s, np.ndarray) for s in selection):
        return np.asarray(arr.oindex[selection])
    return np.asarray(arr[selection])
