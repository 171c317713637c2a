"""Creating entries in a store: values, nested groups, and streamed copies from another store.

A PersistentTensorDict source is never loaded whole: each leaf is copied slab by slab (a bounded
number of rows at a time, aligned to the source's and the destination's chunks). New zarr
arrays with a batch dim are chunked along it (about 8 MB per chunk, as ``ptd convert`` does)
unless the user gave chunks (:func:`batch_chunks`).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ptd.containers.base import TensorDictBase
from ptd.containers.persistent.store import is_store
from ptd.errors import BatchSizeError
from ptd.format.tdmeta import td_meta_attrs
from ptd.ops.batch import as_batch_size, fits, infer_batch_size
from ptd.ops.dtypes import storage_dtype, to_storage
from ptd.ops.foreign import adopt_non_tensor, foreign_batch_size, foreign_names
from ptd.ops.lastop import user_stacklevel
from ptd.ops.nontensor import NonTensorData, NonTensorStack
from ptd.storage.api import FormatPolicy
from ptd.transfer.plan import CHUNK_TARGET
from ptd.transfer.slabs import slab_rows

if TYPE_CHECKING:
    from ptd.containers.persistent.persistent_tensordict import PersistentTensorDict
    from ptd.storage.api import Path

__all__ = [
    "batch_chunks",
    "batch_size_of",
    "check_dtypes",
    "copy_leaf",
    "warn_replace",
    "write_all",
    "write_value",
]


def batch_chunks(
    dst: FormatPolicy,
    shape: Sequence[int],
    itemsize: int,
    options: Mapping[str, Any] | None,
    batch_dims: int,
    src_chunks: Sequence[int] | None = None,
) -> tuple[int, ...] | None:
    """The chunks a new array gets when the user gave none, in a format that chunks every
    array along its batch dim (:attr:`~ptd.storage.api.FormatPolicy.chunks_along_batch`,
    zarr): about
    :data:`~ptd.transfer.plan.CHUNK_TARGET` bytes (8 MB) along the first (batch) dim, as
    ``ptd convert`` writes them, or a store source's chunks when they are along it and not
    too large; None otherwise (h5 stays contiguous: the fast path; zarr arrays without a batch
    dim are one chunk, as tensordict writes them).

    >>> from ptd.storage.registry import policy
    >>> batch_chunks(policy("zarr"), (1_000_000, 64), 4, None, 1)  # 256 B rows: 32768 rows
    (32768, 64)
    >>> batch_chunks(policy("zarr"), (100, 64), 4, None, 1)
    (100, 64)
    >>> batch_chunks(policy("h5"), (10**6, 64), 4, None, 1) is None
    True
    """
    if not dst.chunks_along_batch or batch_dims < 1 or not shape or 0 in shape:
        return None
    if options and options.get("chunks") is not None:
        return None  # the user's
    shape = tuple(int(n) for n in shape)
    row = max(1, int(np.prod(shape[1:], dtype=np.int64)) * itemsize)
    if (
        src_chunks is not None
        and tuple(src_chunks[1:]) == shape[1:]
        and src_chunks[0] * row <= 8 * CHUNK_TARGET
    ):
        return (int(src_chunks[0]),) + shape[1:]
    return (max(1, min(shape[0], CHUNK_TARGET // row)),) + shape[1:]


def _shape_of(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, (torch.Tensor, np.ndarray)):
        return tuple(value.shape)
    if isinstance(value, (bool, int, float, complex, np.generic)):
        return ()
    if isinstance(value, TensorDictBase):
        return tuple(value.batch_size)
    if isinstance(value, NonTensorStack):
        return tuple(value.batch_size)
    if (
        isinstance(value, (list, tuple))
        and value
        and all(isinstance(v, (int, float, bool)) for v in value)
    ):
        return (len(value),)
    return None


def _infer_dict(d: Mapping[str, Any], batch_dims: int | None) -> torch.Size | None:
    own = foreign_batch_size(d)  # a tensordict of another library says it, as ours do
    if own is not None:
        return own
    shapes = []
    for value in d.values():
        value = adopt_non_tensor(value, collapse=True)
        if isinstance(value, Mapping):
            sub = _infer_dict(value, batch_dims)
            if sub is not None:
                shapes.append(tuple(sub))
            continue
        shape = _shape_of(value)
        if shape is not None:
            shapes.append(shape)
    return infer_batch_size(shapes, batch_dims) if shapes else None


def batch_size_of(
    source: Any, batch_size: Sequence[int] | None, batch_dims: int | None
) -> torch.Size:
    """The batch size ``from_dict`` gives its result."""
    if batch_size is not None:
        return as_batch_size(batch_size)
    if isinstance(source, TensorDictBase):
        return source.batch_size
    own = foreign_batch_size(source)  # a tensordict.TensorDict
    if own is not None and batch_dims is None:
        return own
    inferred = _infer_dict(source, batch_dims)
    return inferred if inferred is not None else torch.Size([])


def check_dtypes(source: Any, prefix: tuple[str, ...] = ()) -> None:
    """Raise UnsupportedDtypeError (naming the key and the dtype) for the first tensor of
    ``source`` whose dtype cannot be stored, before anything is written (so that a failing
    ``from_dict`` leaves no partial file behind). A PersistentTensorDict source holds only
    storable dtypes and is not read."""
    if is_store(source):
        return
    if isinstance(source, TensorDictBase):
        items: Any = ((k, source._get_str(k)) for k in source._keys_str())
    elif isinstance(source, Mapping):
        items = source.items()
    else:
        return
    for key, value in items:
        parts = prefix + ((key,) if isinstance(key, str) else tuple(key))
        if isinstance(value, torch.Tensor):
            storage_dtype(value.dtype, "/".join(parts))
        elif isinstance(value, (Mapping, TensorDictBase)):
            check_dtypes(value, parts)


def write_all(
    dst: PersistentTensorDict,
    source: Mapping[str, Any] | TensorDictBase,
    batch_dims: int | None = None,
) -> None:
    """Write every entry of ``source`` into the (empty) group of ``dst``; nested dicts get
    their own inferred batch size, cut to ``batch_dims`` dims."""
    names = source._names if isinstance(source, TensorDictBase) else foreign_names(source)
    if names is not None and dst._path == () and len(names) == len(dst.batch_size):
        dst._names = list(names)
        dst._backend.set_attrs((), td_meta_attrs(dst.batch_size, names))
    if is_store(source):
        _copy_group(dst, dst._path, source)
        return
    items = (
        source.items()
        if isinstance(source, Mapping)
        else ((k, source._get_str(k)) for k in source._keys_str())
    )
    for key, value in items:
        # tensordict's NonTensorData/NonTensorStack, stored as tensordict stores them
        value = adopt_non_tensor(value, collapse=True)
        if isinstance(value, Mapping) and not isinstance(value, TensorDictBase):
            sub_bs = foreign_batch_size(value)  # a tensordict.TensorDict keeps its own
            if sub_bs is None:
                sub_bs = _infer_dict(value, batch_dims)
            bs = sub_bs if sub_bs is not None and fits(sub_bs, dst.batch_size) else dst.batch_size
            sub_names = foreign_names(value)
            if sub_names is not None and len(sub_names) != len(bs):
                sub_names = None
            parts = (key,) if isinstance(key, str) else tuple(key)
            node, last = dst._walk(parts, create=True)
            node._backend.create_group(node._path + (last,), td_meta_attrs(bs, sub_names))
            node._tree.invalidate(node._path + (last,))
            node._tree.set_group_batch(node._path + (last,), bs)
            write_all(node._get_str(last), value, batch_dims)
            continue
        dst.set(key, value)


def write_value(dst: PersistentTensorDict, path: Path, value: Any) -> None:
    """Create the entry ``path`` of ``dst``'s store holding ``value`` (already validated)."""
    be = dst._backend
    key = "/".join(path)
    options = dst._store.dataset_kwargs
    if isinstance(value, torch.Tensor):
        arr, attrs = to_storage(value, key)
        chunks = batch_chunks(be.policy, arr.shape, arr.dtype.itemsize, options, dst.batch_dims)
        be.create_array(
            path,
            shape=arr.shape,
            dtype=arr.dtype,
            data=arr,
            attrs=attrs,
            chunks=chunks,
            options=options,
        )
    elif isinstance(value, NonTensorData):
        be.write_non_tensor(path, value.data, stack_shape=None, options=options)
    elif isinstance(value, NonTensorStack):
        be.write_non_tensor(
            path, value.tolist(), stack_shape=tuple(value.batch_size), options=options
        )
    elif isinstance(value, TensorDictBase):
        be.create_group(path, td_meta_attrs(value.batch_size, value._names))
        dst._tree.invalidate(path)
        dst._tree.set_group_batch(path, value.batch_size)
        node = dst._nested_view(path[-1]) if path[:-1] == dst._path else None
        if node is None:
            raise BatchSizeError(f"cannot create nested group {key!r} outside of {dst._location()}")
        if is_store(value):
            _copy_group(node, path, value)
        else:
            for k in value._keys_str():
                node.set(k, value._get_str(k))  # a key holding '/' nests, as at the top level
        return
    else:  # pragma: no cover - _convert never hands anything else
        raise TypeError(f"cannot store {type(value).__name__} at {key!r}")
    dst._tree.invalidate(path)


