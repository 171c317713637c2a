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

Arithmetic, comparisons, reductions and shape operations live in :mod:`ptd._ops`.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ptd.core.batch import as_batch_size, fits
from ptd.core.dtypes import dtype_abbrev
from ptd.core.indexing import is_key_index
from ptd.core.nontensor import NonTensorData, NonTensorStack
from ptd.core.ops import OpsMixin, ShapeMixin
from ptd.errors import (
    BatchSizeError,
    ClosedStoreError,
    PtdKeyError,
    PtdTypeError,
    UnsupportedOperationError,
)

__all__ = ["TensorDictBase", "EntryMeta", "NestedKey", "unravel_key", "is_leaf_nontensor"]

NestedKey = str | tuple[str, ...]
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


def unravel_key(key: Any) -> tuple[str, ...]:
    """``"a"`` -> ``("a",)``; ``("a", ("b", "c"))`` -> ``("a", "b", "c")``.

    >>> unravel_key(("a", ("b", "c")))
    ('a', 'b', 'c')
    """
    if isinstance(key, str):
        return (key,)
    if isinstance(key, tuple):
        out: list[str] = []
        for k in key:
            out.extend(unravel_key(k))
        return tuple(out)
    raise PtdTypeError(f"key must be a NestedKey (a str or a possibly nested tuple of str), got {key!r}")


def _out_key(parts: tuple[str, ...]) -> NestedKey:
    return parts[0] if len(parts) == 1 else parts


class _KeysView:
    """The result of ``keys()``: iterable, sized, and answers ``in`` for str and tuple keys."""

    def __init__(self, keys: list[NestedKey]):
        self._keys = keys

    def __iter__(self) -> Iterator[NestedKey]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        try:
            parts = unravel_key(key)
        except PtdTypeError:
            return False
        return _out_key(parts) in self._keys

    def __repr__(self) -> str:
        return f"_KeysView({self._keys!r})"


