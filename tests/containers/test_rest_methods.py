"""The last methods of issue 12: ``attrs``, ``auto_device_``, ``clear_device_``,
``is_shared``, ``share_memory_``, ``from_schema``, ``pack``, ``rename_keys`` and
``set_non_tensor`` (tests/containers/test_differential.py compares them with tensordict; this file checks
what a comparison of results cannot: sharing, what a store refuses, and the error paths)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from ptd import PersistentTensorDict, TensorDict
from ptd.errors import ArgumentError, LockedError, NotSupportedError, PtdKeyError
from ptd.ops.packing import PackLayout


def _td() -> TensorDict:
    return TensorDict(
        a=torch.arange(6.0).reshape(3, 2),
        b=torch.ones(3),
        n={"x": torch.zeros(3), "m": {"z": torch.ones(3, 1)}},
        e={},
        batch_size=[3],
    )


# ------------------------------------------------------------------------------ rename_keys
def test_rename_keys_shares_leaves_and_leaves_self_alone() -> None:
    td = _td().lock_()
    out = td.rename_keys({"a": "b", "b": "a", ("n", "m", "z"): "z"})
    assert out["b"] is td["a"]
    assert out["a"] is td["b"]
    assert out["z"] is td["n", "m", "z"]
    assert not out.is_locked
    assert td.is_locked
    assert sorted(map(str, td.keys(True))) == sorted(map(str, _td().keys(True)))
    # ("n", "m") was emptied by the renaming and is gone; "e" was empty already and stays
    assert ("n", "m") not in out.keys(True)
    assert "e" in out.keys()
    assert ("n", "x") in out.keys(True)


@pytest.mark.parametrize(
    ("mapping", "error", "match"),
    [
        ({"a": "b"}, ArgumentError, "'b' is already present"),
        ({"a": "q", "b": "q"}, ArgumentError, "'q' is a destination twice"),
        ({"n": "q", ("n", "x"): "r"}, ArgumentError, "lie inside one another"),
        ({"a": "q", "b": ("q", "r")}, ArgumentError, "destinations"),
        ({"a": ("b", "c")}, ArgumentError, "runs through the entry 'b'"),
        ({"zz": "q"}, PtdKeyError, "'zz' not found"),
        ({(): "q"}, KeyError, r"got \(\)"),
        ({"a": ()}, KeyError, r"got \(\)"),
        ({"a": 1}, TypeError, "got 1"),
    ],
)
def test_rename_keys_errors(mapping: Any, error: type, match: str) -> None:
    td = _td()
    with pytest.raises(error, match=match):
        td.rename_keys(mapping)
    assert set(td.keys()) == {"a", "b", "n", "e"}  # nothing moved


def test_rename_keys_lax_skips_missing() -> None:
    out = _td().rename_keys({"zz": "q", "a": "a2"}, strict=False)
    assert "q" not in out.keys()
    assert "a2" in out.keys()
    assert "a" not in out.keys()


# ------------------------------------------------------------------------------ set_non_tensor
def test_set_non_tensor_nested_and_errors() -> None:
    td = TensorDict(a=torch.zeros(2, 4), batch_size=[2])
    td.set("sub", TensorDict(batch_size=[2, 4]))
    assert td.set_non_tensor(("sub", "deep", "s"), 5) is td
    assert td["sub", "deep", "s"] == 5
    assert td.get(("sub", "deep", "s")).batch_size == torch.Size([2, 4])
    with pytest.raises(TypeError, match="'a' of \\('a', 'b'\\) is a leaf"):
        td.set_non_tensor(("a", "b"), 1)
    with pytest.raises(TypeError, match="key should be a str"):
        td.set_non_tensor(1, 1)  # type: ignore[arg-type]
    td.lock_()
    with pytest.raises(LockedError):
        td.set_non_tensor("s", "v")  # existing or not, a locked tensordict refuses
    with pytest.raises(LockedError):
        td.set_non_tensor(("sub", "deep", "s"), 6)
    assert td["sub", "deep", "s"] == 5


# ------------------------------------------------------------------------------ devices, sharing
def test_share_memory_marks_locks_and_unlock_clears() -> None:
    td = _td()
    a = td["a"]
    assert not td.is_shared()
    assert not a.is_shared()
    assert td.share_memory_() is td
    assert td["a"] is a
    assert a.is_shared()
    assert td["n", "m", "z"].is_shared()
    assert td.is_shared()
    assert td["n"].is_shared()
    assert td.is_locked
    td.unlock_()
    assert not td.is_shared()
    assert not td["n"].is_shared()
    assert a.is_shared()
    td.lock_()
    assert not td.is_shared()  # only share_memory_ marks it


def test_share_memory_refuses_memmap(tmp_path: Any) -> None:
    td = _td().memmap_(str(tmp_path / "mm"))
    with pytest.raises(RuntimeError, match="mutually exclusive"):
        td.share_memory_()
    assert not td.is_shared()


def test_auto_and_clear_device_do_not_move() -> None:
    td = _td()
    a = td["a"]
    assert td.auto_device_() is td
    assert td.device == torch.device("cpu")
    assert td["n", "m"].device == torch.device("cpu")
    assert td["a"] is a
    assert td.clear_device_() is td
    assert td.device is None
    assert td["n", "m"].device is None
    assert TensorDict(e={}).auto_device_().device is None  # no leaf, no device


def test_store_device_ops_and_refusals(make_ptd: Any) -> None:
    p = make_ptd()
    assert p.is_shared() is False
    assert p.auto_device_() is p
    assert p.device == torch.device("cpu")
    assert p.clear_device_() is p
    assert p.device is None
    with pytest.raises(NotSupportedError, match="share_memory_"):
        p.share_memory_()
    with pytest.raises(NotImplementedError, match="rename_keys"):
        p.rename_keys({"obs": "o"})
    with pytest.raises(NotImplementedError, match="set_non_tensor"):
        p.set_non_tensor("s", "v")
    assert not p.is_locked


# ------------------------------------------------------------------------------ from_schema
def test_from_schema_storages(tmp_path: Any, backend: str) -> None:
    schema = {"obs": ([2, 2], torch.uint8), "r": ([], torch.float64)}
    td = TensorDict.from_schema(schema, batch_size=[5], storage="shared")
    assert td.is_shared()
    assert td["obs"].shape == (5, 2, 2)
    assert td["r"].dtype == torch.float64
    mm = TensorDict.from_schema(schema, batch_size=[5], storage="memmap", prefix=tmp_path / "m")
    assert mm.is_memmap()
    assert int(mm["obs"].sum()) == 0
    p = TensorDict.from_schema(
        schema, batch_size=[5], storage=backend, filename=tmp_path / f"s.{backend}"
    )
    try:
        assert isinstance(p, PersistentTensorDict)
        assert p.batch_size == (5,)
        assert p["obs"].dtype == torch.uint8
        assert int(p["obs"].sum()) == 0
    finally:
        p.close()
    assert TensorDict.from_schema({}).batch_size == ()
    with pytest.raises(ValueError, match="unknown storage 'redis'"):
        TensorDict.from_schema(schema, storage="redis")
    with pytest.raises(KeyError):
        TensorDict.from_schema(schema, storage=backend)  # no filename=


# ------------------------------------------------------------------------------ pack
def test_pack_layout_and_views() -> None:
    td = _td().exclude("e")
    flat, layout = td.pack()
    assert layout.keys == ("a", "b", ("n", "m", "z"), ("n", "x"))
    assert layout.shapes == (torch.Size([2]), torch.Size([]), torch.Size([1]), torch.Size([]))
    assert (layout.offsets, layout.numel, layout.dim) == ((0, 2, 3, 4), 5, -1)
    assert layout.nested == (("n", torch.Size([]), None), (("n", "m"), torch.Size([]), None))
    assert layout == PackLayout(layout.keys, [list(s) for s in layout.shapes], -1, layout.nested)
    assert hash(layout) == hash(td.pack(1)[1])  # pack(1) == pack(-1) with one batch dim
    out = layout.unpack(flat)
    assert out["a"].data_ptr() == flat.data_ptr()
    # a layout made by hand has no constructor until given one (ptd.ops is below the classes)
    by_hand = PackLayout(layout.keys, layout.shapes, -1, layout.nested)
    with pytest.raises(ArgumentError, match="no constructor"):
        by_hand.unpack(flat)
    given = PackLayout(layout.keys, layout.shapes, -1, layout.nested, constructor=TensorDict)
    assert (given.unpack(flat) == td).all()
    assert (out == td).all()
    with pytest.raises(ValueError, match="expected 5 entries"):
        layout.unpack(flat[:, :4])
    with pytest.raises(IndexError, match="out of range"):
        td.pack(2)
    with pytest.raises(KeyError, match="differ from the keys"):
        td.exclude("b").pack(layout=layout)
    with pytest.raises(ValueError, match="along dim 0"):
        td.pack(0, layout=layout)
    with pytest.raises(TypeError, match="different dtypes"):
        td.set("i", torch.zeros(3, dtype=torch.int64)).pack()


def test_pack_store_reads_like_memory(make_ptd: Any) -> None:
    mem = TensorDict(
        a=torch.arange(12.0).reshape(6, 2),
        n={"x": torch.ones(6), "m": {"z": torch.ones(6, 2, 2)}},
        batch_size=[6],
    )
    p = make_ptd(mem)
    for dim in (0, -1):
        f1, l1 = mem.pack(dim)
        f2, l2 = p.pack(dim)
        assert l1 == l2
        assert torch.equal(f1, f2)
    with pytest.raises(TypeError, match="different dtypes"):
        make_ptd({"a": torch.zeros(2), "b": torch.zeros(2, dtype=torch.int8)}, "mixed").pack()


# ------------------------------------------------------------------------------ attrs
def test_attrs_store_from_metadata(make_ptd: Any, sample_td: Any) -> None:
    p = make_ptd()
    got = p.attrs()
    want = sample_td.attrs()
    for key in sample_td.keys(True, True):
        if isinstance(sample_td.get(key), torch.Tensor):
            assert got[key] == want[key], key
    assert got.batch_size == ()
    assert got.device is None
    assert got.attrs(fields=()).batch_size == ()  # non-tensor leaves of attrs are kept


def test_to_attrs_casts_leaf_by_leaf() -> None:
    src = TensorDict(a=torch.zeros(3, dtype=torch.int16), n={"x": torch.zeros(3)})
    target = TensorDict(a=torch.ones(3), n={"x": torch.ones(3, dtype=torch.int64)}, c=torch.ones(1))
    out = target.to(src.attrs(fields=("dtype",)))
    assert out["a"].dtype == torch.int16
    assert out["n", "x"].dtype == torch.float32
    assert out["c"].dtype == torch.float32  # not in attrs: kept
