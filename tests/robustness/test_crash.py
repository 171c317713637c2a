"""Crash safety.

``ptd convert`` and ``ptd memmap`` killed with SIGKILL at random points (fixed seed) leave the
destination absent or complete (with ``--overwrite``: the old one, or the new one), never
partial: they write a hidden sibling and rename it into place. Only hidden temporary siblings
(``.ptd-tmp-*``) may be left behind by a killed process.

In-place writes through a PersistentTensorDict that fail midway (disk full, simulated with
``RLIMIT_FSIZE``) raise a ptd error, remove the half-written entry and leave the others intact.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from ptd import PersistentTensorDict, convert
from ptd.containers.memmap import export_memmap, load_memmap

from .conftest import env_for_subprocess, python

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and rlimits")

ROWS = 4000


def make_source(path: Path, backend: str, groups: int = 6, fill: float | None = None) -> Path:
    g = torch.Generator().manual_seed(0)
    data = {
        f"g{i}": {
            f"l{j}": (
                torch.full((ROWS, 16), fill)
                if fill is not None
                else torch.randn(ROWS, 16, generator=g)
            )
            for j in range(10)
        }
        for i in range(groups)
    }
    opts = (
        {"chunks": (500,), "compression": "gzip", "compression_opts": 1}
        if backend == "h5"
        else {"chunks": 500}
    )
    PersistentTensorDict.from_dict(data, path, backend=backend, batch_size=[ROWS], **opts).close()
    return path


def content(path: Path) -> dict:
    if path.suffix == ".mm":
        td = load_memmap(path, mode="r")
    else:
        opener = (
            PersistentTensorDict.from_h5 if path.suffix == ".h5" else PersistentTensorDict.from_zarr
        )
        with opener(path) as p:
            td = p.to_tensordict()
    return {k: td[k].clone() for k in td.keys(True, True)}


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def cli_cmd(*args: object) -> list[str]:
    return [*python(), "-m", "ptd_cli.main", *map(str, args)]


def kill_midway(cmd: list[str], workdir: Path, delay: float) -> tuple[int, bool]:
    """Start ``cmd``; once its temporary sibling appears in ``workdir``, wait ``delay`` s and
    SIGKILL it. Returns (return code, whether the temporary sibling existed at the kill)."""
    proc = subprocess.Popen(
        cmd, env=env_for_subprocess(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    t0 = time.monotonic()
    while proc.poll() is None and time.monotonic() - t0 < 60:
        if any(".ptd-tmp" in p.name for p in workdir.iterdir()):
            break
        time.sleep(0.005)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(delay)
    midway = any(".ptd-tmp" in p.name for p in workdir.iterdir())
    proc.send_signal(signal.SIGKILL)
    proc.wait(60)
    return proc.returncode, midway and proc.returncode == -signal.SIGKILL


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("crash-src")
    return {
        "h5": make_source(d / "src.h5", "h5"),
        "zarr": make_source(d / "src.zarr", "zarr"),
        "old": make_source(d / "old.h5", "h5", groups=1, fill=1.0),
    }


def test_sigkill_leaves_destination_absent_or_complete(
    sources: dict[str, Path], tmp_path: Path
) -> None:
    want = content(sources["h5"])
    old_zarr = tmp_path / "old.zarr"  # what --overwrite must either keep or replace whole
    convert(sources["old"], old_zarr)
    old_want = content(old_zarr)
    rng = random.Random(20240614)
    jobs = []
    for i, (cmd, src, name, overwrite) in enumerate(
        [
            ("convert", "h5", "out.zarr", False),
            ("convert", "zarr", "out.h5", False),
            ("memmap", "h5", "out.mm", False),
            ("memmap", "zarr", "out.mm", False),
            ("convert", "h5", "out.zarr", True),
            ("memmap", "zarr", "out.mm", True),
            ("convert", "zarr", "out.h5", False),  # killed too late: complete
        ]
    ):
        work = tmp_path / f"job{i}"
        work.mkdir()
        dst = work / name
        if overwrite:  # an old, complete destination that --overwrite must replace whole
            if cmd == "convert":
                shutil.copytree(old_zarr, dst)
            else:
                export_memmap(old_zarr, dst)
        args = [cmd, sources[src], dst] + (["--overwrite"] if overwrite else [])
        delay = rng.uniform(0.0, 0.2) if i < 6 else 20.0
        jobs.append((work, dst, cli_cmd(*args), delay, overwrite))
    killed_midway = completed = 0
    with cf.ThreadPoolExecutor(len(jobs)) as ex:  # all at once: the suite stays fast
        results = list(ex.map(lambda j: kill_midway(j[2], j[0], j[3]), jobs))
    for (work, dst, cmd, delay, overwrite), (code, midway) in zip(jobs, results, strict=True):
        killed_midway += midway
        left = [p.name for p in work.iterdir() if p != dst]
        assert all(n.startswith(".") or ".ptd-old-" in n for n in left), (cmd, left)
        if not dst.exists():
            assert code == -signal.SIGKILL, (cmd, code)
            continue
        got = content(dst)
        assert same(got, want) or (overwrite and same(got, old_want)), (cmd, delay, code)
        completed += code == 0
    assert killed_midway >= 3, f"only {killed_midway} of {len(jobs)} kills landed midway"
    assert completed >= 1


DISK_FULL = textwrap.dedent("""
    import json, resource, signal, sys, torch
    from ptd import PersistentTensorDict
    from ptd.errors import PtdError
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # EFBIG instead of a signal, like ENOSPC
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    for backend, path, limit in json.loads(sys.argv[1]):
        p = PersistentTensorDict(filename=path, mode="r+", backend=backend, batch_size=[100])
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
        out = {}
        for what, write in [("new", lambda: p.__setitem__("big", torch.ones(100, 1000))),
                            ("nested", lambda: p.__setitem__("g", {"a": torch.ones(100, 1000)})),
                            ("in_place", lambda: p.__setitem__("a", torch.full((100, 10), 5.0)))]:
            try:
                write()
                out[what] = "ok"
            except PtdError as err:
                out[what] = f"{type(err).__name__}:{isinstance(err, OSError)}"
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        p.close()
        print(json.dumps([path, out]))
