"""``convert --layout random-access`` (alias ``training``): round trips and the layout it claims;
``random_row_bytes`` (``ptd inspect``'s "per row"); ``from_dict`` to zarr chunked along the
batch dim and streamed slab by slab."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

import ptd
from ptd import PersistentTensorDict
from ptd.errors import PtdValueError
from ptd.storage.api import random_row_cost
from ptd.storage.registry import get_backend, policy
from ptd_cli.main import app


def random_row_bytes(meta: Any, fmt: str, *, local: bool = True) -> int | None:
    """The storage cost model's bytes per random row, for a format named ``fmt``."""
    cost = random_row_cost(meta, policy(fmt), local=local)
    return None if cost is None else cost.nbytes


N = 600


def _data(n: int = N) -> dict[str, Any]:
    return {
        "obs": torch.arange(n * 8, dtype=torch.float32).reshape(n, 8),
        "flag": torch.arange(n) % 3 == 0,
        "bits": torch.arange(n * 2, dtype=torch.float32).reshape(n, 2).to(torch.bfloat16),
        "next": {"obs": -torch.arange(n * 8, dtype=torch.float32).reshape(n, 8)},
        "name": "run-1",
    }


def _packed(tmp_path: Path, backend: str) -> str:
    """A gzip-compressed, 50-row-chunked store of ``_data()``."""
    plain = str(tmp_path / f"plain.{backend}")
    PersistentTensorDict.from_dict(_data(), plain, backend=backend, batch_size=[N]).close()
    out = str(tmp_path / f"packed.{backend}")
    ptd.convert(plain, out, to=backend, chunks=50, compression="gzip")
    return out


def _open(path: str, backend: str) -> PersistentTensorDict:
    if backend == "zarr":
        return PersistentTensorDict.from_zarr(path)
    return PersistentTensorDict.from_h5(path)


def _metas(path: str, fmt: str) -> dict[str, Any]:
    be = get_backend(fmt).open(path, "r")
    try:
        return {"/".join(p): m for p, k, m in be.walk(()) if m is not None}
    finally:
        be.close()


