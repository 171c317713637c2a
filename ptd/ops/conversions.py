"""Conversions and facts about a tensordict: ``to_namedtuple``, ``to_struct_array``,
``to_pytree``, ``tolist``, ``as_tensor``, ``type``, ``data``, the dtype casts
(``float32()``...), ``dtype``, ``depth``, ``bytes``, ``entry_class``... as tensordict 0.15 has
them.

Sizes (``bytes``, ``param_count``, ``get_item_shape``, ``dtype``) come from entry metadata, so
on a PersistentTensorDict they read no data. Conversions return in-memory objects.

>>> import torch
>>> from ptd import TensorDict
>>> td = TensorDict({"a": torch.zeros(3, 2), "n": {"b": torch.ones(3)}}, batch_size=[3])
>>> td.to_namedtuple().n.b
tensor([1., 1., 1.])
>>> td.dtype, td.depth, td.bytes()
(torch.float32, 1, 36)
>>> td.to_struct_array().dtype
dtype([('a', '<f4', (2,)), ('n', [('b', '<f4')])])
"""

from __future__ import annotations

import builtins
import collections
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from ptd.errors import PtdTypeError, UnsupportedOperationError
from ptd.ops import apply as apply_ops
from ptd.ops.keys import NestedKey, unravel_key
from ptd.ops.nontensor import NonTensorData, NonTensorStack
from ptd.ops.root import is_tensordict

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase

__all__: list[str] = []

_MISSING: Any = object()


def _cast(dtype: torch.dtype) -> Callable[[Any], TensorDictBase]:
    def method(td: TensorDictBase) -> TensorDictBase:
        return td.to(dtype)

    method.__doc__ = f"Every tensor leaf cast to ``{dtype}``."
    return method


# ------------------------------------------------------------ facts
def ndimension(td: TensorDictBase) -> int:
    """The number of batch dims."""
    return td.batch_dims


def entry_class(td: TensorDictBase, key: NestedKey) -> builtins.type:
    """The class of the entry ``key`` (``torch.Tensor``, a tensordict class, or a
    non-tensor class), known without reading data for a tensor."""
    sub = td
    meta = sub.leaf_meta(key)
    if meta.kind == "tensor":
        return torch.Tensor
    if meta.kind == "non_tensor":
        return NonTensorStack if meta.non_tensor == "NonTensorStack" else NonTensorData
    return builtins.type(sub.get(unravel_key(key)))


def get_item_shape(td: TensorDictBase, key: NestedKey) -> torch.Size:
    """The shape of the entry ``key`` (a nested tensordict's batch size)."""
    return td.leaf_meta(key).shape


def dtype(td: TensorDictBase) -> torch.dtype | None:
    """The dtype every tensor leaf has, or None when they differ (or there is none)."""
    dtypes = {m.dtype for _, m in td._metas(True) if m.kind == "tensor"}
    return dtypes.pop() if len(dtypes) == 1 else None


def depth(td: TensorDictBase) -> int:
    """How deep the nesting goes: 0 when no entry is nested."""
    return max((len(p) - 1 for p, _ in td._metas(True)), default=0)


def bytes(td: TensorDictBase, *, count_duplicates: bool = True) -> int:
    """The bytes of all tensor leaves (from metadata: nothing is read)."""
    return sum(
        int(np.prod(m.shape, dtype=np.int64)) * _itemsize(m.dtype)
        for _, m in td._metas(True)
        if m.kind == "tensor"
    )


def param_count(td: TensorDictBase, *, count_duplicates: bool = True) -> int:
    """The number of elements of all tensor leaves."""
    return sum(
        int(np.prod(m.shape, dtype=np.int64)) for _, m in td._metas(True) if m.kind == "tensor"
    )


def sorted_keys(td: TensorDictBase) -> list[NestedKey]:
    """The direct keys, sorted."""
    return sorted(td._keys_str())


def non_tensor_items(
    td: TensorDictBase, include_nested: bool = False
) -> tuple[tuple[NestedKey, Any], ...]:
    """(key, NonTensorData/NonTensorStack) for every non-tensor entry."""
    sub = td
    return tuple(
        (k, sub.get(p))
        for p, m in sub._metas(include_nested)
        if m.kind == "non_tensor"
        for k in [p[0] if len(p) == 1 else p]
    )


def is_floating_point(td: TensorDictBase) -> bool:
    """True when every tensor leaf has a floating dtype."""
    return all(
        m.dtype is not None and m.dtype.is_floating_point
        for _, m in td._metas(True)
        if m.kind == "tensor"
    )


def is_non_tensor(td: TensorDictBase, key: NestedKey) -> bool:
    """True when the entry ``key`` is non-tensor data (KeyError when missing)."""
    return td.leaf_meta(key).kind == "non_tensor"


