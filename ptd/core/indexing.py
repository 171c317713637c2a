"""Lazy index arithmetic for file-backed views: pure functions, no I/O.

A view of a stored tensordict is described by one *entry* per group of stored batch dims:

* ``int`` -- the stored dim is fixed (the view has no dim for it);
* ``slice`` -- ``start/stop/step`` normalised, ``step > 0`` (one view dim);
* :class:`Points` -- one or more int arrays of equal length that jointly index consecutive
  stored dims, in the order the user asked, repeats allowed (one view dim).

:func:`compose` applies a user index (int, slice, list, int/bool tensor or array, Ellipsis, or
a tuple of those) to a view, giving the entries of the new view, so views of views never touch
the file. :func:`plan_read` / :func:`plan_write` turn entries into the selection a backend
takes (ints, positive slices and at most one *sorted, unique* array) plus the in-memory step
that puts rows back in the asked order -- h5py refuses unsorted or repeated indices, and reading
``min..max`` (what the reference does) costs far more than reading the rows asked for.

>>> import numpy as np
>>> entries = full_entries((10,))
>>> entries = compose(entries, (10,), slice(2, 9))
>>> entries = compose(entries, (7,), [4, 0, 4])
>>> entries
(Points(arrays=(array([6, 2, 6]),)),)
>>> plan = plan_read(entries, row_nbytes=1 << 20)
>>> plan.selection, plan.post
((array([2, 6]),), (array([1, 0, 1]),))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ptd.errors import PtdIndexError

__all__ = [
    "Points",
    "Entry",
    "full_entries",
    "view_shape",
    "compose",
    "plan_read",
    "direct_selection",
    "plan_write",
    "ReadPlan",
    "is_key_index",
    "index_names",
]


@dataclass(frozen=True, eq=False)
class Points:
    """Arrays that jointly index ``len(arrays)`` consecutive stored dims (one view dim)."""

    arrays: tuple[np.ndarray, ...]

    def __len__(self) -> int:
        return len(self.arrays[0])

    def __repr__(self) -> str:
        return f"Points(arrays={self.arrays!r})"


Entry = int | slice | Points


def is_key_index(idx: Any) -> bool:
    """True when ``idx`` is a key (str or tuple of str) rather than a batch index."""
    if isinstance(idx, str):
        return True
    return isinstance(idx, tuple) and len(idx) > 0 and all(is_key_index(k) for k in idx)


def full_entries(shape: Sequence[int]) -> tuple[Entry, ...]:
    """The entries of a view that selects everything."""
    return tuple(slice(0, int(n), 1) for n in shape)


def _slice_len(s: slice) -> int:
    return len(range(s.start, s.stop, s.step))


def view_shape(entries: Sequence[Entry]) -> tuple[int, ...]:
    """The batch shape a view with these entries has."""
    out = []
    for e in entries:
        if isinstance(e, slice):
            out.append(_slice_len(e))
        elif isinstance(e, Points):
            out.append(len(e))
    return tuple(out)


def stored_ndim(entries: Sequence[Entry]) -> int:
    return sum(len(e.arrays) if isinstance(e, Points) else 1 for e in entries)


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
        if it is None:
            raise PtdIndexError(
                "None (new axis) cannot index a file-backed tensordict lazily; "
                "call to_tensordict() first"
            )
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


def _check_bounds(arr: np.ndarray, size: int, dim: int) -> np.ndarray:
    if arr.size and (arr.max() >= size or arr.min() < -size):
        bad = arr[(arr >= size) | (arr < -size)][0]
        raise PtdIndexError(
            f"index {int(bad)} is out of bounds for dimension {dim} with size {size}"
        )
    return np.where(arr < 0, arr + size, arr) if arr.size and arr.min() < 0 else arr


def _apply_to_entry(entry: Entry, item: Any, size: int, dim: int) -> list[Entry]:
    """Index one view dim (backed by ``entry``) with an int, slice or array."""
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
    adv = [i for i, it in enumerate(items) if isinstance(it, np.ndarray) or isinstance(it, tuple)]
    if not adv:
        return items
    ints = [i for i, it in enumerate(items) if isinstance(it, int)]
    every = sorted(adv + ints)
    contiguous = every == list(range(every[0], every[-1] + 1))
    slice_before = any(isinstance(items[j], slice) for j in range(adv[0]))
    single_1d = len(adv) == 1 and isinstance(items[adv[0]], np.ndarray)
    if not contiguous and (len(adv) > 1 or slice_before):
        raise PtdIndexError(
            "advanced indices (index arrays, masks and ints) separated by a slice cannot index a "
            "file-backed tensordict lazily (numpy would move their dim first); call "
            "to_tensordict() first"
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
    shape = tuple(shape)
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
                # an index array gives Points (the Entry union cannot say so)
                merged.extend(sub[0].arrays)  # type: ignore[union-attr]
            replace[first] = [Points(tuple(merged))]
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


# --- planning reads and writes -------------------------------------------------------------
@dataclass(frozen=True)
class ReadPlan:
    """``selection`` goes to the backend; ``post`` (if not None) re-orders in memory: one entry
    per axis of the read result's batch part, an int array of positions or None (keep)."""

    selection: tuple[Any, ...]
    post: tuple[Any, ...] | None
    #: number of batch axes in the read result (ints dropped)
    ndim: int


