"""The decoded-chunk cache: one per open store, a byte budget, least recently used out first
(per array: see :class:`ChunkCache`).

A read of a chunked, compressed array decodes whole chunks; a random row costs a whole chunk.
:class:`ChunkCache` keeps the decoded chunks of one open store (keyed by the array and the
chunk's grid coordinates) up to a byte budget, so that a chunk read again (the next slice of a
sequential pass, a row of a chunk another batch already touched) is not read nor decoded again.

The budget: ``chunk_cache=`` of ``PersistentTensorDict(...)``, ``from_h5``, ``from_zarr`` (and
of :meth:`~ptd.storage.api.Backend.open`) takes a number of bytes, a size string
(``"256MB"``, ``"1GiB"``), ``0``/``False`` (off) or ``None``: what the environment variable
``PTD_CHUNK_CACHE`` says, else :data:`DEFAULT_BUDGET` (64 MiB). Why 64 MiB: it holds a few
hundred typical chunks (enough for sequential slices smaller than a chunk, and for a
chunk-aware sampler's window over a handful of leaves), and it is paid once per DataLoader
worker, so eight workers stay under 600 MB. A random minibatch over a store much larger than
the budget gains little from any cache (the hit rate is about budget / decoded store size);
what makes it fast is the parallel decode (:mod:`~ptd.storage.read.decoded`).

The cache is used only for stores opened read-only (mode ``"r"``): a write could make a cached
chunk stale. It is safe under threads (one lock; decoding happens outside it) and belongs to
one process: in a forked child (a DataLoader worker) the first use finds the parent's process
id and starts empty, with a new lock (the parent's lock may have been held at the fork).

    >>> import numpy as np
    >>> cache = ChunkCache(1000)
    >>> cache.put("a", (0,), np.zeros(100, np.uint8), size=5000)
    >>> cache.get("a", (0,)) is not None, cache.nbytes
    (True, 100)
    >>> cache.put("a", (1,), np.zeros(950, np.uint8), size=5000)  # evicts the older chunk
    >>> cache.get("a", (0,)), cache.nbytes
    (None, 950)
    >>> parse_budget("64MB"), parse_budget("1 GiB"), parse_budget(False), parse_budget(4096)
    (64000000, 1073741824, 0, 4096)
"""

from __future__ import annotations

import collections
import re
import threading
from collections.abc import Hashable
from typing import Any

import numpy as np

from ptd.errors import PtdValueError
from ptd.storage import runtime
from ptd.storage.read.shuffled import ShuffledChunk

__all__ = ["DEFAULT_BUDGET", "ENV_VAR", "Chunk", "ChunkCache", "cache_budget", "parse_budget"]

#: a decoded chunk as the cache keeps it: an array, or bytes still in shuffle order
Chunk = np.ndarray | ShuffledChunk

#: the environment variable giving the budget when ``chunk_cache=None`` (``"0"`` turns it off)
ENV_VAR = "PTD_CHUNK_CACHE"
#: the budget when neither the option nor the environment variable gives one
DEFAULT_BUDGET = 64 << 20

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*([a-z]*)\s*$")
_OFF = frozenset({"off", "false", "no", "none"})


