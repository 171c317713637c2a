"""The one indexer: a read's selection becomes the chunks it touches, what it asks of each, and
where that lands in the output.

A selection (what :meth:`ptd.storage.api.Backend.read` takes) has at most one entry per leading
dim of the array, each

* an ``int`` (negative counts from the end; the dim is dropped),
* a ``slice`` with any step (negative too),
* a 1-D integer array in any order, with repeats and negative values, or a bool mask of the
  dim's length (orthogonal: each array indexes its own dim, as h5py and ``zarr.Array.oindex``),
* a :class:`Joint` of integer arrays of one length over as many consecutive dims (numpy's
  pointwise indexing of those dims: one output dim).

:func:`project` turns it into an :class:`Indexer`: the output shape and one
:class:`ChunkProjection` per chunk touched (chunk coordinates, the selection in the chunk's own
coordinates, and the place in the output). The user's order and repeats live in the output
places: each chunk is visited once, and its part is scattered straight to where the user asked
for it (:func:`scatter`), so a read needs no sorted intermediate and no re-ordering copy (zarr's
``ChunkProjection`` is the model). A memory map is one chunk of the whole array: its rows are
taken in the user's order in one copy.

A store library that reads a selection itself (h5py, zarr's own path) takes a simpler form:
:meth:`Indexer.library_form` gives positive slices and at most one sorted, unique index array,
and the step that puts that result in the asked order.

>>> import numpy as np
>>> ix = project((np.array([9, 0, 0, 5]),), (10, 2), (4, 2))
>>> ix.shape
(4, 2)
>>> [(p.coords, p.out[0]) for p in ix.chunks]  # rows 0, 0 land at 1, 2; row 9 at 0
[((0, 0), slice(1, 3, None)), ((1, 0), slice(3, 4, None)), ((2, 0), slice(0, 1, None))]
>>> data = np.arange(20).reshape(10, 2)
>>> read(ix, lambda c: data[c[0] * 4 : c[0] * 4 + 4], data.dtype).tolist()
[[18, 19], [0, 1], [0, 1], [10, 11]]
>>> sel = (slice(None, None, -3), 1)
>>> read(project(sel, (10, 2), (4, 2)), lambda c: data[c[0] * 4 :][:4], data.dtype).tolist()
[19, 13, 7, 1]
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

__all__ = [
    "ChunkProjection",
    "Indexer",
    "Joint",
    "LibraryPost",
    "project",
    "read",
    "read_whole",
    "scatter",
]

#: a chunk's part with at most this many rows given as an index array is copied row by row
#: (each row a view copy) rather than through numpy's fancy-index temporary
_ROW_LOOP = 32


@dataclass(frozen=True, slots=True)
class Joint:
    """Integer arrays of one length that index ``len(arrays)`` consecutive dims pointwise (one
    output dim), as ``a[i, j]`` with two index arrays does in numpy."""

    arrays: tuple[np.ndarray, ...]


@dataclass(frozen=True, slots=True)
class ChunkProjection:
    """One chunk's part of a read: ``out[out] = chunk[local]`` (orthogonal in ``local``, except
    that a :class:`Joint`'s arrays are pointwise)."""

    #: the chunk's grid coordinates
    coords: tuple[int, ...]
    #: per dim of the array: an int, a slice with a positive step, an int array, or a Joint
    #: (one entry for its dims)
    local: tuple[Any, ...]
    #: per output dim: a slice (any step) or an int array of positions
    out: tuple[Any, ...]


# one dim's (or one joint group's) part of a chunk: (chunk coords, local entry, out entry or
# None when the dim is dropped)
_Piece = tuple[tuple[int, ...], Any, Any]