def _unique_inverse(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if len(a) > 1 and bool(np.all(a[1:] > a[:-1])):
        return a, np.arange(len(a))
    u, inv = np.unique(a, return_inverse=True)
    return u, inv.reshape(-1)


def direct_selection(entries: Sequence[Entry]) -> tuple[Any, ...] | None:
    """The entries as a selection for ``Backend.read_direct`` (ints, slices and the one index
    array as asked: unsorted, repeats kept), or None when they hold several index arrays."""
    out: list[Any] = []
    seen = False
    for e in entries:
        if isinstance(e, Points):
            if seen or len(e.arrays) != 1:
                return None
            seen = True
            out.append(e.arrays[0])
        else:
            out.append(e)
    return tuple(out)


def plan_read(entries: Sequence[Entry], row_nbytes: int) -> ReadPlan:
    """Turn view entries into a backend selection and an in-memory re-ordering.

    ``row_nbytes`` is the size of one index along the first entry (used to choose between a
    fancy read and a bounding slice for dense index sets).
    """
    sel: list[Any] = []
    post: list[Any] = []
    joint: list[tuple[int, list[np.ndarray]]] = []
    used_array = False
    any_post = False
    for e in entries:
        if isinstance(e, int):
            sel.append(e)
            continue
        if isinstance(e, slice):
            sel.append(e)
            post.append(None)
            continue
        positions: list[np.ndarray] = []
        for a in e.arrays:
            if len(a) == 0:
                sel.append(slice(0, 0, 1))
                positions.append(a)
                continue
            u, inv = _unique_inverse(a)
            lo, hi = int(u[0]), int(u[-1]) + 1
            span = hi - lo
            dense = span <= 2 * len(u) or span * row_nbytes <= (1 << 18)
            if span == len(u):  # contiguous run
                sel.append(slice(lo, hi, 1))
                positions.append(inv)
            elif dense or used_array:
                sel.append(slice(lo, hi, 1))
                positions.append(u[inv] - lo)
            else:
                sel.append(u)
                used_array = True
                positions.append(inv)
        if len(e.arrays) == 1:
            p = positions[0]
            if not (
                len(p) == (_slice_len(sel[-1]) if isinstance(sel[-1], slice) else len(sel[-1]))
                and np.array_equal(p, np.arange(len(p)))
            ):
                any_post = True
                post.append(p)
            else:
                post.append(None)
        else:
            any_post = True
            joint.append((len(post), positions))
            post.extend([None] * len(positions))
    if not any_post:
        return ReadPlan(tuple(sel), None, len(post))
    return ReadPlan(tuple(sel), tuple(_post_with_joint(post, joint)), len(post))


def _post_with_joint(post: list[Any], joint: list[tuple[int, list[np.ndarray]]]) -> list[Any]:
    """Mark joint groups in ``post`` as ``("joint", arrays)`` spanning several read axes."""
    out = list(post)
    for start, arrays in reversed(joint):
        out[start : start + len(arrays)] = [("joint", tuple(arrays))]
    return out


def apply_post(arr: np.ndarray, post: Sequence[Any] | None) -> np.ndarray:
    """Re-order a read result following ``ReadPlan.post`` (one advanced-indexing step)."""
    if post is None:
        return arr
    needs = [i for i, p in enumerate(post) if p is not None]
    if len(needs) == 1 and not isinstance(post[needs[0]], tuple):
        i = needs[0]
        return np.take(arr, post[i], axis=i)
    return arr[_open_mesh(post, arr.shape)]


def _open_mesh(post: Sequence[Any], shape: Sequence[int]) -> tuple[np.ndarray, ...]:
    """An all-advanced index (open mesh) that applies ``post`` to the leading axes at once,
    keeping the axis order (numpy would move separated advanced indices to the front)."""
    n_out = len(post)
    idx: list[np.ndarray] = []
    axis = 0
    for out_dim, p in enumerate(post):
        bshape = [1] * n_out
        if isinstance(p, tuple):  # joint: several read axes -> one output axis
            for a in p[1]:
                bshape[out_dim] = len(a)
                idx.append(a.reshape(bshape))
                axis += 1
            continue
        a = np.arange(shape[axis]) if p is None else p
        bshape[out_dim] = len(a)
        idx.append(a.reshape(bshape))
        axis += 1
    return tuple(idx)


@dataclass(frozen=True)
class WritePlan:
    """Either a direct write (``box`` False: write ``reorder(value)`` at ``selection``) or a
    read-modify-write of the bounding box (``box`` True: ``b = read(selection); b[mesh] = value;
    write(selection, b)``)."""

    selection: tuple[Any, ...]
    box: bool
    #: for direct writes: (axis, positions) to take from the value so it matches the selection
    take: tuple[int, np.ndarray] | None
    #: for box writes: the post spec to build the mesh
    post: tuple[Any, ...] | None


def plan_write(entries: Sequence[Entry], row_nbytes: int) -> WritePlan:
    """Plan a write through a view: direct when the selection is simple, else read-modify-write."""
    arrays = [e for e in entries if isinstance(e, Points)]
    if not arrays:
        return WritePlan(tuple(entries), False, None, None)
    if len(arrays) == 1 and len(arrays[0].arrays) == 1 and len(arrays[0]) > 0:
        # one index array: sort it, keep the last of repeated indices (numpy's assignment rule)
        a = arrays[0].arrays[0]
        order = np.argsort(a, kind="stable")
        sa = a[order]
        last = np.ones(len(sa), dtype=bool)
        last[:-1] = sa[1:] != sa[:-1]
        u, pos = sa[last], order[last]
        sel: list[Any] = []
        axis = 0
        take_axis = 0
        for e in entries:
            if isinstance(e, int):
                sel.append(e)
            elif isinstance(e, slice):
                sel.append(e)
                axis += 1
            else:
                take_axis = axis
                span = int(u[-1]) - int(u[0]) + 1
                sel.append(slice(int(u[0]), int(u[-1]) + 1, 1) if span == len(u) else u)
                axis += 1
        identity = len(pos) == len(a) and np.array_equal(pos, np.arange(len(a)))
        return WritePlan(tuple(sel), False, None if identity else (take_axis, pos), None)
    plan = plan_read(entries, row_nbytes)
    post = plan.post if plan.post is not None else tuple([None] * plan.ndim)
    return WritePlan(plan.selection, True, None, post)


def box_assign(box: np.ndarray, post: Sequence[Any], value: np.ndarray) -> np.ndarray:
    """``box[mesh(post)] = value`` where the mesh keeps the view's axis order."""
    box[_open_mesh(post, box.shape)] = value
    return box


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
