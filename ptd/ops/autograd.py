"""Autograd over a tensordict, as tensordict 0.15 has it: ``requires_grad``,
``requires_grad_()``, ``grad``, ``zero_grad()``, ``backward()``, ``detach_()`` and
``torch.autograd.grad(outputs_td, inputs_td, grad_outputs_td)``.

In memory, each method acts on the tensor leaves themselves (nested ones included): the graph
is torch's, a tensordict only gathers and scatters the leaves by key. A file-backed tensordict
(:class:`ptd.PersistentTensorDict`) reads each leaf into a new tensor, so its leaves never carry
autograd state: ``requires_grad`` is False, ``grad`` holds no tensor, ``zero_grad()`` and
``detach_()`` return it without reading anything, ``requires_grad_(False)`` too, while
``requires_grad_()`` and ``backward()`` raise :class:`~ptd.errors.GradientError` (call
``to_tensordict()`` or ``float()`` first: the in-memory copy can require gradients).

>>> import torch
>>> from ptd import TensorDict
>>> x = TensorDict(a=torch.ones(3), n={"b": torch.ones(3, 2)}, batch_size=[3])
>>> x.requires_grad_().requires_grad
True
>>> y = x * 2
>>> y.backward(torch.ones_like(y))
>>> x.grad["n", "b"][0]
tensor([2., 2.])
>>> x.zero_grad().grad is None
True
>>> torch.autograd.grad(x * 3, x, torch.ones_like(y))["a"]
tensor([3., 3., 3.])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import torch

from ptd.errors import GradientError, PtdKeyError, PtdTypeError, PtdValueError
from ptd.ops import apply as apply_ops
from ptd.ops.keys import NestedKey, out_key
from ptd.ops.root import is_tensordict
from ptd.ops.torch_functions import HANDLED_FUNCTIONS

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase

__all__: list[str] = []


def _no_graph(td: TensorDictBase) -> bool:
    """True when the leaves are read into new tensors (file-backed): no autograd state."""
    return td._leaves.reads_copy


def _leaves(td: TensorDictBase) -> list[tuple[NestedKey, torch.Tensor]]:
    return [
        (out_key(parts), t)
        for parts, t in apply_ops._tensor_leaves(
            td,
        )
    ]


def _store_message(td: TensorDictBase, what: str) -> str:
    return (
        f"{what}: {td._location()} is file-backed, and each read gives a new tensor, so its "
        "leaves hold no autograd state. Work on an in-memory copy: "
        "td.to_tensordict() (or td.float()), then requires_grad_()."
    )


# ------------------------------------------------------------------ flags
def requires_grad(td: TensorDictBase) -> bool:
    """True when any tensor leaf (nested ones included) requires gradients; always False
    for a file-backed tensordict, whose data never carries a graph."""
    sub = td
    if _no_graph(sub):
        return False
    return any(
        t.requires_grad
        for _, t in apply_ops._tensor_leaves(
            sub,
        )
    )


def requires_grad_(td: TensorDictBase, requires_grad: bool = True) -> TensorDictBase:
    """Set ``requires_grad`` on every tensor leaf in place; returns ``self``.

    Every leaf is checked first, so that a leaf that cannot require gradients (an integer
    dtype) changes none of them (RuntimeError). A file-backed tensordict accepts
    ``requires_grad_(False)`` only.
    """
    sub = td
    if _no_graph(sub):
        if not requires_grad:
            return sub
        raise GradientError(_store_message(sub, "requires_grad_()"))
    leaves = _leaves(sub)
    for key, t in leaves:
        if requires_grad and not (t.is_floating_point() or t.is_complex()):
            raise GradientError(
                f"requires_grad_(): only tensors of a floating point or complex dtype can "
                f"require gradients, and key {key!r} of {sub._location()} is {t.dtype}; "
                "cast first (td.float())."
            )
        if not requires_grad and t.grad_fn is not None:
            raise GradientError(
                f"requires_grad_(False): key {key!r} of {sub._location()} is computed from "
                "other tensors (it has a grad_fn); only graph leaves can change the flag. "
                "Use detach() instead."
            )
    for _, t in leaves:
        t.requires_grad_(requires_grad)
    return sub


# ------------------------------------------------------------------ gradients
def grad(td: TensorDictBase) -> TensorDictBase | None:
    """A new tensordict of the ``.grad`` of every leaf; leaves without one are left out,
    and so is a nested tensordict left with nothing. None when nothing is left (entries
    that are not tensors are kept, as in tensordict). Locked when ``self`` is."""
    sub = td
    result = _grads(sub)
    if result is not None and sub.is_locked:
        result.lock_()
    return result


def set_grad(td: TensorDictBase, value: TensorDictBase | None) -> None:
    """``td.grad = other``: each leaf's ``.grad`` becomes ``other``'s leaf of the same key
    (written into an existing ``.grad``); ``td.grad = None`` clears them."""
    sub = td
    if _no_graph(sub):
        raise GradientError(_store_message(sub, "setting grad"))
    if value is None:
        sub.zero_grad(set_to_none=True)
        return
    if not is_tensordict(value):
        raise PtdTypeError(
            f"grad must be set to a tensordict with the keys of {sub._location()}, "
            f"got {type(value).__name__}"
        )
    pairs = []
    for key, t in _leaves(sub):
        g = value.get(key)
        if not isinstance(g, torch.Tensor):
            raise PtdKeyError(f"grad: key {key!r} of {sub._location()} missing in the value")
        pairs.append((t, g))
    for t, g in pairs:
        if t.grad is None:
            t.grad = g
        else:
            t.grad.copy_(g)


def zero_grad(td: TensorDictBase, set_to_none: bool = True) -> TensorDictBase:
    """Reset the ``.grad`` of every leaf (``None``, or zeros in place with
    ``set_to_none=False``); returns ``self``. Nothing to do on a file-backed tensordict."""
    sub = td
    if _no_graph(sub):
        return sub
    for _, t in apply_ops._tensor_leaves(
        sub,
    ):
        if set_to_none:
            t.grad = None
        elif t.grad is not None:
            t.grad.zero_()
    return sub


def detach_(td: TensorDictBase) -> TensorDictBase:
    """Detach every tensor leaf from the graph in place; returns ``self``. A file-backed
    tensordict holds no graph: it is returned as it is, without reading."""
    sub = td
    if not _no_graph(sub):
        for _, t in apply_ops._tensor_leaves(
            sub,
        ):
            t.detach_()
    return sub


def backward(
    td: TensorDictBase,
    gradient: TensorDictBase | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: TensorDictBase | Sequence[torch.Tensor] | None = None,
) -> None:
    """Backpropagate from every leaf that requires gradients, in one
    ``torch.autograd.backward`` call; returns None.

    Without ``gradient`` each such leaf must hold one element (its gradient is 1);
    otherwise ``gradient`` is a tensordict with a tensor of the leaf's shape under each
    of their keys. ``inputs`` (a tensordict or tensors) restricts the ``.grad`` written.

    Raises:
        GradientError: (RuntimeError) no leaf requires gradients, a leaf has more than one
            element and no gradient is given, or a gradient has the wrong shape.
        KeyError: ``gradient`` lacks a key.
        TypeError: ``gradient`` is not a tensordict.
    """
    sub = td
    if _no_graph(sub):
        raise GradientError(_store_message(sub, "backward()"))
    pairs = [(k, t) for k, t in _leaves(sub) if t.requires_grad]
    if not pairs:
        raise GradientError(
            f"backward(): no leaf of {sub._location()} requires gradients, so there is "
            "nothing to differentiate."
        )
    grads: list[torch.Tensor] | None = None
    if gradient is None:
        for key, t in pairs:
            if t.numel() != 1:
                raise GradientError(
                    f"backward(): a gradient can be implied only for single-element "
                    f"leaves, and key {key!r} has shape {list(t.shape)}; pass a gradient "
                    "tensordict of the same structure (e.g. torch.ones_like(td))."
                )
    else:
        if not is_tensordict(gradient):
            raise PtdTypeError(
                "backward(): gradient must be a tensordict with an entry for each leaf "
                f"that requires gradients, got {type(gradient).__name__}"
            )
        grads = []
        for key, t in pairs:
            g = gradient.get(key)
            if not isinstance(g, torch.Tensor):
                raise PtdKeyError(
                    f"backward(): the gradient tensordict has no tensor for key {key!r}"
                )
            if g.shape != t.shape:
                raise GradientError(
                    f"backward(): the gradient for key {key!r} has shape {list(g.shape)}, "
                    f"the leaf {list(t.shape)}"
                )
            grads.append(g)
    wrt: Sequence[torch.Tensor] | None
    if is_tensordict(inputs):
        wrt = [t for _, t in _leaves(inputs)]
    else:
        wrt = cast("Sequence[torch.Tensor] | None", inputs)
    torch.autograd.backward(
        [t for _, t in pairs],
        grad_tensors=grads,
        retain_graph=retain_graph,
        create_graph=create_graph,
        inputs=wrt,
    )


def _grads(td: TensorDictBase) -> TensorDictBase | None:
    """``td.grad`` without the lock: None when no entry is left."""
    out = td._new_tensordict({}, batch_size=td.batch_size, device=td.device, names=td._names)
    no_graph = _no_graph(td)
    kept = False
    for key in td._keys_str():
        meta = td._meta_str(key)
        value: Any
        if meta.kind == "tensor":
            if no_graph:
                continue
            value = td._get_str(key).grad
        elif meta.kind == "nested":
            value = _grads(td._get_str(key))
        else:
            value = td._get_str(key)
        if value is not None:
            out._set_str(key, value, inplace=False)
            kept = True
    return out if kept else None


# ------------------------------------------------------------------ torch.autograd.grad
def _one(value: Any, what: str) -> Any:
    """The single tensordict of an ``outputs``/``inputs``/``grad_outputs`` argument."""
    if isinstance(value, (tuple, list)):
        if len(value) != 1:
            raise PtdValueError(
                f"torch.autograd.grad over tensordicts takes a single {what} tensordict, "
                f"got {len(value)}"
            )
        value = value[0]
    if not is_tensordict(value):
        raise PtdValueError(
            f"torch.autograd.grad over tensordicts takes a tensordict as {what}, "
            f"got {type(value).__name__}"
        )
    return value


def _autograd_grad(
    outputs: Any, inputs: Any, grad_outputs: Any = None, **kwargs: Any
) -> TensorDictBase:
    """``torch.autograd.grad(td_out, td_in, td_grad_out)``: a tensordict of the structure of
    ``td_in`` holding d(outputs)/d(leaf); a leaf whose gradient is None (``allow_unused``) is
    left out."""
    out_td = _one(outputs, "output")
    in_td = _one(inputs, "input")
    for td, what in ((out_td, "outputs"), (in_td, "inputs")):
        if _no_graph(td):
            raise GradientError(_store_message(td, f"torch.autograd.grad {what}"))
    out_leaves = _leaves(out_td)
    grad_leaves = None
    if grad_outputs is not None:
        g_td = _one(grad_outputs, "grad_output")
        grad_leaves = []
        for key, _ in out_leaves:
            g = g_td.get(key)
            if not isinstance(g, torch.Tensor):
                raise PtdKeyError(f"torch.autograd.grad: grad_outputs has no tensor for {key!r}")
            grad_leaves.append(g)
    in_leaves = _leaves(in_td)
    grads = torch.autograd.grad(
        [t for _, t in out_leaves], [t for _, t in in_leaves], grad_leaves, **kwargs
    )
    by_key = {k: g for (k, _), g in zip(in_leaves, grads, strict=True)}
    result = _rebuild(in_td, (), by_key)
    if in_td.is_locked:
        result.lock_()
    return result


def _rebuild(
    td: TensorDictBase, prefix: tuple[str, ...], grads: dict[NestedKey, Any]
) -> TensorDictBase:
    out = td._new_tensordict({}, batch_size=td.batch_size, device=td.device, names=td._names)
    for key in td._keys_str():
        meta = td._meta_str(key)
        value: Any
        if meta.kind == "tensor":
            value = grads.get(out_key(prefix + (key,)))
        elif meta.kind == "nested":
            value = _rebuild(td._get_str(key), prefix + (key,), grads)
        else:
            value = td._get_str(key)
        if value is not None:
            out._set_str(key, value, inplace=False)
    return out


HANDLED_FUNCTIONS[torch.autograd.grad] = _autograd_grad