@dataclass(frozen=True, slots=True)
class Indexer:
    """A normalized selection over an array of ``array_shape`` cut in chunks of ``chunk_shape``:
    the output's ``shape`` (selected dims, then the unselected trailing dims) and its
    :attr:`chunks`."""

    array_shape: tuple[int, ...]
    chunk_shape: tuple[int, ...]
    #: one entry per dim (trailing whole slices added): int, slice, int array, or Joint
    selection: tuple[Any, ...]
    shape: tuple[int, ...]
    #: the index arrays were left for numpy to check (``project(..., taken_whole=True)``)
    unchecked: bool = False

    @property
    def chunks(self) -> list[ChunkProjection]:
        """Every chunk the selection touches, once each."""
        if 0 in self.shape:
            return []
        if self.chunk_shape == self.array_shape and not any(
            isinstance(x, Joint) or (isinstance(x, slice) and x.step is not None and x.step < 0)
            for x in self.selection
        ):
            # one chunk, the whole array (a memory map): the selection is its own local part,
            # the user's order already in it; nothing to plan per dim
            return [
                ChunkProjection(
                    (0,) * len(self.array_shape),
                    self.selection,
                    tuple(slice(0, n) for n in self.shape),
                )
            ]
        plans: list[list[_Piece]] = []
        dim = 0
        for item in self.selection:
            if isinstance(item, Joint):
                k = len(item.arrays)
                plans.append(
                    _joint(item, self.array_shape[dim : dim + k], self.chunk_shape[dim : dim + k])
                )
                dim += k
            else:
                plans.append(_one_dim(item, self.array_shape[dim], self.chunk_shape[dim]))
                dim += 1
        out = []
        for combo in itertools.product(*plans):
            coords = tuple(c for p in combo for c in p[0])
            out.append(
                ChunkProjection(
                    coords,
                    tuple(p[1] for p in combo),
                    tuple(p[2] for p in combo if p[2] is not None),
                )
            )
        return out

    def library_form(self) -> tuple[tuple[Any, ...], LibraryPost | None]:
        """``(selection, post)`` for a store library's own read: ints, slices with a positive
        step and at most one sorted, unique index array (further arrays and joint groups read
        as the slice they cover), and the step that gives the asked output from the library's
        result (:meth:`LibraryPost.apply`); None when the result is the output."""
        sel: list[Any] = []
        post: list[Any] = []  # per output dim of the library's result: positions or None
        joint: list[tuple[int, int]] = []  # (first post position, number of dims) of Joints
        array_used = False
        for item, size in zip(self.selection, self.array_shape, strict=False):
            if isinstance(item, (int, np.integer)):
                sel.append(int(item))
            elif isinstance(item, slice):
                start, stop, step = item.indices(size)
                n = len(range(start, stop, step))
                if n == 0:
                    sel.append(slice(0, 0, 1))
                    post.append(None)
                elif step > 0:
                    sel.append(slice(start, stop, step))
                    post.append(None)
                else:
                    lo = start + (n - 1) * step
                    sel.append(slice(lo, start + 1, -step))
                    post.append(np.arange(n - 1, -1, -1))
            elif isinstance(item, np.ndarray):
                s, p = _library_array(item, array_used)
                array_used = array_used or isinstance(s, np.ndarray)
                sel.append(s)
                post.append(p)
            else:
                joint.append((len(post), len(item.arrays)))
                for a in item.arrays:
                    s, p = _library_array(a, True)
                    sel.append(s)
                    post.append(p if p is not None else np.arange(len(a)))
        if not joint and all(p is None for p in post):
            return tuple(sel), None
        starts = dict(joint)
        groups: list[tuple[Any, ...]] = []
        i = 0
        while i < len(post):
            k = starts.get(i, 1)
            groups.append(tuple(post[i : i + k]))
            i += k
        return tuple(sel), LibraryPost(tuple(groups))


def _library_array(a: np.ndarray, as_span: bool) -> tuple[Any, Any]:
    """One orthogonal array for a library: the sorted unique rows (or, ``as_span``, the slice
    they cover) and the positions that give the asked rows back (None: as read)."""
    if len(a) == 0:
        return slice(0, 0, 1), None
    if len(a) == 1 or bool(np.all(a[1:] > a[:-1])):
        u, inv = a, None
    else:
        u, inv_ = np.unique(a, return_inverse=True)
        inv = inv_.reshape(-1)
    lo, hi = int(u[0]), int(u[-1]) + 1
    if hi - lo == len(u):  # a run of consecutive rows
        return slice(lo, hi, 1), inv
    if as_span:
        return slice(lo, hi, 1), a - lo
    return u, inv


