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

from ptd.core.keys import NestedKey, unravel_key
from ptd.core.nontensor import NonTensorData, NonTensorStack
from ptd.core.registry import is_tensordict, lookup
from ptd.errors import PtdTypeError, UnsupportedOperationError

if TYPE_CHECKING:
    from ptd.core.base import TensorDictBase

__all__ = ["ConversionsMixin"]

_MISSING: Any = object()


def _td(obj: object) -> TensorDictBase:
    """A mixin's ``self``: the TensorDictBase it is mixed into."""
    return cast("TensorDictBase", obj)


def _cast(dtype: torch.dtype) -> Callable[[Any], TensorDictBase]:
    def method(self: Any) -> TensorDictBase:
        return _td(self).to(dtype)

    method.__doc__ = f"Every tensor leaf cast to ``{dtype}``."
    return method


class ConversionsMixin:
    """Conversions to other containers and facts read from metadata."""

    # ------------------------------------------------------------ facts
    def ndimension(self) -> int:
        """The number of batch dims."""
        return _td(self).batch_dims

    def entry_class(self, key: NestedKey) -> builtins.type:
        """The class of the entry ``key`` (``torch.Tensor``, a tensordict class, or a
        non-tensor class), known without reading data for a tensor."""
        td = _td(self)
        meta = td.leaf_meta(key)
        if meta.kind == "tensor":
            return torch.Tensor
        if meta.kind == "non_tensor":
            return NonTensorStack if meta.non_tensor == "NonTensorStack" else NonTensorData
        return builtins.type(td.get(unravel_key(key)))

    def get_item_shape(self, key: NestedKey) -> torch.Size:
        """The shape of the entry ``key`` (a nested tensordict's batch size)."""
        return _td(self).leaf_meta(key).shape

    @property
    def dtype(self) -> torch.dtype | None:
        """The dtype every tensor leaf has, or None when they differ (or there is none)."""
        dtypes = {m.dtype for _, m in _td(self)._metas(True) if m.kind == "tensor"}
        return dtypes.pop() if len(dtypes) == 1 else None

    @property
    def depth(self) -> int:
        """How deep the nesting goes: 0 when no entry is nested."""
        return max((len(p) - 1 for p, _ in _td(self)._metas(True)), default=0)

    def bytes(self, *, count_duplicates: bool = True) -> int:
        """The bytes of all tensor leaves (from metadata: nothing is read)."""
        return sum(
            int(np.prod(m.shape, dtype=np.int64)) * _itemsize(m.dtype)
            for _, m in _td(self)._metas(True)
            if m.kind == "tensor"
        )

    def param_count(self, *, count_duplicates: bool = True) -> int:
        """The number of elements of all tensor leaves."""
        return sum(
            int(np.prod(m.shape, dtype=np.int64))
            for _, m in _td(self)._metas(True)
            if m.kind == "tensor"
        )

    @property
    def sorted_keys(self) -> list[NestedKey]:
        """The direct keys, sorted."""
        return sorted(_td(self)._keys_str())

    def non_tensor_items(self, include_nested: bool = False) -> tuple[tuple[NestedKey, Any], ...]:
        """(key, NonTensorData/NonTensorStack) for every non-tensor entry."""
        td = _td(self)
        return tuple(
            (k, td.get(p))
            for p, m in td._metas(include_nested)
            if m.kind == "non_tensor"
            for k in [p[0] if len(p) == 1 else p]
        )

    def is_floating_point(self) -> bool:
        """True when every tensor leaf has a floating dtype."""
        return all(
            m.dtype is not None and m.dtype.is_floating_point
            for _, m in _td(self)._metas(True)
            if m.kind == "tensor"
        )

    def is_non_tensor(self, key: NestedKey) -> bool:
        """True when the entry ``key`` is non-tensor data (KeyError when missing)."""
        return _td(self).leaf_meta(key).kind == "non_tensor"

    def get_non_tensor(self, key: NestedKey, default: Any = _MISSING) -> Any:
        """The content of the non-tensor entry ``key`` (a list for a stack); another entry is
        returned as it is; a missing key returns ``default`` or raises KeyError."""
        td = _td(self)
        value = td._get_strict(key) if default is _MISSING else td.get(key, default)
        if isinstance(value, NonTensorData):
            return value.data
        if isinstance(value, NonTensorStack):
            return value.tolist()
        return value

    # ------------------------------------------------------------ tensordict -> tensordict
    @property
    def data(self) -> TensorDictBase:
        """The leaves' ``.data`` (detached, sharing storage for an in-memory tensordict; a
        copy in memory for a file-backed one)."""
        return _td(self).apply(lambda t: t.data)

    def as_tensor(self) -> TensorDictBase:
        """Every leaf as a plain ``torch.Tensor`` (subclasses such as memory maps dropped)."""
        return _td(self).apply(
            lambda t: t if builtins.type(t) is torch.Tensor else t.as_subclass(torch.Tensor)
        )

    def filter_non_tensor_data(self) -> TensorDictBase:
        """A copy without the non-tensor entries (nested ones included)."""
        return _td(self).apply(lambda t: t, batch_size=None)._drop_non_tensor()

    def _drop_non_tensor(self) -> TensorDictBase:
        td = _td(self)
        for key in list(td._keys_str()):
            meta = td._meta_str(key)
            if meta.kind == "non_tensor":
                td._del_str(key)
            elif meta.kind == "nested":
                td._get_str(key)._drop_non_tensor()
        return td

    @property
    def is_cpu(self) -> bool:
        """Whether the tensordict has a CPU device (False when it has no device)."""
        device = _td(self).device
        return device is not None and device.type == "cpu"

    @property
    def is_cuda(self) -> bool:
        """Whether the tensordict has a CUDA device (False when it has no device)."""
        device = _td(self).device
        return device is not None and device.type == "cuda"

    @property
    def is_meta(self) -> bool:
        """Whether the tensordict has a meta device (False when it has no device)."""
        device = _td(self).device
        return device is not None and device.type == "meta"

    def is_contiguous(self) -> bool:
        """True when every leaf is contiguous; a file-backed tensordict, whose leaves are
        made when read, says False (as tensordict)."""
        td = _td(self)
        if td._reads_copy():
            return False
        return all(t.is_contiguous() for _, t in td._tensor_leaves())

    # ------------------------------------------------------------ to other containers
    def cat_from_tensordict(
        self, dim: int = 0, *, sorted: Any = None, out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``torch.cat`` of every tensor leaf (in key order, sorted order, or the order of
        the list ``sorted``)."""
        return torch.cat(self._leaves_in_order(sorted), dim, out=out)

    def stack_from_tensordict(
        self, dim: int = 0, *, sorted: Any = None, out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``torch.stack`` of every tensor leaf (they must have one shape)."""
        return torch.stack(self._leaves_in_order(sorted), dim, out=out)

    def _leaves_in_order(self, order: Any) -> list[torch.Tensor]:
        td = _td(self)
        if order in (None, False):
            return list(td.values(True, True))
        if order is True:
            return list(td.values(True, True, sort=True))
        keys = [unravel_key(k) for k in order]
        if set(keys) != {unravel_key(k) for k in td.keys(True, True)}:
            raise UnsupportedOperationError(
                "The provided set of keys differs from the tensordict list of keys."
            )
        return [td.get(k) for k in keys]

    def to_h5(self, filename: Any, **kwargs: Any) -> TensorDictBase:
        """Write to a new HDF5 file; returns the PersistentTensorDict backed by it."""
        return lookup("PersistentTensorDict").from_dict(  # type: ignore[no-any-return, attr-defined]
            _td(self), filename, backend="h5", **kwargs
        )

    def to_zarr(
        self, filename: Any, *, allow_pickle: bool | None = None, **kwargs: Any
    ) -> TensorDictBase:
        """Write to a new zarr store; returns the PersistentTensorDict backed by it."""
        return lookup("PersistentTensorDict").from_dict(  # type: ignore[no-any-return, attr-defined]
            _td(self), filename, backend="zarr", allow_pickle=allow_pickle, **kwargs
        )

    def to_namedtuple(self, dest_cls: builtins.type | None = None) -> Any:
        """A namedtuple (nested ones for nested tensordicts) of the entries."""
        return _dict_to_namedtuple(_td(self).to_dict(retain_none=False), dest_cls)

    def to_struct_array(self) -> np.ndarray:
        """A numpy structured array of the batch shape, one field per entry (feature dims as
        sub-array shapes, nested tensordicts as nested fields)."""
        td = _td(self)
        fields, values = [], []
        for key in td._keys_str():
            value = td._get_str(key)
            if is_tensordict(value):
                arr = value.to_struct_array()
                if arr.shape != tuple(td.batch_size):
                    arr = arr.reshape(tuple(td.batch_size) + arr.shape[td.ndim :])
            elif isinstance(value, torch.Tensor):
                arr = value.detach().cpu().numpy()
            elif isinstance(value, NonTensorData):
                arr = np.full(tuple(td.batch_size), value.data)
            else:
                arr = np.array(value.tolist())
            feature = arr.shape[td.ndim :]
            dt = arr.dtype
            if dt.kind in "US":
                dt = np.dtype(f"{dt.kind}{max(10, dt.itemsize // (4 if dt.kind == 'U' else 1))}")
            fields.append((key, dt, feature) if feature else (key, dt))
            values.append(arr)
        out = np.empty(tuple(td.batch_size), dtype=fields)
        for (name, *_), arr in zip(fields, values, strict=True):
            out[name] = arr
        return out

    def to_pytree(self) -> Any:
        """The nested dicts/lists/tuples :meth:`from_pytree` was given (this tensordict when
        it was not made by ``from_pytree``)."""
        td = _td(self)
        if "_pytree_type" not in td._keys_str():
            return td
        kind = td._get_str("_pytree_type").data
        items = {
            k: (
                v.to_pytree() if is_tensordict(v) else v.data if isinstance(v, NonTensorData) else v
            )
            for k in td._keys_str()
            if k != "_pytree_type"
            for v in [td._get_str(k)]
        }
        if issubclass(kind, tuple) and hasattr(kind, "_fields"):
            return kind(**items)
        if issubclass(kind, (list, tuple)):
            return kind([items[str(i)] for i in range(len(items))])
        return kind(items)

    def tolist(
        self,
        *,
        convert_nodes: bool = True,
        convert_tensors: bool = False,
        tolist_first: bool = False,
        as_linked_list: bool = False,
    ) -> Any:
        """Nested lists (one level per batch dim) of dicts (or tensordicts when not
        ``convert_nodes``); ``convert_tensors`` turns the tensors into python values."""
        td = _td(self)
        if convert_tensors and not convert_nodes:
            raise PtdTypeError("convert_tensors requires convert_nodes to be set to True")
        if as_linked_list:
            raise PtdTypeError("tolist(as_linked_list=True) is not supported by ptd")
        if not td.batch_dims:
            return td.to_dict(convert_tensors=convert_tensors) if convert_nodes else td

        def rows(sub: TensorDictBase) -> list[Any]:
            parts = sub.unbind(0)
            if sub.ndim == 1:
                return [
                    p.to_dict(convert_tensors=convert_tensors) if convert_nodes else p
                    for p in parts
                ]
            return [rows(p) for p in parts]

        return rows(td)

    def type(self, dst_type: torch.dtype, *, cast_filter: Callable[..., bool] | None = None) -> Any:
        """Every tensor leaf cast with ``Tensor.type(dst_type)`` (only the leaves for which
        ``cast_filter(key, leaf)`` is true, when given)."""
        td = _td(self)
        if cast_filter is None:
            return td.apply(lambda t: t.type(dst_type))
        out = td.to_tensordict() if td._reads_copy() else td.copy()
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
    cls = dest_cls or collections.namedtuple("GenericDict", list(values))  # type: ignore[misc]
    return cls(**values)