@pytest.fixture(autouse=True)
def _h5_strings_as_bytes() -> Any:
    """h5 reads strings tensordict wrote as bytes, with a FutureWarning (tested elsewhere)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield


def _same(a: Any, b: Any) -> None:
    for key in a.keys(True, True):
        assert torch.equal(a[key], b[key]), key
        assert a[key].dtype == b[key].dtype
    name = [x.decode() if isinstance(x, bytes) else x for x in (a["name"], b["name"])]
    assert name[0] == name[1] == "run-1"


@pytest.mark.parametrize("to", ["h5", "zarr"])
@pytest.mark.parametrize("name", ["random-access", "training"])
def test_layout_round_trip_and_claims(tmp_path: Path, backend: str, to: str, name: str) -> None:
    src = _packed(tmp_path, backend)
    dst = str(tmp_path / f"out.{to}")
    result = ptd.convert(src, dst, to=to, layout=name)
    with _open(src, backend) as a, _open(dst, to) as b:
        _same(a.to_tensordict(), b.to_tensordict())
        idx = torch.tensor([599, 3, 3, 250, 0])
        _same(a[idx].to_tensordict(), b[idx].to_tensordict())
    metas = _metas(dst, to)
    for key in ("obs", "flag", "bits", "next/obs"):
        m = metas[key]
        assert m.compression is None, key
        assert m.inner_chunks is None
        if to == "h5":
            assert m.chunks is None, key  # contiguous: the fast path
        else:
            assert m.chunks is not None
            assert m.chunks[0] == N
        assert random_row_bytes(m, to) == int(np.prod(m.shape[1:])) * m.dtype.itemsize
    plan = {p.key: p for p in result.plan}
    assert plan["obs"].dst_compression is None
    assert plan["obs"].dst_shards is None


def test_layout_url_destination_is_sharded(tmp_path: Path) -> None:
    src = _packed(tmp_path, "h5")
    url = f"memory://ptd-test/{tmp_path.name}/train.zarr"
    result = ptd.convert(src, url, layout="training")
    plan = {p.key: p for p in result.plan}
    assert plan["obs"].dst_shards == [N, 8]
    assert plan["obs"].dst_compression == "zstd(3)"
    be = get_backend("zarr").open(url, "r")
    try:
        m = be.array_meta(("obs",))
        assert m.inner_chunks is not None
        assert m.chunks == (N, 8)
        assert m.compression is not None
        assert m.compression.startswith("zstd")
        assert random_row_bytes(m, "zarr", local=False) == m.inner_chunks[0] * 8 * 4
        got = be.read(("next", "obs"), (slice(None),))
    finally:
        be.close()
    assert np.array_equal(got, _data()["next"]["obs"].numpy())


def test_layout_arguments() -> None:
    with pytest.raises(PtdValueError, match="leave out chunks and compression"):
        ptd.ConvertOptions.parse("x.h5", layout="training", chunks=10)
    with pytest.raises(PtdValueError, match="leave out chunks and compression"):
        ptd.ConvertOptions.parse("x.h5", layout="random-access", compression="gzip")
    with pytest.raises(PtdValueError, match="unknown layout"):
        ptd.ConvertOptions.parse("x.h5", layout="fast")
    assert ptd.ConvertOptions.parse("x.h5", layout="keep").layout is None
    assert ptd.ConvertOptions.parse("x.h5", layout="Training").layout == "random-access"


def test_cli_layout_and_inspect_per_row(tmp_path: Path, backend: str) -> None:
    runner = CliRunner()
    src = _packed(tmp_path, backend)
    doc = json.loads(runner.invoke(app, ["inspect", src, "--json"]).stdout)
    per_row = {e["key"]: e["random_row_bytes"] for e in doc["entries"]}
    assert per_row["obs"] == 50 * 8 * 4  # a whole 50-row chunk is decoded for one row
    assert per_row["name"] is None
    dst = str(tmp_path / "t.h5")
    r = runner.invoke(app, ["convert", src, dst, "--layout", "training"])
    assert r.exit_code == 0, r.output
    doc = json.loads(runner.invoke(app, ["inspect", dst, "--json"]).stdout)
    per_row = {e["key"]: e["random_row_bytes"] for e in doc["entries"]}
    assert per_row["obs"] == 8 * 4
    assert per_row["next/obs"] == 8 * 4
    # the figure is shown in either text layout (a table's column, a line's field)
    text = runner.invoke(app, ["inspect", dst], env={"PTD_TABLE": "table"}).stdout
    assert "per row" in text.splitlines()[1]
    text = runner.invoke(app, ["inspect", dst], env={"PTD_TABLE": "lines"}).stdout
    assert any(ln.startswith("obs ") and "per_row=32 B" in ln for ln in text.splitlines())
    r = runner.invoke(app, ["convert", src, str(tmp_path / "u.h5"), "--layout", "nope"])
    assert r.exit_code == 2
    r = runner.invoke(app, ["convert", src, str(tmp_path / "v.h5"), "--layout", "training",
                            "--chunks", "5"])  # fmt: skip
    assert r.exit_code == 2
    assert "chunks" in r.output
    assert not (tmp_path / "v.h5").exists()


def test_random_row_bytes_rules() -> None:
    from ptd.storage.api import ArrayMeta, ValueKind

    def meta(**kw: Any) -> ArrayMeta:
        base: dict[str, Any] = {"chunks": None, "compression": None}
        base.update(kw)
        return ArrayMeta(("x",), (100_000, 4, 6), np.dtype("float64"), ValueKind.NUMERIC,
                         "float64", **base)  # fmt: skip

    row = 4 * 6 * 8
    assert random_row_bytes(meta(), "h5") == row
    assert random_row_bytes(meta(chunks=(10, 4, 6), compression="gzip(4)"), "h5") == 10 * row
    # chunks split across a trailing dim: a row lies in two of them
    assert random_row_bytes(meta(chunks=(10, 2, 6), compression="zstd(3)"), "zarr") == 10 * row
    assert random_row_bytes(meta(chunks=(10, 4, 6)), "zarr") == row  # mapped
    assert random_row_bytes(meta(chunks=(10, 4, 6)), "zarr", local=False) == 10 * row
    assert random_row_bytes(meta(chunks=(10, 4, 6)), "h5") == 10 * row  # fits HDF5's cache
    assert random_row_bytes(meta(chunks=(10_000, 4, 6)), "h5") == row  # larger: read in place
    sharded = meta(chunks=(5, 4, 6), shards=(500, 4, 6))
    assert random_row_bytes(sharded, "zarr") == 5 * row


# ----------------------------------------------------------------------------- from_dict
def test_from_dict_zarr_chunks_along_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ptd.transfer.plan as plan

    monkeypatch.setattr(
        "ptd.containers.persistent.write.CHUNK_TARGET", 1024
    )  # 32-row chunks of obs
    assert plan.CHUNK_TARGET == 8 << 20
    p = PersistentTensorDict.from_dict(_data(), tmp_path / "x.zarr", backend="zarr")
    p.close()
    metas = _metas(str(tmp_path / "x.zarr"), "zarr")
    assert metas["obs"].chunks == (32, 8)
    assert metas["next/obs"].chunks == (32, 8)
    assert metas["flag"].chunks == (600,)  # 1 B rows: 1024 rows, capped at 600
    # the user's chunks win; h5 stays contiguous
    q = PersistentTensorDict.from_dict(_data(), tmp_path / "y.zarr", backend="zarr", chunks=7)
    q.close()
    assert _metas(str(tmp_path / "y.zarr"), "zarr")["obs"].chunks == (7, 8)
    h = PersistentTensorDict.from_dict(_data(), tmp_path / "z.h5")
    h.close()
    assert _metas(str(tmp_path / "z.h5"), "h5")["obs"].chunks is None


@pytest.mark.parametrize("src_backend", ["h5", "zarr"])
def test_from_dict_of_a_store_streams(
    tmp_path: Path, src_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ptd.transfer.slabs as slabs

    monkeypatch.setattr(
        "ptd.containers.persistent.write.CHUNK_TARGET", 2048
    )  # 64-row chunks of obs
    src_path = tmp_path / f"src.{src_backend}"
    PersistentTensorDict.from_dict(_data(), src_path, backend=src_backend, batch_size=[N]).close()
    monkeypatch.setattr(slabs, "SLAB_BYTES", 4096)  # 128 rows of obs per slab
    zarr_backend = type(get_backend("zarr").open(str(tmp_path / "probe.zarr"), "w"))
    writes: list[tuple[str, int]] = []
    real_write = zarr_backend.write

    def spy(self: Any, path: Any, sel: Any, value: Any) -> Any:
        writes.append(("/".join(path), int(np.asarray(value).nbytes)))
        return real_write(self, path, sel, value)

    monkeypatch.setattr(zarr_backend, "write", spy)
    src = _open(str(src_path), src_backend)
    out = PersistentTensorDict.from_dict(src, tmp_path / "dst.zarr", backend="zarr")
    _same(src.to_tensordict(), out.to_tensordict())
    src.close()
    out.close()
    obs = [n for k, n in writes if k == "obs"]
    assert len(obs) > 1
    assert max(obs) <= 4096
    # 2048 B chunks (64 rows of obs): made for the contiguous h5 source, kept from the zarr one
    assert _metas(str(tmp_path / "dst.zarr"), "zarr")["obs"].chunks == (64, 8)
