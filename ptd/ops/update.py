"""``update``, ``update_``, ``update_at_`` and ``set_at_``, written once for every tensordict
(bound as methods of :class:`~ptd.containers.base.TensorDictBase`), with tensordict 0.15's signatures.

Nested tensordicts are merged; a leaf replaces whatever is at its key (a nested tensordict
too); ``keys_to_update`` restricts the keys written (nested keys allowed); ``inplace=True``
writes into existing entries (allowed on a locked tensordict); ``clone=True`` clones values.

>>> import torch
>>> from ptd import TensorDict
>>> td = TensorDict({"a": torch.zeros(2), "n": {"b": torch.zeros(2)}}, batch_size=[2])
>>> td = td.update({"a": torch.ones(2), "n": {"c": torch.ones(2)}}, keys_to_update=[("n", "c")])
>>> sorted(td.keys(True, True), key=str), td["a"]
([('n', 'b'), ('n', 'c'), 'a'], tensor([0., 0.]))
>>> td.update({"n": torch.ones(2)})["n"]
tensor([1., 1.])
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from ptd.errors import BatchSizeError, PtdKeyError
from ptd.ops import locking as locking_ops
from ptd.ops.foreign import adopt_non_tensor
from ptd.ops.keys import NestedKey, out_key, unravel_key
from ptd.ops.nontensor import NonTensorData, NonTensorStack
from ptd.ops.root import is_tensordict

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase


__all__: list[str] = []


def update(
    td: TensorDictBase,
    input_dict_or_td: Any | None = None,
    clone: bool = False,
    inplace: bool = False,
    *,
    non_blocking: bool = False,
    keys_to_update: Sequence[NestedKey] | None = None,
    is_leaf: Callable[[type], bool] | None = None,
    update_batch_size: bool = False,
    ignore_lock: bool = False,
    **kwargs: Any,
) -> Any:
    """Write every entry of ``input_dict_or_td`` (and of ``kwargs``) into this tensordict;
    nested tensordicts are merged, a leaf replaces whatever is there (a nested tensordict
    too). ``inplace``: existing entries are written into; ``clone``: values are cloned;
    ``keys_to_update``: only these keys (nested keys allowed) are written. A locked
    tensordict accepts ``inplace=True`` only (RuntimeError otherwise).
    """
    if kwargs:
        if input_dict_or_td is None:
            input_dict_or_td = kwargs
        elif isinstance(input_dict_or_td, Mapping) and not is_tensordict(input_dict_or_td):
            input_dict_or_td = {**input_dict_or_td, **kwargs}
        else:
            td.update(input_dict_or_td, clone, inplace, keys_to_update=keys_to_update)
            input_dict_or_td = kwargs
    if input_dict_or_td is None or input_dict_or_td is td:
        return td
    if not inplace and td.is_locked:
        locking_ops.check_unlocked(
            td,
        )
    allowed = None if keys_to_update is None else [unravel_key(k) for k in keys_to_update]
    if allowed is not None and not allowed:
        return td
    if is_tensordict(input_dict_or_td):
        src_bs = input_dict_or_td.batch_size
        if td.batch_size[: len(src_bs)] != src_bs[: td.ndim]:
            if not update_batch_size:
                raise BatchSizeError(
                    f"update() got a source with batch size {src_bs} for a destination "
                    f"with batch size {td.batch_size} ({td._location()}). Pass "
                    "update_batch_size=True to replace the batch size."
                )
            _replace_batch_size_for(td, input_dict_or_td)
    for key, value in _iter_items(input_dict_or_td):
        # a tensordict NonTensorStack is a Mapping: never taken for a nested tensordict
        value = adopt_non_tensor(value, collapse=td._leaves.collapse_foreign_stacks)
        parts = unravel_key(key)
        first, rest = parts[0], parts[1:]
        if allowed is not None and not any(k[0] == first for k in allowed):
            continue
        if (clone and isinstance(value, torch.Tensor)) or is_tensordict(value):
            value = value.clone()
        target_kind = td._meta_str(first).kind if first in td._keys_str() else None
        sub_allowed = _prune_keys(allowed, first)
        if (
            target_kind == "nested"
            and (isinstance(value, Mapping) or is_tensordict(value))
            and not (is_leaf is not None and is_leaf(type(value)))
        ):
            sub = td._get_str(first)
            sub.update(
                {rest: value} if rest else value,
                clone=False,
                inplace=inplace,
                keys_to_update=sub_allowed,
                is_leaf=is_leaf,
            )
            continue
        if rest and sub_allowed is not None and rest not in sub_allowed:
            continue
        td.set(parts, value, inplace=inplace)
    return td


def _replace_batch_size_for(td: TensorDictBase, source: Any) -> None:
    raise BatchSizeError(
        f"cannot replace the batch size of {td._location()} with {source.batch_size} "
        "through update()"
    )


def update_(
    td: TensorDictBase,
    input_dict_or_td: Any | None = None,
    clone: bool = False,
    *,
    non_blocking: bool = False,
    keys_to_update: Sequence[NestedKey] | None = None,
    **kwargs: Any,
) -> Any:
    """Write every entry of the input into the existing entries (KeyError for new keys);
    works on a locked tensordict."""
    if kwargs:
        input_dict_or_td = {**dict(_iter_items(input_dict_or_td or {})), **kwargs}
    if input_dict_or_td is None or input_dict_or_td is td:
        return td
    allowed = None if keys_to_update is None else [unravel_key(k) for k in keys_to_update]
    if allowed is not None and not allowed:
        return td
    for key, value in _iter_items(input_dict_or_td):
        parts = unravel_key(key)
        if allowed is not None and not any(k[0] == parts[0] for k in allowed):
            continue
        if not td._has(parts):
            raise PtdKeyError(
                f"The key {out_key(parts)} was not found in the dest tensordict ({td._location()})."
            )
        if (clone and isinstance(value, torch.Tensor)) or is_tensordict(value):
            value = value.clone()
        if (isinstance(value, Mapping) or is_tensordict(value)) and not isinstance(
            value, (NonTensorData, NonTensorStack)
        ):
            td._get_strict(parts).update_(
                value,
                keys_to_update=_prune_keys(allowed, parts[0]) if len(parts) == 1 else None,
            )
        else:
            td.set_(parts, value)
    return td


def _iter_items(obj: Any) -> Iterator[tuple[Any, Any]]:
    if is_tensordict(obj):
        for key in obj._keys_str():
            yield key, obj._get_str(key)
    else:
        yield from obj.items()


def _prune_keys(allowed: list[tuple[str, ...]] | None, first: str) -> list[tuple[str, ...]] | None:
    """``keys_to_update`` for the nested tensordict at ``first``: None (everything) when
    ``first`` itself is listed."""
    if allowed is None or any(k == (first,) for k in allowed):
        return None
    return [k[1:] for k in allowed if k[0] == first and len(k) > 1]
