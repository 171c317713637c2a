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
]


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
    DataLoader."""
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