def get_non_tensor(td: TensorDictBase, key: NestedKey, default: Any = _MISSING) -> Any:
    """The content of the non-tensor entry ``key`` (a list for a stack); another entry is
    returned as it is; a missing key returns ``default`` or raises KeyError."""
    sub = td
    value = sub._get_strict(key) if default is _MISSING else sub.get(key, default)
    if isinstance(value, NonTensorData):
        return value.data
    if isinstance(value, NonTensorStack):
        return value.tolist()
    return value


# ------------------------------------------------------------ tensordict -> tensordict
def data(td: TensorDictBase) -> TensorDictBase:
    """The leaves' ``.data`` (detached, sharing storage for an in-memory tensordict; a
    copy in memory for a file-backed one)."""
    return cast("TensorDictBase", td.apply(lambda t: t.data))


def as_tensor(td: TensorDictBase) -> TensorDictBase:
    """Every leaf as a plain ``torch.Tensor`` (subclasses such as memory maps dropped)."""
    return cast(
        "TensorDictBase",
        td.apply(lambda t: t if builtins.type(t) is torch.Tensor else t.as_subclass(torch.Tensor)),
    )


def filter_non_tensor_data(td: TensorDictBase) -> TensorDictBase:
    """A copy without the non-tensor entries (nested ones included)."""
    return _drop_non_tensor(td.apply(lambda t: t, batch_size=None))


def _drop_non_tensor(td: TensorDictBase) -> TensorDictBase:
    sub = td
    for key in list(sub._keys_str()):
        meta = sub._meta_str(key)
        if meta.kind == "non_tensor":
            sub._del_str(key)
        elif meta.kind == "nested":
            _drop_non_tensor(sub._get_str(key))
    return sub


def is_cpu(td: TensorDictBase) -> bool:
    """Whether the tensordict has a CPU device (False when it has no device)."""
    device = td.device
    return device is not None and device.type == "cpu"


def is_cuda(td: TensorDictBase) -> bool:
    """Whether the tensordict has a CUDA device (False when it has no device)."""
    device = td.device
    return device is not None and device.type == "cuda"


def is_meta(td: TensorDictBase) -> bool:
    """Whether the tensordict has a meta device (False when it has no device)."""
    device = td.device
    return device is not None and device.type == "meta"


def is_contiguous(td: TensorDictBase) -> bool:
    """True when every leaf is contiguous; a file-backed tensordict, whose leaves are
    made when read, says False (as tensordict)."""
    sub = td
    if sub._leaves.reads_copy:
        return False
    return all(
        t.is_contiguous()
        for _, t in apply_ops._tensor_leaves(
            sub,
        )
    )


# ------------------------------------------------------------ to other containers
def cat_from_tensordict(
    td: TensorDictBase, dim: int = 0, *, sorted: Any = None, out: torch.Tensor | None = None
) -> torch.Tensor:
    """``torch.cat`` of every tensor leaf (in key order, sorted order, or the order of
    the list ``sorted``)."""
    return torch.cat(_leaves_in_order(td, sorted), dim, out=out)


def stack_from_tensordict(
    td: TensorDictBase, dim: int = 0, *, sorted: Any = None, out: torch.Tensor | None = None
) -> torch.Tensor:
    """``torch.stack`` of every tensor leaf (they must have one shape)."""
    return torch.stack(_leaves_in_order(td, sorted), dim, out=out)


def _leaves_in_order(td: TensorDictBase, order: Any) -> list[torch.Tensor]:
    sub = td
    if order in (None, False):
        return list(sub.values(True, True))
    if order is True:
        return list(sub.values(True, True, sort=True))
    keys = [unravel_key(k) for k in order]
    if set(keys) != {unravel_key(k) for k in sub.keys(True, True)}:
        raise UnsupportedOperationError(
            "The provided set of keys differs from the tensordict list of keys."
        )
    return [sub.get(k) for k in keys]


def to_h5(td: TensorDictBase, filename: Any, **kwargs: Any) -> TensorDictBase:
    """Write to a new HDF5 file; returns the PersistentTensorDict backed by it."""
    return td._io.write_store(td, filename, backend="h5", **kwargs)


def to_zarr(
    td: TensorDictBase, filename: Any, *, allow_pickle: bool | None = None, **kwargs: Any
) -> TensorDictBase:
    """Write to a new zarr store; returns the PersistentTensorDict backed by it."""
    return td._io.write_store(td, filename, backend="zarr", allow_pickle=allow_pickle, **kwargs)


def to_namedtuple(td: TensorDictBase, dest_cls: builtins.type | None = None) -> Any:
    """A namedtuple (nested ones for nested tensordicts) of the entries."""
    return _dict_to_namedtuple(td.to_dict(retain_none=False), dest_cls)


