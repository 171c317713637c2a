"""``ptd validate --data``: read every chunk of every leaf once and check what it holds.

Each numeric leaf is read in *blocks* of whole chunks (about 8 MiB each, 16 MiB for HDF5, one
chunk when a chunk is larger; rows of a contiguous HDF5 dataset), several blocks at a time on
a thread pool (``workers``: zarr chunks are decoded in parallel; HDF5 reads one block at a
time, its library holding a global lock, while another thread computes the previous block's
statistics), so memory stays bounded by a few blocks whatever the store's size. A
block that cannot be read is read again chunk by chunk, so each bad chunk is named by its key
and its grid index. Found per leaf:

* ``undecodable_chunk``: a chunk whose bytes cannot be decoded (a truncated or bit-flipped
  compressed chunk);
* ``checksum_failed``: a chunk whose checksum (HDF5 ``fletcher32``, the zarr ``crc32c`` codec)
  does not match its bytes;
* missing chunks (never written, or deleted: they read as the fill value), counted; a chunk of
  fill values is legitimately absent in zarr (``write_empty_chunks``), so this is information
  unless the schema forbids it;
* NaN/Inf counts of float leaves, and statistics (min, max, mean, std, NaN count) of every
  numeric leaf (bfloat16 included; float8 and complex leaves are only checked for decoding);
* with value constraints (:class:`Constraint`, from a schema): values out of range, not among
  the allowed ones, NaN where none is allowed.

Nothing here imports torch. Non-tensor entries are decoded once each (pickles are not
decoded: they are code, not data).

>>> import os, tempfile, numpy as np
>>> from ptd.storage.registry import get_backend
>>> with tempfile.TemporaryDirectory() as d:
...     be = get_backend("h5").open(os.path.join(d, "x.h5"), "w")
...     be.create_array(("x",), shape=(6,), dtype=np.dtype("f4"),
...                     data=np.array([1, 2, 3, np.nan, 5, 6], "f4"), chunks=(2,))
...     res = check_data(be, [("x",)])
...     be.close()
>>> st = res.stats["x"]
>>> st.count, st.nan, st.min, st.max, st.mean
(6, 1, 1.0, 6.0, 3.4)
"""

from __future__ import annotations

import itertools
import math
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ptd.errors import PickleRefusedError, PtdError, UnsupportedOperationError
from ptd.storage import cancel, runtime
from ptd.storage.api import ArrayMeta, Backend, NodeKind, Path, ValueKind
from ptd.storage.chunk_info import ChunkInfo
from ptd.storage.limits import limit

__all__ = [
    "BLOCK_BYTES",
    "HISTOGRAM_BINS",
    "ChunkFault",
    "Constraint",
    "DataResult",
    "LeafStats",
    "Violation",
    "check_data",
    "plan_blocks",
]

#: bytes of one block (several whole chunks) read at a time
BLOCK_BYTES = 8 * 2**20
#: values kept per leaf (a strided sample) for the histogram
_SAMPLE_CAP = 65536
_PER_BLOCK_SAMPLE = 4096
#: bins of the histograms ``ptd inspect --stats`` draws
HISTOGRAM_BINS = 16
#: integer/bool leaves with at most this many distinct values get exact counts per value
MAX_DISTINCT = 16
#: ... counted with one ``bincount`` per block when the block's values span at most this
_COUNT_SPAN = 4096
#: the torch dtypes of the leaves whose values are counted (not float8 bits stored as uint8)
_COUNTABLE = ("bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64")


def image_channel_axis(shape: tuple[int, ...], dtype: np.dtype) -> int | None:
    """The channel axis of an image-like leaf: uint8 ``[N, C, H, W]`` (1) or ``[N, H, W, C]``
    (3) with C of 1, 3 or 4 and images at least 8 x 8; else None.

    >>> image_channel_axis((64, 3, 32, 32), np.dtype("u1")), image_channel_axis((64, 32, 32, 4), np.dtype("u1"))
    (1, 3)
    >>> image_channel_axis((64, 3, 32, 32), np.dtype("f4")) is None
    True
    """
    if dtype != np.uint8 or len(shape) != 4:
        return None
    if shape[1] in (1, 3, 4) and min(shape[2:]) >= 8:
        return 1
    if shape[3] in (1, 3, 4) and min(shape[1:3]) >= 8:
        return 3
    return None


