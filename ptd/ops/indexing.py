"""Lazy index arithmetic for file-backed views: pure functions, no I/O.

A view of a stored tensordict is described by its *entries* (:mod:`ptd.ops.index_entries`:
ints, slices, :class:`Points` of index arrays, and :class:`NewDim` for a ``None`` in an
index). :func:`compose` applies a user index (int, slice, list, int/bool tensor or array,
Ellipsis, None, or a tuple of those) to a view, giving the entries of the new view, so views of
views never touch the file. :func:`plan_read` / :func:`plan_write` (:mod:`ptd.ops.index_plan`,
re-exported here) turn the stored entries into backend selections.

>>> import numpy as np
>>> entries = full_entries((10,))
>>> entries = compose(entries, (10,), slice(2, 9))
>>> entries = compose(entries, (7,), [4, 0, 4])
>>> entries
(Points(arrays=(array([6, 2, 6]),)),)
>>> plan = plan_read(entries, row_nbytes=1 << 20)
>>> plan.selection, plan.post
((array([2, 6]),), (array([1, 0, 1]),))
>>> compose(full_entries((4, 3)), (4, 3), (None, 0))
(NewDim(size=1), 0, slice(0, 3, 1))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ptd.errors import PtdIndexError
from ptd.ops.index_entries import (
    Entry,
    NewDim,
    Points,
    drop_index,
    expand_new_dims,
    full_entries,
    has_new_dims,
    stored_entries,
    stored_ndim,
    unsqueeze_index,
    view_shape,
)
from ptd.ops.index_plan import (
    ReadPlan,
    WritePlan,
    apply_post,
    box_assign,
    plan_read,
    plan_write,
)

__all__ = [
    "Entry",
    "NewDim",
    "Points",
    "ReadPlan",
    "WritePlan",
    "apply_post",
    "box_assign",
    "compose",
    "drop_index",
    "expand_new_dims",
    "full_entries",
    "has_new_dims",
    "index_names",
    "is_key_index",
    "plan_read",
    "plan_write",
    "stored_entries",
    "stored_ndim",
    "unsqueeze_index",
    "view_shape",
]


def is_key_index(idx: Any) -> bool:
    """True when ``idx`` is a key (str or tuple of str) rather than a batch index."""
    if isinstance(idx, str):
        return True
    return isinstance(idx, tuple) and len(idx) > 0 and all(is_key_index(k) for k in idx)


# --- normalising a user index --------------------------------------------------------------
def _as_index_array(obj: Any) -> np.ndarray | None:
    """An int64/bool numpy array for list/tensor/ndarray indices, None for anything else."""
    if isinstance(obj, torch.Tensor):
        obj = obj.detach().cpu().numpy()
    elif isinstance(obj, (list, range)):
        obj = np.asarray(obj)
        if obj.size == 0:
            obj = obj.astype(np.int64)
    if isinstance(obj, np.ndarray):
        if obj.dtype == np.bool_:
            return obj
        if obj.dtype.kind not in "iu":
            raise PtdIndexError(f"index arrays must hold integers or bools, got dtype {obj.dtype}")
        return obj.astype(np.int64, copy=False)
    return None


def _split_index(index: Any, shape: tuple[int, ...]) -> list[Any]:
    """A user index as a list of items: int, slice, 1-D int array, or ``("mask", bool_array)``
    (which consumes ``mask.ndim`` dims); Ellipsis expanded, missing trailing dims added."""
    ndim = len(shape)
    items = list(index) if isinstance(index, tuple) else [index]
    out: list[Any] = []
    for it in items:
        if it is Ellipsis:
            out.append(Ellipsis)
            continue
        if isinstance(it, (int, np.integer)) and not isinstance(it, bool):
            out.append(int(it))
            continue
        if isinstance(it, torch.Tensor) and it.ndim == 0 and it.dtype != torch.bool:
            out.append(int(it.item()))
            continue
        if isinstance(it, slice):
            out.append(it)
            continue
        arr = _as_index_array(it)
        if arr is None:
            raise PtdIndexError(
                f"cannot index a tensordict with an object of type {type(it).__name__}"
            )
        if arr.dtype == np.bool_:
            if arr.ndim == 0:
                raise PtdIndexError("a 0-d bool index cannot index a file-backed tensordict lazily")
            out.append(("mask", arr))
        else:
            if arr.ndim != 1:
                raise PtdIndexError(
                    f"index arrays must be 1-D to index a file-backed tensordict lazily, got "
                    f"shape {tuple(arr.shape)}; call to_tensordict() first"
                )
            out.append(arr)
    n_ellipsis = sum(1 for it in out if it is Ellipsis)
    if n_ellipsis > 1:
        raise PtdIndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(it[1].ndim if isinstance(it, tuple) else 1 for it in out if it is not Ellipsis)
    if consumed > ndim:
        raise PtdIndexError(
            f"too many indices for tensordict: batch is {ndim}-dimensional, but {consumed} were indexed"
        )
    if n_ellipsis:
        pos = next(i for i, it in enumerate(out) if it is Ellipsis)
        out[pos : pos + 1] = [slice(None)] * (ndim - consumed)
    else:
        out.extend([slice(None)] * (ndim - consumed))
    # check masks against the dims they cover
    vdim = 0
    for it in out:
        if isinstance(it, tuple):
            mask = it[1]
            covered = shape[vdim : vdim + mask.ndim]
            if tuple(mask.shape) != tuple(covered):
                raise PtdIndexError(
                    f"the shape of the mask {list(mask.shape)} at index {vdim} does not match "
                    f"the shape of the indexed tensordict {list(covered)}"
                )
            vdim += mask.ndim
        else:
            vdim += 1
    return out


def _dims_of(item: Any) -> int:
    """How many batch dims a (non-None, non-Ellipsis) index item consumes: a bool mask its
    ndim, anything else one (what cannot index is refused later, by :func:`_split_index`)."""
    if isinstance(item, list):
        try:
            item = np.asarray(item)
        except ValueError:
            return 1
    if isinstance(item, (torch.Tensor, np.ndarray)) and item.dtype in (torch.bool, np.bool_):
        return max(1, item.ndim)
    return 1


def _insert_new_dims(
    entries: Sequence[Entry], shape: tuple[int, ...], index: Any
) -> tuple[Sequence[Entry], tuple[int, ...], Any]:
    """Turn each ``None`` of ``index`` into a :class:`NewDim` entry of the view (a dim of size
    1 at its place) and into a full slice of the index: the rest of :func:`compose` then
    sees no None. This is how torch and numpy treat None (so advanced indices separated by a
    None are moved first there, and refused here as when a slice separates them)."""
    items = list(index) if isinstance(index, tuple) else [index]
    if not any(it is None for it in items):
        return entries, shape, index
    ndim = len(shape)
    consumed = sum(_dims_of(it) for it in items if it is not None and it is not Ellipsis)
    if consumed > ndim:
        raise PtdIndexError(
            f"too many indices for tensordict: batch is {ndim}-dimensional, but {consumed} were indexed"
        )
    where: list[int] = []  # the view dim each None goes before
    d = 0
    for it in items:
        if it is None:
            where.append(d)
        elif it is Ellipsis:
            d += ndim - consumed  # several Ellipsis are refused by _split_index
        else:
            d += _dims_of(it)
    view_pos = [i for i, e in enumerate(entries) if not isinstance(e, int)] + [len(entries)]
    new_entries: list[Entry] = []
    new_shape: list[int] = []
    for k, pos in enumerate(view_pos):
        lo = view_pos[k - 1] + 1 if k else 0
        new_entries.extend(entries[lo:pos])  # the ints before this view dim
        n_new = where.count(k)
        new_entries.extend([NewDim(1)] * n_new)
        new_shape.extend([1] * n_new)
        if pos < len(entries):
            new_entries.append(entries[pos])
            new_shape.append(shape[k])
    new_index = tuple(slice(None) if it is None else it for it in items)
    return new_entries, tuple(new_shape), new_index


def _check_bounds(arr: np.ndarray, size: int, dim: int) -> np.ndarray:
    if arr.size and (arr.max() >= size or arr.min() < -size):
        bad = arr[(arr >= size) | (arr < -size)][0]
        raise PtdIndexError(
            f"index {int(bad)} is out of bounds for dimension {dim} with size {size}"
        )
    return np.where(arr < 0, arr + size, arr) if arr.size and arr.min() < 0 else arr


def _apply_to_entry(entry: Entry, item: Any, size: int, dim: int) -> list[Entry]:
    """Index one view dim (backed by ``entry``) with an int, slice or array."""
    if isinstance(entry, NewDim):  # no stored dim: only how many copies changes
        if isinstance(item, int):
            if not -size <= item < size:
                raise PtdIndexError(
                    f"index {item} is out of bounds for dimension {dim} with size {size}"
                )
            return []
        if isinstance(item, slice):
            return [NewDim(len(range(size)[item]))]
        return [NewDim(len(_check_bounds(item, size, dim)))]
    if isinstance(item, int):
        if not -size <= item < size:
            raise PtdIndexError(
                f"index {item} is out of bounds for dimension {dim} with size {size}"
            )
        item %= size
        if isinstance(entry, slice):
            return [entry.start + item * entry.step]
        assert isinstance(entry, Points)
        return [int(a[item]) for a in entry.arrays]
    if isinstance(item, slice):
        if isinstance(entry, slice):
            r = range(entry.start, entry.stop, entry.step)[item]
            if not len(r):
                return [slice(entry.start, entry.start, 1)]
            if r.step > 0:
                return [slice(r.start, r[-1] + 1, r.step)]
            return [Points((np.arange(r.start, r.stop, r.step, dtype=np.int64),))]
        assert isinstance(entry, Points)
        return [Points(tuple(a[item] for a in entry.arrays))]
    arr = _check_bounds(item, size, dim)
    if isinstance(entry, slice):
        return [Points((entry.start + arr * entry.step,))]
    assert isinstance(entry, Points)
    return [Points(tuple(a[arr] for a in entry.arrays))]


def _group_advanced(items: list[Any]) -> list[Any]:
    """Apply numpy's rule for advanced indices: several arrays/masks (and the ints between
    them) broadcast together into one dim. Layouts whose numpy result is not the orthogonal
    one (advanced indices separated by a slice) are refused."""
    adv = [i for i, it in enumerate(items) if isinstance(it, (np.ndarray, tuple))]
    if not adv:
        return items
    ints = [i for i, it in enumerate(items) if isinstance(it, int)]
    every = sorted(adv + ints)
    contiguous = every == list(range(every[0], every[-1] + 1))
    slice_before = any(isinstance(items[j], slice) for j in range(adv[0]))
    single_1d = len(adv) == 1 and isinstance(items[adv[0]], np.ndarray)
    if not contiguous and (len(adv) > 1 or slice_before):
        raise PtdIndexError(
            "advanced indices (index arrays, masks and ints) separated by a slice or None "
            "cannot index a file-backed tensordict lazily (numpy would move their dim first); "
            "call to_tensordict() first"
        )
    if single_1d:
        return items
    lo, hi = (every[0], every[-1] + 1) if contiguous else (adv[0], adv[0] + 1)
    coords: list[np.ndarray] = []
    for it in items[lo:hi]:
        if isinstance(it, tuple):
            coords.extend(np.nonzero(it[1]))
        elif isinstance(it, np.ndarray):
            coords.append(it)
        else:
            coords.append(np.asarray(it, dtype=np.int64))
    try:
        coords = [c.astype(np.int64, copy=False) for c in np.broadcast_arrays(*coords)]
    except ValueError as err:
        raise PtdIndexError(
            f"shape mismatch: index arrays could not be broadcast together: {err}"
        ) from None
    if coords and coords[0].ndim != 1:
        raise PtdIndexError(
            "index arrays must broadcast to 1-D to index a file-backed tensordict lazily"
        )
    return items[:lo] + [("joint", tuple(coords))] + items[hi:]


def compose(entries: Sequence[Entry], shape: Sequence[int], index: Any) -> tuple[Entry, ...]:
    """Apply a user ``index`` to the view ``entries`` (whose batch shape is ``shape``)."""
    entries, shape, index = _insert_new_dims(entries, tuple(shape), index)
    items = _split_index(index, shape)
    items = _group_advanced(items)
    # walk view dims alongside items
    view_entries = [i for i, e in enumerate(entries) if not isinstance(e, int)]
    new: list[Entry] = list(entries)
    replace: dict[int, list[Entry]] = {}
    vdim = 0
    for it in items:
        if isinstance(it, tuple) and it[0] == "joint":
            coords = it[1]
            k = len(coords)
            group = view_entries[vdim : vdim + k]
            merged: list[np.ndarray] = []
            first, last = group[0], group[-1]
            # ints between grouped entries become constant arrays of the joint group
            for ei in range(first, last + 1):
                e = entries[ei]
                if isinstance(e, int):
                    merged.append(np.full(len(coords[0]), e, dtype=np.int64))
                    continue
                j = group.index(ei)
                sub = _apply_to_entry(e, coords[j].astype(np.int64), shape[vdim + j], vdim + j)
                if isinstance(e, NewDim):
                    continue  # its coords are checked; it backs no stored dim
                # an index array gives Points (the Entry union cannot say so)
                merged.extend(sub[0].arrays)  # type: ignore[union-attr]
            # a joint index over new dims only: copies of the same rows
            replace[first] = [Points(tuple(merged)) if merged else NewDim(len(coords[0]))]
            for ei in range(first + 1, last + 1):
                replace[ei] = []
            vdim += k
            continue
        ei = view_entries[vdim]
        replace[ei] = _apply_to_entry(entries[ei], it, shape[vdim], vdim)
        vdim += 1
    out: list[Entry] = []
    for i, e in enumerate(new):
        out.extend(replace.get(i, [e]))
    return tuple(out)


def _consumed(item: Any) -> int:
    """How many batch dims an index item consumes."""
    if item is None or item is Ellipsis:
        return 0
    arr = item
    if isinstance(arr, torch.Tensor):
        return arr.ndim if arr.dtype == torch.bool else 1
    if isinstance(arr, np.ndarray):
        return arr.ndim if arr.dtype == np.bool_ else 1
    return 1


def index_names(
    names: Sequence[str | None] | None, index: Any, ndim: int
) -> list[str | None] | None:
    """The dim names of a tensordict indexed by ``index`` (None when it has none): an int drops
    its dim, a slice or a 1-D index array keeps its name, ``None`` adds an unnamed dim, a mask
    keeps the name of the one dim it covers. Several index arrays (which numpy broadcasts
    together) give no names.

    >>> index_names(["t", "x"], (None, slice(None), 0), 2)
    [None, 't']
    """
    if names is None or all(n is None for n in names):
        return None
    items = list(index) if isinstance(index, tuple) else [index]
    advanced = 0
    for it in items:
        if isinstance(it, (list, torch.Tensor, np.ndarray)) and not (
            isinstance(it, torch.Tensor) and it.ndim == 0 and it.dtype != torch.bool
        ):
            advanced += 1
    if advanced > 1:
        return None
    consumed = sum(_consumed(it) for it in items)
    out: list[str | None] = []
    d = 0
    for it in items:
        if it is None:
            out.append(None)
        elif it is Ellipsis:
            k = max(0, ndim - consumed)
            out.extend(names[d : d + k])
            d += k
        elif isinstance(it, slice):
            out.append(names[d] if d < ndim else None)
            d += 1
        elif isinstance(it, (list, torch.Tensor, np.ndarray)):
            arr = it if not isinstance(it, list) else np.asarray(it)
            k = _consumed(arr)
            is_mask = arr.dtype in (torch.bool, np.bool_)
            if arr.ndim == 0 and not is_mask:
                d += 1
                continue
            if is_mask:
                out.append(names[d] if k == 1 and d < ndim else None)
            else:
                out.extend([names[d] if d < ndim else None] + [None] * (arr.ndim - 1))
            d += k
        else:  # an int
            d += 1
    out.extend(names[d:])
    return out
