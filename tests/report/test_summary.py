"""ptd.report.summary: alike sibling groups folded, findings grouped by code (torch-free)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ptd
from ptd.report.summary import (
    MIN_ALIKE,
    SHOWN_KEYS,
    dim_ranges,
    group_findings,
    name_pattern,
    summarize_entries,
)

DEMOS = 20


def _lengths() -> list[int]:
    return [100 + 7 * i for i in range(DEMOS)]


def write_episodes(path: Path, backend: str, odd: str | None = None) -> Path:
    """A robomimic-style episode file made with plain h5py / zarr-python: ``data/demo_i`` with
    ``actions``, ``rewards``, ``obs/eef_pos``, each demo of its own length; ``odd`` makes
    ``demo_7`` differ: ``"key"`` (an extra leaf), ``"dtype"`` (float64 actions), ``"trailing"``
    (actions of 8 columns)."""
    leaves: dict[str, tuple[tuple[int, ...], str]] = {}
    arrays: list[tuple[str, np.ndarray]] = []
    for i, n in enumerate(_lengths()):
        leaves = {
            "actions": ((n, 7), "float32"),
            "rewards": ((n,), "float32"),
            "obs/eef_pos": ((n, 3), "float64"),
        }
        if i == 7 and odd == "key":
            leaves["obs/extra"] = ((n, 2), "float32")
        if i == 7 and odd == "dtype":
            leaves["actions"] = ((n, 7), "float64")
        if i == 7 and odd == "trailing":
            leaves["actions"] = ((n, 8), "float32")
        arrays += [(f"data/demo_{i}/{k}", np.zeros(s, d)) for k, (s, d) in leaves.items()]
    if backend == "h5":
        import h5py

        with h5py.File(path, "w") as f:
            for key, a in arrays:
                f.create_dataset(key, data=a)
    else:
        import zarr

        root = zarr.open_group(str(path), mode="w")
        for key, a in arrays:
            z = root.create_array(key, shape=a.shape, dtype=a.dtype)
            z[...] = a
    return path


@pytest.fixture(params=["h5", "zarr"])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


def test_alike_demos_are_one_row_with_their_count_and_lengths(tmp_path: Path, backend: str):
    info = ptd.info(write_episodes(tmp_path / f"ep.{backend}", backend))
    rows = summarize_entries(info.entries)
    keys = [r.key for r in rows]
    assert keys == [
        "data",
        "data/demo_{0..19}",
        "data/demo_{0..19}/actions",
        "data/demo_{0..19}/obs",
        "data/demo_{0..19}/obs/eef_pos",
        "data/demo_{0..19}/rewards",
    ]
    head = rows[1]
    assert head.folded
    assert head.count == DEMOS
    assert head.kind == "group"
    assert head.lengths == (min(_lengths()), max(_lengths()))
    assert sorted(head.names, key=lambda n: int(n.split("_")[1])) == [
        f"demo_{i}" for i in range(DEMOS)
    ]
    actions = rows[2]
    assert not actions.folded
    assert actions.count == 1
    # one member per demo, each the real entry of that demo
    assert sorted(m.key for m in actions.members) == sorted(
        f"data/demo_{i}/actions" for i in range(DEMOS)
    )
    assert dim_ranges([m.shape for m in actions.members]) == [
        (min(_lengths()), max(_lengths())),
        (7, 7),
    ]


@pytest.mark.parametrize("odd", ["key", "dtype", "trailing"])
def test_a_demo_that_differs_is_listed_on_its_own(tmp_path: Path, backend: str, odd: str):
    info = ptd.info(write_episodes(tmp_path / f"ep.{backend}", backend, odd=odd))
    rows = summarize_entries(info.entries)
    groups = {r.key: r for r in rows if r.kind == "group" and r.depth == 2}
    assert set(groups) == {"data/demo_{0..6,8..19}", "data/demo_7"}
    assert groups["data/demo_{0..6,8..19}"].count == DEMOS - 1
    assert groups["data/demo_7"].count == 1
    assert not groups["data/demo_7"].folded
    # demo_7's own subtree is listed under its own name
    assert any(r.key == "data/demo_7/actions" for r in rows)
    if odd == "key":
        assert any(r.key == "data/demo_7/obs/extra" for r in rows)
        assert not any("extra" in r.key and "{" in r.key for r in rows)


def test_expand_lists_every_entry(tmp_path: Path, backend: str):
    info = ptd.info(write_episodes(tmp_path / f"ep.{backend}", backend))
    rows = summarize_entries(info.entries, min_alike=None)
    assert [r.key for r in rows] == [e.key for e in info.entries]
    assert all(r.members == [e] for r, e in zip(rows, info.entries, strict=True))


def _entry(key: str, kind: str, shape: list[int] | None = None, dtype: str | None = None):
    return SimpleNamespace(key=key, kind=kind, shape=shape, dtype=dtype)


def test_fewer_than_min_alike_siblings_are_not_folded():
    entries = [_entry("train", "group"), _entry("train/x", "tensor", [5, 2], "float32")]
    entries += [_entry("test", "group"), _entry("test/x", "tensor", [3, 2], "float32")]
    assert MIN_ALIKE > 2
    assert [r.key for r in summarize_entries(entries)] == ["train", "train/x", "test", "test/x"]


def test_nested_alike_groups_fold_inside_a_folded_group():
    entries = []
    for i in range(3):
        entries.append(_entry(f"ep{i}", "group"))
        for c in range(4):
            entries.append(_entry(f"ep{i}/cam{c}", "group"))
            entries.append(_entry(f"ep{i}/cam{c}/rgb", "tensor", [10 + i, 4], "uint8"))
    rows = summarize_entries(entries)
    assert [(r.key, r.count, len(r.members)) for r in rows] == [
        ("ep{0..2}", 3, 3),
        ("ep{0..2}/cam{0..3}", 4, 12),
        ("ep{0..2}/cam{0..3}/rgb", 1, 12),
    ]
    assert rows[1].lengths == (10, 12)


@pytest.mark.parametrize(
    ("names", "pattern"),
    [
        (["demo_0", "demo_1", "demo_2"], "demo_{0..2}"),
        (["demo_3", "demo_0", "demo_1", "demo_5"], "demo_{0..1,3,5}"),
        (["run007", "run008", "run010"], "run{007..008,010}"),
        (["cam1_rgb", "cam2_rgb", "cam3_rgb"], "cam{1..3}_rgb"),
        (["left", "right", "top"], "{left,right,top}"),
        (["a", "b", "c", "d", "e", "f"], "{a,b,c,d,e,f}"),
        (["x1", "y2", "z3"], "{x1,y2,z3}"),
        (["only"], "only"),
    ],
)
def test_name_pattern(names: list[str], pattern: str):
    assert name_pattern(names) == pattern


def test_dim_ranges():
    assert dim_ranges([[3, 4], [5, 4], [1, 4]]) == [(1, 5), (4, 4)]
    assert dim_ranges([[3, 4], [3]]) is None
    assert dim_ranges([[3], None]) is None
    assert dim_ranges([]) is None


def test_group_findings_keeps_first_order_and_counts():
    found = [
        SimpleNamespace(code=c, key=k) for c, k in [("L002", "a"), ("L006", ""), ("L002", "b")]
    ]
    found += [SimpleNamespace(code="L002", key=k) for k in "cdef"]
    groups = group_findings(found)
    assert [(g.code, g.count) for g in groups] == [("L002", 6), ("L006", 1)]
    l002 = groups[0]
    assert l002.folded
    assert l002.shown_keys == ["a", "b", "c"][:SHOWN_KEYS]
    assert l002.more == 6 - SHOWN_KEYS
    assert l002.keys == ["a", "b", "c", "d", "e", "f"]
    assert not groups[1].folded
    assert groups[1].more == 0


_names = st.lists(
    st.from_regex(r"[a-c]{1,2}[0-9]{0,2}", fullmatch=True), min_size=1, max_size=6, unique=True
)


@st.composite
def _trees(draw: st.DrawFn) -> list[SimpleNamespace]:
    """A random listing: groups whose leaves take one of two layouts, of random lengths."""
    entries: list[SimpleNamespace] = []

    def add(parent: str, depth: int) -> None:
        for n in draw(_names):
            key = f"{parent}/{n}" if parent else n
            if depth < 3 and draw(st.booleans()):
                entries.append(_entry(key, "group"))
                add(key, depth + 1)
            else:
                width = draw(st.sampled_from([2, 3]))
                entries.append(_entry(key, "tensor", [draw(st.integers(1, 9)), width], "float32"))

    add("", 1)
    return entries


@settings(max_examples=60, deadline=None)
@given(_trees())
def test_every_entry_is_in_exactly_one_row(entries: list[SimpleNamespace]):
    rows = summarize_entries(entries)
    seen = [m.key for r in rows for m in r.members]
    assert sorted(seen) == sorted(e.key for e in entries)
    for r in rows:
        # the members of one row share kind, dtype and trailing shape
        assert {m.kind for m in r.members} == {r.kind}
        if r.kind != "group":
            assert len({(m.dtype, tuple(m.shape[1:])) for m in r.members}) == 1
        assert r.folded == (r.count >= MIN_ALIKE)