@dataclass
class Constraint:
    """Value constraints of one leaf (a schema entry's ``"constraints"``): ``min``/``max``
    (inclusive), ``allowed`` values, ``allow_nan`` (False: NaN is an error) and
    ``allow_missing_chunks`` (False: a chunk never written is an error)."""

    min: float | None = None
    max: float | None = None
    allowed: list[float] | None = None
    allow_nan: bool = True
    allow_missing_chunks: bool = True

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Constraint:
        allowed = d.get("allowed")
        return cls(
            min=None if d.get("min") is None else float(d["min"]),
            max=None if d.get("max") is None else float(d["max"]),
            allowed=None if allowed is None else [float(v) for v in allowed],
            allow_nan=bool(d.get("allow_nan", True)),
            allow_missing_chunks=bool(d.get("allow_missing_chunks", True)),
        )


@dataclass
class LeafStats:
    """Statistics of one numeric leaf over every value read (NaN/Inf left out of min, max,
    mean and std; None where there is nothing to compute)."""

    count: int = 0
    min: float | None = None
    max: float | None = None
    mean: float | None = None
    std: float | None = None
    nan: int = 0
    inf: int = 0
    #: chunks of the leaf, chunks stored, bytes decoded
    chunks: int = 0
    stored_chunks: int | None = None
    nbytes: int = 0
    #: a histogram of a strided sample (``bins`` counts over ``[min, max]``), numeric leaves
    histogram: list[int] | None = None
    #: integer and bool leaves of few distinct values (at most :data:`MAX_DISTINCT`): each
    #: value and how many elements hold it, exactly, ``[[value, count], ...]`` by value
    values: list[list[Any]] | None = None
    #: image-like uint8 leaves (``[N, C, H, W]`` or ``[N, H, W, C]``, C of 1, 3 or 4): the
    #: channel axis (1 or 3) and per channel ``{"min", "max", "mean"}``
    channel_axis: int | None = None
    channels: list[dict[str, float]] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict (for JSON; the histogram list is shared, not copied)."""
        return dict(vars(self))


@dataclass
class ChunkFault:
    """A chunk that could not be read: ``code`` is ``undecodable_chunk`` or
    ``checksum_failed``; ``chunk`` its grid index."""

    key: str
    code: str
    chunk: list[int]
    message: str


@dataclass
class Violation:
    """Values that break a constraint: ``code`` is ``value_out_of_range``,
    ``value_not_allowed``, ``nan_not_allowed`` or ``missing_chunks``."""

    key: str
    code: str
    count: int
    message: str


@dataclass
class DataResult:
    stats: dict[str, LeafStats] = field(default_factory=dict)
    faults: list[ChunkFault] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    #: key -> (chunks missing, chunks in all, the first missing grid indices)
    missing: dict[str, tuple[int, int, list[list[int]]]] = field(default_factory=dict)
    #: non-tensor entries that could not be decoded: key -> message
    bad_non_tensors: dict[str, str] = field(default_factory=dict)
    #: leaves not read at all, and why (more chunks to visit than PTD_MAX_CHUNKS where the
    #: stored ones cannot be listed): key -> message
    not_checked: dict[str, str] = field(default_factory=dict)
    #: the keys of ``not_checked`` whose data lies in other files (an HDF5 virtual dataset or
    #: external storage, see ``Backend.data_elsewhere``), with those files: named, not an
    #: error of the store
    elsewhere: dict[str, list[str]] = field(default_factory=dict)
    #: the fill value of leaves with chunks never stored (read once): key -> value
    fill_values: dict[str, Any] = field(default_factory=dict)
    nbytes: int = 0
    seconds: float = 0.0


# --- planning ----------------------------------------------------------------------------------
def plan_blocks(
    shape: Sequence[int], chunks: Sequence[int], itemsize: int, limit: int = BLOCK_BYTES
) -> Iterator[tuple[slice, ...]]:
    """Regions of whole chunks covering ``shape``, each about ``limit`` bytes (one chunk when a
    chunk is larger), in C order.

    >>> [tuple((s.start, s.stop) for s in b) for b in plan_blocks((5, 4), (2, 4), 4, 64)]
    [((0, 4), (0, 4)), ((4, 5), (0, 4))]
    >>> len(list(plan_blocks((4, 6), (2, 2), 1, 4)))
    6
    """
    shape, chunks = tuple(int(s) for s in shape), tuple(max(1, int(c)) for c in chunks)
    if not shape:
        yield ()
        return
    if 0 in shape:
        return
    nd = len(shape)
    # the first dim d such that one chunk in dims < d, chunk multiples in d and everything
    # after d fit in the limit
    d = nd - 1
    for k in range(nd):
        per = itemsize * math.prod(chunks[:k]) * chunks[k] * math.prod(shape[k + 1 :])
        if per <= limit:
            d = k
            break
    per = itemsize * math.prod(chunks[:d]) * chunks[d] * math.prod(shape[d + 1 :])
    # one chunk per block when a single chunk along the last dim is already over the limit
    step = chunks[d] if d == nd - 1 and per > limit else chunks[d] * max(1, limit // max(1, per))
    outer = [range(0, shape[i], chunks[i]) for i in range(d)]
    for starts in itertools.product(*outer):
        head = tuple(slice(s, min(s + chunks[i], shape[i])) for i, s in enumerate(starts))
        for s in range(0, shape[d], step):
            yield (
                head
                + (slice(s, min(s + step, shape[d])),)
                + tuple(slice(0, shape[i]) for i in range(d + 1, nd))
            )


def _chunks_of(region: tuple[slice, ...], chunks: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    ranges = [range(r.start // c, -(-r.stop // c)) for r, c in zip(region, chunks, strict=True)]
    return itertools.product(*ranges)


def _chunk_region(
    idx: tuple[int, ...], chunks: tuple[int, ...], shape: tuple[int, ...]
) -> tuple[slice, ...]:
    return tuple(
        slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(idx, chunks, shape, strict=True)
    )


# --- statistics --------------------------------------------------------------------------------
class _Acc:
    """Streaming statistics of one leaf (blocks are merged as they complete, any order)."""

    def __init__(
        self,
        float_like: bool,
        want_sample: bool,
        constraint: Constraint | None,
        *,
        countable: bool = False,
        is_bool: bool = False,
        channel_axis: int | None = None,
        channels: int = 0,
    ) -> None:
        self.float_like = float_like
        self.is_bool = is_bool
        #: exact counts per value while they are few (integer and bool leaves)
        self.values: dict[Any, int] | None = {} if countable and want_sample else None
        self.channel_axis = channel_axis if want_sample else None
        self.ch_sum = np.zeros(channels, dtype=np.float64)
        self.ch_count = 0
        self.ch_min = np.full(channels, 255.0)
        self.ch_max = np.zeros(channels)
        self.n = 0
        self.mean = 0.0
        self.m2 = 0.0
        self.min: float | None = None
        self.max: float | None = None
        self.nan = 0
        self.inf = 0
        self.count = 0
        self.out_of_range = 0
        self.not_allowed = 0
        self.sample: list[np.ndarray] | None = [] if want_sample else None
        self.sampled = 0
        self.constraint = constraint
        self.lock = threading.Lock()

    def add(self, x: np.ndarray, region: tuple[slice, ...] = ()) -> None:
        if self.channel_axis is not None and x.size:
            self._add_channels(x, region)
        x = np.ascontiguousarray(x).reshape(-1)
        total = x.size
        if not total:
            return
        if self.values is not None:
            self._count_values(x)
        nan = inf = 0
        s: float | None = None
        if self.float_like:
            # the float32/64 sum (pairwise: accurate) is finite exactly when every value is,
            # unless finite values overflow it: then the finite mask decides
            s = float(x.sum())
            if not math.isfinite(s):
                finite = np.isfinite(x)
                nfin = int(np.count_nonzero(finite))
                if nfin != total:
                    nan = int(np.count_nonzero(np.isnan(x)))
                    inf = total - nfin - nan
                    x = x[finite]
                s = float(np.add.reduce(x, dtype=np.float64))
        n = x.size
        c = self.constraint
        bad_range = bad_allowed = 0
        if n:
            mn, mx = x.min(), x.max()
            mean, m2 = _moments(x, s)
            if c is not None:
                if c.min is not None or c.max is not None:
                    lo = -np.inf if c.min is None else c.min
                    hi = np.inf if c.max is None else c.max
                    if mn < lo or mx > hi:
                        bad_range = int(np.count_nonzero((x < lo) | (x > hi)))
                if c.allowed is not None:
                    bad_allowed = int(np.count_nonzero(~np.isin(x, np.asarray(c.allowed))))
            samp = None
            if self.sample is not None:
                stride = max(1, n // _PER_BLOCK_SAMPLE)
                samp = np.array(x[::stride], dtype=np.float64)
        with self.lock:
            self.count += total
            self.nan += nan
            self.inf += inf
            self.out_of_range += bad_range
            self.not_allowed += bad_allowed
            if not n:
                return
            mnf, mxf = float(mn), float(mx)
            self.min = mnf if self.min is None else min(self.min, mnf)
            self.max = mxf if self.max is None else max(self.max, mxf)
            # Chan et al.'s merge of two (count, mean, M2)
            tot = self.n + n
            delta = mean - self.mean
            self.m2 += m2 + delta * delta * self.n * n / tot
            self.mean += delta * n / tot
            self.n = tot
            if self.sample is not None and samp is not None:
                self.sample.append(samp)
                self.sampled += samp.size
                if self.sampled > _SAMPLE_CAP:
                    merged = np.concatenate(self.sample)[::2]
                    self.sample, self.sampled = [merged], merged.size

    def add_constant(self, one: np.ndarray, count: int) -> None:
        """Merge ``count`` elements that all hold the one value of ``one`` (chunks never
        stored: the fill value), in O(1) whatever ``count``."""
        x = np.ascontiguousarray(one).reshape(-1)[:1]
        if count <= 0 or not x.size:
            return
        v = x[0]
        if self.values is not None:
            key = int(v)
            with self.lock:
                if self.values is not None:
                    self.values[key] = self.values.get(key, 0) + count
                    if len(self.values) > MAX_DISTINCT:
                        self.values = None
        c = self.constraint
        with self.lock:
            self.count += count
            if self.float_like and not np.isfinite(v):
                if np.isnan(v):
                    self.nan += count
                else:
                    self.inf += count
                return
            f = float(v)
            if c is not None:
                lo = -math.inf if c.min is None else c.min
                hi = math.inf if c.max is None else c.max
                if f < lo or f > hi:
                    self.out_of_range += count
                if c.allowed is not None and f not in c.allowed:
                    self.not_allowed += count
            self.min = f if self.min is None else min(self.min, f)
            self.max = f if self.max is None else max(self.max, f)
            tot = self.n + count
            delta = f - self.mean
            self.m2 += delta * delta * self.n * count / tot
            self.mean += delta * count / tot
            self.n = tot
            if self.sample is not None:
                samp = np.full(min(count, _PER_BLOCK_SAMPLE), f, dtype=np.float64)
                self.sample.append(samp)
                self.sampled += samp.size

    def _count_values(self, x: np.ndarray) -> None:
        """Exact counts per value of a block, merged while they are few: one ``bincount`` when
        the block's values span little, else one comparison per value a strided sample finds
        (and none when the sample already holds too many)."""
        if x.dtype == np.bool_:
            x = x.view(np.uint8)
        lo, hi = int(x.min()), int(x.max())
        found: dict[int, int] | None
        if hi - lo <= _COUNT_SPAN:
            counts = np.bincount(x.astype(np.int64) - lo)
            found = {lo + int(v): int(counts[v]) for v in np.flatnonzero(counts)}
        else:
            seen = np.unique(x[:: max(1, x.size // 1024)])
            found = None
            if seen.size <= MAX_DISTINCT:
                found = {int(v): int(np.count_nonzero(x == v)) for v in seen}
                if sum(found.values()) != x.size:  # values the sample missed: too many
                    found = None
        if found is None:
            with self.lock:
                self.values = None
            return
        with self.lock:
            if self.values is None:
                return
            for v, c in found.items():
                self.values[v] = self.values.get(v, 0) + c
            if len(self.values) > MAX_DISTINCT:
                self.values = None

    def _add_channels(self, x: np.ndarray, region: tuple[slice, ...]) -> None:
        """Per-channel sums, minima and maxima of an image block (``region`` places it)."""
        axis = self.channel_axis
        assert axis is not None
        first = region[axis].start if len(region) > axis and region[axis].start else 0
        others = tuple(i for i in range(x.ndim) if i != axis)
        sums = x.sum(axis=others, dtype=np.float64)
        mins, maxs = x.min(axis=others), x.max(axis=others)
        sel = slice(first, first + x.shape[axis])
        with self.lock:
            self.ch_sum[sel] += sums
            self.ch_min[sel] = np.minimum(self.ch_min[sel], mins)
            self.ch_max[sel] = np.maximum(self.ch_max[sel], maxs)
            if first == 0:  # elements per channel: counted once per block of channel 0
                self.ch_count += x.size // x.shape[axis]

    def result(self, bins: int) -> LeafStats:
        st = LeafStats(count=self.count, nan=self.nan, inf=self.inf, min=self.min, max=self.max)
        if self.n:
            st.mean = self.mean
            st.std = math.sqrt(max(self.m2, 0.0) / self.n)
        if bins and self.sample and self.min is not None and self.max is not None:
            data = np.concatenate(self.sample)
            hi = self.max if self.max > self.min else self.min + 1.0
            st.histogram = [int(v) for v in np.histogram(data, bins=bins, range=(self.min, hi))[0]]
        if self.values:
            st.values = [
                [bool(v) if self.is_bool else v, c] for v, c in sorted(self.values.items())
            ]
        if self.channel_axis is not None and self.ch_count:
            st.channel_axis = self.channel_axis
            st.channels = [
                {"min": float(lo), "max": float(hi), "mean": float(s / self.ch_count)}
                for lo, hi, s in zip(self.ch_min, self.ch_max, self.ch_sum, strict=True)
            ]
        return st


def _moments(x: np.ndarray, s: float | None) -> tuple[float, float]:
    """Mean and M2 (sum of squared deviations) of a non-empty block of finite values; ``s``:
    its sum when known.

    Floats: from the sum and the sum of squares (two BLAS-speed passes), unless the variance is
    small next to the mean (cancellation), then from the deviations. Bools: exactly from the
    count of ones. Integers: from the deviations in float64."""
    n = x.size
    if x.dtype.kind == "b":
        ones = float(np.count_nonzero(x))
        mean = ones / n
        return mean, ones - n * mean * mean
    if x.dtype.kind == "f":
        if s is None:
            s = float(x.sum())
        mean = s / n
        sq = float(np.dot(x, x))
        m2 = sq - n * mean * mean
        if m2 > 1e-2 * sq:
            return mean, m2
        return mean, _squared_deviations(x, mean)
    mean = float(np.add.reduce(x, dtype=np.float64)) / n
    return mean, _squared_deviations(x, mean)


#: values widened to float64 at a time for the deviations (8 MiB): never a copy of a chunk
_DEV_BLOCK = 1 << 20


def _squared_deviations(x: np.ndarray, mean: float) -> float:
    """The sum of ``(x - mean) ** 2`` in float64, in blocks of :data:`_DEV_BLOCK` values."""
    flat = x.reshape(-1)
    total = 0.0
    for i in range(0, flat.size, _DEV_BLOCK):
        dev = flat[i : i + _DEV_BLOCK].astype(np.float64)
        dev -= mean
        total += float(np.dot(dev, dev))
    return total


def _as_numbers(raw: np.ndarray, torch_dtype: str | None) -> np.ndarray | None:
    """The values of a block as numpy numbers for statistics (bfloat16 bits widened to
    float32), or None when there are none to compute (float8, complex)."""
    if torch_dtype == "bfloat16":
        return (raw.astype(np.uint32) << 16).view(np.float32)
    if torch_dtype is not None and torch_dtype.startswith("float8"):
        return None
    if raw.dtype.kind == "c":
        return None
    if raw.dtype == np.float16:
        return raw.astype(np.float32)  # float16 has no BLAS and overflows its own sums
    return raw


# --- the pass ----------------------------------------------------------------------------------
#: a block smaller than this is read in one task with its neighbours (up to _BATCH_BLOCKS)
_SMALL_BLOCK = 1 << 20
_BATCH_BLOCKS = 256


def _region_size(shape: tuple[int, ...], region: tuple[slice, ...]) -> int:
    """Elements of ``shape`` a block ``region`` (slices of the leading dims) covers."""
    n = 1
    for i, dim in enumerate(shape):
        if i < len(region):
            start, stop, step = region[i].indices(dim)
            n *= len(range(start, stop, step))
        else:
            n *= dim
    return n


@dataclass
class _Leaf:
    path: Path
    key: str
    shape: tuple[int, ...]
    itemsize: int
    torch_dtype: str | None
    info: ChunkInfo
    acc: _Acc
    constraint: Constraint | None
    #: only the stored chunks are read (grid indices, in order); the others hold the fill
    #: value, read once at ``fill_at`` and counted ``fill_count`` times
    stored_only: list[tuple[int, ...]] | None = None
    fill_at: tuple[slice, ...] | None = None
    fill_count: int = 0


def _classify(info: ChunkInfo, err: Exception) -> str:
    text = str(err).lower()
    if info.checksum is not None or "checksum" in text:
        return "checksum_failed"
    return "undecodable_chunk"


def _scalar(one: np.ndarray) -> Any:
    """The one value of a 1-element read, as a JSON-friendly python value."""
    v = np.asarray(one).reshape(-1)[0]
    if isinstance(v, (np.floating, float)):
        f = float(v)
        return f if math.isfinite(f) else str(f)
    return v.item() if hasattr(v, "item") else v


def _grid_order(grid: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    """Every index of ``grid`` in C order, lazily (``itertools.product`` would first make a
    tuple of each range: 2**62 items for a hostile shape).

    >>> list(_grid_order((2, 2)))
    [(0, 0), (0, 1), (1, 0), (1, 1)]
    """
    if any(g <= 0 for g in grid):
        return
    idx = [0] * len(grid)
    while True:
        yield tuple(idx)
        d = len(grid) - 1
        while d >= 0:
            idx[d] += 1
            if idx[d] < grid[d]:
                break
            idx[d] = 0
            d -= 1
        if d < 0:
            return


def _plan_leaf(be: Backend, leaf: _Leaf, meta: ArrayMeta, res: DataResult) -> None:
    """Decide what a leaf's check visits, from what the store holds rather than what its
    metadata declares: the stored chunks, when the store lists them and fewer than half are
    stored (each never-stored chunk holds the fill value, read once and counted); every chunk
    otherwise, unless they are more than ``PTD_MAX_CHUNKS`` (then the leaf is not read and
    ``res.not_checked`` says why). Missing chunks are counted in ``res.missing``."""
    info, key, shape = leaf.info, leaf.key, leaf.shape
    total = math.prod(shape)
    if not total:
        return
    origin = tuple(slice(0, 1) for _ in shape)
    if info.contiguous:
        if info.stored_bytes == 0:  # never written: all of it is the fill value
            leaf.stored_only, leaf.fill_at, leaf.fill_count = [], origin, total
            leaf.acc.channel_axis = None
        return
    n = info.n_chunks
    if info.stored is None:
        most = limit("PTD_MAX_CHUNKS")
        if n > most:
            res.not_checked[key] = (
                f"{key!r} has {n} chunks, more than the {most} a check visits where the stored "
                "chunks cannot be listed (PTD_MAX_CHUNKS); it was not read"
            )
        return
    grid = info.grid
    stored = sorted(
        idx for idx in info.stored if all(i < g for i, g in zip(idx, grid, strict=True))
    )
    missing = n - len(stored)
    if not missing:
        return
    held = set(stored)
    first = [list(i) for i in itertools.islice((i for i in _grid_order(grid) if i not in held), 5)]
    res.missing[key] = (missing, n, first)
    if missing <= len(stored):
        return  # mostly stored: read block by block, the few missing chunks as fill values
    leaf.stored_only = stored
    in_stored = sum(
        math.prod(len(range(r.start, r.stop)) for r in _chunk_region(idx, info.chunks, shape))
        for idx in stored
    )
    leaf.fill_count = total - in_stored
    start = first[0]
    leaf.fill_at = tuple(slice(i * c, i * c + 1) for i, c in zip(start, info.chunks, strict=True))
    leaf.acc.channel_axis = None  # per-channel figures of an image need every element read


def check_data(
    be: Backend,
    paths: Sequence[Path] | None = None,
    *,
    constraints: dict[str, Constraint] | None = None,
    workers: int | None = None,
    progress: Callable[[int], None] | None = None,
    histogram_bins: int = 0,
    block_bytes: int | None = None,
    metas: Mapping[Path, ArrayMeta] | None = None,
) -> DataResult:
    """Read every chunk of the leaves at ``paths`` (default: every leaf of the store) of an
    open backend once (see the module doc). ``progress(nbytes)`` is called as blocks complete;
    ``histogram_bins``: also a histogram of each float leaf.

    ``workers`` (default: 2 where the store library reads under one global lock,
    ``FormatPolicy.serial_reads`` (HDF5), so that a second thread only computes one block's
    statistics while the next is read; ``min(4, CPUs)`` elsewhere (zarr, whose codecs run in
    parallel)) blocks are in flight at once, each ``block_bytes`` (default twice
    :data:`BLOCK_BYTES` under one lock, else :data:`BLOCK_BYTES`). ``metas``: the leaves' metadata when the caller has read it."""
    cancel.phase("reading", str(be.location))
    if block_bytes is None:
        block_bytes = 2 * BLOCK_BYTES if be.policy.serial_reads else BLOCK_BYTES
    t0 = time.perf_counter()
    constraints = constraints or {}
    res = DataResult()
    if paths is None:
        paths = [p for p, k, _m in be.walk(()) if k is NodeKind.ARRAY]
    leaves: list[_Leaf] = []
    for path in paths:
        key = "/".join(path)
        meta = metas.get(path) if metas is not None else None
        if meta is None:
            meta = be.array_meta(path)
        if meta.kind is ValueKind.NON_TENSOR:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", FutureWarning)
                    be.read_non_tensor(path, allow_pickle=False)
            except PickleRefusedError:
                pass
            except PtdError as err:
                res.bad_non_tensors[key] = str(err)
            continue
        if meta.kind is not ValueKind.NUMERIC:
            continue
        try:
            info = be.chunk_info(path)
        except UnsupportedOperationError as err:  # data outside the file: named, not read
            res.not_checked[key] = str(err)
            if path in be.data_elsewhere:
                res.elsewhere[key] = list(be.data_elsewhere[path])
            continue
        c = constraints.get(key)
        float_like = meta.dtype.kind == "f" or meta.torch_dtype == "bfloat16"
        axis = image_channel_axis(tuple(meta.shape), meta.dtype)
        leaf = _Leaf(
            path,
            key,
            tuple(meta.shape),
            meta.dtype.itemsize,
            meta.torch_dtype,
            info,
            _Acc(
                float_like,
                histogram_bins > 0,
                c,
                countable=meta.dtype.kind in "biu" and meta.torch_dtype in (None, *_COUNTABLE),
                is_bool=meta.dtype.kind == "b",
                channel_axis=axis,
                channels=meta.shape[axis] if axis is not None else 0,
            ),
            c,
        )
        leaves.append(leaf)
        _plan_leaf(be, leaf, meta, res)
        if leaf.key in res.not_checked:
            leaves.pop()
    faults_lock = threading.Lock()

    def read_block(leaf: _Leaf, region: tuple[slice, ...]) -> int:
        try:
            raw = be.read(leaf.path, region)
        except PtdError:
            return read_chunks(leaf, region)
        _account(leaf, raw, region)
        return raw.nbytes

    def read_chunks(leaf: _Leaf, region: tuple[slice, ...]) -> int:
        """A block that failed, chunk by chunk: the bad ones are named, the good ones count."""
        done = 0
        chunks = leaf.info.chunks
        if leaf.info.contiguous:
            chunks = (1,) + tuple(leaf.shape[1:])
        for idx in _chunks_of(region, chunks):
            sub = _chunk_region(idx, chunks, leaf.shape)
            try:
                raw = be.read(leaf.path, sub)
            except PtdError as err:
                with faults_lock:
                    res.faults.append(
                        ChunkFault(
                            leaf.key,
                            _classify(leaf.info, err),
                            list(idx),
                            f"chunk {list(idx)} of {leaf.key!r} cannot be read: {err}",
                        )
                    )
                continue
            _account(leaf, raw, sub)
            done += raw.nbytes
        return done

    def _account(leaf: _Leaf, raw: np.ndarray, region: tuple[slice, ...]) -> None:
        vals = _as_numbers(raw, leaf.torch_dtype)
        if vals is not None:
            leaf.acc.add(vals, region)
        else:
            with leaf.acc.lock:
                leaf.acc.count += raw.size

    def jobs() -> Iterator[tuple[_Leaf, tuple[slice, ...]]]:
        for leaf in leaves:
            if leaf.stored_only is not None:
                for idx in leaf.stored_only:
                    yield leaf, _chunk_region(idx, leaf.info.chunks, leaf.shape)
                continue
            chunks = leaf.info.chunks
            if leaf.info.contiguous and leaf.shape:
                chunks = (1,) + tuple(leaf.shape[1:])
            for region in plan_blocks(leaf.shape, chunks, leaf.itemsize, block_bytes):
                yield leaf, region

    def batches() -> Iterator[list[tuple[_Leaf, tuple[slice, ...]]]]:
        """The blocks in tasks for the pool: a large block alone, small ones (a store of
        many small leaves) together up to ``block_bytes``, so that a task is worth its
        round trip through the pool."""
        batch: list[tuple[_Leaf, tuple[slice, ...]]] = []
        size = 0
        for leaf, region in jobs():
            nbytes = _region_size(leaf.shape, region) * leaf.itemsize
            if nbytes >= _SMALL_BLOCK:
                yield [(leaf, region)]
                continue
            batch.append((leaf, region))
            size += nbytes
            if size >= block_bytes or len(batch) >= _BATCH_BLOCKS:
                yield batch
                batch, size = [], 0
        if batch:
            yield batch

    def read_batch(batch: list[tuple[_Leaf, tuple[slice, ...]]]) -> int:
        return sum(read_block(leaf, region) for leaf, region in batch)

    for leaf in leaves:
        if leaf.fill_at is not None and leaf.fill_count:
            try:
                one = be.read(leaf.path, leaf.fill_at)
            except PtdError as err:
                idx = [
                    r.start // max(1, c)
                    for r, c in zip(leaf.fill_at, leaf.info.chunks, strict=False)
                ]
                res.faults.append(
                    ChunkFault(
                        leaf.key,
                        _classify(leaf.info, err),
                        idx,
                        f"the fill value of {leaf.key!r} cannot be read: {err}",
                    )
                )
                continue
            vals = _as_numbers(one, leaf.torch_dtype)
            if vals is not None:
                leaf.acc.add_constant(vals, leaf.fill_count)
            else:
                with leaf.acc.lock:
                    leaf.acc.count += leaf.fill_count
            res.fill_values[leaf.key] = _scalar(one)

    default_workers = min(2 if be.policy.serial_reads else 4, os.cpu_count() or 1)
    n_workers = max(1, int(workers) if workers else default_workers)
    with runtime.job_pool(n_workers, "datacheck") as pool:
        pending: list[Future[int]] = []
        for batch in batches():
            cancel.check()
            pending.append(pool.submit(read_batch, batch))
            while len(pending) > n_workers:
                nbytes = pending.pop(0).result()
                res.nbytes += nbytes
                if progress is not None:
                    progress(nbytes)
        for fut in pending:
            nbytes = fut.result()
            res.nbytes += nbytes
            if progress is not None:
                progress(nbytes)

    for leaf in leaves:
        st = leaf.acc.result(histogram_bins)
        st.chunks = 0 if leaf.info.contiguous else leaf.info.n_chunks
        st.stored_chunks = (
            None
            if leaf.info.stored is None or leaf.info.contiguous
            else leaf.info.n_chunks - res.missing.get(leaf.key, (0, 0, []))[0]
        )
        st.nbytes = math.prod(leaf.shape) * leaf.itemsize
        if leaf.stored_only is not None and leaf.info.contiguous:
            st.stored_chunks = None
        res.stats[leaf.key] = st
        _violations(leaf, st, res)
    res.faults.sort(key=lambda f: (f.key, f.chunk))
    res.seconds = time.perf_counter() - t0
    return res


def _violations(leaf: _Leaf, st: LeafStats, res: DataResult) -> None:
    c = leaf.constraint
    if c is None:
        return
    acc, key = leaf.acc, leaf.key
    if acc.out_of_range:
        res.violations.append(
            Violation(
                key,
                "value_out_of_range",
                acc.out_of_range,
                f"{acc.out_of_range} values of {key!r} are outside [{c.min}, {c.max}] "
                f"(found min {st.min}, max {st.max})",
            )
        )
    if acc.not_allowed:
        res.violations.append(
            Violation(
                key,
                "value_not_allowed",
                acc.not_allowed,
                f"{acc.not_allowed} values of {key!r} are not among the allowed {c.allowed}",
            )
        )
    if not c.allow_nan and st.nan:
        res.violations.append(
            Violation(key, "nan_not_allowed", st.nan, f"{key!r} holds {st.nan} NaN values")
        )
    miss = res.missing.get(key)
    if not c.allow_missing_chunks and miss:
        res.violations.append(
            Violation(
                key,
                "missing_chunks",
                miss[0],
                f"{miss[0]} of {miss[1]} chunks of {key!r} are missing (first: {miss[2]})",
            )
        )
