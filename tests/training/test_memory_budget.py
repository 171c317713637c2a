"""ptd.data's memory budget: the block buffers of a StoreDataset never hold more than
``memory_budget`` bytes, whatever the store's chunks (1-D leaves whose chunks hold many more
rows than the heavy leaf's, as in the issue's store), and the values stay exact. The stores are
written with plain h5py / zarr-python. The bookkeeping is checked (``held_bytes``), not RSS."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from ptd.data import ChunkShuffleSampler, StoreDataset, loader
from ptd.errors import PtdTypeError, PtdValueError

N = 4096
OBS_CHUNK = 64  # rows of an obs chunk
FLAT_CHUNK = 2048  # rows of a chunk of the 1-D leaves: 32 obs chunks
ROW = 8 * 4 + 8 + 4  # bytes of one row over the leaves


def _columns() -> dict[str, np.ndarray]:
    return {
        "obs": np.arange(N * 8, dtype=np.float32).reshape(N, 8),
        "action": np.arange(N, dtype=np.int64),
        "reward": -np.arange(N, dtype=np.float32),
    }


def _store(tmp_path: Path, backend: str) -> str:
    """obs in 64-row chunks, the 1-D leaves in 2048-row chunks, compressed."""
    cols = _columns()
    chunks = {"obs": OBS_CHUNK, "action": FLAT_CHUNK, "reward": FLAT_CHUNK}
    if backend == "h5":
        import h5py

        path = str(tmp_path / "big-chunks.h5")
        with h5py.File(path, "w") as f:
            for key, a in cols.items():
                f.create_dataset(
                    key, data=a, chunks=(chunks[key], *a.shape[1:]), compression="gzip"
                )
        return path
    import zarr

    path = str(tmp_path / "big-chunks.zarr")
    root = zarr.open_group(path, mode="w")
    for key, a in cols.items():
        arr = root.create_array(
            key, shape=a.shape, dtype=a.dtype, chunks=(chunks[key], *a.shape[1:])
        )
        arr[...] = a
    return path


def _epoch(ds: StoreDataset, sampler: ChunkShuffleSampler) -> list[int]:
    cols = _columns()
    seen: list[int] = []
    for b in sampler:
        batch = ds.__getitems__(b)
        rows = np.asarray(list(b))
        assert np.array_equal(batch["obs"].numpy(), cols["obs"][rows])
        assert np.array_equal(batch["action"].numpy(), rows)
        assert np.array_equal(batch["reward"].numpy(), cols["reward"][rows])
        assert ds.held_bytes <= ds.memory_budget
        seen += rows.tolist()
    return seen


@pytest.mark.parametrize("budget", [24 << 10, "64KiB", 150_000])
def test_held_bytes_stay_within_the_budget(tmp_path: Path, backend: str, budget: object) -> None:
    """A group of whole 2048-row chunks would need 90 kB a slot (and 13 slots; the whole
    store, 180 kB, as one block): the groups
    shrink to fit and the 1-D leaves' chunks are read in parts; every row once, exact."""
    ds = StoreDataset(_store(tmp_path, backend), memory_budget=budget)
    assert [g.blocked for g in ds.leaves] == [True, True, True]
    s = ChunkShuffleSampler(ds, 32, window=4, seed=0)
    assert ds.group_rows is not None
    assert ds.group_rows < FLAT_CHUNK
    assert ds.group_rows % OBS_CHUNK == 0 or OBS_CHUNK % ds.group_rows == 0
    for epoch in range(2):
        s.set_epoch(epoch)
        assert sorted(_epoch(ds, s)) == list(range(N))
    assert 0 < ds.held_bytes_max <= ds.memory_budget
    ds.close()


def test_a_large_budget_keeps_whole_chunks(tmp_path: Path, backend: str) -> None:
    """Where the budget holds the window in whole chunks, groups are whole chunks (each chunk
    decoded once per epoch), as before the budget (``group_bytes=1``: one chunk a group)."""
    ds = StoreDataset(_store(tmp_path, backend), memory_budget="1GiB", group_bytes=1)
    s = ChunkShuffleSampler(ds, 32, window=4, seed=0)
    assert ds.group_rows == FLAT_CHUNK
    assert sorted(_epoch(ds, s)) == list(range(N))
    assert ds.blocks_read == 3 * (N // FLAT_CHUNK)
    ds.close()


def test_the_sampler_window_is_fitted(tmp_path: Path, backend: str) -> None:
    """A larger window makes smaller groups under the same budget, still within it."""
    path = _store(tmp_path, backend)
    sizes = []
    for window in (2, 16):
        ds = StoreDataset(path, memory_budget="100KiB")
        s = ChunkShuffleSampler(ds, 32, window=window, seed=1)
        assert s.group_rows == ds.group_rows
        assert sorted(_epoch(ds, s)) == list(range(N))
        assert ds.held_bytes_max <= ds.memory_budget
        sizes.append(ds.group_rows)
        ds.close()
    assert sizes[0] is not None
    assert sizes[1] is not None
    assert sizes[1] < sizes[0]


def test_a_zero_budget_reads_every_batch_directly(tmp_path: Path, backend: str) -> None:
    ds = StoreDataset(_store(tmp_path, backend), memory_budget=0)
    assert ds.group_rows is None
    s = ChunkShuffleSampler(ds, 100, seed=0)
    assert sorted(_epoch(ds, s)) == list(range(N))
    assert ds.held_bytes_max == 0
    assert ds.blocks_read == 0
    ds.close()


def test_the_budget_is_printed(tmp_path: Path, backend: str) -> None:
    dl = loader(_store(tmp_path, backend), 32, memory_budget="2MiB")
    assert dl.dataset.memory_budget == 2 << 20  # type: ignore[attr-defined]
    text = repr(dl)
    assert "memory_budget=2 MiB per process" in text
    assert "StoreLoader(" in text
    assert "group_rows=" in repr(dl.dataset)
    assert sum(int(b.batch_size[0]) for b in dl) == N
    dl.dataset.close()  # type: ignore[attr-defined]


def test_two_workers_read_every_row(tmp_path: Path, backend: str) -> None:
    dl = loader(
        _store(tmp_path, backend),
        64,
        memory_budget="64KiB",
        num_workers=2,
        multiprocessing_context="fork",
    )
    got = torch.cat([b["action"] for b in dl])
    assert sorted(got.tolist()) == list(range(N))
    dl.dataset.close()  # type: ignore[attr-defined]


@pytest.mark.parametrize("bad", ["lots", -1, True, 1.5])
def test_a_bad_budget_is_refused(tmp_path: Path, bad: object) -> None:
    path = _store(tmp_path, "h5")
    with pytest.raises(PtdValueError, match="memory_budget"):
        StoreDataset(path, memory_budget=bad)  # type: ignore[arg-type]


def test_the_budget_of_a_given_dataset_is_its_own(tmp_path: Path) -> None:
    ds = StoreDataset(_store(tmp_path, "h5"))
    with pytest.raises(PtdTypeError, match="memory_budget"):
        loader(ds, 32, memory_budget="1MB")
    ds.close()
