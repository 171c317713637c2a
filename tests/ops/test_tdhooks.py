"""ptd tensordicts handed to tensordict's own free functions (``tensordict.functional.pad``,
tensordict's ``torch.stack`` with and without ``out=``), through the private hooks ptd gives
its containers (ptd/ops/tdhooks.py); tensordict.TensorDict values keeping their batch size in
``set``/``from_dict``; ``split_keys`` on a store; ``apply(batch_size=)`` on nested entries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

import ptd
from ptd.ops.foreign import foreign_batch_size
from ptd.ops.tdhooks import REQUIRED, wants_default

tdlib = pytest.importorskip("tensordict")
from tensordict._torch_func import _stack as td_stack  # noqa: E402
from tensordict.functional import pad as td_pad  # noqa: E402

pytestmark = pytest.mark.interop

SUFFIX = {"h5": ".h5", "zarr": ".zarr"}


def _data() -> dict[str, Any]:
    g = torch.Generator().manual_seed(0)
    return {
        "a": torch.randn(4, 3, 5, generator=g),
        "c": torch.randint(10, (4, 3, 2), generator=g),
        "n": {"x": torch.randn(4, 3, 2, generator=g)},
    }


def _both(tmp_path: Path, backend: str | None) -> tuple[Any, Any]:
    """(ptd, tensordict) holding the same data: in memory, or stores of ``backend``."""
    theirs = tdlib.TensorDict(_data(), [4, 3])
    if backend is None:
        return ptd.TensorDict(_data(), [4, 3]), theirs
    path = tmp_path / f"s{SUFFIX[backend]}"
    return ptd.PersistentTensorDict.from_dict(theirs, path, backend=backend), theirs


def _same(mine: Any, theirs: Any) -> None:
    """Same batch sizes, keys and leaves, level by level (a result of tensordict's functions
    can hold a ptd tensordict as an entry, which tensordict's nested keys do not enter)."""
    assert tuple(mine.batch_size) == tuple(theirs.batch_size)
    assert sorted(mine.keys()) == sorted(theirs.keys())
    for key in theirs.keys():
        if isinstance(theirs[key], torch.Tensor):
            assert torch.equal(mine[key], theirs[key]), key
        else:
            _same(mine[key], theirs[key])


@pytest.fixture(params=[None, "h5", "zarr"], ids=["memory", "h5", "zarr"])
def where(request: pytest.FixtureRequest) -> str | None:
    return request.param


# ------------------------------------------------------------------ the _get_str hook
def test_get_str_gives_the_default_for_a_missing_key(tmp_path, where) -> None:
    mine, _ = _both(tmp_path, where)
    assert mine._get_str("missing", default=None) is None
    assert mine._get_str("missing", 7) == 7
    assert torch.equal(mine._get_str("a", default=None), mine["a"])
    with pytest.raises(KeyError, match="missing"):
        mine._get_str("missing")
    with pytest.raises(KeyError, match="missing"):
        mine._get_str("missing", default=tdlib.base.NO_DEFAULT)  # tensordict's "raise"
    assert not wants_default(REQUIRED)
    assert not wants_default(tdlib.base.NO_DEFAULT)
    assert wants_default(None)
    assert wants_default(0)


# ------------------------------------------------------------------ tensordict.functional.pad
@pytest.mark.parametrize("pad_size", [[0, 1], [0, 1, 0, 2], [1, 0, 2, 1]])
def test_tensordict_pad_of_a_ptd_tensordict(tmp_path, where, pad_size) -> None:
    mine, theirs = _both(tmp_path, where)
    got, expected = td_pad(mine, pad_size, value=-1), td_pad(theirs, pad_size, value=-1)
    _same(got, expected)
    _same(mine.pad(pad_size, value=-1), expected)  # ptd's own pad agrees
    for bad in ([0] * 6, [0]):
        with pytest.raises(RuntimeError):
            td_pad(mine, bad)


def test_nn_functional_pad_of_a_tensordict_pads_the_batch_dims_in_torch_order() -> None:
    td = ptd.TensorDict({"a": torch.zeros(2, 3, 4)}, [2, 3])
    out = torch.nn.functional.pad(td, [1, 0], value=1.0)  # the last batch dim, as torch
    assert out.batch_size == torch.Size([2, 4])
    assert out["a"].shape == (2, 4, 4)
    assert bool((out["a"][:, 0] == 1).all())
    assert bool((out["a"][:, 1:] == 0).all())
    out = torch.nn.functional.pad(td, [0, 1, 2, 0])
    assert out.batch_size == torch.Size([4, 4])
    with pytest.raises(RuntimeError, match="divisible by 2"):
        torch.nn.functional.pad(td, [1])
    with pytest.raises(RuntimeError, match="two times"):
        torch.nn.functional.pad(td, [1] * 6)
    with pytest.raises(NotImplementedError, match="constant"):
        torch.nn.functional.pad(td, [1, 1], mode="reflect")


# ------------------------------------------------------------------ tensordict's torch.stack
@pytest.mark.parametrize("dim", [0, 1, -1, -2])
def test_tensordict_stack_of_unbound_ptd_tensordicts(tmp_path, where, dim) -> None:
    mine, theirs = _both(tmp_path, where)
    pieces = torch.unbind(mine, dim=dim)
    assert all(type(p) is ptd.TensorDict for p in pieces)  # a store's pieces are copies
    _same(td_stack(list(pieces), dim), theirs)
    idx = (slice(None),) * (dim % 2) + (0,)  # batch [4, 3]
    _same(pieces[0], theirs[idx])


def test_tensordict_stack_into_a_ptd_tensordict_writes_in_place(tmp_path, where) -> None:
    mine, theirs = _both(tmp_path, where)
    out = ptd.TensorDict(_data(), [4, 3]).expand(2, 4, 3).clone().zero_()
    ptrs = {out[k].data_ptr() for k in out.keys(True, True)}
    assert td_stack([mine, mine], 0, out=out) is out
    assert {out[k].data_ptr() for k in out.keys(True, True)} == ptrs
    _same(out, tdlib.stack([theirs, theirs], 0))


def test_stack_onto_a_store_writes_the_rows(tmp_path, backend) -> None:
    _, theirs = _both(tmp_path, None)
    data = tdlib.TensorDict(_data(), [4, 3]).expand(2, 4, 3).clone().zero_()
    store = ptd.PersistentTensorDict.from_dict(
        data, tmp_path / f"o{SUFFIX[backend]}", backend=backend
    )
    assert store.backend == backend
    src = ptd.TensorDict(_data(), [4, 3])
    assert store._stack_onto_([src, src + 1], 0) is store
    _same(store, tdlib.stack([theirs, theirs + 1], 0))
    with pytest.raises(RuntimeError, match="batch size"):
        store._stack_onto_([src, src, src], 0)
    store.close()


def test_maybe_names() -> None:
    td = ptd.TensorDict({"a": torch.zeros(2, 3)}, [2, 3])
    assert td._maybe_names() is None
    td.names = ["x", None]
    assert td._maybe_names() == ["x", None]


# ------------------------------------------------------------------ tensordict.TensorDict values
def test_foreign_batch_size() -> None:
    assert foreign_batch_size(tdlib.TensorDict({}, [2, 3])) == torch.Size([2, 3])
    assert foreign_batch_size({"a": torch.zeros(2)}) is None
    # ptd's own tensordicts are not mappings: their batch size is read directly, not here
    assert foreign_batch_size(ptd.TensorDict({}, [2])) is None


def test_from_dict_keeps_the_batch_size_of_nested_tensordicts(tmp_path, backend) -> None:
    src = tdlib.TensorDict(
        {"n": tdlib.TensorDict({"x": torch.zeros(4, 3, 2)}, [4]), "e": tdlib.TensorDict({}, [4])},
        [4],
    )
    path = tmp_path / f"f{SUFFIX[backend]}"
    p = ptd.PersistentTensorDict.from_dict(src, path, backend=backend)
    assert p["n"].batch_size == torch.Size([4])  # not inferred as [4, 3, 2]
    p.close()
    with ptd.PersistentTensorDict(filename=path, mode="r", backend=backend) as p:
        assert p["n"].batch_size == torch.Size([4])
        assert p["e"].batch_size == torch.Size([4])


def test_set_keeps_the_batch_size_of_a_tensordict_value(tmp_path, where) -> None:
    mine, _ = _both(tmp_path, where)
    mine.set("sub", tdlib.TensorDict({}, [4, 3, 5]))
    mine.set(("deep", "er"), tdlib.TensorDict({"w": torch.zeros(4, 3, 5, 2)}, [4, 3, 5]))
    assert mine["sub"].batch_size == torch.Size([4, 3, 5])
    assert mine["deep", "er"].batch_size == torch.Size([4, 3, 5])
    with pytest.raises(RuntimeError, match="batch"):
        mine.set("bad", tdlib.TensorDict({"w": torch.zeros(2)}, [2]))
    if where is not None:
        path = mine.filename
        mine.close()
        with ptd.PersistentTensorDict(filename=path, mode="r", backend=where) as p:
            assert p["sub"].batch_size == torch.Size([4, 3, 5])


# ------------------------------------------------------------------ split_keys on a store
def test_split_keys_inplace_on_a_store(tmp_path, backend) -> None:
    mine, theirs = _both(tmp_path, backend)
    taken, rest = mine.split_keys(["a", ("n", "x")], inplace=True)
    assert rest is mine
    assert type(taken) is ptd.TensorDict
    assert type(taken["n"]) is ptd.TensorDict
    assert torch.equal(taken["a"], theirs["a"])
    assert torch.equal(taken["n", "x"], theirs["n", "x"])
    assert sorted(mine.keys()) == ["c"]  # the emptied group left the store too
    path = mine.filename
    mine.close()
    with ptd.PersistentTensorDict(filename=path, mode="r", backend=backend) as p:
        assert sorted(p.keys(True)) == ["c"]


def test_split_keys_inplace_removes_nothing_on_an_error(tmp_path, backend) -> None:
    mine, _ = _both(tmp_path, backend)
    with pytest.raises(KeyError, match="missing"):
        mine.split_keys(["a", "missing"], inplace=True)
    mine.lock_()
    with pytest.raises(RuntimeError, match="Cannot modify"):
        mine.split_keys(["a"], inplace=True)
    mine.unlock_()
    assert sorted(mine.keys()) == ["a", "c", "n"]
    mine.close()


def test_split_keys_renames_and_filters(tmp_path, where) -> None:
    mine, theirs = _both(tmp_path, where)
    got = mine.split_keys({"a": "z", ("n", "x"): ("q", "r")}, lambda k, v: v.dtype == torch.int64)
    expected = theirs.split_keys(
        {"a": "z", ("n", "x"): ("q", "r")}, lambda k, v: v.dtype == torch.int64
    )
    assert len(got) == 3
    for g, e in zip(got, expected, strict=True):
        _same(g, e)
    assert "n" not in got[-1].keys()  # emptied, then filtered out


# ------------------------------------------------------------------ apply(batch_size=)
def test_apply_batch_size_reaches_nested_tensordicts() -> None:
    td = ptd.TensorDict({"a": torch.zeros(4, 3), "n": {"x": torch.zeros(4, 3, 2)}}, [4, 3])
    out = td.apply(lambda x: x, batch_size=[4])
    assert out.batch_size == torch.Size([4])
    assert out["n"].batch_size == torch.Size([4])
    with pytest.raises(RuntimeError, match="batch dimension mismatch"):
        td.apply(lambda x: x, batch_size=[5])
