"""The container methods, written once for every tensordict.

:class:`TensorDictBase` implements keys, get/set/del, update, nested keys, iteration, apply,
conversions and the repr in terms of a handful of primitives that a subclass provides:

========================  =====================================================================
``batch_size``/``device`` properties
``_keys_str()``           names of the direct children, in order
``_meta_str(key)``        :class:`EntryMeta` of a child, without reading data
``_get_str(key)``         a child: tensor, nested container, NonTensorData or NonTensorStack
``_set_str(key, v, inplace)``  store a validated value (replace, or write into the existing one)
``_del_str(key)``         delete a child
``_new_nested(key)``      create an empty nested container with this batch size
``_index(index)``         the container indexed along its batch dims
``_set_at(index, value)`` write a value into the rows selected by ``index``
========================  =====================================================================

Arithmetic, comparisons, reductions and shape operations live in :mod:`ptd.core.ops`; apply,
conversions and key selection in :mod:`ptd.core.transforms`; key helpers in :mod:`ptd.core.keys`.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ptd.core.attrs import AttrsMixin
from ptd.core.autograd import AutogradMixin
from ptd.core.batch import fits
from ptd.core.checks import ChecksMixin
from ptd.core.construct import ConstructMixin
from ptd.core.conversions import ConversionsMixin
from ptd.core.devices import DevicesMixin
from ptd.core.dtypes import dtype_abbrev
from ptd.core.factories import FromMixin
from ptd.core.foreign import LEAF_PROBE, adopt_non_tensor, foreign_batch_size
from ptd.core.indexing import is_key_index
from ptd.core.keymoves import KeyMovesMixin
from ptd.core.keys import KeysView, NestedKey, out_key, unravel_key
from ptd.core.memmap_api import MemmapMixin
from ptd.core.nontensor import NonTensorData, NonTensorStack
from ptd.core.ops import OpsMixin, ShapeMixin
from ptd.core.packing import PackMixin
from ptd.core.pointwise import PointwiseMixin
from ptd.core.reductions import ReductionsMixin
from ptd.core.registry import TensorDictRoot, new_tensordict
from ptd.core.statedict import StateDictMixin
from ptd.core.tdhooks import REQUIRED, TensordictHooksMixin
from ptd.core.torch_functions import TorchFunctionMixin
from ptd.core.transforms import _NO_DEFAULT, TransformsMixin, pick_operand
from ptd.errors import (
    BatchSizeError,
    ClosedStoreError,
    InvalidKeyError,
    KeyTypeError,
    NotNestedError,
    PtdKeyError,
    PtdTypeError,
    UnsupportedOperationError,
)

__all__ = [
    "TensorDictBase",
    "EntryMeta",
    "NestedKey",
    "unravel_key",
    "is_leaf_nontensor",
    "pick_operand",
]


@dataclass(frozen=True)
class EntryMeta:
    """What a child is, known without reading its data."""

    kind: str  #: "tensor", "nested" or "non_tensor"
    #: full shape of a tensor; batch size of a nested container; stack shape of a non-tensor
    shape: torch.Size
    dtype: torch.dtype | None = None
    #: for non-tensors: "NonTensorData" or "NonTensorStack"
    non_tensor: str | None = None


class TensorDictBase(
    ReductionsMixin,
    PointwiseMixin,
    TransformsMixin,
    OpsMixin,
    ShapeMixin,
    TorchFunctionMixin,
    TensordictHooksMixin,
    ConstructMixin,
    ConversionsMixin,
    DevicesMixin,
    KeyMovesMixin,
    AttrsMixin,
    PackMixin,
    FromMixin,
    StateDictMixin,
    MemmapMixin,
    AutogradMixin,
    ChecksMixin,
    TensorDictRoot,
):
    """Shared behaviour of :class:`ptd.TensorDict` and :class:`ptd.PersistentTensorDict`."""

    _is_locked: bool = False
    _names: list[str | None] | None = None
    #: whether ``td[key] = value`` writes into an existing entry (file-backed) or replaces it
    _setitem_inplace: bool = False
    #: whether a foreign NonTensorStack of equal elements is set as one NonTensorData
    _collapse_foreign_stacks: bool = False

    # ------------------------------------------------------------------ primitives
    @property
    def batch_size(self) -> torch.Size:
        raise NotImplementedError

    @property
    def device(self) -> torch.device | None:
        raise NotImplementedError

    def _keys_str(self) -> list[str]:
        raise NotImplementedError

    def _meta_str(self, key: str) -> EntryMeta:
        raise NotImplementedError

    def _get_str(self, key: str, default: Any = REQUIRED, **_: Any) -> Any:
        """A direct child; ``default`` (when given) for a missing key, as tensordict's
        private hook of the same name (see :mod:`ptd.core.tdhooks`)."""
        raise NotImplementedError

    def _set_str(self, key: str, value: Any, *, inplace: bool) -> None:
        raise NotImplementedError

    def _del_str(self, key: str) -> None:
        raise NotImplementedError

    def _new_nested(self, key: str) -> TensorDictBase:
        raise NotImplementedError

    def _index(self, index: Any) -> TensorDictBase:
        raise NotImplementedError

    def _set_at(self, index: Any, value: Any) -> None:
        raise NotImplementedError

    def _location(self) -> str:
        """Where the data lives, for error messages."""
        return type(self).__name__

    def _detached(self, value: TensorDictBase) -> TensorDictBase:
        """What an out-of-place operation returns for a derived container (a copy in memory
        for file-backed tensordicts)."""
        return value

    # ------------------------------------------------------------------ sizes
    @property
    def batch_dims(self) -> int:
        return len(self.batch_size)

    @property
    def ndim(self) -> int:
        return len(self.batch_size)

    @property
    def shape(self) -> torch.Size:
        return self.batch_size

    def numel(self) -> int:
        n = 1
        for d in self.batch_size:
            n *= d
        return n

    def __len__(self) -> int:
        return self.batch_size[0] if self.batch_size else 0

    def dim(self) -> int:
        return self.ndim

    def size(self, dim: int | None = None) -> torch.Size | int:
        return self.batch_size if dim is None else self.batch_size[dim]

    def is_empty(self) -> bool:
        """True when the tensordict holds no leaf (nested empty containers do not count)."""
        for _ in self.keys(True, True):
            return False
        return not any(m.kind == "non_tensor" for _, m in self._metas(True))

    # ------------------------------------------------------------------ key walking
    def _missing(self, key: NestedKey) -> PtdKeyError:
        return PtdKeyError(f"key {key!r} not found in {self._location()}")

    def _walk(self, parts: tuple[str, ...], *, create: bool = False) -> tuple[TensorDictBase, str]:
        """The container holding the last part of ``parts``, and that part."""
        node: TensorDictBase = self
        for i, part in enumerate(parts[:-1]):
            if part in node._keys_str():
                meta = node._meta_str(part)
                if meta.kind != "nested":
                    raise NotNestedError(
                        f"key {out_key(parts[: i + 1])!r} in {self._location()} is a "
                        f"{meta.kind.replace('_', '-')} entry, not a nested tensordict, so "
                        f"{out_key(parts)!r} cannot be reached"
                    )
                node = node._get_str(part)
            elif create:
                node._check_unlocked()
                node = node._new_nested(part)
            else:
                raise self._missing(out_key(parts))
        return node, parts[-1]

    def _has(self, parts: tuple[str, ...]) -> bool:
        try:
            node, last = self._walk(parts)
            return last in node._keys_str()
        except KeyError:
            return False

    # ------------------------------------------------------------------ read access
    def get(self, key: NestedKey, default: Any = None) -> Any:
        """The entry at ``key`` (tensor, nested tensordict, NonTensorData or NonTensorStack).

        A missing key gives ``default`` (None), as in tensordict 0.15; ``td[key]`` raises
        KeyError (also on a closed store).
        """
        parts = unravel_key(key)
        try:
            node, last = self._walk(parts)
            if last not in node._keys_str():
                raise self._missing(key)
            return node._get_str(last)
        except NotNestedError:
            raise
        except KeyError:
            return default

    def _get_strict(self, key: NestedKey) -> Any:
        """The entry at ``key``; KeyError when it is missing."""
        parts = unravel_key(key)
        try:
            node, last = self._walk(parts)
            if last not in node._keys_str():
                raise self._missing(key)
            return node._get_str(last)
        except ClosedStoreError:
            raise self._missing(key) from None

    def leaf_meta(self, key: NestedKey) -> EntryMeta:
        """Kind, shape and dtype of an entry, without reading its data."""
        parts = unravel_key(key)
        node, last = self._walk(parts)
        if last not in node._keys_str():
            raise self._missing(key)
        return node._meta_str(last)

    def __getitem__(self, index: Any) -> Any:
        if is_key_index(index):
            value = self._get_strict(index)
            if isinstance(value, NonTensorData):
                return value.data
            if isinstance(value, NonTensorStack):
                return value.tolist()
            return value
        if isinstance(index, list) and index and all(isinstance(k, str) for k in index):
            return self.select(*index)
        return self._index(index)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, (str, tuple)):
            raise KeyTypeError("key must be a NestedKey (a str or a possibly tuple of str).")
        try:
            parts = unravel_key(key)
        except InvalidKeyError:
            return False
        return self._has(parts)

    def __iter__(self) -> Iterator[TensorDictBase]:
        if not self.batch_size:
            raise PtdTypeError("iteration over a 0-d tensordict")
        for i in range(self.batch_size[0]):
            yield self._detached(self._index(i))

    # ------------------------------------------------------------------ keys / values / items
    def _metas(self, include_nested: bool) -> Iterator[tuple[tuple[str, ...], EntryMeta]]:
        for key in self._keys_str():
            meta = self._meta_str(key)
            if meta.kind == "nested" and include_nested:
                for sub, m in self._get_str(key)._metas(True):
                    yield (key,) + sub, m
            yield (key,), meta

    def keys(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Callable[[type], bool] | None = None,
        *,
        sort: bool = False,
    ) -> KeysView:
        """The keys; nested ones as tuples when ``include_nested``.

        ``leaves_only`` keeps tensor leaves only (pass ``is_leaf=ptd.is_leaf_nontensor`` to keep
        non-tensor entries too). ``sort`` sorts the result.
        """
        out: list[NestedKey] = []
        for parts, meta in self._metas(include_nested):
            if leaves_only:
                if meta.kind == "nested":
                    continue
                if meta.kind == "non_tensor" and not (is_leaf is not None and is_leaf(LEAF_PROBE)):
                    continue
            out.append(out_key(parts))
        if sort:
            out.sort(key=lambda k: k if isinstance(k, str) else ".".join(k))
        return KeysView(out)

    def values(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Any = None,
        *,
        sort: bool = False,
    ) -> Iterator[Any]:
        for key in self.keys(include_nested, leaves_only, is_leaf, sort=sort):
            yield self.get(key)

    def items(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Any = None,
        *,
        sort: bool = False,
    ) -> Iterator[tuple[NestedKey, Any]]:
        for key in self.keys(include_nested, leaves_only, is_leaf, sort=sort):
            yield key, self.get(key)

    # ------------------------------------------------------------------ write access
    def _convert(self, key: str, value: Any) -> Any:
        """Turn a user value into what the primitives store, and check its batch dims."""
        bs = self.batch_size
        # tensordict's NonTensorData/NonTensorStack
        value = adopt_non_tensor(value, collapse=self._collapse_foreign_stacks)
        if isinstance(value, TensorDictBase):
            if not fits(value.batch_size, bs):
                # as tensordict: a copy of it takes our batch size, when its entries fit
                # (a tensordict of batch size [] whose leaves start with ours)
                try:
                    return new_tensordict(dict(value.items()), batch_size=bs, device=value.device)
                except BatchSizeError:
                    raise BatchSizeError(
                        f"batch dimension mismatch, got self.batch_size={bs} and value.batch_size="
                        f"{value.batch_size} for key {key!r} in {self._location()}, whose entries "
                        "do not start with the batch size either. The leading dimensions of a "
                        "value must match the batch size."
                    ) from None
            return value
        if isinstance(value, Mapping):
            # a tensordict of another library keeps its own batch size when it extends ours;
            # a shorter one (``[]``) takes ours, as tensordict sets it, if its entries fit
            own = foreign_batch_size(value)
            sub_bs = own if own is not None and fits(own, bs) else bs
            return new_tensordict(dict(value.items()), batch_size=sub_bs, device=self.device)
        if isinstance(value, NonTensorData):
            return NonTensorData(value.data, bs, value.device)
        if isinstance(value, NonTensorStack):
            if not fits(value.batch_size, bs) and not fits(bs, value.batch_size):
                raise BatchSizeError(
                    f"batch dimension mismatch for key {key!r} in {self._location()}: the stack "
                    f"has shape {list(value.batch_size)}, the batch size is {list(bs)}"
                )
            return value
        if isinstance(value, (str, bytes)) or value is None:
            return NonTensorData(value, bs)
        if not isinstance(value, torch.Tensor):
            if isinstance(value, (numbers.Number, np.ndarray, np.generic, list, tuple)):
                try:
                    value = torch.as_tensor(value)
                except (TypeError, ValueError, RuntimeError):
                    return NonTensorData(value, bs)
                if value.dtype == torch.float64 and not isinstance(value, np.ndarray):
                    value = value.to(torch.get_default_dtype())
            else:
                return NonTensorData(value, bs)
        if not fits(value.shape, bs):
            hint = ""
            if value.ndim == 0:
                hint = " To write a scalar into every row, use td[:] = value or fill_()."
            raise BatchSizeError(
                f"batch dimension mismatch, got self.batch_size={bs} and value.shape="
                f"{value.shape} for key {key!r} in {self._location()}. The leading dimensions "
                f"of a value must match the batch size.{hint}"
            )
        if self.device is not None and value.device != self.device:
            value = value.to(self.device)
        return value

    def set(
        self, key: NestedKey, item: Any, inplace: bool = False, **kwargs: Any
    ) -> TensorDictBase:
        """Store ``item`` at ``key`` (creating nested levels); ``inplace`` writes into an
        existing entry of the same shape instead of replacing it.

        A locked tensordict refuses any ``set`` that is not an in-place write into an existing
        entry (RuntimeError, as tensordict): use ``set_`` or ``inplace=True``.
        """
        if "value" in kwargs:
            item = kwargs.pop("value")
        parts = unravel_key(key)
        node, last = self._walk(parts, create=True)
        exists = last in node._keys_str()
        if not (inplace and exists):
            node._check_unlocked()
        node._set_str(last, node._convert(last, item), inplace=inplace and exists)
        return self

    def __setitem__(self, index: Any, value: Any) -> None:
        if is_key_index(index):
            self.set(index, value, inplace=self._setitem_inplace)
            return
        self._set_at(index, value)

    def set_(self, key: NestedKey, value: Any) -> TensorDictBase:
        """Write ``value`` into the existing entry ``key`` (KeyError when it is missing)."""
        parts = unravel_key(key)
        if not self._has(parts):
            raise PtdKeyError(
                f'key "{key}" not found in {self._location()} with keys {sorted(map(str, self.keys()))}'
            )
        node, last = self._walk(parts)
        node._set_str(last, node._convert(last, value), inplace=True)
        return self

    def __delitem__(self, key: NestedKey) -> None:
        self.del_(key)

    def del_(self, key: NestedKey) -> TensorDictBase:
        parts = unravel_key(key)
        node, last = self._walk(parts)
        if last not in node._keys_str():
            raise self._missing(key)
        node._check_unlocked()
        node._del_str(last)
        return self

    def pop(self, key: NestedKey, default: Any = _NO_DEFAULT) -> Any:
        try:
            value = self._get_strict(key)
        except KeyError:
            if default is _NO_DEFAULT:
                raise
            return default
        if isinstance(value, TensorDictBase):
            value = self._detached(value)
        self.del_(key)
        return value

    def setdefault(self, key: NestedKey, default: Any) -> Any:
        if key not in self:
            self.set(key, default)
        return self.get(key)

    def rename_key_(
        self, old_key: NestedKey, new_key: NestedKey, safe: bool = False
    ) -> TensorDictBase:
        """Move an entry to a new key (the target is overwritten unless ``safe``)."""
        old, new = unravel_key(old_key), unravel_key(new_key)
        self._check_unlocked()
        if not self._has(old):
            raise PtdKeyError(f"key {old_key!r} not found in {self._location()}")
        if self._has(new):
            if safe:
                raise PtdKeyError(
                    f"key {new_key!r} already present in TensorDict ({self._location()})"
                )
            self.del_(new)
        self._rename(old, new)
        return self

    def _rename(self, old: tuple[str, ...], new: tuple[str, ...]) -> None:
        value = self.get(old)
        self.set(new, value)
        self.del_(old)

    def copy(self) -> TensorDictBase:
        return self.clone(recurse=False)

    def __copy__(self) -> TensorDictBase:
        """``copy.copy(td)``: :meth:`copy` (new containers, shared leaves)."""
        return self.copy()

    def __deepcopy__(self, memo: dict[int, Any]) -> TensorDictBase:
        """``copy.deepcopy(td)``: :meth:`clone` (a store: a copy in a new file)."""
        return self.clone()

    #: a mapping, not a sequence: ``reversed(td)`` raises TypeError, as for tensordict's
    __reversed__ = None

    def clone(self, recurse: bool = True, **kwargs: Any) -> TensorDictBase:
        return self.to_tensordict()

    # ------------------------------------------------------------------ repr
    def _repr_token(self, key: str, meta: EntryMeta) -> str:
        if meta.kind == "tensor":
            assert meta.dtype is not None
            return f"{dtype_abbrev(meta.dtype)}{list(meta.shape[self.ndim :])}".replace(" ", "")
        if meta.kind == "nested":
            sub = self._get_str(key)
            extra = list(sub.batch_size[self.ndim :])
            return f"{sub._nested_prefix()}{str(extra).replace(' ', '') if extra else ''}{sub._fields_repr()}"
        return self._non_tensor_token(key, meta)

    def _non_tensor_token(self, key: str, meta: EntryMeta) -> str:
        return meta.non_tensor or "NonTensorData"

    def _nested_prefix(self) -> str:
        return ""

    def _fields_repr(self) -> str:
        fields = sorted(f"{k}: {self._repr_token(k, self._meta_str(k))}" for k in self._keys_str())
        return "{" + ", ".join(fields) + "}"

    def __repr__(self) -> str:
        fields = sorted(f"{k}: {self._repr_token(k, self._meta_str(k))}" for k in self._keys_str())
        head = f"{type(self).__name__}(batch_size={list(self.batch_size)}".replace(" ", "")
        if self.device is not None:
            head += f", device={self.device}"
        one_line = head + ", fields={" + ", ".join(fields) + "})"
        if len(one_line) <= 80 or not fields:
            return one_line
        return head + ", fields={\n" + ",\n".join("    " + f for f in fields) + "})"

    def __bool__(self) -> bool:
        raise UnsupportedOperationError("Converting a tensordict to boolean value is not permitted")


def _iter_items(obj: Mapping[Any, Any] | TensorDictBase) -> Iterator[tuple[Any, Any]]:
    if isinstance(obj, TensorDictBase):
        for key in obj._keys_str():
            yield key, obj._get_str(key)
    else:
        yield from obj.items()


def is_leaf_nontensor(cls: type) -> bool:
    """Pass as ``is_leaf=`` to ``keys(leaves_only=True)`` to keep non-tensor entries."""
    return issubclass(cls, (NonTensorData, NonTensorStack)) or not issubclass(cls, TensorDictBase)
