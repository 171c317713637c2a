"""The private hooks that tensordict's own free functions call on the tensordicts they get.

``tensordict.functional.pad``, tensordict's ``torch.stack`` (``_torch_func._stack``) and a
few more work on any tensordict-like object through a handful of private methods:
``td._get_str(key, default)`` (a direct child, or ``default`` when it is missing; tensordict's
``NO_DEFAULT`` means "raise ``KeyError``"), ``td._stack_onto_(tds, dim)`` (``torch.stack(tds,
dim, out=td)`` writes into ``td``) and ``td._maybe_names()``. ptd gives its containers the same
hooks, so code that passes a ptd tensordict to those functions works; the library itself never
imports tensordict.

>>> import torch
>>> from ptd import TensorDict
>>> td = TensorDict({"a": torch.zeros(2)}, batch_size=[2])
>>> td._get_str("b", default=None) is None
True
>>> out = TensorDict({"a": torch.empty(2, 2)}, batch_size=[2, 2])
>>> out._stack_onto_([td, td + 1], 0) is out, out["a"][:, 0]
(True, tensor([0., 1.]))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from ptd.errors import ArgumentError, NotSupportedError
from ptd.ops.torch_functions import _handles

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase

__all__ = ["REQUIRED", "wants_default"]


class _Required:
    """The default of ``_get_str``'s ``default``: a missing key raises ``KeyError``."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


def wants_default(default: Any) -> bool:
    """Whether ``_get_str(key, default)`` should give ``default`` for a missing key: not for
    ptd's :data:`REQUIRED` nor for tensordict's ``NO_DEFAULT`` sentinel (an enum member of a
    class named ``_NoDefault``; ptd's reductions use a sentinel of that name too)."""
    return default is not REQUIRED and type(default).__name__ != "_NoDefault"


def _stack_onto_(
    td: TensorDictBase, list_item: Sequence[TensorDictBase], dim: int
) -> TensorDictBase:
    """Write ``torch.stack(list_item, dim)`` into this tensordict, row by row (its leaves
    keep their storage; a store is written in place) and return it."""
    from ptd.ops.joining import stack

    return stack(list_item, dim, out=td)


def _maybe_names(td: TensorDictBase) -> list[str | None] | None:
    """The names of the batch dims, or None when no dim is named."""
    names = td.names
    return None if all(n is None for n in names) else list(names)


def _nn_pad(
    td: TensorDictBase, pad: Sequence[int], mode: str = "constant", value: Any = None
) -> Any:
    """``torch.nn.functional.pad(td, pad)``: ``pad`` in torch's order (the last batch dim
    first), as tensordict's ``pad`` hands it to a nested tensordict it does not know."""
    if mode != "constant":
        raise NotSupportedError(
            f"torch.nn.functional.pad of a tensordict: mode {mode!r} is not supported, only 'constant'"
        )
    widths = [int(p) for p in pad]
    if len(widths) % 2:
        raise ArgumentError("Padding length must be divisible by 2")
    if len(widths) > 2 * td.ndim:
        raise ArgumentError(
            f"Padding length should be less than or equal to two times the number of batch dims ({td.ndim})"
        )
    pairs = [widths[i : i + 2] for i in range(0, len(widths), 2)][::-1]
    first_dim_first = [0, 0] * (td.ndim - len(pairs)) + [w for pair in pairs for w in pair]
    return td.pad(first_dim_first, value=0.0 if value is None else value)


_handles(torch.nn.functional.pad)(_nn_pad)
