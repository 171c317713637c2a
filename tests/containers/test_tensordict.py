"""ptd.TensorDict: the in-memory container (issue item 2).

Leaves are compared against plain torch on the same tensors; where it is cheap, tensordict 0.15
is used as an oracle (skipped when it is not installed).
"""

from __future__ import annotations

import operator

import pytest
import torch

import ptd
from ptd import TensorDict
from ptd.errors import ArgumentError, BatchSizeError, KeysMismatchError, PtdError, PtdKeyError

# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def leaves(td) -> dict:
    """``{"a": t, "n.b": t, ...}``: every tensor leaf by its dotted key."""
    return {".".join(k) if isinstance(k, tuple) else k: td.get(k) for k in td.keys(True, True)}


def raw() -> dict:
    g = torch.Generator().manual_seed(0)
    return {
        "a": torch.randn(3, 4, generator=g),
        "b": torch.arange(3),
        "n": {
            "c": torch.arange(6, dtype=torch.int32).reshape(3, 2),
            "m": {"d": torch.tensor([True, False, True])},
        },
    }


def flat_raw() -> dict:
    r = raw()
    return {"a": r["a"], "b": r["b"], "n.c": r["n"]["c"], "n.m.d": r["n"]["m"]["d"]}


@pytest.fixture
def td() -> TensorDict:
    return TensorDict(raw(), batch_size=[3])


@pytest.fixture
def td2d() -> TensorDict:
    g = torch.Generator().manual_seed(1)
    return TensorDict(
        {
            "x": torch.randn(2, 3, 4, generator=g),
            "y": torch.arange(6).reshape(2, 3),
            "n": {"z": torch.randn(2, 3, 5, generator=g)},
        },
        batch_size=[2, 3],
    )


def batch_index(idx, nbatch: int):
    """``idx`` with its Ellipsis expanded over the batch dims only (so that it can index leaves
    that have more dims)."""
    items = list(idx) if isinstance(idx, tuple) else [idx]
    if not any(i is Ellipsis for i in items):
        return idx
    used = sum(
        i.ndim if isinstance(i, torch.Tensor) and i.dtype == torch.bool else 1
        for i in items
        if i is not Ellipsis and i is not None
    )
    pos = next(k for k, i in enumerate(items) if i is Ellipsis)
    items[pos : pos + 1] = [slice(None)] * (nbatch - used)
    return tuple(items)


def assert_leaves(td, expected: dict) -> None:
    got = leaves(td)
    assert sorted(got) == sorted(expected)
    for k, v in expected.items():
        assert got[k].dtype == v.dtype, k
        assert got[k].shape == v.shape, k
        assert torch.equal(got[k], v), k


# --------------------------------------------------------------------------------------------
# construction, batch size, device
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bs", [[3], (3,), torch.Size([3]), 3])
def test_batch_size_is_torch_size(bs) -> None:
    t = TensorDict({"a": torch.zeros(3, 2)}, batch_size=bs)
    assert isinstance(t.batch_size, torch.Size)
    assert t.batch_size == torch.Size([3])


def test_default_batch_size_is_empty() -> None:
    t = TensorDict({"a": torch.zeros(3, 2)})
    assert t.batch_size == torch.Size([])
    assert t.ndim == 0
    assert t.numel() == 1
    assert len(t) == 0


def test_constructor_checks_batch_size() -> None:
    with pytest.raises(ValueError, match="batch") as info:
        TensorDict({"a": torch.zeros(3, 2)}, batch_size=[4])
    assert isinstance(info.value, PtdError)
    assert isinstance(info.value, BatchSizeError)
    assert "'a'" in str(info.value)


def test_nested_dict_becomes_tensordict(td) -> None:
    assert isinstance(td["n"], TensorDict)
    assert td["n"].batch_size == torch.Size([3])
    assert isinstance(td["n", "m"], TensorDict)
    assert td["n", "m"].batch_size == torch.Size([3])


def test_set_checks_batch_size_every_time(td) -> None:
    with pytest.raises(ValueError, match="batch"):
        td["x"] = torch.zeros(2)
    with pytest.raises(ValueError, match="batch"):
        td["n", "x"] = torch.zeros(4, 3)
    with pytest.raises(ValueError, match="batch"):
        td.set("y", torch.zeros(()))
    with pytest.raises(BatchSizeError):
        td.update({"z": torch.zeros(5)})
    assert "x" not in td
    assert ("n", "x") not in td
    assert "y" not in td
    assert "z" not in td
    td["ok"] = torch.zeros(3, 7)
    assert td["ok"].shape == (3, 7)


