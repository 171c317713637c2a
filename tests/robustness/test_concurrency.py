"""Concurrent readers get correct data; a second writer of an HDF5 file gets a clear error
instead of corrupting it; locking problems name the ``locking=`` option."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pytest
import torch

from ptd import PersistentTensorDict
from ptd.errors import StoreLockedError

from .conftest import assert_clean_exit

N = 64
pytestmark = pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="no fork")


def data() -> dict:
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(N, 16, generator=g), "n": {"y": torch.arange(N)}}


def _reader(args: tuple[str, str, int]) -> list[float]:
    path, backend, seed = args
    g = torch.Generator().manual_seed(seed)
    opener = PersistentTensorDict.from_h5 if backend == "h5" else PersistentTensorDict.from_zarr
    sums = []
    with opener(path) as p:
        for _ in range(40):
            idx = torch.randint(0, N, (8,), generator=g)
            sums.append(float(p[idx]["x"].sum() + p[idx]["n", "y"].sum()))
    return sums


def test_concurrent_readers(tmp_path: Path, backend: str) -> None:
    path = tmp_path / f"d.{backend}"
    PersistentTensorDict.from_dict(data(), path, backend=backend).close()
    want = []
    d = data()
    for seed in range(6):
        g = torch.Generator().manual_seed(seed)
        want.append(
            [
                float(d["x"][i].sum() + d["n"]["y"][i].sum())
                for i in (torch.randint(0, N, (8,), generator=g) for _ in range(40))
            ]
        )
    with mp.get_context("fork").Pool(6) as pool:  # six processes open and read it at once
        got = pool.map(_reader, [(str(path), backend, s) for s in range(6)])
    assert torch.allclose(torch.tensor(got), torch.tensor(want))


def _hold_writable(path: str, ready, release) -> None:
    p = PersistentTensorDict(filename=path, mode="r+", batch_size=[N])
    ready.set()
    release.wait(60)
    p.close()


def test_second_h5_writer_gets_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "d.h5"
    PersistentTensorDict.from_dict(data(), path).close()
    before = path.read_bytes()
    ctx = mp.get_context("fork")
    ready, release = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=_hold_writable, args=(str(path), ready, release))
    proc.start()
    try:
        assert ready.wait(60)
        for mode in ("r+", "a", "r"):
            with pytest.raises(StoreLockedError, match="locking=False") as info:
                PersistentTensorDict(filename=path, mode=mode, batch_size=[N])
            assert str(path) in str(info.value)
        # a reader that opts out of locking (e.g. on a network file system) can read
        with PersistentTensorDict.from_h5(path, locking=False) as p:
            assert p["x"].shape == (N, 16)
    finally:
        release.set()
        proc.join(60)
    assert proc.exitcode == 0
    with PersistentTensorDict.from_h5(path) as p:  # intact, and unlocked again
        assert torch.equal(p["x"], data()["x"])
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("errno", "text"), [(38, "Function not implemented"), (37, "No locks available")]
)
def test_lock_failures_name_the_locking_option(
    tmp_path: Path, monkeypatch, cli, errno: int, text: str
) -> None:
    """What HDF5 reports when the file system refuses locks (NFS, some FUSE mounts)."""
    import ptd.storage.h5.backend as h5mod

    path = tmp_path / "d.h5"
    PersistentTensorDict.from_dict(data(), path).close()
    real = h5mod.h5py.File
    seen = []

    class FakeFile(real):  # type: ignore[misc,valid-type]
        def __init__(self, name, mode="r", *args, locking=None, **kwargs) -> None:
            seen.append(locking)
            if locking is None:
                raise OSError(
                    "Unable to synchronously open file (unable to lock file, "
                    f"errno = {errno}, error message = '{text}')"
                )
            super().__init__(name, mode, *args, locking=locking, **kwargs)

    monkeypatch.setattr(h5mod.h5py, "File", FakeFile)
    with pytest.raises(StoreLockedError, match="locking=False"):
        PersistentTensorDict.from_h5(path)
    run = cli("inspect", path)
    assert_clean_exit(run)
    assert run.code == 2
    assert "locking=False" in run.stderr
    assert "HDF5_USE_FILE_LOCKING" in run.stderr
    with PersistentTensorDict.from_h5(path, locking=False) as p:  # the option reaches h5py
        assert p["x"].shape == (N, 16)
    assert seen[-1] is False