class TensorDictBase(OpsMixin, ShapeMixin):
    """Shared behaviour of :class:`ptd.TensorDict` and :class:`ptd.PersistentTensorDict`."""

    _is_locked: bool = False
    _names: list[str | None] | None = None
    #: whether ``td[key] = value`` writes into an existing entry (file-backed) or replaces it
    _setitem_inplace: bool = False

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

    def _get_str(self, key: str) -> Any:
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

    @property
    def names(self) -> list[str | None]:
        names = self._names
        return list(names) if names is not None else [None] * self.ndim

    def is_empty(self) -> bool:
        """True when the tensordict holds no leaf (nested empty containers do not count)."""
        for _ in self.keys(True, True):
            return False
        return not any(m.kind == "non_tensor" for _, m in self._metas(True))

    # ------------------------------------------------------------------ locking
    @property
    def is_locked(self) -> bool:
        return self._is_locked

    def lock_(self) -> TensorDictBase:
        self._is_locked = True
        for key in self._keys_str():
            if self._meta_str(key).kind == "nested":
                self._get_str(key).lock_()
        return self

    def unlock_(self) -> TensorDictBase:
        self._is_locked = False
        for key in self._keys_str():
            if self._meta_str(key).kind == "nested":
                self._get_str(key).unlock_()
        return self

    def _check_unlocked(self) -> None:
        if self._is_locked:
            raise UnsupportedOperationError(
                "Cannot modify locked TensorDict. For in-place modification, consider using the "
                "`set_()` method and make sure the key is present."
            )

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
                    raise PtdKeyError(
                        f"key {_out_key(parts[: i + 1])!r} in {self._location()} is a "
                        f"{meta.kind.replace('_', '-')} entry, not a nested tensordict, so "
                        f"{_out_key(parts)!r} cannot be reached"
                    )
                node = node._get_str(part)
            elif create:
                node._check_unlocked()
                node = node._new_nested(part)
            else:
                raise self._missing(_out_key(parts))
        return node, parts[-1]

    def _has(self, parts: tuple[str, ...]) -> bool:
        try:
            node, last = self._walk(parts)
            return last in node._keys_str()
        except KeyError:
            return False

    # ------------------------------------------------------------------ read access
    def get(self, key: NestedKey, default: Any = _NO_DEFAULT) -> Any:
        """The entry at ``key`` (tensor, nested tensordict, NonTensorData or NonTensorStack).

        A missing key raises KeyError unless ``default`` is given.
        """
        parts = unravel_key(key)
        try:
            node, last = self._walk(parts)
            if last not in node._keys_str():
                raise self._missing(key)
            return node._get_str(last)
        except KeyError as err:
            if default is not _NO_DEFAULT:
                return default
            if isinstance(err, ClosedStoreError):
                raise self._missing(key) from None
            raise

    def leaf_meta(self, key: NestedKey) -> EntryMeta:
        """Kind, shape and dtype of an entry, without reading its data."""
        parts = unravel_key(key)
        node, last = self._walk(parts)
        if last not in node._keys_str():
            raise self._missing(key)
        return node._meta_str(last)

    def __getitem__(self, index: Any) -> Any:
        if is_key_index(index):
            value = self.get(index)
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
            raise PtdTypeError("key must be a NestedKey (a str or a possibly tuple of str).")
        try:
            parts = unravel_key(key)
        except PtdTypeError:
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
    ) -> _KeysView:
        """The keys; nested ones as tuples when ``include_nested``.

        ``leaves_only`` keeps tensor leaves only (pass ``is_leaf=ptd.is_leaf_nontensor`` to keep
        non-tensor entries too). ``sort`` sorts the result.
        """
        out: list[NestedKey] = []
        for parts, meta in self._metas(include_nested):
            if leaves_only:
                if meta.kind == "nested":
                    continue
                if meta.kind == "non_tensor" and not (is_leaf is not None and is_leaf(NonTensorData)):
                    continue
            out.append(_out_key(parts))
        if sort:
            out.sort(key=lambda k: k if isinstance(k, str) else ".".join(k))
        return _KeysView(out)

    def values(self, include_nested: bool = False, leaves_only: bool = False, is_leaf: Any = None, *, sort: bool = False) -> Iterator[Any]:
        for key in self.keys(include_nested, leaves_only, is_leaf, sort=sort):
            yield self.get(key)

    def items(self, include_nested: bool = False, leaves_only: bool = False, is_leaf: Any = None, *, sort: bool = False) -> Iterator[tuple[NestedKey, Any]]:
        for key in self.keys(include_nested, leaves_only, is_leaf, sort=sort):
            yield key, self.get(key)

    # ------------------------------------------------------------------ write access
    def _convert(self, key: str, value: Any) -> Any:
        """Turn a user value into what the primitives store, and check its batch dims."""
        bs = self.batch_size
        if isinstance(value, TensorDictBase):
            if not fits(value.batch_size, bs):
                raise BatchSizeError(
                    f"batch dimension mismatch, got self.batch_size={bs} and value.batch_size="
                    f"{value.batch_size} for key {key!r} in {self._location()}. The leading "
                    "dimensions of a value must match the batch size."
                )
            return value
        if isinstance(value, Mapping):
            from ptd.core.tensordict import TensorDict

            return TensorDict(dict(value), batch_size=bs, device=self.device)
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

    def set(self, key: NestedKey, value: Any, *, inplace: bool = False, **_: Any) -> TensorDictBase:
        """Store ``value`` at ``key`` (creating nested levels); ``inplace`` writes into an
        existing entry of the same shape instead of replacing it."""
        parts = unravel_key(key)
        node, last = self._walk(parts, create=True)
        exists = last in node._keys_str()
        if not exists:
            node._check_unlocked()
        node._set_str(last, node._convert(last, value), inplace=inplace and exists)
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
            value = self.get(key)
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

    def rename_key_(self, old_key: NestedKey, new_key: NestedKey, safe: bool = False) -> TensorDictBase:
        """Move an entry to a new key (the target is overwritten unless ``safe``)."""
        old, new = unravel_key(old_key), unravel_key(new_key)
        if not self._has(old):
            raise PtdKeyError(f"key {old_key!r} not found in {self._location()}")
        if self._has(new):
            if safe:
                raise PtdKeyError(f"key {new_key!r} already present in {self._location()}")
            self.del_(new)
        self._rename(old, new)
        return self

    def _rename(self, old: tuple[str, ...], new: tuple[str, ...]) -> None:
        value = self.get(old)
        self.set(new, value)
        self.del_(old)

    def update(self, input_dict_or_td: Mapping[Any, Any] | TensorDictBase, clone: bool = False, inplace: bool = False, *, keys_to_update: Sequence[NestedKey] | None = None, **_: Any) -> TensorDictBase:
        """Set every entry of ``input_dict_or_td`` (nested dicts merge into nested entries)."""
        allowed = None if keys_to_update is None else {unravel_key(k) for k in keys_to_update}
        for key, value in _iter_items(input_dict_or_td):
            parts = unravel_key(key)
            if isinstance(value, (Mapping, TensorDictBase)) and self._has(parts) and self.leaf_meta(parts).kind == "nested":
                sub_allowed = None if allowed is None else [k[len(parts):] for k in allowed if k[: len(parts)] == parts]
                if allowed is not None and not sub_allowed and parts not in allowed:
                    continue
                self.get(parts).update(value, clone=clone, inplace=inplace, keys_to_update=None if parts in (allowed or ()) else sub_allowed)
                continue
            if allowed is not None and parts not in allowed:
                continue
            if clone and isinstance(value, torch.Tensor):
                value = value.clone()
            self.set(parts, value, inplace=inplace)
        return self

    def update_(self, input_dict_or_td: Mapping[Any, Any] | TensorDictBase, clone: bool = False) -> TensorDictBase:
        """Write every entry of the input into the existing entries (KeyError for new keys)."""
        for key, value in _iter_items(input_dict_or_td):
            parts = unravel_key(key)
            if not self._has(parts):
                raise PtdKeyError(f"The key {_out_key(parts)} was not found in the dest tensordict.")
            if isinstance(value, (Mapping, TensorDictBase)):
                self.get(parts).update_(value, clone=clone)
            else:
                self.set_(parts, value)
        return self

    # ------------------------------------------------------------------ leaf-wise maps
    def _tensor_leaves(self) -> Iterator[tuple[tuple[str, ...], torch.Tensor]]:
        for key in self.keys(True, True):
            yield unravel_key(key), self.get(key)

    def _map_inplace(self, fn: Callable[[torch.Tensor, Any], torch.Tensor | None], other: Any = None) -> TensorDictBase:
        """Replace every tensor leaf ``t`` by ``fn(t, o)`` in place (same dtype and shape),
        where ``o`` is ``other``'s matching leaf (``other`` may be a tensordict, a tensor, a
        number, None, or a tuple of those).

        File-backed tensordicts override this to stream row slabs.
        """
        for parts, tensor in self._tensor_leaves():
            result = fn(tensor, pick_operand(other, parts, None))
            if result is not None:
                self.set_(parts, result)
        return self

    def apply_(self, fn: Callable[..., torch.Tensor], *others: TensorDictBase) -> TensorDictBase:
        """Apply ``fn`` to every tensor leaf and write the result back in place."""
        return self._map_inplace(lambda t, o: fn(t, *o), tuple(others))

    def apply(
        self,
        fn: Callable[..., Any],
        *others: TensorDictBase | Mapping[str, Any],
        batch_size: Sequence[int] | None = None,
        device: Any = _NO_DEFAULT,
        names: Sequence[str | None] | None = None,
        inplace: bool = False,
        **_: Any,
    ) -> TensorDictBase | None:
        """A new in-memory TensorDict with ``fn`` applied to every tensor leaf.

        Leaves for which ``fn`` returns None are dropped; non-tensor entries are kept as they are.
        """
        if inplace:
            return self.apply_(fn, *others)  # type: ignore[arg-type]
        from ptd.core.tensordict import TensorDict

        out_bs = self.batch_size if batch_size is None else as_batch_size(batch_size)
        out = TensorDict({}, batch_size=out_bs, device=self.device if device is _NO_DEFAULT else device, names=names)
        for key in self._keys_str():
            meta = self._meta_str(key)
            value = self._get_str(key)
            sub_others = [_get_any(o, key) for o in others]
            if meta.kind == "nested":
                extra = value.batch_size[self.ndim :] if batch_size is not None else None
                sub_bs = None if extra is None else list(out_bs) + list(extra)
                sub = value.apply(fn, *sub_others, batch_size=sub_bs, device=device)
                if sub is not None:
                    out._set_str(key, sub, inplace=False)
            elif meta.kind == "tensor":
                result = fn(value, *sub_others)
                if result is not None:
                    out._set_str(key, result, inplace=False)
            else:
                out._set_str(key, value if batch_size is None else NonTensorData(value.data, out_bs) if isinstance(value, NonTensorData) else value, inplace=False)
        return out

    def named_apply(self, fn: Callable[..., Any], *others: TensorDictBase, **kwargs: Any) -> TensorDictBase | None:
        from ptd.core.tensordict import TensorDict

        out = TensorDict({}, batch_size=self.batch_size, device=self.device)
        for parts, tensor in self._tensor_leaves():
            result = fn(_out_key(parts), tensor, *(o.get(parts) for o in others))
            if result is not None:
                out.set(parts, result)
        return out

    # ------------------------------------------------------------------ conversions
    def to_tensordict(self, *, retain_none: bool | None = None) -> TensorDictBase:
        """An in-memory :class:`ptd.TensorDict` copy of every entry."""
        from ptd.core.tensordict import TensorDict

        out = TensorDict({}, batch_size=self.batch_size, device=self.device, names=self._names)
        for key in self._keys_str():
            value = self._get_str(key)
            if isinstance(value, TensorDictBase):
                value = value.to_tensordict()
            elif isinstance(value, torch.Tensor) and not self._reads_copy():
                value = value.clone()
            out._set_str(key, value, inplace=False)
        return out

    def _reads_copy(self) -> bool:
        """True when ``_get_str`` already returns a fresh tensor (file-backed)."""
        return False

    def to_dict(self, *, retain_none: bool = True, convert_tensors: bool = False) -> dict[str, Any]:
        """A plain nested dict of tensors (and python values for non-tensor entries)."""
        out: dict[str, Any] = {}
        for key in self._keys_str():
            value = self._get_str(key)
            if isinstance(value, TensorDictBase):
                out[key] = value.to_dict(convert_tensors=convert_tensors)
            elif isinstance(value, NonTensorData):
                out[key] = value.data
            elif isinstance(value, NonTensorStack):
                out[key] = value.tolist()
            else:
                out[key] = value.tolist() if convert_tensors else value
        return out

    def numpy(self) -> dict[str, Any]:
        """A plain nested dict of numpy arrays (and python values for non-tensor entries)."""

        def conv(d: dict[str, Any]) -> dict[str, Any]:
            return {
                k: conv(v) if isinstance(v, dict) else v.numpy() if isinstance(v, torch.Tensor) else v
                for k, v in d.items()
            }

        return conv(self.to_dict())

    def flatten_keys(self, separator: str = ".", inplace: bool = False, is_leaf: Any = None) -> TensorDictBase:
        """A copy whose nested keys are joined by ``separator``."""
        from ptd.core.tensordict import TensorDict

        if inplace:
            raise UnsupportedOperationError(f"flatten_keys(inplace=True) is not supported by {type(self).__name__}")
        out = TensorDict({}, batch_size=self.batch_size, device=self.device, names=self._names)
        for parts, meta in self._metas(True):
            if meta.kind == "nested":
                continue
            value = self.get(parts)
            out._set_str(separator.join(parts), value, inplace=False)
        return out

    def unflatten_keys(self, separator: str = ".", inplace: bool = False) -> TensorDictBase:
        """A copy where keys containing ``separator`` become nested keys."""
        from ptd.core.tensordict import TensorDict

        if inplace:
            raise UnsupportedOperationError(f"unflatten_keys(inplace=True) is not supported by {type(self).__name__}")
        out = TensorDict({}, batch_size=self.batch_size, device=self.device, names=self._names)
        for key in self._keys_str():
            value = self._get_str(key)
            if isinstance(value, TensorDictBase):
                value = value.unflatten_keys(separator)
            out.set(tuple(key.split(separator)), value)
        return out

    def select(self, *keys: NestedKey, inplace: bool = False, strict: bool = True) -> TensorDictBase:
        """A copy with only ``keys`` (nested keys allowed)."""
        from ptd.core.tensordict import TensorDict

        out = TensorDict({}, batch_size=self.batch_size, device=self.device, names=self._names)
        for key in keys:
            parts = unravel_key(key)
            if not self._has(parts):
                if strict:
                    raise self._missing(key)
                continue
            node: TensorDictBase = out
            for i, part in enumerate(parts[:-1]):
                if part not in node._keys_str():
                    src = self.get(parts[: i + 1])
                    node._set_str(part, TensorDict({}, batch_size=src.batch_size, device=self.device), inplace=False)
                node = node._get_str(part)
            value = self.get(parts)
            if isinstance(value, TensorDictBase):
                value = value.to_tensordict()
            node._set_str(parts[-1], value, inplace=False)
        if inplace:
            for key in list(self.keys()):
                if not any(unravel_key(k)[0] == key for k in keys):
                    self.del_(key)
            return self
        return out

    def exclude(self, *keys: NestedKey, inplace: bool = False) -> TensorDictBase:
        """A copy without ``keys``."""
        drop = {unravel_key(k) for k in keys}
        if inplace:
            for parts in drop:
                if self._has(parts):
                    self.del_(parts)
            return self
        out = self.to_tensordict()
        for parts in drop:
            if out._has(parts):
                out.del_(parts)
        return out

    def copy(self) -> TensorDictBase:
        return self.clone(recurse=False)

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


def pick_operand(other: Any, parts: tuple[str, ...], rows: slice | None) -> Any:
    """The operand matching leaf ``parts``; with ``rows``, cut to those rows of the first batch
    dim (tensordicts, and tensors that carry the batch dims, i.e. have the leaf's ndim)."""
    if isinstance(other, tuple):
        return tuple(pick_operand(o, parts, rows) for o in other)
    if isinstance(other, TensorDictBase):
        value = other.get(parts)
        return value if rows is None or not other.batch_size else value[rows]
    return other


def _get_any(obj: Any, key: str) -> Any:
    if isinstance(obj, TensorDictBase):
        return obj._get_str(key)
    if isinstance(obj, Mapping):
        return obj[key]
    return obj


def is_leaf_nontensor(cls: type) -> bool:
    """Pass as ``is_leaf=`` to ``keys(leaves_only=True)`` to keep non-tensor entries."""
    return issubclass(cls, (NonTensorData, NonTensorStack)) or not issubclass(cls, TensorDictBase)
