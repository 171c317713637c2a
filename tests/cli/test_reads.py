"""What a person reads is right (issue 37, part 6): counts that match what is listed, diffs that
show the difference, HDF5 types in HDF5's words. Fixtures are written with plain h5py / zarr."""

from __future__ import annotations

import json
import re
from pathlib import Path

import h5py
import numpy as np

from .conftest import Run


def _unsupported_h5(path: Path) -> Path:
    """An HDF5 file with a reference dataset (a key zarr cannot hold), complex attributes and
    dimension scales (attributes zarr cannot hold) on several keys."""
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(10.0)
        f["y"] = np.arange(10.0)
        f["refs"] = np.array([f["x"].ref, f["y"].ref], dtype=h5py.ref_dtype)
        for k in ("x", "y"):
            f[k].attrs["c"] = np.array([1 + 2j])
        f["t"] = np.zeros(10)
        f["t"].make_scale("t")
        f["x"].dims[0].attach_scale(f["t"])
        f["y"].dims[0].attach_scale(f["t"])
    return path


def _listed(stdout: str, what: str) -> tuple[int, int]:
    """The count a heading announces, and how many entries the lines below it stand for (a
    line ``what: KEY: reason`` is one; ``what: attribute 'a' of K1, K2 (and 3 more): reason``
    is five)."""
    heading = re.search(rf"^  (\d+) items? {what}\b.*:$", stdout, re.M)
    assert heading, stdout
    listed = 0
    for line in stdout.splitlines():
        if not line.startswith(f"  {what}: "):
            continue
        head = line[len(f"  {what}: ") :].split(": ")[0]
        if " of " not in head:
            listed += 1
            continue
        keys = head.split(" of ", 1)[1]
        more = re.search(r" \(and (\d+) more\)$", keys)
        listed += len(keys[: more.start()].split(", ")) + int(more.group(1)) if more else 0
        listed += 0 if more else len(keys.split(", "))
    return int(heading.group(1)), listed


def test_convert_counts_what_it_lists(tmp_path: Path, ptd_cli) -> None:
    src = _unsupported_h5(tmp_path / "a.h5")
    text: Run = ptd_cli("convert", src, tmp_path / "a.zarr", "--skip-unsupported")
    assert text.code == 0, text
    as_json = ptd_cli("convert", src, tmp_path / "b.zarr", "--skip-unsupported", "--json")
    assert as_json.code == 0, as_json
    entries = json.loads(as_json.stdout)["not_copied"]
    announced, listed = _listed(text.stdout, "not copied")
    assert announced == len(entries) == listed, text.stdout


def _hdf5_types(path: Path) -> Path:
    """Datasets and attributes of HDF5 types numpy or torch have no type for."""
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(4.0)
        space = h5py.h5s.create_simple((4,))
        h5py.h5d.create(f.id, b"when", h5py.h5t.UNIX_D32LE, space)  # H5T_TIME
        h5py.h5a.create(f["x"].id, b"stamp", h5py.h5t.UNIX_D32LE, h5py.h5s.create_simple((1,)))
        f["blob"] = np.array([np.void(b"ab"), np.void(b"cd"), np.void(b"ef"), np.void(b"gh")])
    return path


def test_hdf5_types_are_named_in_hdf5_words(tmp_path: Path, ptd_cli) -> None:
    src = _hdf5_types(tmp_path / "t.h5")
    for args in (("inspect",), ("validate",), ("validate", "--data"), ("inspect", "--stats")):
        run = ptd_cli(*args, src)
        assert run.code in (0, 1), run
        text = run.stdout + run.stderr
        assert "H5T_TIME" in text, (args, text)
        assert "H5T_OPAQUE" in text, (args, text)
        for raw in ("TypeError", "TypeTimeID", "NumPy equivalent", "|V2"):
            assert raw not in text, (args, raw, text)
    converted = ptd_cli("convert", src, tmp_path / "t.zarr", "--skip-unsupported", "--json")
    assert converted.code == 0, converted
    why = {(i["key"], i.get("attr")): i["reason"] for i in converted.json["not_copied"]}
    assert why[("x", "stamp")].startswith("H5T_TIME"), why
    assert why[("when", None)].count("H5T_TIME") == 1, why
