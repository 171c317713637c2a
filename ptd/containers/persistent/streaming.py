"""Reductions of a PersistentTensorDict that read each leaf in row slabs.

:class:`StreamedLeaves` is the :class:`~ptd.ops.leaf_access.LeafAccess` of every
PersistentTensorDict: the reductions hand it each tensor leaf with a
:class:`~ptd.ops.leafop.LeafOp`. For a leaf larger than one slab
(:func:`ptd.transfer.slabs.slab_rows`), it never reads it whole:

- an op that leaves the first dim alone (``sum(dim=1)``, ``dim="feature"``, ``softmax(1)``,
  ``cummax(1)``...) runs slab by slab and the results are concatenated;
- a reduction over the first dim or over every element (``sum``, ``nansum``, ``mean``,
  ``nanmean``, ``prod``, ``std``/``var`` (Chan's parallel update), ``amin``/``amax``,
  ``min``/``max`` with their indices, ``all``/``any`` (which stop at the first deciding slab),
  ``norm``) keeps a running state of the size of the result;
- anything else (``quantile``, ``cummax(0)``, ``logsumexp(0)``, complex leaves) reads the leaf
  whole, one leaf at a time.

``reduce=True`` without ``dim`` streams the same way over the slabs of every leaf. Sums and
means accumulate in float64 (int64 for integers) and are cast to torch's result dtype at the
end, so they may differ from an in-memory reduction by float rounding only. In-place
elementwise ops stream through :meth:`StreamedLeaves.map_inplace`.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

import torch

from ptd.containers.persistent.leaves import slab_operand
from ptd.ops.leaf_access import LeafAccess, LeafMap
from ptd.ops.leafop import NO_DEFAULT, LeafOp
from ptd.transfer.slabs import row_slabs, slab_rows

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase
    from ptd.containers.persistent.persistent_tensordict import PersistentTensorDict


__all__ = ["STREAMED", "StreamedLeaves"]

_ACCUMULATED = frozenset(
    {
        "sum",
        "nansum",
        "mean",
        "nanmean",
        "prod",
        "std",
        "var",
        "amin",
        "amax",
        "min",
        "max",
        "all",
        "any",
        "norm",
    }
)


class StreamedLeaves(LeafAccess):
    """The leaves of a store: read into new tensors, written back into the stored entries,
    and for whole-leaf work cut into row slabs (:func:`ptd.transfer.slabs.slab_rows`)."""

    reads_copy = True
    writes_into_entries = True
    #: a tensordict NonTensorStack whose elements are all equal is stored as one value, as
    #: tensordict writes it (see :func:`ptd.ops.foreign.adopt_non_tensor`)
    collapse_foreign_stacks = True

    def slabs(self, td: TensorDictBase, key: str) -> Iterator[tuple[int, torch.Tensor]] | None:
        """``(first row, rows)`` of the tensor leaf ``key``, one slab at a time; None when
        the leaf fits in one slab (or has no rows to cut)."""
        meta = td._meta_str(key)
        shape = tuple(meta.shape)
        if not td.batch_size or not shape or shape[0] < 2:
            return None
        rows = slab_rows(shape, meta.dtype.itemsize if meta.dtype is not None else 8)
        if rows >= shape[0]:
            return None
        return ((sl.start, td._index(sl)._get_str(key)) for sl in row_slabs(shape[0], rows))

    def reduce(self, td: TensorDictBase, key: str, op: LeafOp) -> Any:
        meta = td._meta_str(key)
        if meta.dtype is None or meta.dtype.is_complex:
            return super().reduce(td, key, op)
        slabs = self.slabs(td, key)
        if slabs is None:
            return super().reduce(td, key, op)
        ndim = len(meta.shape)
        dims = op.reduced_dims(ndim)
        if dims is not None and 0 not in dims:
            return _concat([op(x) for _, x in slabs], op.out_dim0)
        if op.name not in _ACCUMULATED or (op.name == "norm" and op.dim is not None):
            return super().reduce(td, key, op)
        keepdim = bool(op.keepdim)
        if dims is None:
            flat = ((start, x.reshape(-1)) for start, x in slabs)
            name = {"min": "amin", "max": "amax"}.get(op.name, op.name)
            result = _accumulate(LeafOp(name, dim=0, kwargs=op.kwargs), flat, (0,), first_op=op)
            return result.reshape((1,) * ndim if keepdim else ())
        return _accumulate(op, slabs, dims, first_op=op)

    def check_writable(self, td: TensorDictBase) -> None:
        """An in-place op on a read-only store fails as any write does, before the dtype
        checks: the store, not the operands, is what refuses it."""
        store = cast("PersistentTensorDict", td)
        for parts, meta in td._metas(True):
            if meta.kind == "tensor":
                store._store.backend.check_writable("/".join(store._path + parts))
                break

    def reduce_together(
        self, td: TensorDictBase, name: str, dim: Any, keepdim: Any, **kwargs: Any
    ) -> Any:
        """``reduce=True`` without ``dim``: the slabs of every leaf, flattened and cast to
        the dtype ``torch.cat`` would give them, go through one running state."""
        if dim is not NO_DEFAULT or name not in _ACCUMULATED - {"all", "any", "norm"}:
            return super().reduce_together(td, name, dim, keepdim, **kwargs)
        leaves = [(p, m) for p, m in td._metas(True) if m.kind == "tensor"]
        if not leaves or any(m.dtype is None or m.dtype.is_complex for _, m in leaves):
            return super().reduce_together(td, name, dim, keepdim, **kwargs)
        dtype = functools.reduce(
            torch.promote_types, [m.dtype for _, m in leaves if m.dtype is not None]
        )
        flat_name = {"min": "amin", "max": "amax"}.get(name, name)

        def chunks() -> Iterator[tuple[int, torch.Tensor]]:
            for parts, _ in leaves:
                node, last = td._walk(parts)
                slabs = self.slabs(node, last)
                if slabs is None:
                    yield 0, node._get_str(last).reshape(-1).to(dtype)
                else:
                    for start, x in slabs:
                        yield start, x.reshape(-1).to(dtype)

        first = LeafOp(name, kwargs=kwargs)
        return _accumulate(LeafOp(flat_name, dim=0, kwargs=kwargs), chunks(), (0,), first_op=first)

    def map_inplace(self, td: TensorDictBase, fn: LeafMap, other: Any = None) -> TensorDictBase:
        """Apply ``fn`` leaf by leaf and, for large leaves, slab by slab along the first
        batch dim, writing each result back: memory stays bounded by the slab size."""
        store = cast("PersistentTensorDict", td)
        for parts, meta in store._tensor_leaf_metas():
            n = store._batch[0] if store._batch else 0
            slabs: list[slice | None] = [None]
            rows = slab_rows(tuple(meta.shape), meta.dtype.itemsize if meta.dtype else 8)
            if store._batch and n > 1 and rows < n:
                slabs = list(row_slabs(n, rows))
            for sl in slabs:
                view = store if sl is None else store._index(sl)
                node, last = view._walk(parts)
                path = node._path + (last,)
                leaf_meta = node._tree.meta(path)
                operand = slab_operand(other, parts, sl, len(meta.shape))
                result = fn(node._read_leaf(path, leaf_meta), operand)
                if result is not None:
                    node._write_leaf(path, leaf_meta, result)
        return td

    def data_ptr(self, td: TensorDictBase, key: str, storage: bool) -> int:
        """A stored leaf has no memory address until read: 0 (nothing is read)."""
        return 0


#: the one instance every PersistentTensorDict shares (it holds no state)
STREAMED = StreamedLeaves()


def _concat(parts: list[Any], dim: int) -> Any:
    if isinstance(parts[0], tuple):
        fields = [torch.cat([p[i] for p in parts], dim) for i in range(len(parts[0]))]
        return tuple(fields)
    return torch.cat(parts, dim)


def _wide(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.float64) if x.is_floating_point() else x


def _accumulate(
    op: LeafOp,
    slabs: Iterator[tuple[int, torch.Tensor]],
    dims: tuple[int, ...],
    *,
    first_op: LeafOp,
) -> Any:
    """Reduce ``dims`` (which include dim 0, the one slabs cut) of the concatenation of
    ``slabs`` with a running state. ``first_op`` runs on the first slab only: it raises what
    torch raises for the leaf (an integer ``mean``...) and gives the result dtype."""
    name = op.name
    kw = dict(op.kwargs)
    keepdim = bool(op.keepdim)
    state: Any = None
    out_dtype: torch.dtype | None = None
    ref: Any = None
    for start, x in slabs:
        if out_dtype is None:
            with warnings.catch_warnings():
                # torch's warnings about this slab alone (too few rows for std...) are noise
                warnings.simplefilter("ignore")
                ref = first_op(x)
            out_dtype = (ref[0] if isinstance(ref, tuple) else ref).dtype
        if x.numel() == 0:
            continue  # an empty leaf among others (reduce=True) adds nothing
        if name in ("sum", "nansum", "prod"):
            wx = _wide(x) if kw.get("dtype") is None else _wide(x.to(kw["dtype"]))
            part = getattr(wx, name)(dim=dims if name != "prod" else dims[0], keepdim=True)
            if state is None:
                state = part
            elif name == "prod":
                state = state * part
            else:
                state = state + part
        elif name in ("mean", "nanmean"):
            wx = _wide(x if kw.get("dtype") is None else x.to(kw["dtype"]))
            if name == "mean":
                s = wx.sum(dim=dims, keepdim=True)
                c = torch.full_like(s, x.numel() // max(1, s.numel()), dtype=torch.float64)
            else:
                s = wx.nansum(dim=dims, keepdim=True)
                c = (~wx.isnan()).sum(dim=dims, keepdim=True).to(torch.float64)
            state = (s, c) if state is None else (state[0] + s, state[1] + c)
        elif name in ("std", "var"):
            wx = x.to(torch.float64)
            m = wx.mean(dim=dims, keepdim=True)
            n = float(x.numel() // max(1, m.numel()))
            m2 = ((wx - m) ** 2).sum(dim=dims, keepdim=True)
            if state is None:
                state = (n, m, m2)
            else:
                na, ma, m2a = state
                tot = na + n
                delta = m - ma
                state = (tot, ma + delta * (n / tot), m2a + m2 + delta**2 * (na * n / tot))
        elif name in ("amin", "amax"):
            part = getattr(x, name)(dim=dims, keepdim=True)
            if state is not None:
                part = (torch.minimum if name == "amin" else torch.maximum)(state, part)
            state = part
        elif name in ("min", "max"):
            v, i = getattr(x, name)(dim=dims[0], keepdim=True)
            i = i + start
            if state is None:
                state = (v, i)
            else:
                ov, oi = state
                better = v < ov if name == "min" else v > ov
                if v.is_floating_point():
                    better = better | (v.isnan() & ~ov.isnan())
                state = (torch.where(better, v, ov), torch.where(better, i, oi))
        elif name in ("all", "any"):
            part = getattr(x, name)(dim=dims, keepdim=True) if dims else getattr(x, name)()
            state = part if state is None else (state & part if name == "all" else state | part)
            if state.numel() == 1 and bool(state) == (name == "any"):
                break  # decided: no later slab can change it
        elif name == "norm":
            part = (_wide(x.to(kw["dtype"]) if kw.get("dtype") else x) ** 2).sum()
            state = part if state is None else state + part
    if state is None:
        return ref  # nothing but empty slabs: what torch gives for the first one
    assert out_dtype is not None
    if name in ("mean", "nanmean"):
        result = state[0] / state[1]
    elif name in ("std", "var"):
        n, _, m2 = state
        denom = max(0.0, n - kw.get("correction", 1))
        result = m2 / denom if denom else m2 / torch.zeros_like(m2)
        if name == "std":
            result = result.sqrt()
    elif name == "norm":
        result = state.sqrt()
    else:
        result = state
    if name in ("min", "max"):
        v, i = result
        if not keepdim:
            v, i = v.squeeze(dims), i.squeeze(dims)
        return v.to(out_dtype) if op.values_only else (v.to(out_dtype), i)
    if not keepdim and name != "norm":
        result = result.squeeze(dims)
    return result.to(out_dtype)
