"""``ptd validate`` on the corpus of faulty stores (tests/cli/report_corpus.py): stale
consolidated metadata, data faults with ``--data``, each lint finding, ``--fail-on`` and
``--ignore``, schema value constraints; ``ptd inspect`` warnings and ``--stats``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ptd
from ptd.report.lint import LINT_CODES

from . import report_corpus as corpus


def codes(run: Any, field: str = "problems") -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for rep in run.json["reports"]:
        for p in rep[field]:
            out.setdefault(p["code"], []).append(p)
    return out


def test_clean_stores_pass_everything(ptd_cli, tmp_path: Path) -> None:
    for build in (corpus.h5_ok, corpus.zarr_ok):
        path = build(tmp_path)
        run = ptd_cli("validate", path, "--data", "--json", "--fail-on", "info")
        assert run.code == 0, run
        (rep,) = run.json["reports"]
        assert rep["problems"] == []
        assert rep["lint"] == []
        assert rep["data_checked"]
        assert rep["stats"]["a"]["count"] == corpus.ROWS * 4
        assert rep["stats"]["b"]["max"] == corpus.ROWS - 1


# --- consolidated metadata ------------------------------------------------------------------
def test_stale_consolidated_metadata_added_array(ptd_cli, tmp_path: Path) -> None:
    path = corpus.stale_added(tmp_path)
    # a reader trusting the consolidated metadata does not see 'late'
    assert "late" not in ptd.PersistentTensorDict.from_zarr(path).keys()
    run = ptd_cli("validate", path, "--json")
    assert run.code == 1, run
    found = codes(run)
    (miss,) = found["consolidated_missing"]
    assert miss["key"] == "late"
    assert "consolidated metadata" in miss["message"]
    # ... and then the real arrays are checked: 'late' does not fit the batch size
    rep = run.json["reports"][0]
    assert rep["consolidated_stale"] is True
    assert rep["leaves"] == 3
    assert "late" in found["bad_metadata"][0]["message"]
    human = ptd_cli("validate", path)
    assert human.code == 1
    assert "consolidated_missing" in human.stdout
    # the documented way to open it without trusting the consolidated metadata
    p = ptd.PersistentTensorDict.from_zarr(path, use_consolidated=False, batch_size=[])
    assert "late" in p.keys()
    p.close()


@pytest.mark.parametrize(
    ("build", "code", "key"),
    [
        (corpus.stale_removed, "consolidated_extra", "b"),
        (corpus.stale_changed, "consolidated_differs", "a"),
    ],
)
def test_stale_consolidated_metadata_other(ptd_cli, tmp_path: Path, build, code, key) -> None:
    path = build(tmp_path)
    run = ptd_cli("validate", path, "--json")
    assert run.code == 1, run
    (found,) = codes(run)[code]
    assert found["key"] == key
    if code == "consolidated_differs":
        assert "[64, 4]" in found["message"]
        assert "[67, 4]" in found["message"]


@pytest.mark.parametrize(
    ("build", "code"),
    [
        (corpus.stale_added, "consolidated_missing"),
        (corpus.stale_removed, "consolidated_extra"),
        (corpus.stale_changed, "consolidated_differs"),
    ],
)
def test_inspect_warns_about_stale_consolidated_metadata(
    ptd_cli, tmp_path: Path, build, code: str
) -> None:
    path = build(tmp_path)
    run = ptd_cli("inspect", path)
    assert run.code == 0, run
    assert f"warning: {code}" in run.stdout
    doc = ptd_cli("inspect", path, "--json").json
    assert [c["code"] for c in doc["consolidated"]] == [code]
    fresh = ptd_cli("inspect", corpus.zarr_ok(tmp_path), "--json").json
    assert "consolidated" not in fresh


# --- data faults ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("build", "code", "key", "chunk"),
    [
        (corpus.h5_checksum, "checksum_failed", "a", [2, 0]),
        (corpus.zarr_checksum, "checksum_failed", "a", [3, 0]),
        (corpus.h5_undecodable, "undecodable_chunk", "a", [1]),
        (corpus.zarr_undecodable, "undecodable_chunk", "a", [1]),
    ],
)
def test_bad_chunk_found_with_data(ptd_cli, tmp_path: Path, build, code, key, chunk) -> None:
    path = build(tmp_path)
    assert ptd_cli("validate", path).code == 0  # metadata alone cannot see it
    run = ptd_cli("validate", path, "--data", "--json")
    assert run.code == 1, run
    found = codes(run)
    assert list(found) == [code], found
    (p,) = found[code]
    assert p["key"] == key
    assert p["chunk"] == chunk
    assert str(chunk) in p["message"]
    # the other chunks were read and counted
    stats = run.json["reports"][0]["stats"][key]
    assert 0 < stats["count"] < stats["nbytes"]
    human = ptd_cli("validate", path, "--data")
    assert human.code == 1
    assert code in human.stdout


@pytest.mark.parametrize("build", [corpus.zarr_missing_chunk, corpus.h5_missing_chunk])
def test_missing_chunk_counted(ptd_cli, tmp_path: Path, build) -> None:
    path = build(tmp_path)
    run = ptd_cli("validate", path, "--data", "--json")
    assert run.code == 0, run  # information: a chunk of fill values may be absent
    (p,) = codes(run)["missing_chunks"]
    assert p["key"] == "b"
    assert p["count"] == 1
    assert p["severity"] == "info"
    assert ptd_cli("validate", path, "--data", "--fail-on", "info").code == 1
    # a schema that forbids missing chunks makes it an error
    schema = ptd_cli("inspect", path, "--json").json
    for e in schema["entries"]:
        if e["key"] == "b":
            e["constraints"] = {"allow_missing_chunks": False}
    sp = tmp_path / "schema.json"
    sp.write_text(json.dumps(schema))
    strict = ptd_cli("validate", path, "--data", "--schema", sp, "--json")
    assert strict.code == 1, strict
    (p,) = codes(strict)["missing_chunks"]
    assert "severity" not in p  # an error


@pytest.mark.parametrize("fmt", ["h5", "zarr"])
def test_nan_and_inf(ptd_cli, tmp_path: Path, fmt: str) -> None:
    path = corpus.nan_store(tmp_path, fmt)
    run = ptd_cli("validate", path, "--data", "--json")
    assert run.code == 0, run  # warnings
    found = codes(run)
    assert found["nan_values"][0]["count"] == 2
    assert found["nan_values"][0]["severity"] == "warning"
    assert found["inf_values"][0]["count"] == 1
    st = run.json["reports"][0]["stats"]["x"]
    assert st["nan"] == 2
    assert st["inf"] == 1
    assert st["count"] == corpus.ROWS
    assert st["max"] <= 1.0
    assert st["min"] == 0.0
    assert ptd_cli("validate", path, "--data", "--fail-on", "warning").code == 1
    ignored = ptd_cli(
        "validate",
        path,
        "--data",
        "--fail-on",
        "warning",
        "--ignore",
        "nan_values",
        "--ignore",
        "inf_values",
    )
    assert ignored.code == 0, ignored


def test_schema_value_constraints(ptd_cli, tmp_path: Path) -> None:
    path = corpus.nan_store(tmp_path, "h5")
    schema = ptd_cli("inspect", path, "--json").json
    schema["entries"][0]["constraints"] = {"min": 0.0, "max": 0.5, "allow_nan": False}
    sp = tmp_path / "schema.json"
    sp.write_text(json.dumps(schema))
    run = ptd_cli("validate", path, "--data", "--schema", sp, "--json")
    assert run.code == 1, run
    found = codes(run)
    assert found["nan_not_allowed"][0]["count"] == 2
    assert "nan_values" not in found
    # inf and the values above 0.5: 31 of the finite ones, plus inf
    assert found["value_out_of_range"][0]["count"] == 31
    ok = corpus.h5_ok(tmp_path)
    schema = ptd_cli("inspect", ok, "--json").json
    for e in schema["entries"]:
        if e["key"] == "b":
            e["constraints"] = {"allowed": list(range(0, 64, 2))}
    sp.write_text(json.dumps(schema))
    run = ptd_cli("validate", ok, "--data", "--schema", sp, "--json")
    assert run.code == 1
    assert codes(run)["value_not_allowed"][0]["count"] == 32


# --- lint -----------------------------------------------------------------------------------
LINT_CASES = [
    (corpus.lint_single_chunk, "L001", "big"),
    (corpus.lint_small_chunks, "L002", "tiny"),
    (corpus.lint_large_chunks, "L003", "huge"),
    (corpus.lint_row_cost, "L004", "wide"),
    (corpus.lint_filter_missing, "L005", "z"),
    (corpus.lint_no_batch_size, "L006", ""),
    (corpus.lint_unconsolidated, "L007", ""),
    (corpus.lint_dtypes, "L008", "seq"),
    (corpus.lint_dtypes, "L009", "u"),
    (corpus.lint_dtypes, "L010", "pair"),
]


@pytest.mark.parametrize(("build", "code", "key"), LINT_CASES, ids=[c for _b, c, _k in LINT_CASES])
def test_each_lint_finding(ptd_cli, tmp_path: Path, build, code: str, key: str) -> None:
    path = build(tmp_path)
    run = ptd_cli("validate", path, "--json", "--fail-on", "info")
    found = codes(run, "lint")
    assert code in found, run
    (f,) = [f for f in found[code] if f["key"] == key]
    name, severity, _fix = LINT_CODES[code]
    assert f["name"] == name
    assert f.get("severity", "error") == severity
    assert f["fix"]
    assert run.code == 1
    # the exit status follows --fail-on; --ignore silences the code (or its name)
    rest = {c for c in found if c != code}
    worst = {"error": 2, "warning": 1, "info": 0}
    others = max((worst[LINT_CODES[c][1]] for c in rest), default=-1)
    problems_error = any(
        p.get("severity", "error") == "error" for r in run.json["reports"] for p in r["problems"]
    )
    for fail_on in ("error", "warning"):
        expect = problems_error or max(worst[severity], others) >= worst[fail_on]
        assert ptd_cli("validate", path, "--fail-on", fail_on).code == int(expect)
    ignored = ptd_cli("validate", path, "--json", "--ignore", code, "--ignore", "no-batch-size")
    assert code not in codes(ignored, "lint")
    by_name = ptd_cli("validate", path, "--json", "--ignore", name)
    assert code not in codes(by_name, "lint")


def test_l008_fix_fits_what_no_cast_can_change(tmp_path: Path) -> None:
    """Opaque bytes and ragged sequences have no number type to cast to: their L008 fix says
    what to store instead; another dtype torch lacks keeps "cast before writing"."""
    import h5py

    path = tmp_path / "kinds.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("opaque", data=np.zeros(4, dtype="V3"))
        f.create_dataset("seq", (4,), dtype=h5py.vlen_dtype(np.dtype("i4")))
    fixes = {f.key: f.fix for f in ptd.validate(path).lint if f.code == "L008"}
    assert set(fixes) == {"opaque", "seq"}
    assert "uint8 with a trailing axis of 3" in fixes["opaque"]
    assert "offsets" in fixes["seq"]
    assert not any("cast" in fix for fix in fixes.values() if fix)


def test_filter_missing_names_the_package(tmp_path: Path) -> None:
    import h5py

    path = corpus.lint_filter_missing(tmp_path)
    rep = ptd.validate(path)
    (f,) = [f for f in rep.lint if f.code == "L005"]
    assert "32099" in f.message
    assert f.fix == "pip install an HDF5 plugin"
    if not h5py.h5z.filter_avail(32015):  # zstd, provided by hdf5plugin once imported
        p2 = tmp_path / "zstd.h5"
        with h5py.File(p2, "w") as h:
            h.create_dataset(
                "z",
                shape=(8,),
                dtype="f4",
                chunks=(4,),
                compression=32015,
                allow_unknown_filter=True,
            )
        (f,) = [f for f in ptd.validate(p2).lint if f.code == "L005"]
        assert "zstd" in f.message
        assert f.fix == "pip install hdf5plugin"


def test_lint_text_output_and_no_lint(ptd_cli, tmp_path: Path) -> None:
    path = corpus.lint_small_chunks(tmp_path)
    run = ptd_cli("validate", path)
    assert run.code == 0
    assert "L002 small-chunks (warning)" in run.stdout
    assert "fix:" in run.stdout
    assert ptd_cli("validate", path, "--json", "--no-lint").json["reports"][0]["lint"] == []


# --- inspect --stats --------------------------------------------------------------------------
def test_inspect_stats(ptd_cli, tmp_path: Path) -> None:
    path = corpus.nan_store(tmp_path, "zarr")
    run = ptd_cli("inspect", path, "--stats")
    assert run.code == 0, run
    assert "histogram" in run.stdout
    assert any(ch in run.stdout for ch in "▁▂▃▄▅▆▇█")
    assert "nan_values" in run.stdout
    assert "lint:" in run.stdout
    doc = ptd_cli("inspect", path, "--stats", "--json").json
    st = doc["stats"]["x"]
    assert st["nan"] == 2
    assert len(st["histogram"]) == 16
    assert sum(st["histogram"]) == 61
    assert doc["lint"] == []
    plain = ptd_cli("inspect", path, "--json").json
    assert "stats" not in plain


def test_library_validate_data(tmp_path: Path) -> None:
    path = corpus.h5_checksum(tmp_path)
    rep = ptd.validate(path, data=True, workers=1)
    assert not rep.valid
    assert rep.data_checked
    (p,) = rep.problems
    assert (p.code, p.check, p.chunk) == ("checksum_failed", "data", [2, 0])
    assert rep.fails("error")
    assert rep.to_dict()["problems"][0]["chunk"] == [2, 0]


def test_use_consolidated_false_survives_pickling_and_is_zarr_only(tmp_path: Path) -> None:
    import pickle

    path = corpus.stale_added(tmp_path)
    p = ptd.PersistentTensorDict.from_zarr(path, use_consolidated=False, batch_size=[])
    q = pickle.loads(pickle.dumps(p))
    assert "late" in q.keys()
    assert q["late"].tolist() == [1] * 7
    q.close()
    p.close()
    with pytest.raises(ptd.errors.ArgumentError, match="zarr"):
        ptd.PersistentTensorDict(
            filename=corpus.h5_ok(tmp_path), backend="h5", use_consolidated=False
        )
