"""Operations on the batch dims: reshape, permute, flip, roll, repeat, gather...

Each one is a function of the leading ``ndim`` dims of a tensor that keeps the trailing (feature)
dims, applied to every leaf by :meth:`ShapeMixin._batch_map`; a non-tensor entry follows through
an index grid of the batch shape. Results are new in-memory :class:`ptd.TensorDict`;
file-backed classes override the ones they refuse (see :mod:`ptd.persistent.refused`).

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

import math
import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import torch

from ptd.core import reshaping
from ptd.core.lastop import last_op
from ptd.core.nontensor import NonTensorStack
from ptd.core.registry import is_tensordict, new_tensordict
from ptd.core.rows import non_tensor_grid_map
from ptd.errors import (
    ArgumentError,
    NotSupportedError,
    PtdIndexError,
    PtdValueError,
    UnsupportedOperationError,
)

if TYPE_CHECKING:
    from ptd.core.base import TensorDictBase
    from ptd.core.protocols import ShapeHost

__all__ = ["ShapeMixin"]


def _shape_arg(shape: Sequence[Any]) -> list[int]:
    if len(shape) == 1 and isinstance(shape[0], (list, tuple, torch.Size)):
        return list(shape[0])
    return [int(s) for s in shape]


def _dims_arg(dims: Any) -> tuple[int, ...]:
    if isinstance(dims, int):
        return (dims,)
    return tuple(operator.index(d) for d in dims)


class ShapeMixin:
    """Operations on the batch dims. In-memory results; file-backed classes override the
    ones they refuse."""

    def _batch_map(
        self: ShapeHost,
        fn: Callable[[torch.Tensor], torch.Tensor],
        batch_size: Sequence[int] | None = None,
        *,
        lock: bool = True,
    ) -> TensorDictBase:
        """A new TensorDict whose leaves are ``fn(leaf)``; ``fn`` acts on the leading
        ``self.ndim`` dims and keeps the rest. ``batch_size`` is the new batch size when it
        cannot be found by running ``fn`` on a meta tensor. The result of a locked tensordict
        is locked (as tensordict's shape ops are), unless ``lock=False``."""

        if batch_size is None:
            new_bs = fn(torch.empty(tuple(self.batch_size), device="meta")).shape
        else:
            new_bs = torch.Size(batch_size)
        out = new_tensordict({}, batch_size=new_bs, device=self.device)
        for key in self._keys_str():
            value = self._get_str(key)
            if is_tensordict(value):
                value = value._batch_map(fn, lock=lock)
            elif isinstance(value, torch.Tensor):
                value = fn(value)
            else:
                value = non_tensor_grid_map(
                    value,
                    value.batch_size[: self.ndim]
                    if isinstance(value, NonTensorStack)
                    else self.batch_size,
                    fn,
                )
            out._set_str(key, value, inplace=False)
        if lock and self.is_locked:
            out.lock_()
        return out

    def _dim(self: ShapeHost, dim: int, extra: int = 0) -> int:
        n = self.ndim + extra
        if not -n <= dim < n:
            raise PtdIndexError(
                f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got "
                f"{dim}): the tensordict has {self.ndim} batch dims"
            )
        return dim % n if n else 0

    def _rebind(self: ShapeHost, result: TensorDictBase) -> TensorDictBase:
        """Make this tensordict hold ``result``'s entries and batch size (nested tensordicts
        keep their identity): the ``inplace=True`` of the shape ops, in memory only."""
        if self._reads_copy():
            raise NotSupportedError(
                "An in-place shape operation that changes the batch size is not supported on "
                f"{type(self).__name__}: call `to_tensordict()` first, or use inplace=False."
            )
        self._check_unlocked()
        for key in list(self._keys_str()):
            if not is_tensordict(self._get_str(key)) or key not in result._keys_str():
                self._del_str(key)
        for key in result._keys_str():
            new = result._get_str(key)
            if key in self._keys_str() and is_tensordict(new):
                self._get_str(key)._rebind(new)
        # both container classes give batch_size a setter
        cast(Any, self).batch_size = result.batch_size
        for key in result._keys_str():
            if key not in self._keys_str():
                self._set_str(key, result._get_str(key), inplace=False)
        return cast("TensorDictBase", self)

    # ------------------------------------------------------------ reshaping
    def reshape(self: ShapeHost, *shape: Any, **kwargs: Any) -> TensorDictBase:
        """The batch dims reshaped (``*shape``, one sequence or ``size=``; one ``-1``);
        ``inplace=True`` rebinds this tensordict. See :mod:`ptd.core.reshaping`."""
        return reshaping.reshape(cast("TensorDictBase", self), shape, kwargs)

    @last_op()
    def view(
        self: ShapeHost, *shape: Any, size: Any = None, batch_size: Any = None
    ) -> TensorDictBase:
        """``view(*shape)`` on the batch dims, or ``view(dtype)`` on every tensor leaf (the
        leaves' last dim must then still fit the batch size, or ``batch_size``)."""
        return reshaping.view(cast("TensorDictBase", self), shape, size, batch_size)

    @last_op()
    def flatten(self: ShapeHost, start_dim: int = 0, end_dim: int = -1) -> TensorDictBase:
        if self.ndim == 0:
            return self._batch_map(lambda t: t.unsqueeze(0))
        s, e = self._dim(start_dim), self._dim(end_dim)
        if e < s:
            raise PtdValueError(
                f"The end dimension must be greater or equal to the start dim: got start_dim="
                f"{start_dim} and end_dim={end_dim}"
            )
        return self._batch_map(lambda t: t.flatten(s, e))

    @last_op()
    def unflatten(self: ShapeHost, dim: int, unflattened_size: Sequence[int]) -> TensorDictBase:
        d = self._dim(dim)
        sizes = tuple(unflattened_size)
        return self._batch_map(lambda t: t.unflatten(d, sizes))

    @last_op()
    def unsqueeze(self: ShapeHost, dim: int) -> TensorDictBase:
        if not -self.ndim - 1 <= dim <= self.ndim:
            raise ArgumentError(
                "unsqueezing is allowed for dims comprised between `-td.batch_dims - 1` and "
                f"`td.batch_dims` only. Got dim={dim} with a batch size of {self.batch_size}."
            )
        d = self._dim(dim, extra=1)
        return self._batch_map(lambda t: t.unsqueeze(d))

    @last_op()
    def squeeze(self: ShapeHost, dim: int | None = None) -> TensorDictBase:
        """Remove the batch dims of size 1 (``dim``: that one only); the tensordict itself
        when there is none, as in tensordict."""
        if dim is None:
            dims = [i for i, n in enumerate(self.batch_size) if n == 1]
        else:
            d = self._dim(dim)
            dims = [d] if self.batch_size[d] == 1 else []
        if not dims:
            return cast("TensorDictBase", self)
        return self._batch_map(lambda t: t.squeeze(dims))

    @last_op()
    def permute(self: ShapeHost, *dims: Any) -> TensorDictBase:
        order = [self._dim(d) for d in _shape_arg(dims)]
        if sorted(order) != list(range(self.ndim)):
            raise PtdValueError(
                f"permute needs a permutation of the {self.ndim} batch dims, got {list(dims)}"
            )
        nb = self.ndim
        return self._batch_map(lambda t: t.permute(*order, *range(nb, t.ndim)))

    @last_op()
    def transpose(self: ShapeHost, dim0: int, dim1: int) -> TensorDictBase:
        a, b = self._dim(dim0), self._dim(dim1)
        return self._batch_map(lambda t: t.transpose(a, b))

    @last_op()
    def swapaxes(self: ShapeHost, axis0: int, axis1: int) -> TensorDictBase:
        return self.transpose(axis0, axis1)

    @last_op()
    def swapdims(self: ShapeHost, dim0: int, dim1: int) -> TensorDictBase:
        return self.transpose(dim0, dim1)

    @last_op()
    def movedim(
        self: ShapeHost, source: int | Sequence[int], destination: int | Sequence[int]
    ) -> TensorDictBase:
        """Move the batch dims ``source`` to the positions ``destination`` (a permutation)."""
        src, dst = _dims_arg(source), _dims_arg(destination)
        if len(src) != len(dst):
            raise PtdValueError(
                "movedim: source and destination must have the same number of elements, got "
                f"{len(src)} and {len(dst)}"
            )
        src = tuple(self._dim(d) for d in src)
        dst = tuple(self._dim(d) for d in dst)
        if len(set(src)) != len(src):
            raise UnsupportedOperationError("movedim: repeated dim in source")
        if len(set(dst)) != len(dst):
            raise UnsupportedOperationError("movedim: repeated dim in destination")
        if src == dst:
            return cast("TensorDictBase", self)
        order = [i for i in range(self.ndim) if i not in src]
        for d, s in sorted(zip(dst, src, strict=True)):
            order.insert(d, s)
        return self.permute(*order)

    moveaxis = movedim

    def expand(self: ShapeHost, *shape: Any) -> TensorDictBase:
        new = tuple(_shape_arg(shape))
        nb = self.ndim
        if len(new) < nb:
            raise UnsupportedOperationError(
                f"the number of sizes provided ({len(new)}) must be greater or equal to the "
                f"number of batch dims ({nb})"
            )
        lead = len(new) - nb
        new = new[:lead] + tuple(
            n if s == -1 else s for s, n in zip(new[lead:], self.batch_size, strict=True)
        )
        return self._batch_map(lambda t: t.expand(new + tuple(t.shape[nb:])))

    def expand_as(self: ShapeHost, other: Any) -> TensorDictBase:
        """Expand to the shape of a tensor, or leaf by leaf to those of a tensordict."""
        if is_tensordict(other):
            return self.apply(lambda x, y: x.expand_as(y), other, batch_size=other.batch_size)
        return self.expand(*other.shape)

    def broadcast_to(self: ShapeHost, shape: Sequence[int]) -> TensorDictBase:
        return self.expand(*shape)

    @last_op()
    def atleast_1d(self: ShapeHost) -> TensorDictBase:
        return cast("TensorDictBase", self) if self.ndim >= 1 else self.unsqueeze(0)

    @last_op()
    def atleast_2d(self: ShapeHost) -> TensorDictBase:
        out = cast("TensorDictBase", self)
        while out.ndim < 2:
            out = out.unsqueeze(0)
        return out

    @last_op()
    def atleast_3d(self: ShapeHost) -> TensorDictBase:
        """New leading batch dims of size 1 until there are 3 (as tensordict does; torch puts
        the third one last)."""
        out = cast("TensorDictBase", self)
        while out.ndim < 3:
            out = out.unsqueeze(0)
        return out

    def pad(
        self: ShapeHost,
        pad_size: Sequence[int],
        value: float = 0.0,
        inplace: bool = False,
        safe: bool = True,
    ) -> TensorDictBase:
        """Pad the batch dims with ``value``: ``pad_size`` is ``(dim0_before, dim0_after,
        dim1_before, ...)``, from the first batch dim (unlike ``torch.nn.functional.pad``)."""
        sizes = [int(x) for x in pad_size]
        if len(sizes) > 2 * self.ndim:
            raise ArgumentError(
                "The length of pad_size must be <= 2 * the number of batch dimensions, got "
                f"{len(sizes)} for {self.ndim} batch dims"
            )
        if len(sizes) % 2:
            raise ArgumentError("pad_size must have an even number of dimensions")
        pairs = [(sizes[i], sizes[i + 1]) for i in range(0, len(sizes), 2)]

        def fn(t: torch.Tensor) -> torch.Tensor:
            flat: list[int] = []
            for d in reversed(range(t.ndim)):
                flat += list(pairs[d]) if d < len(pairs) else [0, 0]
            return torch.nn.functional.pad(t, flat, value=value)

        out = self._batch_map(fn, lock=False)
        return self._rebind(out) if inplace else out

    # ------------------------------------------------------------ reordering rows
    @last_op()
    def flip(self: ShapeHost, dims: int | Sequence[int]) -> TensorDictBase:
        ds = tuple(self._dim(d) for d in _dims_arg(dims))
        return self._batch_map(lambda t: t.flip(ds))

    @last_op()
    def fliplr(self: ShapeHost) -> TensorDictBase:
        if self.ndim < 2:
            raise UnsupportedOperationError("fliplr requires at least 2 batch dimensions")
        return self.flip(1)

    @last_op()
    def flipud(self: ShapeHost) -> TensorDictBase:
        if self.ndim < 1:
            raise UnsupportedOperationError("flipud requires at least 1 batch dimension")
        return self.flip(0)

    @last_op()
    def roll(
        self: ShapeHost,
        shifts: int | Sequence[int],
        dims: int | Sequence[int] | None = None,
        *,
        inplace: bool = False,
    ) -> TensorDictBase:
        """Roll the rows along ``dims`` (all batch dims flattened when ``dims`` is None);
        ``inplace`` writes the rolled rows back (to the file, for a PersistentTensorDict)."""
        nb = self.ndim
        if dims is not None and not isinstance(dims, int) and not len(dims):
            dims = None
        if dims is None:
            n = math.prod(self.batch_size)

            def fn(t: torch.Tensor) -> torch.Tensor:
                flat = t.reshape((n,) + tuple(t.shape[nb:]))
                return flat.roll(shifts, 0).reshape(t.shape)
        else:
            ds: int | tuple[int, ...] = (
                self._dim(dims) if isinstance(dims, int) else tuple(self._dim(d) for d in dims)
            )

            def fn(t: torch.Tensor) -> torch.Tensor:
                return t.roll(shifts, ds)

        out = self._batch_map(fn)
        if inplace:
            return self.update_(out)
        return out

    @last_op()
    def rot90(self: ShapeHost, k: int = 1, dims: Sequence[int] = (0, 1)) -> TensorDictBase:
        if self.ndim < 2:
            raise UnsupportedOperationError("rot90 requires at least 2 batch dimensions")
        if len(dims) != 2:
            raise UnsupportedOperationError("rot90 requires exactly 2 dims")
        ds = (self._dim(dims[0]), self._dim(dims[1]))
        if k % 4 == 0:
            return cast("TensorDictBase", self)
        return self._batch_map(lambda t: t.rot90(k, ds))

    def narrow(self: ShapeHost, dim: int, start: int, length: int) -> TensorDictBase:
        d = self._dim(dim)
        return self._batch_map(lambda t: t.narrow(d, start, length))

    def tile(self: ShapeHost, dims: int | Sequence[int]) -> TensorDictBase:
        reps = _dims_arg(dims)
        nb = self.ndim
        lead = (1,) * max(0, nb - len(reps)) + reps
        return self._batch_map(lambda t: t.tile(lead + (1,) * (t.ndim - nb)))

    def repeat(self: ShapeHost, *repeats: Any, inplace: bool = False) -> TensorDictBase:
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
        nb = self.ndim
        if len(reps) != nb:
            raise PtdValueError(
                "The number of repeat elements must match the number of dimensions of the "
                f"tensordict. Got {len(reps)} but ndim={nb}."
            )
        out = self._batch_map(lambda t: t.repeat(*reps, *((1,) * (t.ndim - nb))))
        return self._rebind(out) if inplace else out

    def repeat_interleave(
        self: ShapeHost,
        repeats: int | torch.Tensor,
        dim: int | None = None,
        *,
        output_size: int | None = None,
        inplace: bool = False,
    ) -> TensorDictBase:
        """Repeat each row ``repeats`` times along ``dim`` (the flattened batch if None)."""
        if inplace:
            if dim is None or self.ndim == 0:
                raise UnsupportedOperationError(
                    "repeat_interleave(inplace=True) requires an explicit dim and batch dims"
                )
            out = self.repeat_interleave(repeats, dim, output_size=output_size)
            return self._rebind(out)
        if self.ndim == 0:
            return self.unsqueeze(0).repeat_interleave(repeats, dim, output_size=output_size)
        if dim is None:
            flat = self.flatten(0, -1) if self.ndim > 1 else self
            return flat.repeat_interleave(repeats, 0, output_size=output_size)
        d = self._dim(dim)
        bs = list(self.batch_size)
        if isinstance(repeats, torch.Tensor) and repeats.numel() != 1:
            bs[d] = int(repeats.sum())
        else:
            bs[d] *= int(repeats)
        return self._batch_map(
            lambda t: t.repeat_interleave(repeats, dim=d, output_size=output_size), bs
        )

    # ------------------------------------------------------------ selecting rows
    def gather(
        self: ShapeHost,
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
        nb = self.ndim
        d = dim + nb if dim < 0 else dim
        if not 0 <= d < nb:
            raise UnsupportedOperationError(
                f"Cannot gather tensordict with shape {self.batch_size} along dim {dim}."
            )
        keep = [min(a, b) for a, b in zip(index.shape, self.batch_size, strict=False)]

        def fn(t: torch.Tensor) -> torch.Tensor:
            idx = index.reshape(tuple(index.shape) + (1,) * max(0, t.ndim - index.ndim))
            shape = list(t.shape)
            shape[: len(keep)] = keep
            shape[d] = idx.shape[d]
            return torch.gather(t, d, idx.expand(shape))

        result = self._batch_map(fn, index.shape, lock=False)
        if inplace:
            if out is not None:
                raise PtdValueError("`out` and `inplace=True` are mutually exclusive in gather.")
            return self._rebind(result)
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
        self: ShapeHost, mask: torch.Tensor, *, inplace: bool = False
    ) -> TensorDictBase:
        """The rows where ``mask`` (over the leading batch dims) is true, as one batch dim."""
        while mask.ndim > self.ndim and mask.shape[-1] == 1:
            mask = mask.squeeze(-1)
        out = self._detached(self._index(mask)).to_tensordict()
        return self._rebind(out) if inplace else out

    # ------------------------------------------------------------ splitting
    def unbind(self: ShapeHost, dim: int = 0) -> tuple[TensorDictBase, ...]:
        d = self._dim(dim)
        pre = (slice(None),) * d
        return tuple(self._detached(self._index(pre + (i,))) for i in range(self.batch_size[d]))

    def split(
        self: ShapeHost, split_size: int | Sequence[int], dim: int = 0
    ) -> tuple[TensorDictBase, ...]:
        d = self._dim(dim)
        n = self.batch_size[d]
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
            piece = self._detached(self._index(pre + (slice(start, start + s),)))
            out.append(piece.lock_() if self.is_locked and not piece.is_locked else piece)
            start += s
        return tuple(out)

    def chunk(self: ShapeHost, chunks: int, dim: int = 0) -> tuple[TensorDictBase, ...]:
        if chunks < 1:
            raise PtdValueError(f"chunk expects a positive number of chunks, got {chunks}")
        d = self._dim(dim)
        n = self.batch_size[d]
        size = -(-n // chunks) if n else 1
        return self.split(size, d)

    def tensor_split(
        self: ShapeHost, indices_or_sections: int | Sequence[int] | torch.Tensor, dim: int = 0
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
        if self.ndim == 0:
            raise PtdValueError("tensor_split: received a tensordict with no batch dims")
        d = self._dim(dim)
        n = self.batch_size[d]
        if isinstance(sections, int):
            if sections <= 0:
                raise PtdValueError(
                    f"tensor_split: number of sections must be greater than 0, but was {sections}"
                )
            q, r = divmod(n, sections)
            return self.split([q + 1 if i < r else q for i in range(sections)], d)
        bounds = [0]
        for i in sections:
            i = operator.index(i)
            bounds.append(min(max(i + n if i < 0 else i, 0), n))
        bounds.append(n)
        pre = (slice(None),) * d
        pieces = [
            self._detached(self._index(pre + (slice(a, max(a, b)),)))
            for a, b in zip(bounds[:-1], bounds[1:], strict=True)
        ]
        return tuple(p.lock_() if self.is_locked and not p.is_locked else p for p in pieces)
