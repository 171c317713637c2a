"""The layouts ``ptd.validate`` knows (:mod:`ptd.report.layouts`), each rule on stores written
with plain h5py or zarr-python (both backends): named dimensions, AnnData's encodings, hdmf
tables with ragged columns, and reference columns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ptd
from ptd.report.layouts import LAYOUTS


def _write(path: Path, fmt: str, tree: dict[str, Any], attrs: dict[str, dict]) -> Path:
    """``tree``: name -> array or sub-tree; ``attrs``: key -> attributes (groups and arrays);
    a tuple ``(array, dims)`` names the array's dimensions."""
    if fmt == "h5":
        import h5py

        with h5py.File(path, "w") as f:
            named: list[tuple[str, tuple[str, ...]]] = []

            def put(g: Any, sub: dict[str, Any], prefix: str) -> None:
                for name, value in sub.items():
                    key = prefix + name
                    if isinstance(value, dict):
                        put(g.create_group(name), value, key + "/")
                        continue
                    if isinstance(value, tuple):
                        value, dims = value
                        named.append((key, dims))
                    g.create_dataset(name, data=value)

            put(f, tree, "")
            for key, dims in named:  # coordinates as dimension scales, as netCDF-4 writes
                for i, dim in enumerate(dims):
                    scale = f[key.rsplit("/", 1)[0] + "/" + dim if "/" in key else dim]
                    if not scale.is_scale:
                        scale.make_scale(dim)
                    if scale.name != f[key].name:
                        f[key].dims[i].attach_scale(scale)
            for key, a in attrs.items():
                f[key or "/"].attrs.update(a)
        return path
    import zarr

    root = zarr.open_group(str(path), mode="w")

    def put_z(g: Any, sub: dict[str, Any]) -> None:
        for name, value in sub.items():
            if isinstance(value, dict):
                put_z(g.create_group(name), value)
                continue
            dims = None
            if isinstance(value, tuple):
                value, dims = value
            a = g.create_array(name, shape=value.shape, dtype=value.dtype, dimension_names=dims)
            a[...] = value

    put_z(root, tree)
    for key, a in attrs.items():
        node = root if not key else root[key]
        node.attrs.update(a)
    return path


def _problems(path: Path, **kwargs: Any) -> list[tuple[str, str]]:
    rep = ptd.validate(path, lint=False, **kwargs)
    return [(p.key, p.code) for p in rep.problems if p.code != "missing_chunks"]


def test_every_layout_states_its_rule_and_source() -> None:
    assert len({e.name for e in LAYOUTS}) == len(LAYOUTS)
    for entry in LAYOUTS:
        assert entry.rule, entry
        assert entry.source.startswith("https://"), entry


# --- named dimensions ---------------------------------------------------------------------------


def _dims_tree(n_t: int = 30, n_s: int = 30, n_t_off: int = 30) -> dict[str, Any]:
    return {
        "time": (np.arange(n_t), ("time",)),
        "x": (np.arange(4), ("x",)),
        "temp": (np.zeros((n_t_off, 4)), ("time", "x")),
        "speed": (np.zeros(n_s), ("time",)),
    }


def test_named_dimensions_valid(tmp_path: Path, backend: str) -> None:
    path = _write(tmp_path / f"ok.{backend}", backend, _dims_tree(), {})
    assert _problems(path) == []


def test_a_dimension_cut_short_names_key_dimension_and_lengths(
    tmp_path: Path, backend: str
) -> None:
    path = _write(tmp_path / f"bad.{backend}", backend, _dims_tree(n_s=29), {})
    rep = ptd.validate(path, lint=False)
    assert not rep.valid
    bad = [p for p in rep.problems if p.code != "missing_chunks"]
    assert [(p.key, p.code) for p in bad] == [("speed", "dimension_mismatch")]
    for needle in ("'speed'", "'time'", "29", "30"):
        assert needle in bad[0].message
    assert bad[0].expected == {"dimension": "time", "axis": 0, "length": 30}


def test_named_dimensions_replace_the_guessing_rule(tmp_path: Path, backend: str) -> None:
    # 'temp' 40 rows along 'time' but 'time' has 39: the guess would not see it (off by one
    # is a near miss only under 1%); the named dimension does, and nothing else is reported
    tree = _dims_tree(n_t=39, n_s=39, n_t_off=40)
    assert _problems(_write(tmp_path / f"a.{backend}", backend, tree, {})) == [
        ("temp", "dimension_mismatch")
    ]
    # an array far off its dimension is not a "side array" when the dimension is named
    tree = _dims_tree(n_t=300, n_s=100, n_t_off=300)
    assert _problems(_write(tmp_path / f"b.{backend}", backend, tree, {})) == [
        ("speed", "dimension_mismatch")
    ]


