"""The DataLoader of :mod:`ptd.data`: :class:`StoreLoader` (a ``DataLoader`` that yields a
hand-over's batches one by one) and :func:`loader` (a dataset, the chunk-aware sampler and
:func:`~ptd.data.dataset.collate` wired together).

>>> import os, tempfile, torch
>>> from ptd import PersistentTensorDict
>>> with tempfile.TemporaryDirectory() as d:
...     path = os.path.join(d, "x.h5")
...     PersistentTensorDict.from_dict({"obs": torch.randn(1000, 4)}, path, chunks=True,
...                                    compression="gzip").close()
...     dl = loader(path, batch_size=100, seed=0, handover=4)
...     sizes = [b.batch_size[0] for b in dl]
...     print(len(dl), len(dl.batch_sampler), sizes[:3])
...     dl.dataset.close()
10 3 [100, 100, 100]
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Sequence
from typing import Any

from torch.utils.data import DataLoader

from ptd.data.dataset import MEMORY_BUDGET, StoreDataset, collate
from ptd.data.sampler import ChunkShuffleSampler
from ptd.data.transport import BatchList
from ptd.errors import PtdTypeError, PtdValueError

__all__ = [
    "HANDOVER_BYTES",
    "MAX_HANDOVER",
    "PREFETCH_BATCHES",
    "StoreLoader",
    "handover_for",
    "loader",
    "prefetch_for",
]

#: the most batches :func:`loader` puts in one hand-over (see :func:`handover_for`)
MAX_HANDOVER = 16
#: the bytes of a hand-over :func:`loader` aims for: below them, a message per batch costs
#: more than copying the batch (about 100 µs against memcpy's few GB/s); compare with
#: ``benchmarks/bench_training.py --sections shuffled --handover 1``
HANDOVER_BYTES = 4 << 20

#: batches each worker has under way (read or being read) that :func:`loader` aims for with
#: workers: it sets the DataLoader's ``prefetch_factor`` (counted in items, hand-overs) to
#: this over ``handover``, at least 2 (torch's default is 2 items); compare with
#: ``benchmarks/bench_training.py --sections shuffled --prefetch-factor 2``
PREFETCH_BATCHES = 16


def prefetch_for(handover: int) -> int:
    """The ``prefetch_factor`` (items per worker) :func:`loader` sets with workers for
    hand-overs of ``handover`` batches: :data:`PREFETCH_BATCHES` batches' worth, at least 2
    items (torch's default).

    >>> prefetch_for(1), prefetch_for(4), prefetch_for(5), prefetch_for(16)
    (16, 4, 4, 2)
    """
    return max(2, -(-PREFETCH_BATCHES // max(1, int(handover))))


def handover_for(batch_bytes: int) -> int:
    """The batches per hand-over :func:`loader` chooses for batches of ``batch_bytes``: as
    many as fit in :data:`HANDOVER_BYTES`, from 1 to :data:`MAX_HANDOVER`.

    >>> handover_for(256 * 100), handover_for(1 << 20), handover_for(64 << 20)
    (16, 4, 1)
    """
    return max(1, min(MAX_HANDOVER, HANDOVER_BYTES // max(1, int(batch_bytes))))


class StoreLoader(DataLoader[Any]):
    """A ``DataLoader`` that yields batches one by one where its batch sampler yields
    hand-overs of several (a :class:`~ptd.data.transport.BatchList` arrives for each), and
    counts batches in ``len()``; otherwise a ``DataLoader`` as torch's.
    :func:`loader` makes one."""

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        for item in super().__iter__():
            if isinstance(item, BatchList):
                yield from item
            else:
                yield item

    def __len__(self) -> int:
        count = getattr(self.batch_sampler, "batch_count", None)
        return int(count()) if callable(count) else super().__len__()

    def __repr__(self) -> str:
        sampler = self.batch_sampler
        parts = [
            repr(self.dataset),
            f"batch_size={getattr(sampler, 'batch_size', self.batch_size)}",
            f"window={getattr(sampler, 'window', None)}",
            f"handover={getattr(sampler, 'handover', 1)}",
            f"num_workers={self.num_workers}",
        ]
        return f"StoreLoader({', '.join(parts)})"


#: the keyword arguments :func:`loader` hands to the DataLoader (the others open the store)
_DATALOADER_OPTIONS = frozenset(inspect.signature(DataLoader.__init__).parameters) - {"self"}


def loader(
    source: Any,
    batch_size: int,
    *,
    window: int = 8,
    seed: int = 0,
    shuffle: bool = True,
    drop_last: bool = False,
    rank: int | None = None,
    world_size: int | None = None,
    num_workers: int = 0,
    handover: int | None = None,
    keys: Any = None,
    read_ahead: bool = True,
    store_batch_size: int | Sequence[int] | None = None,
    validate_batch_size: bool = True,
    memory_budget: int | str | None = None,
    **kwargs: Any,
) -> StoreLoader:
    """A :class:`StoreLoader` of batches of ``batch_size`` rows over ``source`` (a path or a
    PersistentTensorDict, or a :class:`~ptd.data.dataset.StoreDataset`) with a
    :class:`~ptd.data.sampler.ChunkShuffleSampler` (reach it as ``loader.batch_sampler``, to
    call ``set_epoch``) and :func:`~ptd.data.dataset.collate`.

    ``handover``: batches read in one go and, with workers, sent to the main process in one
    message (see the sampler's ``handover``); default :func:`handover_for` the batches' bytes
    (16 batches of small rows; 1 for batches of 4 MiB and more). The loader still yields one
    batch at a time, each owning its memory; ``len(loader)`` counts batches and
    ``len(loader.batch_sampler)`` hand-overs.

    ``keys`` (the leaves to read; a group reads its leaves), ``read_ahead``,
    ``store_batch_size`` (the rows' batch size, ``StoreDataset``'s ``batch_size``: ``N`` or
    ``[N]``), ``validate_batch_size`` and ``memory_budget`` (the bytes of decoded rows each
    process holds, default :data:`~ptd.data.dataset.MEMORY_BUDGET`, 96 MiB; printed by the
    loader's repr) go to a new :class:`StoreDataset`, and so do the
    keyword arguments that the DataLoader does not take (the open options of a path:
    ``storage_options``, ``chunk_cache``, ``fast_path``...); all of them are refused with a
    dataset given (it has its own). The DataLoader's own keyword arguments (``pin_memory``,
    ``persistent_workers``, ``multiprocessing_context``...) go to the DataLoader. With workers,
    ``prefetch_factor`` (items, so hand-overs, per worker) defaults to :func:`prefetch_for`
    (:data:`PREFETCH_BATCHES` over ``handover``, at least 2): the DataLoader takes items from
    the workers strictly in turn, and a deeper queue lets one worker run on while another
    reads a group.
    ``in_order=False`` is refused with workers: the DataLoader would then hand items to
    whichever worker is free, not to the worker whose groups they draw from, and every worker
    would decode every group."""
    dataloader_kwargs = {k: v for k, v in kwargs.items() if k in _DATALOADER_OPTIONS}
    open_kwargs = {k: v for k, v in kwargs.items() if k not in _DATALOADER_OPTIONS}
    if num_workers > 0 and dataloader_kwargs.get("in_order", True) is False:
        raise PtdValueError(
            "ptd.data.loader: in_order=False would hand each item to whichever worker is "
            "free, so every worker would decode every chunk group; keep in_order=True"
        )
    if handover is not None and (
        isinstance(handover, bool) or not isinstance(handover, int) or handover < 1
    ):
        raise PtdValueError(f"ptd.data.loader: handover must be a positive int, got {handover!r}")
    if isinstance(source, StoreDataset):
        given = {
            name: value
            for name, value, default in (
                ("keys", keys, None),
                ("read_ahead", read_ahead, True),
                ("store_batch_size", store_batch_size, None),
                ("validate_batch_size", validate_batch_size, True),
                ("memory_budget", memory_budget, None),
            )
            if value is not default
        }
        given.update(open_kwargs)
        if given:
            raise PtdTypeError(
                f"ptd.data.loader: {sorted(given)} configure a new StoreDataset; the "
                "StoreDataset given has its own (pass them to StoreDataset(...) instead)"
            )
        ds = source
    else:
        ds = StoreDataset(
            source,
            keys=keys,
            read_ahead=read_ahead,
            batch_size=store_batch_size,
            validate_batch_size=validate_batch_size,
            memory_budget=MEMORY_BUDGET if memory_budget is None else memory_budget,
            **open_kwargs,
        )
    if handover is None:
        handover = handover_for(batch_size * sum(g.row_bytes for g in ds.leaves))
    if num_workers > 0:
        dataloader_kwargs.setdefault("prefetch_factor", prefetch_for(handover))
    sampler = ChunkShuffleSampler(
        ds,
        batch_size,
        window=window,
        seed=seed,
        shuffle=shuffle,
        drop_last=drop_last,
        rank=rank,
        world_size=world_size,
        num_workers=num_workers,
        handover=handover,
    )
    return StoreLoader(
        ds,
        batch_sampler=sampler,
        collate_fn=collate,
        num_workers=num_workers,
        **dataloader_kwargs,
    )
