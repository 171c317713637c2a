"""Elementwise ops (ptd/ops/pointwise.py) against tensordict 0.15.3.

Out-of-place ops run on ptd and tensordict (in-memory TensorDict; PersistentTensorDict on each
backend) over generated tensordicts, with numbers, tensordicts, batch-aligned tensors and
``default=`` as operands. In-place ops run in sequence on ptd's container and on a tensordict
TensorDict holding the same data: after every op (or every refused op: an int leaf cannot take
a float result) both hold the same values, and a refused op changed nothing.
"""

from __future__ import annotations

import math

import pytest
import torch

import ptd
import ptd.transfer.slabs as slabs
from math_oracle import build, compare, datasets, run, same
from ptd import PersistentTensorDict, TensorDict
from ptd.ops.pointwise import INPLACE_UNARY_OPS, PREDICATES, UNARY_OPS

tdmod = pytest.importorskip("tensordict")
pytestmark = pytest.mark.interop

KINDS = ["td", "h5", "zarr"]


def _mask(t):
    """A bool mask over the batch dims."""
    return torch.arange(math.prod(t.batch_size)).reshape(t.batch_size) % 2 == 0


#: name -> fn(container, operand tensordict of the same library, library module)
BINARY = {
    "add(2)": lambda t, o, lib: t.add(2),
    "add(td)": lambda t, o, lib: t.add(o),
    "add(td,alpha)": lambda t, o, lib: t.add(o, alpha=2),
    "add(2,alpha)": lambda t, o, lib: t.add(2, alpha=3),
    "add(batch tensor)": lambda t, o, lib: t.add(torch.arange(3)),
    "add(batch tensor 2d)": lambda t, o, lib: t.add(torch.ones(t.batch_size)),
    "add(bad tensor)": lambda t, o, lib: t.add(torch.ones(7)),
    "add(0-d tensor)": lambda t, o, lib: t.add(torch.tensor(2)),
    "add(missing key)": lambda t, o, lib: t.add(o.exclude("a")),
    "add(default)": lambda t, o, lib: t.add(o.exclude("a"), default=torch.zeros(())),
    "mul(intersection)": lambda t, o, lib: t.mul(o.exclude("a"), default="intersection"),
    "sub(td)": lambda t, o, lib: t.sub(o),
    "sub(1,alpha)": lambda t, o, lib: t.sub(1, alpha=2),
    "rsub(1)": lambda t, o, lib: t.rsub(1),
    "rsub(td,alpha)": lambda t, o, lib: t.rsub(o, alpha=2),
    "mul(3)": lambda t, o, lib: t.mul(3),
    "mul(td)": lambda t, o, lib: t.mul(o),
    "div(2)": lambda t, o, lib: t.div(2),
    "div(td)": lambda t, o, lib: t.div(o),
    "pow(2)": lambda t, o, lib: t.pow(2),
    "pow(td)": lambda t, o, lib: t.pow(o),
    "mod(3)": lambda t, o, lib: t.mod(3),
    "maximum(td)": lambda t, o, lib: t.maximum(o),
    "maximum(0-d)": lambda t, o, lib: t.maximum(torch.tensor(0.5)),
    "minimum(td)": lambda t, o, lib: t.minimum(o * 0.5),
    "clamp_max(0.5)": lambda t, o, lib: t.clamp_max(0.5),
    "clamp_min(td)": lambda t, o, lib: t.clamp_min(o),
    "clamp(-1,1)": lambda t, o, lib: t.clamp(-1, 1),
    "clamp(min)": lambda t, o, lib: t.clamp(min=0),
    "clamp(max)": lambda t, o, lib: t.clamp(max=0),
    "clamp(td,td)": lambda t, o, lib: t.clamp(o * 0.5, o),
    "clamp(td,1)": lambda t, o, lib: t.clamp(o, 1),
    "clamp(batch tensors)": lambda t, o, lib: t.clamp(torch.zeros(3), torch.ones(3)),
    "clamp(out no bounds)": lambda t, o, lib: t.clamp(out=o),
    "lerp(td,0.5)": lambda t, o, lib: t.lerp(o, 0.5),
    "lerp(td,td)": lambda t, o, lib: t.lerp(o, o),
    "addcmul": lambda t, o, lib: t.addcmul(o, o, value=2),
    "addcdiv": lambda t, o, lib: t.addcdiv(o, o + 3, 0.5),
    "bitwise_and(td)": lambda t, o, lib: t.bitwise_and(o),
    "logical_and(td)": lambda t, o, lib: t.logical_and(o),
    "masked_fill": lambda t, o, lib: t.masked_fill(_mask(t), 1),
    "where(scalar)": lambda t, o, lib: t.where(_mask(t), 0),
    "where(td)": lambda t, o, lib: t.where(_mask(t), o),
    "where(td missing)": lambda t, o, lib: t.where(_mask(t), o.exclude("a")),
    "where(td missing,pad)": lambda t, o, lib: t.where(_mask(t), o.exclude("a"), pad=0),
    "+": lambda t, o, lib: t + o,
    "radd": lambda t, o, lib: 1 + t,
    "-": lambda t, o, lib: t - 1,
    "rsub op": lambda t, o, lib: 1 - t,
    "*": lambda t, o, lib: t * o,
    "rmul": lambda t, o, lib: 2 * t,
    "/": lambda t, o, lib: t / 2,
    "rtruediv": lambda t, o, lib: 1 / t,
    "**": lambda t, o, lib: t**2,
    "rpow": lambda t, o, lib: 2**t,
    "%": lambda t, o, lib: t % 2,
    "&": lambda t, o, lib: t & o,
    "|": lambda t, o, lib: t | True,
    "^": lambda t, o, lib: t ^ o,
    "~": lambda t, o, lib: ~t,
    "neg op": lambda t, o, lib: -t,
    "abs op": lambda t, o, lib: abs(t),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("data", ["mixed", "floats", "with_nan", "empty"])
def test_unary_ops_match_tensordict(kind, data, tmp_path) -> None:
    ours, theirs = build(kind, data, tmp_path, tdmod)
    for name in UNARY_OPS + list(PREDICATES):
        compare(lambda t, n=name: getattr(t, n)(), ours, theirs, what=f"{kind}/{data}: {name}")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("data", ["mixed", "floats", "empty"])
def test_binary_ops_match_tensordict(kind, data, tmp_path) -> None:
    ours, theirs = build(kind, data, tmp_path, tdmod)
    make = datasets()[data]
    pairs = ((ours, make(ptd), ptd), (theirs, make(tdmod), tdmod))
    if "s" in ours.keys():  # the non-tensor entry: the operands have it too
        pairs[0][1]["s"] = pairs[1][1]["s"] = "text"
    for name, fn in BINARY.items():
        compare(
            lambda pair, fn=fn: fn(*pair),
            pairs[0],
            pairs[1],
            what=f"{kind}/{data}: {name}",
        )


#: in-place ops, run in this order on the same data: name -> fn(container, operand)
INPLACE = {
    **{name: (lambda t, o, n=name: getattr(t, n)()) for name in INPLACE_UNARY_OPS},
    "add_(1)": lambda t, o: t.add_(1),
    "add_(td,alpha)": lambda t, o: t.add_(o, alpha=0.5),
    "add_(batch tensor)": lambda t, o: t.add_(torch.arange(3)),
    "add_(missing key)": lambda t, o: t.add_(o.exclude("a")),
    "sub_(td,2)": lambda t, o: t.sub_(o, 2),
    "mul_(2)": lambda t, o: t.mul_(2),
    "mul_(td)": lambda t, o: t.mul_(o),
    "div_(3)": lambda t, o: t.div_(3),
    "pow_(2)": lambda t, o: t.pow_(2),
    "maximum_(0.1)": lambda t, o: t.maximum_(0.1),
    "minimum_(td)": lambda t, o: t.minimum_(o),
    "clamp_max_(2)": lambda t, o: t.clamp_max_(2),
    "clamp_min_(td)": lambda t, o: t.clamp_min_(o * 0.1),
    "lerp_(td,0.25)": lambda t, o: t.lerp_(o, 0.25),
    "addcmul_": lambda t, o: t.addcmul_(o, o, value=0.5),
    "addcdiv_": lambda t, o: t.addcdiv_(o, o.abs() + 1, value=2),
    "+=": lambda t, o: t.__iadd__(1),
    "-=": lambda t, o: t.__isub__(o),
    "*=": lambda t, o: t.__imul__(2),
    "/=": lambda t, o: t.__itruediv__(2),
    "**=": lambda t, o: t.__ipow__(1),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("data", ["mixed", "floats", "empty"])
def test_inplace_ops_match_tensordict(kind, data, tmp_path) -> None:
    ours, _ = build(kind, data, tmp_path, tdmod)
    make = datasets()[data]
    theirs = make(tdmod)
    if kind == "td" and data == "mixed":
        theirs["s"] = "text"
    for name, fn in INPLACE.items():
        what = f"{kind}/{data}: {name}"
        before, theirs_before = ours.to_tensordict(), theirs.clone()
        got, got_err, _ = run(lambda t, fn=fn: fn(t, make(ptd)), ours)
        _, want_err, _ = run(lambda t, fn=fn: fn(t, make(tdmod)), theirs)
        if want_err is not None:
            assert isinstance(got_err, type(want_err)), f"{what}: {got_err!r} vs {want_err!r}"
            same(ours.to_tensordict(), before, f"{what}: a refused op writes nothing")
            # tensordict may have written some leaves before it failed: start again from
            # the data both had
            theirs = theirs_before
            continue
        assert got_err is None, f"{what}: ptd raises {got_err!r}"
        assert got is ours, f"{what}: an in-place op returns self"
        same(ours.to_tensordict(), theirs.to_tensordict(), what)


def test_persistent_out_of_place_is_in_memory(sample_ptd) -> None:
    for result in (sample_ptd + 1, sample_ptd.maximum(sample_ptd), sample_ptd.isnan()):
        assert type(result) is ptd.TensorDict
        assert result.batch_size == sample_ptd.batch_size


def test_inplace_streams_slabs_and_writes_back(monkeypatch, backend, tmp_path) -> None:
    """A large leaf is read and written back in slabs: no read of all rows."""
    monkeypatch.setattr(slabs, "SLAB_BYTES", 64)
    data = TensorDict(
        a=torch.linspace(-3, 3, 120).reshape(40, 3), n={"c": torch.ones(40, 3, 2)}, batch_size=[40]
    )
    p = PersistentTensorDict.from_dict(data, str(tmp_path / f"w.{backend}"), backend=backend)
    rows: list[int] = []
    orig = PersistentTensorDict._read_leaf

    def logged(self, path, meta, entries=None):
        value = orig(self, path, meta, entries)
        rows.append(value.shape[0])
        return value

    monkeypatch.setattr(PersistentTensorDict, "_read_leaf", logged)
    assert p.clamp_(-1, 1) is p
    p.mul_(torch.arange(40.0))  # a batch-aligned operand, cut into the same slabs
    p.abs_()
    p.sub_(data)  # a tensordict operand: each slab gets the same rows of it
    assert rows, rows
    assert max(rows) < 40, rows
    want = data.clamp(-1, 1).mul(torch.arange(40.0)).abs() - data
    monkeypatch.setattr(PersistentTensorDict, "_read_leaf", orig)
    same(p.to_tensordict(), want)
    p.close()


def test_refused_inplace_op_leaves_the_store_unchanged(sample_ptd) -> None:
    before = sample_ptd.to_tensordict()
    with pytest.raises(RuntimeError):
        sample_ptd.exp_()  # the int leaves cannot hold exp's float result
    same(sample_ptd.to_tensordict(), before)


def test_ptd_only_clamp_() -> None:
    td = TensorDict(a=torch.linspace(-2, 2, 5), batch_size=[5])
    assert td.clamp_(-1.0, 0.5) is td
    assert torch.equal(td["a"], torch.linspace(-2, 2, 5).clamp(-1.0, 0.5))
    with pytest.raises(TypeError):
        td.clamp_()
    with pytest.raises(TypeError):
        td.clamp()
