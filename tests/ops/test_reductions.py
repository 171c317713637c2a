"""Reductions (ptd/ops/reductions.py, ptd/containers/persistent/streaming.py) against tensordict 0.15.3.

Every call runs on ptd and on tensordict, for an in-memory TensorDict and a PersistentTensorDict
on each backend, over generated tensordicts (nested with extra batch dims, empty batch, NaN,
bool/int/float/bfloat16 leaves): results, dtypes, batch sizes, error types and warnings must
agree. The streaming tests shrink the slab size so that every leaf is read in many slabs and
check both that it was (the row ranges read) and that the result equals the in-memory one.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import ptd
import ptd.transfer.slabs as slabs
from math_oracle import build, compare, same
from ptd import PersistentTensorDict, TensorDict
from ptd.errors import PtdValueError
from ptd.ops.leafop import NO_DEFAULT

tdmod = pytest.importorskip("tensordict")
pytestmark = pytest.mark.interop

KINDS = ["td", "h5", "zarr"]
Q2 = torch.tensor([0.25, 0.75])

CALLS = {
    # sum and its options
    "sum": lambda t: t.sum(),
    "sum(0)": lambda t: t.sum(0),
    "sum(1)": lambda t: t.sum(1),
    "sum(-1)": lambda t: t.sum(-1),
    "sum((0,1))": lambda t: t.sum((0, 1)),
    "sum(())": lambda t: t.sum(()),
    "sum(None)": lambda t: t.sum(None),
    "sum(keepdim)": lambda t: t.sum(keepdim=True),
    "sum(0,keepdim)": lambda t: t.sum(0, keepdim=True),
    "sum(feature)": lambda t: t.sum("feature"),
    "sum(feature,keepdim)": lambda t: t.sum("feature", keepdim=True),
    "sum(dtype)": lambda t: t.sum(dtype=torch.float64),
    "sum(reduce)": lambda t: t.sum(reduce=True),
    "sum(0,reduce)": lambda t: t.sum(0, reduce=True),
    "sum(feature,reduce)": lambda t: t.sum("feature", reduce=True),
    "sum(5)": lambda t: t.sum(5),
    "sum(key_transform)": lambda t: t.sum(key_transform=lambda k: k + "_sum"),
    "nansum": lambda t: t.nansum(),
    "nansum(0)": lambda t: t.nansum(0),
    # mean / nanmean / prod
    "mean": lambda t: t.mean(),
    "mean(0)": lambda t: t.mean(0),
    "mean(1,keepdim)": lambda t: t.mean(1, keepdim=True),
    "mean(dtype)": lambda t: t.mean(dtype=torch.float64),
    "mean(reduce)": lambda t: t.mean(reduce=True),
    "nanmean": lambda t: t.nanmean(),
    "nanmean(0)": lambda t: t.nanmean(0),
    "prod": lambda t: t.prod(),
    "prod(0)": lambda t: t.prod(0),
    "prod(1,keepdim)": lambda t: t.prod(1, keepdim=True),
    "prod(keepdim)": lambda t: t.prod(keepdim=True),
    # std / var
    "std": lambda t: t.std(),
    "std(0)": lambda t: t.std(0),
    "std(0,correction=0)": lambda t: t.std(0, correction=0),
    "var(1,keepdim)": lambda t: t.var(1, keepdim=True),
    "var((0,1))": lambda t: t.var((0, 1)),
    "var(feature)": lambda t: t.var("feature"),
    "var(reduce)": lambda t: t.var(reduce=True),
    # min / max and friends
    "min": lambda t: t.min(),
    "min(0)": lambda t: t.min(0),
    "max(1,keepdim)": lambda t: t.max(1, keepdim=True),
    "max(-1)": lambda t: t.max(-1),
    "max(0,no indices)": lambda t: t.max(0, return_indices=False),
    "max(reduce)": lambda t: t.max(reduce=True),
    "min(0,reduce)": lambda t: t.min(0, reduce=True),
    "min(feature)": lambda t: t.min("feature"),
    "amin": lambda t: t.amin(),
    "amin(0)": lambda t: t.amin(0),
    "amax(1,keepdim)": lambda t: t.amax(1, keepdim=True),
    "amax(reduce)": lambda t: t.amax(reduce=True),
    "amax(7)": lambda t: t.amax(7),
    # a tuple where the reduction takes one dim: the first, with tensordict's warnings
    "max((0,1))": lambda t: t.max((0, 1)),
    "amax((0,1))": lambda t: t.amax((0, 1)),
    "amin((0,))": lambda t: t.amin((0,)),
    "prod((1,))": lambda t: t.prod((1,)),
    "quantile(0.5,(0,1))": lambda t: t.quantile(0.5, (0, 1)),
    "cummin(0)": lambda t: t.cummin(0),
    "cummax(1)": lambda t: t.cummax(1),
    "cummax(-1,no indices)": lambda t: t.cummax(-1, return_indices=False),
    # others
    "logsumexp": lambda t: t.logsumexp(),
    "logsumexp(0)": lambda t: t.logsumexp(0),
    "logsumexp((0,1),keepdim)": lambda t: t.logsumexp((0, 1), keepdim=True),
    "logsumexp(4)": lambda t: t.logsumexp(4),
    "quantile": lambda t: t.quantile(0.5),
    "quantile(0)": lambda t: t.quantile(0.3, 0),
    "quantile(q2,1)": lambda t: t.quantile(Q2, 1),
    "quantile(nearest)": lambda t: t.quantile(0.3, 0, interpolation="nearest"),
    "quantile(reduce)": lambda t: t.quantile(0.5, reduce=True),
    "softmax(0)": lambda t: t.softmax(0),
    "softmax(-1)": lambda t: t.softmax(-1),
    "softmax(x)": lambda t: t.softmax("x"),
    "softmax(3)": lambda t: t.softmax(3),
    "norm": lambda t: t.norm(),
    "norm(dtype)": lambda t: t.norm(dtype=torch.float64),
    "all": lambda t: t.all(),
    "any": lambda t: t.any(),
    "all(0)": lambda t: t.all(0),
    "any(-1)": lambda t: t.any(-1),
    "all(2)": lambda t: t.all(2),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("data", ["mixed", "floats", "with_nan", "empty"])
def test_reductions_match_tensordict(kind, data, tmp_path) -> None:
    ours, theirs = build(kind, data, tmp_path, tdmod)
    for name, fn in CALLS.items():
        if kind == "zarr" and name == "min(0,reduce)":
            # the indices depend on the order the leaves are concatenated in, and tensordict's
            # zarr stores list keys in another order (README: deliberate differences)
            continue
        compare(fn, ours, theirs, what=f"{kind}/{data}: {name}")


def test_result_types() -> None:
    td = TensorDict(a=torch.arange(6.0).reshape(2, 3), batch_size=[2, 3])
    mins = td.min(1)
    assert isinstance(mins, torch.return_types.min)
    assert isinstance(mins.values, TensorDict)
    assert isinstance(mins.indices, TensorDict)
    assert torch.equal(mins.indices["a"], torch.zeros(2, dtype=torch.int64))
    assert isinstance(td.cummax(0), torch.return_types.cummax)
    assert td.all() is False or td.all() is True
    assert isinstance(td.sum(reduce=True), torch.Tensor)
    assert isinstance(td.max(1, reduce=True), torch.return_types.max)
    assert repr(NO_DEFAULT) == "NO_DEFAULT"


def test_names_follow_the_reduced_dims() -> None:
    td = TensorDict(a=torch.ones(2, 3), batch_size=[2, 3], names=["x", "y"])
    assert td.sum(0).names == ["y"]
    assert td.sum(1, keepdim=True).names == ["x", "y"]
    assert td.sum("feature").names == ["x", "y"]


def test_error_types_are_builtins() -> None:
    td = TensorDict(a=torch.ones(2, 3), batch_size=[2, 3])
    with pytest.raises(IndexError):
        td.sum(2)
    with pytest.raises(RuntimeError):
        td.all(2)
    with pytest.raises(PtdValueError):
        td.logsumexp(3)
    with pytest.raises(TypeError):
        td.sum("feature", keepdim=True)
    with pytest.raises(ValueError, match="no tensor leaves"):
        TensorDict(batch_size=[2]).sum(reduce=True)


# ------------------------------------------------------------------------------------------
# streaming over slabs on a PersistentTensorDict
# ------------------------------------------------------------------------------------------
STREAMED = {
    "sum": lambda t: t.sum(),
    "sum(0)": lambda t: t.sum(0),
    "sum((0,1),keepdim)": lambda t: t.sum((0, 1), keepdim=True),
    "nansum(0)": lambda t: t.nansum(0),
    "mean": lambda t: t.mean(),
    "mean(0,keepdim)": lambda t: t.mean(0, keepdim=True),
    "nanmean(0)": lambda t: t.nanmean(0),
    "prod(0)": lambda t: t.prod(0),
    "std": lambda t: t.std(),
    "std(0)": lambda t: t.std(0),
    "var(0,correction=0)": lambda t: t.var(0, correction=0),
    "var((0,1))": lambda t: t.var((0, 1)),
    "amin(0)": lambda t: t.amin(0),
    "amax": lambda t: t.amax(),
    "min(0)": lambda t: t.min(0),
    "max(0,keepdim)": lambda t: t.max(0, keepdim=True),
    "max": lambda t: t.max(),
    "all(0)": lambda t: t.all(0),
    "any": lambda t: t.any(),
    "all": lambda t: t.all(),
    "norm": lambda t: t.norm(),
    # the first dim is kept: slab by slab, then concatenated
    "sum(1)": lambda t: t.sum(1),
    "mean(feature)": lambda t: t.mean("feature"),
    "cummax(1)": lambda t: t.cummax(1),
    "softmax(1)": lambda t: t.softmax(1),
    "logsumexp(1)": lambda t: t.logsumexp(1),
    # reduce=True, every leaf
    "sum(reduce)": lambda t: t.sum(reduce=True),
    "mean(reduce)": lambda t: t.mean(reduce=True),
    "amax(reduce)": lambda t: t.amax(reduce=True),
    "std(reduce)": lambda t: t.std(reduce=True),
}


def _streaming_data() -> TensorDict:
    g = torch.Generator().manual_seed(3)
    a = torch.randn(40, 3, generator=g)
    a[7, 1] = float("nan")
    return TensorDict(
        {
            "a": a,
            "w": torch.randn(40, 3, 4, generator=g, dtype=torch.float64),
            "h": torch.randn(40, 3, generator=g).bfloat16(),
            "n": {"c": torch.rand(40, 3, generator=g) + 0.5},
        },
        batch_size=[40, 3],
    )


@pytest.fixture
def small_slabs(monkeypatch):
    """Slabs of a few rows, and a log of the row ranges each leaf read was cut to."""
    monkeypatch.setattr(slabs, "SLAB_BYTES", 64)
    reads: list[tuple[str, int]] = []
    orig = PersistentTensorDict._get_str

    def logged(self, key):
        value = orig(self, key)
        if isinstance(value, torch.Tensor):
            reads.append((key, value.shape[0] if value.ndim else 1))
        return value

    monkeypatch.setattr(PersistentTensorDict, "_get_str", logged)
    return reads


@pytest.mark.parametrize("name", list(STREAMED))
def test_streamed_reductions_equal_in_memory(name, small_slabs, backend, tmp_path) -> None:
    mem = _streaming_data()
    p = PersistentTensorDict.from_dict(mem, str(tmp_path / f"s.{backend}"), backend=backend)
    small_slabs.clear()
    fn = STREAMED[name]
    want, got = fn(mem), fn(p)
    same(got, want, name)
    assert small_slabs, "nothing was read"
    if name not in ("any", "all"):  # those stop at the first deciding slab
        # every leaf was read in slabs: no read covers all 40 rows
        assert max(rows for _, rows in small_slabs) < 40, small_slabs
    p.close()


def test_all_any_stop_early(small_slabs, tmp_path) -> None:
    data = TensorDict(a=torch.zeros(40, 3), batch_size=[40, 3])
    p = PersistentTensorDict.from_dict(data, str(tmp_path / "z.h5"))
    small_slabs.clear()
    assert p.all() is False
    assert len(small_slabs) == 1  # the first slab decides
    assert p.any() is False
    p.close()


def test_streamed_int_mean_raises_as_torch(small_slabs, tmp_path) -> None:
    p = PersistentTensorDict.from_dict(
        TensorDict(i=torch.arange(40), batch_size=[40]), str(tmp_path / "i.h5")
    )
    with pytest.raises(RuntimeError, match="mean"):
        p.mean()
    assert p.sum()["i"].item() == sum(range(40))
    assert p.mean(dtype=torch.float64)["i"].item() == pytest.approx(19.5)
    p.close()


def test_persistent_results_are_in_memory(sample_ptd) -> None:
    for result in (sample_ptd.sum(), sample_ptd.amax(0), sample_ptd.min(0).values):
        assert type(result) is ptd.TensorDict


# ------------------------------------------------------------------ out=: logsumexp, apply
def _float_data() -> dict:
    g = torch.Generator().manual_seed(5)
    return {"a": torch.randn(4, 3, 2, generator=g), "n": {"b": torch.randn(4, 3, generator=g)}}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_logsumexp_out_writes_into_the_given_tensors(kind, keepdim, tmp_path) -> None:
    mem = TensorDict(_float_data(), batch_size=[4, 3])
    td = mem if kind == "td" else PersistentTensorDict.from_dict(mem, tmp_path / f"o.{kind}")
    want = mem.logsumexp((1,), keepdim=keepdim)
    out = torch.zeros_like(want)
    before = {k: out.get(k) for k in out.keys(True, True)}
    got = td.logsumexp((1,), keepdim=keepdim, out=out)
    assert got is out
    assert got._check_batch_size()
    for key, tensor in before.items():
        assert got.get(key) is tensor  # written in place, as torch's out=
        assert torch.allclose(tensor, want.get(key))
    empty = want.empty()  # no leaves yet: they are added
    assert td.logsumexp((1,), keepdim=keepdim, out=empty) is empty
    assert torch.allclose(empty["n", "b"], want["n", "b"])
    with pytest.raises(RuntimeError):  # an out of another shape, as torch
        td.logsumexp(1, keepdim=keepdim, out=torch.zeros_like(mem))
    if kind != "td":
        td.close()


def test_softmax_of_integer_leaves_raises_as_torch(make_ptd) -> None:
    p = make_ptd({"i": torch.arange(6).reshape(3, 2)})
    with pytest.raises(NotImplementedError, match="Long"):
        p.softmax(0)
    with pytest.raises(NotImplementedError, match="Long"):
        tdmod.TensorDict(i=torch.arange(6).reshape(3, 2), batch_size=[3]).softmax(0)


def test_softmax_after_apply_out_casts_the_store(make_ptd) -> None:
    """tensordict's idiom: ``td.apply(lambda x: x.float(), out=td)`` casts every leaf of a
    store (an array of another dtype is replaced, with tensordict's warning)."""
    p = make_ptd()
    with pytest.warns(UserWarning, match="Replacing an array"):
        assert p.apply(lambda x: x.float(), out=p) is p
    assert {p.leaf_meta(k).dtype for k in p.keys(True, True)} == {torch.float32}
    sm = p.softmax(0)
    assert sm._check_batch_size()
    assert torch.allclose(sm["n", "c"].sum(0), torch.ones(2))


def test_apply_out_same_dtype_writes_in_place(make_ptd) -> None:
    p = make_ptd()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no array is replaced
        p.apply(lambda x: ~x if x.dtype == torch.bool else x * 2, out=p)
    assert p["b"][1] == 2
    assert p.leaf_meta("b").dtype == torch.int64
    assert p["n", "m", "d"][0, 0].item() is True


def test_apply_out_in_memory_replaces_entries() -> None:
    """As tensordict: each entry of ``out`` is replaced (new tensor, new dtype)."""
    out = TensorDict(a=torch.zeros(3), i=torch.arange(3), batch_size=[3])
    a = out["a"]
    src = TensorDict(a=torch.ones(3), i=torch.arange(3), batch_size=[3])
    assert src.apply(lambda x: x.double(), out=out) is out
    assert out["a"] is not a
    assert out["i"].dtype == torch.float64
    assert a.sum() == 0
    with pytest.raises(RuntimeError, match="lock"):
        src.apply(lambda x: x, out=out.lock_())
