"""A chunk-aware shuffling batch sampler: shuffled epochs over chunked, compressed stores at
near-sequential speed.

A random row of a compressed store costs a whole chunk decode, so drawing every row of an
epoch independently decodes each chunk about once per row it holds. :class:`ChunkShuffleSampler`
instead cuts the rows into *chunk groups* (whole chunks of every chunked leaf, a few MB; see
:mod:`ptd.data.geometry`), visits the groups in a random order, and draws each batch from a
*sliding window* of ``window`` groups, which :class:`~ptd.data.dataset.StoreDataset` holds
decoded: each chunk is decoded about once per epoch. The window slides one group per *step*:
a group's rows, shuffled, are dealt into ``window`` equal parts, one for each of the ``window``
steps from the one where it joins; a step pools the parts of the ``window`` groups that joined
last (about one group's rows, plus the few left over by the step before, so that batches stay
full), shuffles them and cuts batches. So one group joins per step: its decode is spread along
the epoch, never a whole window at once, and the batches name (:class:`BatchIndices`) the
groups their stream needs in the next two steps, which the dataset reads ahead on a thread of
its own.

Randomness, against a full shuffle: the order of the groups is uniformly random and the rows
of a step are uniformly shuffled among themselves, so a batch mixes rows from about ``window``
groups (a full shuffle: from anywhere), and a row lands within ``window`` steps (about
``window * group_rows / batch_size`` batches) of the step where its group joins, rather than
anywhere in the epoch. Rows that share a window in one epoch rarely share it in the next
(the group order is drawn again). The first and last ``window - 1`` steps of a stream hold
fewer groups (the window fills and drains). ``benchmarks/bench_training_data.py --section
randomness`` measures it.

Every epoch is a function of ``(seed, epoch)`` alone (call :meth:`~ChunkShuffleSampler.set_epoch`
before each epoch, as with ``DistributedSampler``). ``rank``/``world_size`` shard the groups
for DistributedDataParallel: each rank gets every ``world_size``-th group of the shuffled
order; every row is drawn exactly once per epoch over all ranks (``drop_last=False``), or each
rank yields the same number of full batches (``drop_last=True``, which DDP needs).

``num_workers``: give it the DataLoader's. The DataLoader hands item ``i`` to worker
``i % num_workers``; the sampler then splits the groups into that many streams and interleaves
their items, so that each worker decodes only its own groups.

``handover``: batches per item. Taking in a batch from a DataLoader worker costs the main
process about 100 µs (the queue, unpickling, torch's bookkeeping) whatever the batch's size:
with few cores and 256-row batches that is a large share of a core. With ``handover=k`` each
item is a *hand-over* of up to ``k`` consecutive batches of one stream (a :class:`BatchIndices`
whose ``sizes`` are its batches' lengths), which the worker reads in one go and
:class:`~ptd.data.StoreLoader` splits into its batches again. The batches and their
order within each stream stay the same; only the interleaving of the streams coarsens to
``k`` batches. :meth:`~ChunkShuffleSampler.batches` yields the batches one by one, in the
order a :class:`~ptd.data.StoreLoader` hands them out.

>>> s = ChunkShuffleSampler(10, batch_size=4, group_rows=2, window=2, seed=0)
>>> batches = list(s)
>>> len(batches), len(s), sorted(i for b in batches for i in b) == list(range(10))
(3, 3, True)
>>> s.set_epoch(1); list(s) != batches
True
>>> h = ChunkShuffleSampler(10, batch_size=2, group_rows=2, window=2, seed=0, num_workers=2,
...                         handover=2)
>>> [b.sizes for b in h], len(h), h.batch_count()
([(2, 2), (2, 2), (2,)], 3, 5)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from torch.utils.data import Sampler

from ptd.errors import PtdValueError

__all__ = ["BatchIndices", "ChunkShuffleSampler"]

#: how many steps ahead a stream names the groups it will need (see :class:`BatchIndices`)
_AHEAD = 2


def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise PtdValueError(f"{name} must be a positive int, got {value!r}")
    return int(value)


class ChunkShuffleSampler(Sampler[list[int]]):
    """Batches of row indices, shuffled chunk group by chunk group (see the module doc).

    Args:
        source: a :class:`~ptd.data.dataset.StoreDataset` (its rows and chunk groups are used,
            and it is told to keep a window decoded), or a number of rows (then give
            ``group_rows``).
        batch_size: rows per batch.
        window: chunk groups shuffled together (and held decoded by the dataset).
        group_rows: rows per chunk group; default: the dataset's. None for a store without
            chunked leaves: every epoch is then a full shuffle.
        seed: the seed; with the epoch it fixes the order.
        shuffle: False: groups and rows in order (evaluation).
        drop_last: drop partial batches; with ``world_size > 1`` every rank then yields the same
            number of batches.
        rank, world_size: this process's share (default: from ``torch.distributed`` when it is
            initialized, else 0 and 1).
        num_workers: the DataLoader's ``num_workers`` (0: one stream).
        handover: batches per item (see the module doc); 1: each item is a batch.
    """

    def __init__(
        self,
        source: Any,
        batch_size: int,
        *,
        window: int = 8,
        group_rows: int | None = None,
        seed: int = 0,
        shuffle: bool = True,
        drop_last: bool = False,
        rank: int | None = None,
        world_size: int | None = None,
        num_workers: int = 0,
        handover: int = 1,
    ) -> None:
        self.batch_size = _positive("batch_size", batch_size)
        self.window = _positive("window", window)
        own_groups = False  # (the dataset's group rows, fitted to its budget below)
        if isinstance(source, (int, np.integer)) and not isinstance(source, bool):
            if source < 0:
                raise PtdValueError(f"the number of rows must be >= 0, got {source}")
            self.rows = int(source)
        else:
            self.rows = len(source)
            own_groups = group_rows is None
            if group_rows is None:
                group_rows = getattr(source, "group_rows", None)
        self.group_rows = None if group_rows is None else _positive("group_rows", group_rows)
        if rank is None or world_size is None:
            r, w = _dist_defaults()
            rank = r if rank is None else rank
            world_size = w if world_size is None else world_size
        self.world_size = _positive("world_size", world_size)
        if isinstance(rank, bool) or not 0 <= int(rank) < self.world_size:
            raise PtdValueError(f"rank must be in [0, {self.world_size}), got {rank!r}")
        self.rank = int(rank)
        if isinstance(num_workers, bool) or int(num_workers) < 0:
            raise PtdValueError(f"num_workers must be >= 0, got {num_workers!r}")
        self.num_workers = int(num_workers)
        self.handover = _positive("handover", handover)
        self.seed = int(seed)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.epoch = 0
        items = self.batch_size * self.handover
        fit = getattr(source, "fit_window", None)
        if callable(fit) and own_groups and self.group_rows is not None:
            # the dataset sizes its groups so that this window fits in its memory budget
            fitted = fit(self.window + 1 + _AHEAD, items)
            self.group_rows = None if fitted is None else int(fitted)
        reserve = getattr(source, "reserve_rows", None)
        if callable(reserve) and self.group_rows is not None:
            # the rows a worker needs decoded at once: its window and the leftovers before it
            # (+ the groups read ahead), and a hand-over's rows, which it gathers at once
            groups = self.window + 1 + _AHEAD + -(-items // self.group_rows)
            reserve(groups * self.group_rows + items)

    def set_epoch(self, epoch: int) -> None:
        """Use the order of epoch ``epoch`` on the next iteration."""
        self.epoch = int(epoch)

    # ------------------------------------------------------------------ planning
    def _rng(self, *extra: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, self.epoch, *extra])

    def _group_order(self) -> list[np.ndarray]:
        """The shuffled groups of every rank, as arrays of group numbers."""
        g = self.group_rows or 1
        ngroups = -(-self.rows // g)
        order = self._rng().permutation(ngroups) if self.shuffle else np.arange(ngroups)
        return [order[r :: self.world_size] for r in range(self.world_size)]

    def _streams(self, groups: np.ndarray) -> list[np.ndarray]:
        k = max(1, self.num_workers)
        return [groups[s::k] for s in range(k)]

    def _group_sizes(self, groups: np.ndarray) -> int:
        g = self.group_rows or 1
        last = self.rows - (-(-self.rows // g) - 1) * g  # rows of the last group
        return int(len(groups) * g - (g - last) * int(np.any(groups == -(-self.rows // g) - 1)))

    def _stream_counts(self, groups: np.ndarray) -> list[int]:
        """The batches each stream of a rank's groups yields (every batch of a stream is full
        but its last; with drop_last that one is dropped)."""
        out = []
        for stream in self._streams(groups):
            rows = self._group_sizes(stream)
            out.append(
                rows // self.batch_size + int(not self.drop_last and rows % self.batch_size > 0)
            )
        return out

    def _limit(self, per_rank: list[np.ndarray]) -> int | None:
        """With drop_last over several ranks: the batches every rank yields."""
        if not self.drop_last or self.world_size == 1:
            return None
        return min(sum(self._stream_counts(gr)) for gr in per_rank)

    def _schedule(self, counts: list[int], limit: int | None) -> Iterator[tuple[int, int]]:
        """The items in order, as (stream, batches): the streams in turn (as the DataLoader
        hands items to its workers), up to :attr:`handover` batches each, until ``limit``
        batches (None: all)."""
        left = list(counts)
        budget = sum(left) if limit is None else min(limit, sum(left))
        while budget > 0:
            for stream, n in enumerate(left):
                take = min(self.handover, n, budget)
                if take == 0:
                    continue
                left[stream] -= take
                budget -= take
                yield stream, take
                if budget == 0:
                    return

    def _plan(self) -> tuple[np.ndarray, list[int], int | None]:
        """This rank's groups, its streams' batch counts and the batch limit."""
        per_rank = self._group_order()
        groups = per_rank[self.rank]
        if self.group_rows is None:  # a full shuffle: groups are rows
            groups = groups[groups < self.rows]
        return groups, self._stream_counts(per_rank[self.rank]), self._limit(per_rank)

    def __len__(self) -> int:
        """The items an epoch yields: batches, or hand-overs with ``handover > 1`` (see
        :meth:`batch_count`)."""
        _, counts, limit = self._plan()
        if self.handover == 1:
            return sum(counts) if limit is None else min(limit, sum(counts))
        return sum(1 for _ in self._schedule(counts, limit))

    def batch_count(self) -> int:
        """The batches an epoch yields (the items' batches: ``len(self)`` without hand-overs)."""
        _, counts, limit = self._plan()
        return sum(counts) if limit is None else min(limit, sum(counts))

    # ------------------------------------------------------------------ iteration
    def _stream_batches(
        self, groups: np.ndarray, stream: int
    ) -> Iterator[tuple[np.ndarray, tuple[tuple[int, int], ...]]]:
        """The batches of one stream, each with the row ranges to read ahead (see
        :class:`BatchIndices`): a sliding window of groups, shuffled with the leftover rows."""
        g = self.group_rows
        b = self.batch_size
        if g is None:  # nothing chunked: a full shuffle of this stream's rows
            rows = groups.astype(np.int64)
            if self.shuffle:
                rows = self._rng(self.rank, stream, 1).permutation(rows)
            for start in range(0, len(rows), b):
                yield rows[start : start + b], ()
            return
        rng = self._rng(self.rank, stream)
        k = self.window if self.shuffle else 1
        # a sliding window: each group's rows (shuffled) are dealt into the k steps from the
        # one where it joins; step t pools the parts of the k groups that joined in the last k
        # steps, so one group joins (one group decode) per step, never a whole window at once
        parts: list[list[np.ndarray]] = []  # parts[i]: the parts still to come of a group
        carry = np.empty(0, dtype=np.int64)
        hints: list[tuple[int, int]] = []
        for t in range(len(groups) + k - 1):
            if t < len(groups):
                x = int(groups[t])
                rows = np.arange(x * g, min(self.rows, (x + 1) * g), dtype=np.int64)
                if self.shuffle:
                    rng.shuffle(rows)
                parts.append(np.array_split(rows, k))
                # the groups that join in the next _AHEAD steps: read them ahead (at the first
                # step all of them, later the one that comes into reach)
                for y in groups[1 if t == 0 else t + _AHEAD : t + 1 + _AHEAD]:
                    hints.append((int(y) * g, min(self.rows, (int(y) + 1) * g)))
            pool = np.concatenate([carry, *(p.pop(0) for p in parts)])
            parts = [p for p in parts if p]
            # the rows left over go to the next step (the tail of its newest group's part)
            cut = len(pool) // b * b
            pool, carry = pool[:cut], pool[cut:]
            if self.shuffle:
                rng.shuffle(pool)
            for start in range(0, len(pool), b):
                yield pool[start : start + b], tuple(hints)
                hints = []
        if len(carry):
            yield carry, tuple(hints)

    def __iter__(self) -> Iterator[list[int]]:
        groups, counts, limit = self._plan()
        its = [
            (
                b
                for b in self._stream_batches(s, i)
                if not (self.drop_last and len(b[0]) < self.batch_size)
            )
            for i, s in enumerate(self._streams(groups))
        ]
        for stream, n in self._schedule(counts, limit):
            if self.handover == 1:
                batch, ahead = next(its[stream])
                out = BatchIndices(batch.tolist())
            else:
                parts = [next(its[stream]) for _ in range(n)]
                out = BatchIndices(np.concatenate([p for p, _ in parts]).tolist())
                out.sizes = tuple(len(p) for p, _ in parts)
                ahead = tuple(r for _, a in parts for r in a)
            if ahead:
                out.ahead = ahead
            yield out

    def batches(self) -> Iterator[list[int]]:
        """The epoch's batches one by one, in the order :class:`~ptd.data.StoreLoader`
        hands them out (the items of ``iter(self)``, hand-overs split)."""
        for item in self:
            sizes = getattr(item, "sizes", ())
            if not sizes:
                yield item
                continue
            start = 0
            for n in sizes:
                yield list(item[start : start + n])
                start += n


class BatchIndices(list[int]):
    """A batch of row indices (or a hand-over of several, see ``sizes``), as the sampler
    yields it: a list, which may also carry ``ahead``, the ``(start, stop)`` row ranges that
    the same stream (DataLoader worker) will need soon.
    :class:`~ptd.data.dataset.StoreDataset` starts reading those in the background when it
    gets the batch, so that a group's decode overlaps the batches before it instead of
    stalling the one that first needs it. It pickles with ``ahead`` and ``sizes`` (the
    DataLoader sends it to the worker as is).

    >>> b = BatchIndices([3, 1, 2]); b.ahead = ((100, 200),)
    >>> import pickle; c = pickle.loads(pickle.dumps(b)); c, c.ahead
    ([3, 1, 2], ((100, 200),))
    """

    ahead: tuple[tuple[int, int], ...] = ()
    #: a hand-over of several batches (``handover > 1``): their lengths, in order (their rows
    #: follow one another in the list); empty: the list is one batch
    sizes: tuple[int, ...] = ()


def _dist_defaults() -> tuple[int, int]:
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except (ImportError, RuntimeError):  # pragma: no cover - a torch without distributed
        pass
    return 0, 1
