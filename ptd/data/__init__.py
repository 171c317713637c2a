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

from typing import Any

from torch.utils.data import DataLoader

from ptd.data.dataset import StoreDataset, collate
from ptd.data.geometry import GROUP_BYTES, LeafGeometry, group_rows, store_leaves
from ptd.data.sampler import BatchIndices, ChunkShuffleSampler
from ptd.errors import PtdValueError

__all__ = [
    "StoreDataset",
    "ChunkShuffleSampler",
    "BatchIndices",
    "collate",
    "loader",
    "LeafGeometry",
    "store_leaves",
    "group_rows",
    "GROUP_BYTES",
    "PREFETCH_FACTOR",
]


#: the DataLoader's ``prefetch_factor`` that :func:`loader` sets with workers (each worker's
#: shared-memory ring holds up to 32 batches, so keep it below 30); compare with
#: ``benchmarks/bench_training.py --sections shuffled --prefetch-factor 2``
PREFETCH_FACTOR = 16


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
    **dataloader_kwargs: Any,
) -> DataLoader[Any]:
    """A ``DataLoader`` over ``source`` (a path or a PersistentTensorDict, or a
    :class:`StoreDataset`; ``keys`` and ``read_ahead`` go to a new one) with a
    :class:`ChunkShuffleSampler` (reach it as ``loader.batch_sampler``, to call ``set_epoch``)
    and :func:`collate`. Other keyword arguments
    (``pin_memory``, ``persistent_workers``, ``multiprocessing_context``...) go to the
    DataLoader. With workers, ``prefetch_factor`` defaults to :data:`PREFETCH_FACTOR` (torch's
    default is 2): the DataLoader takes batches from the workers strictly in turn, and a deeper
    queue lets one worker run on while another reads a group. ``in_order=False`` is refused
    with workers: the DataLoader would then hand batches to whichever worker is free, not to
    the worker whose groups they draw from, and every worker would decode every group."""
    if num_workers > 0:
        if dataloader_kwargs.get("in_order", True) is False:
            raise PtdValueError(
                "ptd.data.loader: in_order=False would hand each batch to whichever worker is "
                "free, so every worker would decode every chunk group; keep in_order=True"
            )
        dataloader_kwargs.setdefault("prefetch_factor", PREFETCH_FACTOR)
    ds = (
        source
        if isinstance(source, StoreDataset)
        else StoreDataset(source, keys=keys, read_ahead=read_ahead)
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
