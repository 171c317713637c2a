"""``ptd diff`` / ``ptd.diff``: each kind of difference across h5/zarr and chunk layouts, none
after ``ptd convert`` (and ``convert --verify``), tolerances, exit statuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import ptd

from .conftest import assert_one_line_error

N = 40


def base_data() -> dict[str, Any]:
    g = torch.Generator().manual_seed(3)
    return {
        "obs": torch.randn(N, 3, generator=g),
        "act": torch.arange(N),
        "bf": torch.randn(N, generator=g).to(torch.bfloat16),
        "nested": {"x": torch.randn(N, 2, generator=g)},
        "tag": "run-1",
    }


def write(path: Path, data: dict[str, Any], **kw: Any) -> Path:
    backend = "zarr" if path.suffix == ".zarr" else "h5"
    ptd.PersistentTensorDict.from_dict(data, path, batch_size=[N], backend=backend, **kw).close()
    return path


@pytest.fixture(params=[("h5", "zarr"), ("zarr", "h5"), ("h5", "h5")], ids=lambda p: "-".join(p))
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, Path]:
    fa, fb = request.param
    return tmp_path / f"a.{fa}", tmp_path / f"b.{fb}"


def kinds(rep: Any) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for d in rep.differences:
        out.setdefault(d.kind, []).append(d)
    return out


def test_same_content_other_format_and_layout(ptd_cli, pair: tuple[Path, Path]) -> None:
    a, b = pair
    write(a, base_data())
    write(b, base_data())
    rep = ptd.diff(a, b)
    assert rep.same, rep.differences
    assert rep.leaves_compared == 4
    assert rep.nbytes_compared > 0
    run = ptd_cli("diff", a, b)
    assert run.code == 0, run
    assert "same" in run.stdout, run


def test_none_after_convert_rechunked_and_compressed(ptd_cli, tmp_path: Path) -> None:
    a = write(tmp_path / "a.h5", base_data())
    z = tmp_path / "b.zarr"
    run = ptd_cli("convert", a, z, "--chunks", "7", "--compression", "zstd", "--verify")
    assert run.code == 0, run
    assert "verified" in run.stdout, run
    back = tmp_path / "c.h5"
    assert ptd_cli("convert", z, back, "--chunks", "16", "--compression", "gzip").code == 0
    for x, y in ((a, z), (a, back), (z, back)):
        assert ptd_cli("diff", x, y, "--json").json["same"] is True
    doc = ptd_cli("convert", a, tmp_path / "d.zarr", "--verify", "--json").json
    assert doc["verify"]["same"] is True


def test_each_structure_difference(ptd_cli, pair: tuple[Path, Path]) -> None:
    a, b = pair
    write(a, base_data())
    other = base_data()
    del other["act"]  # only in A
    other["extra"] = torch.zeros(N)  # only in B
    other["obs"] = torch.zeros(N, 4)  # shape
    other["bf"] = other["bf"].float()  # dtype
    other["nested"] = torch.zeros(N)  # kind: group in A, tensor in B
    other["tag"] = "run-2"  # non-tensor value
    write(b, other)
    rep = ptd.diff(a, b)
    found = kinds(rep)
    assert [d.key for d in found["only_in_a"]] == ["act"]
    assert [d.key for d in found["only_in_b"]] == ["extra"]
    assert found["shape_differs"][0].key == "obs"
    assert (found["dtype_differs"][0].a, found["dtype_differs"][0].b) == ("bfloat16", "float32")
    assert found["kind_differs"][0].key == "nested"
    assert found["non_tensor_differs"][0].key == "tag"
    assert not rep.same
    run = ptd_cli("diff", a, b, "--json")
    assert run.code == 1
    assert run.json["same"] is False
    assert {d["kind"] for d in run.json["differences"]} >= {
        "only_in_a",
        "only_in_b",
        "shape_differs",
        "dtype_differs",
        "kind_differs",
        "non_tensor_differs",
    }


def test_batch_size_and_attrs(tmp_path: Path) -> None:
    a = write(tmp_path / "a.h5", {"x": torch.zeros(N, 2)})
    b = tmp_path / "b.zarr"
    p = ptd.PersistentTensorDict.from_dict(
        {"x": torch.zeros(N, 2)}, b, batch_size=[N, 2], backend="zarr"
    )
    p.close()
    found = kinds(ptd.diff(a, b))
    assert found["batch_size_differs"][0].a == [N]
    assert found["batch_size_differs"][0].b == [N, 2]
    c = write(tmp_path / "c.zarr", {"x": torch.zeros(N, 2)})
    import zarr

    zarr.open_array(c / "x", mode="r+").attrs["units"] = "m"
    found = kinds(ptd.diff(a, c))
    assert found["attrs_differ"][0].key == "x"
    assert found["attrs_differ"][0].b == {"units": "m"}


def test_values_first_rows_and_tolerances(ptd_cli, pair: tuple[Path, Path]) -> None:
    a, b = pair
    data = base_data()
    write(a, data)
    other = base_data()
    other["obs"] = data["obs"].clone()
    other["obs"][[5, 17, 30]] += torch.tensor([1e-3, 0.5, 2.0]).unsqueeze(1)
    other["act"] = data["act"].clone()
    other["act"][39] = -1
    write(b, other)
    rep = ptd.diff(a, b)
    found = kinds(rep)
    obs = next(d for d in found["values_differ"] if d.key == "obs")
    assert obs.count == 9
    assert obs.first_rows == [5, 17, 30]
    act = next(d for d in found["values_differ"] if d.key == "act")
    assert act.count == 1
    assert act.first_rows == [39]
    # tolerances
    tol = kinds(ptd.diff(a, b, atol=0.01))
    obs = next(d for d in tol["values_differ"] if d.key == "obs")
    assert obs.first_rows == [17, 30]
    run = ptd_cli("diff", a, b, "--atol", "3")
    assert run.code == 1, run
    assert "act" in run.stdout, run
    assert "obs" not in run.stdout, run
    run = ptd_cli("diff", a, b, "--json")
    entry = next(d for d in run.json["differences"] if d["key"] == "obs")
    assert entry["count"] == 9
    assert entry["first_rows"] == [5, 17, 30]
    # structure only: no data read
    meta = ptd_cli("diff", a, b, "--metadata-only", "--json")
    assert meta.code == 0
    assert meta.json["same"]
    assert meta.json["leaves_compared"] == 0


def test_nan_and_equal_nan(tmp_path: Path) -> None:
    x = torch.arange(N, dtype=torch.float32)
    x[3] = float("nan")
    a = write(tmp_path / "a.h5", {"x": x})
    b = write(tmp_path / "b.zarr", {"x": x.clone()})
    assert kinds(ptd.diff(a, b))["values_differ"][0].first_rows == [3]
    assert ptd.diff(a, b, equal_nan=True).same
    assert ptd.diff(a, b, equal_nan=True, rtol=1e-6).same


def test_bfloat16_compares_as_numbers(tmp_path: Path) -> None:
    x = torch.linspace(0, 1, N).to(torch.bfloat16)
    a = write(tmp_path / "a.h5", {"x": x})
    y = x.clone()
    y[7] = y[7] + 0.25
    b = write(tmp_path / "b.zarr", {"x": y})
    d = kinds(ptd.diff(a, b))["values_differ"][0]
    assert d.first_rows == [7]
    assert ptd.diff(a, b, atol=0.3).same


def test_slabs_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Many slabs: the comparison is streamed and still finds the one row."""
    from ptd.report import diff as diff_mod

    monkeypatch.setattr(diff_mod, "SLAB_BYTES", 256)
    x = np.arange(4000, dtype="f4").reshape(1000, 4)
    a = tmp_path / "a.h5"
    ptd.PersistentTensorDict.from_dict({"x": torch.from_numpy(x)}, a, batch_size=[1000]).close()
    y = x.copy()
    y[999, 3] = -1
    b = tmp_path / "b.zarr"
    ptd.PersistentTensorDict.from_dict(
        {"x": torch.from_numpy(y)}, b, batch_size=[1000], backend="zarr", chunks=(64, 4)
    ).close()
    rep = ptd.diff(a, b)
    assert kinds(rep)["values_differ"][0].first_rows == [999]


