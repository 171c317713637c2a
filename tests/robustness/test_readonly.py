"""Read-only means read-only: mode "r" never changes a byte nor an mtime of the store, through
every read path (library, CLI, pickling, forked workers), and every write attempt raises
ReadOnlyError (a PermissionError) and leaves it as it was."""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
from pathlib import Path

import pytest
import torch

import ptd
from ptd import NonTensorData, NonTensorStack, PersistentTensorDict
from ptd.containers.memmap import export_memmap
from ptd.errors import PtdError, ReadOnlyError

from .conftest import assert_clean_exit, snapshot

N = 6


def make(path: Path, backend: str) -> Path:
    PersistentTensorDict.from_dict(
        {
            "x": torch.arange(N * 2, dtype=torch.float32).reshape(N, 2),
            "b": torch.arange(N) % 2 == 0,
            "n": {"y": torch.arange(N), "m": {"z": torch.ones(N, 1, dtype=torch.bfloat16)}},
            "j": NonTensorData({"cfg": [1, 2]}),
            "st": NonTensorStack.from_list([str(i) for i in range(N)], (N,)),
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


def _child_read(path: str, backend: str, q) -> None:
    with open_ro(Path(path), backend) as p:
        q.put(float(p["x"].sum()))


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_every_read_path_leaves_the_store_untouched(tmp_path: Path, backend: str, cli) -> None:
    (tmp_path / "src").mkdir()
    path = make(tmp_path / "src" / f"d.{backend}", backend)
    before = snapshot(path)
    out = tmp_path / "out"
    out.mkdir()
    with open_ro(path, backend) as p:
        list(p.keys(True, True))
        repr(p)
        p.to_tensordict()
        for index in (
            0,
            slice(1, 4),
            [3, 1, 3],
            torch.tensor([True, False] * 3),
            torch.tensor([5, 0]),
            ...,
        ):
            p[index].to_tensordict()
        p["n"]["m"][1:3].to_tensordict()
        list(p)
        p.to("cpu").to_tensordict()
        q = pickle.loads(pickle.dumps(p[2:4]))
        q.to_tensordict()
        q.close()
        p.memmap(out / "mm")
        if "fork" in mp.get_all_start_methods():  # a forked child reopens and reads
            ctx = mp.get_context("fork")
            qu = ctx.Queue()
            proc = ctx.Process(target=_child_read, args=(str(path), backend, qu))
            proc.start()
            proc.join(60)
            assert qu.get(timeout=10) == float(p["x"].sum())
        # every write refused
        writes = [
            lambda: p.__setitem__("x", torch.zeros(N, 2)),
            lambda: p.__setitem__("new", torch.zeros(N)),
            lambda: p.__setitem__(0, 0),
            lambda: p.__setitem__(slice(0, 2), {"x": torch.zeros(2, 2)}),
            lambda: p.__delitem__("x"),
            lambda: p.rename_key_("x", "w"),
            lambda: p.update({"x": torch.zeros(N, 2)}),
            lambda: p.add_(1),
            lambda: p.zero_(),
            lambda: p.apply_(lambda t: t * 2),
            lambda: p["n"].__setitem__("y", torch.zeros(N, dtype=torch.long)),
        ]
        for write in writes:
            with pytest.raises(ReadOnlyError):
                write()
    with PersistentTensorDict(filename=path, mode="r", backend=backend, batch_size=[N]) as p:
        p.to_tensordict()
    ptd.info(path)
    ptd.validate(path)
    ptd.convert(path, out / f"c.{'zarr' if backend == 'h5' else 'h5'}")
    export_memmap(path, out / "mm2")
    for args in (
        ("inspect", path),
        ("inspect", path, "--json", "--attrs"),
        ("validate", path),
        ("convert", path, out / "c2"),
        ("memmap", path, out / "mm3"),
    ):
        run = cli(*args)
        assert run.code == 0, run
    assert snapshot(path) == before
    assert sorted(os.listdir(path.parent)) == [path.name]  # nothing written next to it either


def test_refused_writes_leave_entries_intact(tmp_path: Path, backend: str) -> None:
    """A write that fails midway (here: read-only) raises a ptd error, the rest is intact."""
    path = make(tmp_path / f"d.{backend}", backend)
    with open_ro(path, backend) as p:
        want = p.to_tensordict()
        with pytest.raises(PtdError):
            p.update({"b": torch.ones(N, dtype=torch.bool), "x": torch.zeros(N, 2)})
        got = p.to_tensordict()
    assert torch.equal(got["x"], want["x"])
    assert torch.equal(got["b"], want["b"])


def test_cli_refuses_writing_over_its_source(tmp_path: Path, backend: str, cli) -> None:
    path = make(tmp_path / f"d.{backend}", backend)
    before = snapshot(path)
    run = cli("convert", path, path)
    assert_clean_exit(run)
    assert snapshot(path) == before
