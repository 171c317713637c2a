"""What a person reads is right (issue 37, part 6): counts that match what is listed, diffs that
show the difference, HDF5 types in HDF5's words. Fixtures are written with plain h5py / zarr."""

from __future__ import annotations

import json
import re
from pathlib import Path

import h5py
import numpy as np
import pytest

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


# ------------------------------------------------------------------------------ inspect --depth
#: sibling groups of an AnnData-like layout: X holds a CSR matrix, the others differ or are empty
_SIBLINGS = {
    "X": {"data": np.arange(6, dtype="f4"), "indices": np.arange(6, dtype="i4"),
          "indptr": np.arange(4, dtype="i4")},
    "layers": {},
    "obsp": {},
    "varp": {},
    "obsm": {"pca": np.zeros((3, 2))},
    "varm": {"load": np.zeros((2, 2))},
    "uns": {"n": np.arange(1)},
}  # fmt: skip


def _write_siblings(path: Path, backend: str) -> Path:
    """The groups of :data:`_SIBLINGS`, written with plain h5py / zarr."""
    if backend == "h5":
        with h5py.File(path, "w") as f:
            for g, arrays in _SIBLINGS.items():
                grp = f.create_group(g)
                for k, v in arrays.items():
                    grp[k] = v
        return path
    import zarr

    root = zarr.open_group(str(path), mode="w", zarr_format=3)
    for g, arrays in _SIBLINGS.items():
        grp = root.create_group(g)
        for k, v in arrays.items():
            grp.create_array(k, data=v)
    return path


def _rows(stdout: str) -> list[str]:
    """The key of each row of a listing, tree glyphs left out (``X/``, ``{a,b}/``)."""
    keys = []
    for line in stdout.splitlines()[1:]:
        words = [w for w in line.split() if w.strip("├└│─")]
        if words and words[0] not in ("key", "total:"):
            keys.append(words[0])
    return keys


@pytest.mark.parametrize("backend", ["h5", "zarr"])
def test_depth_folds_only_groups_whose_trees_are_the_same(
    tmp_path: Path, backend: str, ptd_cli
) -> None:
    src = _write_siblings(tmp_path / f"s.{backend}", backend)
    run = ptd_cli("inspect", src, "--depth", "1")
    assert run.code == 0, run
    rows = _rows(run.stdout)
    # the three empty groups are alike and folded (every name shown); nothing else is
    assert "{layers,obsp,varp}/" in rows, rows
    for name in ("X", "obsm", "varm", "uns"):
        assert f"{name}/" in rows, (name, rows)
    # the same rows as the full listing's top level
    full = [r for r in _rows(ptd_cli("inspect", src).stdout) if r.endswith("/")]
    assert rows == full, (rows, full)


def test_depth_json_has_no_signature(tmp_path: Path, ptd_cli) -> None:
    src = _write_siblings(tmp_path / "s.h5", "h5")
    run = ptd_cli("inspect", src, "--depth", "1", "--json")
    assert run.code == 0, run
    assert all("subtree" not in e for e in run.json["entries"]), run.json["entries"]


def test_anndata_depth_one_hides_nothing(tmp_path: Path, ptd_cli) -> None:
    ad = pytest.importorskip("anndata", reason="anndata writes the h5ad file (ecosystem extra)")
    pd = pytest.importorskip("pandas", reason="anndata needs pandas")
    sparse = pytest.importorskip("scipy.sparse", reason="anndata needs scipy")
    a = ad.AnnData(
        sparse.random(5, 4, density=0.5, format="csr", dtype=np.float32, random_state=0),
        obs=pd.DataFrame(
            {"cell_type": pd.Categorical(list("abacb"))}, index=[f"c{i}" for i in range(5)]
        ),
        var=pd.DataFrame(index=[f"g{i}" for i in range(4)]),
    )
    a.uns["note"] = "hi"
    a.obsm["pca"] = np.zeros((5, 2))
    a.varm["load"] = np.zeros((4, 2))
    a.write_h5ad(tmp_path / "a.h5ad")
    run = ptd_cli("inspect", tmp_path / "a.h5ad", "--depth", "1")
    assert run.code == 0, run
    shown = " ".join(_rows(run.stdout))
    for name in ("X", "layers", "obs", "obsm", "obsp", "uns", "var", "varm", "varp"):
        assert re.search(rf"(^|[{{,\s]){name}([,}}/]|$)", shown), (name, run.stdout)
    assert not re.search(r"[{,]X[,}]", shown), run.stdout  # X holds a matrix: never folded


# ------------------------------------------------------------------------------ diff
_LONG = "a long description of the variable that goes on and on " * 3


def _write_described(path: Path, backend: str, last: str) -> Path:
    """One array whose long attribute and long string value end in ``last``."""
    if backend == "h5":
        with h5py.File(path, "w") as f:
            f["v"] = np.arange(5.0)
            f["v"].attrs["description"] = _LONG + last
            f["v"].attrs["units"] = "m"
        return path
    import zarr

    root = zarr.open_group(str(path), mode="w", zarr_format=3)
    arr = root.create_array("v", data=np.arange(5.0))
    arr.attrs.update({"description": _LONG + last, "units": "m"})
    return path