# --- AnnData encodings --------------------------------------------------------------------------


def _anndata_tree(indptr: int = 11, codes: int = 10) -> tuple[dict[str, Any], dict[str, dict]]:
    tree = {
        "X": {
            "data": np.ones(12, np.float32),
            "indices": np.zeros(12, np.int32),
            "indptr": np.minimum(np.arange(indptr) * 2, 12).astype(np.int32),
        },
        "obs": {
            "_index": np.array([b"c%d" % i for i in range(10)]),
            "cell": {"codes": np.zeros(codes, np.int8), "categories": np.array([b"a", b"b"])},
            "n": np.arange(10),
        },
        "var": {"_index": np.array([b"g%d" % i for i in range(5)])},
    }
    attrs = {
        "": {"encoding-type": "anndata", "encoding-version": "0.1.0"},
        "X": {"encoding-type": "csr_matrix", "shape": [10, 5]},
        "obs": {"encoding-type": "dataframe", "_index": "_index", "column-order": ["cell", "n"]},
        "obs/cell": {"encoding-type": "categorical", "ordered": False},
        "var": {"encoding-type": "dataframe", "_index": "_index", "column-order": []},
    }
    return tree, attrs


def test_anndata_csr_valid_and_not_guessed(tmp_path: Path, backend: str) -> None:
    path = _write(tmp_path / f"ok.{backend}", backend, *_anndata_tree())
    assert _problems(path) == []
    assert _problems(path, data=True) == []
    rep = ptd.validate(path)
    assert rep.layouts["X"] == "anndata csr_matrix"
    assert rep.layouts[""] == "anndata"


def test_anndata_indptr_cut_short(tmp_path: Path, backend: str) -> None:
    path = _write(tmp_path / f"bad.{backend}", backend, *_anndata_tree(indptr=10))
    rep = ptd.validate(path, lint=False)
    assert [(p.key, p.code) for p in rep.problems] == [("X/indptr", "encoding_mismatch")]
    assert "shape[0] + 1 = 11" in rep.problems[0].message


def test_anndata_indptr_end_checked_with_data(tmp_path: Path, backend: str) -> None:
    tree, attrs = _anndata_tree()
    tree["X"]["indptr"] = np.arange(11, dtype=np.int32)  # ends at 10, data holds 12
    path = _write(tmp_path / f"end.{backend}", backend, tree, attrs)
    assert _problems(path) == []  # metadata alone cannot see it
    assert _problems(path, data=True) == [("X/indptr", "encoding_mismatch")]


def test_anndata_categorical_codes_off_the_dataframe(tmp_path: Path, backend: str) -> None:
    path = _write(tmp_path / f"cat.{backend}", backend, *_anndata_tree(codes=9))
    assert _problems(path) == [("obs/cell", "encoding_mismatch")]


@pytest.mark.parametrize(("code", "bad"), [(2, 2), (-2, -2), (-1, None)])
def test_anndata_categorical_code_past_its_categories(
    tmp_path: Path, backend: str, code: int, bad: int | None
) -> None:
    """With --data, every code is -1 (missing) or an index into the categories (two here)."""
    tree, attrs = _anndata_tree()
    tree["obs"]["cell"]["codes"][7] = code
    path = _write(tmp_path / f"code.{backend}", backend, tree, attrs)
    assert _problems(path) == []  # metadata alone cannot see it
    rep = ptd.validate(path, data=True, lint=False)
    found = [(p.key, p.code) for p in rep.problems if p.code == "encoding_mismatch"]
    if bad is None:
        assert found == []
        return
    assert found == [("obs/cell/codes", "encoding_mismatch")]
    (problem,) = [p for p in rep.problems if p.code == "encoding_mismatch"]
    assert f"the code {bad}" in problem.message
    assert "2 categories" in problem.message


def test_anndata_missing_member_is_named(tmp_path: Path, backend: str) -> None:
    tree, attrs = _anndata_tree()
    del tree["X"]["indices"]
    path = _write(tmp_path / f"miss.{backend}", backend, tree, attrs)
    assert _problems(path) == [("X/indices", "encoding_mismatch")]


