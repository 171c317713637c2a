"""PyTorch data loading from ptd stores: :class:`StoreDataset` (batched reads returning
TensorDicts), :class:`ChunkShuffleSampler` (shuffled epochs that decode each chunk about once),
:func:`collate` (the DataLoader ``collate_fn``), and :func:`loader` (all three wired together in a
:class:`StoreLoader`, which takes each worker's batches in hand-overs of several).

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

from ptd.data.dataloader import (
    HANDOVER_BYTES,
    MAX_HANDOVER,
    PREFETCH_BATCHES,
    StoreLoader,
    handover_for,
    loader,
    prefetch_for,
)
from ptd.data.dataset import MEMORY_BUDGET, LeftOutWarning, StoreDataset, collate
from ptd.data.geometry import GROUP_BYTES, LeafGeometry, group_rows, store_leaves
from ptd.data.rows import RowLeaves, select_rows
from ptd.data.sampler import BatchIndices, ChunkShuffleSampler
from ptd.data.transport import BatchList

__all__ = [
    "GROUP_BYTES",
    "HANDOVER_BYTES",
    "MAX_HANDOVER",
    "MEMORY_BUDGET",
    "PREFETCH_BATCHES",
    "BatchIndices",
    "BatchList",
    "ChunkShuffleSampler",
    "LeafGeometry",
    "LeftOutWarning",
    "RowLeaves",
    "StoreDataset",
    "StoreLoader",
    "collate",
    "group_rows",
    "handover_for",
    "loader",
    "prefetch_for",
    "select_rows",
    "store_leaves",
]