def _copy_group(dst: PersistentTensorDict, path: Path, src: PersistentTensorDict) -> None:
    """Stream every entry of ``src`` into the existing group ``path`` of ``dst``'s store."""
    be = dst._backend
    for key in src._keys_str():
        meta = src._meta_str(key)
        target = path + (key,)
        if meta.kind == "nested":
            sub = src._get_str(key)
            be.create_group(target, td_meta_attrs(sub.batch_size))
            dst._tree.invalidate(target)
            dst._tree.set_group_batch(target, sub.batch_size)
            _copy_group(dst, target, sub)
        elif meta.kind == "tensor":
            copy_leaf(src, key, be, target, dst._store.dataset_kwargs)
            dst._tree.invalidate(target)
        else:
            value = src._get_str(key)
            if isinstance(value, NonTensorStack):
                be.write_non_tensor(
                    target,
                    value.tolist(),
                    stack_shape=tuple(value.batch_size),
                    options=dst._store.dataset_kwargs,
                )
            else:
                be.write_non_tensor(
                    target, value.data, stack_shape=None, options=dst._store.dataset_kwargs
                )
            dst._tree.invalidate(target)


def copy_leaf(
    src: PersistentTensorDict,
    key: str,
    dst_backend: Any,
    dst_path: Path,
    options: Mapping[str, Any] | None = None,
    chunks: Sequence[int] | None = None,
    progress: Any = None,
) -> int:
    """Copy the tensor leaf ``key`` of ``src`` (a store or a view of one) slab by slab.

    Returns the number of bytes copied. ``progress`` (if given) is called with each slab's
    byte count.
    """
    meta = src._meta_str(key)
    assert meta.dtype is not None
    np_dtype, attrs = storage_dtype(meta.dtype, key)
    shape = tuple(meta.shape)
    src_meta = src._tree.meta(src._path + (key,))
    if chunks is None:
        chunks = batch_chunks(
            dst_backend.policy, shape, np_dtype.itemsize, options, src.batch_dims, src_meta.chunks
        )
    dst_backend.create_array(
        dst_path, shape=shape, dtype=np_dtype, attrs=attrs, chunks=chunks, options=options
    )
    total = int(np.prod(shape, dtype=np.int64)) * np_dtype.itemsize
    if total == 0:
        return 0
    if not src.batch_size or len(shape) == 0:
        arr, _ = to_storage(src._get_str(key), key)
        dst_backend.write(dst_path, (), arr)
        if progress:
            progress(total)
        return total
    src_chunks = src_meta.chunks if src._entries is None else None
    rows = slab_rows(
        shape,
        np_dtype.itemsize,
        src_chunk_rows=src_chunks[0] if src_chunks else None,
        dst_chunk_rows=chunks[0] if chunks else None,
    )
    n = shape[0]
    done = 0
    path = src._path + (key,)
    for start in range(0, n, rows):
        sl = slice(start, min(n, start + rows))
        view = src._index(sl)
        t = view._read_leaf(path, src_meta)
        arr, _ = to_storage(t, key)
        dst_backend.write(dst_path, (sl,), arr)
        done += arr.nbytes
        if progress:
            progress(arr.nbytes)
    return done


def warn_replace(key: str, where: str) -> None:
    """tensordict's warning when ``set`` replaces a stored entry (delete and create)."""
    warnings.warn(
        f"Replacing an array with another one is inefficient (key {key!r} in {where}). "
        "Consider using different names or populating in-place using `inplace=True`.",
        UserWarning,
        stacklevel=user_stacklevel(),
    )
