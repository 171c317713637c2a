"""``torch.<function>(td, ...)`` on ptd tensordicts against tensordict 0.15.3, and
``torch.stack``/``torch.cat`` with ``out=`` (in memory and into a file)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import ptd
from oracle import KINDS, assert_same, check, pair, persistent_pair, tdlib
from ptd.ops.torch_functions import HANDLED_FUNCTIONS


def _mask(t: Any) -> torch.Tensor:
    return torch.arange(math.prod(t.batch_size)).reshape(t.batch_size) % 3 != 1


def _bump(x: torch.Tensor) -> torch.Tensor:
    return ~x if x.dtype == torch.bool else x + 1


def _floats(t: Any) -> Any:
    return t.exclude("b", "i", ("n", "m")) if not isinstance(t, ptd.PersistentTensorDict) else t


TORCH_CALLS: dict[str, Callable[[Any], Any]] = {
    "gather": lambda t: torch.gather(t, 0, torch.zeros(1, *t.batch_size[1:], dtype=torch.long)),
    "gather_sparse": lambda t: torch.gather(
        t, 0, torch.zeros(1, dtype=torch.long), sparse_grad=True
    ),
    "where": lambda t: torch.where(_mask(t), t, 0),
    "where_reversed": lambda t: torch.where(_mask(t), 1, t),
    "where_td": lambda t: torch.where(_mask(t), t, t.apply(lambda x: x + 1)),
    "maximum": lambda t: torch.maximum(_floats(t), _floats(t) * 2),
    "minimum": lambda t: torch.minimum(_floats(t), _floats(t) - 1),
    "masked_select": lambda t: torch.masked_select(t, _mask(t)),
    "zeros_like": lambda t: torch.zeros_like(t),
    "ones_like": lambda t: torch.ones_like(t, dtype=torch.float64),
    "full_like": lambda t: torch.full_like(t, 3),
    "empty_like": lambda t: torch.empty_like(t).apply(lambda x: torch.zeros_like(x)),
    "rand_like": lambda t: torch.rand_like(_floats(t)).apply(lambda x: torch.zeros_like(x)),
    "randn_like": lambda t: torch.randn_like(_floats(t)).apply(lambda x: (x * 0).abs()),
    "squeeze": lambda t: torch.squeeze(torch.unsqueeze(t, 0), 0),
    "unsqueeze": lambda t: torch.unsqueeze(t, -1),
    "permute": lambda t: torch.permute(t, tuple(reversed(range(t.ndim)))),
    "flatten": lambda t: torch.flatten(t),
    "unflatten": lambda t: torch.unflatten(t, 0, (1, t.batch_size[0])),
    "reshape": lambda t: torch.reshape(t, (-1,)),
    "transpose": lambda t: torch.transpose(t, 0, -1),
    "swapaxes": lambda t: torch.swapaxes(t, 0, -1),
    "movedim": lambda t: torch.movedim(t, 0, -1),
    "flip": lambda t: torch.flip(t, (0,)),
    "roll": lambda t: torch.roll(t, 1, 0),
    "narrow": lambda t: torch.narrow(t, 0, 0, 1),
    "tile": lambda t: torch.tile(t, (2,)),
    "repeat_interleave": lambda t: torch.repeat_interleave(t, 2, dim=0),
    "broadcast_to": lambda t: torch.broadcast_to(t, (2, *t.batch_size)),
    "atleast_3d": lambda t: torch.atleast_3d(t),
    "split": lambda t: torch.split(t, 2),
    "tensor_split": lambda t: torch.tensor_split(t, 2),
    "chunk": lambda t: torch.chunk(t, 2, -1),
    "unbind": lambda t: torch.unbind(t, 0),
    "clone": lambda t: torch.clone(t),
    "mean": lambda t: torch.mean(_floats(t)),
    "sum_dim": lambda t: torch.sum(t, 0),
    "isfinite": lambda t: torch.isfinite(_floats(t)),
    "isnan": lambda t: torch.isnan(_floats(t)),
    "abs": lambda t: torch.abs(_floats(t) - 1),
    "exp": lambda t: torch.exp(_floats(t).float()),
    "clamp": lambda t: torch.clamp(_floats(t), min=0),
    "abs_": lambda t: torch.abs_(_floats(t) - 1),
    "l1_loss": lambda t: F.l1_loss(_floats(t).float(), _floats(t).float() + 1),
    "mse_loss_none": lambda t: F.mse_loss(
        _floats(t).float(), _floats(t).float() * 2, reduction="none"
    ),
    "smooth_l1_sum": lambda t: F.smooth_l1_loss(
        _floats(t).float(), _floats(t).float() * 2, reduction="sum"
    ),
    "loss_bad_reduction": lambda t: F.l1_loss(_floats(t), _floats(t), reduction="nope"),
    "stack": lambda t: torch.stack([t, t], 1),
    "stack_bad_dim": lambda t: torch.stack([t, t], 9),
    "stack_empty": lambda t: torch.stack([]),
    "cat": lambda t: torch.cat([t, t], -1),
    "cat_bad_dim": lambda t: torch.cat([t, t], 9),
    "cat_keys": lambda t: torch.cat([t, t.exclude("f")]),
    "concat": lambda t: torch.concat([t, t], 0),
}


@pytest.mark.parametrize("kind", ["1d", "2d", "empty_batch"])
@pytest.mark.parametrize("name", sorted(TORCH_CALLS))
def test_torch_function_matches_tensordict(name: str, kind: str) -> None:
    if name == "concat":
        # tensordict 0.15 does not handle torch.concat; ptd takes it as torch.cat
        mine, theirs = pair(kind)
        assert_same(TORCH_CALLS[name](mine), torch.cat([theirs, theirs], 0), name)
        return
    mine, theirs = pair(kind)
    check(TORCH_CALLS[name], mine, theirs, f"torch {name}({kind})")


def test_every_function_tensordict_handles_is_handled() -> None:
    from tensordict._torch_func import TD_HANDLED_FUNCTIONS

    # autograd through tensordicts (torch.autograd.grad) is out of ptd's scope
    missing = {
        getattr(f, "__name__", str(f))
        for f in TD_HANDLED_FUNCTIONS
        if f not in HANDLED_FUNCTIONS and f is not torch.autograd.grad
    }
    assert not missing, f"torch functions tensordict handles and ptd does not: {sorted(missing)}"


def test_unhandled_torch_function_is_a_type_error() -> None:
    td, _ = pair("1d")
    with pytest.raises(TypeError):
        torch.cumsum(td, 0)


def test_pointwise_without_a_method_goes_leaf_by_leaf() -> None:
    td = ptd.TensorDict(
        {"a": torch.tensor([-1.0, 2.0]), "n": {"b": torch.tensor([3.0, -4.0])}}, [2]
    )
    out = torch.sign(td)
    assert torch.equal(out["a"], torch.tensor([-1.0, 1.0]))
    assert torch.equal(out["n", "b"], torch.tensor([1.0, -1.0]))
    assert torch.maximum(td, td * -1)["n", "b"].tolist() == [3.0, 4.0]
    with pytest.raises(TypeError, match="first argument"):
        torch.lerp(torch.zeros(2), td, 0.5)


# ------------------------------------------------------------------ out=
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dim", [0, -1])
def test_stack_and_cat_with_out_in_memory(kind: str, dim: int) -> None:
    (a, ta), (b, tb) = pair(kind), pair(kind)
    b = b.apply(_bump)
    tb = tb.apply(_bump)
    out, tout = torch.stack([a, a], dim).zero_(), torch.stack([ta, ta], dim).zero_()
    got = torch.stack([a, b], dim, out=out)
    assert got is out
    assert_same(got, torch.stack([ta, tb], dim, out=tout))
    out, tout = torch.cat([a, a], dim).zero_(), torch.cat([ta, ta], dim).zero_()
    assert torch.cat([a, b], dim, out=out) is out
    assert_same(out, torch.cat([ta, tb], dim, out=tout))


def test_stack_and_cat_out_of_the_wrong_batch_size_raise_like_tensordict() -> None:
    (a, ta) = pair("2d")
    for fn in (
        lambda x: torch.stack([x, x], out=x),
        lambda x: torch.cat([x, x], out=x),
    ):
        check(fn, a, ta)


@pytest.fixture
def write_log(monkeypatch):
    """Every ``Backend.write(path, selection, value)`` call, on both backends."""
    from ptd.storage.h5.backend import H5Backend
    from ptd.storage.zarr.backend import ZarrBackend

    log: list = []
    for cls in (H5Backend, ZarrBackend):
        orig = cls.write

        def write(self, path, selection, value, _orig=orig):
            log.append((path, selection, np.asarray(value).shape))
            return _orig(self, path, selection, value)

        monkeypatch.setattr(cls, "write", write)
    return log


def test_stack_and_cat_into_a_persistent_tensordict(tmp_path, backend, write_log) -> None:
    a, b = pair("1d")[0], pair("1d")[0]
    del a["h"], b["h"]
    b = b.apply(_bump)
    p, tp = persistent_pair("1d", tmp_path, backend)
    tp.close()
    expected = torch.cat([a, b])
    out = ptd.PersistentTensorDict.from_dict(
        torch.zeros_like(expected),
        tmp_path / f"cat.{'h5' if backend == 'h5' else 'zarr'}",
        backend=backend,
        batch_size=expected.batch_size,
    )
    write_log.clear()
    assert torch.cat([a, b], out=out) is out
    assert_same(out.to_tensordict(), expected)
    # one write per leaf and input: each input goes to its own rows only
    n = a.batch_size[0]
    assert len(write_log) == 2 * len(list(a.keys(True, True)))
    for _, selection, shape in write_log:
        assert shape[0] == n, (selection, shape)
    stacked = torch.stack([a, b], 1)
    out2 = ptd.PersistentTensorDict.from_dict(
        torch.zeros_like(stacked),
        tmp_path / f"stack.{'h5' if backend == 'h5' else 'zarr'}",
        backend=backend,
        batch_size=stacked.batch_size,
    )
    torch.stack([a, b], 1, out=out2)
    assert_same(out2.to_tensordict(), stacked)
    with pytest.raises(RuntimeError, match="batch size"):
        torch.stack([a, b], 0, out=out2)
    for s in (p, out, out2):
        s.close()


def test_stack_of_persistent_tensordicts_is_in_memory(tmp_path, backend) -> None:
    p, tp = persistent_pair("2d", tmp_path, backend)
    check(lambda t: torch.stack([t, t], 0), p, tp)
    check(lambda t: torch.cat([t, t], 1), p, tp)
    check(lambda t: torch.zeros_like(t), p, tp)
    assert type(torch.stack([p, p])) is ptd.TensorDict
    p.close()
    tp.close()


def test_where_refuses_a_persistent_out(tmp_path, backend) -> None:
    p, tp = persistent_pair("1d", tmp_path, backend)
    td, _ = pair("1d")
    del td["h"]
    with pytest.raises(RuntimeError, match="persistent"):
        torch.where(_mask(td), td, torch.zeros(()), out=p)
    with pytest.raises(RuntimeError):
        torch.where(
            _mask(td), tdlib.TensorDict(td.to_dict(), td.batch_size), torch.zeros(()), out=tp
        )
    p.close()
    tp.close()