def test_batch_size_setter(td) -> None:
    td.batch_size = []
    assert td.batch_size == torch.Size([])
    td.batch_size = torch.Size([3])
    assert td.batch_size == torch.Size([3])
    with pytest.raises(BatchSizeError):
        td.batch_size = [4]
    assert td.batch_size == torch.Size([3])
    t = TensorDict({"a": torch.zeros(3, 4)}, batch_size=[3])
    t.batch_size = [3, 4]
    assert t.batch_size == torch.Size([3, 4])
    assert t.ndim == 2
    assert t.numel() == 12


def test_device() -> None:
    t = TensorDict({"a": torch.zeros(2)}, batch_size=[2])
    assert t.device is None
    t = TensorDict({"a": torch.zeros(2)}, batch_size=[2], device="cpu")
    assert t.device == torch.device("cpu")
    assert t["a"].device == torch.device("cpu")
    t["b"] = torch.ones(2)
    assert t["b"].device.type == "cpu"
    assert "device=cpu" in repr(t)


def test_kwargs_entries() -> None:
    t = TensorDict(batch_size=[2], a=torch.zeros(2), b=torch.ones(2, 3))
    assert sorted(t.keys()) == ["a", "b"]


# --------------------------------------------------------------------------------------------
# keys, contains, get/set/del/pop/update
# --------------------------------------------------------------------------------------------


def test_keys_variants(td) -> None:
    assert list(td.keys()) == ["a", "b", "n"]
    assert set(td.keys(include_nested=True)) == {
        "a",
        "b",
        "n",
        ("n", "c"),
        ("n", "m"),
        ("n", "m", "d"),
    }
    assert set(td.keys(include_nested=True, leaves_only=True)) == {
        "a",
        "b",
        ("n", "c"),
        ("n", "m", "d"),
    }
    assert set(td.keys(leaves_only=True)) == {"a", "b"}
    assert len(td.keys(True, True)) == 4
    assert ("n", "c") in td.keys(True)
    assert ("n", "c") not in td.keys()


@pytest.mark.interop
def test_keys_match_tensordict_oracle(td) -> None:
    tensordict = pytest.importorskip("tensordict")
    ref = tensordict.TensorDict(raw(), batch_size=[3])
    for inc in (False, True):
        for lo in (False, True):
            assert set(td.keys(inc, lo)) == set(ref.keys(inc, lo)), (inc, lo)


def test_values_and_items(td) -> None:
    items = dict(td.items(True, True))
    assert set(items) == {"a", "b", ("n", "c"), ("n", "m", "d")}
    assert torch.equal(items[("n", "c")], raw()["n"]["c"])
    vals = list(td.values(True, True))
    assert len(vals) == 4
    assert all(isinstance(v, torch.Tensor) for v in vals)
    vals = list(td.values())
    assert isinstance(vals[2], TensorDict)


def test_string_and_tuple_keys(td) -> None:
    assert torch.equal(td["n", "c"], raw()["n"]["c"])
    assert torch.equal(td[("n", "m", "d")], td["n"]["m"]["d"])
    assert torch.equal(td.get(("n", ("m", "d"))), td["n", "m", "d"])
    td["p", "q"] = torch.ones(3)
    assert isinstance(td["p"], TensorDict)
    assert td["p"].batch_size == torch.Size([3])
    assert torch.equal(td["p"]["q"], torch.ones(3))


@pytest.mark.parametrize(
    ("key", "present"),
    [
        ("a", True),
        ("n", True),
        (("n",), True),
        (("n", "c"), True),
        (("n", "m", "d"), True),
        ("c", False),
        (("n", "x"), False),
        (("a", "x"), False),
        (("x", "y"), False),
        ("", False),
    ],
)
def test_contains(td, key, present) -> None:
    assert (key in td) is present


