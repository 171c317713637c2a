"""Autograd over tensordicts (ptd/ops/autograd.py) and the compat checks of ptd/ops/checks.py.

In memory: gradients flow through the leaves of a ptd.TensorDict, including the in-memory
copies a PersistentTensorDict returns (``to_tensordict()``, ``float()``). On a store (h5 and
zarr): nothing carries a graph; the methods that only read or reset state return the store
without reading it, the ones that need a graph raise GradientError (a RuntimeError).
The differential cases of the same methods are in tests/diff_cases.py.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

import ptd
from ptd import TensorDict
from ptd.errors import BatchSizeError, GradientError, LockedError, PtdError


def _td() -> TensorDict:
    return TensorDict(
        {"a": torch.arange(6.0).reshape(3, 2), "n": {"b": torch.ones(3), "s": "text"}},
        batch_size=[3],
    )


# ------------------------------------------------------------------ in memory
def test_gradients_flow_through_a_tensordict() -> None:
    x = _td().requires_grad_()
    assert x.requires_grad
    assert x["a"].requires_grad
    assert x["n", "b"].requires_grad
    y = x * x + 2 * x
    y.backward(torch.ones_like(y))
    assert torch.equal(x.grad["a"], 2 * x["a"].detach() + 2)
    assert torch.equal(x.grad["n", "b"], torch.full((3,), 4.0))
    assert x.grad["n", "s"] == "text"  # non-tensor entries are kept, as tensordict
    assert x.grad.batch_size == x.batch_size


def test_backward_of_single_element_leaves_needs_no_gradient() -> None:
    x = _td().requires_grad_()
    losses = TensorDict(l1=x["a"].sum(), l2=(x["n", "b"] ** 2).sum())
    losses.backward()
    assert torch.equal(x["a"].grad, torch.ones(3, 2))
    assert torch.equal(x["n", "b"].grad, torch.full((3,), 2.0))


def test_backward_inputs_restricts_the_grads_written() -> None:
    x = _td().requires_grad_()
    (x * 3).sum().backward(inputs=x.select("a"))
    assert x["a"].grad is not None
    assert x["n", "b"].grad is None


def test_backward_errors() -> None:
    x = _td().requires_grad_()
    y = x + 1
    with pytest.raises(RuntimeError, match="key 'a' has shape") as info:
        y.backward()
    assert isinstance(info.value, GradientError)
    with pytest.raises(KeyError, match="'a'"):
        y.backward(torch.ones_like(y).exclude("a"))
    with pytest.raises(RuntimeError, match="shape"):
        y.backward(y.apply(lambda t: torch.ones(t.shape[0])))
    with pytest.raises(TypeError, match="tensordict"):
        y.backward(torch.ones(3))  # type: ignore[arg-type]
    with pytest.raises(GradientError, match=r"no leaf .* requires gradients"):
        _td().backward()
    assert x["a"].grad is None  # nothing ran


def test_zero_grad() -> None:
    x = _td()
    assert x.zero_grad() is x
    assert x.zero_grad(set_to_none=False) is x
    x = x.requires_grad_()
    assert x.filter_non_tensor_data().grad is None
    (x * 2).sum().backward(TensorDict(a=torch.ones(()), n={"b": torch.ones(())}))
    grad_a = x["a"].grad
    assert x.zero_grad(set_to_none=False) is x
    assert x["a"].grad is grad_a
    assert torch.equal(grad_a, torch.zeros(3, 2))
    x.zero_grad()
    assert x["a"].grad is None
    assert x.filter_non_tensor_data().grad is None


def test_grad_keeps_only_leaves_with_a_grad_and_follows_the_lock() -> None:
    x = TensorDict(a=torch.ones(2), n={"b": torch.ones(2)}, batch_size=[2]).requires_grad_()
    assert x.grad is None
    x["a"].sum().backward()
    assert list(x.grad.keys(True)) == ["a"]  # the nested level left empty is dropped
    assert x.lock_().grad.is_locked


def test_grad_setter() -> None:
    x = TensorDict(a=torch.zeros(2), batch_size=[2]).requires_grad_()
    g = TensorDict(a=torch.ones(2), batch_size=[2])
    x.grad = g
    assert x["a"].grad is g["a"]
    x.grad = TensorDict(a=torch.full((2,), 5.0), batch_size=[2])
    assert x["a"].grad is g["a"]
    assert g["a"][0] == 5
    with pytest.raises(KeyError):
        x.grad = TensorDict(b=torch.ones(2), batch_size=[2])
    x.grad = None
    assert x["a"].grad is None


def test_requires_grad_checks_every_leaf_first() -> None:
    x = TensorDict(a=torch.zeros(2), i=torch.arange(2), batch_size=[2])
    with pytest.raises(RuntimeError, match=r"key 'i' .* torch.int64"):
        x.requires_grad_()
    assert not x["a"].requires_grad  # nothing changed
    y = TensorDict(a=torch.zeros(2), batch_size=[2]).requires_grad_() * 2
    with pytest.raises(RuntimeError, match="grad_fn"):
        y.requires_grad_(False)
    z = TensorDict(a=torch.zeros(2), batch_size=[2]).requires_grad_()
    assert z.requires_grad_(False) is z
    assert not z.requires_grad


def test_detach_in_place() -> None:
    y = _td().requires_grad_() * 2
    a = y["a"]
    assert y.requires_grad
    assert y.detach_() is y
    assert y["a"] is a
    assert not a.requires_grad
    assert not y.requires_grad


def test_torch_autograd_grad() -> None:
    x = _td().requires_grad_()
    y = x * x
    g = torch.autograd.grad(y, x, torch.ones_like(y))
    assert isinstance(g, TensorDict)
    assert g.batch_size == x.batch_size
    assert torch.equal(g["a"], 2 * x["a"].detach())
    assert g["n", "s"] == "text"
    assert x["a"].grad is None  # grad() returns, it does not accumulate
    u = TensorDict(a=torch.ones(2), b=torch.ones(2), batch_size=[2]).requires_grad_()
    v = TensorDict(c=u["a"] * 2, batch_size=[2])
    assert list(torch.autograd.grad(v, u, torch.ones_like(v), allow_unused=True).keys()) == ["a"]
    with pytest.raises(ValueError, match="single output"):
        torch.autograd.grad((y, y), x)
    with pytest.raises(ValueError, match="tensordict as input"):
        torch.autograd.grad(y, x["a"], torch.ones_like(y))


# ------------------------------------------------------------------ stores
def _store(make_ptd: Callable[..., Any]) -> Any:
    return make_ptd({"a": torch.arange(6.0).reshape(3, 2), "n": {"b": torch.ones(3)}})


def test_store_holds_no_autograd_state(make_ptd: Callable[..., Any]) -> None:
    p = _store(make_ptd)
    assert p.requires_grad is False
    assert p.grad is None
    assert p.requires_grad_(False) is p
    with pytest.raises(RuntimeError, match=r"file-backed.*to_tensordict") as info:
        p.requires_grad_()
    assert isinstance(info.value, GradientError)
    assert str(p.filename) in str(info.value)
    with pytest.raises(GradientError, match="backward"):
        p.backward()
    with pytest.raises(GradientError):
        p.grad = p.to_tensordict()
    with pytest.raises(GradientError, match="inputs"):
        torch.autograd.grad(p.to_tensordict().requires_grad_() * 2, p)
    assert p[0:2].requires_grad is False  # a lazy view too


def test_store_zero_grad_and_detach_read_nothing(make_ptd: Callable[..., Any]) -> None:
    p = _store(make_ptd)
    p.close()  # a read would raise now
    assert p.zero_grad() is p
    assert p.zero_grad(set_to_none=False) is p
    assert p.detach_() is p


def test_store_grad_keeps_non_tensor_entries(make_ptd: Callable[..., Any]) -> None:
    p = make_ptd({"a": torch.zeros(3), "s": "hello"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # h5: tensordict's str-as-bytes notice
        g = p.grad
        assert type(g) is TensorDict
        assert list(g.keys()) == ["s"]
        assert g["s"] == p["s"]


def test_in_memory_copies_of_a_store_carry_gradients(make_ptd: Callable[..., Any]) -> None:
    p = _store(make_ptd)
    for x in (p.to_tensordict().requires_grad_(), p.float().requires_grad_()):
        y = (x * 3).sum()
        y.backward(y.apply(torch.ones_like))
        assert torch.equal(x.grad["a"], torch.full((3, 2), 3.0))
        g = torch.autograd.grad(x * x, x, torch.ones_like(x))
        assert torch.equal(g["n", "b"], 2 * p["n", "b"])
    assert p.requires_grad is False


# ------------------------------------------------------------------ compat checks
@pytest.mark.parametrize("where", ["memory", "store"])
def test_check_batch_size_on_results(where: str, make_ptd: Callable[..., Any]) -> None:
    data = {"a": torch.rand(4, 3, 2), "n": {"b": torch.rand(4, 3)}}
    td = TensorDict(data, batch_size=[4, 3]) if where == "memory" else make_ptd(data)
    if where == "store":
        td.batch_size = [4, 3]
    assert td._check_batch_size() is True
    for result in (td.logsumexp(1), td.softmax(0), td.sum(0, keepdim=True)):
        assert result._check_batch_size() is True
        assert result._check_device() is True


def test_check_batch_size_finds_a_bad_leaf() -> None:
    td = TensorDict(a=torch.zeros(3, 2), n={"b": torch.zeros(3)}, batch_size=[3])
    td["n"]._data["b"] = torch.zeros(4)  # bypass set()'s check
    with pytest.raises(RuntimeError, match="key 'b' of shape \\[4\\]") as info:
        td._check_batch_size()
    assert isinstance(info.value, BatchSizeError)
    assert td._check_batch_size(raise_exception=False) is False


def test_check_device_finds_a_leaf_elsewhere() -> None:
    td = TensorDict(a=torch.zeros(3), batch_size=[3], device="cpu")
    assert td._check_device()
    td._data["a"] = torch.zeros(3, device="meta")
    with pytest.raises(RuntimeError, match="meta"):
        td._check_device()
    assert td._check_device(raise_exception=False) is False
    assert TensorDict(a=torch.zeros(3, device="meta"), batch_size=[3])._check_device()


def test_errors_are_ptd_errors() -> None:
    assert issubclass(GradientError, PtdError)
    assert issubclass(GradientError, RuntimeError)
    assert ptd.errors.GradientError is GradientError
    assert issubclass(LockedError, RuntimeError)
