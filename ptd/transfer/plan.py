"""Planning a conversion: where it writes (the destination and its format), whether it may,
and what happens to each entry (its chunks and codec in the destination).

Chunks: ``chunks=ROWS`` chunks every tensor by ``ROWS`` rows along its first dim. Otherwise a
chunked source keeps its chunk shape, except chunks over :data:`CHUNK_MAX`; a contiguous (h5)
source, or such large chunks, get chunks of about :data:`CHUNK_TARGET` when the destination is
zarr (or compressed), and stay contiguous on h5.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any

from ptd.errors import PtdValueError, ReadOnlyError, StoreExistsError, StoreNotFoundError
from ptd.storage import remote
from ptd.storage.backends.base import ArrayMeta, NodeKind, ValueKind
from ptd.storage.location import StoreLocation
from ptd.transfer.codecs import choose_codec, describe
from ptd.transfer.layouts import LeafLayout, random_access
from ptd.transfer.options import ConvertOptions, ConvertResult, LeafPlan

if TYPE_CHECKING:
    from ptd.report.scan import Scan

__all__ = [
    "CHUNK_TARGET",
    "CHUNK_MAX",
    "destination",
    "resolve_destination",
    "check_destination",
    "dst_chunks",
    "leaf_target",
    "plan_leaves",
]

#: target size of an automatic chunk, and the largest source chunk that is kept as is
CHUNK_TARGET = 8 << 20
CHUNK_MAX = 64 << 20


# ----------------------------------------------------------------------------- destination
def destination(opts: ConvertOptions, src_format: str | None = None) -> StoreLocation:
    """The destination with its format: ``opts.to``, else ``dst``'s suffix's, else the other
    format than the source's (read from ``src`` unless ``src_format`` is given). Without a
    ``dst``: ``src`` with its suffix swapped (``data.h5`` -> ``data.zarr``)."""
    to = opts.to or (opts.dst.suffix_format if opts.dst is not None else None)
    if to is None:
        src_format = src_format or opts.src.detect().format
        to = "zarr" if src_format == "h5" else "h5"
    if opts.dst is not None:
        return opts.dst.with_format(to)
    dst = opts.src.with_suffix_of(to)
    if opts.default_dst_options is not None:
        dst = StoreLocation(dst.path, opts.default_dst_options, to)
    return dst


def resolve_destination(
    src: Any,
    dst: Any = None,
    to: str | None = None,
    *,
    storage_options: dict[str, Any] | None = None,
) -> tuple[str, str]:
    """``(dst path, dst format)`` as :func:`ptd.convert` chooses them (reads ``src``'s format
    when neither ``to`` nor ``dst``'s suffix names one; a URL ``src`` with
    ``storage_options``)."""
    loc = destination(ConvertOptions.parse(src, dst, to=to, storage_options=storage_options))
    assert loc.format is not None
    return loc.path, loc.format


def check_destination(src: StoreLocation, dst: StoreLocation, opts: ConvertOptions) -> bool:
    """Refuse a destination the conversion may not write: an existing one without
    ``overwrite``, a missing or (unless a dry run) unwritable parent directory; a URL must be
    zarr, not the source itself, in an existing bucket. Returns whether ``dst`` exists."""
    if dst.is_remote:
        exists = _check_remote_destination(src, dst)
    else:
        exists = os.path.lexists(dst.path)
    if exists and not opts.overwrite:
        raise StoreExistsError(
            f"{dst.path} already exists; pass overwrite=True (ptd convert --overwrite) to replace it"
        )
    if not dst.is_remote:
        parent = os.path.dirname(os.path.abspath(dst.path))
        if not os.path.isdir(parent):
            raise StoreNotFoundError(
                f"cannot write {dst.path}: the directory {parent} does not exist"
            )
        if not opts.dry_run and not os.access(parent, os.W_OK | os.X_OK):
            raise ReadOnlyError(
                f"cannot write {dst.path}: permission denied on the directory {parent}"
            )
    return exists


def _check_remote_destination(src: StoreLocation, dst: StoreLocation) -> bool:
    """A URL destination: zarr only, not the source itself, its bucket present. Returns
    whether something is there already."""
    if dst.format != "zarr":
        raise PtdValueError(
            f"cannot write {dst.path}: HDF5 destinations must be local paths (h5py writes local "
            "files); convert to zarr (--to zarr), or write the HDF5 file locally and upload it"
        )
    if dst.path.rstrip("/") == src.path.rstrip("/"):
        raise PtdValueError(f"cannot convert {src.path} onto itself: choose another destination")
    fs, path, kind = remote.probe(dst.path, dst.options)
    if kind is None:
        remote.check_bucket(fs, path, dst.path)
    return kind is not None


# ----------------------------------------------------------------------------- chunks
def dst_chunks(
    meta: ArrayMeta, rows: int | None, dst_fmt: str, compressed: bool
) -> tuple[int, ...] | None:
    """The destination's chunk shape for a leaf (None: contiguous; see the module doc)."""
    shape = tuple(meta.shape)
    if not shape or 0 in shape:
        return None
    row_bytes = max(1, math.prod(shape[1:]) * meta.dtype.itemsize)
    if rows is not None:
        return (max(1, min(int(rows), shape[0])),) + shape[1:]
    src = tuple(meta.chunks) if meta.chunks is not None else None
    if src is not None and math.prod(src) * meta.dtype.itemsize <= CHUNK_MAX:
        return src
    if dst_fmt == "h5" and not compressed and src is None:
        return None  # contiguous, like the source
    n = max(1, CHUNK_TARGET // row_bytes)
    return (min(n, shape[0]),) + shape[1:]


def leaf_target(
    meta: ArrayMeta, opts: ConvertOptions, fmt: str, notes: list[str], remote: bool
) -> LeafLayout:
    """Chunks, shards and codec of a tensor leaf in the ``fmt`` destination: the layout
    ``opts.layout`` asks for, else the source's as far as ``fmt`` has it (``opts.chunks`` and
    ``opts.compression`` applied)."""
    if opts.layout == "random-access":
        return random_access(meta, fmt, remote=remote)
    name, level = choose_codec(meta, fmt, opts.compression, opts.level, notes)
    chunks = dst_chunks(meta, opts.chunks, fmt, name not in (None, "none"))
    return LeafLayout(chunks, None, name, level)


# ----------------------------------------------------------------------------- leaves
def plan_leaves(s: Scan, opts: ConvertOptions, result: ConvertResult) -> None:
    """Fill ``result``'s plan and counts: one :class:`LeafPlan` per node of the scan, with
    the chunks and codec each tensor gets in ``result.dst_format``."""
    to = result.dst_format
    total = 0
    for path, kind, meta in s.nodes:
        key = "/".join(path)
        if kind is NodeKind.GROUP:
            result.groups += 1
            result.plan.append(LeafPlan(key, "group"))
            continue
        assert meta is not None
        if meta.kind is ValueKind.NON_TENSOR:
            result.non_tensors += 1
            result.plan.append(LeafPlan(key, "non_tensor", shape=list(meta.shape)))
            continue
        nbytes = math.prod(meta.shape) * meta.dtype.itemsize
        target = leaf_target(meta, opts, to, result.notes, remote.is_remote(result.dst))
        chunks, name, level = target.chunks, target.codec, target.level
        result.plan.append(
            LeafPlan(
                key,
                "tensor" if meta.kind is ValueKind.NUMERIC else "unsupported",
                shape=list(meta.shape),
                dtype=meta.torch_dtype or str(meta.dtype),
                nbytes=nbytes,
                src_chunks=list(meta.chunks) if meta.chunks else None,
                dst_chunks=list(chunks) if chunks else None,
                dst_shards=list(target.shards) if target.shards else None,
                src_compression=meta.compression,
                dst_compression=describe(name, level),
            )
        )
        result.tensors += 1
        total += nbytes
    result.nbytes = total


def raw_nbytes(result: ConvertResult) -> int:
    """Bytes the uncompressed leaves of the plan need in the destination."""
    return sum(lp.nbytes for lp in result.plan if lp.kind != "group" and lp.dst_compression is None)
