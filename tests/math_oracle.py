"""Shared by test_reductions.py and test_pointwise.py: the same call on ptd and on tensordict
0.15.3 (the test-only oracle), compared result by result.

``build(kind, data, lib_ptd, tmp_path)`` makes the pair of containers: ``"td"`` an in-memory
``TensorDict`` of each library, ``"h5"``/``"zarr"`` a ``PersistentTensorDict`` of each (the
oracle falls back to its in-memory TensorDict for data its stores cannot hold, bfloat16: its
reductions read the store into one anyway). ``compare(fn, ours, theirs)`` runs ``fn`` on both
and checks results, dtypes, batch sizes, the exception type and the warning categories.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import ptd

SUFFIX = {"h5": ".h5", "zarr": ".zarr"}


def datasets() -> dict[str, Callable[[Any], Any]]:
    """name -> function(lib) building a tensordict of that library (generated, small)."""

    def mixed(lib: Any) -> Any:
        g = torch.Generator().manual_seed(0)
        return lib.TensorDict(
            {
                "a": torch.randn(4, 3, generator=g),
                "b": torch.randint(-5, 5, (4, 3, 2), generator=g),
                "f": torch.rand(4, 3, generator=g) > 0.5,
                "h": torch.randn(4, 3, generator=g).bfloat16(),
                "n": lib.TensorDict(
                    {
                        "c": torch.randn(4, 3, 5, generator=g),
                        "m": lib.TensorDict(
                            {"d": torch.randn(4, 3, 2, generator=g)}, batch_size=[4, 3, 2]
                        ),
                    },
                    batch_size=[4, 3],
                ),
            },
            batch_size=[4, 3],
        )

    def floats(lib: Any) -> Any:
        g = torch.Generator().manual_seed(1)
        return lib.TensorDict(
            {
                "a": torch.randn(5, 3, generator=g),
                "d": torch.randn(5, 3, 2, generator=g, dtype=torch.float64),
                "n": lib.TensorDict(
                    {"c": torch.rand(5, 3, 4, generator=g) + 0.5}, batch_size=[5, 3, 4]
                ),
            },
            batch_size=[5, 3],
        )

    def with_nan(lib: Any) -> Any:
        a = torch.arange(12.0).reshape(4, 3)
        a[1, 2] = float("nan")
        a[3, 0] = float("nan")
        return lib.TensorDict({"a": a, "n": {"c": torch.ones(4, 3) * 2}}, batch_size=[4, 3])

    def empty(lib: Any) -> Any:
        return lib.TensorDict(
            {"a": torch.zeros(0, 3), "i": torch.zeros(0, 3, 2, dtype=torch.int64)},
            batch_size=[0, 3],
        )

    return {"mixed": mixed, "floats": floats, "with_nan": with_nan, "empty": empty}


def build(kind: str, name: str, tmp_path: Path, tdmod: Any) -> tuple[Any, Any]:
    """(ours, theirs) for the dataset ``name``: in memory (kind "td") or in a store."""
    make = datasets()[name]
    ours_mem, theirs_mem = make(ptd), make(tdmod)
    if kind == "td":
        if name == "mixed":  # a non-tensor entry, in memory only (stores differ on strings)
            ours_mem["s"] = "text"
            theirs_mem["s"] = "text"
        return ours_mem, theirs_mem
    ours = ptd.PersistentTensorDict.from_dict(
        ours_mem, str(tmp_path / f"ours-{name}{SUFFIX[kind]}"), backend=kind
    )
    try:
        theirs = tdmod.PersistentTensorDict.from_dict(
            theirs_mem, str(tmp_path / f"theirs-{name}{SUFFIX[kind]}"), backend=kind
        )
    except TypeError:  # bfloat16: tensordict's stores cannot hold it
        theirs = theirs_mem
    return ours, theirs


def run(fn: Callable[[Any], Any], target: Any) -> tuple[Any, BaseException | None, set[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result, error = fn(target), None
        except Exception as err:  # noqa: BLE001 - compared with the oracle's
            result, error = None, err
    kinds = {
        w.category.__name__
        for w in caught
        if issubclass(w.category, (FutureWarning, DeprecationWarning))
    }
    return result, error, kinds


def compare(fn: Callable[[Any], Any], ours: Any, theirs: Any, *, what: str = "") -> Any:
    """Run ``fn`` on both; assert the same outcome. Returns our result."""
    got, got_err, got_warn = run(fn, ours)
    want, want_err, want_warn = run(fn, theirs)
    if want_err is not None:
        assert got_err is not None, f"{what}: tensordict raises {want_err!r}, ptd returns {got!r}"
        assert isinstance(got_err, type(want_err)), (
            f"{what}: tensordict raises {type(want_err).__name__}({want_err}), "
            f"ptd raises {type(got_err).__name__}({got_err})"
        )
        return None
    assert got_err is None, f"{what}: ptd raises {got_err!r}, tensordict returns {want!r}"
    assert got_warn == want_warn, f"{what}: warnings {got_warn} != {want_warn}"
    same(got, want, what)
    return got


def _is_td(x: Any) -> bool:
    return hasattr(x, "batch_size") and hasattr(x, "keys")


def same(got: Any, want: Any, what: str = "") -> None:
    """Equal results: tensordicts (batch size, leaf keys, dtypes, shapes, values), named tuples
    of them, tensors, bools."""
    if isinstance(want, tuple) and not isinstance(want, torch.Tensor):
        assert type(got).__name__ == type(want).__name__, f"{what}: {type(got)} != {type(want)}"
        assert len(got) == len(want), what
        for g, w in zip(got, want, strict=True):
            same(g, w, what)
        return
    if _is_td(want):
        assert _is_td(got), f"{what}: got {type(got).__name__}, want a tensordict"
        assert type(got).__name__ == type(want).__name__, f"{what}: {type(got)} vs {type(want)}"
        assert tuple(got.batch_size) == tuple(want.batch_size), (
            f"{what}: batch size {got.batch_size} != {want.batch_size}"
        )
        gk = {k if isinstance(k, tuple) else (k,) for k in got.keys(True, True)}
        wk = {k if isinstance(k, tuple) else (k,) for k in want.keys(True, True)}
        assert gk == wk, f"{what}: keys {sorted(gk)} != {sorted(wk)}"
        for key in wk:
            same(got.get(key), want.get(key), f"{what}[{key}]")
        return
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor), f"{what}: got {type(got).__name__}"
        assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
        assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
        if want.dtype.is_floating_point or want.dtype.is_complex:
            tol = 2e-2 if want.dtype in (torch.bfloat16, torch.float16) else 1e-5
            assert torch.allclose(got, want, rtol=tol, atol=tol, equal_nan=True), (
                f"{what}: {got} != {want}"
            )
        else:
            assert torch.equal(got, want), f"{what}: {got} != {want}"
        return
    assert got == want, f"{what}: {got!r} != {want!r}"
