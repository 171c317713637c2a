"""The base class of every container: the primitives, key walking, get/set, the repr, and one
table binding the method families of :mod:`ptd.ops`.

:class:`TensorDictBase` implements keys, get/set/del, nested keys, iteration and the repr in
terms of a handful of primitives that a subclass provides:

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

Every other method is a function of :mod:`ptd.ops` bound by the table at the end of the class
(``sum = reductions_ops.sum``): reductions in :mod:`ptd.ops.reductions`, arithmetic in
:mod:`ptd.ops.pointwise`, comparisons and casts in :mod:`ptd.ops.elementwise`, batch-shape ops in
:mod:`ptd.ops.shape`, apply and key selection in :mod:`ptd.ops.apply`, rows and entries in
:mod:`ptd.ops.entries`, and so on: the table's section headers name the module. How a subclass
reads and writes whole leaves is its ``_leaves`` strategy (:mod:`ptd.ops.leaf_access`).

>>> import torch
>>> from ptd import TensorDict
>>> from ptd.ops import reductions
>>> TensorDict.sum is reductions.sum and len(TensorDictBase.__mro__)
3
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

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
from ptd.ops import apply as apply_ops
from ptd.ops import attrs as attrs_ops
from ptd.ops import autograd as autograd_ops
from ptd.ops import checks as checks_ops
from ptd.ops import conversions as conversions_ops
from ptd.ops import devices as devices_ops
from ptd.ops import elementwise as elementwise_ops
from ptd.ops import entries as entries_ops
from ptd.ops import factories as factories_ops
from ptd.ops import joining as joining_ops
from ptd.ops import keymoves as keymoves_ops
from ptd.ops import lastop as lastop_ops
from ptd.ops import locking as locking_ops
from ptd.ops import memmap as memmap_ops
from ptd.ops import names as names_ops
from ptd.ops import packing as packing_ops
from ptd.ops import pointwise as pointwise_ops
from ptd.ops import reductions as reductions_ops
from ptd.ops import shape as shape_ops
from ptd.ops import state_dict as state_dict_ops
from ptd.ops import tdhooks as tdhooks_ops
from ptd.ops import torch_functions as torch_functions_ops
from ptd.ops import update as update_ops
from ptd.ops.apply import pick_operand
from ptd.ops.batch import fits
from ptd.ops.dtypes import dtype_abbrev
from ptd.ops.foreign import LEAF_PROBE, adopt_non_tensor, foreign_batch_size
from ptd.ops.indexing import is_key_index
from ptd.ops.interface import ContainerIO
from ptd.ops.keys import KeysView, NestedKey, out_key, unravel_key
from ptd.ops.lastop import Site
from ptd.ops.leaf_access import IN_MEMORY, LeafAccess
from ptd.ops.nontensor import NonTensorData, NonTensorStack
from ptd.ops.root import TensorDictRoot
from ptd.ops.tdhooks import REQUIRED

__all__ = [
    "EntryMeta",
    "NestedKey",
    "TensorDictBase",
    "is_leaf_nontensor",
    "pick_operand",
    "unravel_key",
]


#: ``pop(key)`` without a default raises for a missing key
_NO_DEFAULT: Any = object()


@dataclass(frozen=True)
class EntryMeta:
    """What a child is, known without reading its data."""

    kind: str  #: "tensor", "nested" or "non_tensor"
    #: full shape of a tensor; batch size of a nested container; stack shape of a non-tensor
    shape: torch.Size
    dtype: torch.dtype | None = None
    #: for non-tensors: "NonTensorData" or "NonTensorStack"
    non_tensor: str | None = None


class TensorDictBase(TensorDictRoot):
    """Shared behaviour of :class:`ptd.TensorDict` and :class:`ptd.PersistentTensorDict`."""

    _is_locked: bool = False
    _names: list[str | None] | None = None
    #: how the tensor leaves are reached for whole-leaf work (see :mod:`ptd.ops.leaf_access`)
    _leaves: LeafAccess = IN_MEMORY
    #: the store-backed openers and the memmap format the families reach through a container
    #: (:class:`ptd.ops.interface.ContainerIO`); ``ptd/containers/__init__.py`` sets it, since
    #: the modules that implement it import this one
    _io: ContainerIO

    # ------------------------------------------------------------------ primitives
    @property
    def batch_size(self) -> torch.Size:
        raise NotImplementedError

    @batch_size.setter
    def batch_size(self, value: Any) -> None:
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
        private hook of the same name (see :mod:`ptd.ops.tdhooks`)."""
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

    @classmethod
    def _new_tensordict(
        cls,
        source: Any = None,
        batch_size: Any = None,
        device: Any = None,
        names: Any = None,
        **kwargs: Any,
    ) -> TensorDictBase:
        """A new in-memory container (``ptd.TensorDict(source, batch_size, device, names)``):
        what the families build their results with."""
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
                locking_ops.check_unlocked(
                    node,
                )
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
        value = adopt_non_tensor(value, collapse=self._leaves.collapse_foreign_stacks)
        if isinstance(value, TensorDictBase):
            if not fits(value.batch_size, bs):
                # as tensordict: a copy of it takes our batch size, when its entries fit
                # (a tensordict of batch size [] whose leaves start with ours)
                try:
                    return self._new_tensordict(
                        dict(value.items()), batch_size=bs, device=value.device
                    )
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
            return self._new_tensordict(dict(value.items()), batch_size=sub_bs, device=self.device)
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
            locking_ops.check_unlocked(
                node,
            )
        node._set_str(last, node._convert(last, item), inplace=inplace and exists)
        return self

    def __setitem__(self, index: Any, value: Any) -> None:
        if is_key_index(index):
            self.set(index, value, inplace=self._leaves.writes_into_entries)
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
        locking_ops.check_unlocked(
            node,
        )
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
        locking_ops.check_unlocked(
            self,
        )
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

    # ================================================================== the table
    # every method below is a function of ptd.ops, bound here; the state they keep on the
    # instance first
    #: (method name, args, kwargs, weak reference to the object it was called on)
    _last_op: tuple[str, tuple[Any, ...], dict[str, Any], Any] | None = None
    #: where the last marked method was called from (see :func:`entered_from_call`)
    _last_call: Site | None = None
    _last_op_queue: list[Any] | None = None
    __hash__ = None  # type: ignore[assignment]
    _is_shared: bool = False
    _is_memmap: bool = False
    _memmap_prefix: str | None = None

    # ------------------------------------------------------------------ ptd.ops.reductions
    all = reductions_ops.all
    any = reductions_ops.any
    sum = reductions_ops.sum
    mean = reductions_ops.mean
    nansum = reductions_ops.nansum
    nanmean = reductions_ops.nanmean
    prod = reductions_ops.prod
    std = reductions_ops.std
    var = reductions_ops.var
    quantile = reductions_ops.quantile
    amin = reductions_ops.amin
    amax = reductions_ops.amax
    min = reductions_ops.min
    max = reductions_ops.max
    cummin = reductions_ops.cummin
    cummax = reductions_ops.cummax
    logsumexp = reductions_ops.logsumexp
    softmax = reductions_ops.softmax
    norm = reductions_ops.norm

    # ------------------------------------------------------------------ ptd.ops.pointwise
    abs = pointwise_ops.abs
    abs_ = pointwise_ops.abs_
    acos = pointwise_ops.acos
    acos_ = pointwise_ops.acos_
    asin = pointwise_ops.asin
    asin_ = pointwise_ops.asin_
    atan = pointwise_ops.atan
    atan_ = pointwise_ops.atan_
    ceil = pointwise_ops.ceil
    ceil_ = pointwise_ops.ceil_
    cos = pointwise_ops.cos
    cos_ = pointwise_ops.cos_
    cosh = pointwise_ops.cosh
    cosh_ = pointwise_ops.cosh_
    erf = pointwise_ops.erf
    erf_ = pointwise_ops.erf_
    erfc = pointwise_ops.erfc
    erfc_ = pointwise_ops.erfc_
    exp = pointwise_ops.exp
    exp_ = pointwise_ops.exp_
    expm1 = pointwise_ops.expm1
    expm1_ = pointwise_ops.expm1_
    floor = pointwise_ops.floor
    floor_ = pointwise_ops.floor_
    frac = pointwise_ops.frac
    frac_ = pointwise_ops.frac_
    lgamma = pointwise_ops.lgamma
    lgamma_ = pointwise_ops.lgamma_
    log = pointwise_ops.log
    log_ = pointwise_ops.log_
    log10 = pointwise_ops.log10
    log10_ = pointwise_ops.log10_
    log1p = pointwise_ops.log1p
    log1p_ = pointwise_ops.log1p_
    log2 = pointwise_ops.log2
    log2_ = pointwise_ops.log2_
    neg = pointwise_ops.neg
    neg_ = pointwise_ops.neg_
    reciprocal = pointwise_ops.reciprocal
    reciprocal_ = pointwise_ops.reciprocal_
    round = pointwise_ops.round
    round_ = pointwise_ops.round_
    sigmoid = pointwise_ops.sigmoid
    sigmoid_ = pointwise_ops.sigmoid_
    sign = pointwise_ops.sign
    sign_ = pointwise_ops.sign_
    sin = pointwise_ops.sin
    sin_ = pointwise_ops.sin_
    sinh = pointwise_ops.sinh
    sinh_ = pointwise_ops.sinh_
    sqrt = pointwise_ops.sqrt
    sqrt_ = pointwise_ops.sqrt_
    tan = pointwise_ops.tan
    tan_ = pointwise_ops.tan_
    tanh = pointwise_ops.tanh
    tanh_ = pointwise_ops.tanh_
    trunc = pointwise_ops.trunc
    trunc_ = pointwise_ops.trunc_
    isfinite = pointwise_ops.isfinite
    isnan = pointwise_ops.isnan
    isneginf = pointwise_ops.isneginf
    isposinf = pointwise_ops.isposinf
    isreal = pointwise_ops.isreal
    __abs__ = pointwise_ops.abs_operator
    __neg__ = pointwise_ops.neg_operator
    __invert__ = pointwise_ops.invert
    add = pointwise_ops.add
    sub = pointwise_ops.sub
    rsub = pointwise_ops.rsub
    mul = pointwise_ops.mul
    div = pointwise_ops.div
    pow = pointwise_ops.pow
    mod = pointwise_ops.mod
    maximum = pointwise_ops.maximum
    minimum = pointwise_ops.minimum
    bitwise_and = pointwise_ops.bitwise_and
    logical_and = pointwise_ops.logical_and
    clamp_max = pointwise_ops.clamp_max
    clamp_min = pointwise_ops.clamp_min
    clamp = pointwise_ops.clamp
    lerp = pointwise_ops.lerp
    addcmul = pointwise_ops.addcmul
    addcdiv = pointwise_ops.addcdiv
    masked_fill = pointwise_ops.masked_fill
    where = pointwise_ops.where
    add_ = pointwise_ops.add_
    sub_ = pointwise_ops.sub_
    mul_ = pointwise_ops.mul_
    div_ = pointwise_ops.div_
    pow_ = pointwise_ops.pow_
    maximum_ = pointwise_ops.maximum_
    minimum_ = pointwise_ops.minimum_
    clamp_max_ = pointwise_ops.clamp_max_
    clamp_min_ = pointwise_ops.clamp_min_
    clamp_ = pointwise_ops.clamp_
    lerp_ = pointwise_ops.lerp_
    addcmul_ = pointwise_ops.addcmul_
    addcdiv_ = pointwise_ops.addcdiv_
    __add__ = pointwise_ops.add_operator
    __radd__ = pointwise_ops.radd
    __sub__ = pointwise_ops.sub_operator
    __rsub__ = pointwise_ops.rsub_operator
    __mul__ = pointwise_ops.mul_operator
    __rmul__ = pointwise_ops.rmul
    __truediv__ = pointwise_ops.truediv
    __rtruediv__ = pointwise_ops.rtruediv
    __pow__ = pointwise_ops.pow_operator
    __rpow__ = pointwise_ops.rpow
    __mod__ = pointwise_ops.mod_operator
    __and__ = pointwise_ops.and_operator
    __rand__ = pointwise_ops.rand
    __or__ = pointwise_ops.or_operator
    __ror__ = pointwise_ops.ror
    __xor__ = pointwise_ops.xor
    __rxor__ = pointwise_ops.rxor
    __iadd__ = pointwise_ops.iadd
    __isub__ = pointwise_ops.isub
    __imul__ = pointwise_ops.imul
    __itruediv__ = pointwise_ops.itruediv
    __ipow__ = pointwise_ops.ipow

    # ------------------------------------------------------------------ ptd.ops.apply
    apply_ = apply_ops.apply_
    apply = apply_ops.apply
    named_apply = apply_ops.named_apply
    pin_memory = apply_ops.pin_memory
    to_tensordict = apply_ops.to_tensordict
    to_dict = apply_ops.to_dict
    numpy = apply_ops.numpy
    flatten_keys = apply_ops.flatten_keys
    unflatten_keys = apply_ops.unflatten_keys
    select = apply_ops.select
    exclude = apply_ops.exclude

    # ------------------------------------------------------------------ ptd.ops.lastop
    __enter__ = lastop_ops.enter
    __exit__ = lastop_ops.exit_operator

    # ------------------------------------------------------------------ ptd.ops.locking
    is_locked = property(locking_ops.is_locked, locking_ops.set_is_locked)
    lock_ = locking_ops.lock_
    _lock_tree = locking_ops._lock_tree
    unlock_ = locking_ops.unlock_
    _check_can_unlock = locking_ops._check_can_unlock
    _unlock_tree = locking_ops._unlock_tree

    # ------------------------------------------------------------------ ptd.ops.names
    names = property(names_ops.names, names_ops.set_names)
    _set_names = names_ops._set_names
    refine_names = names_ops.refine_names
    rename = names_ops.rename
    rename_ = names_ops.rename_

    # ------------------------------------------------------------------ ptd.ops.update
    update = update_ops.update
    update_ = update_ops.update_

    # ------------------------------------------------------------------ ptd.ops.elementwise
    __eq__ = elementwise_ops.eq  # type: ignore[assignment]
    __ne__ = elementwise_ops.ne  # type: ignore[assignment]
    __lt__ = elementwise_ops.lt
    __le__ = elementwise_ops.le
    __gt__ = elementwise_ops.gt
    __ge__ = elementwise_ops.ge
    to = elementwise_ops.to
    _to_device = elementwise_ops._to_device
    float = elementwise_ops.float
    double = elementwise_ops.double
    half = elementwise_ops.half
    bfloat16 = elementwise_ops.bfloat16
    int = elementwise_ops.int
    bool = elementwise_ops.bool
    cpu = elementwise_ops.cpu
    detach = elementwise_ops.detach
    contiguous = elementwise_ops.contiguous
    zero_ = elementwise_ops.zero_
    fill_ = elementwise_ops.fill_
    masked_fill_ = elementwise_ops.masked_fill_
    copy_ = elementwise_ops.copy_

    # ------------------------------------------------------------------ ptd.ops.shape
    reshape = shape_ops.reshape
    view = shape_ops.view
    flatten = shape_ops.flatten
    unflatten = shape_ops.unflatten
    unsqueeze = shape_ops.unsqueeze
    squeeze = shape_ops.squeeze
    permute = shape_ops.permute
    transpose = shape_ops.transpose
    swapaxes = shape_ops.swapaxes
    swapdims = shape_ops.swapdims
    movedim = shape_ops.movedim
    moveaxis = shape_ops.moveaxis
    expand = shape_ops.expand
    expand_as = shape_ops.expand_as
    broadcast_to = shape_ops.broadcast_to
    atleast_1d = shape_ops.atleast_1d
    atleast_2d = shape_ops.atleast_2d
    atleast_3d = shape_ops.atleast_3d
    pad = shape_ops.pad
    flip = shape_ops.flip
    fliplr = shape_ops.fliplr
    flipud = shape_ops.flipud
    roll = shape_ops.roll
    rot90 = shape_ops.rot90
    narrow = shape_ops.narrow
    tile = shape_ops.tile
    repeat = shape_ops.repeat
    repeat_interleave = shape_ops.repeat_interleave
    gather = shape_ops.gather
    masked_select = shape_ops.masked_select
    unbind = shape_ops.unbind
    split = shape_ops.split
    chunk = shape_ops.chunk
    tensor_split = shape_ops.tensor_split

    # ------------------------------------------------------------------ ptd.ops.torch_functions
    __torch_function__ = classmethod(torch_functions_ops.torch_function)

    # ------------------------------------------------------------------ ptd.ops.tdhooks
    _stack_onto_ = tdhooks_ops._stack_onto_
    _maybe_names = tdhooks_ops._maybe_names

    # ------------------------------------------------------------------ ptd.ops.entries
    get_at = entries_ops.get_at
    set_at_ = entries_ops.set_at_
    update_at_ = entries_ops.update_at_
    copy_at_ = entries_ops.copy_at_
    create_nested = entries_ops.create_nested
    clear = entries_ops.clear
    popitem = entries_ops.popitem
    split_keys = entries_ops.split_keys
    separates = entries_ops.separates
    filter_empty_ = entries_ops.filter_empty_
    replace = entries_ops.replace
    cat_tensors = entries_ops.cat_tensors
    stack_tensors = entries_ops.stack_tensors
    auto_batch_size_ = entries_ops.auto_batch_size_
    empty = entries_ops.empty
    new_zeros = entries_ops.new_zeros
    new_ones = entries_ops.new_ones
    new_empty = entries_ops.new_empty
    new_full = entries_ops.new_full
    new_tensor = entries_ops.new_tensor
    stack = staticmethod(joining_ops.stack)
    maybe_dense_stack = staticmethod(entries_ops.maybe_dense_stack)
    cat = staticmethod(joining_ops.cat)

    # ------------------------------------------------------------------ ptd.ops.conversions
    ndimension = conversions_ops.ndimension
    entry_class = conversions_ops.entry_class
    get_item_shape = conversions_ops.get_item_shape
    dtype = property(conversions_ops.dtype)
    depth = property(conversions_ops.depth)
    bytes = conversions_ops.bytes
    param_count = conversions_ops.param_count
    sorted_keys = property(conversions_ops.sorted_keys)
    non_tensor_items = conversions_ops.non_tensor_items
    is_floating_point = conversions_ops.is_floating_point
    is_non_tensor = conversions_ops.is_non_tensor
    get_non_tensor = conversions_ops.get_non_tensor
    data = property(conversions_ops.data)
    as_tensor = conversions_ops.as_tensor
    filter_non_tensor_data = conversions_ops.filter_non_tensor_data
    is_cpu = property(conversions_ops.is_cpu)
    is_cuda = property(conversions_ops.is_cuda)
    is_meta = property(conversions_ops.is_meta)
    is_contiguous = conversions_ops.is_contiguous
    cat_from_tensordict = conversions_ops.cat_from_tensordict
    stack_from_tensordict = conversions_ops.stack_from_tensordict
    to_h5 = conversions_ops.to_h5
    to_zarr = conversions_ops.to_zarr
    to_namedtuple = conversions_ops.to_namedtuple
    to_struct_array = conversions_ops.to_struct_array
    to_pytree = conversions_ops.to_pytree
    tolist = conversions_ops.tolist
    type = conversions_ops.type
    float16 = conversions_ops.float16
    float32 = conversions_ops.float32
    float64 = conversions_ops.float64
    int8 = conversions_ops.int8
    int16 = conversions_ops.int16
    int32 = conversions_ops.int32
    int64 = conversions_ops.int64
    uint8 = conversions_ops.uint8
    uint16 = conversions_ops.uint16
    uint32 = conversions_ops.uint32
    uint64 = conversions_ops.uint64
    complex32 = conversions_ops.complex32
    complex64 = conversions_ops.complex64
    complex128 = conversions_ops.complex128

    # ------------------------------------------------------------------ ptd.ops.devices
    auto_device_ = devices_ops.auto_device_
    clear_device_ = devices_ops.clear_device_
    is_shared = devices_ops.is_shared
    share_memory_ = devices_ops.share_memory_

    # ------------------------------------------------------------------ ptd.ops.keymoves
    rename_keys = keymoves_ops.rename_keys
    set_non_tensor = keymoves_ops.set_non_tensor

    # ------------------------------------------------------------------ ptd.ops.attrs
    attrs = attrs_ops.attrs

    # ------------------------------------------------------------------ ptd.ops.packing
    pack = packing_ops.pack

    # ------------------------------------------------------------------ ptd.ops.factories
    from_dataclass = classmethod(factories_ops.from_dataclass)
    from_list = classmethod(factories_ops.from_list)
    fromkeys = classmethod(factories_ops.fromkeys)
    from_dict = classmethod(factories_ops.from_dict)
    from_dict_instance = factories_ops.from_dict_instance
    from_any = classmethod(factories_ops.from_any)
    from_tuple = classmethod(factories_ops.from_tuple)
    from_namedtuple = classmethod(factories_ops.from_namedtuple)
    from_struct_array = classmethod(factories_ops.from_struct_array)
    from_pytree = classmethod(factories_ops.from_pytree)
    from_h5 = classmethod(factories_ops.from_h5)
    from_zarr = classmethod(factories_ops.from_zarr)
    from_schema = classmethod(factories_ops.from_schema)

    # ------------------------------------------------------------------ ptd.ops.state_dict
    state_dict = state_dict_ops.state_dict
    load_state_dict = state_dict_ops.load_state_dict
    data_ptr = state_dict_ops.data_ptr
    _has_non_tensor = property(state_dict_ops._has_non_tensor)

    # ------------------------------------------------------------------ ptd.ops.memmap
    memmap = memmap_ops.memmap
    save = memmap_ops.save
    dumps = memmap_ops.dumps
    memmap_ = memmap_ops.memmap_
    memmap_like = memmap_ops.memmap_like
    load_memmap = classmethod(memmap_ops.load_memmap)
    load = classmethod(memmap_ops.load)
    load_memmap_ = memmap_ops.load_memmap_
    load_ = memmap_ops.load_
    memmap_refresh_ = memmap_ops.memmap_refresh_
    is_memmap = memmap_ops.is_memmap
    saved_path = property(memmap_ops.saved_path)
    make_memmap = memmap_ops.make_memmap
    make_memmap_from_tensor = memmap_ops.make_memmap_from_tensor
    make_memmap_from_storage = memmap_ops.make_memmap_from_storage

    # ------------------------------------------------------------------ ptd.ops.autograd
    requires_grad = property(autograd_ops.requires_grad)
    requires_grad_ = autograd_ops.requires_grad_
    grad = property(autograd_ops.grad, autograd_ops.set_grad)
    zero_grad = autograd_ops.zero_grad
    detach_ = autograd_ops.detach_
    backward = autograd_ops.backward

    # ------------------------------------------------------------------ ptd.ops.checks
    _check_batch_size = checks_ops._check_batch_size
    _check_device = checks_ops._check_device


def _iter_items(obj: Mapping[Any, Any] | TensorDictBase) -> Iterator[tuple[Any, Any]]:
    if isinstance(obj, TensorDictBase):
        for key in obj._keys_str():
            yield key, obj._get_str(key)
    else:
        yield from obj.items()


def is_leaf_nontensor(cls: type) -> bool:
    """Pass as ``is_leaf=`` to ``keys(leaves_only=True)`` to keep non-tensor entries."""
    return issubclass(cls, (NonTensorData, NonTensorStack)) or not issubclass(cls, TensorDictBase)


if TYPE_CHECKING:
    from ptd.ops.interface import Container

    def _satisfies_the_interface(td: TensorDictBase) -> Container:
        """For mypy only: every container is a :class:`~ptd.ops.interface.Container`."""
        return td
