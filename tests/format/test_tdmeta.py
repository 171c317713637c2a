"""The ``__tensordict__`` attribute: one parser (:func:`ptd.format.tdmeta.parse_td_meta`), one
answer.

Whatever the attribute holds, ``PersistentTensorDict.from_h5``/``from_zarr``, the constructor,
``ptd.info``, ``ptd.validate``, ``ptd inspect`` and ``ptd validate`` agree on every group's
batch size; a malformed attribute (or one that does not fit the entries) is ignored, the batch
size inferred, and ``ptd.info``/``ptd.validate`` report the problem.

The attribute is written behind ptd's back with plain h5py/zarr, after ptd has created the
store: on HDF5 ptd stores a dict attribute as JSON object text (and reads such text back as a
dict), anything else as a plain attribute; on zarr it is a JSON value in ``zarr.json``.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import h5py
import pytest
import torch
import zarr
from typer.testing import CliRunner

import ptd
from ptd.format.names import TD_META_ATTR, TD_META_VERSION
from ptd.format.tdmeta import ParsedTdMeta, TdMeta, parse_td_meta, td_meta_attrs
from ptd_cli.main import app

# ----------------------------------------------------------------------------- the parser
MALFORMED: dict[str, Any] = {
    "str_batch": {"batch_size": ["2"]},
    "float_batch": {"batch_size": [2.0]},
    "bool_batch": {"batch_size": [True]},
    "negative_batch": {"batch_size": [-1]},
    "batch_not_list": {"batch_size": "x"},
    "batch_int": {"batch_size": 3},
    "no_batch_size": {"version": 1},
    "str": "3",
    "int": 3,
    "list": [4],
    "none": None,
}


@pytest.mark.parametrize("value", list(MALFORMED.values()), ids=list(MALFORMED))
def test_parse_malformed(value: Any) -> None:
    parsed = parse_td_meta({TD_META_ATTR: value})
    assert parsed.meta is None
    assert TD_META_ATTR in parsed.problem


def test_parse_absent() -> None:
    assert parse_td_meta({}) == ParsedTdMeta(None, "")
    assert parse_td_meta({"other": 1}) == ParsedTdMeta(None, "")


@pytest.mark.parametrize(
    ("value", "meta"),
    [
        ({"batch_size": [4], "version": 1}, TdMeta((4,))),
        ({"batch_size": []}, TdMeta(())),
        ({"batch_size": [4, 0, 2]}, TdMeta((4, 0, 2))),
        ({"batch_size": [3], "names": ["time"]}, TdMeta((3,), names=("time",))),
        ({"batch_size": [3, 2], "names": ["t", None]}, TdMeta((3, 2), names=("t", None))),
        ({"batch_size": [3], "version": 7}, TdMeta((3,), version=7)),
        ({"batch_size": [3], "version": "x"}, TdMeta((3,))),  # a bad version: the default
        ({"batch_size": [3], "extra": {"kept": "ignored"}}, TdMeta((3,))),
    ],
)
def test_parse_well_formed(value: dict[str, Any], meta: TdMeta) -> None:
    assert parse_td_meta({TD_META_ATTR: value}) == ParsedTdMeta(meta, "")


@pytest.mark.parametrize(
    "names", [["a", "b"], "a", [1], ["a", 2]], ids=["too_long", "str", "int", "mixed"]
)
def test_parse_bad_names_keeps_the_batch_size(names: Any) -> None:
    meta, problem = parse_td_meta({TD_META_ATTR: {"batch_size": [3], "names": names}})
    assert meta == TdMeta((3,), names=None)
    assert "names" in problem


@pytest.mark.parametrize(
    "meta",
    [
        TdMeta(()),
        TdMeta((4,)),
        TdMeta((4, 2), names=("time", None)),
        TdMeta((5,), names=("env",), version=3),
    ],
)
def test_to_attr_round_trip(meta: TdMeta) -> None:
    attr = meta.to_attr()
    assert json.loads(json.dumps(attr)) == attr  # plain JSON
    assert list(attr)[:2] == ["batch_size", "version"]  # tensordict's key order
    assert parse_td_meta({TD_META_ATTR: attr}) == ParsedTdMeta(meta, "")


def test_to_attr_drops_all_none_names() -> None:
    attr = TdMeta((4, 2), names=(None, None)).to_attr()
    assert attr == {"batch_size": [4, 2], "version": TD_META_VERSION}
    assert parse_td_meta({TD_META_ATTR: attr}).meta == TdMeta((4, 2))


def test_td_meta_attrs() -> None:
    assert td_meta_attrs([3, 2]) == {TD_META_ATTR: {"batch_size": [3, 2], "version": 1}}
    assert td_meta_attrs(torch.Size([3]), ["t"]) == {
        TD_META_ATTR: {"batch_size": [3], "version": 1, "names": ["t"]}
    }


# ----------------------------------------------------------------------------- one answer
#: the attribute, the batch size everything must agree on, and whether it is reported.
#: The store (see ``_make``) holds ``x`` [4, 2, 3] and ``y`` [4, 2] at the root, and a group
#: ``n`` with ``z`` [4, 2, 5]; ptd records [4] on the root and [4, 2, 5] on ``n``.
ROOT_CASES: dict[str, tuple[Any, tuple[int, ...], str | None]] = {
    **{name: (value, (4, 2), "inferred") for name, value in MALFORMED.items() if value is not None},
    "bad_json_text": ("{not json", (4, 2), "inferred"),
    "does_not_fit": ({"batch_size": [3]}, (4, 2), "inferred"),
    "too_long": ({"batch_size": [4, 2, 3]}, (4, 2), "inferred"),
    "names_wrong_length": ({"batch_size": [4], "names": ["a", "b"]}, (4,), "stored"),
    # well formed: used as it is, nothing to report
    "ok": ({"batch_size": [4], "version": 1}, (4,), None),
    "ok_two_dims": ({"batch_size": [4, 2]}, (4, 2), None),
    "ok_no_dims": ({"batch_size": []}, (), None),
    "ok_names": ({"batch_size": [4, 2], "names": ["time", "env"]}, (4, 2), None),
}


def _make(path: Path, fmt: str) -> Path:
    ptd.PersistentTensorDict.from_dict(
        {
            "x": torch.zeros(4, 2, 3),
            "y": torch.zeros(4, 2),
            "n": {"z": torch.zeros(4, 2, 5)},
        },
        str(path),
        batch_size=[4],
        backend=fmt,
    ).close()
    return path


def _write_attr(path: Path, fmt: str, group: str, value: Any) -> None:
    """Set ``__tensordict__`` on ``group`` ("" for the root) with plain h5py/zarr."""
    if fmt == "h5":
        with h5py.File(path, "a") as f:
            node = f[group] if group else f
            # what ptd's h5 backend does with a dict: JSON object text
            node.attrs[TD_META_ATTR] = json.dumps(value) if isinstance(value, dict) else value
    else:
        root = zarr.open_group(str(path), mode="a")
        node = root[group] if group else root
        node.attrs[TD_META_ATTR] = value
        zarr.consolidate_metadata(str(path))  # ptd's zarr stores have consolidated metadata


def _opened(path: Path, fmt: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The root's and ``n``'s batch sizes as ``from_h5``/``from_zarr`` open the store."""
    opener = ptd.PersistentTensorDict.from_h5 if fmt == "h5" else ptd.PersistentTensorDict.from_zarr
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        p = opener(str(path))
    try:
        return tuple(p.batch_size), tuple(p["n"].batch_size)
    finally:
        p.close()


