"""Metadata never needs torch: ``ptd.info``, ``ptd.validate``, ``ptd inspect``, ``ptd validate``
(``--data`` and ``inspect --stats`` too: they read arrays with numpy), ``ptd diff`` and
``ptd --help`` run in a process where ``torch`` is never imported (it takes seconds to
import; these commands take a fraction of one).

Each check runs in a fresh interpreter (this test process has torch loaded already) and reports
what ended up in ``sys.modules`` along with what the call returned, so a check fails both when
torch is imported and when the call did not do its work. ``test_the_probe_sees_torch`` shows
that the probe does see torch when a PersistentTensorDict is opened.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import ptd

ROOT = Path(__file__).resolve().parent.parent

#: run in a fresh interpreter: ``probe.py MODE ARGS...``; prints one JSON line last
PROBE = r"""
import io, json, sys
from contextlib import redirect_stdout

mode, *args = sys.argv[1:]
out = io.StringIO()
result = {}
with redirect_stdout(out):
    if mode == "cli":
        from ptd_cli.main import app

        sys.argv = ["ptd", *args]
        try:
            app()
            result["code"] = 0
        except SystemExit as exc:
            result["code"] = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    elif mode == "info":
        import ptd

        info = ptd.info(args[0])
        result["batch_size"] = info.batch_size
        result["tensors"] = info.totals.tensors
    elif mode == "validate":
        import ptd

        report = ptd.validate(args[0])
        result["batch_size"] = report.batch_size
        result["valid"] = report.valid
    elif mode == "open":
        import ptd

        with ptd.PersistentTensorDict.from_h5(args[0]) as p:
            result["batch_size"] = list(p.batch_size)
result["stdout"] = out.getvalue()
result["modules"] = sorted(
    m
    for m in sys.modules
    if m.split(".")[0] in ("torch", "numpy", "h5py", "zarr") or m == "rich.progress"
)
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("torch_free")
    data = {"obs": torch.zeros(4, 3), "next": {"reward": torch.ones(4)}}
    out = {}
    for fmt in ("h5", "zarr"):
        path = d / f"small.{fmt}"
        ptd.PersistentTensorDict.from_dict(data, str(path), batch_size=[4], backend=fmt).close()
        out[fmt] = path
    return out


def probe(mode: str, *args: Any) -> dict[str, Any]:
    """Run the probe in a fresh interpreter on this checkout; its result, with ``torch``
    (True when torch was imported) and ``modules``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.update(COLUMNS="200", NO_COLOR="1", TERM="dumb")
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, mode, *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    result["torch"] = any(m.split(".")[0] == "torch" for m in result["modules"])
    result["stderr"] = proc.stderr
    return result


@pytest.fixture(params=["h5", "zarr"])
def store(request: pytest.FixtureRequest, stores: dict[str, Path]) -> Path:
    return stores[request.param]


def test_info(store: Path) -> None:
    r = probe("info", store)
    assert r["batch_size"] == [4]
    assert r["tensors"] == 2
    assert not r["torch"], r["modules"]


def test_validate(store: Path) -> None:
    r = probe("validate", store)
    assert r["batch_size"] == [4]
    assert r["valid"] is True
    assert not r["torch"], r["modules"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["inspect", "{path}"], "batch_size=[4] (stored)"),
        (["inspect", "{path}", "--json"], '"batch_size_source": "stored"'),
        (["validate", "{path}"], "valid"),
        (["validate", "{path}", "--json"], '"valid": true'),
        (["validate", "{path}", "--data", "--format", "junit"], "<testsuites"),
        (["inspect", "{path}", "--stats"], "histogram"),
        (["diff", "{path}", "{path}.copy"], "same"),
    ],
    ids=["inspect", "inspect-json", "validate", "validate-json", "validate-data", "stats", "diff"],
)
def test_cli_commands(store: Path, args: list[str], expected: str) -> None:
    copy = Path(f"{store}.copy")
    if "diff" in args and not copy.exists():
        import shutil

        (shutil.copytree if store.is_dir() else shutil.copyfile)(store, copy)
    r = probe("cli", *[a.format(path=store) for a in args])
    assert r["code"] == 0, r
    assert expected in r["stdout"], r["stdout"]
    assert not r["torch"], r["modules"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--help"], "inspect"),
        (["inspect", "--help"], "--depth"),
        (["validate", "--help"], "--schema"),
        (["convert", "--help"], "--overwrite"),
        (["--version"], "ptd "),
    ],
    ids=["help", "inspect-help", "validate-help", "convert-help", "version"],
)
def test_help_imports_no_library(args: list[str], expected: str) -> None:
    # help needs neither torch nor numpy, h5py, zarr or the progress bar
    r = probe("cli", *args)
    assert r["code"] == 0, r
    assert expected in r["stdout"], r["stdout"]
    # --version names the HDF5 library's version, which only h5py knows (never torch)
    allowed = ("h5py", "numpy") if args == ["--version"] else ()
    assert [m for m in r["modules"] if m.split(".")[0] not in allowed] == [], r["modules"]


def test_the_probe_sees_torch(stores: dict[str, Path]) -> None:
    # opening a PersistentTensorDict makes tensors: torch is imported, and the probe says so
    r = probe("open", stores["h5"])
    assert r["batch_size"] == [4]
    assert r["torch"], r["modules"]
