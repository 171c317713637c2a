"""tensordict 0.15's semantics on ptd.TensorDict and PersistentTensorDict (h5 and zarr): the
with-form of methods (last-op), locking, update, error types, equality, keys made of nested
tuples, dim names, apply's flags. Where tensordict can run the same call, the result is
compared with it (the ``oracle`` fixture)."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from ptd import PersistentTensorDict, TensorDict
from ptd.errors import BatchSizeError, LockedError, PtdError

KINDS = ["memory", "h5", "zarr"]


def _data() -> dict[str, Any]:
    return {"a": torch.zeros(3, 4), "n": {"b": torch.ones(3), "m": {"c": torch.arange(3)}}}


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make(kind: str, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """``make(data, batch_size)``: a TensorDict, or a PersistentTensorDict of that backend."""
    opened: list[Any] = []

    def build(data: Any = None, batch_size: Any = (3,), **kw: Any) -> Any:
        data = _data() if data is None else data
        if kind == "memory":
            return TensorDict(data, batch_size=list(batch_size), **kw)
        path = tmp_path / f"s{len(opened)}.{'h5' if kind == 'h5' else 'zarr'}"
        src = TensorDict(data, batch_size=list(batch_size), **kw)
        p = PersistentTensorDict.from_dict(src, str(path), backend=kind)
        opened.append(p)
        return p

    yield build
    for p in opened:
        p.close()


# ------------------------------------------------------------------------------ last op
def test_with_lock_and_unlock_undo_on_exit(make: Callable[..., Any]) -> None:
    td = make()
    with td.lock_() as t:
        assert t is td
        assert td.is_locked
        assert td["n"].is_locked
    assert not td.is_locked
    assert not td["n"].is_locked
    td.lock_()
    with td.unlock_():
        assert not td.is_locked
        td["z"] = torch.zeros(3)
    assert td.is_locked
    assert td["n"].is_locked
    with td.lock_():  # already locked: nothing to undo
        pass
    assert td.is_locked
    td.unlock_()
    assert torch.equal(td["z"], torch.zeros(3))  # the store is still open


def test_with_unlock_undoes_on_error(make: Callable[..., Any]) -> None:
    td = make().lock_()
    seen: list[bool] = []

    def fail_unlocked() -> None:
        with td.unlock_():
            seen.append(td.is_locked)
            _ = 1 / 0

    with pytest.raises(ZeroDivisionError):
        fail_unlocked()
    assert seen == [False]
    assert td.is_locked


def test_with_flatten_keys_writes_back(make: Callable[..., Any]) -> None:
    td = make()
    with td.flatten_keys(",") as flat:
        assert "n,m,c" in flat.keys()
        flat["n,b"] = torch.full((3,), 5.0)
        flat["n,new"] = torch.ones(3)
    assert torch.equal(td["n", "b"], torch.full((3,), 5.0))
    assert torch.equal(td["n", "new"], torch.ones(3))


def test_with_p_closes_but_with_unlock_does_not(tmp_path: Path, backend: str) -> None:
    path = str(tmp_path / f"x.{'h5' if backend == 'h5' else 'zarr'}")
    p = PersistentTensorDict.from_dict(TensorDict(_data(), batch_size=[3]), path, backend=backend)
    with p.unlock_():
        pass
    with p.lock_():
        pass
    p.lock_()
    with p.unlock_():
        pass
    assert p["a"].shape == (3, 4)
    assert p.is_locked
    p.unlock_()
    with p:
        pass
    with pytest.raises(KeyError):
        p["a"]
    with (
        PersistentTensorDict.from_h5(path)
        if backend == "h5"
        else PersistentTensorDict.from_zarr(path) as q
    ):
        assert q["a"].shape == (3, 4)
    with pytest.raises(KeyError):
        q["a"]


def test_plain_with_after_a_separate_unlock_closes(tmp_path: Path) -> None:
    p = PersistentTensorDict.from_dict(TensorDict(_data(), batch_size=[3]), str(tmp_path / "x.h5"))
    p.unlock_()
    with p:  # not the with-form of unlock_: a plain `with p:` closes
        pass
    with pytest.raises(KeyError):
        p["a"]


@pytest.mark.parametrize(
    ("op", "args"),
    [
        ("permute", (1, 0)),
        ("transpose", (0, 1)),
        ("unsqueeze", (0,)),
        ("view", (-1,)),
        ("flatten", (0, 1)),
    ],
)
def test_with_shape_ops_write_back(op: str, args: tuple[int, ...]) -> None:
    td = TensorDict({"a": torch.zeros(2, 3, 4)}, batch_size=[2, 3])
    with getattr(td, op)(*args) as t:
        t["a"] = torch.ones_like(t["a"])
    assert td.batch_size == (2, 3)
    assert torch.equal(td["a"], torch.ones(2, 3, 4))


def test_with_shape_ops_match_tensordict() -> None:
    tdm = pytest.importorskip("tensordict")
    ours = TensorDict({"a": torch.arange(6.0).reshape(2, 3)}, batch_size=[2, 3])
    ref = tdm.TensorDict({"a": torch.arange(6.0).reshape(2, 3)}, batch_size=[2, 3])
    for td in (ours, ref):
        with td.permute(1, 0) as t:
            t["a"] = t["a"] * 10
    assert torch.equal(ours["a"], ref["a"])


# ------------------------------------------------------------------------------ locking
def test_locked_set_rules(make: Callable[..., Any], kind: str) -> None:
    td = make().lock_()
    with pytest.raises(RuntimeError, match="Cannot modify locked TensorDict") as info:
        td.set("a", torch.ones(3, 4))
    assert isinstance(info.value, LockedError)
    assert isinstance(info.value, PtdError)
    for write in (
        lambda: td.set("new", torch.ones(3)),
        lambda: td.set(("n", "b"), torch.ones(3)),
        lambda: td.update({"a": torch.ones(3, 4)}),
        lambda: td.del_("a"),
        lambda: td.pop("a"),
        lambda: td.rename_key_("a", "q"),
    ):
        with pytest.raises(RuntimeError):
            write()
    td.set("a", torch.ones(3, 4), inplace=True)
    td.set_(("n", "b"), torch.full((3,), 2.0))
    td.update({"a": torch.full((3, 4), 3.0)}, inplace=True)
    td.update_({"n": {"b": torch.full((3,), 4.0)}})
    assert td["a"][0, 0] == 3
    assert td["n", "b"][0] == 4
    if kind != "memory":  # p[key] = value writes in place on a file-backed tensordict
        td["a"] = torch.zeros(3, 4)
        assert td["a"].sum() == 0
    else:
        with pytest.raises(RuntimeError):
            td["a"] = torch.zeros(3, 4)
    assert sorted(td.keys()) == ["a", "n"]


def test_is_locked_setter_and_child_unlock(make: Callable[..., Any]) -> None:
    td = make()
    td.is_locked = True
    assert td.is_locked
    assert td["n"].is_locked
    assert td["n", "m"].is_locked
    with pytest.raises(RuntimeError, match="part of a locked graph"):
        td["n"].unlock_()
    with pytest.raises(RuntimeError, match="part of a locked graph"):
        td["n"].is_locked = False
    td.is_locked = False
    assert not td["n"].is_locked
    td["n"].lock_()
    assert td["n"].is_locked
    assert not td.is_locked
    td["n"].unlock_()
    assert not td["n"].is_locked


def test_views_of_a_locked_store_are_locked(make: Callable[..., Any], kind: str) -> None:
    if kind == "memory":
        pytest.skip("an indexed TensorDict is a new, unlocked one (as in tensordict)")
    p = make().lock_()
    assert p[0:2].is_locked
    assert p[0]["n"].is_locked
    p.unlock_()
    assert not p[0:2].is_locked


def test_locking_matches_tensordict(tmp_path: Path) -> None:
    tdm = pytest.importorskip("tensordict")
    ref = tdm.TensorDict(_data(), batch_size=[3]).lock_()
    ours = TensorDict(_data(), batch_size=[3]).lock_()
    for td in (ref, ours):
        with pytest.raises(RuntimeError) as info:
            td.set("a", torch.ones(3, 4))
        with pytest.raises(RuntimeError) as info2:
            td["n"].unlock_()
        td.set("a", torch.ones(3, 4), inplace=True)
    assert (
        str(info.value)
        == "Cannot modify locked TensorDict. For in-place modification, consider using the `set_()` method and make sure the key is present."
    )
    assert "part of a locked graph" in str(info2.value)


# ------------------------------------------------------------------------------ update
def test_update_replaces_nested_with_tensor(make: Callable[..., Any], kind: str) -> None:
    td = make()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Replacing an array..." on files
        td.update({"n": torch.full((3,), 7.0)})
    assert torch.equal(td["n"], torch.full((3,), 7.0))


def test_update_keys_to_update(make: Callable[..., Any]) -> None:
    td = make()
    td.update(
        {
            "a": torch.ones(3, 4),
            "x": torch.ones(3),
            "n": {"b": torch.full((3,), 9.0), "y": torch.ones(3)},
        },
        keys_to_update=["x", ("n", "y")],
    )
    assert td["a"].sum() == 0
    assert td["n", "b"][0] == 1
    assert torch.equal(td["x"], torch.ones(3))
    assert torch.equal(td["n", "y"], torch.ones(3))
    td.update({"x": torch.zeros(3)}, keys_to_update=[])
    assert td["x"].sum() == 3


def test_update_inplace_clone_and_kwargs(make: Callable[..., Any], kind: str) -> None:
    td = make()
    src = torch.full((3, 4), 2.0)
    td.update({"a": src}, inplace=True)
    assert torch.equal(td["a"], src)
    if kind == "memory":
        td.update({"a": src}, clone=True)
        assert td["a"] is not src
        td.update({"a": src})
        assert td["a"] is src
    td.update(None, q=torch.ones(3))
    assert "q" in td.keys()


def test_update_batch_mismatch_is_runtime_error(make: Callable[..., Any]) -> None:
    td = make()
    with pytest.raises(RuntimeError, match="batch size"):
        td.update(TensorDict({"a": torch.zeros(4, 4)}, batch_size=[4]))


def test_update__and_update_at_(make: Callable[..., Any]) -> None:
    td = make()
    with pytest.raises(KeyError):
        td.update_({"nope": torch.zeros(3)})
    td.update_({"a": torch.ones(3, 4)}, keys_to_update=["a"])
    assert td["a"].sum() == 12
    td.update_at_({"a": torch.full((4,), 5.0), "n": {"b": torch.tensor(8.0)}}, 1)
    assert torch.equal(td["a"][1], torch.full((4,), 5.0))
    assert td["n", "b"][1] == 8
    assert td["a"][0].sum() == 4
    td.update_at_(TensorDict({"a": torch.zeros(2, 4)}, batch_size=[2]), slice(0, 2))
    assert td["a"][:2].sum() == 0
    with pytest.raises(KeyError):
        td.update_at_({"zz": torch.zeros(4)}, 0)


# ------------------------------------------------------------------------------ errors
def test_error_types(make: Callable[..., Any]) -> None:
    td = make()
    with pytest.raises(RuntimeError) as info:
        td.set("z", torch.zeros(4))
    assert isinstance(info.value, BatchSizeError)
    assert isinstance(info.value, ValueError)
    with pytest.raises(KeyError):
        td["missing"]
    assert td.get("missing") is None
    assert td.get("missing", 3) == 3
    with pytest.raises(KeyError):
        td.get(1)
    with pytest.raises(RuntimeError):
        1 in td  # noqa: B015
    with pytest.raises(RuntimeError):
        td.batch_size = [4]


def test_error_types_match_tensordict() -> None:
    tdm = pytest.importorskip("tensordict")
    for td in (tdm.TensorDict(_data(), [3]), TensorDict(_data(), [3])):
        with pytest.raises(RuntimeError):
            td.set("z", torch.zeros(4))
        with pytest.raises(KeyError):
            td.get(1)
        with pytest.raises(RuntimeError):
            1 in td  # noqa: B015
        with pytest.raises(ValueError, match="length of the dimension names"):
            td.names = ["a", "b"]


# ------------------------------------------------------------------------------ equality
def test_equality(make: Callable[..., Any]) -> None:
    td = make()
    eq = td == _data()
    assert eq.all()
    assert sorted(eq.keys(True, True), key=str) == sorted(
        TensorDict(_data(), [3]).keys(True, True), key=str
    )
    assert (td == "z") is False
    assert (td != "z") is True
    assert (td == None) is False  # noqa: E711 - __eq__ with None
    assert (td == 0)["a"].all()
    assert not (td == 0)["n", "b"].any()
    assert (td != TensorDict(_data(), [3])).any() is False
    assert (td == TensorDict(_data(), [3])).all()
    assert (td == torch.zeros(3, 1)).batch_size == (3, 3)
    with pytest.raises(KeyError):
        td == {"a": torch.zeros(3, 4)}  # noqa: B015
    with pytest.warns(FutureWarning):
        assert (td < "z") is False


def test_equality_matches_tensordict() -> None:
    tdm = pytest.importorskip("tensordict")
    ref, ours = tdm.TensorDict(_data(), [3]), TensorDict(_data(), [3])
    for other in (0, 1.0, torch.zeros(3, 1), _data()):
        r, o = ref == other, ours == other
        assert r.batch_size == o.batch_size
        for key in r.keys(True, True):
            assert torch.equal(r[key], o[key])
    assert (ref == "z") == (ours == "z")
    assert (ref != None) == (ours != None)  # noqa: E711 - __ne__ with None


# ------------------------------------------------------------------------------ keys
def test_nested_tuple_keys(make: Callable[..., Any], kind: str) -> None:
    td = make()
    assert torch.equal(td[("n", ("b",))], torch.ones(3))
    assert torch.equal(td[(("n", "m"), "c")], torch.arange(3))
    assert ("n", ("m", ("c",))) in td
    if kind == "memory":
        td[("n", ("q",))] = torch.zeros(3)
    else:
        td.set(("n", ("q",)), torch.zeros(3))
    assert ("n", "q") in td.keys(True)


# ------------------------------------------------------------------------------ names
def test_names_rules(make: Callable[..., Any]) -> None:
    td = make(batch_size=(3,))
    assert td.names == [None]
    td.names = ["t"]
    assert td.names == ["t"]
    assert td["n"].names == ["t"]
    assert td["n", "m"].names == ["t"]
    assert td[0:2].names == ["t"]
    assert td[[0, 2]].names == ["t"]
    assert td[0].names == []
    with pytest.raises(ValueError, match="length of the dimension names"):
        td.names = ["t", "u"]
    with pytest.raises(RuntimeError, match="cannot coerce"):
        td.refine_names("u")
    assert td.refine_names(None).names == ["t"]
    renamed = td.rename("v")
    assert renamed.names == ["v"]
    assert td.names == ["t"]
    assert td.rename(t="w").names == ["w"]
    td.rename_("x")
    assert td.names == ["x"]
    td.names = None
    assert td.names == [None]


def test_names_survive_a_round_trip(tmp_path: Path, backend: str) -> None:
    path = str(tmp_path / f"n.{'h5' if backend == 'h5' else 'zarr'}")
    p = PersistentTensorDict.from_dict(TensorDict(_data(), [3]), path, backend=backend)
    p.names = ["time"]
    p.close()
    opener = PersistentTensorDict.from_h5 if backend == "h5" else PersistentTensorDict.from_zarr
    q = opener(path)
    assert q.names == ["time"]
    assert q["n"].names == ["time"]
    assert q.to_tensordict().names == ["time"]
    q.close()
    if backend == "zarr":
        tdm = pytest.importorskip("tensordict")
        attrs = json.loads((Path(path) / "zarr.json").read_text())["attributes"]
        assert attrs["__tensordict__"]["names"] == ["time"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = tdm.PersistentTensorDict.from_zarr(path)
            assert ref.names == ["time"]
            ref.close()


def test_names_on_tensordict_match_tensordict() -> None:
    tdm = pytest.importorskip("tensordict")
    ref = tdm.TensorDict({"a": torch.zeros(3, 4)}, [3, 4])
    ours = TensorDict({"a": torch.zeros(3, 4)}, [3, 4])
    for td in (ref, ours):
        td.names = ["x", None]
    for index in (0, (slice(None), 0), None, [0, 1], (None, Ellipsis, 1)):
        assert ref[index].names == ours[index].names, index
    ref.refine_names(..., "y")
    ours.refine_names(..., "y")
    assert ref.names == ours.names
    assert ref.rename(x="X").names == ours.rename(x="X").names


# ------------------------------------------------------------------------------ apply
def test_apply_flags(make: Callable[..., Any], kind: str) -> None:
    td = make()
    assert td.apply(lambda x: None, filter_empty=True) is None
    assert td.apply(lambda x: None) is None
    kept = td.apply(lambda x: None, filter_empty=False)
    assert list(kept.keys(True, True)) == []
    assert "n" in kept.keys()
    some = td.apply(lambda x: x if x.ndim == 2 else None, filter_empty=True)
    assert list(some.keys()) == ["a"]
    keys: list[Any] = []
    td.named_apply(lambda k, x: keys.append(k) or x)
    assert sorted(keys) == ["a", "b", "c"]
    keys.clear()
    td.named_apply(lambda k, x: keys.append(k) or x, nested_keys=True)
    assert sorted(keys, key=str) == [("n", "b"), ("n", "m", "c"), "a"]
    assert td.apply(lambda x: x, names=["t"]).names == ["t"]
    assert td.apply(lambda x: x[:2], batch_size=[2]).batch_size == (2,)
    got = td.apply(lambda x, y: x + y, {"a": torch.ones(3, 4), "n": {"b": 1, "m": {"c": 2}}})
    assert got["a"].sum() == 12
    assert got["n", "m", "c"][0] == 2
    with pytest.raises(KeyError):
        td.apply(lambda x, y: x, {"a": torch.ones(3, 4)})
    got = td.apply(lambda x, y: x if y is None else x + y, {"a": 1}, default=None)
    assert got["a"].sum() == 12
    assert torch.equal(got["n", "b"], torch.ones(3))
    assert td.apply(lambda x, y, z: x + y + z, td, td)["n", "b"][0] == 3
    nested = td.apply(lambda x: x, call_on_nested=True)
    assert "b" in nested["n"].keys()


def test_apply_inplace_returns_self_and_uses_matching_entries(make: Callable[..., Any]) -> None:
    td = make()
    out = td.apply(
        lambda x, y: x + y, {"a": torch.ones(3, 4), "n": {"b": 1, "m": {"c": 1}}}, inplace=True
    )
    assert out is td
    assert td["a"].sum() == 12
    assert td["n", "b"][0] == 2
    assert td["n", "m", "c"][0] == 1
    assert td.named_apply(lambda k, x: x * 0, inplace=True) is td
    assert td["a"].sum() == 0


def test_apply_matches_tensordict() -> None:
    tdm = pytest.importorskip("tensordict")
    ref, ours = tdm.TensorDict(_data(), [3]), TensorDict(_data(), [3])
    for kw in ({"filter_empty": True}, {"filter_empty": False}, {}):
        r = ref.apply(lambda x: x if x.dtype == torch.int64 else None, **kw)
        o = ours.apply(lambda x: x if x.dtype == torch.int64 else None, **kw)
        assert (r is None) == (o is None), kw
        if r is not None:
            assert sorted(map(str, r.keys(True))) == sorted(map(str, o.keys(True))), kw
