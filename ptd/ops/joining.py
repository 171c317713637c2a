"""``torch.stack`` and ``torch.cat`` of tensordicts, into a new TensorDict or into ``out=``.

With ``out=`` (an in-memory TensorDict or a PersistentTensorDict) each input is written into
its own rows of ``out`` (``out[..., i, ...] = tds[i]`` for stack, a slice of rows for cat), so a
file-backed ``out`` receives one input at a time and never holds the whole result in memory.

>>> import torch
>>> from ptd import TensorDict
>>> a = TensorDict({"x": torch.zeros(2)}, batch_size=[2])
>>> torch.stack([a, a + 1], 1)["x"]
tensor([[0., 1.],
        [0., 1.]])
>>> out = TensorDict({"x": torch.empty(4)}, batch_size=[4])
>>> torch.cat([a, a + 1], out=out) is out, out["x"]
(True, tensor([0., 0., 1., 1.]))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ptd.errors import (
    ArgumentError,
    KeysMismatchError,
    PtdIndexError,
    PtdValueError,
    UnsupportedOperationError,
)
from ptd.ops.nontensor import NonTensorData, NonTensorStack
from ptd.ops.root import is_tensordict
from ptd.ops.rows import flat_list

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase

__all__ = ["cat", "stack"]


def _combine(values: Sequence[Any], batch: torch.Size, joiner: Callable[[list[Any]], Any]) -> Any:
    """Stack/cat a list of entries of the same key."""

    first = values[0]
    if isinstance(first, torch.Tensor):
        return joiner(list(values))
    if all(isinstance(v, NonTensorData) for v in values) and all(v == first for v in values):
        return NonTensorData(first.data, batch)
    grids = []
    for v in values:
        arr = np.empty(tuple(v.batch_size), dtype=object)
        if isinstance(v, NonTensorData):
            arr.fill(v.data) if arr.ndim else None
        else:
            arr.reshape(-1)[:] = flat_list(v.tolist(), len(v.batch_size))
        grids.append(arr)
    joined = joiner(
        [
            torch.arange(g.size).reshape(g.shape) + off
            for g, off in zip(grids, np.cumsum([0] + [g.size for g in grids[:-1]]), strict=True)
        ]
    )
    flat = np.concatenate([g.reshape(-1) for g in grids])
    return NonTensorStack.from_list(
        flat[joined.reshape(-1).numpy()].reshape(tuple(joined.shape)).tolist(), joined.shape
    )


def _check_keys(tds: Sequence[TensorDictBase], what: str) -> list[str]:
    keys = tds[0]._keys_str()
    for i, td in enumerate(tds[1:], 1):
        if set(td._keys_str()) != set(keys):
            msg = (
                f"tensordict {i} has keys {sorted(td._keys_str())} but tensordict 0 has keys "
                f"{sorted(keys)}; all the tensordicts to {what} must have the same keys"
            )
            if what == "stack":
                raise ArgumentError(msg)
            raise KeysMismatchError(msg)
    return keys


def _join(
    tds: Sequence[TensorDictBase],
    new_bs: torch.Size,
    joiner: Callable[[list[Any]], Any],
    what: str,
) -> TensorDictBase:
    out = tds[0]._new_tensordict({}, batch_size=new_bs, device=tds[0].device)
    for key in _check_keys(tds, what):
        values = [td._get_str(key) for td in tds]
        if is_tensordict(values[0]):
            extra = values[0].batch_size[tds[0].ndim :]
            value = _join(values, torch.Size(list(new_bs) + list(extra)), joiner, what)
        else:
            value = _combine(values, new_bs, joiner)
        out._set_str(key, value, inplace=False)
    return out


def _write_rows(
    out: TensorDictBase, tds: Sequence[TensorDictBase], rows: Callable[[int], Any], what: str
) -> TensorDictBase:
    _check_keys(tds, what)
    for i, td in enumerate(tds):
        out[rows(i)] = td
    return out


def stack(tds: Sequence[TensorDictBase], dim: int = 0, *, out: Any = None) -> TensorDictBase:
    """Stack tensordicts of the same batch size along a new batch dim ``dim``; with ``out``,
    write input ``i`` into ``out``'s row ``i`` of that dim and return ``out``."""
    tds = list(tds)
    if not tds:
        raise ArgumentError("stack expects a non-empty list of tensordicts")
    bs = tds[0].batch_size
    if any(td.batch_size != bs for td in tds):
        raise ArgumentError(
            "stacking tensordicts requires them to have congruent batch sizes, got "
            f"{[list(t.batch_size) for t in tds]}"
        )
    n = len(bs) + 1
    if not -n <= dim < n:
        raise PtdIndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})"
        )
    dim %= n
    new_bs = torch.Size(list(bs[:dim]) + [len(tds)] + list(bs[dim:]))
    if out is not None:
        if not is_tensordict(out):
            raise PtdValueError(f"out must be a tensordict, got {type(out).__name__}")
        if out.batch_size != new_bs:
            raise UnsupportedOperationError(
                "out.batch_size and stacked batch size must match, got "
                f"out.batch_size={out.batch_size} and stacked batch size={new_bs}"
            )
        pre = (slice(None),) * dim
        return _write_rows(out, tds, lambda i: pre + (i,), "stack")
    return _join(tds, new_bs, lambda xs: torch.stack(xs, dim), "stack")


def cat(tds: Sequence[TensorDictBase], dim: int = 0, *, out: Any = None) -> TensorDictBase:
    """Concatenate tensordicts along the existing batch dim ``dim``; with ``out``, write each
    input into its slice of ``out``'s rows and return ``out``."""
    tds = list(tds)
    if not tds:
        raise PtdValueError("torch.cat(): expected a non-empty list of tensordicts")
    bs = tds[0].batch_size
    if not -len(bs) <= dim < len(bs):
        raise UnsupportedOperationError(
            f"dim must be in the range 0 <= dim < len(batch_size), got dim={dim} and "
            f"batch_size={list(bs)}"
        )
    dim %= len(bs)
    for td in tds:
        if len(td.batch_size) != len(bs) or any(
            a != b for i, (a, b) in enumerate(zip(td.batch_size, bs, strict=True)) if i != dim
        ):
            raise ArgumentError(
                f"cannot concatenate tensordicts of batch sizes "
                f"{[list(t.batch_size) for t in tds]} along dim {dim}"
            )
    new_bs = list(bs)
    new_bs[dim] = sum(td.batch_size[dim] for td in tds)
    if out is not None:
        if not is_tensordict(out):
            raise PtdValueError(f"out must be a tensordict, got {type(out).__name__}")
        if out.batch_size != torch.Size(new_bs):
            raise UnsupportedOperationError(
                "out.batch_size and cat batch size must match, got "
                f"out.batch_size={out.batch_size} and batch_size={torch.Size(new_bs)}"
            )
        starts = np.cumsum([0] + [td.batch_size[dim] for td in tds]).tolist()
        pre = (slice(None),) * dim
        return _write_rows(out, tds, lambda i: pre + (slice(starts[i], starts[i + 1]),), "cat")
    return _join(tds, torch.Size(new_bs), lambda xs: torch.cat(xs, dim), "cat")
