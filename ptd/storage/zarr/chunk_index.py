"""The chunk index of a zarr array: its codecs, its checksum, and the chunk objects a local
directory store holds (``Backend.chunk_info`` for zarr)."""

from __future__ import annotations

import os
import re
from typing import Any

from ptd.storage.chunk_info import ChunkInfo, FilterInfo, grid_of

__all__ = ["zarr_chunk_info"]


def zarr_chunk_info(arr: Any, list_stored: bool) -> ChunkInfo:
    md = arr.metadata
    shape = tuple(md.shape)
    # a sharded array stores shards: they are its chunks here (the stored objects); a read
    # decodes its inner chunks
    shards = getattr(arr, "shards", None)
    chunks = tuple(shards or arr.chunks)
    info = ChunkInfo(chunks=chunks, grid=grid_of(shape, chunks))
    if shards:
        info.inner = tuple(arr.chunks)
    if md.zarr_format == 3:
        codecs = list(md.codecs)
        names = [type(c).__name__ for c in codecs]
        for c, cname in zip(codecs, names, strict=True):
            try:
                name = str(c.to_dict().get("name", cname))
            except Exception:  # noqa: BLE001 - a codec that cannot describe itself
                name = cname
            info.filters.append(FilterInfo(name=name))
            if name == "crc32c":
                info.checksum = "crc32c"
            elif name not in ("bytes", "transpose", "vlen-utf8", "vlen-bytes", "crc32c"):
                info.compressed = True
    else:
        for c in list(arr.compressors or ()) + list(arr.filters or ()):
            info.filters.append(FilterInfo(name=str(getattr(c, "codec_id", type(c).__name__))))
            info.compressed = True
    if list_stored:
        info.stored = _zarr_stored(arr, md, info.grid)
    return info


def _zarr_stored(arr: Any, md: Any, grid: tuple[int, ...]) -> set[tuple[int, ...]] | None:
    """Grid coordinates of the chunk files of a local directory store (None elsewhere).

    The files under the array's directory are listed once and each name is decoded into its
    grid index (and checked by encoding it back): the work follows what is stored, never the
    number of chunks the metadata declares (an 8M-chunk array with nothing stored lists an
    empty directory)."""
    store = arr.store
    root = getattr(store, "root", None)
    if root is None or not os.path.isdir(str(root)):
        return None
    base = os.path.join(str(root), *[p for p in arr.path.split("/") if p])
    encode = getattr(md, "encode_chunk_key", None)
    if encode is None:
        return None
    ndim = len(grid)
    out: set[tuple[int, ...]] = set()
    base_len = len(base.rstrip(os.sep)) + 1
    for d, _dirs, files in os.walk(base):
        rel = d[base_len:].replace(os.sep, "/")
        for f in files:
            if f == "zarr.json" or f.startswith(".z"):
                continue
            idx = _decode_key(f"{rel}/{f}" if rel else f, ndim)
            if (
                idx is not None
                and all(0 <= i < g for i, g in zip(idx, grid, strict=True))
                and encode(idx) == (f"{rel}/{f}" if rel else f)
            ):
                out.add(idx)
    return out


def _decode_key(key: str, ndim: int) -> tuple[int, ...] | None:
    """The grid index a chunk key names (``c/1/2``, ``c.1.2``, ``1.2``, ``1/2``; ``c`` or
    ``0`` for a 0-d array), or None; the caller checks it by encoding it back."""
    parts = re.split(r"[./]", key)
    if parts and parts[0] == "c":
        parts = parts[1:]
    if ndim == 0:
        return ()
    if len(parts) != ndim:
        return None
    try:
        return tuple(int(p) for p in parts)
    except ValueError:
        return None