def to_struct_array(td: TensorDictBase) -> np.ndarray:
    """A numpy structured array of the batch shape, one field per entry (feature dims as
    sub-array shapes, nested tensordicts as nested fields)."""
    node = td
    fields, values = [], []
    for key in node._keys_str():
        value = node._get_str(key)
        if is_tensordict(value):
            arr = value.to_struct_array()
            if arr.shape != tuple(node.batch_size):
                arr = arr.reshape(tuple(node.batch_size) + arr.shape[node.ndim :])
        elif isinstance(value, torch.Tensor):
            arr = value.detach().cpu().numpy()
        elif isinstance(value, NonTensorData):
            arr = np.full(tuple(node.batch_size), value.data)
        else:
            arr = np.array(value.tolist())
        feature = arr.shape[node.ndim :]
        dt = arr.dtype
        if dt.kind in "US":
            dt = np.dtype(f"{dt.kind}{max(10, dt.itemsize // (4 if dt.kind == 'U' else 1))}")
        fields.append((key, dt, feature) if feature else (key, dt))
        values.append(arr)
    out = np.empty(tuple(node.batch_size), dtype=fields)
    for (name, *_), arr in zip(fields, values, strict=True):
        out[name] = arr
    return out


def to_pytree(td: TensorDictBase) -> Any:
    """The nested dicts/lists/tuples :meth:`from_pytree` was given (this tensordict when
    it was not made by ``from_pytree``)."""
    sub = td
    if "_pytree_type" not in sub._keys_str():
        return sub
    kind = sub._get_str("_pytree_type").data
    items = {
        k: (v.to_pytree() if is_tensordict(v) else v.data if isinstance(v, NonTensorData) else v)
        for k in sub._keys_str()
        if k != "_pytree_type"
        for v in [sub._get_str(k)]
    }
    if issubclass(kind, tuple) and hasattr(kind, "_fields"):
        return kind(**items)
    if issubclass(kind, (list, tuple)):
        return kind([items[str(i)] for i in range(len(items))])
    return kind(items)


def tolist(
    td: TensorDictBase,
    *,
    convert_nodes: bool = True,
    convert_tensors: bool = False,
    tolist_first: bool = False,
    as_linked_list: bool = False,
) -> Any:
    """Nested lists (one level per batch dim) of dicts (or tensordicts when not
    ``convert_nodes``); ``convert_tensors`` turns the tensors into python values."""
    node = td
    if convert_tensors and not convert_nodes:
        raise PtdTypeError("convert_tensors requires convert_nodes to be set to True")
    if as_linked_list:
        raise PtdTypeError("tolist(as_linked_list=True) is not supported by ptd")
    if not node.batch_dims:
        return node.to_dict(convert_tensors=convert_tensors) if convert_nodes else node

    def rows(sub: TensorDictBase) -> list[Any]:
        parts = sub.unbind(0)
        if sub.ndim == 1:
            return [
                p.to_dict(convert_tensors=convert_tensors) if convert_nodes else p for p in parts
            ]
        return [rows(p) for p in parts]

    return rows(node)


def type(
    td: TensorDictBase, dst_type: torch.dtype, *, cast_filter: Callable[..., bool] | None = None
) -> Any:
    """Every tensor leaf cast with ``Tensor.type(dst_type)`` (only the leaves for which
    ``cast_filter(key, leaf)`` is true, when given)."""
    sub = td
    if cast_filter is None:
        return sub.apply(lambda t: t.type(dst_type))
    out = sub.to_tensordict() if sub._leaves.reads_copy else sub.copy()
    for key in list(out.keys(True, True)):
        leaf = out.get(key)
        if cast_filter(key, leaf):
            out.set(key, leaf.type(dst_type))
    return out


float16 = _cast(torch.float16)


float32 = _cast(torch.float32)


float64 = _cast(torch.float64)


int8 = _cast(torch.int8)


int16 = _cast(torch.int16)


int32 = _cast(torch.int32)


int64 = _cast(torch.int64)


uint8 = _cast(torch.uint8)


uint16 = _cast(torch.uint16)


uint32 = _cast(torch.uint32)


uint64 = _cast(torch.uint64)


complex32 = _cast(torch.complex32)


complex64 = _cast(torch.complex64)


complex128 = _cast(torch.complex128)


def _itemsize(dtype: torch.dtype | None) -> int:
    if dtype is None:
        return 0
    return int(torch.empty((), dtype=dtype).element_size())


def _dict_to_namedtuple(d: dict[str, Any], dest_cls: builtins.type | None) -> Any:
    values = {k: _dict_to_namedtuple(v, None) if isinstance(v, dict) else v for k, v in d.items()}
    cls = dest_cls or collections.namedtuple("GenericDict", list(values))
    return cls(**values)
