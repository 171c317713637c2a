"""The fast path's positional reads (issue 14, item 6): large contiguous slices of an h5
dataset are read with ``os.preadv`` into the new array, and equal h5py's read of the same rows;
other selections keep the copy out of the map. And the malloc thresholds."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import torch

from ptd import PersistentTensorDict
from ptd.storage.read import alloc as fast_path_alloc
from ptd.storage.read import mapped as fp

ROWS = 5000


@pytest.fixture
def store(tmp_path: Path) -> str:
    path = str(tmp_path / "x.h5")
    g = torch.Generator().manual_seed(0)
    PersistentTensorDict.from_dict(
        {
            "obs": torch.randn(ROWS, 32, generator=g),  # 128 B rows: 512 rows >= 64 KiB
            "i16": torch.randint(-9, 9, (ROWS, 3), generator=g, dtype=torch.int16),
            "bf": torch.randn(ROWS, 40, generator=g).to(torch.bfloat16),
            "n": {"flag": torch.arange(ROWS) % 2 == 0},
        },
        path,
    ).close()
    return path


@pytest.fixture
def preads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The byte counts of every os.preadv call."""
    calls: list[int] = []
    real = os.preadv

    def spy(fd: int, bufs: Any, offset: int) -> int:
        calls.append(sum(memoryview(b).nbytes for b in bufs))
        return real(fd, bufs, offset)

    monkeypatch.setattr(os, "preadv", spy)
    return calls


SLICES = [slice(0, 4096), slice(17, 4113), slice(1000, ROWS), slice(0, None), slice(3, 600)]


@pytest.mark.parametrize("sl", SLICES)
def test_slices_equal_h5py(store: str, preads: list[int], sl: slice) -> None:
    with h5py.File(store, "r") as f:
        want = {k: f[k][sl] for k in ("obs", "i16", "bf", "n/flag")}
    with PersistentTensorDict.from_h5(store, fast_path=True) as p:
        got = p[sl].to_tensordict()
    for key, ref in want.items():
        t = got[tuple(key.split("/"))]
        arr = t.view(torch.uint16).numpy() if t.dtype == torch.bfloat16 else t.numpy()
        assert np.array_equal(arr, ref), key
    rows = len(range(*sl.indices(ROWS)))
    big = [k for k, row in (("obs", 128), ("bf", 80)) if rows * row >= fp.PREAD_BYTES]
    assert len(preads) >= len(big)  # the large ones were positional reads
    assert sum(preads) == sum(rows * row for k, row in (("obs", 128), ("bf", 80)) if k in big)


def test_other_selections_use_the_map(store: str, preads: list[int]) -> None:
    with PersistentTensorDict.from_h5(store, fast_path=True) as p:
        idx = torch.tensor([4000, 3, 3, 17])
        got = p[idx]["obs"]
        col = p["obs"][:, 1]  # a full read of obs, then a column in memory
        small = p[10:20]["obs"]
    with h5py.File(store, "r") as f:
        assert np.array_equal(got.numpy(), f["obs"][...][[4000, 3, 3, 17]])
        assert np.array_equal(col.numpy(), f["obs"][:, 1])
        assert np.array_equal(small.numpy(), f["obs"][10:20])
    assert len(preads) == 1  # only the full read of obs (640 KB) was positional


def test_parallel_positional_read(
    store: str, preads: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fp, "PARALLEL_COPY_BYTES", 1 << 16)
    monkeypatch.setattr(fp, "_MIN_PART_BYTES", 1 << 14)
    torch.set_num_threads(max(2, torch.get_num_threads()))
    with PersistentTensorDict.from_h5(store, fast_path=True) as p:
        got = p[0:ROWS]["obs"]
    with h5py.File(store, "r") as f:
        assert np.array_equal(got.numpy(), f["obs"][...])
    assert len(preads) > 1
    assert sum(preads) == ROWS * 128


def test_short_file_falls_back(tmp_path: Path) -> None:
    path = tmp_path / "short.bin"
    path.write_bytes(bytes(range(256)) * 300)  # 76,800 bytes
    src = np.zeros(100_000, dtype=np.uint8)  # stands for a map of the file
    fd = os.open(path, os.O_RDONLY)
    try:
        base = src.ctypes.data
        got = fp.pread_selection(fd, base, src, (slice(0, 70_000),))
        assert got is not None
        assert got.tobytes() == path.read_bytes()[:70_000]
        assert fp.pread_selection(fd, base, src, (slice(10_000, 80_000),)) is None  # past EOF
        assert fp.pread_selection(fd, base, src, (slice(0, 1000),)) is None  # small: map copy
        assert fp.pread_selection(fd, base, src, (np.array([1, 2]),)) is None
    finally:
        os.close(fd)


def test_tune_malloc_once_and_opt_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fast_path_alloc, "_done", False)
    monkeypatch.setenv(fast_path_alloc.ENV_VAR, "0")
    assert fast_path_alloc.tune_malloc() is False
    assert fast_path_alloc.tune_malloc() is False  # once per process
    monkeypatch.setattr(fast_path_alloc, "_done", False)
    monkeypatch.delenv(fast_path_alloc.ENV_VAR)
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "131072")
    assert fast_path_alloc.tune_malloc() is False  # the user's own settings win
