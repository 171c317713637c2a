"""The in-memory TensorDict: what ``PersistentTensorDict.to_tensordict()`` returns.

>>> import torch
>>> from ptd import TensorDict
>>> td = TensorDict({"a": torch.zeros(3, 4), "n": {"b": torch.arange(3)}}, batch_size=[3])
>>> td
TensorDict(batch_size=[3], fields={a: f32[4], n: {b: i64[]}})
>>> td[1:]["n", "b"]
tensor([1, 2])
>>> (td + 1)["a"].sum().item()
12.0
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np
import torch

from ptd.containers.base import EntryMeta, TensorDictBase, _iter_items
from ptd.errors import BatchSizeError, PtdIndexError
from ptd.ops.batch import as_batch_size, fits
from ptd.ops.indexing import index_names
from ptd.ops.nontensor import NonTensorData, NonTensorStack
from ptd.ops.rows import flat_list
from ptd.ops.tdhooks import REQUIRED, wants_default

__all__ = ["TensorDict", "assign_nested"]


def _expand_index(index: Any, ndim: int) -> Any:
    """Replace Ellipsis so that the index covers the batch dims only, and turn lists into
    tensors (so it can be applied unchanged to leaves with more dims)."""
    items = list(index) if isinstance(index, tuple) else [index]
    items = [
        (torch.as_tensor(i) if i else torch.zeros(0, dtype=torch.long))
        if isinstance(i, list)
        else i
        for i in items
    ]
    if any(i is Ellipsis for i in items):
        consumed = sum(
            (i.ndim if isinstance(i, torch.Tensor) and i.dtype == torch.bool else 1)
            for i in items
            if i is not Ellipsis and i is not None
        )
        pos = next(k for k, i in enumerate(items) if i is Ellipsis)
        items[pos : pos + 1] = [slice(None)] * max(0, ndim - consumed)
    return tuple(items)


class TensorDict(TensorDictBase):
    """A dict of tensors sharing leading batch dims, held in memory.

    Args:
        source: a mapping (or tensordict) of entries; nested mappings become nested TensorDicts.
        batch_size: the leading dims every entry shares (default ``[]``).
        device: if set, tensors are moved there when set.
        names: optional names of the batch dims.
        **kwargs: more entries, as keywords.
    """

    def __init__(
        self,
        source: Mapping[Any, Any] | TensorDictBase | None = None,
        batch_size: Sequence[int] | torch.Size | int | None = None,
        device: Any = None,
        names: Sequence[str | None] | None = None,
        lock: bool = False,
        **kwargs: Any,
    ) -> None:
        self._data: dict[str, Any] = {}
        self._batch_size = as_batch_size(batch_size)
        self._device = torch.device(device) if device is not None else None
        self._names = None
        items = list(_iter_items(source)) if source is not None else []
        for key, value in items + list(kwargs.items()):
            self.set(key, value)
        if names is not None:
            self.names = names
        if lock:
            self.lock_()

    # ---------------------------------------------------------------- primitives
    @property
    def batch_size(self) -> torch.Size:
        return self._batch_size

    @batch_size.setter
    def batch_size(self, value: Sequence[int]) -> None:
        new = as_batch_size(value)
        for key in self._keys_str():
            meta = self._meta_str(key)
            if meta.kind != "non_tensor" and not fits(meta.shape, new):
                raise BatchSizeError(
                    f"batch size {list(new)} does not fit key {key!r} of shape {list(meta.shape)}"
                )
        for key, value in list(self._data.items()):
            if isinstance(value, NonTensorData):
                self._data[key] = NonTensorData(value.data, new, value.device)
            elif isinstance(value, TensorDictBase) and len(value.batch_size) < len(new):
                value.batch_size = new
        self._batch_size = new
        if self._names is not None and len(self._names) != len(new):
            self._names = None

    @property
    def device(self) -> torch.device | None:
        return self._device

    def _keys_str(self) -> list[str]:
        return list(self._data)

    def _meta_str(self, key: str) -> EntryMeta:
        value = self._data[key]
        if isinstance(value, torch.Tensor):
            return EntryMeta("tensor", value.shape, value.dtype)
        if isinstance(value, TensorDictBase):
            return EntryMeta("nested", value.batch_size)
        return EntryMeta("non_tensor", value.batch_size, None, type(value).__name__)

    def _get_str(self, key: str, default: Any = REQUIRED, **_: Any) -> Any:
        try:
            return self._data[key]
        except KeyError:
            if wants_default(default):
                return default
            raise self._missing(key) from None

    def _set_str(self, key: str, value: Any, *, inplace: bool) -> None:
        if (
            self._names is not None
            and isinstance(value, TensorDict)
            and value._names is None
            and len(value.batch_size) >= self.ndim
        ):
            value._set_names(self._names + [None] * (len(value.batch_size) - self.ndim))
        old = self._data.get(key)
        if inplace and isinstance(old, torch.Tensor) and isinstance(value, torch.Tensor):
            old.copy_(value)
            return
        if inplace and isinstance(old, TensorDictBase) and isinstance(value, TensorDictBase):
            old.update_(value)
            return
        self._data[key] = value

    def _del_str(self, key: str) -> None:
        del self._data[key]

    def _new_nested(self, key: str) -> TensorDictBase:
        sub = TensorDict({}, batch_size=self.batch_size, device=self.device)
        sub._names = None if self._names is None else list(self._names)
        self._data[key] = sub
        return sub

    def _index(self, index: Any) -> TensorDictBase:
        idx = _expand_index(index, self.ndim)
        try:
            new_bs = torch.empty(tuple(self.batch_size), device="meta")[idx].shape
        except IndexError as err:
            raise PtdIndexError(f"{err} (batch_size={list(self.batch_size)})") from None
        out = TensorDict({}, batch_size=new_bs, device=self.device)
        out._names = index_names(self._names, idx, self.ndim)
        for key, value in self._data.items():
            if isinstance(value, (TensorDictBase, NonTensorStack)):
                out._data[key] = (
                    value._index(idx) if isinstance(value, TensorDictBase) else value[idx]
                )
            elif isinstance(value, NonTensorData):
                out._data[key] = NonTensorData(value.data, new_bs, value.device)
            else:
                out._data[key] = value[idx]
        return out

    def _set_at(self, index: Any, value: Any) -> None:
        idx = _expand_index(index, self.ndim)
        if isinstance(value, Mapping):
            value = TensorDict(value, batch_size=[])
        elif isinstance(value, TensorDictBase):
            _check_assigned_batch(self, idx, index, value)
        for key, current in self._data.items():
            if isinstance(value, TensorDictBase):
                if key not in value._keys_str():
                    continue
                new = value._get_str(key)
            else:
                new = value
            if isinstance(current, TensorDictBase):
                current._set_at(idx, new)
            elif isinstance(current, torch.Tensor):
                current[idx] = new
            elif isinstance(current, NonTensorStack) and not isinstance(new, torch.Tensor):
                grid = current.tolist()
                assign_nested(grid, tuple(current.batch_size), idx, new)
                self._data[key] = NonTensorStack.from_list(grid, current.batch_size)

    @classmethod
    def _new_tensordict(
        cls,
        source: Any = None,
        batch_size: Any = None,
        device: Any = None,
        names: Any = None,
        **kwargs: Any,
    ) -> TensorDict:
        return TensorDict(source, batch_size, device, names, **kwargs)

    # ---------------------------------------------------------------- TensorDict only
    @classmethod
    def _unchecked(cls, data: Mapping[str, Any], batch_size: torch.Size) -> TensorDict:
        """A TensorDict holding ``data`` as is (nested dicts become nested TensorDicts), without
        the checks :meth:`set` makes on each entry: for ptd's own hot paths (a DataLoader batch
        every millisecond), whose entries are tensors they made with ``batch_size`` leading
        dims, on no device, under string keys.

        >>> td = TensorDict._unchecked({"a": torch.zeros(2, 3), "b": {"c": torch.ones(2)}},
        ...                            torch.Size([2]))
        >>> td["b", "c"].tolist(), td.batch_size
        ([1.0, 1.0], torch.Size([2]))
        """
        out = cls(batch_size=batch_size)
        out._data = {
            k: cls._unchecked(v, batch_size) if isinstance(v, dict) else v for k, v in data.items()
        }
        return out

    def clone(self, recurse: bool = True, **kwargs: Any) -> TensorDict:
        if recurse:
            # to_tensordict makes a TensorDict (typed as the base it is declared on)
            return self.to_tensordict()  # type: ignore[return-value]
        out = TensorDict({}, batch_size=self.batch_size, device=self.device, names=self._names)
        # new containers at every level, sharing the leaves (as tensordict's clone(False))
        out._data = {
            k: v.clone(False) if isinstance(v, TensorDict) else v for k, v in self._data.items()
        }
        return out

    def _to_device(self, device: torch.device) -> TensorDictBase:
        out = self.apply(lambda t: t.to(device), device=device)
        return cast("TensorDictBase", out)


def assign_nested(grid: Any, shape: tuple[int, ...], idx: Any, new: Any) -> None:
    """``grid[idx] = new`` on a nested list (used for NonTensorStack rows)."""
    arr = np.empty(shape, dtype=object)
    flat = arr.reshape(-1)
    flat[:] = flat_list(grid, len(shape))
    if isinstance(new, NonTensorStack):
        new = np.array(new.tolist(), dtype=object)
    elif isinstance(new, NonTensorData):
        new = new.data
    sel = tuple(i.numpy() if isinstance(i, torch.Tensor) else i for i in idx)
    arr[sel] = new
    result = arr.tolist()
    grid[:] = result


def _check_assigned_batch(td: TensorDictBase, idx: Any, index: Any, value: Any) -> None:
    """``td[index] = value`` as tensordict allows it: the value's batch size is the selection's,
    or its trailing dims (expanded on the left), or the value's leaves start with the
    selection's shape; anything else is a RuntimeError (BatchSizeError)."""
    try:
        target = tuple(torch.empty(tuple(td.batch_size), device="meta")[idx].shape)
    except IndexError as err:
        raise PtdIndexError(f"{err} (batch_size={list(td.batch_size)})") from None
    vb = tuple(value.batch_size)
    if vb == target[len(target) - len(vb) :] or all(
        fits(v.shape, target) for v in value.values(True, True) if isinstance(v, torch.Tensor)
    ):
        return
    raise BatchSizeError(
        f"indexed destination TensorDict batch size is {list(target)} (batch_size = "
        f"{list(td.batch_size)}, index={index!r}), which differs from the source batch size "
        f"{list(vb)}"
    )
