"""Attributes of any JSON shape (lists of dicts, nested and ragged lists, None inside lists)
through ``convert`` both ways: HDF5 has no type for them, so the h5 copy holds their JSON text,
listed in ``__ptd_json_attrs__``, and ptd reads that back as the value (docs/format.md).
Sources are written with zarr-python and h5py, never through ptd."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import zarr

import ptd

#: attribute values JSON holds and HDF5 has no native type for (NGFF's shapes among them)
JSON_SHAPED: dict[str, Any] = {
    "multiscales": [
        {
            "version": "0.4",
            "axes": [{"name": "y", "type": "space"}, {"name": "x", "type": "space"}],
            "datasets": [{"path": "0", "coordinateTransformations": [{"scale": [1.0, 1.0]}]}],
        }
    ],
    "ragged": [[1, 2], [3]],
    "mixed": [1, "a", None, True],
    "nested": {"a": [1, {"b": [2.5, None]}], "c": []},
    "list_of_lists_of_str": [["a", "b"], ["c"]],
}
#: values HDF5 holds natively: they stay native attributes (no JSON text) in the h5 copy
NATIVE: dict[str, Any] = {"n": 3, "xs": [1.5, 2.5], "names": ["a", "b"], "grid": [[1, 2], [3, 4]]}


def _zarr_source(path: Path) -> None:
    root = zarr.open_group(str(path), mode="w", zarr_format=3)
    root.attrs.update({**JSON_SHAPED, **NATIVE})
    arr = root.create_array("x", shape=(4, 2), dtype="float32")
    arr[:] = np.arange(8, dtype="float32").reshape(4, 2)
    arr.attrs.update({"omero": {"channels": [{"label": "c0", "window": {"end": 1}}]}})


def test_json_shaped_attrs_survive_zarr_to_h5_and_back(tmp_path: Path) -> None:
    src, h5, back = tmp_path / "a.zarr", tmp_path / "a.h5", tmp_path / "b.zarr"
    _zarr_source(src)

    result = ptd.convert(src, h5)
    assert result.not_copied == []
    with h5py.File(h5, "r") as f:
        listed = {n.decode() if isinstance(n, bytes) else n for n in f.attrs["__ptd_json_attrs__"]}
        assert listed == set(JSON_SHAPED)
        for name, value in JSON_SHAPED.items():
            text = f.attrs[name]
            # any HDF5 reader sees a string holding the value's JSON
            assert json.loads(text.decode() if isinstance(text, bytes) else text) == value
        assert f.attrs["n"] == 3
        assert f.attrs["grid"].tolist() == [[1, 2], [3, 4]]
        assert json.loads(f["x"].attrs["omero"])["channels"][0]["label"] == "c0"
    assert ptd.diff(src, h5).same

    ptd.convert(h5, back)
    attrs = dict(zarr.open_group(str(back), mode="r").attrs)
    assert {k: attrs[k] for k in JSON_SHAPED} == JSON_SHAPED
    assert {k: attrs[k] for k in NATIVE} == NATIVE
    assert "__ptd_json_attrs__" not in attrs
    assert dict(zarr.open_array(str(back / "x"), mode="r").attrs)["omero"]["channels"][0] == {
        "label": "c0",
        "window": {"end": 1},
    }
    assert ptd.diff(src, back).same


def test_a_json_looking_string_from_h5py_stays_a_string(tmp_path: Path) -> None:
    """Only the attributes listed in ``__ptd_json_attrs__`` are read as JSON: another
    writer's string whose text is a JSON list stays that string in the zarr copy."""
    src, dst = tmp_path / "a.h5", tmp_path / "a.zarr"
    with h5py.File(src, "w") as f:
        f.attrs["text"] = '[{"a": 1}]'
        f.create_dataset("x", data=np.arange(3))
    ptd.convert(src, dst)
    assert zarr.open_group(str(dst), mode="r").attrs["text"] == '[{"a": 1}]'
