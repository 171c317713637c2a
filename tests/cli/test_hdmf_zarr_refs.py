"""Zarr stores in hdmf-zarr's spelling of references and links, made by hand with plain
zarr-python and numcodecs (hdmf-zarr itself needs zarr<3): a Zarr v2 array of dtype ``|O``
whose elements are ``{"source": ".", "path": ...}`` dicts encoded by numcodecs' JSON codec,
a reference attribute, a group's ``zarr_link``. ptd reads the references as paths, converts
them to real HDF5 references and soft links, and refuses malformed ones by store and key."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numcodecs
import numpy as np
import pytest
import zarr

import ptd


def _write_v2(path: Path, elements: list[object], *, link: object = None) -> None:
    g = zarr.open_group(str(path), mode="w", zarr_format=2)
    g.create_array("x", shape=(3,), dtype="f4")[:] = np.arange(3, dtype="f4")
    g.create_group("dev").attrs["kind"] = "probe"
    g.attrs["specloc"] = {"zarr_dtype": "object", "value": {"source": ".", "path": "/dev"}}
    g.attrs["zarr_link"] = (
        link if link is not None else [{"name": "device", "source": ".", "path": "/dev"}]
    )
    # zarr-python 3 cannot create an object array: hdmf-zarr's documents, written as they are
    codec = numcodecs.JSON()
    (path / "refs").mkdir()
    zarray = {
        "zarr_format": 2,
        "shape": [len(elements)],
        "chunks": [2],
        "dtype": "|O",
        "compressor": None,
        "fill_value": None,
        "filters": [codec.get_config()],
        "order": "C",
    }
    (path / "refs" / ".zarray").write_text(json.dumps(zarray))
    (path / "refs" / ".zattrs").write_text(json.dumps({"zarr_dtype": "object"}))
    for i in range(0, len(elements), 2):
        chunk = np.empty(2, dtype=object)
        chunk[:] = (elements[i : i + 2] + [None])[:2]
        (path / "refs" / str(i // 2)).write_bytes(codec.encode(chunk))


GOOD = [
    {"source": ".", "path": "/x"},
    {"source": ".", "path": "/dev"},
    {"source": ".", "path": "/x"},
]


def test_hdmf_zarr_references_read_as_paths_and_made_again_in_h5(tmp_path: Path, ptd_cli) -> None:
    src, dst = tmp_path / "a.zarr", tmp_path / "b.h5"
    _write_v2(src, GOOD)
    run = ptd_cli("inspect", src, "--json")
    assert run.code == 0, run
    entries = {e["key"]: e for e in run.json["entries"]}
    assert entries["refs"]["kind"] == "reference"
    result = ptd.convert(src, dst, to="h5")
    assert result.not_copied == []
    with h5py.File(dst, "r") as f:
        assert [f[r].name for r in f["refs"][()]] == ["/x", "/dev", "/x"]
        assert f[f.attrs["specloc"]].name == "/dev"
        assert f.get("device", getlink=True).path == "/dev"
        assert f["device"].attrs["kind"] == "probe"
    assert ptd.diff(src, dst).same
    assert ptd.verify_conversion(result).verified()


@pytest.mark.parametrize(
    ("element", "why"),
    [
        ({"source": ".", "path": "/../../etc/passwd"}, "steps up"),
        ({"source": "."}, "no 'path'"),
        ({"source": ".", "path": 3}, "not a string"),
        ("not json at all", "not JSON"),
        ({"source": "../other.zarr", "path": "/x"}, "another store"),
    ],
)
def test_a_malformed_reference_is_a_ptd_error_naming_store_and_key(
    tmp_path: Path, element: object, why: str, ptd_cli
) -> None:
    src = tmp_path / "a.zarr"
    _write_v2(src, [GOOD[0], element, GOOD[1]])
    run = ptd_cli("convert", src, tmp_path / "b.h5")
    assert run.code != 0, run
    assert "Traceback" not in run.stderr
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("ptd: error:"), lines
    for part in (str(src), "'refs'", why):
        assert part in lines[0], (part, lines[0])
    assert not (tmp_path / "b.h5").exists()


@pytest.mark.parametrize(
    ("link", "key", "why"),
    [
        ([{"name": "device", "source": ".", "path": "/../dev"}], "device", "steps up"),
        ([{"name": "device", "source": "."}], "device", "no 'path'"),
        ([{"name": "device", "source": "other.zarr", "path": "/dev"}], "device", "other.zarr"),
        ([{"name": "a/b", "source": ".", "path": "/dev"}], "zarr_link[0]", "not a node name"),
        ("device", "zarr_link", "not a list"),
        ([7], "zarr_link[0]", "not an object"),
    ],
)
def test_a_malformed_link_is_listed_by_name(
    tmp_path: Path, link: object, key: str, why: str
) -> None:
    src, dst = tmp_path / "a.zarr", tmp_path / "b.h5"
    _write_v2(src, GOOD, link=link)
    result = ptd.convert(src, dst, to="h5")
    reasons = {i["key"]: i["reason"] for i in result.not_copied}
    assert why in reasons[key], reasons
    with h5py.File(dst, "r") as f:
        assert "device" not in f
        assert [f[r].name for r in f["refs"][()]] == ["/x", "/dev", "/x"]
