"""Text output at any width: piped, at 80 columns, on an 80-column terminal, with a 200-char
key at 220 columns; alike episode groups and repeated findings folded (``--expand`` lists all).

Every key must appear whole on one line with every field of its row; ``…`` (a cut value or
name) never appears."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

import ptd

from .conftest import write_ptd

MODES = ["piped", "columns80", "terminal80"]
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: a name or value cut short (``acti…``); a folded line's ``, … (17 more)`` is not
_CUT = re.compile(r"[\w\])]…")


def nothing_cut(lines: list[str]) -> bool:
    return not any(_CUT.search(ln) for ln in lines)


@pytest.fixture(params=MODES)
def narrow(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """stdout piped with no COLUMNS (a CI log), COLUMNS=80, or a forced 80-column terminal."""
    mode = request.param
    if mode == "piped":
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", "80")
    if mode == "terminal80":
        monkeypatch.setenv("FORCE_COLOR", "1")
        assert Console().is_terminal  # Rich takes stdout for a terminal
    return str(mode)


def text(run: Any) -> list[str]:
    return [_ANSI.sub("", ln) for ln in run.stdout.splitlines()]


def line_of(lines: list[str], key: str) -> str:
    """The one line that starts with ``key`` (a whole key: two spaces after it)."""
    found = [ln for ln in lines if ln.startswith(key + "  ")]
    assert len(found) == 1, (key, lines)
    return found[0]


def _dims(values: list[int] | None) -> str:
    return "-" if values is None else "[" + ", ".join(map(str, values)) + "]"


def assert_inspect_lines(lines: list[str], doc: dict[str, Any]) -> None:
    """Every entry of ``ptd inspect --json`` on its own line, with shape, chunks and codec."""
    assert nothing_cut(lines), lines
    for e in doc["entries"]:
        if e["kind"] == "group":
            line = line_of(lines, e["key"] + "/")
            assert f"  group  batch {e['batch_size']}" in line
            continue
        line = line_of(lines, e["key"])
        shape = ", ".join(map(str, e["shape"]))
        assert re.search(r"  shape=\[([0-9, ¦]*)\]", line), line
        assert re.search(r"shape=\[(.*?)\]", line).group(1).replace(" ¦", ",").rstrip(",") == shape
        assert f"  chunks={_dims(e['chunks'])}" in line
        assert f"  codec={e['compression'] or '-'}" in line
        if e["kind"] == "tensor":
            assert f"  {e['dtype']}  " in line
            assert "  size=" in line
            assert "  stored=" in line


def test_inspect_lists_every_key_and_field(ptd_cli, ptd_store: Path, narrow: str):
    doc = ptd_cli("inspect", ptd_store, "--json").json
    run = ptd_cli("inspect", ptd_store)
    assert run.code == 0, run
    assert_inspect_lines(text(run), doc)
    assert not any(ln.startswith("key ") for ln in text(run))  # no table header


def test_inspect_stats_lines(ptd_cli, ptd_store: Path, narrow: str):
    run = ptd_cli("inspect", ptd_store, "--stats")
    assert run.code == 0, run
    lines = text(run)
    stats = ptd_cli("inspect", ptd_store, "--stats", "--json").json["stats"]
    assert stats
    table = any(ln.split()[:2] == ["leaf", "min"] for ln in lines)
    for key, st in stats.items():
        # the stats fit in 80 columns: a table there, one line per leaf when piped
        rows = [ln for ln in lines if ln.split()[:1] == [key]]
        assert rows, (key, lines)
        if st.get("min") is not None:
            assert any(f"{st['min']:.4g}" in r and f"{st['max']:.4g}" in r for r in rows)
            if not table:
                assert any(r.startswith(f"{key}  min={st['min']:.4g}  max=") for r in rows)
    assert table == (narrow != "piped")


def test_validate_problems_every_key(ptd_cli, ptd_store: Path, narrow: str):
    doc = ptd_cli("validate", ptd_store, "--batch-size", "4", "--json").json
    problems = doc["reports"][0]["problems"]
    run = ptd_cli("validate", ptd_store, "--batch-size", "4", "--expand")
    assert run.code == 1, run
    lines = text(run)
    assert nothing_cut(lines)
    head = [ln for ln in lines if ln.startswith("INVALID ")]
    assert len(head) == 1
    assert str(ptd_store) in head[0]
    table = any(ln.split()[:2] == ["key", "problem"] for ln in lines)
    if narrow == "piped":
        assert not table  # a CI log always gets the line layout
    for p in problems:
        row = [ln for ln in lines if ln.split()[:1] == [p["key"]]]
        assert len(row) == 1, (p, lines)
        if table:
            assert row[0].split()[1] == p["code"], row
            assert f"  {p['shape']}  " in row[0]
            assert f"  {p['expected']}" in row[0]
        else:
            assert f"  {p['code']}  shape={p['shape']}  expected={p['expected']}" in row[0]


def test_convert_dry_run_lists_every_key(ptd_cli, ptd_store: Path, tmp_path: Path, narrow: str):
    dst = tmp_path / "out.other"
    to = "zarr" if ptd_store.suffix == ".h5" else "h5"
    doc = ptd_cli("convert", ptd_store, dst, "--to", to, "--dry-run", "--json").json
    run = ptd_cli("convert", ptd_store, dst, "--to", to, "--dry-run")
    assert run.code == 0, run
    lines = text(run)
    assert nothing_cut(lines)
    assert any(ln == f"{ptd_store} ({ptd_store.suffix[1:]}) -> {dst} ({to})" for ln in lines)
    for p in doc["plan"]:
        if p["kind"] == "group":
            line_of(lines, p["key"] + "/")
            continue
        line = line_of(lines, p["key"])
        assert f"  {p['kind']}  shape=" in line
        if p["kind"] == "tensor":
            assert f"  dtype={p['dtype']}" in line
            assert "  chunks=" in line
            assert " -> " in line
            src_codec, dst_codec = p["src_compression"] or "-", p["dst_compression"] or "-"
            assert f"  codec={src_codec} -> {dst_codec}" in line


def test_convert_and_memmap_summaries_are_whole_lines(
    ptd_cli, ptd_store: Path, tmp_path: Path, narrow: str
):
    to = "zarr" if ptd_store.suffix == ".h5" else "h5"
    dst = tmp_path / f"a-rather-long-destination-name-for-the-converted-store.{to}"
    run = ptd_cli("convert", ptd_store, dst)
    assert run.code == 0, run
    lines = text(run)
    assert f"converted {ptd_store} ({ptd_store.suffix[1:]}) -> {dst} ({to})" in lines
    assert any(re.match(r"  \d+ leaves \(.* on disk; ", ln) for ln in lines), lines
    mm = tmp_path / "a-rather-long-memmap-directory-name-for-this-test.memmap"
    run = ptd_cli("memmap", ptd_store, mm)
    assert run.code == 0, run
    lines = text(run)
    assert f"memmap {ptd_store} -> {mm}" in lines
    assert any(re.match(r"  \d+ tensors?, .* groups?; .* in [\d.]+ s", ln) for ln in lines), lines


def test_diff_lists_every_key(ptd_cli, tmp_path: Path, fmt: str, narrow: str):
    a = write_ptd(tmp_path / f"a.{fmt}", fmt, n=6)
    b = write_ptd(tmp_path / f"b.{fmt}", fmt, n=7)
    doc = ptd_cli("diff", a, b, "--json").json
    run = ptd_cli("diff", a, b)
    assert run.code == 1, run
    lines = text(run)
    keys = {d["key"] or "/" for d in doc["differences"]}
    assert keys
    for key in keys:
        kinds = {d["kind"] for d in doc["differences"] if (d["key"] or "/") == key}
        found = [ln for ln in lines if ln.startswith(key + "  ")]
        assert {ln.split()[1] for ln in found} == kinds, (key, lines)


def test_demo_shows_every_key_and_field(ptd_cli, tmp_path: Path, narrow: str):
    run = ptd_cli("demo", tmp_path / "demo")
    assert run.code == 0, run
    lines = text(run)
    assert nothing_cut(lines), lines
    h5 = ptd.info(str(tmp_path / "demo" / "demo.h5"))
    first_inspect = lines[: next(i for i, ln in enumerate(lines) if ln.startswith("total: "))]
    assert_inspect_lines(first_inspect, h5.to_dict())


# ------------------------------------------------------------------ layout choice and forcing
def test_table_when_it_fits(ptd_cli, ptd_store: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("COLUMNS", "250")
    lines = text(ptd_cli("inspect", ptd_store))
    assert lines[1].split()[:3] == ["key", "type", "shape"]


def test_ptd_table_forces_a_layout(ptd_cli, ptd_store: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setenv("PTD_TABLE", "lines")
    doc = ptd_cli("inspect", ptd_store, "--json").json
    assert_inspect_lines(text(ptd_cli("inspect", ptd_store)), doc)
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("PTD_TABLE", "table")
    lines = text(ptd_cli("inspect", ptd_store))
    assert lines[1].split()[:3] == ["key", "type", "shape"]
    assert nothing_cut(lines)
    # a forced table is drawn at its own width: each row whole, wider than the 80 columns
    assert max(len(ln) for ln in lines[1:-1]) > 80
    row = next(ln for ln in lines if ln.split()[1:2] == ["pix"])
    assert "uint8" in row
    assert "[6 ¦ 2, 2]" in row


def _long_key_store(path: Path, backend: str) -> tuple[Path, str]:
    long = "k" * 200
    data = {
        long: np.zeros((6, 3), np.float32),
        "a": np.zeros((6, 2), np.int16),
        "b": np.zeros(6, np.float64),
    }
    if backend == "h5":
        import h5py

        with h5py.File(path, "w") as f:
            for k, v in data.items():
                f.create_dataset(k, data=v, chunks=(2,) + v.shape[1:], compression="gzip")
    else:
        import zarr

        g = zarr.open_group(str(path), mode="w")
        for k, v in data.items():
            g.create_array(k, shape=v.shape, dtype=v.dtype, chunks=(2,) + v.shape[1:])[...] = v
    return path, long


@pytest.mark.parametrize("terminal", [False, True])
def test_a_200_char_key_at_220_columns(
    ptd_cli, tmp_path: Path, fmt: str, terminal: bool, monkeypatch: pytest.MonkeyPatch
):
    store, long = _long_key_store(tmp_path / f"long.{fmt}", fmt)
    monkeypatch.setenv("COLUMNS", "220")
    if terminal:
        monkeypatch.setenv("FORCE_COLOR", "1")
    doc = ptd_cli("inspect", store, "--json").json
    run = ptd_cli("inspect", store)
    assert run.code == 0, run
    lines = text(run)
    assert_inspect_lines(lines, doc)
    assert line_of(lines, "a").split()[1] == "int16"
    assert long in line_of(lines, long)
    run = ptd_cli("convert", store, tmp_path / "x.other", "--to", "zarr", "--dry-run")
    assert run.code == 0, run
    assert nothing_cut(text(run)), run
    assert "  dtype=float32  " in line_of(text(run), long)


# ------------------------------------------------------------------ episode files: folded
N_DEMOS = 20


def write_episodes(path: Path, backend: str, odd_demo: int | None = None) -> Path:
    """``data/demo_i/{actions, rewards, obs/eef_pos}`` of 200 + i rows, made with plain h5py /
    zarr-python; ``actions`` in small chunks (lint L002 in every demo); ``odd_demo`` gets
    float64 rewards."""
    arrays = []
    for i in range(N_DEMOS):
        n = 200 + i
        arrays += [
            (f"data/demo_{i}/actions", np.zeros((n, 100), np.float32), (8, 100)),
            (
                f"data/demo_{i}/rewards",
                np.zeros(n, np.float64 if i == odd_demo else np.float32),
                None,
            ),
            (f"data/demo_{i}/obs/eef_pos", np.zeros((n, 3), np.float64), None),
        ]
    if backend == "h5":
        import h5py

        with h5py.File(path, "w") as f:
            for key, a, chunks in arrays:
                f.create_dataset(key, data=a, chunks=chunks)
    else:
        import zarr

        g = zarr.open_group(str(path), mode="w")
        for key, a, chunks in arrays:
            g.create_array(key, shape=a.shape, dtype=a.dtype, chunks=chunks or a.shape)[...] = a
    return path


def test_alike_demos_are_listed_once(ptd_cli, tmp_path: Path, fmt: str, narrow: str):
    store = write_episodes(tmp_path / f"ep.{fmt}", fmt)
    lines = text(ptd_cli("inspect", store))
    head = line_of(lines, "data/demo_{0..19}/ ×20")
    assert "  group  length 200–219 " in head
    line = line_of(lines, "data/demo_{0..19}/actions")
    assert "  float32  " in line
    assert "shape=[200–219" in line
    assert "chunks=[8, 100]" in line
    assert not any(re.match(r"data/demo_\d+", ln) for ln in lines)
    expanded = text(ptd_cli("inspect", store, "--expand"))
    for i in range(N_DEMOS):
        line_of(expanded, f"data/demo_{i}/")
        assert "shape=[" + str(200 + i) in line_of(expanded, f"data/demo_{i}/actions")
    # JSON lists every node whatever the text folds
    doc = ptd_cli("inspect", store, "--json").json
    assert len(doc["entries"]) == 1 + N_DEMOS * 5


def test_a_demo_that_differs_is_shown_apart(ptd_cli, tmp_path: Path, fmt: str):
    store = write_episodes(tmp_path / f"ep.{fmt}", fmt, odd_demo=7)
    lines = text(ptd_cli("inspect", store))
    assert lines[1].startswith("key ")  # the table fits at 250 columns
    joined = "\n".join(lines)
    assert "demo_{0..6,8..19}/ ×19" in joined
    assert re.search(r"demo_7/ +group", joined)
    assert re.search(r"rewards +float64", joined)
    assert re.search(r"rewards +float32", joined)


def test_lint_findings_are_grouped_by_code(ptd_cli, tmp_path: Path, fmt: str, narrow: str):
    store = write_episodes(tmp_path / f"ep.{fmt}", fmt)
    keys = {f"data/demo_{i}/actions" for i in range(N_DEMOS)}
    doc = ptd_cli("validate", store, "--json").json
    assert {f["key"] for f in doc["reports"][0]["lint"] if f["code"] == "L002"} == keys
    lines = text(ptd_cli("validate", store))
    grouped = [ln for ln in lines if "L002" in ln]
    assert len(grouped) == 1, lines
    m = re.fullmatch(
        r"  L002 small-chunks \(warning\) ×20: (\S+), (\S+), (\S+), … \(17 more\)", grouped[0]
    )
    assert m is not None, grouped
    assert set(m.groups()) <= keys
    i = lines.index(grouped[0])
    assert lines[i + 1].startswith("    first: ")
    assert lines[i + 2].startswith("    fix: ")
    expanded = text(ptd_cli("validate", store, "--expand"))
    listed = [ln for ln in expanded if ln.startswith("  L002 small-chunks (warning) ")]
    assert {re.search(r"'(.*?)'", ln).group(1) for ln in listed} == keys


def test_repeated_problems_are_grouped(ptd_cli, tmp_path: Path, fmt: str, narrow: str):
    store = write_episodes(tmp_path / f"ep.{fmt}", fmt)
    run = ptd_cli("validate", store, "--batch-size", "5", "--no-lint")
    assert run.code == 1, run
    doc = ptd_cli("validate", store, "--batch-size", "5", "--no-lint", "--json").json
    problems = doc["reports"][0]["problems"]
    lines = text(run)
    # each problem is shown once: whole on its own line, or among the keys of a folded line
    folded = [ln for ln in lines if " ×" in ln and ": " in ln]
    assert folded, lines
    for ln in folded:
        count = int(re.search(r" ×(\d+): ", ln).group(1))
        shown = re.search(r": (.*?)(?:, … \((\d+) more\))?  ", ln)
        assert shown is not None, ln
        assert len(shown.group(1).split(", ")) + int(shown.group(2) or 0) == count
    expanded = text(ptd_cli("validate", store, "--batch-size", "5", "--no-lint", "--expand"))
    for p in problems:
        assert p["code"] in line_of(expanded, p["key"])