def test_get_missing(td) -> None:
    # tensordict 0.15: get() of a missing key gives None; td[key] raises KeyError
    assert td.get("zz") is None
    with pytest.raises(KeyError) as info:
        td["zz"]
    assert isinstance(info.value, PtdKeyError)
    assert "zz" in str(info.value)
    with pytest.raises(KeyError, match="zz"):
        td["n", "zz"]
    with pytest.raises(KeyError):
        td["zz", "yy"]
    assert td.get("zz", 5) == 5
    assert td.get(("n", "zz"), None) is None


def test_del_and_pop(td) -> None:
    del td["a"]
    assert "a" not in td
    del td["n", "m"]
    assert ("n", "m") not in td
    assert ("n", "c") in td
    with pytest.raises(KeyError):
        del td["a"]
    b = td.pop("b")
    assert torch.equal(b, torch.arange(3))
    assert "b" not in td
    assert td.pop("b", 7) == 7
    with pytest.raises(KeyError):
        td.pop("b")
    c = td.pop(("n", "c"))
    assert c.shape == (3, 2)
    assert list(td.keys(True)) == ["n"]


def test_update(td) -> None:
    td.update(
        {
            "a": torch.zeros(3, 4),
            "n": {"c": torch.zeros(3, 2, dtype=torch.int32), "new": torch.ones(3)},
        }
    )
    assert torch.equal(td["a"], torch.zeros(3, 4))
    assert torch.equal(td["n", "c"], torch.zeros(3, 2, dtype=torch.int32))
    assert ("n", "new") in td
    assert ("n", "m", "d") in td  # nested dicts merge, they do not replace
    other = TensorDict({"b": torch.full((3,), 9)}, batch_size=[3])
    td.update(other)
    assert torch.equal(td["b"], torch.full((3,), 9))


def test_update_inplace_writes_into_existing(td) -> None:
    a = td["a"]
    td.update_({"a": torch.ones(3, 4), "n": {"c": torch.full((3, 2), 5, dtype=torch.int32)}})
    assert a is td["a"]  # same tensor, written in place
    assert torch.equal(a, torch.ones(3, 4))
    assert torch.equal(td["n", "c"], torch.full((3, 2), 5, dtype=torch.int32))
    with pytest.raises(KeyError):
        td.update_({"missing": torch.ones(3)})


def test_rename_key(td) -> None:
    a = td["a"]
    td.rename_key_("a", "z")
    assert "a" not in td
    assert td["z"] is a
    td.rename_key_(("n", "c"), ("n", "cc"))
    assert ("n", "cc") in td
    assert ("n", "c") not in td
    with pytest.raises(KeyError):
        td.rename_key_("z", "b", safe=True)
    assert "z" in td
    td.rename_key_("z", "b")
    assert td["b"] is a
    with pytest.raises(KeyError):
        td.rename_key_("nope", "x")


def test_setdefault(td) -> None:
    a = td["a"]
    assert td.setdefault("a", torch.zeros(3, 4)) is a
    out = td.setdefault("new", torch.ones(3))
    assert torch.equal(out, torch.ones(3))
    assert "new" in td
    with pytest.raises(BatchSizeError):
        td.setdefault("bad", torch.ones(2))


def test_len_and_iteration(td, td2d) -> None:
    assert len(td) == 3
    rows = list(td)
    assert len(rows) == 3
    for i, row in enumerate(rows):
        assert row.batch_size == torch.Size([])
        assert torch.equal(row["a"], td["a"][i])
        assert torch.equal(row["n", "m", "d"], td["n", "m", "d"][i])
    assert len(td2d) == 2
    assert [r.batch_size for r in td2d] == [torch.Size([3])] * 2
    with pytest.raises(TypeError):
        list(TensorDict({"a": torch.zeros(())}))


# --------------------------------------------------------------------------------------------
# indexing
# --------------------------------------------------------------------------------------------

INDICES_1D = [
    0,
    -1,
    2,
    slice(None),
    slice(1, None),
    slice(0, 3, 2),
    slice(2, 1),
    [2, 0],
    [1, 1, 0],
    torch.tensor([2, 0, 2]),
    torch.tensor(1),
    torch.tensor([True, False, True]),
    [True, False, True],
    ...,
    None,
    (None, 0),
    (..., 1),
    (slice(None), None),
]


