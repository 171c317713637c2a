"""String arrays and string attributes keep their kind and shape through ``ptd convert``
(h5 -> zarr, zarr -> h5, h5 -> h5, zarr -> zarr), checked with h5py's and zarr-python's own
dtypes and shapes, and with ``ptd diff`` (issue 20, item 2)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import zarr
from zarr.core.dtype import VariableLengthBytes

import ptd
from ptd import PersistentTensorDict

#: kind -> values in each shape (0-d, 1-d, 2-d)
VALUES: dict[str, list[Any]] = {
    "fixed_bytes": [b"demo_0", [b"demo_0", b"demo_1", b"demo_10"], [[b"a", b"bb"], [b"", b"c"]]],
    "vlen_utf8": ["héllo", ["a", "bé", "ccc"], [["x", ""], ["ü", "zz"]]],
    "vlen_bytes": [b"raw", [b"a", b"b\xffc"], [[b"x", b""], [b"y", b"zz"]]],
}
SHAPES = ["0d", "1d", "2d"]


def _h5_dtype(kind: str, values: np.ndarray) -> Any:
    if kind == "fixed_bytes":
        return np.dtype(f"S{max(1, np.asarray(values, dtype='S').dtype.itemsize)}")
    return h5py.string_dtype() if kind == "vlen_utf8" else h5py.string_dtype("ascii")


def _zarr_dtype(kind: str, values: np.ndarray) -> Any:
    if kind == "fixed_bytes":
        return np.dtype(f"S{max(1, np.asarray(values, dtype='S').dtype.itemsize)}")
    return str if kind == "vlen_utf8" else VariableLengthBytes()


def make_h5(path: Path, kind: str, values: Any) -> None:
    arr = np.array(values, dtype=object)
    dt = _h5_dtype(kind, arr)
    with h5py.File(path, "w") as f:
        f.create_dataset("mask/s", data=arr.astype(dt) if kind == "fixed_bytes" else arr, dtype=dt)
        f["x"] = np.arange(6.0)


def make_zarr(path: Path, kind: str, values: Any) -> None:
    arr = np.array(values, dtype=object)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = zarr.open_group(str(path), mode="w")
        a = g.create_group("mask").create_array(
            "s", shape=arr.shape, dtype=_zarr_dtype(kind, arr), compressors=None
        )
        a[...] = arr if kind != "fixed_bytes" else arr.astype(a.dtype)
        g.create_array("x", shape=(6,), dtype="f8")[...] = np.arange(6.0)


def read_kind(path: Path) -> tuple[str, tuple[int, ...], list[Any]]:
    """``(kind, shape, values)`` of ``mask/s`` as h5py or zarr-python say."""
    if path.suffix == ".h5":
        with h5py.File(path, "r") as f:
            ds = f["mask/s"]
            info = h5py.check_string_dtype(ds.dtype)
            assert info is not None, ds.dtype
            if info.length is not None:
                kind = "fixed_bytes"
            else:
                kind = "vlen_utf8" if info.encoding == "utf-8" else "vlen_bytes"
            data = ds.asstr()[()] if kind == "vlen_utf8" else ds[()]
            return kind, ds.shape, np.asarray(data, dtype=object).tolist()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = zarr.open_group(str(path), mode="r")["mask/s"]
        name = type(a.metadata.data_type).__name__
        kind = {
            "NullTerminatedBytes": "fixed_bytes",
            "VariableLengthUTF8": "vlen_utf8",
            "VariableLengthBytes": "vlen_bytes",
        }[name]
        return kind, a.shape, np.asarray(a[...]).astype(object).tolist()


def _expected(values: Any) -> Any:
    return np.array(values, dtype=object).tolist()


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("kind", list(VALUES))
@pytest.mark.parametrize("pair", ["h5-zarr", "zarr-h5", "h5-h5", "zarr-zarr"])
def test_string_arrays_keep_kind_shape_and_values(
    pair: str, kind: str, shape: str, tmp_path: Path, ptd_cli: Any
) -> None:
    values = VALUES[kind][SHAPES.index(shape)]
    src_fmt, dst_fmt = pair.split("-")
    src = tmp_path / f"src.{src_fmt}"
    (make_h5 if src_fmt == "h5" else make_zarr)(src, kind, values)
    src_kind, src_shape, src_values = read_kind(src)
    assert (src_kind, src_values) == (kind, _expected(values))  # the fixture is what it says
    dst = tmp_path / f"dst.{dst_fmt}"
    ptd.convert(src, dst)
    assert read_kind(dst) == (kind, src_shape, src_values)
    run = ptd_cli("diff", src, dst)
    assert run.code == 0, run.stdout
    # and back: still the same
    back = tmp_path / f"back.{src_fmt}"
    ptd.convert(dst, back)
    assert read_kind(back) == (kind, src_shape, src_values)


@pytest.mark.parametrize("pair", ["h5-zarr", "zarr-h5", "h5-h5", "zarr-zarr"])
def test_fixed_utf8_and_utf32_are_restored_through_the_other_format(
    pair: str, tmp_path: Path
) -> None:
    """h5's fixed-length UTF-8 (zarr has none) and zarr's UTF-32 (h5 has none) come back as
    they were after a round trip through the other format."""
    src_fmt, dst_fmt = pair.split("-")
    src = tmp_path / f"s.{src_fmt}"
    dst = tmp_path / f"d.{dst_fmt}"
    back = tmp_path / f"b.{src_fmt}"
    if src_fmt == "h5":
        with h5py.File(src, "w") as f:
            f.create_dataset(
                "t",
                data=np.array(["é".encode(), b"ab"], dtype=h5py.string_dtype("utf-8", 4)),
            )
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = zarr.open_group(str(src), mode="w")
            g.create_array("t", shape=(2,), dtype="U3")[...] = np.array(["é", "abc"])
    ptd.convert(src, dst)
    ptd.convert(dst, back)
    if src_fmt == "h5":
        with h5py.File(back, "r") as f:
            info = h5py.check_string_dtype(f["t"].dtype)
            assert (info.encoding, info.length) == ("utf-8", 4)
            assert f["t"][()].tolist() == ["é".encode(), b"ab"]
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = zarr.open_group(str(back), mode="r")["t"]
            assert a.dtype == np.dtype("U3")
            assert a[...].tolist() == ["é", "abc"]


def test_a_column_of_the_batch_is_marked_a_stack_and_keeps_its_type(tmp_path: Path) -> None:
    """A string column whose rows are its group's batch is also marked as a stack (so
    tensordict reads it as a NonTensorStack); its type stays the source's."""
    src = tmp_path / "s.h5"
    with h5py.File(src, "w") as f:
        f["x"] = np.arange(3.0)
        f["names"] = np.array([b"a", b"bb", b"c"], dtype="S2")
    ptd.convert(src, tmp_path / "d.zarr")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = zarr.open_group(str(tmp_path / "d.zarr"), mode="r")["names"]
        assert (a.dtype, a.shape) == (np.dtype("S2"), (3,))
        assert a.attrs["__tensordict_stack__"] == [3]
    ptd.convert(tmp_path / "d.zarr", tmp_path / "b.h5")
    with h5py.File(tmp_path / "b.h5", "r") as f:
        assert f["names"].dtype == np.dtype("S2")
        assert f["names"][()].tolist() == [b"a", b"bb", b"c"]