# --- hdmf DynamicTable with a ragged column -----------------------------------------------------


def _table(index_rows: int = 4, last: int = 9) -> tuple[dict[str, Any], dict[str, dict]]:
    index = np.array([2, 5, 7, last][:index_rows], np.uint8)
    tree = {
        "units": {
            "id": np.arange(4),
            "spike_times": np.zeros(9),
            "spike_times_index": index,
            "quality": np.zeros(4),
        }
    }
    typed = {"namespace": "hdmf-common"}
    attrs = {
        "units": {**typed, "neurodata_type": "Units", "colnames": ["spike_times", "quality"]},
        "units/spike_times_index": {**typed, "neurodata_type": "VectorIndex"},
        "units/spike_times": {**typed, "neurodata_type": "VectorData"},
    }
    return tree, attrs


def test_hdmf_ragged_column_valid(tmp_path: Path, backend: str) -> None:
    path = _write(tmp_path / f"ok.{backend}", backend, *_table())
    assert _problems(path, data=True) == []


def test_hdmf_vector_index_cut_short(tmp_path: Path, backend: str) -> None:
    path = _write(tmp_path / f"bad.{backend}", backend, *_table(index_rows=3))
    rep = ptd.validate(path, lint=False)
    assert [(p.key, p.code) for p in rep.problems] == [
        ("units/spike_times_index", "encoding_mismatch")
    ]
    assert "has 3 rows" in rep.problems[0].message
    assert "has 4" in rep.problems[0].message


def test_hdmf_vector_index_past_its_data(tmp_path: Path, backend: str) -> None:
    path = _write(tmp_path / f"past.{backend}", backend, *_table(last=12))
    assert _problems(path) == []
    assert _problems(path, data=True) == [("units/spike_times_index", "encoding_mismatch")]


def test_hdmf_column_listed_but_missing(tmp_path: Path, backend: str) -> None:
    tree, attrs = _table()
    del tree["units"]["quality"]
    path = _write(tmp_path / f"miss.{backend}", backend, tree, attrs)
    assert _problems(path) == [("units/quality", "encoding_mismatch")]


# --- NWB TimeSeries: one timestamp per sample ---------------------------------------------------


def _series(stamps: int = 50) -> tuple[dict[str, Any], dict[str, dict]]:
    tree = {
        "acquisition": {
            "lfp": {"data": np.zeros((50, 3), np.float32), "timestamps": np.arange(stamps) / 10},
            "rated": {"data": np.zeros((40, 3), np.float32), "starting_time": np.float64(0.0)},
        }
    }
    typed = {"namespace": "core", "object_id": "x"}
    attrs = {
        "acquisition/lfp": {"neurodata_type": "ElectricalSeries", **typed},
        "acquisition/rated": {"neurodata_type": "TimeSeries", **typed},
    }
    return tree, attrs


def test_nwb_timeseries_valid(tmp_path: Path, backend: str) -> None:
    path = _write(tmp_path / f"ts.{backend}", backend, *_series())
    assert _problems(path) == []


def test_nwb_timestamps_cut_short(tmp_path: Path, backend: str) -> None:
    path = _write(tmp_path / f"ts.{backend}", backend, *_series(stamps=49))
    rep = ptd.validate(path, lint=False)
    assert [(p.key, p.code) for p in rep.problems] == [
        ("acquisition/lfp/timestamps", "encoding_mismatch")
    ]
    assert "49 timestamps" in rep.problems[0].message
    assert "50 samples" in rep.problems[0].message


# --- reference columns (HDF5) -------------------------------------------------------------------


def test_a_reference_column_is_its_own_kind(tmp_path: Path) -> None:
    import h5py

    path = tmp_path / "refs.h5"
    with h5py.File(path, "w") as f:
        g = f.create_group("shank0")
        refs = f.create_dataset("group", shape=(12,), dtype=h5py.ref_dtype)
        for i in range(12):
            refs[i] = g.ref
    rep = ptd.validate(path)
    assert rep.valid
    assert rep.problems == []
    assert [(p.key, p.code, p.severity) for p in rep.lint if p.code != "L006"] == [
        ("group", "L012", "info")
    ]
    entry = next(e for e in ptd.info(path).entries if e.key == "group")
    assert entry.kind == "reference"