def _constructed(path: Path, fmt: str, batch: tuple[int, ...]) -> tuple[int, ...]:
    """``n``'s batch size when the constructor opens the store with the root's ``batch``
    (which it validates against every leaf)."""
    p = ptd.PersistentTensorDict(filename=str(path), batch_size=list(batch), backend=fmt)
    try:
        assert tuple(p.batch_size) == batch
        return tuple(p["n"].batch_size)
    finally:
        p.close()


def _cli(*args: Any) -> Any:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def _agree(path: Path, fmt: str) -> dict[str, Any]:
    """Every reader's answer; asserts they are the same, returns info and validate."""
    root, nested = _opened(path, fmt)
    assert _constructed(path, fmt, root) == nested
    info = ptd.info(path)
    report = ptd.validate(path)
    n_entry = next(e for e in info.entries if e.key == "n")
    assert tuple(info.batch_size) == root
    assert tuple(n_entry.batch_size or ()) == nested
    assert tuple(report.batch_size or ()) == root
    assert report.batch_size_source == info.batch_size_source
    doc = _cli("inspect", path, "--json")
    assert tuple(doc["batch_size"]) == root
    assert doc["metadata_problem"] == info.metadata_problem
    rep = _cli("validate", path, "--json")["reports"][0]
    assert tuple(rep["batch_size"]) == root
    assert rep["problems"] == [
        {
            "key": p.key,
            "code": p.code,
            "message": p.message,
            "shape": p.shape,
            "expected": p.expected,
        }
        for p in report.problems
    ]
    return {"info": info, "report": report, "n": n_entry}


