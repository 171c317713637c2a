"""What one leaf of a reduction gets: :class:`LeafOp`, and the small helpers the reductions
share (:mod:`ptd.ops.reductions` runs them over the tree; :mod:`ptd.containers.persistent.streaming`
runs them slab by slab).

>>> import torch
>>> LeafOp("sum", dim=0)(torch.ones(3, 2))
tensor([3., 3.])
>>> LeafOp("max", dim=1, values_only=False)(torch.tensor([[1, 5], [7, 2]])).indices
tensor([1, 0])
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ptd.errors import PtdIndexError

__all__ = ["NO_DEFAULT", "LeafOp"]


class _NoDefault:
    """The default of ``dim``/``keepdim`` when the caller gives none."""

    _instance: _NoDefault | None = None

    def __new__(cls) -> _NoDefault:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_DEFAULT"

    def __bool__(self) -> bool:
        return False


NO_DEFAULT: Any = _NoDefault()

#: reductions for which ``dim=()`` is not "every element"
_NO_EMPTY_DIM = frozenset({"max", "min", "cummax", "cummin", "quantile"})
#: reductions whose result is a (values, indices) named tuple when a dim is given
_WITH_INDICES = frozenset({"min", "max", "cummin", "cummax"})


@dataclass(frozen=True)
class LeafOp:
    """One reduction (or dim-wise op) of one tensor leaf, as torch's tensor method ``name``.

    ``dim`` is what torch receives: None (every element), an int or a tuple of ints, relative
    to the leaf; ``feature_from`` set means: first flatten the dims from there on (or add one)
    and reduce the last dim.
    """

    name: str
    dim: int | tuple[int, ...] | None = None
    keepdim: bool | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    values_only: bool = True
    feature_from: int | None = None

    def __call__(self, t: torch.Tensor) -> Any:
        kw = dict(self.kwargs)
        dim = self.dim
        if self.feature_from is not None:
            nb = self.feature_from
            t = t.flatten(nb, -1) if t.ndim > nb else t.unsqueeze(-1)
            dim = -1
        if dim is not None or (self.keepdim and self.name in ("sum", "mean")):
            kw["dim"] = dim
        if self.keepdim is not None:
            kw["keepdim"] = self.keepdim
        if self.name == "quantile":
            q = kw.pop("q")
            d = kw.pop("dim", None)
            result = t.quantile(q, d, **kw) if d is not None else t.quantile(q, **kw)
        elif self.name == "softmax":
            result = torch.softmax(t, **kw)
        elif self.name == "logsumexp":
            result = torch.logsumexp(t, **kw)
        else:
            result = getattr(t, self.name)(**kw)
        if isinstance(result, tuple) and self.values_only:
            return result[0]
        return result

    def reduced_dims(self, ndim: int) -> tuple[int, ...] | None:
        """The leaf dims this op acts on (non-negative), or None for every element."""
        if self.feature_from is not None:
            return tuple(range(self.feature_from, ndim)) or (ndim,)
        if self.dim is None:
            return None
        dims = self.dim if isinstance(self.dim, tuple) else (self.dim,)
        return tuple(d % ndim if ndim else 0 for d in dims)

    @property
    def out_dim0(self) -> int:
        """Where the leaf's first dim lands in the result when it is not reduced."""
        q = self.kwargs.get("q")
        return 1 if isinstance(q, torch.Tensor) and q.ndim == 1 else 0


def _pos_dim(dim: int, ndim: int) -> int:
    new = dim + ndim if dim < 0 else dim
    if not 0 <= new < ndim:
        raise PtdIndexError(f"Incompatible dim {new} for tensordict with batch dims {ndim}.")
    return new


def _pad_names(n: int, names: Sequence[str | None]) -> list[str | None]:
    """``n`` unnamed dims (a 1-d ``q`` of quantile), then ``names``."""
    out: list[str | None] = [None] * n
    return out + list(names)


def _warn_tuple_dim(name: str, dim: tuple[int, ...]) -> None:
    category: type[Warning] = FutureWarning if name in ("amax", "amin") else DeprecationWarning
    warnings.warn(
        f"{name}(dim={dim}) reduces only the first dim of the tuple (as tensordict 0.15 does); "
        "pass an int dim.",
        category,
        stacklevel=4,
    )