@pytest.mark.parametrize("idx", INDICES_1D, ids=repr)
def test_index_1d_matches_torch(td, idx) -> None:
    sub = td[idx]
    expected_bs = torch.empty(3)[idx].shape
    assert sub.batch_size == expected_bs
    exp = {k: v[batch_index(idx, 1)] for k, v in flat_raw().items()}
    assert_leaves(sub, exp)
    assert sub["n"].batch_size == expected_bs


INDICES_2D = [
    (0, 1),
    (1,),
    (slice(None), 2),
    (..., 0),
    (0, ...),
    (slice(None), [2, 0]),
    ([1, 0], slice(1, 3)),
    ([0, 1], [2, 0]),
    (torch.tensor([[True, False, True], [False, True, False]]),),
    (torch.tensor([True, False]), slice(None)),
    (slice(None), torch.tensor([True, False, True])),
    (None, 1, ...),
    (1, None),
    (..., None),
]


@pytest.mark.parametrize("idx", INDICES_2D, ids=repr)
def test_index_2d_matches_torch(td2d, idx) -> None:
    sub = td2d[idx]
    expected_bs = torch.empty(2, 3)[idx].shape
    assert sub.batch_size == expected_bs
    for k in ("x", "y", ("n", "z")):
        assert torch.equal(sub[k], td2d[k][batch_index(idx, 2)]), k


def test_index_empty_list(td) -> None:
    sub = td[[]]
    assert sub.batch_size == torch.Size([0])
    assert sub["a"].shape == (0, 4)


def test_index_mask_of_wrong_length(td) -> None:
    with pytest.raises(IndexError):
        td[torch.tensor([True, False])]


def test_index_out_of_bounds(td) -> None:
    with pytest.raises(IndexError):
        td[3]
    with pytest.raises(IndexError):
        td[[0, 5]]
    with pytest.raises(IndexError):
        td[0, 0]


@pytest.mark.parametrize(
    "idx",
    [1, slice(0, 2), [2, 0], torch.tensor([0, 2]), torch.tensor([True, False, True]), ...],
    ids=repr,
)
def test_index_assignment_scalar(td, idx) -> None:
    exp = flat_raw()
    for v in exp.values():
        v[idx] = 0
    td[idx] = 0
    assert_leaves(td, exp)


@pytest.mark.parametrize(
    "idx", [1, slice(1, 3), [2, 0], torch.tensor([True, False, True])], ids=repr
)
def test_index_assignment_tensordict(td, idx) -> None:
    n = torch.empty(3)[idx].shape
    value = TensorDict(
        {
            "a": torch.full(n + (4,), 7.0),
            "b": torch.full(n, 8),
            "n": {"c": torch.full(n + (2,), 9, dtype=torch.int32)},
        },
        batch_size=n,
    )
    exp = flat_raw()
    exp["a"][idx] = 7.0
    exp["b"][idx] = 8
    exp["n.c"][idx] = 9
    td[idx] = value
    assert_leaves(td, exp)  # keys missing from the value ("n.m.d") are left alone


def test_index_assignment_dict_broadcasts(td) -> None:
    exp = flat_raw()
    exp["a"][1:] = torch.arange(4.0)
    td[1:] = {"a": torch.arange(4.0)}
    assert_leaves(td, exp)


def test_index_assignment_2d(td2d) -> None:
    x, y = td2d["x"].clone(), td2d["y"].clone()
    mask = torch.tensor([[True, False, True], [False, False, True]])
    td2d[mask] = 0
    x[mask] = 0
    y[mask] = 0
    assert torch.equal(td2d["x"], x)
    assert torch.equal(td2d["y"], y)
    td2d[:, 1] = 5
    x[:, 1] = 5
    assert torch.equal(td2d["x"], x)


# --------------------------------------------------------------------------------------------
# apply, conversions
# --------------------------------------------------------------------------------------------


def test_apply(td) -> None:
    out = td.apply(lambda t: t * 2)
    assert isinstance(out, TensorDict)
    assert_leaves(out, {k: v * 2 for k, v in flat_raw().items()})
    assert_leaves(td, flat_raw())  # unchanged


def test_apply_with_other(td) -> None:
    out = td.apply(lambda a, b: a + b, td)
    assert_leaves(out, {k: v + v for k, v in flat_raw().items()})