@pytest.mark.parametrize("case", list(ROOT_CASES))
def test_root_attribute_one_answer(tmp_path: Path, fmt: str, case: str) -> None:
    value, batch, source = ROOT_CASES[case]
    path = _make(tmp_path / f"a.{fmt}", fmt)
    _write_attr(path, fmt, "", value)
    got = _agree(path, fmt)
    info, report = got["info"], got["report"]
    assert tuple(info.batch_size) == batch
    assert info.batch_size_source == (source or "stored")
    bad = [p for p in report.problems if p.code == "bad_metadata"]
    if source is None:
        assert info.metadata_problem is None
        assert report.valid, report.problems
        assert tuple(info.stored_batch_size or ()) == batch
    else:
        assert info.metadata_problem
        assert [p.key for p in bad] == [""]
        assert bad[0].message == info.metadata_problem
        assert not report.valid
    # the nested group is untouched: it keeps its stored [4, 2, 5]
    assert (tuple(got["n"].batch_size), got["n"].batch_size_source) == ((4, 2, 5), "stored")
    assert got["n"].metadata_problem is None


@pytest.mark.parametrize(
    ("value", "batch"),
    [
        ({"batch_size": ["2"]}, (4, 2, 5)),
        ({"batch_size": [2.0]}, (4, 2, 5)),
        ("3", (4, 2, 5)),
        ({"version": 1}, (4, 2, 5)),
        ({"batch_size": [4, 3]}, (4, 2, 5)),  # does not fit its entry
        ({"batch_size": [4, 2]}, (4, 2)),  # well formed
    ],
    ids=["str_batch", "float_batch", "str", "no_batch_size", "does_not_fit", "ok"],
)
def test_nested_attribute_one_answer(
    tmp_path: Path, fmt: str, value: Any, batch: tuple[int, ...]
) -> None:
    path = _make(tmp_path / f"a.{fmt}", fmt)
    _write_attr(path, fmt, "n", value)
    got = _agree(path, fmt)
    info, report, n = got["info"], got["report"], got["n"]
    assert tuple(info.batch_size) == (4,)
    assert info.metadata_problem is None
    assert tuple(n.batch_size) == batch
    bad = [p for p in report.problems if p.code == "bad_metadata"]
    if value == {"batch_size": [4, 2]}:
        assert n.batch_size_source == "stored"
        assert n.metadata_problem is None
        assert report.valid, report.problems
    else:
        assert n.batch_size_source == "inferred"
        assert n.metadata_problem
        assert [(p.key, p.message) for p in bad] == [("n", n.metadata_problem)]


def test_the_problem_names_what_does_not_fit(tmp_path: Path, fmt: str) -> None:
    path = _make(tmp_path / f"a.{fmt}", fmt)
    _write_attr(path, fmt, "", {"batch_size": [3]})
    problem = ptd.info(path).metadata_problem or ""
    assert "[3]" in problem
    assert "does not fit" in problem
    assert "'x' has shape [4, 2, 3]" in problem
    assert "'y' has shape [4, 2]" in problem


def test_names_are_kept_where_they_fit(tmp_path: Path, fmt: str) -> None:
    path = _make(tmp_path / f"a.{fmt}", fmt)
    _write_attr(path, fmt, "", {"batch_size": [4, 2], "names": ["time", None]})
    opener = ptd.PersistentTensorDict.from_h5 if fmt == "h5" else ptd.PersistentTensorDict.from_zarr
    with opener(str(path)) as p:
        assert list(p.names) == ["time", None]
    _write_attr(path, fmt, "", {"batch_size": [4, 2], "names": ["time"]})
    with opener(str(path)) as p:
        assert tuple(p.batch_size) == (4, 2)
        assert list(p.names) == [None, None]
    assert "names" in (ptd.info(path).metadata_problem or "")


@pytest.fixture(params=["h5", "zarr"])
def fmt(request: pytest.FixtureRequest) -> str:
    return str(request.param)
