"""The streamed statistics and block planning of ``ptd.report.datacheck`` against numpy, on
both backends (chunk sizes chosen so that many blocks are merged)."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from ptd.report.datacheck import check_data, plan_blocks
from ptd.storage.registry import get_backend


@pytest.mark.parametrize(
    ("shape", "chunks", "itemsize", "limit"),
    [
        ((10,), (3,), 4, 8),
        ((7, 5), (2, 2), 1, 4),
        ((7, 5), (2, 5), 8, 1000),
        ((3, 4, 5), (2, 3, 2), 2, 24),
        ((), (), 4, 8),
    ],
)
def test_blocks_cover_every_element_once_in_whole_chunks(shape, chunks, itemsize, limit) -> None:
    seen = np.zeros(shape, dtype=int)
    for region in plan_blocks(shape, chunks, itemsize, limit):
        seen[region] += 1
        for r, c, n in zip(region, chunks, shape, strict=True):
            assert r.start % c == 0
            assert r.stop % c == 0 or r.stop == n
        size = itemsize * int(np.prod([r.stop - r.start for r in region]))
        assert size <= max(limit, itemsize * int(np.prod(chunks)))
    assert (seen == 1).all()


CASES = {
    "f4": np.random.default_rng(0).standard_normal((500, 3)).astype("f4"),
    "f4_offset": (1e4 + np.random.default_rng(1).standard_normal(1500)).astype("f4"),
    "f8": np.random.default_rng(2).standard_normal(999) * 1e3,
    "f2": np.random.default_rng(3).standard_normal(300).astype("f2"),
    "i8": np.random.default_rng(4).integers(-50, 50, 777),
    "u1": np.random.default_rng(5).integers(0, 255, (100, 4)).astype("u1"),
    "bool": np.random.default_rng(6).random(333) < 0.3,
}


@pytest.mark.parametrize("backend", ["h5", "zarr"])
def test_stats_match_numpy(tmp_path: Path, backend: str) -> None:
    be = get_backend(backend).open(str(tmp_path / f"s.{backend}"), "w")
    for name, x in CASES.items():
        be.create_array((name,), shape=x.shape, dtype=x.dtype, data=x, chunks=(37,) + x.shape[1:])
    res = check_data(be, [(n,) for n in CASES], block_bytes=256, workers=3)
    be.close()
    assert not res.faults
    assert not res.missing
    for name, x in CASES.items():
        st = res.stats[name]
        ref = x.astype(np.float64)
        assert st.count == x.size
        assert st.nan == 0
        assert st.min == pytest.approx(ref.min())
        assert st.max == pytest.approx(ref.max())
        assert st.mean == pytest.approx(ref.mean(), rel=1e-6, abs=1e-6)
        assert st.std == pytest.approx(ref.std(), rel=1e-4), name


def test_nan_inf_left_out_and_histogram(tmp_path: Path) -> None:
    x = np.arange(100, dtype="f4")
    x[[1, 50]] = np.nan
    x[7] = -np.inf
    be = get_backend("h5").open(str(tmp_path / "n.h5"), "w")
    be.create_array(("x",), shape=x.shape, dtype=x.dtype, data=x, chunks=(10,))
    res = check_data(be, [("x",)], histogram_bins=4, block_bytes=40)
    be.close()
    st = res.stats["x"]
    finite = x[np.isfinite(x)].astype(np.float64)
    assert (st.nan, st.inf, st.count) == (2, 1, 100)
    assert st.mean == pytest.approx(finite.mean())
    assert st.std == pytest.approx(finite.std())
    assert st.histogram is not None
    assert sum(st.histogram) == 97
    assert len(st.histogram) == 4


def test_bfloat16_stats(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    import ptd

    t = torch.linspace(-2, 2, 64).to(torch.bfloat16)
    p = ptd.PersistentTensorDict.from_dict({"b": t}, tmp_path / "b.h5", batch_size=[64])
    p.close()
    rep = ptd.validate(tmp_path / "b.h5", data=True)
    st = rep.stats["b"]
    ref = t.float()
    assert st["min"] == -2.0
    assert st["max"] == 2.0
    assert st["mean"] == pytest.approx(float(ref.mean()), abs=1e-6)
    assert st["std"] == pytest.approx(float(ref.std(unbiased=False)), rel=1e-5)
    assert list(itertools.islice(iter(rep.stats), 1)) == ["b"]


def test_sharded_zarr_counts_shards(tmp_path: Path) -> None:
    import os
    import warnings

    import zarr

    warnings.simplefilter("ignore")
    g = zarr.open_group(tmp_path / "s.zarr", mode="w")
    a = g.create_array("a", shape=(64,), chunks=(8,), shards=(32,), dtype="f4")
    a[:] = np.arange(64, dtype="f4") + 1
    be = get_backend("zarr").open(str(tmp_path / "s.zarr"), "r")
    res = check_data(be, [("a",)])
    assert not res.missing
    assert res.stats["a"].chunks == 2
    assert res.stats["a"].max == 64
    be.close()
    os.remove(tmp_path / "s.zarr" / "a" / "c" / "1")
    be = get_backend("zarr").open(str(tmp_path / "s.zarr"), "r")
    res = check_data(be, [("a",)])
    be.close()
    assert res.missing["a"][:2] == (1, 2)
    assert res.missing["a"][2] == [[1]]


@pytest.mark.parametrize("backend", ["h5", "zarr"])
def test_integer_and_bool_leaves_get_counts_per_value(tmp_path: Path, backend: str) -> None:
    rng = np.random.default_rng(3)
    leaves = {
        "action": rng.integers(-2, 3, 1000).astype("i1"),  # 5 values, negative ones too
        "done": rng.random(1000) > 0.8,
        "step": np.arange(1000, dtype="i8"),  # many values: a histogram instead
        "label": np.concatenate([np.full(500, 7), np.full(500, 70_000)]).astype("u4"),
    }
    be = get_backend(backend).open(str(tmp_path / f"c.{backend}"), "w")
    for name, x in leaves.items():
        be.create_array((name,), shape=x.shape, dtype=x.dtype, data=x, chunks=(64,))
    res = check_data(be, [(n,) for n in leaves], histogram_bins=8, block_bytes=200, workers=3)
    be.close()
    for name in ("action", "done"):
        values, counts = np.unique(leaves[name], return_counts=True)
        assert res.stats[name].values == [
            [v.item(), int(c)] for v, c in zip(values, counts, strict=True)
        ]
    assert [type(v) for v, _ in res.stats["done"].values or []] == [bool, bool]
    step = res.stats["step"]
    assert step.values is None
    assert step.histogram is not None
    assert len(step.histogram) == 8
    # two values far apart: blocks of one value count, the merged counts stay exact
    assert res.stats["label"].values == [[7, 500], [70_000, 500]]
    assert res.stats["action"].channels is None


@pytest.mark.parametrize("backend", ["h5", "zarr"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_image_like_uint8_leaves_get_a_summary_per_channel(
    tmp_path: Path, backend: str, layout: str
) -> None:
    rng = np.random.default_rng(4)
    x = rng.integers(0, 256, (40, 3, 16, 16), dtype=np.uint8)
    x[:, 0] //= 2  # the channels differ
    x[:, 2] = 255 - x[:, 2] // 4
    axis = 1
    if layout == "NHWC":
        x, axis = np.ascontiguousarray(x.transpose(0, 2, 3, 1)), 3
    be = get_backend(backend).open(str(tmp_path / f"i.{backend}"), "w")
    chunks = (7, 1, 16, 16) if layout == "NCHW" else (7, 16, 16, 3)  # blocks split channels
    be.create_array(("img",), shape=x.shape, dtype=x.dtype, data=x, chunks=chunks)
    res = check_data(be, [("img",)], histogram_bins=8, block_bytes=700, workers=3)
    be.close()
    st = res.stats["img"]
    others = tuple(i for i in range(4) if i != axis)
    assert st.channel_axis == axis
    assert st.channels is not None
    for c, got in enumerate(st.channels):
        ref = np.take(x, c, axis=axis)
        assert got["mean"] == pytest.approx(ref.mean())
        assert (got["min"], got["max"]) == (ref.min(), ref.max())
    assert len(st.channels) == x.shape[axis]
    assert others
