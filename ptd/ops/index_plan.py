"""Planning the reads and writes of a lazy view: pure functions, no I/O.

:func:`plan_read` / :func:`plan_write` turn a view's entries (:mod:`ptd.ops.index_entries`,
without new dims: :func:`~ptd.ops.index_entries.stored_entries`) into the selection a
backend takes (ints, positive slices and at most one *sorted, unique* array) plus the
in-memory step that puts rows back in the asked order -- h5py refuses unsorted or repeated
indices, and reading ``min..max`` (what the reference does) costs far more than reading the
rows asked for.

>>> import numpy as np
>>> plan = plan_read((Points((np.array([6, 2, 6]),)),), row_nbytes=1 << 20)
>>> plan.selection, plan.post
((array([2, 6]),), (array([1, 0, 1]),))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from ptd.ops.index_entries import Entry, Points, _slice_len

__all__ = [
    "ReadPlan",
    "WritePlan",
    "apply_post",
    "box_assign",
    "plan_read",
    "plan_write",
]


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
        assert isinstance(e, Points), "new dims are read through stored_entries()"
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
        return cast("np.ndarray", np.take(arr, post[i], axis=i))
    return cast("np.ndarray", arr[_open_mesh(post, arr.shape)])


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
