"""PyTorch data loading from ptd stores: :class:`StoreDataset` (batched reads returning
TensorDicts), :class:`ChunkShuffleSampler` (shuffled epochs that decode each chunk about once),
:func:`collate` (the DataLoader ``collate_fn``) and :func:`loader` (all three wired together).

>>> import os, tempfile, torch
>>> import ptd.data
>>> from ptd import PersistentTensorDict
>>> with tempfile.TemporaryDirectory() as d:
...     path = os.path.join(d, "replay.zarr")
...     PersistentTensorDict.from_dict(
...         {"obs": torch.randn(2000, 8), "next": {"obs": torch.randn(2000, 8)}}, path,
...         backend="zarr").close()
...     dl = ptd.data.loader(path, batch_size=256, seed=0)
...     for epoch in range(2):
...         dl.batch_sampler.set_epoch(epoch)
...         rows = sum(batch["next", "obs"].shape[0] for batch in dl)
...     print(rows, len(dl))
2000 8
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from torch.utils.data import DataLoader

from ptd.data.dataset import LeftOutWarning, StoreDataset, collate
from ptd.data.geometry import GROUP_BYTES, LeafGeometry, group_rows, store_leaves
from ptd.data.rows import RowLeaves, select_rows
from ptd.data.sampler import BatchIndices, ChunkShuffleSampler
from ptd.errors import PtdTypeError, PtdValueError

__all__ = [
    "GROUP_BYTES",
    "PREFETCH_FACTOR",
    "BatchIndices",
    "ChunkShuffleSampler",
    "LeafGeometry",
    "LeftOutWarning",
    "RowLeaves",
    "StoreDataset",
    "collate",
    "group_rows",
    "loader",
    "select_rows",
    "store_leaves",
]


#: the DataLoader's ``prefetch_factor`` that :func:`loader` sets with workers (each worker's
#: shared-memory ring holds up to 32 batches, so keep it below 30); compare with
#: ``benchmarks/bench_training.py --sections shuffled --prefetch-factor 2``
PREFETCH_FACTOR = 16


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
    keys: Any = None,
    read_ahead: bool = True,
    store_batch_size: int | Sequence[int] | None = None,
    validate_batch_size: bool = True,
    **kwargs: Any,
) -> DataLoader[Any]:
    """A ``DataLoader`` of batches of ``batch_size`` rows over ``source`` (a path or a
    PersistentTensorDict, or a :class:`StoreDataset`) with a :class:`ChunkShuffleSampler`
    (reach it as ``loader.batch_sampler``, to call ``set_epoch``) and :func:`collate`.

    ``keys`` (the leaves to read; a group reads its leaves), ``read_ahead``,
    ``store_batch_size`` (the rows' batch size, ``StoreDataset``'s ``batch_size``: ``N`` or
    ``[N]``) and ``validate_batch_size`` go to a new :class:`StoreDataset`, and so do the
    keyword arguments that the DataLoader does not take (the open options of a path:
    ``storage_options``, ``chunk_cache``, ``fast_path``...); all of them are refused with a
    dataset given (it has its own). The DataLoader's own keyword arguments (``pin_memory``,
    ``persistent_workers``, ``multiprocessing_context``...) go to the DataLoader. With workers,
    ``prefetch_factor`` defaults to :data:`PREFETCH_FACTOR` (torch's default is 2): the
    DataLoader takes batches from the workers strictly in turn, and a deeper queue lets one
    worker run on while another reads a group. ``in_order=False`` is refused with workers: the
    DataLoader would then hand batches to whichever worker is free, not to the worker whose
    groups they draw from, and every worker would decode every group."""
    dataloader_kwargs = {k: v for k, v in kwargs.items() if k in _DATALOADER_OPTIONS}
    open_kwargs = {k: v for k, v in kwargs.items() if k not in _DATALOADER_OPTIONS}
    if num_workers > 0:
        if dataloader_kwargs.get("in_order", True) is False:
            raise PtdValueError(
                "ptd.data.loader: in_order=False would hand each batch to whichever worker is "
                "free, so every worker would decode every chunk group; keep in_order=True"
            )
        dataloader_kwargs.setdefault("prefetch_factor", PREFETCH_FACTOR)
    if isinstance(source, StoreDataset):
        given = {
            name: value
            for name, value, default in (
                ("keys", keys, None),
                ("read_ahead", read_ahead, True),
                ("store_batch_size", store_batch_size, None),
                ("validate_batch_size", validate_batch_size, True),
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
            **open_kwargs,
        )
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
    )
    return DataLoader(
        ds,
        batch_sampler=sampler,
        collate_fn=collate,
        num_workers=num_workers,
        **dataloader_kwargs,
    )