def parse_budget(value: Any, what: str = "chunk_cache") -> int:
    """A budget in bytes from an int, a bool (False: 0) or a size string (``"512MB"``,
    ``"1GiB"``, ``"0"``, ``"off"``); anything else raises PtdValueError naming ``what``."""
    if isinstance(value, bool):
        if value:
            raise PtdValueError(
                f"{what}=True is ambiguous: give a size in bytes or a string like '256MB' "
                "(None means the default)"
            )
        return 0
    if isinstance(value, (int, np.integer)):
        if value < 0:
            raise PtdValueError(f"{what} must be >= 0 bytes, got {int(value)}")
        return int(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _OFF:
            return 0
        m = _SIZE.match(text)
        if m is not None and m.group(2) in _UNITS:
            return int(float(m.group(1)) * _UNITS[m.group(2)])
    raise PtdValueError(
        f"{what} must be a number of bytes or a size like '256MB', '1GiB' or '0', got {value!r}"
    )


def cache_budget(option: Any) -> int:
    """The budget for ``chunk_cache=option``: the option, else ``PTD_CHUNK_CACHE``, else
    :data:`DEFAULT_BUDGET`."""
    if option is not None:
        return parse_budget(option)
    env = runtime.setting(ENV_VAR)
    if env:
        return parse_budget(env, f"the environment variable {ENV_VAR}")
    return DEFAULT_BUDGET


class _Part:
    """The cached chunks of one array, least recently used first."""

    __slots__ = ("items", "nbytes", "weight")

    def __init__(self, weight: int) -> None:
        self.items: collections.OrderedDict[Hashable, Chunk] = collections.OrderedDict()
        self.nbytes = 0
        #: the array's decoded size: its share of the budget is in proportion
        self.weight = weight


class ChunkCache:
    """Decoded chunks (numpy arrays, never modified once stored) up to ``budget`` bytes.

    Chunks are kept per array (``array`` is any hashable naming it, ``coords`` the chunk's grid
    coordinates); each array may hold a share of the budget in proportion to its decoded size
    (``size``, given with the first chunk) and gives up its least recently used chunk first. A
    plain LRU over all arrays would hardly ever hit on random minibatches: the leaves are read
    one after another, and when they do not fit together each leaf's new chunks push out the
    chunks of the leaf read next (measured: 1% hits with a budget of half the store, against
    the 50% of a shared-out budget). A chunk larger than its array's share is not kept.
    """

    def __init__(self, budget: int) -> None:
        self.budget = int(budget)
        self._lock = threading.Lock()
        self._parts: dict[Hashable, _Part] = {}
        self._weights = 0
        self._nbytes = 0
        self._pid = runtime.pid()
        #: lookups that found / did not find their chunk (for benchmarks and tests)
        self.hits = 0
        self.misses = 0

    def _check_process(self) -> None:
        if (
            self._pid != runtime.pid()
        ):  # a forked child: the parent's lock may be held, start afresh
            self._lock = threading.Lock()
            self._parts = {}
            self._weights = self._nbytes = 0
            self.hits = self.misses = 0
            self._pid = runtime.pid()

    @property
    def nbytes(self) -> int:
        """Bytes held now."""
        return self._nbytes

    def __len__(self) -> int:
        return sum(len(p.items) for p in self._parts.values())

    def get(self, array: Hashable, coords: Hashable) -> Chunk | None:
        """The chunk stored for ``array`` at ``coords`` (now its most recently used), or None."""
        self._check_process()
        with self._lock:
            part = self._parts.get(array)
            arr = None if part is None else part.items.get(coords)
            if arr is None:
                self.misses += 1
                return None
            part.items.move_to_end(coords)  # type: ignore[union-attr]
            self.hits += 1
            return arr

    def put(self, array: Hashable, coords: Hashable, arr: Chunk, size: int) -> None:
        """Keep ``arr`` for ``array`` (of ``size`` decoded bytes in all) at ``coords``,
        evicting that array's least recently used chunks to keep it within its share."""
        self._check_process()
        nbytes = int(arr.nbytes)
        if nbytes > self.budget:
            return
        arr.flags.writeable = False  # shared by every later read: nobody may change it
        with self._lock:
            part = self._parts.get(array)
            if part is None:
                part = self._parts[array] = _Part(max(1, int(size)))
                self._weights += part.weight
            old = part.items.pop(coords, None)
            if old is not None:
                part.nbytes -= int(old.nbytes)
                self._nbytes -= int(old.nbytes)
            share = self.budget * part.weight // self._weights
            if nbytes > share:
                return
            part.items[coords] = arr
            part.nbytes += nbytes
            self._nbytes += nbytes
            self._shrink(part, share)
            if self._nbytes > self.budget:  # shares shrank since other arrays came
                for other in list(self._parts.values()):
                    self._shrink(other, self.budget * other.weight // self._weights)

    def _shrink(self, part: _Part, share: int) -> None:
        while part.nbytes > share and part.items:
            _, dropped = part.items.popitem(last=False)
            part.nbytes -= int(dropped.nbytes)
            self._nbytes -= int(dropped.nbytes)

    def clear(self) -> None:
        """Drop every chunk."""
        self._check_process()
        with self._lock:
            self._parts = {}
            self._weights = self._nbytes = 0