def test_apply_inplace(td) -> None:
    a = td["a"]
    res = td.apply_(lambda t: t + 1)
    assert res is td
    assert td["a"] is a
    assert_leaves(td, {k: (v + 1).to(v.dtype) for k, v in flat_raw().items()})


def test_to_dtype_and_device(td) -> None:
    out = td.to(torch.float64)
    assert all(v.dtype == torch.float64 for v in leaves(out).values())
    assert out.batch_size == td.batch_size
    out = td.to("cpu")
    assert out.device == torch.device("cpu")
    assert_leaves(out, flat_raw())
    out = td.to(torch.device("cpu"), torch.float16)
    assert out.device == torch.device("cpu")
    assert out["a"].dtype == torch.float16


def test_clone_is_deep(td) -> None:
    c = td.clone()
    assert isinstance(c, TensorDict)
    assert_leaves(c, flat_raw())
    c["a"][0] = 100.0
    c["n", "c"].zero_()
    assert_leaves(td, flat_raw())
    c["new"] = torch.zeros(3)
    assert "new" not in td


def test_to_dict(td) -> None:
    d = td.to_dict()
    assert isinstance(d, dict)
    assert isinstance(d["n"], dict)
    assert isinstance(d["n"]["m"], dict)
    assert torch.equal(d["n"]["m"]["d"], raw()["n"]["m"]["d"])
    assert sorted(d) == ["a", "b", "n"]
    rebuilt = TensorDict(d, batch_size=[3])
    assert_leaves(rebuilt, flat_raw())


# --------------------------------------------------------------------------------------------
# arithmetic and comparison
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "op", [operator.add, operator.sub, operator.mul, operator.truediv], ids=lambda o: o.__name__
)
def test_arithmetic_with_scalar_and_td(op) -> None:
    x = TensorDict(
        {"a": torch.arange(1.0, 7.0).reshape(3, 2), "n": {"b": torch.arange(1.0, 4.0)}},
        batch_size=[3],
    )
    y = TensorDict(
        {"a": torch.full((3, 2), 2.0), "n": {"b": torch.full((3,), 4.0)}}, batch_size=[3]
    )
    out = op(x, 2.0)
    assert isinstance(out, TensorDict)
    assert torch.equal(out["a"], op(x["a"], 2.0))
    assert torch.equal(out["n", "b"], op(x["n", "b"], 2.0))
    out = op(x, y)
    assert torch.equal(out["a"], op(x["a"], y["a"]))
    assert torch.equal(out["n", "b"], op(x["n", "b"], y["n", "b"]))
    out = op(3.0, x)
    assert torch.equal(out["a"], op(3.0, x["a"]))


@pytest.mark.parametrize("name", ["add_", "sub_", "mul_", "div_"])
def test_inplace_arithmetic(name) -> None:
    x = TensorDict(
        {"a": torch.arange(1.0, 7.0).reshape(3, 2), "n": {"b": torch.arange(1.0, 4.0)}},
        batch_size=[3],
    )
    a = x["a"]
    expected = getattr(x["a"].clone(), name)(2.0)
    assert getattr(x, name)(2.0) is x
    assert x["a"] is a
    assert torch.equal(x["a"], expected)
    y = x.clone()
    getattr(x, name)(y)
    assert torch.equal(x["n", "b"], getattr(y["n", "b"].clone(), name)(y["n", "b"]))


def test_iadd() -> None:
    x = TensorDict({"a": torch.ones(3)}, batch_size=[3])
    x += 1
    assert torch.equal(x["a"], torch.full((3,), 2.0))


def test_zero_fill_clamp(td) -> None:
    td.fill_("a", 3.0)
    assert torch.equal(td["a"], torch.full((3, 4), 3.0))
    td.fill_("n", 2)
    assert torch.equal(td["n", "c"], torch.full((3, 2), 2, dtype=torch.int32))
    assert torch.equal(td["n", "m", "d"], torch.ones(3, dtype=torch.bool))
    # as torch (and tensordict's clamp_max_), an in-place clamp refuses the bool leaf, and
    # refuses it before writing anything
    with pytest.raises(RuntimeError, match="can't be cast"):
        td.clamp_(max=1)
    assert torch.equal(td["a"], torch.full((3, 4), 3.0))
    td.zero_()
    assert all(not v.any() for v in leaves(td).values())
    assert td["b"].dtype == torch.int64


