"""Names a format cannot hold are stored escaped, the original recorded in ``__ptd_name__``
and given back by every listing (issue 20, item 3; docs/format.md "Names a format cannot
hold")."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import zarr
from hypothesis import given
from hypothesis import strategies as st

import ptd
from ptd import PersistentTensorDict
from ptd.errors import PtdError, PtdKeyError
from ptd.format.keynames import escape_name, unescape_name
from ptd.storage.registry import get_backend

ODD = ["__categories", "a\\b", "zarr.json", ".zattrs", "__x.y%z"]


def make_anndata(path: Path) -> None:
    """An AnnData 0.7-style file, made with plain h5py."""
    with h5py.File(path, "w") as f:
        f.attrs["encoding-type"] = "anndata"
        f.attrs["encoding-version"] = "0.1.0"
        f["X"] = np.arange(12, dtype="f4").reshape(4, 3)
        obs = f.create_group("obs")
        obs.attrs["_index"] = "_index"
        obs.attrs["encoding-type"] = "dataframe"
        obs.attrs["column-order"] = np.array(["cell_type"], dtype=h5py.string_dtype())
        obs["_index"] = np.array(["c0", "c1", "c2", "c3"], dtype=h5py.string_dtype())
        obs["cell_type"] = np.array([0, 1, 0, 1], dtype="i1")
        obs.create_group("__categories")["cell_type"] = np.array(
            ["B", "T"], dtype=h5py.string_dtype()
        )
        f["layers/counts"] = np.ones((4, 3), "f4")
        uns = f.create_group("uns")
        uns["nested/deep/value"] = np.arange(3)
        uns["back\\slash"] = np.array([1.5])
        uns.create_group("__meta").attrs["note"] = "reserved-looking group"


def h5_tree(path: Path) -> dict[str, Any]:
    """Every node of an h5 file as plain h5py sees it: name -> (dtype, shape, values, attrs).
    (The ``__tensordict_stack__`` marker that convert adds to a string column of its group's
    batch, see docs/format.md, is left out.)"""
    out: dict[str, Any] = {}
    with h5py.File(path, "r") as f:

        def visit(name: str, obj: Any) -> None:
            attrs = {
                k: np.asarray(v).tolist()
                for k, v in obj.attrs.items()
                if k != "__tensordict_stack__"
            }
            if isinstance(obj, h5py.Dataset):
                data = obj.asstr()[()] if h5py.check_string_dtype(obj.dtype) else obj[()]
                out[name] = (str(obj.dtype), obj.shape, np.asarray(data).tolist(), attrs)
            else:
                out[name] = ("group", attrs)

        f.visititems(visit)
        out["/"] = {k: np.asarray(v).tolist() for k, v in f.attrs.items()}
    return out


def test_anndata_h5ad_to_zarr_to_h5_keeps_every_name_and_value(
    tmp_path: Path, ptd_cli: Any
) -> None:
    src = tmp_path / "adata.h5ad"
    make_anndata(src)
    mid, back = tmp_path / "x.zarr", tmp_path / "back.h5"
    run = ptd_cli("convert", src, mid, "--to", "zarr")
    assert run.code == 0, run.stdout
    assert "stored escaped" in run.stdout
    assert ptd_cli("convert", mid, back).code == 0
    assert h5_tree(back) == h5_tree(src)
    assert ptd_cli("diff", src, back).code == 0
    assert ptd_cli("diff", src, mid).code == 0
    # the zarr store as zarr-python sees it: escaped names, the original recorded
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = zarr.open_group(str(mid), mode="r")
        assert sorted(g["obs"].group_keys()) == ["%5F_categories"]
        assert g["obs/%5F_categories"].attrs["__ptd_name__"] == "__categories"
        assert "back%5Cslash" in g["uns"]
    # and as ptd sees it: the original names
    keys = {e["key"] for e in ptd_cli("inspect", mid, "--json").json["entries"]}
    assert {"obs/__categories/cell_type", "uns/back\\slash", "uns/__meta"} <= keys
    assert not any("%5" in k for k in keys)
    with PersistentTensorDict.from_zarr(mid) as p:
        assert "__categories" in p["obs"].keys()
        assert list(p["obs", "__categories", "cell_type"]) == ["B", "T"]


@pytest.mark.parametrize("fmt", ["h5", "zarr"])
def test_same_format_conversion_keeps_names(fmt: str, tmp_path: Path, ptd_cli: Any) -> None:
    src = tmp_path / "adata.h5"
    make_anndata(src)
    if fmt == "zarr":
        ptd.convert(src, tmp_path / "a.zarr")
        src = tmp_path / "a.zarr"
    dst = tmp_path / f"copy.{fmt}"
    ptd.convert(src, dst)
    assert ptd_cli("diff", src, dst).code == 0
    names = {e["key"] for e in ptd_cli("inspect", dst, "--json").json["entries"]}
    assert {"obs/__categories", "uns/back\\slash", "uns/__meta"} <= names


@pytest.mark.parametrize("name", ODD)
def test_zarr_backend_round_trips_odd_names(name: str, tmp_path: Path) -> None:
    import torch

    path = tmp_path / "s.zarr"
    with PersistentTensorDict(filename=str(path), mode="w", backend="zarr") as p:
        p[name] = torch.arange(3)
        p["g", name, "leaf"] = torch.ones(2)
        p["text", name] = "a str"
    with PersistentTensorDict.from_zarr(path) as p:
        assert name in p.keys()
        assert name in p["g"].keys()
        assert torch.equal(p[name], torch.arange(3))
        assert torch.equal(p["g", name, "leaf"], torch.ones(2))
        assert p["text", name] == "a str"
    be = get_backend("zarr").open(str(path), "r")
    try:
        names = [p for p, _, _ in be.walk()]
        assert (name,) in names
        assert ("g", name, "leaf") in names
        assert "__ptd_name__" not in be.get_attrs((name,))
    finally:
        be.close()
    assert (path / escape_name(name) / "zarr.json").is_file()


def test_moving_a_node_updates_its_recorded_name(tmp_path: Path) -> None:
    be = get_backend("zarr").open(str(tmp_path / "m.zarr"), "w")
    try:
        be.create_array(("__a",), shape=(2,), dtype=np.dtype("i4"), data=np.array([1, 2]))
        be.move(("__a",), ("plain",))
        assert [n for n, _ in be.children(())] == ["plain"]
        be.move(("plain",), ("x\\y",))
        assert [n for n, _ in be.children(())] == ["x\\y"]
        np.testing.assert_array_equal(be.read(("x\\y",)), [1, 2])
    finally:
        be.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = zarr.open_group(str(tmp_path / "m.zarr"), mode="r")
        assert list(g.array_keys()) == ["x%5Cy"]
        assert g["x%5Cy"].attrs["__ptd_name__"] == "x\\y"


def test_foreign_names_that_look_escaped_are_read_as_they_are(tmp_path: Path) -> None:
    """Only the recorded attribute decides: a node named like an escaped name without it (or
    with a record of another name) keeps its own name."""
    path = tmp_path / "f.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = zarr.open_group(str(path), mode="w")
        g.create_array("%5F_plain", shape=(1,), dtype="i4")
        g.create_array("%5F_lying", shape=(1,), dtype="i4", attributes={"__ptd_name__": "other"})
    be = get_backend("zarr").open(str(path), "r")
    try:
        assert [n for n, _ in be.children(())] == ["%5F_lying", "%5F_plain"]
        assert be.kind(("%5F_plain",)) is not None
        assert be.kind(("__plain",)) is None
    finally:
        be.close()
    # writing "__plain" would take the stored name of the foreign node: refused, named
    be = get_backend("zarr").open(str(path), "r+")
    try:
        with pytest.raises(PtdKeyError, match=r"'__plain'.*'%5F_plain'"):
            be.create_array(("__plain",), shape=(1,), dtype=np.dtype("i4"))
    finally:
        be.close()


def test_names_no_store_can_hold_are_refused_naming_file_and_key(tmp_path: Path) -> None:
    src = tmp_path / "odd.h5"
    with h5py.File(src, "w") as f:
        f.create_dataset("..", data=np.arange(3))
        f["ok"] = np.arange(3)
    with pytest.raises(PtdError, match=r"odd\.h5.*'\.\.'"):
        ptd.convert(src, tmp_path / "odd.zarr")
    result = ptd.convert(src, tmp_path / "odd.zarr", skip_unsupported=True)
    assert [i["key"] for i in result.not_copied] == [".."]


@given(st.text(min_size=1, max_size=30).filter(lambda s: "/" not in s and "\x00" not in s))
def test_escape_is_lossless_and_storable(name: str) -> None:
    stored = escape_name(name)
    assert unescape_name(stored) == name
    assert get_backend("zarr").escaped_name(stored) is None  # stored as it is
    assert not stored.startswith("_")
    assert "\\" not in stored
    assert "." not in stored


def _v2_group(d: Path) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / ".zgroup").write_text('{"zarr_format": 2}')


def _v2_array(d: Path, a: np.ndarray) -> None:
    d.mkdir(parents=True, exist_ok=True)
    meta = {
        "zarr_format": 2, "shape": list(a.shape), "chunks": list(a.shape),
        "dtype": a.dtype.str, "compressor": None, "fill_value": 0, "filters": None,
        "order": "C",
    }  # fmt: skip
    import json

    (d / ".zarray").write_text(json.dumps(meta))
    (d / ".".join(["0"] * a.ndim)).write_bytes(a.tobytes())


def test_foreign_v2_store_holding_reserved_names_as_they_are(ptd_cli, tmp_path: Path) -> None:
    """A Zarr v2 store written by another tool (anndata's zarr layout) holds `__categories`
    as it is: ptd finds it under that name (no record, no escape), sizes it, and converts it."""
    src = tmp_path / "ad.zarr"
    _v2_group(src)
    _v2_group(src / "obs")
    _v2_group(src / "obs" / "__categories")
    _v2_array(src / "obs" / "__categories" / "ct", np.arange(3, dtype="<i8"))
    _v2_array(src / "obs" / "code", np.zeros(5, dtype="|i1"))
    doc = ptd_cli("inspect", src, "--json").json
    entries = {e["key"]: e for e in doc["entries"]}
    assert "obs/__categories/ct" in entries
    assert entries["obs/__categories/ct"]["stored_nbytes"] == 24  # its chunk file was found
    with PersistentTensorDict.from_zarr(src, mode="r") as p:
        assert p["obs", "__categories", "ct"].tolist() == [0, 1, 2]
    dst = tmp_path / "ad.h5"
    assert ptd_cli("convert", src, dst).code == 0
    with h5py.File(dst, "r") as f:
        assert f["obs/__categories/ct"][()].tolist() == [0, 1, 2]
    assert ptd_cli("diff", src, dst).code == 0