@dataclass(frozen=True, slots=True)
class LibraryPost:
    """What puts a library's read in the asked order: per output dim of the read, a group of
    the read's dims (one, or a Joint's several) with the positions to take (None: as read)."""

    groups: tuple[tuple[Any, ...], ...]

    def apply(self, got: np.ndarray) -> np.ndarray:
        """The asked output from the library's result ``got``."""
        needs = [i for i, g in enumerate(self.groups) if len(g) > 1 or g[0] is not None]
        if len(needs) == 1 and len(self.groups[needs[0]]) == 1:
            i = needs[0]
            return cast("np.ndarray", np.take(got, self.groups[i][0], axis=i))
        n_out = len(self.groups)
        idx: list[np.ndarray] = []
        dim = 0
        for j, g in enumerate(self.groups):
            for p in g:
                a = np.arange(got.shape[dim]) if p is None else p
                b = [1] * n_out
                b[j] = len(a)
                idx.append(np.asarray(a).reshape(b))
                dim += 1
        return cast("np.ndarray", got[tuple(idx)])


def _check_array(a: Any, size: int, *, bounds: bool = True) -> np.ndarray:
    """``a`` as a 1-D int64 index array of a dim of ``size`` (a bool mask as its positions),
    negative values counted from the end. ``bounds=False`` leaves the range check (and the
    negative values) to numpy's own indexing, which raises the same IndexError while taking
    the rows: a one-chunk read (a memory map) takes them straight from the array, and two
    reductions over the index cost more than the take of a small minibatch."""
    a = np.asarray(a)
    if a.dtype == bool:
        if a.shape != (size,):
            raise IndexError(
                f"a boolean index of shape {a.shape} does not fit a dimension of size {size}"
            )
        return np.flatnonzero(a)
    if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
        raise IndexError(f"an index array must be 1-D integers, not {a.ndim}-D {a.dtype}")
    a = a.astype(np.int64, copy=False)
    if a.size and bounds:
        lo, hi = int(a.min()), int(a.max())
        if lo < -size or hi >= size:
            bad = lo if lo < -size else hi
            raise IndexError(f"index {bad} is out of range for a dimension of size {size}")
        if lo < 0:
            a = np.where(a < 0, a + size, a)
    return a


def project(
    selection: Sequence[Any],
    shape: Sequence[int],
    chunks: Sequence[int] | None = None,
    *,
    taken_whole: bool = False,
) -> Indexer:
    """The :class:`Indexer` of ``selection`` over an array of ``shape`` cut in ``chunks`` (None:
    one chunk, the whole array, as a memory map). Out-of-range entries raise IndexError.

    ``taken_whole``: the caller reads the :attr:`Indexer.chunks` of a one-chunk array (a memory
    map), where the selection is handed over as it is: its index arrays are then left to
    numpy's indexing to check (the same IndexError, raised while taking the rows) and keep
    their negative values, which numpy counts from the end as ptd does. Two reductions over
    the index cost more than the take of a small minibatch."""
    shape = tuple(int(s) for s in shape)
    chunk_shape = shape if chunks is None else tuple(int(c) for c in chunks)
    # a one-chunk read that :attr:`Indexer.chunks` hands over as it is: numpy checks its
    # index arrays while taking the rows
    numpy_checks = (
        taken_whole
        and chunks is None
        and not any(
            isinstance(x, Joint) or (isinstance(x, slice) and x.step is not None and x.step < 0)
            for x in selection
        )
    )
    sel: list[Any] = []
    out: list[int] = []
    dim = 0
    for item in selection:
        if isinstance(item, Joint):
            k = len(item.arrays)
            if dim + k > len(shape):
                raise IndexError(f"too many indices for an array of {len(shape)} dims")
            arrays = tuple(
                _check_array(a, s) for a, s in zip(item.arrays, shape[dim : dim + k], strict=True)
            )
            if len({len(a) for a in arrays}) > 1:
                raise IndexError("joint index arrays must have one length")
            sel.append(Joint(arrays))
            out.append(len(arrays[0]))
            dim += k
            continue
        if dim >= len(shape):
            raise IndexError(f"too many indices for an array of {len(shape)} dims")
        size = shape[dim]
        if isinstance(item, slice):
            sel.append(item)
            out.append(len(range(*item.indices(size))))
        elif isinstance(item, (np.ndarray, list)):
            a = _check_array(item, size, bounds=not numpy_checks)
            sel.append(a)
            out.append(len(a))
        else:
            i = int(item)
            if not -size <= i < size:
                raise IndexError(f"index {i} is out of range for a dimension of size {size}")
            sel.append(i + size if i < 0 else i)
        dim += 1
    sel.extend(slice(0, s, 1) for s in shape[dim:])
    out.extend(shape[dim:])
    return Indexer(
        shape, tuple(max(1, c) for c in chunk_shape), tuple(sel), tuple(out), numpy_checks
    )


