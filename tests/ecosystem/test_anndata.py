"""AnnData written by anndata itself (h5ad, Zarr v2 and v3), converted by ptd to the other
format, and the copy read back by anndata: the same object by anndata's own comparison (X as a
CSR matrix, obs with a categorical and strings, var, obsm, obsp, layers, nested uns); ``diff``
of original and copy is "same"."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ptd

ad = pytest.importorskip("anndata", reason="anndata writes and reads the AnnData fixtures")
pd = pytest.importorskip("pandas", reason="anndata's tables are pandas DataFrames")
sparse = pytest.importorskip("scipy.sparse", reason="AnnData's X here is a scipy CSR matrix")


def _dense(x: Any) -> np.ndarray:
    return x.toarray() if sparse.issparse(x) else np.asarray(x)


def _same_uns(a: Any, b: Any, where: str) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict), where
        assert a.keys() == b.keys(), where
        for k in a:
            _same_uns(a[k], b[k], f"{where}/{k}")
    elif isinstance(a, (np.ndarray, list)):
        assert np.asarray(b).tolist() == np.asarray(a).tolist(), where
    else:
        assert b == a, where


def _assert_same(copy: Any, orig: Any) -> None:
    """``copy`` read back by anndata holds what ``orig`` holds, part by part."""
    assert sparse.issparse(copy.X)
    assert copy.X.format == "csr"
    assert np.array_equal(_dense(copy.X), _dense(orig.X))
    assert copy.X.dtype == orig.X.dtype
    pd.testing.assert_frame_equal(copy.obs, orig.obs)
    pd.testing.assert_frame_equal(copy.var, orig.var)
    assert isinstance(copy.obs["cell_type"].dtype, pd.CategoricalDtype)
    for name in ("obsm", "varm", "obsp", "layers"):
        a, b = getattr(orig, name), getattr(copy, name)
        assert set(b.keys()) == set(a.keys()), name
        for k in a:
            assert np.array_equal(_dense(b[k]), _dense(a[k])), f"{name}/{k}"
    _same_uns(orig.uns, copy.uns, "uns")


def _adata() -> Any:
    rng = np.random.default_rng(0)
    x = sparse.random(8, 5, density=0.4, format="csr", random_state=0, dtype=np.float32)
    obs = pd.DataFrame(
        {
            "cell_type": pd.Categorical(["t", "b", "t", "nk", "b", "t", "t", "nk"]),
            "name": [f"cell {i} é" for i in range(8)],
            "n_genes": np.arange(8, dtype=np.int64),
            "ok": np.arange(8) % 2 == 0,
        },
        index=[f"c{i}" for i in range(8)],
    )
    var = pd.DataFrame({"symbol": [f"G{i}" for i in range(5)]}, index=[f"g{i}" for i in range(5)])
    return ad.AnnData(
        X=x,
        obs=obs,
        var=var,
        obsm={"X_pca": rng.normal(size=(8, 3))},
        obsp={"distances": sparse.random(8, 8, density=0.3, format="csr", random_state=1)},
        varm={"loadings": rng.normal(size=(5, 2)).astype(np.float32)},
        layers={"counts": x.copy()},
        uns={
            "title": "pbmc",
            "params": {"k": 15, "method": "umap", "nested": {"arr": np.arange(4), "s": ["a"]}},
            "colors": np.array(["red", "blue", "green"], dtype=object),
        },
    )


def _write(a: Any, path: Path, kind: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind == "h5ad":
            a.write_h5ad(path)
        else:
            with ad.settings.override(zarr_write_format=int(kind[-1])):
                a.write_zarr(path)


def _reader(path: Path) -> Callable[[Path], Any]:
    return ad.read_h5ad if path.suffix == ".h5ad" or path.suffix == ".h5" else ad.read_zarr


@pytest.mark.parametrize("kind", ["h5ad", "zarr2", "zarr3"])
def test_anndata_converted_opens_in_anndata(tmp_path: Path, kind: str) -> None:
    orig = _adata()
    src = tmp_path / ("a.h5ad" if kind == "h5ad" else "a.zarr")
    copy = tmp_path / ("copy.zarr" if kind == "h5ad" else "copy.h5")
    back = tmp_path / ("back.h5" if kind == "h5ad" else "back.zarr")
    _write(orig, src, kind)

    for a, b in ((src, copy), (copy, back)):
        result = ptd.convert(a, b, to="zarr" if b.suffix == ".zarr" else "h5")
        assert result.not_copied == []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            read = _reader(b)(b)
        _assert_same(read, orig)
        assert ptd.diff(a, b).same

    assert ptd.diff(src, back).same