@pytest.mark.parametrize("to", ["zarr", "h5"])
def test_attributes_keep_str_and_bytes(to: str, tmp_path: Path) -> None:
    """Fixed-length byte attributes (bytes for h5py) stay bytes; str stays str; lists of
    each too. zarr (JSON) stores bytes as their UTF-8 text and names them in
    ``__ptd_bytes_attrs__``, so that they read back as bytes."""
    src = tmp_path / "s.h5"
    with h5py.File(src, "w") as f:
        f["x"] = np.arange(2)
        f.attrs["b"] = np.bytes_(b"raw")
        f.attrs["s"] = "text"
        f.attrs["lb"] = np.array([b"a", b"bc"])
        f.attrs["ls"] = np.array(["a", "é"], dtype=h5py.string_dtype())
    mid = tmp_path / f"m.{to}"
    ptd.convert(src, mid)
    back = tmp_path / "b.h5"
    ptd.convert(mid, back)
    with h5py.File(back, "r") as f:
        assert f.attrs["b"] == b"raw"
        assert isinstance(f.attrs["b"], bytes)
        assert f.attrs["s"] == "text"
        assert isinstance(f.attrs["s"], str)
        assert f.attrs["lb"].tolist() == [b"a", b"bc"]
        assert f.attrs["ls"].tolist() == ["a", "é"]
        assert "__ptd_bytes_attrs__" not in f.attrs
    if to == "zarr":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            attrs = zarr.open_group(str(mid), mode="r").attrs.asdict()
        assert attrs["b"] == "raw"
        assert sorted(attrs["__ptd_bytes_attrs__"]) == ["b", "lb"]
        from ptd.storage.registry import get_backend

        be = get_backend("zarr").open(str(mid), "r")
        try:
            assert be.get_attrs(())["b"] == b"raw"
            assert be.get_attrs(())["lb"] == [b"a", b"bc"]
        finally:
            be.close()


def test_zarr_attrs_bytes_listing_follows_later_writes(tmp_path: Path) -> None:
    from ptd.storage.registry import get_backend

    be = get_backend("zarr").open(str(tmp_path / "a.zarr"), "w")
    try:
        be.set_attrs((), {"a": b"x", "b": b"y"})
        be.set_attrs((), {"a": "now text"})
        got = be.get_attrs(())
        assert got["a"] == "now text"
        assert got["b"] == b"y"
        assert "__ptd_bytes_attrs__" not in got
    finally:
        be.close()


def test_reading_through_persistent_tensordict_is_unchanged(tmp_path: Path) -> None:
    """The converted file reads as the source does (foreign string arrays as numpy rows)."""
    src = tmp_path / "s.h5"
    make_h5(src, "vlen_utf8", VALUES["vlen_utf8"][1])
    ptd.convert(src, tmp_path / "d.zarr")
    with PersistentTensorDict.from_zarr(tmp_path / "d.zarr") as p:
        assert [str(v) for v in p["mask", "s"]] == ["a", "bé", "ccc"]