def test_clamp_min_max() -> None:
    x = TensorDict({"a": torch.linspace(-2, 2, 5)}, batch_size=[5])
    x.clamp_(min=-1.0, max=0.5)
    assert torch.equal(x["a"], torch.linspace(-2, 2, 5).clamp(-1.0, 0.5))


@pytest.mark.parametrize(
    "op", [operator.eq, operator.ne, operator.lt, operator.ge], ids=lambda o: o.__name__
)
def test_comparisons(td, op) -> None:
    other = td.clone()
    other["a"][0] = 5.0
    out = op(td, other)
    assert isinstance(out, TensorDict)
    for k, v in leaves(out).items():
        assert v.dtype == torch.bool
        assert torch.equal(v, op(leaves(td)[k], leaves(other)[k])), k


def test_equality_all_any(td) -> None:
    assert (td == td.clone()).all()
    assert not (td != td.clone()).any()
    other = td.clone()
    other["n", "c"][1, 0] = 99
    assert not (td == other).all()
    assert (td == other).any()
    assert (td != other).any()
    assert (td == 0).any()  # b[0] == 0
    assert not (td == 12345).any()


def test_all_any_values() -> None:
    t = TensorDict(
        {"a": torch.ones(2, 2, dtype=torch.bool), "n": {"b": torch.tensor([1, 1])}}, batch_size=[2]
    )
    assert t.all() is True or t.all() == True  # noqa: E712
    t["n", "b"][0] = 0
    assert not t.all()
    assert t.any()
    t.zero_()
    assert not t.any()


def test_bool_of_tensordict_raises(td) -> None:
    with pytest.raises(RuntimeError):
        bool(td == td)


# --------------------------------------------------------------------------------------------
# unbind / split / chunk / stack / cat
# --------------------------------------------------------------------------------------------


def test_unbind(td2d) -> None:
    for dim in (0, 1, -1):
        parts = td2d.unbind(dim)
        ref = td2d["x"].unbind(dim % 2)
        assert len(parts) == len(ref)
        for p, r in zip(parts, ref, strict=True):
            assert torch.equal(p["x"], r)
            assert p.batch_size == r.shape[:1]
    parts = torch.unbind(td2d, 1)
    assert len(parts) == 3
    assert torch.equal(parts[2]["n", "z"], td2d["n", "z"][:, 2])


@pytest.mark.parametrize(("size", "dim"), [(1, 0), (2, 1), ([1, 2], 1), (3, 1)])
def test_split(td2d, size, dim) -> None:
    parts = td2d.split(size, dim)
    ref = td2d["x"].split(size, dim)
    assert [p.batch_size for p in parts] == [r.shape[:2] for r in ref]
    for p, r in zip(parts, ref, strict=True):
        assert torch.equal(p["x"], r)


@pytest.mark.parametrize(("chunks", "dim"), [(2, 0), (2, 1), (3, 1), (5, 1)])
def test_chunk(td2d, chunks, dim) -> None:
    parts = td2d.chunk(chunks, dim)
    ref = td2d["y"].chunk(chunks, dim)
    assert len(parts) == len(ref)
    for p, r in zip(parts, ref, strict=True):
        assert torch.equal(p["y"], r)
        assert p.batch_size == r.shape


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_torch_stack(td2d, dim) -> None:
    other = td2d + 1
    out = torch.stack([td2d, other], dim)
    assert isinstance(out, TensorDict)
    assert out.batch_size == torch.stack([td2d["y"], other["y"]], dim).shape
    for k in ("x", "y", ("n", "z")):
        assert torch.equal(
            out[k], torch.stack([td2d[k], other[k]], dim if dim >= 0 else dim - td2d[k].ndim + 2)
        )


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_torch_cat(td2d, dim) -> None:
    other = td2d * 2
    out = torch.cat([td2d, other], dim)
    d = dim % 2
    assert out.batch_size == torch.cat([td2d["y"], other["y"]], d).shape
    for k in ("x", "y", ("n", "z")):
        assert torch.equal(out[k], torch.cat([td2d[k], other[k]], d))


def test_stack_mismatch_raises(td2d) -> None:
    with pytest.raises(ArgumentError):
        torch.stack([td2d, td2d[0]])
    with pytest.raises(KeysMismatchError):
        torch.cat([td2d, td2d.exclude("x")])


