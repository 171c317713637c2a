"""DataLoader workers: a PersistentTensorDict pickles to what it takes to reopen it (path, mode,
backend, batch size, index) and reopens in the worker; under fork it reopens on first use in
the child (detected by the pid), also after the parent read from it, so no HDF5 handle is ever
shared across processes."""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
from pathlib import Path

import pytest
import torch
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler

import ptd.containers.persistent.store as _store
from ptd import PersistentTensorDict, TensorDict
from ptd.errors import ClosedStoreError, UnsupportedOperationError

N = 24


def make(path: Path, backend: str) -> Path:
    PersistentTensorDict.from_dict(
        {
            "x": torch.arange(N * 3, dtype=torch.float32).reshape(N, 3),
            "n": {"y": torch.arange(N)},
        },
        path,
        backend=backend,
    ).close()
    return path


def open_ro(path: Path, backend: str) -> PersistentTensorDict:
    return (
        PersistentTensorDict.from_h5(path)
        if backend == "h5"
        else PersistentTensorDict.from_zarr(path)
    )


def collate(view: PersistentTensorDict) -> tuple[TensorDict, int, int]:
    """Runs in the worker: the rows, the worker's pid, how many inherited stores it parked."""
    return view.to_tensordict(), os.getpid(), len(_store._INHERITED)


def test_pickle_holds_what_reopens(tmp_path: Path, backend: str) -> None:
    path = make(tmp_path / f"d.{backend}", backend)
    with open_ro(path, backend) as p:
        view = p["n"][torch.tensor([5, 1, 5])]
        state = view.__getstate__()
        assert state["spec"].location.path == str(path)
        assert state["mode"] == "r"
        assert state["backend"] == backend
        assert state["stored_batch"] == [N]
        assert state["path"] == ("n",)
        assert state["entries"] is not None
        back = pickle.loads(pickle.dumps(view))
        assert back._store is not view._store  # its own handle
        assert torch.equal(back["y"], torch.tensor([5, 1, 5]))
        back.close()
        assert torch.equal(view["y"], torch.tensor([5, 1, 5]))  # the original is untouched


def _load(p: PersistentTensorDict, ctx: str) -> tuple[TensorDict, set[int], set[int]]:
    loader = DataLoader(
        p,
        batch_size=None,
        sampler=BatchSampler(SequentialSampler(range(N)), 5, False),
        collate_fn=collate,
        num_workers=2,
        multiprocessing_context=ctx,
    )
    parts, pids, parked = [], set(), set()
    for td, pid, n in loader:
        parts.append(td)
        pids.add(pid)
        parked.add(n)
    return torch.cat(parts), pids, parked


@pytest.mark.parametrize("ctx", ["fork", "spawn"])
def test_dataloader_workers(tmp_path: Path, backend: str, ctx: str) -> None:
    if ctx not in mp.get_all_start_methods():
        pytest.skip(f"no {ctx} start method here")
    path = make(tmp_path / f"d.{backend}", backend)
    with open_ro(path, backend) as p:
        want = p.to_tensordict()  # the parent reads before the workers start (fork: inherited)
        got, pids, parked = _load(p, ctx)
        assert os.getpid() not in pids
        assert len(pids) >= 1
        assert torch.equal(got["x"], want["x"])
        assert torch.equal(got["n", "y"], want["n", "y"])
        # fork: each worker parked the inherited handle and reopened; spawn: nothing inherited
        assert parked == ({1} if ctx == "fork" else {0})
        # and the parent's handle still works
        assert torch.equal(p[3:5]["x"], want["x"][3:5])


def _child_uses(p: PersistentTensorDict, q: mp.Queue) -> None:
    try:
        q.put(("ok", p["x"][0].tolist()))
    except Exception as err:  # noqa: BLE001 - reported to the parent
        q.put((type(err).__name__, str(err)))
    try:
        p.close()  # closing in the child never touches the parent's handle
        q.put(("closed", None))
        p["x"]
    except ClosedStoreError:
        q.put(("closed-error", None))
    except Exception as err:  # noqa: BLE001
        q.put((type(err).__name__, str(err)))


