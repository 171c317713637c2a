"""The read-only backend of memmap directories: ``ptd inspect/validate/diff/convert`` take what
``ptd memmap`` (and tensordict 0.15, the golden ``tests/data/memmap_td015``) writes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
import zarr

import ptd
from ptd.errors import CorruptStoreError, PickleRefusedError, ReadOnlyError
from ptd.storage.api import NodeKind, ValueKind
from ptd.storage.location import StoreLocation
from ptd.storage.registry import detect_backend, get_backend
from ptd.storage.stores import detect
from tests.cli.conftest import assert_one_line_error

GOLDEN = Path(__file__).parent.parent / "data" / "memmap_td015"


def _plain_h5(path: Path) -> Path:
    with h5py.File(path, "w") as f:
        f["obs"] = np.arange(24, dtype="f4").reshape(6, 4)
        f["reward"] = np.linspace(0, 1, 6)
        f["nested/idx"] = np.arange(6, dtype="i8")
    return path


@pytest.fixture
def exported(tmp_path: Path) -> tuple[Path, Path]:
    src = _plain_h5(tmp_path / "src.h5")
    out = tmp_path / "out.mm"
    ptd.containers.memmap.export_memmap(src, out)
    return src, out


def test_detected_by_content(exported: tuple[Path, Path]) -> None:
    _src, out = exported
    assert detect_backend(out) == "memmap"
    assert detect(StoreLocation.parse(out)).format == "memmap"


def test_every_read_command_takes_a_memmap_dir(ptd_cli, exported, tmp_path: Path) -> None:
    src, out = exported
    run = ptd_cli("inspect", out, "--json")
    assert run.code == 0, run
    doc = run.json
    assert doc["format"] == "memmap"
    assert [e["key"] for e in doc["entries"]] == ["nested", "nested/idx", "obs", "reward"] or {
        e["key"] for e in doc["entries"]
    } == {"nested", "nested/idx", "obs", "reward"}
    assert run.code == 0
    assert ptd_cli("validate", out).code == 0
    assert ptd_cli("diff", src, out).code == 0
    for to in ("h5", "zarr"):
        dst = tmp_path / f"back.{to}"
        run = ptd_cli("convert", out, dst)
        assert run.code == 0, run
        assert ptd_cli("diff", src, dst).code == 0
    with h5py.File(tmp_path / "back.h5", "r") as f:
        np.testing.assert_array_equal(f["obs"][:], np.arange(24, dtype="f4").reshape(6, 4))
    g = zarr.open_group(tmp_path / "back.zarr", mode="r")
    np.testing.assert_array_equal(g["nested/idx"][:], np.arange(6))


def test_diff_sees_a_changed_value(exported) -> None:
    src, out = exported
    meta = json.loads((out / "meta.json").read_text())
    with open(out / "reward.memmap", "r+b") as f:
        f.write(np.float64(9.0).tobytes())
    assert meta["reward"]["dtype"] == "torch.float64"
    rep = ptd.diff(src, out)
    assert not rep.same
    assert [d.key for d in rep.differences] == ["reward"]


def test_inner_path_into_a_memmap_dir(ptd_cli, exported) -> None:
    _src, out = exported
    run = ptd_cli("inspect", out / "nested", "--json")
    assert run.code == 0, run
    assert [e["key"] for e in run.json["entries"]] == ["idx"]
    run = ptd_cli("inspect", out / "nested" / "idx.memmap", "--json")
    assert run.code == 0, run
    assert [e["key"] for e in run.json["entries"]] == ["idx"]
    assert_one_line_error(ptd_cli("inspect", out / "nested" / "nope"), "'nested/nope'", code=2)


def test_golden_tensordict_dir_reads_as_torch_loads_it(tmp_path: Path) -> None:
    be = get_backend("memmap").open(GOLDEN)
    td = ptd.containers.memmap.load_memmap(GOLDEN, allow_pickle=True)
    try:
        assert be.get_attrs(())["__tensordict__"]["batch_size"] == [2]
        kinds = dict(be.children(()))
        assert kinds["nested"] is NodeKind.GROUP
        assert kinds["text"] is NodeKind.ARRAY
        for key in ("f32", "i64", "bool", "c128", "u16"):
            np.testing.assert_array_equal(be.read((key,)), td[key].numpy())
        # bfloat16 / float8: their bits, named by __ptd_dtype__
        meta = be.array_meta(("bf16",))
        assert meta.torch_dtype == "bfloat16"
        assert (be.read(("bf16",)) == td["bf16"].view(torch.uint16).numpy()).all()
        assert be.array_meta(("f8",)).torch_dtype == "float8_e4m3fn"
        np.testing.assert_array_equal(
            be.read(("nested", "deep", "v")), td["nested", "deep", "v"].numpy()
        )
        assert be.read(("empty",)).shape == (2, 0)
        assert be.read(("f64",), (1,)).tolist() == td["f64"][1].tolist()
        assert be.read_non_tensor(("text",)).value == "hello memmap"
        assert be.read_non_tensor(("mapping",)).value == {"k": [1, 2], "s": "v"}
        stack = be.read_non_tensor(("stack",))
        assert stack.is_stack
        assert stack.value == ["first", "second"]
        assert stack.stack_shape == (2,)
        assert be.read_non_tensor(("stack",), (1,)).value == "second"
        assert be.array_meta(("raw",)).non_tensor_kind == "pickle"
        with pytest.raises(PickleRefusedError):
            be.read_non_tensor(("raw",), allow_pickle=False)
        assert be.array_meta(("sp ace/x",)).kind is ValueKind.NUMERIC
        with pytest.raises(ReadOnlyError):
            be.create_group(("x",))
    finally:
        be.close()


def test_golden_through_the_reports(ptd_cli, tmp_path: Path) -> None:
    info = ptd.info(GOLDEN)
    assert info.format == "memmap"
    assert info.batch_size_source == "stored"
    kinds = {e.key: e.kind for e in info.entries}
    assert kinds["text"] == "non_tensor"
    assert kinds["nested/deep/v"] == "tensor"
    assert ptd.validate(GOLDEN).valid
    dst = tmp_path / "nested.zarr"
    run = ptd_cli("convert", GOLDEN / "nested", dst)
    assert run.code == 0, run
    assert ptd.diff(GOLDEN / "nested", dst).same


def test_golden_without_slash_key_converts_whole(tmp_path: Path) -> None:
    golden = tmp_path / "golden"
    shutil.copytree(GOLDEN, golden)
    meta = json.loads((golden / "meta.json").read_text())
    del meta["sp ace/x"]  # a name no HDF5/zarr node can hold as it is
    del meta["raw"]  # pickled: diff never unpickles
    shutil.rmtree(golden / "raw")
    (golden / "meta.json").write_text(json.dumps(meta))
    dst = tmp_path / "g.h5"
    ptd.convert(golden, dst, allow_pickle=True)
    assert ptd.diff(golden, dst, equal_nan=True).same
    back = ptd.PersistentTensorDict.from_h5(dst)
    try:
        assert back["bf16"].dtype == torch.bfloat16
        assert torch.equal(back["bf16"], ptd.containers.memmap.load_memmap(golden)["bf16"])
        assert list(back["stack"]) == ["first", "second"]
    finally:
        back.close()


def test_damaged_memmap_dirs(tmp_path: Path, exported) -> None:
    _src, out = exported
    (out / "obs.memmap").write_bytes(b"\x00" * 4)  # too short
    # one damaged leaf does not stop the comparison: it is listed as not compared
    compared = ptd.diff(out, out)
    (item,) = [x for x in compared.not_compared if x["key"] == "obs"]
    assert "too short" in item["reason"]
    assert not compared.verified()
    rep = ptd.validate(out, data=True)
    assert not rep.valid
    bad = tmp_path / "bad.mm"
    bad.mkdir()
    (bad / "meta.json").write_text("{not json")
    with pytest.raises(CorruptStoreError):
        ptd.info(bad)
    with pytest.raises(ReadOnlyError):
        get_backend("memmap").open(out, "r+")