@pytest.mark.parametrize("backend", ["h5", "zarr"])
@pytest.mark.parametrize("columns", ["80", "200"])
def test_diff_shows_where_long_attributes_differ(
    tmp_path: Path, backend: str, columns: str, ptd_cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.setenv("PTD_TABLE", "lines")
    a = _write_described(tmp_path / f"a.{backend}", backend, "x")
    b = _write_described(tmp_path / f"b.{backend}", backend, "y")
    run = ptd_cli("diff", a, b)
    assert run.code == 1, run
    line = next(ln for ln in run.stdout.splitlines() if "attrs_differ" in ln)
    shown_a = line.split("  a=", 1)[1].split("  b=", 1)[0]
    shown_b = line.split("  b=", 1)[1]
    assert shown_a != shown_b, line
    assert "x'" in shown_a, line
    assert "y'" in shown_b, line
    assert "units" not in line, line  # the attribute both sides share is left out


def test_excerpts_of_different_texts_never_look_alike() -> None:
    from ptd.report.excerpt import excerpts

    rng = np.random.default_rng(0)
    for _ in range(2000):
        n = int(rng.integers(0, 300))
        a = "".join(rng.choice(list("ab"), n))
        b = list(a)
        if b and rng.random() < 0.7:
            b[int(rng.integers(0, len(b)))] = "c"
        else:
            b.append("z")
        width = int(rng.integers(1, 120))
        ea, eb = excerpts(a, "".join(b), width)
        assert ea != eb, (a, "".join(b), width)
        assert len(ea) <= max(width, 8) + 2, ea


# ------------------------------------------------------------------------------ memmap shapes
def _write_short_strings(path: Path, backend: str) -> Path:
    """A group of length 3 holding string arrays of 1 and 2 elements (an h5ad's one-category
    ``categories``, NWB's ``experimenter``): they do not fit the group's batch size."""
    one, two = np.array(["alice"], dtype=object), np.array(["a", "b"], dtype=object)
    if backend == "h5":
        with h5py.File(path, "w") as f:
            g = f.create_group("g")
            g["codes"] = np.arange(3, dtype="i1")
            g["more"] = np.arange(3.0)
            g.create_dataset("one", data=one, dtype=h5py.string_dtype())
            g.create_dataset("two", data=two, dtype=h5py.string_dtype())
        return path
    import zarr

    root = zarr.open_group(str(path), mode="w", zarr_format=3)
    g = root.create_group("g")
    g.create_array("codes", data=np.arange(3, dtype="i1"))
    g.create_array("more", data=np.arange(3.0))
    for name, values in (("one", one), ("two", two)):
        arr = g.create_array(name, shape=values.shape, dtype=str)
        arr[:] = values.astype(str)
    return path


@pytest.mark.parametrize("backend", ["h5", "zarr"])
def test_memmap_keeps_the_shape_of_short_string_arrays(
    tmp_path: Path, backend: str, ptd_cli
) -> None:
    src = _write_short_strings(tmp_path / f"s.{backend}", backend)
    out = tmp_path / "s.mm"
    run = ptd_cli("memmap", src, out)
    assert run.code == 0, run
    shapes = {}
    for where in (src, out):
        listed = ptd_cli("inspect", where, "--json")
        assert listed.code == 0, listed
        shapes[where] = {e["key"]: e["shape"] for e in listed.json["entries"]}
    assert shapes[src]["g/one"] == [1], shapes[src]
    for key in ("g/one", "g/two"):
        assert shapes[out][key] == shapes[src][key], (key, shapes)
    same = ptd_cli("diff", src, out)
    assert same.code == 0, same
    import ptd

    td = ptd.memmap.load_memmap(out)
    assert td["g", "one"] == ["alice"]


# ------------------------------------------------------------------------------ progress bars
def _bar_lines(lines: list[str]) -> list[str]:
    """Lines of the screen that are (parts of) a Rich progress bar."""
    return [ln for ln in lines if "━" in ln or re.search(r"\b\d+%", ln)]


def _progress_store(path: Path) -> Path:
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=np.arange(200_000.0), chunks=(10_000,), compression="gzip")
        f["y"] = np.arange(200_000, dtype="i4")
    return path


@pytest.mark.parametrize(
    "command",
    [
        ["validate", "--data", "{src}"],
        ["validate", "--data", "{src}", "{src}"],
        ["inspect", "--stats", "{src}"],
        ["diff", "{src}", "{src}"],
        ["convert", "{src}", "{tmp}/c.zarr", "--verify"],
        ["memmap", "{src}", "{tmp}/m.mm"],
    ],
    ids=lambda c: "-".join(w for w in c if not w.startswith("{")),
)
def test_progress_bars_leave_nothing_on_the_terminal(tmp_path: Path, command: list[str]) -> None:
    from .terminal import run_in_terminal

    src = _progress_store(tmp_path / "p.h5")
    args = [w.format(src=src, tmp=tmp_path) for w in command]
    code, lines = run_in_terminal(args, tmp_path)
    assert code == 0, lines
    assert not _bar_lines(lines), "\n".join(lines)
    assert any(ln.strip() for ln in lines), lines  # the report itself is there