def _one_dim(item: Any, size: int, c: int) -> list[_Piece]:
    if isinstance(item, slice):
        return _slice_dim(item, size, c)
    if isinstance(item, np.ndarray):
        return _array_dim(item, c)
    return [((item // c,), item % c, None)]


def _slice_dim(item: slice, size: int, c: int) -> list[_Piece]:
    start, stop, step = item.indices(size)
    n = len(range(start, stop, step))
    if n == 0:
        return []
    if step < 0:  # walk the same elements upwards; output places count down
        lo = start + (n - 1) * step
        asc = _slice_dim(slice(lo, start + 1, -step), size, c)
        out = []
        for coords, local, dst in asc:
            a, b = n - 1 - dst.start, n - 1 - dst.stop
            out.append((coords, local, slice(a, b if b >= 0 else None, -1)))
        return out
    pieces: list[_Piece] = []
    pos = 0
    for k in range(start // c, (stop - 1) // c + 1):
        lo, hi = k * c, min(k * c + c, stop)
        first = start if start >= lo else start + -(-(lo - start) // step) * step
        if first >= hi:
            continue
        m = len(range(first, hi, step))
        pieces.append(((k,), slice(first - lo, hi - lo, step), slice(pos, pos + m)))
        pos += m
    return pieces


def _array_dim(a: np.ndarray, c: int) -> list[_Piece]:
    n = len(a)
    if n == 0:
        return []
    ks = a // c
    k0 = int(ks[0])
    if bool(np.all(ks == k0)):  # one chunk: its rows in the asked order, straight out
        local = a - k0 * c
        return [((k0,), _as_run(local), slice(0, n))]
    order = np.argsort(a, kind="stable")
    s = a[order]
    ks = ks[order]
    cuts = np.flatnonzero(ks[1:] != ks[:-1]) + 1
    starts = np.concatenate(([0], cuts)).tolist()
    ends = np.concatenate((cuts, [n])).tolist()
    pieces: list[_Piece] = []
    for lo, hi in zip(starts, ends, strict=True):
        k = int(ks[lo])
        pieces.append(((k,), _as_run(s[lo:hi] - k * c), _as_run(order[lo:hi])))
    return pieces


def _as_run(a: np.ndarray) -> Any:
    """``a`` as a slice when it is a run of consecutive ascending values, else itself."""
    first = int(a[0])
    if len(a) == 1 or (int(a[-1]) - first == len(a) - 1 and bool(np.all(np.diff(a) == 1))):
        return slice(first, first + len(a))
    return a


def _joint(item: Joint, shape: Sequence[int], chunks: Sequence[int]) -> list[_Piece]:
    arrays = item.arrays
    n = len(arrays[0])
    if n == 0:
        return []
    ks = [a // c for a, c in zip(arrays, chunks, strict=True)]
    grid = [-(-s // c) for s, c in zip(shape, chunks, strict=True)]
    flat = np.ravel_multi_index(tuple(ks), tuple(grid)) if grid else np.zeros(n, np.int64)
    order = np.argsort(flat, kind="stable")
    f = flat[order]
    cuts = np.flatnonzero(f[1:] != f[:-1]) + 1
    pieces: list[_Piece] = []
    if len(cuts) == 0:
        coords = tuple(int(k[0]) for k in ks)
        local = Joint(tuple(a - k * c for a, k, c in zip(arrays, coords, chunks, strict=True)))
        return [(coords, local, slice(0, n))]
    starts = np.concatenate(([0], cuts)).tolist()
    ends = np.concatenate((cuts, [n])).tolist()
    for lo, hi in zip(starts, ends, strict=True):
        rows = order[lo:hi]
        coords = tuple(int(k[rows[0]]) for k in ks)
        local = Joint(
            tuple(a[rows] - k * c for a, k, c in zip(arrays, coords, chunks, strict=True))
        )
        pieces.append((coords, local, _as_run(rows)))
    return pieces


# ----------------------------------------------------------------------------------------------
# moving a chunk's part into the output


def scatter(
    out: np.ndarray, proj: ChunkProjection, chunk: np.ndarray, *, checked: bool = True
) -> None:
    """``out[proj.out] = chunk[proj.local]`` (orthogonal), in one copy where it can: slices are
    views, a small index array is copied row by row, one chunk's rows in the asked order are
    taken straight into the output. ``chunk`` may have trailing dims beyond ``out``'s (a byte
    view of a shuffled chunk into a byte view of ``out``). ``checked``: the index arrays are
    known to be in range (:func:`project` checked them), so a take writes straight into
    ``out`` (numpy buffers a range-checking take into ``out``: a second copy)."""
    local, dst = proj.local, proj.out
    if any(isinstance(x, (int, np.integer)) for x in local):  # ints first: they drop dims
        first: list[Any] = []
        for x in local:
            if isinstance(x, Joint):
                first.extend([slice(None)] * len(x.arrays))
            else:
                first.append(x if isinstance(x, (int, np.integer)) else slice(None))
        chunk = chunk[tuple(first)]
        local = tuple(x for x in local if not isinstance(x, (int, np.integer)))
    fancy = [i for i, x in enumerate(local) if not isinstance(x, slice)]
    if not fancy:
        out[dst] = chunk[local]
        return
    if len(fancy) == 1 and all(isinstance(d, slice) for d in dst):
        # the user's order is in ``local``: take it straight into the output's view
        i = fancy[0]
        x = local[i]
        whole = all(_is_all(d, n) for d, n in zip(dst, out.shape, strict=False))
        if isinstance(x, np.ndarray) and whole and chunk.dtype == out.dtype:
            view = chunk[local[:i] + (slice(None),) + local[i + 1 :]]
            np.take(view, x, axis=i, out=out, mode="clip" if checked else "raise")
            return
        out[dst] = _gather(chunk, local)
        return
    if len(fancy) == 1 and isinstance(local[fancy[0]], np.ndarray):
        i = fancy[0]
        x, d = local[i], dst[i]
        if isinstance(d, np.ndarray) and len(x) <= _ROW_LOOP:  # row by row: no temporary
            pre_l, post_l = local[:i], local[i + 1 :]
            pre_d, post_d = dst[:i], dst[i + 1 :]
            for r, p in zip(x.tolist(), d.tolist(), strict=True):
                out[(*pre_d, p, *post_d)] = chunk[(*pre_l, r, *post_l)]
            return
    if sum(isinstance(d, np.ndarray) for d in dst) <= 1 and len(fancy) == 1:
        out[dst] = _gather(chunk, local)
        return
    out[_mesh(dst, out.shape)] = chunk[_mesh(local, chunk.shape)]


def _is_all(d: slice, n: int) -> bool:
    return d.indices(n) == (0, n, 1)


def _gather(chunk: np.ndarray, local: tuple[Any, ...]) -> np.ndarray:
    """``chunk[local]`` where ``local`` has one fancy entry (an array or a Joint's adjacent
    arrays): numpy keeps the dim in place."""
    idx: list[Any] = []
    for x in local:
        idx.extend(x.arrays if isinstance(x, Joint) else (x,))
    return cast("np.ndarray", chunk[tuple(idx)])


def _mesh(entries: tuple[Any, ...], shape: Sequence[int]) -> tuple[np.ndarray, ...]:
    """An all-advanced index equal to the orthogonal ``entries`` (slices, arrays, Joints: one
    output dim each), so that numpy keeps the dims in order."""
    n_out = len(entries)
    idx: list[np.ndarray] = []
    dim = 0
    for j, x in enumerate(entries):
        b = [1] * n_out
        if isinstance(x, Joint):
            for a in x.arrays:
                b[j] = len(a)
                idx.append(a.reshape(b))
                dim += 1
            continue
        a = np.arange(*x.indices(shape[dim])) if isinstance(x, slice) else x
        b[j] = len(a)
        idx.append(a.reshape(b))
        dim += 1
    return tuple(idx)


def read(
    indexer: Indexer,
    chunk: Callable[[tuple[int, ...]], np.ndarray | None],
    dtype: Any,
    out: np.ndarray | None = None,
    fill: Any = 0,
) -> np.ndarray:
    """The selection read chunk by chunk on this thread: ``chunk(coords)`` gives a chunk (an
    array of the chunk's shape, or None for the fill value), and its part is scattered into
    ``out`` (a new array of ``dtype`` when None)."""
    projections = indexer.chunks
    if out is None and len(projections) == 1:
        # one chunk (a memory map, or rows of one chunk): a fancy take makes the result
        proj = projections[0]
        got = chunk(proj.coords)
        taken = None if got is None else _take_new(got, proj)
        if taken is not None:
            return taken
    result = np.empty(indexer.shape, dtype) if out is None else out
    for proj in projections:
        got = chunk(proj.coords)
        if got is None:
            result[proj.out] = fill
        else:
            scatter(result, proj, got, checked=not indexer.unchecked)
    return result


def read_whole(
    src: np.ndarray, selection: Sequence[Any], out: np.ndarray | None = None
) -> np.ndarray:
    """``src[selection]`` of an array that is one chunk (a memory map), into ``out`` when
    given: :func:`read` of its :func:`project` (``taken_whole``). A minibatch of rows, one
    index array over the first dim, has a plan of one piece, the selection itself: it is
    taken straight away (numpy checks the range), without building the plan."""
    if (
        out is None
        and len(selection) == 1
        and type(selection[0]) is np.ndarray
        and selection[0].ndim == 1
        and selection[0].dtype.kind in "iu"
        and src.ndim
    ):
        return cast("np.ndarray", np.take(src, selection[0], axis=0))
    return read(project(selection, src.shape, taken_whole=True), lambda _: src, src.dtype, out)


def _take_new(chunk: np.ndarray, proj: ChunkProjection) -> np.ndarray | None:
    """``chunk[proj.local]`` as a new array in one copy, when ``proj`` is the whole output and
    holds one index array among slices (numpy's take checks its range); else None."""
    local = proj.local
    if len(local) != chunk.ndim or not all(isinstance(d, slice) and d.start == 0 for d in proj.out):
        return None
    i = -1
    for j, x in enumerate(local):
        if type(x) is np.ndarray:
            if i >= 0:
                return None
            i = j
        elif not isinstance(x, slice):
            return None
    if i < 0:
        return None
    view = chunk[local[:i] + (slice(None),) + local[i + 1 :]]
    return cast("np.ndarray", np.take(view, local[i], axis=i))