def test_errors_exit_2(ptd_cli, tmp_path: Path) -> None:
    a = write(tmp_path / "a.h5", {"x": torch.zeros(N)})
    run = ptd_cli("diff", a, tmp_path / "missing.zarr")
    assert_one_line_error(run, "missing.zarr")
    bad = tmp_path / "bad.h5"
    bad.write_bytes(b"not a store")
    assert_one_line_error(ptd_cli("diff", a, bad), "bad.h5")
    assert ptd_cli("diff", a, a).code == 0  # a store is the same as itself
    assert ptd_cli("diff", a, a, "--rtol", "-1").code == 2


# ------------------------------------------------ what a person needs to act on a difference
def _plain(path: Path, fmt: str, arrays: dict[str, np.ndarray]) -> Path:
    """A store written with plain h5py / zarr-python."""
    if fmt == "h5":
        import h5py

        with h5py.File(path, "w") as f:
            for k, v in arrays.items():
                f[k] = v
    else:
        import zarr

        root = zarr.open_group(path, mode="w", zarr_format=3)
        for k, v in arrays.items():
            root.create_array(k, data=v)
    return path


@pytest.mark.parametrize(("fa", "fb"), [("h5", "zarr"), ("zarr", "zarr"), ("h5", "h5")])
def test_value_differences_show_where_both_values_and_how_far(
    ptd_cli: Any, tmp_path: Path, fa: str, fb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    x = np.arange(40.0).reshape(10, 4)
    y = x.copy()
    y[3, 1], y[7, 0] = 99.0, -1.0
    i, j = np.arange(10), np.arange(10)
    j[2] = 7
    b1, b2 = np.zeros(10, bool), np.zeros(10, bool)
    b2[5] = True
    a = _plain(tmp_path / f"a.{fa}", fa, {"x": x, "i": i, "flag": b1})
    b = _plain(tmp_path / f"b.{fb}", fb, {"x": y, "i": j, "flag": b2})
    report = ptd.diff(a, b)
    got = {d.key: d for d in report.differences}
    assert set(got) == {"x", "i", "flag"}
    dx = got["x"]
    assert (dx.count, dx.total, dx.first_rows) == (2, 40, [3, 7])
    assert dx.first == [
        {"index": [3, 1], "a": 13.0, "b": 99.0},
        {"index": [7, 0], "a": 28.0, "b": -1.0},
    ]
    # as numpy.testing.assert_allclose reports them
    with pytest.raises(AssertionError) as info:
        np.testing.assert_allclose(x, y, rtol=0)
    assert "Max absolute difference among violations: 86" in str(info.value)
    assert "Max relative difference among violations: 29" in str(info.value)
    assert (dx.max_abs_diff, dx.max_rel_diff) == (86.0, 29.0)
    assert (got["i"].max_abs_diff, got["i"].first) == (5.0, [{"index": [2], "a": 2, "b": 7}])
    assert got["flag"].max_abs_diff is None
    assert got["flag"].first == [{"index": [5], "a": False, "b": True}]
    monkeypatch.setenv("COLUMNS", "80")  # one line per difference
    run = ptd_cli("diff", a, b)
    assert run.code == 1
    line = next(ln for ln in run.stdout.splitlines() if ln.startswith("x "))
    assert "2 of 40 at [3, 1], [7, 0]; max |a-b| 86, max rel 29" in line
    assert "a=13, 28" in line
    assert "b=99, -1" in line