def _run_child(p: PersistentTensorDict) -> list:
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    proc = ctx.Process(target=_child_uses, args=(p, q))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 0
    return [q.get(timeout=10) for _ in range(3)]


@pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="no fork")
def test_fork_reopens_read_only_and_refuses_writable_h5(tmp_path: Path, backend: str) -> None:
    path = make(tmp_path / f"d.{backend}", backend)
    # a store open for writing in the parent (a from_dict result is r+)
    p = PersistentTensorDict.from_dict(
        {"x": torch.ones(4, 2)}, tmp_path / f"w.{backend}", backend=backend, batch_size=[4]
    )
    p["x"]  # used before the fork
    out = _run_child(p)
    if backend == "h5":
        assert out[0][0] == "UnsupportedOperationError"
        assert "forked" in out[0][1]
        assert "mode='r'" in out[0][1]
    else:  # zarr holds no OS handle: the child reopens it
        assert out[0] == ("ok", [1.0, 1.0])
    assert out[1:] == [("closed", None), ("closed-error", None)]
    # the parent goes on writing and closes normally; the file is intact
    p[0] = {"x": torch.tensor([7.0, 7.0])}
    p["z"] = torch.zeros(4)
    p.close()
    with open_ro(tmp_path / f"w.{backend}", backend) as q:
        assert torch.equal(q["x"][0], torch.tensor([7.0, 7.0]))
        assert "z" in q.keys()
    with open_ro(path, backend) as r:
        out = _run_child(r)
        assert out[0] == ("ok", [0.0, 1.0, 2.0])
        assert torch.equal(r["x"][1], torch.tensor([3.0, 4.0, 5.0]))


def test_forked_writable_h5_message(tmp_path: Path) -> None:
    """The message (checked in-process by faking the pid change)."""
    p = PersistentTensorDict.from_dict({"x": torch.ones(2)}, tmp_path / "w.h5")
    p._store.pid = -1
    with pytest.raises(UnsupportedOperationError, match="open for writing"):
        p["x"]
    p.close()  # in the "child": the handle is parked, not closed (closing would write)
    assert p._store.backend.closed
    with pytest.raises(KeyError, match="closed"):
        p["x"]
    parked = _store._INHERITED.pop()
    assert not parked.closed
    parked.close()  # the same process really: close it for the test's sake


def _threads_first_use(p: PersistentTensorDict, q: mp.Queue) -> None:  # type: ignore[type-arg]
    """In a forked child: eight threads use the inherited store for the first time at once."""
    import threading

    barrier = threading.Barrier(8)
    errors: list[str] = []
    sums: list[float] = []

    def read() -> None:
        barrier.wait()
        try:
            sums.append(float(p["x"].sum()))
        except Exception as e:  # noqa: BLE001 - reported to the parent
            errors.append(f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    q.put((errors, sums, len(_store._INHERITED)))


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_threads_of_a_forked_child_reopen_once(tmp_path: Path, backend: str) -> None:
    """Threads of a forked child (a DataLoader worker and its read-ahead thread) that use a
    store first at the same time reopen it once: none reads through the inherited handle
    another one has just closed."""
    if "fork" not in mp.get_all_start_methods():
        pytest.skip("no fork start method here")
    path = make(tmp_path / f"d.{backend}", backend)
    want = float(torch.arange(N * 3, dtype=torch.float32).sum())
    ctx = mp.get_context("fork")
    with open_ro(path, backend) as p:
        assert float(p["x"].sum()) == want  # the parent used it before forking
        for _ in range(5):
            q = ctx.Queue()
            child = ctx.Process(target=_threads_first_use, args=(p, q))
            child.start()
            errors, sums, parked = q.get(timeout=60)
            child.join(60)
            assert errors == []
            assert sums == [want] * 8
            assert parked == 1  # one reopen: the inherited backend parked once
