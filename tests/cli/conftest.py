"""Fixtures for the CLI tests: a CliRunner helper and stores written by ptd, by plain h5py/zarr
and (``interop`` tests) by tensordict 0.15."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

import ptd
from ptd_cli.main import app

ROWS = 6


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    # Rich wraps to the terminal width: keep it wide and colourless for assertions
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("TERM", "dumb")
    monkeypatch.delenv("FORCE_COLOR", raising=False)


class Run:
    """The result of one ``ptd`` invocation."""

    def __init__(self, result: Any) -> None:
        self.result = result
        self.code: int = result.exit_code
        self.stdout: str = result.stdout
        self.stderr: str = result.stderr

    @property
    def json(self) -> Any:
        return json.loads(self.stdout)

    def __repr__(self) -> str:  # shown by pytest when an assertion fails
        return f"<Run code={self.code}\nstdout={self.stdout}\nstderr={self.stderr}\nexc={self.result.exception!r}>"


@pytest.fixture
def ptd_cli() -> Callable[..., Run]:
    runner = CliRunner()

    def invoke(*args: Any) -> Run:
        return Run(runner.invoke(app, [str(a) for a in args]))

    return invoke


def assert_one_line_error(run: Run, *needles: str, code: int = 2) -> None:
    """A failure: the exit code, nothing on stdout, ONE line on stderr naming ``needles``."""
    assert run.code == code, run
    assert "Traceback" not in run.stderr, run
    assert "Traceback" not in run.stdout, run
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, run
    for needle in needles:
        assert needle in lines[0], run


def sample_td(n: int = ROWS) -> ptd.TensorDict:
    """Nested, strings, several dtypes (bfloat16 and float16 included)."""
    g = torch.Generator().manual_seed(1)
    return ptd.TensorDict(
        {
            "obs": torch.randn(n, 3, generator=g),
            "action": torch.randint(0, 5, (n,), generator=g),
            "reward": torch.randn(n, generator=g).to(torch.bfloat16),
            "half": torch.randn(n, 2, generator=g).to(torch.float16),
            "done": torch.arange(n) % 2 == 0,
            "pix": torch.randint(0, 255, (n, 2, 2), generator=g, dtype=torch.uint8),
            "next": ptd.TensorDict(
                {
                    "obs": torch.randn(n, 3, generator=g),
                    "step": torch.arange(n, dtype=torch.int32),
                    "deep": ptd.TensorDict(
                        {"z": torch.zeros(n, 1, dtype=torch.complex64)}, batch_size=[n]
                    ),
                },
                batch_size=[n],
            ),
            "label": ptd.NonTensorStack(*[f"row-{i}" for i in range(n)]),
            "env": ptd.NonTensorData("CartPole-v1", batch_size=[n]),
            "cfg": ptd.NonTensorData({"lr": 0.1, "layers": [4, 4]}, batch_size=[n]),
        },
        batch_size=[n],
    )


def write_ptd(path: Path, backend: str, n: int = ROWS) -> Path:
    ptd.PersistentTensorDict.from_dict(sample_td(n), str(path), backend=backend).close()
    return path


@pytest.fixture(params=["h5", "zarr"])
def fmt(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def ptd_store(tmp_path: Path, fmt: str) -> Path:
    """A store written by ptd (the sample data)."""
    return write_ptd(tmp_path / f"data.{fmt}", fmt)


def read_all(path: Path) -> ptd.TensorDict:
    """Everything in a store, in memory (strings decoded)."""
    from ptd.storage.registry import detect_backend

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        opener = (
            ptd.PersistentTensorDict.from_h5
            if detect_backend(str(path)) == "h5"
            else ptd.PersistentTensorDict.from_zarr
        )
        p = opener(str(path))
        try:
            return p.to_tensordict()
        finally:
            p.close()


def plain(value: Any) -> Any:
    """A non-tensor value as plain python (h5 bytes decoded)."""
    if hasattr(value, "tolist") and not isinstance(value, (np.ndarray, torch.Tensor)):
        value = value.tolist()
    elif hasattr(value, "data") and not isinstance(value, torch.Tensor):
        value = value.data
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def assert_same(a: ptd.TensorDict, b: ptd.TensorDict) -> None:
    """Same keys, batch size, tensor dtypes and values, and non-tensor values."""
    assert a.batch_size == b.batch_size
    ka = sorted(map(str, a.keys(True, True)))
    kb = sorted(map(str, b.keys(True, True)))
    assert ka == kb
    for k in a.keys(True, True):
        x, y = a.get(k), b.get(k)
        if isinstance(x, torch.Tensor):
            assert isinstance(y, torch.Tensor), k
            assert x.dtype == y.dtype, k
            assert torch.equal(x, y), k
        else:
            assert plain(x) == plain(y), k


def make_plain_h5(path: Path, n: int = ROWS) -> Path:
    """An HDF5 file written by plain h5py: no ptd/tensordict metadata at all."""
    import h5py

    with h5py.File(path, "w") as f:
        f.attrs["title"] = "plain h5py"
        f.attrs["tags"] = np.array(["a", "b"], dtype=h5py.string_dtype())
        f.create_dataset(
            "x",
            data=np.arange(n * 4, dtype=np.float32).reshape(n, 4),
            chunks=(2, 4),
            compression="gzip",
            compression_opts=5,
        )
        f["x"].attrs["units"] = "m/s"
        f.create_dataset("big_endian", data=np.arange(n, dtype=">i4"))
        f.create_dataset(
            "names", data=np.array([f"n{i}" for i in range(n)], dtype=h5py.string_dtype())
        )
        f.create_dataset(
            "words", data=np.array(["only", "three", "words"], dtype=h5py.string_dtype())
        )
        f.create_dataset("title_str", data="hello", dtype=h5py.string_dtype())
        g = f.create_group("sub")
        g.attrs["note"] = "a group"
        g.create_dataset("y", data=np.ones((n, 2), dtype=np.int16))
    return path


def make_plain_zarr(path: Path, n: int = ROWS) -> Path:
    """A Zarr v3 group written by plain zarr (codecs, a string array, attributes)."""
    import zarr

    g = zarr.open_group(str(path), mode="w")
    g.attrs["title"] = "plain zarr"
    a = g.create_array(
        "x",
        shape=(n, 4),
        dtype="float64",
        chunks=(2, 4),
        compressors=[{"name": "zstd", "configuration": {"level": 5}}],
    )
    a[:] = np.arange(n * 4, dtype=np.float64).reshape(n, 4)
    a.attrs["units"] = "kg"
    s = g.create_array("names", shape=(n,), dtype=str)
    s[:] = np.array([f"z{i}" for i in range(n)])
    sub = g.create_group("sub")
    b = sub.create_array("flags", shape=(n,), dtype="bool")
    b[:] = np.arange(n) % 3 == 0
    return path
