"""Operations on the batch dims: reshape, permute, flip, roll, repeat, gather...

Each one is a function of the leading ``ndim`` dims of a tensor that keeps the trailing (feature)
dims, applied to every leaf by :func:`_batch_map`; a non-tensor entry follows through
an index grid of the batch shape. Results are new in-memory :class:`ptd.TensorDict`;
a store refuses some of them (see :mod:`ptd.containers.persistent.refused`).

>>> import torch
>>> from ptd import TensorDict
>>> td = TensorDict({"a": torch.arange(6).reshape(2, 3)}, batch_size=[2, 3])
>>> td.flip(1)["a"]
tensor([[2, 1, 0],
        [5, 4, 3]])
>>> td.movedim(0, 1).batch_size
torch.Size([3, 2])
>>> td.repeat_interleave(2, dim=0)["a"][:, 0]
tensor([0, 0, 3, 3])
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import torch

from ptd.errors import (
    ArgumentError,
    PtdIndexError,
    PtdValueError,
    UnsupportedOperationError,
)
from ptd.ops import reshaping
from ptd.ops.lastop import last_op
from ptd.ops.reshaping import _batch_map, _rebind
from ptd.ops.root import is_tensordict

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase

__all__: list[str] = []


def _shape_arg(shape: Sequence[Any]) -> list[int]:
    if len(shape) == 1 and isinstance(shape[0], (list, tuple, torch.Size)):
        return list(shape[0])
    return [int(s) for s in shape]


def _dims_arg(dims: Any) -> tuple[int, ...]:
    if isinstance(dims, int):
        return (dims,)
    return tuple(operator.index(d) for d in dims)


def normalize_dim(td: TensorDictBase, dim: int, extra: int = 0) -> int:
    n = td.ndim + extra
    if not -n <= dim < n:
        raise PtdIndexError(
            f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got "
            f"{dim}): the tensordict has {td.ndim} batch dims"
        )
    return dim % n if n else 0


# ------------------------------------------------------------ reshaping
def reshape(td: TensorDictBase, *shape: Any, **kwargs: Any) -> TensorDictBase:
    """The batch dims reshaped (``*shape``, one sequence or ``size=``; one ``-1``);
    ``inplace=True`` rebinds this tensordict. See :mod:`ptd.ops.reshaping`."""
    return reshaping.reshape(td, shape, kwargs)


@last_op()
def view(
    td: TensorDictBase, *shape: Any, size: Any = None, batch_size: Any = None
) -> TensorDictBase:
    """``view(*shape)`` on the batch dims, or ``view(dtype)`` on every tensor leaf (the
    leaves' last dim must then still fit the batch size, or ``batch_size``)."""
    return reshaping.view(td, shape, size, batch_size)


@last_op()
def flatten(td: TensorDictBase, start_dim: int = 0, end_dim: int = -1) -> TensorDictBase:
    if td.ndim == 0:
        return _batch_map(td, lambda t: t.unsqueeze(0))
    s, e = normalize_dim(td, start_dim), normalize_dim(td, end_dim)
    if e < s:
        raise PtdValueError(
            f"The end dimension must be greater or equal to the start dim: got start_dim="
            f"{start_dim} and end_dim={end_dim}"
        )
    return _batch_map(td, lambda t: t.flatten(s, e))


@last_op()
def unflatten(td: TensorDictBase, dim: int, unflattened_size: Sequence[int]) -> TensorDictBase:
    d = normalize_dim(td, dim)
    sizes = tuple(unflattened_size)
    return _batch_map(td, lambda t: t.unflatten(d, sizes))


@last_op()
def unsqueeze(td: TensorDictBase, dim: int) -> TensorDictBase:
    if not -td.ndim - 1 <= dim <= td.ndim:
        raise ArgumentError(
            "unsqueezing is allowed for dims comprised between `-td.batch_dims - 1` and "
            f"`td.batch_dims` only. Got dim={dim} with a batch size of {td.batch_size}."
        )
    d = normalize_dim(td, dim, extra=1)
    return _batch_map(td, lambda t: t.unsqueeze(d))


@last_op()
def squeeze(td: TensorDictBase, dim: int | None = None) -> TensorDictBase:
    """Remove the batch dims of size 1 (``dim``: that one only); the tensordict itself
    when there is none, as in tensordict."""
    if dim is None:
        dims = [i for i, n in enumerate(td.batch_size) if n == 1]
    else:
        d = normalize_dim(td, dim)
        dims = [d] if td.batch_size[d] == 1 else []
    if not dims:
        return td
    return _batch_map(td, lambda t: t.squeeze(dims))


@last_op()
def permute(td: TensorDictBase, *dims: Any) -> TensorDictBase:
    order = [normalize_dim(td, d) for d in _shape_arg(dims)]
    if sorted(order) != list(range(td.ndim)):
        raise PtdValueError(
            f"permute needs a permutation of the {td.ndim} batch dims, got {list(dims)}"
        )
    nb = td.ndim
    return _batch_map(td, lambda t: t.permute(*order, *range(nb, t.ndim)))


@last_op()
def transpose(td: TensorDictBase, dim0: int, dim1: int) -> TensorDictBase:
    a, b = normalize_dim(td, dim0), normalize_dim(td, dim1)
    return _batch_map(td, lambda t: t.transpose(a, b))


@last_op()
def swapaxes(td: TensorDictBase, axis0: int, axis1: int) -> TensorDictBase:
    return td.transpose(axis0, axis1)


@last_op()
def swapdims(td: TensorDictBase, dim0: int, dim1: int) -> TensorDictBase:
    return td.transpose(dim0, dim1)


@last_op()
def movedim(
    td: TensorDictBase, source: int | Sequence[int], destination: int | Sequence[int]
) -> TensorDictBase:
    """Move the batch dims ``source`` to the positions ``destination`` (a permutation)."""
    src, dst = _dims_arg(source), _dims_arg(destination)
    if len(src) != len(dst):
        raise PtdValueError(
            "movedim: source and destination must have the same number of elements, got "
            f"{len(src)} and {len(dst)}"
        )
    src = tuple(normalize_dim(td, d) for d in src)
    dst = tuple(normalize_dim(td, d) for d in dst)
    if len(set(src)) != len(src):
        raise UnsupportedOperationError("movedim: repeated dim in source")
    if len(set(dst)) != len(dst):
        raise UnsupportedOperationError("movedim: repeated dim in destination")
    if src == dst:
        return td
    order = [i for i in range(td.ndim) if i not in src]
    for d, s in sorted(zip(dst, src, strict=True)):
        order.insert(d, s)
    return td.permute(*order)


moveaxis = movedim


def expand(td: TensorDictBase, *shape: Any) -> TensorDictBase:
    new = tuple(_shape_arg(shape))
    nb = td.ndim
    if len(new) < nb:
        raise UnsupportedOperationError(
            f"the number of sizes provided ({len(new)}) must be greater or equal to the "
            f"number of batch dims ({nb})"
        )
    lead = len(new) - nb
    new = new[:lead] + tuple(
        n if s == -1 else s for s, n in zip(new[lead:], td.batch_size, strict=True)
    )
    return _batch_map(td, lambda t: t.expand(new + tuple(t.shape[nb:])))


def expand_as(td: TensorDictBase, other: Any) -> TensorDictBase:
    """Expand to the shape of a tensor, or leaf by leaf to those of a tensordict."""
    if is_tensordict(other):
        return cast(
            "TensorDictBase",
            td.apply(lambda x, y: x.expand_as(y), other, batch_size=other.batch_size),
        )
    return td.expand(*other.shape)


def broadcast_to(td: TensorDictBase, shape: Sequence[int]) -> TensorDictBase:
    return td.expand(*shape)


@last_op()
def atleast_1d(td: TensorDictBase) -> TensorDictBase:
    return td if td.ndim >= 1 else td.unsqueeze(0)


@last_op()
def atleast_2d(td: TensorDictBase) -> TensorDictBase:
    out = td
    while out.ndim < 2:
        out = out.unsqueeze(0)
    return out


@last_op()
def atleast_3d(td: TensorDictBase) -> TensorDictBase:
    """New leading batch dims of size 1 until there are 3 (as tensordict does; torch puts
    the third one last)."""
    out = td
    while out.ndim < 3:
        out = out.unsqueeze(0)
    return out


def pad(
    td: TensorDictBase,
    pad_size: Sequence[int],
    value: float = 0.0,
    inplace: bool = False,
    safe: bool = True,
) -> TensorDictBase:
    """Pad the batch dims with ``value``: ``pad_size`` is ``(dim0_before, dim0_after,
    dim1_before, ...)``, from the first batch dim (unlike ``torch.nn.functional.pad``)."""
    sizes = [int(x) for x in pad_size]
    if len(sizes) > 2 * td.ndim:
        raise ArgumentError(
            "The length of pad_size must be <= 2 * the number of batch dimensions, got "
            f"{len(sizes)} for {td.ndim} batch dims"
        )
    if len(sizes) % 2:
        raise ArgumentError("pad_size must have an even number of dimensions")
    pairs = [(sizes[i], sizes[i + 1]) for i in range(0, len(sizes), 2)]

    def fn(t: torch.Tensor) -> torch.Tensor:
        flat: list[int] = []
        for d in reversed(range(t.ndim)):
            flat += list(pairs[d]) if d < len(pairs) else [0, 0]
        return torch.nn.functional.pad(t, flat, value=value)

    out = _batch_map(td, fn, lock=False)
    return _rebind(td, out) if inplace else out


# ------------------------------------------------------------ reordering rows
@last_op()
def flip(td: TensorDictBase, dims: int | Sequence[int]) -> TensorDictBase:
    ds = tuple(normalize_dim(td, d) for d in _dims_arg(dims))
    return _batch_map(td, lambda t: t.flip(ds))


@last_op()
def fliplr(td: TensorDictBase) -> TensorDictBase:
    if td.ndim < 2:
        raise UnsupportedOperationError("fliplr requires at least 2 batch dimensions")
    return td.flip(1)


@last_op()
def flipud(td: TensorDictBase) -> TensorDictBase:
    if td.ndim < 1:
        raise UnsupportedOperationError("flipud requires at least 1 batch dimension")
    return td.flip(0)


@last_op()
def roll(
    td: TensorDictBase,
    shifts: int | Sequence[int],
    dims: int | Sequence[int] | None = None,
    *,
    inplace: bool = False,
) -> TensorDictBase:
    """Roll the rows along ``dims`` (all batch dims flattened when ``dims`` is None);
    ``inplace`` writes the rolled rows back (to the file, for a PersistentTensorDict)."""
    nb = td.ndim
    if dims is not None and not isinstance(dims, int) and not len(dims):
        dims = None
    if dims is None:
        n = math.prod(td.batch_size)

        def fn(t: torch.Tensor) -> torch.Tensor:
            flat = t.reshape((n,) + tuple(t.shape[nb:]))
            return flat.roll(shifts, 0).reshape(t.shape)
    else:
        ds: int | tuple[int, ...] = (
            normalize_dim(td, dims)
            if isinstance(dims, int)
            else tuple(normalize_dim(td, d) for d in dims)
        )

        def fn(t: torch.Tensor) -> torch.Tensor:
            return t.roll(shifts, ds)

    out = _batch_map(td, fn)
    if inplace:
        return cast("TensorDictBase", td.update_(out))
    return out


@last_op()
def rot90(td: TensorDictBase, k: int = 1, dims: Sequence[int] = (0, 1)) -> TensorDictBase:
    if td.ndim < 2:
        raise UnsupportedOperationError("rot90 requires at least 2 batch dimensions")
    if len(dims) != 2:
        raise UnsupportedOperationError("rot90 requires exactly 2 dims")
    ds = (normalize_dim(td, dims[0]), normalize_dim(td, dims[1]))
    if k % 4 == 0:
        return td
    return _batch_map(td, lambda t: t.rot90(k, ds))


def narrow(td: TensorDictBase, dim: int, start: int, length: int) -> TensorDictBase:
    d = normalize_dim(td, dim)
    return _batch_map(td, lambda t: t.narrow(d, start, length))


def tile(td: TensorDictBase, dims: int | Sequence[int]) -> TensorDictBase:
    reps = _dims_arg(dims)
    nb = td.ndim
    lead = (1,) * max(0, nb - len(reps)) + reps
    return _batch_map(td, lambda t: t.tile(lead + (1,) * (t.ndim - nb)))


def repeat(td: TensorDictBase, *repeats: Any, inplace: bool = False) -> TensorDictBase:
    """Repeat the rows ``repeats[i]`` times along each batch dim (one count per dim);
    ``inplace`` swaps this tensordict's leaves for the result's (in memory only)."""
    if len(repeats) == 1 and not isinstance(repeats[0], int):
        one = repeats[0]
        if isinstance(one, torch.Tensor):
            reps = tuple(one.reshape(-1).tolist())
        elif isinstance(one, (list, tuple)):
            reps = tuple(one)
        else:
            raise PtdValueError(
                "repeats must be a sequence of integers, a tensor or a torch.Size object. "
                f"Got {type(one)} instead."
            )
    else:
        reps = tuple(repeats)
    nb = td.ndim
    if len(reps) != nb:
        raise PtdValueError(
            "The number of repeat elements must match the number of dimensions of the "
            f"tensordict. Got {len(reps)} but ndim={nb}."
        )
    out = _batch_map(td, lambda t: t.repeat(*reps, *((1,) * (t.ndim - nb))))
    return _rebind(td, out) if inplace else out


def repeat_interleave(
    td: TensorDictBase,
    repeats: int | torch.Tensor,
    dim: int | None = None,
    *,
    output_size: int | None = None,
    inplace: bool = False,
) -> TensorDictBase:
    """Repeat each row ``repeats`` times along ``dim`` (the flattened batch if None)."""
    if inplace:
        if dim is None or td.ndim == 0:
            raise UnsupportedOperationError(
                "repeat_interleave(inplace=True) requires an explicit dim and batch dims"
            )
        out = td.repeat_interleave(repeats, dim, output_size=output_size)
        return _rebind(td, out)
    if td.ndim == 0:
        return td.unsqueeze(0).repeat_interleave(repeats, dim, output_size=output_size)
    if dim is None:
        flat = td.flatten(0, -1) if td.ndim > 1 else td
        return flat.repeat_interleave(repeats, 0, output_size=output_size)
    d = normalize_dim(td, dim)
    bs = list(td.batch_size)
    if isinstance(repeats, torch.Tensor) and repeats.numel() != 1:
        bs[d] = int(repeats.sum())
    else:
        bs[d] *= int(repeats)
    return _batch_map(
        td, lambda t: t.repeat_interleave(repeats, dim=d, output_size=output_size), bs
    )


# ------------------------------------------------------------ selecting rows
def gather(
    td: TensorDictBase,
    dim: int,
    index: torch.Tensor,
    out: TensorDictBase | None = None,
    *,
    inplace: bool = False,
) -> TensorDictBase:
    """Pick rows along the batch dim ``dim`` with ``index``, as :func:`torch.gather`
    does; the result's batch size is ``index.shape``."""
    if not len(index):
        raise UnsupportedOperationError("Cannot use torch.gather with an empty index")
    nb = td.ndim
    d = dim + nb if dim < 0 else dim
    if not 0 <= d < nb:
        raise UnsupportedOperationError(
            f"Cannot gather tensordict with shape {td.batch_size} along dim {dim}."
        )
    keep = [min(a, b) for a, b in zip(index.shape, td.batch_size, strict=False)]

    def fn(t: torch.Tensor) -> torch.Tensor:
        idx = index.reshape(tuple(index.shape) + (1,) * max(0, t.ndim - index.ndim))
        shape = list(t.shape)
        shape[: len(keep)] = keep
        shape[d] = idx.shape[d]
        return torch.gather(t, d, idx.expand(shape))

    result = _batch_map(td, fn, index.shape, lock=False)
    if inplace:
        if out is not None:
            raise PtdValueError("`out` and `inplace=True` are mutually exclusive in gather.")
        return _rebind(td, result)
    if out is None:
        return result
    if out.batch_size != result.batch_size:
        raise UnsupportedOperationError(
            f"gather: out has batch size {list(out.batch_size)}, the result "
            f"{list(result.batch_size)}"
        )
    out.update(result)
    return out


def masked_select(
    td: TensorDictBase, mask: torch.Tensor, *, inplace: bool = False
) -> TensorDictBase:
    """The rows where ``mask`` (over the leading batch dims) is true, as one batch dim."""
    while mask.ndim > td.ndim and mask.shape[-1] == 1:
        mask = mask.squeeze(-1)
    out = td._detached(td._index(mask)).to_tensordict()
    return _rebind(td, out) if inplace else out


# ------------------------------------------------------------ splitting
def unbind(td: TensorDictBase, dim: int = 0) -> tuple[TensorDictBase, ...]:
    d = normalize_dim(td, dim)
    pre = (slice(None),) * d
    return tuple(td._detached(td._index(pre + (i,))) for i in range(td.batch_size[d]))


def split(
    td: TensorDictBase, split_size: int | Sequence[int], dim: int = 0
) -> tuple[TensorDictBase, ...]:
    d = normalize_dim(td, dim)
    n = td.batch_size[d]
    if isinstance(split_size, int) and split_size <= 0:
        raise PtdValueError(f"split_size must be positive, got {split_size}")
    if isinstance(split_size, int):
        sizes = [split_size] * (n // split_size) + ([n % split_size] if n % split_size else [])
        sizes = sizes or [0]  # an empty dim splits into one empty piece, as in torch
    else:
        sizes = list(split_size)
    if sum(sizes) != n:
        raise ArgumentError(f"split sizes {sizes} do not add up to dim {d} of size {n}")
    pre = (slice(None),) * d
    out, start = [], 0
    for s in sizes:
        piece = td._detached(td._index(pre + (slice(start, start + s),)))
        out.append(piece.lock_() if td.is_locked and not piece.is_locked else piece)
        start += s
    return tuple(out)


def chunk(td: TensorDictBase, chunks: int, dim: int = 0) -> tuple[TensorDictBase, ...]:
    if chunks < 1:
        raise PtdValueError(f"chunk expects a positive number of chunks, got {chunks}")
    d = normalize_dim(td, dim)
    n = td.batch_size[d]
    size = -(-n // chunks) if n else 1
    return td.split(size, d)


def tensor_split(
    td: TensorDictBase, indices_or_sections: int | Sequence[int] | torch.Tensor, dim: int = 0
) -> tuple[TensorDictBase, ...]:
    """Split like :func:`torch.tensor_split`: into ``n`` near-equal sections, or before
    each index of a list."""
    sections: Any = indices_or_sections
    if isinstance(sections, torch.Tensor):
        if sections.dtype != torch.long or sections.ndim > 1:
            raise PtdValueError(
                "tensor_split: a tensor indices_or_sections must be a 0-d or 1-d long tensor"
            )
        sections = sections.tolist()
    elif not isinstance(sections, (int, list, tuple)):
        raise PtdValueError(
            "indices_or_sections must be an integer, a list of integers, or a 1D tensor"
        )
    if td.ndim == 0:
        raise PtdValueError("tensor_split: received a tensordict with no batch dims")
    d = normalize_dim(td, dim)
    n = td.batch_size[d]
    if isinstance(sections, int):
        if sections <= 0:
            raise PtdValueError(
                f"tensor_split: number of sections must be greater than 0, but was {sections}"
            )
        q, r = divmod(n, sections)
        return td.split([q + 1 if i < r else q for i in range(sections)], d)
    bounds = [0]
    for i in sections:
        i = operator.index(i)
        bounds.append(min(max(i + n if i < 0 else i, 0), n))
    bounds.append(n)
    pre = (slice(None),) * d
    pieces = [
        td._detached(td._index(pre + (slice(a, max(a, b)),))) for a, b in itertools.pairwise(bounds)
    ]
    return tuple(p.lock_() if td.is_locked and not p.is_locked else p for p in pieces)
