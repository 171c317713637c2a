"""Comparing ptd with tensordict 0.15.3 (the test-only oracle): the same sample data in both
libraries, and one assertion that results (values, dtypes, batch sizes, keys) or errors agree.

Used by test_shape_ops.py, test_torch_functions.py and test_construct.py.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

tdlib = pytest.importorskip("tensordict")

import ptd  # noqa: E402

SUFFIX = {"h5": ".h5", "zarr": ".zarr"}


def sample(kind: str) -> tuple[dict[str, Any], list[int]]:
    """A nested dict of tensors and its batch size; ``kind`` picks the shape."""
    g = torch.Generator().manual_seed(0)
    if kind == "1d":
        bs = [6]
    elif kind == "2d":
        bs = [4, 3]
    elif kind == "3d":
        bs = [2, 3, 2]
    elif kind == "empty_batch":
        bs = [0, 3]
    else:
        raise ValueError(kind)
    data = {
        "f": torch.randn(*bs, 2, generator=g),
        "i": torch.randint(0, 9, bs, generator=g),
        "b": torch.randint(0, 2, bs, generator=g).bool(),
        "h": torch.randn(*bs, 3, generator=g).to(torch.bfloat16),
        "n": {
            "x": torch.randn(*bs, generator=g),
            "m": {"y": torch.arange(int(np.prod(bs)) * 2).reshape(*bs, 2)},
        },
    }
    return data, bs


KINDS = ("1d", "2d", "3d", "empty_batch")


def pair(kind: str, **extra: Any) -> tuple[Any, Any]:
    """(ptd.TensorDict, tensordict.TensorDict) holding the same data."""
    data, bs = sample(kind)
    data.update(extra)
    return ptd.TensorDict(_clone(data), bs), tdlib.TensorDict(_clone(data), bs)


def persistent_pair(kind: str, tmp_path: Path, backend: str, **extra: Any) -> tuple[Any, Any]:
    """(ptd.PersistentTensorDict, tensordict.PersistentTensorDict) on two files of ``backend``."""
    data, bs = sample(kind)
    del data["h"]  # tensordict's PersistentTensorDict cannot store bfloat16
    data.update(extra)
    suffix = SUFFIX[backend]
    mine = ptd.PersistentTensorDict.from_dict(
        _clone(data), tmp_path / f"ptd{suffix}", backend=backend, batch_size=bs
    )
    theirs = tdlib.PersistentTensorDict.from_dict(
        tdlib.TensorDict(_clone(data), bs), tmp_path / f"td{suffix}", backend=backend
    )
    return mine, theirs


def _clone(d: dict[str, Any]) -> dict[str, Any]:
    return {
        k: _clone(v) if isinstance(v, dict) else v.clone() if isinstance(v, torch.Tensor) else v
        for k, v in d.items()
    }


def is_td(x: Any) -> bool:
    return isinstance(x, ptd.TensorDictBase) or tdlib.is_tensor_collection(x)


def assert_same(mine: Any, theirs: Any, where: str = "") -> None:
    """Recursive equality: tensordicts (batch size, keys, leaves), tensors (dtype, values),
    sequences, and plain values."""
    if is_td(theirs):
        assert is_td(mine), f"{where}: expected a tensordict, got {type(mine).__name__}"
        assert tuple(mine.batch_size) == tuple(theirs.batch_size), (
            f"{where}: batch size {list(mine.batch_size)} != {list(theirs.batch_size)}"
        )
        k_mine = {str(k) for k in mine.keys(True, True)}
        k_theirs = {str(k) for k in theirs.keys(True, True)}
        assert k_mine == k_theirs, f"{where}: keys {sorted(k_mine)} != {sorted(k_theirs)}"
        for key in theirs.keys(True, True):
            assert_same(mine[key], theirs[key], f"{where}[{key!r}]")
        return
    if isinstance(theirs, torch.Tensor):
        assert isinstance(mine, torch.Tensor), f"{where}: expected a tensor, got {type(mine)}"
        assert mine.dtype == theirs.dtype, f"{where}: dtype {mine.dtype} != {theirs.dtype}"
        assert mine.shape == theirs.shape, f"{where}: shape {mine.shape} != {theirs.shape}"
        assert torch.equal(mine, theirs) or (
            mine.is_floating_point() and torch.allclose(mine, theirs, equal_nan=True)
        ), f"{where}: values differ"
        return
    if isinstance(theirs, (list, tuple)) and not isinstance(theirs, str):
        assert isinstance(mine, (list, tuple)), f"{where}: expected a sequence, got {type(mine)}"
        assert len(mine) == len(theirs), f"{where}: length {len(mine)} != {len(theirs)}"
        for i, (a, b) in enumerate(zip(mine, theirs, strict=True)):
            assert_same(a, b, f"{where}[{i}]")
        return
    if isinstance(theirs, dict):
        assert isinstance(mine, dict), f"{where}: {mine} != {theirs}"
        assert set(mine) == set(theirs), f"{where}: {mine} != {theirs}"
        for k in theirs:
            assert_same(mine[k], theirs[k], f"{where}[{k!r}]")
        return
    if isinstance(theirs, np.ndarray):
        assert isinstance(mine, np.ndarray), f"{where}: {mine!r}"
        assert mine.dtype == theirs.dtype, f"{where}: {mine!r}"
        assert mine.shape == theirs.shape, f"{where}: arrays differ"
        assert (mine == theirs).all(), f"{where}: arrays differ"
        return
    assert mine == theirs, f"{where}: {mine!r} != {theirs!r}"


def builtin_error(exc: BaseException) -> type[BaseException]:
    """The builtin exception class an ``except`` clause would name for ``exc``."""
    for cls in type(exc).__mro__:
        if cls.__module__ == "builtins":
            return cls
    return Exception


def run_both(fn: Callable[[Any], Any], mine: Any, theirs: Any) -> tuple[Any, Any]:
    """``fn`` on each side; when the oracle raises, ptd must raise the same builtin error."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            expected = fn(theirs)
        except Exception as err:  # noqa: BLE001 - any error of the oracle is what we compare
            kind = builtin_error(err)
            with pytest.raises(kind):
                fn(mine)
            return None, None
        return fn(mine), expected


def check(fn: Callable[[Any], Any], mine: Any, theirs: Any, where: str = "") -> None:
    """Same result, or the same kind of error."""
    got, expected = run_both(fn, mine, theirs)
    if expected is not None or got is not None:
        assert_same(got, expected, where)