""")


def test_disk_full_midway(tmp_path: Path) -> None:
    """h5 and zarr, a file-size limit that new entries exceed (and, for zarr, one that even a
    small chunk exceeds, so the in-place write fails too)."""
    import json

    a, b = torch.arange(1000.0).reshape(100, 10), torch.arange(100)
    jobs = []
    for backend, limit in (("h5", 150_000), ("zarr", 150_000), ("zarr", 1_000)):
        path = tmp_path / f"d{limit}.{backend}"
        PersistentTensorDict.from_dict({"a": a, "b": b}, path, backend=backend).close()
        jobs.append((backend, str(path), limit))
    run = subprocess.run(
        [*python(), "-c", DISK_FULL, json.dumps(jobs)],
        env=env_for_subprocess(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    results = dict(json.loads(line) for line in run.stdout.splitlines())
    for backend, path, limit in jobs:
        out = results[path]
        # a ptd error that is also an OSError, for every write that needed the space
        assert out["new"] == out["nested"] == "StoreIOError:True", out
        assert out["in_place"] == ("StoreIOError:True" if limit < 10_000 else "ok"), out
        opener = PersistentTensorDict.from_h5 if backend == "h5" else PersistentTensorDict.from_zarr
        with opener(path) as p:
            assert set(p.keys()) == {"a", "b"}  # half-written entries were removed
            assert torch.equal(p["b"], b)
            want = a if limit < 10_000 else torch.full((100, 10), 5.0)
            assert torch.equal(p["a"], want)  # a failed in-place write left "a" as it was