# --------------------------------------------------------------------------------------------
# shape operations on the batch dims
# --------------------------------------------------------------------------------------------

SHAPE_OPS = [
    ("reshape", (6,)),
    ("reshape", (3, 2)),
    ("reshape", (-1,)),
    ("view", (3, 2)),
    ("view", (6, 1)),
    ("unsqueeze", (0,)),
    ("unsqueeze", (2,)),
    ("unsqueeze", (-1,)),
    ("permute", (1, 0)),
    ("transpose", (0, 1)),
    ("expand", (4, 2, 3)),
    ("flatten", (0, 1)),
]


@pytest.mark.parametrize(("name", "args"), SHAPE_OPS, ids=lambda x: repr(x))
def test_shape_ops(td2d, name, args) -> None:
    out = getattr(td2d, name)(*args)
    probe = getattr(torch.empty(2, 3), name)(*args)
    assert out.batch_size == probe.shape
    nb = len(probe.shape)
    for k in ("x", "y", ("n", "z")):
        leaf = td2d[k]
        feat = leaf.shape[2:]
        if name in ("reshape", "view"):
            exp = getattr(leaf, name)(*(tuple(probe.shape) + tuple(feat)))
        elif name == "permute":
            exp = leaf.permute(*args, *range(2, leaf.ndim))
        elif name == "expand":
            exp = leaf.expand(*(args + tuple(feat)))
        elif name == "unsqueeze" and args[0] < 0:
            exp = leaf.unsqueeze(args[0] + 3)  # -1 on the batch dims
        else:
            exp = getattr(leaf, name)(*args)
        assert out[k].shape[:nb] == probe.shape
        assert torch.equal(out[k], exp), k


def test_squeeze() -> None:
    t = TensorDict({"a": torch.arange(6.0).reshape(1, 3, 1, 2)}, batch_size=[1, 3, 1])
    assert t.squeeze().batch_size == torch.Size([3])
    assert torch.equal(t.squeeze()["a"], torch.arange(6.0).reshape(3, 2))
    assert t.squeeze(0).batch_size == torch.Size([3, 1])
    assert t.squeeze(-1).batch_size == torch.Size([1, 3])
    assert t.squeeze(-1)["a"].shape == (1, 3, 2)
    assert t.squeeze(1).batch_size == torch.Size([1, 3, 1])


@pytest.mark.interop
def test_shape_ops_match_tensordict_oracle(td2d) -> None:
    tensordict = pytest.importorskip("tensordict")
    ref = tensordict.TensorDict(td2d.to_dict(), batch_size=[2, 3])
    for name, args in SHAPE_OPS:
        if name == "flatten":
            continue
        a, b = getattr(td2d, name)(*args), getattr(ref, name)(*args)
        assert a.batch_size == b.batch_size, name
        for k in b.keys(True, True):
            assert torch.equal(a[k], b[k]), (name, k)


# --------------------------------------------------------------------------------------------
# select / exclude / flatten_keys
# --------------------------------------------------------------------------------------------


def test_select_exclude(td) -> None:
    s = td.select("a", ("n", "m", "d"))
    assert set(s.keys(True, True)) == {"a", ("n", "m", "d")}
    assert s.batch_size == td.batch_size
    assert torch.equal(s["a"], td["a"])
    assert torch.equal(s["n", "m", "d"], td["n", "m", "d"])
    e = td.exclude("b", ("n", "c"))
    assert set(e.keys(True, True)) == {"a", ("n", "m", "d")}
    assert "b" in td
    assert ("n", "c") in td
    with pytest.raises(KeyError):
        td.select("nope")
    assert set(td.select("nope", strict=False).keys()) == set()


@pytest.mark.parametrize("sep", [".", "/", "__"])
def test_flatten_unflatten_keys(td, sep) -> None:
    f = td.flatten_keys(sep)
    assert sorted(f.keys()) == sorted(["a", "b", f"n{sep}c", f"n{sep}m{sep}d"])
    assert all(isinstance(k, str) for k in f.keys(True))
    assert torch.equal(f[f"n{sep}m{sep}d"], td["n", "m", "d"])
    u = f.unflatten_keys(sep)
    assert set(u.keys(True, True)) == set(td.keys(True, True))
    assert_leaves(u, flat_raw())


