"""Operands of the elementwise ops of :mod:`ptd.ops.pointwise`: how a number, a tensordict or
a batch-aligned tensor meets each leaf, the dtype dry run of in-place ops, and the tree walks
behind ``where`` and ``default=``.

>>> import torch
>>> _expanded(torch.tensor([1, 2]), (2, 3)).tolist()
[[1, 1, 1], [2, 2, 2]]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from ptd.errors import PtdKeyError, PtdValueError
from ptd.ops.keys import unravel_key
from ptd.ops.root import is_tensordict

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase

__all__: list[str] = []


class _BatchTensor:
    """A tensor operand aligned with the batch dims: each leaf gets it with singleton dims
    added on the right (its feature dims) and expanded to the leaf's shape."""

    __slots__ = ("tensor",)

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor


def _mismatch(mine: set[Any], theirs: set[Any]) -> PtdKeyError:
    msg = "keys in tensordicts mismatch."
    if mine - theirs:
        msg += f" The first TD has keys {mine - theirs} that the second does not have."
    if theirs - mine:
        msg += f" The second TD has keys {theirs - mine} that the first does not have."
    return PtdKeyError(msg)


def _on_leaf(operand: Any, leaf: torch.Tensor) -> Any:
    if isinstance(operand, _BatchTensor):
        t = operand.tensor
        t = t.reshape(tuple(t.shape) + (1,) * (leaf.ndim - t.ndim))
        return t.expand_as(leaf) if t.ndim == leaf.ndim else t
    return operand


def _dry(operand: Any, parts: tuple[str, ...]) -> Any:
    """An empty stand-in of ``operand`` for the leaf ``parts`` with its dtype (for the dtype
    check before an in-place op writes)."""
    if is_tensordict(operand):
        meta = operand.leaf_meta(parts)
        return torch.empty(0, dtype=meta.dtype) if meta.dtype is not None else None
    if isinstance(operand, _BatchTensor):
        return torch.empty(0, dtype=operand.tensor.dtype)
    if isinstance(operand, torch.Tensor):
        return torch.empty(0, dtype=operand.dtype) if operand.ndim else operand
    return operand


def _map_tree(
    td: TensorDictBase, fn: Callable[[torch.Tensor, list[Any]], Any], others: list[Any]
) -> TensorDictBase:
    """A new TensorDict (same batch size, names) of ``fn(leaf, matching leaves of others)``;
    non-tensor entries are kept as they are."""
    out = td._new_tensordict({}, batch_size=td.batch_size, device=td.device, names=td._names)
    for key in td._keys_str():
        meta = td._meta_str(key)
        value = td._get_str(key)
        if meta.kind == "nested":
            value = _map_tree(value, fn, [o._get_str(key) for o in others])
        elif meta.kind == "tensor":
            value = fn(value, [o._get_str(key) for o in others])
        out._set_str(key, value, inplace=False)
    return out


def _where_td(
    me: TensorDictBase, cond: torch.Tensor, other: Any, out: Any, pad: Any
) -> TensorDictBase:
    result = (
        out
        if out is not None
        else me._new_tensordict({}, batch_size=me.batch_size, device=me.device)
    )
    mine = me._keys_str()

    def leaf(mine_t: Any, theirs_t: Any, key: str) -> torch.Tensor:
        c = cond
        if mine_t is None or theirs_t is None:
            if pad is None:
                raise PtdKeyError(f"Key {key} not found and no pad value provided.")
            present = theirs_t if mine_t is None else mine_t
            filler = torch.tensor(pad, dtype=present.dtype, device=present.device)
            if mine_t is None:
                mine_t, theirs_t, c = present, filler, ~cond
            else:
                theirs_t = filler
        return torch.where(_expanded(c, mine_t.shape), mine_t, theirs_t)

    for key in mine:
        value = me._get_str(key)
        theirs = other._get_str(key) if key in other._keys_str() else None
        if is_tensordict(value):
            sub_out = out._get_str(key) if out is not None and key in out._keys_str() else None
            if theirs is None:
                theirs = me._new_tensordict({}, batch_size=value.batch_size)
            result._set_str(key, value.where(cond, theirs, out=sub_out, pad=pad), inplace=False)
        elif isinstance(value, torch.Tensor):
            result._set_str(key, leaf(value, theirs, key), inplace=False)
    for key in other._keys_str():
        if key in mine:
            continue
        theirs = other._get_str(key)
        if is_tensordict(theirs):
            empty = me._new_tensordict({}, batch_size=theirs.batch_size)
            result._set_str(key, theirs.where(~cond, empty, pad=pad), inplace=False)
        elif isinstance(theirs, torch.Tensor):
            result._set_str(key, leaf(None, theirs, key), inplace=False)
    return result


def _value(value: float | None) -> float:
    return 1 if value is None else value


def _as_tensor(value: Any, like: torch.Tensor) -> torch.Tensor:
    # a number becomes a 0-d tensor of its own kind: torch then refuses a float into an int
    # leaf, as tensordict does
    return value if isinstance(value, torch.Tensor) else torch.as_tensor(value, device=like.device)


def _as_leaf_tensordict(host: Any, operand: Any) -> Any:
    """A batch-aligned tensor operand as a tensordict of per-leaf expanded views (no copy)."""
    if not isinstance(operand, _BatchTensor):
        return operand
    out = host._new_tensordict({}, batch_size=host.batch_size)
    for parts, meta in host._metas(True):
        if meta.kind == "tensor":
            out.set(parts, _expanded(operand.tensor, meta.shape))
    return out


def _expanded(t: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    t = t.reshape(tuple(t.shape) + (1,) * (len(shape) - t.ndim))
    return t.expand(shape)


def _with_default(
    me: TensorDictBase, fn: Callable[..., Any], ops: list[Any], default: Any
) -> TensorDictBase:
    """A binary op whose tensordict operand may lack keys of ``me`` or have others:
    ``default="intersection"`` keeps the common keys, any other value stands in for the
    missing leaves of either side."""
    (other,) = [o for o in ops if is_tensordict(o)]
    mine = [unravel_key(k) for k in me.keys(True, True)]
    theirs = [unravel_key(k) for k in other.keys(True, True)]
    their_set, my_set = set(theirs), set(mine)
    if isinstance(default, str):
        if default != "intersection":
            raise PtdValueError(f"default must be a value or 'intersection', not {default!r}")
        keys = [k for k in mine if k in their_set]
    else:
        keys = mine + [k for k in theirs if k not in my_set]
    out = me._new_tensordict({}, batch_size=me.batch_size, device=me.device)
    for parts in keys:
        a = me.get(parts) if parts in my_set else default
        b = other.get(parts) if parts in their_set else default
        out.set(parts, fn(a, *[b if is_tensordict(o) else _on_leaf(o, a) for o in ops]))
    return out
