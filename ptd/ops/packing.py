"""``pack``: every tensor leaf of a tensordict in one tensor of features, and the
:class:`PackLayout` that unpacks it, as tensordict 0.15.3 has them.

The leaves are taken in sorted key order (``keys(True, True, sort=True)``), each flattened
after the batch dims, and concatenated along the packed dim, so the columns depend on the set of
keys and feature shapes only. On a PersistentTensorDict the leaves are read one by one (the
result holds all of them).

>>> import torch
>>> from ptd import TensorDict
>>> td = TensorDict(p=torch.zeros(5), v=torch.ones(5, 3), n={"s": torch.ones(5, 2, 2)},
...                 batch_size=[5])
>>> flat, layout = td.pack()
>>> flat.shape, layout.keys, layout.offsets, layout.numel
(torch.Size([5, 8]), (('n', 's'), 'p', 'v'), (0, 4, 5), 8)
>>> out = layout.unpack(flat[:2])
>>> out.batch_size, out["n", "s"].shape
(torch.Size([2]), torch.Size([2, 2, 2]))
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from ptd.errors import (
    ArgumentError,
    KeysMismatchError,
    PtdIndexError,
    PtdTypeError,
    UnsupportedOperationError,
)
from ptd.ops.keys import NestedKey

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase

__all__ = ["PackLayout"]


@dataclasses.dataclass(frozen=True)
class PackLayout:
    """Where each leaf lies in a tensor made by :meth:`ptd.TensorDictBase.pack`, and what
    :meth:`unpack` needs to rebuild the tensordict: the leaf ``keys`` in column order, their
    feature ``shapes`` (after the batch dims), the packed ``dim`` (counted from the end), the
    ``nested`` tensordicts as ``(key, batch shape after the root's, None)``, the ``device``;
    ``offsets`` (first column of each leaf) and ``numel`` (columns in all) are derived.
    Frozen, hashable, compared by value. ``cls`` is always ``None`` (tensordict's
    tensorclasses are not ptd's). ``constructor`` builds the unpacked container (the packed
    container's ``_new_tensordict``, set by :meth:`~ptd.TensorDictBase.pack`; a layout made by
    hand needs it to unpack); it is not compared."""

    keys: tuple[NestedKey, ...]
    shapes: tuple[torch.Size, ...]
    dim: int = -1
    nested: tuple[tuple[NestedKey, torch.Size, Any], ...] = ()
    device: torch.device | None = None
    cls: Any = None
    constructor: Callable[..., TensorDictBase] | None = dataclasses.field(
        default=None, compare=False, repr=False
    )
    offsets: tuple[int, ...] = dataclasses.field(init=False)
    numel: int = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        shapes = tuple(torch.Size(s) for s in self.shapes)
        object.__setattr__(self, "shapes", shapes)
        object.__setattr__(self, "nested", tuple((k, torch.Size(b), c) for k, b, c in self.nested))
        sizes = [math.prod(s) for s in shapes]
        object.__setattr__(self, "offsets", tuple(sum(sizes[:i]) for i in range(len(sizes))))
        object.__setattr__(self, "numel", sum(sizes))

    def unpack(self, flat: torch.Tensor) -> TensorDictBase:
        """A :class:`ptd.TensorDict` whose leaves are views of ``flat``; its batch size is
        the shape of ``flat`` without the packed dim (so ``flat[idx]`` unpacks to the rows
        picked). Raises ``IndexError`` if ``dim`` is out of range for ``flat``, ``ValueError``
        if ``flat`` has not :attr:`numel` entries along it."""
        new = self.constructor
        if new is None:
            raise ArgumentError(
                "unpack: this PackLayout has no constructor (made by hand, not by td.pack()); "
                "pass constructor=ptd.TensorDict when making it"
            )
        pos = self.dim + flat.ndim if self.dim < 0 else self.dim
        if not 0 <= pos < flat.ndim:
            raise PtdIndexError(
                f"unpack: dim {self.dim} is out of range for a tensor with {flat.ndim} dims"
            )
        if flat.shape[pos] != self.numel:
            raise ArgumentError(
                f"unpack: expected {self.numel} entries along dim {self.dim} of the packed "
                f"tensor, got {flat.shape[pos]}"
            )
        flat = flat.movedim(pos, -1)
        batch = flat.shape[:-1]
        device = flat.device if self.device is not None else None
        out = new({}, batch_size=batch, device=device)
        for key, extra, _ in self.nested:
            out.set(key, new({}, batch_size=batch + extra, device=device))
        for key, shape, offset in zip(self.keys, self.shapes, self.offsets, strict=True):
            value = flat.narrow(-1, offset, math.prod(shape))
            out.set(key, value.unflatten(-1, shape) if shape else value.squeeze(-1))
        return out


def pack(
    td: TensorDictBase, dim: int = -1, *, layout: PackLayout | None = None
) -> tuple[torch.Tensor, PackLayout]:
    """All the tensor leaves in one contiguous tensor of shape ``(*batch_size, F)`` (for
    ``dim=-1``; ``dim`` places the feature dim as :func:`torch.stack` would), and its
    :class:`PackLayout`. The leaves must share one dtype (else ``TypeError``) and device;
    non-tensor entries raise ``TypeError`` (drop them with
    :meth:`filter_non_tensor_data`). With ``layout=``, the columns follow its keys and a
    missing or extra leaf raises ``KeyError``, another feature shape or dim ``ValueError``.
    """
    batch = td.batch_size
    nb = len(batch)
    if not -nb - 1 <= dim <= nb:
        raise PtdIndexError(
            f"pack: dim {dim} is out of range for a tensordict with {nb} batch dims"
        )
    pos = dim + nb + 1 if dim < 0 else dim
    leaves: dict[NestedKey, torch.Tensor] = {}
    nested: list[tuple[NestedKey, torch.Size, Any]] = []
    for key in td.keys(True, False, sort=True):
        meta = td.leaf_meta(key)
        if meta.kind == "non_tensor":
            raise PtdTypeError(
                f"pack: cannot pack the non-tensor entry {key!r}; drop the non-tensor "
                "entries with filter_non_tensor_data() first"
            )
        if meta.kind == "nested":
            nested.append((key, torch.Size(meta.shape[nb:]), None))
        else:
            leaves[key] = td.get(key)
    if layout is not None:
        lpos = layout.dim + nb + 1 if layout.dim < 0 else layout.dim
        if lpos != pos:
            raise ArgumentError(
                f"pack: cannot pack along dim {dim} with a layout packed along {layout.dim}"
            )
        if set(leaves) != set(layout.keys):
            raise KeysMismatchError(
                "pack: the leaves differ from the keys of the layout: "
                f"{sorted(leaves, key=str)} vs {sorted(layout.keys, key=str)}"
            )
        leaves = {key: leaves[key] for key in layout.keys}
    shapes = tuple(v.shape[nb:] for v in leaves.values())
    if layout is not None and shapes != layout.shapes:
        raise ArgumentError(
            f"pack: the feature shapes of the leaves differ from the layout's: {shapes} "
            f"vs {layout.shapes}"
        )
    parts = []
    first: torch.Tensor | None = None
    for key, value in leaves.items():
        if first is None:
            first = value
        elif value.dtype != first.dtype:
            raise PtdTypeError(
                f"pack: cannot pack leaves of different dtypes: {first.dtype} and "
                f"{value.dtype} at {key!r}; cast the tensordict first, e.g. with float()"
            )
        elif value.device != first.device:
            raise UnsupportedOperationError(
                f"pack: cannot pack leaves on different devices: {first.device} and "
                f"{value.device} at {key!r}"
            )
        value = value.flatten(nb) if value.ndim > nb else value.unsqueeze(-1)
        parts.append(value.movedim(-1, pos) if pos != nb else value)
    if parts:
        flat = torch.cat(parts, pos).contiguous()
    else:
        flat = torch.empty((*batch[:pos], 0, *batch[pos:]), device=td.device)
    out_layout = PackLayout(
        keys=tuple(leaves),
        shapes=shapes,
        dim=pos - nb - 1,
        nested=tuple(nested),
        device=td.device,
        constructor=td._new_tensordict,
    )
    return flat, out_layout