@pytest.mark.interop
def test_flatten_keys_matches_tensordict_oracle(td) -> None:
    tensordict = pytest.importorskip("tensordict")
    ref = tensordict.TensorDict(raw(), batch_size=[3]).flatten_keys("_")
    assert sorted(td.flatten_keys("_").keys()) == sorted(ref.keys())


# --------------------------------------------------------------------------------------------
# is_empty, numel, ndim
# --------------------------------------------------------------------------------------------


def test_is_empty_numel_ndim(td, td2d) -> None:
    assert not td.is_empty()
    assert TensorDict({}, batch_size=[3]).is_empty()
    assert TensorDict({"n": {}}, batch_size=[3]).is_empty()
    assert td.numel() == 3
    assert td2d.numel() == 6
    assert td.ndim == 1
    assert td2d.ndim == 2
    assert TensorDict({}, batch_size=[4, 0]).numel() == 0


# --------------------------------------------------------------------------------------------
# repr
# --------------------------------------------------------------------------------------------

REPR_CASES = [
    (lambda: TensorDict({}, batch_size=[]), "TensorDict(batch_size=[], fields={})"),
    (
        lambda: TensorDict({"key1": torch.zeros(3), "key2": torch.zeros(3)}, batch_size=[3]),
        "TensorDict(batch_size=[3], fields={key1: f32[], key2: f32[]})",
    ),
    (
        lambda: TensorDict({"a": torch.zeros(3, 4), "n": {"b": torch.arange(3)}}, batch_size=[3]),
        "TensorDict(batch_size=[3], fields={a: f32[4], n: {b: i64[]}})",
    ),
    (
        lambda: TensorDict(
            {
                "z": torch.zeros(2, 3, 5, dtype=torch.bool),
                "c": torch.zeros(2, 3, dtype=torch.complex64),
                "u": torch.zeros(2, 3, dtype=torch.uint8),
                "h": torch.zeros(2, 3, 1, dtype=torch.bfloat16),
            },
            batch_size=[2, 3],
        ),
        "TensorDict(batch_size=[2,3], fields={c: c64[], h: bf16[1], u: u8[], z: bool[5]})",
    ),
    (
        lambda: TensorDict({"a": torch.zeros(3)}, batch_size=[3], device="cpu"),
        "TensorDict(batch_size=[3], device=cpu, fields={a: f32[]})",
    ),
    (
        lambda: TensorDict(
            {"n": TensorDict({"b": torch.zeros(3, 5)}, batch_size=[3, 5])}, batch_size=[3]
        ),
        "TensorDict(batch_size=[3], fields={n: [5]{b: f32[]}})",
    ),
]


@pytest.mark.parametrize(("make", "expected"), REPR_CASES)
def test_repr_exact(make, expected) -> None:
    assert repr(make()) == expected


def test_repr_multiline_above_80_columns() -> None:
    t = TensorDict({f"a_long_key_{i}": torch.zeros(3, 2) for i in range(4)}, batch_size=[3])
    assert repr(t) == (
        "TensorDict(batch_size=[3], fields={\n"
        "    a_long_key_0: f32[2],\n"
        "    a_long_key_1: f32[2],\n"
        "    a_long_key_2: f32[2],\n"
        "    a_long_key_3: f32[2]})"
    )


@pytest.mark.interop
def test_repr_matches_tensordict_oracle() -> None:
    tensordict = pytest.importorskip("tensordict")
    cases = [
        (
            {
                "b": torch.zeros(3, 2),
                "a": {"x": torch.arange(3), "y": torch.zeros(3, 1, dtype=torch.float16)},
            },
            [3],
        ),
        ({f"a_long_key_{i}": torch.zeros(3, 2) for i in range(4)}, [3]),
        ({"x": torch.zeros(2, 4, dtype=torch.int8)}, [2, 4]),
    ]
    for data, bs in cases:
        assert repr(TensorDict(data, batch_size=bs)) == repr(
            tensordict.TensorDict(data, batch_size=bs)
        )


def test_public_api() -> None:
    assert ptd.TensorDict is TensorDict
    assert issubclass(TensorDict, ptd.TensorDictBase)
