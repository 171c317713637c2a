"""``torch.<function>(td, ...)``: the torch functions a tensordict answers, as tensordict 0.15.

:func:`torch_function` is every container's ``__torch_function__``: it looks the
function up in :data:`HANDLED_FUNCTIONS`. Shape functions (``torch.flip``, ``torch.gather``...)
call the method of the same name; reductions (``torch.mean``, ``torch.std``...) and pointwise
functions (``torch.isfinite``, ``torch.maximum``...) call the tensordict's method of that name
when it has one, and otherwise apply the function leaf by leaf. A function not in the table is
left to torch (which then raises ``TypeError``).

>>> import torch
>>> from ptd import TensorDict
>>> td = TensorDict({"a": torch.ones(2, 3)}, batch_size=[2, 3])
>>> torch.zeros_like(td)["a"].sum().item()
0.0
>>> torch.flip(td, (0,)).batch_size
torch.Size([2, 3])
>>> torch.maximum(td, td * 2)["a"][0, 0].item()
2.0
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import torch

from ptd.errors import NotSupportedError, PtdTypeError, PtdValueError
from ptd.ops.joining import cat, stack
from ptd.ops.root import TensorDictRoot, is_tensordict

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase

__all__ = ["HANDLED_FUNCTIONS"]

#: torch function -> what ``torch.<function>(td, ...)`` calls
HANDLED_FUNCTIONS: dict[Callable[..., Any], Callable[..., Any]] = {}


def _handles(*funcs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def register(impl: Callable[..., Any]) -> Callable[..., Any]:
        for f in funcs:
            if f is not None:
                HANDLED_FUNCTIONS[f] = impl
        return impl

    return register


def _method(name: str) -> Callable[..., Any]:
    """``torch.<name>(td, *args)`` -> ``td.<name>(*args)``."""

    def call(td: Any, *args: Any, **kwargs: Any) -> Any:
        if not is_tensordict(td):
            raise PtdTypeError(
                f"torch.{name} takes a tensordict as its first argument, got {type(td).__name__}."
            )
        return getattr(td, name)(*args, **kwargs)

    call.__name__ = f"_{name}"
    return call


# --- shape functions: the method of the same name -------------------------------------------
for _name in (
    "unbind",
    "flip",
    "fliplr",
    "flipud",
    "roll",
    "rot90",
    "narrow",
    "tile",
    "repeat_interleave",
    "broadcast_to",
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "transpose",
    "swapaxes",
    "swapdims",
    "squeeze",
    "unsqueeze",
    "masked_select",
    "movedim",
    "moveaxis",
    "split",
    "chunk",
    "clone",
    "flatten",
    "unflatten",
    "mean",
    "sum",
    "std",
    "var",
):
    _handles(getattr(torch, _name))(_method(_name))


@_handles(torch.reshape)
def _reshape(td: TensorDictBase, shape: Sequence[int]) -> TensorDictBase:
    return td.reshape(*shape)


@_handles(torch.permute)
def _permute(td: TensorDictBase, dims: Sequence[int]) -> TensorDictBase:
    return td.permute(*dims)


@_handles(torch.gather)
def _gather(
    td: TensorDictBase,
    dim: int,
    index: torch.Tensor,
    *,
    sparse_grad: bool = False,
    out: TensorDictBase | None = None,
) -> TensorDictBase:
    if sparse_grad:
        raise NotSupportedError(
            "sparse_grad=True not implemented for torch.gather(tensordict, ...)"
        )
    return td.gather(dim, index, out=out)


@_handles(torch.tensor_split)
def _tensor_split(
    td: TensorDictBase,
    indices_or_sections: Any = None,
    dim: int = 0,
    *,
    sections: int | None = None,
    indices: Sequence[int] | None = None,
    tensor_indices_or_sections: torch.Tensor | None = None,
) -> tuple[TensorDictBase, ...]:
    # torch names the argument after its type
    if indices_or_sections is None:
        for alt in (sections, indices, tensor_indices_or_sections):
            if alt is not None:
                indices_or_sections = alt
                break
    return td.tensor_split(indices_or_sections, dim)


@_handles(torch.where)
def _where(condition: torch.Tensor, input: Any, other: Any, *, out: Any = None) -> Any:
    if not is_tensordict(input) and is_tensordict(other):
        # torch.where(condition, value, td): take td where condition is False
        return other.where(condition.logical_not(), input, out=out)
    return input.where(condition, other, out=out)


@_handles(torch.stack)
def _stack(tds: Sequence[TensorDictBase], dim: int = 0, *, out: Any = None) -> TensorDictBase:
    return stack(tds, dim, out=out)


@_handles(torch.cat, torch.concat, torch.concatenate)
def _cat(tds: Sequence[TensorDictBase], dim: int = 0, *, out: Any = None) -> TensorDictBase:
    return cat(tds, dim, out=out)


# --- *_like: a new TensorDict with each tensor leaf made by the factory ------------------------
def _like(factory: Callable[..., torch.Tensor]) -> Callable[..., Any]:
    def make(td: TensorDictBase, *args: Any, **kwargs: Any) -> TensorDictBase:
        dtype = kwargs.pop("dtype", None)
        if "device" in kwargs:
            device = kwargs.pop("device")
            return cast(
                "TensorDictBase",
                td.apply(
                    lambda t: factory(t, *args, dtype=dtype, device=device, **kwargs),
                    device=device,
                ),
            )
        return cast("TensorDictBase", td.apply(lambda t: factory(t, *args, dtype=dtype, **kwargs)))

    return make


for _factory in (
    torch.zeros_like,
    torch.ones_like,
    torch.empty_like,
    torch.rand_like,
    torch.randn_like,
    torch.full_like,
):
    _handles(_factory)(_like(_factory))


# --- pointwise functions: the method when the tensordict has one, else leaf by leaf ---------
_POINTWISE = [
    "abs",
    "abs_",
    "acos",
    "acos_",
    "add",
    "addcdiv",
    "addcmul",
    "asin",
    "asin_",
    "atan",
    "atan_",
    "bitwise_and",
    "ceil",
    "ceil_",
    "clamp",
    "clamp_max",
    "clamp_max_",
    "clamp_min",
    "clamp_min_",
    "cos",
    "cos_",
    "cosh",
    "cosh_",
    "div",
    "erf",
    "erf_",
    "erfc",
    "erfc_",
    "exp",
    "exp_",
    "expm1",
    "expm1_",
    "floor",
    "floor_",
    "frac",
    "frac_",
    "isfinite",
    "isnan",
    "isneginf",
    "isposinf",
    "isreal",
    "lerp",
    "lgamma",
    "log",
    "log10",
    "log10_",
    "log1p",
    "log1p_",
    "log2",
    "log2_",
    "log_",
    "logical_and",
    "maximum",
    "minimum",
    "mul",
    "neg",
    "neg_",
    "pow",
    "reciprocal",
    "reciprocal_",
    "round",
    "round_",
    "rsub",
    "sigmoid",
    "sigmoid_",
    "sign",
    "sin",
    "sin_",
    "sinh",
    "sinh_",
    "sqrt",
    "sqrt_",
    "sub",
    "tan",
    "tan_",
    "tanh",
    "tanh_",
    "trunc",
    "trunc_",
]


def _pointwise(name: str) -> Callable[..., Any]:
    func = getattr(torch, name)

    def call(td: Any, *args: Any, **kwargs: Any) -> Any:
        if not is_tensordict(td):
            raise PtdTypeError(
                f"torch.{name} takes a tensordict as its first argument, got {type(td).__name__}."
            )
        method = getattr(td, name, None)
        if method is not None:
            return method(*args, **kwargs)
        tds = [a for a in args if is_tensordict(a)]
        slots = [i for i, a in enumerate(args) if is_tensordict(a)]

        def leaf(t: torch.Tensor, *others: torch.Tensor) -> torch.Tensor:
            full = list(args)
            for i, o in zip(slots, others, strict=True):
                full[i] = o
            return func(t, *full, **kwargs)  # type: ignore[no-any-return]

        if name.endswith("_"):
            return td.apply_(leaf, *tds)
        return td.apply(leaf, *tds)

    call.__name__ = f"_{name}"
    return call


for _name in _POINTWISE:
    if hasattr(torch, _name):
        _handles(getattr(torch, _name))(_pointwise(_name))


def _loss(func: Callable[..., torch.Tensor]) -> Callable[..., Any]:
    def call(input: Any, target: Any, *args: Any, **kwargs: Any) -> Any:
        reduction = kwargs.pop("reduction", "mean")
        if reduction not in ("none", "mean", "sum"):
            raise PtdValueError(
                f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', 'sum'."
            )
        extra = {k: v for k, v in kwargs.items() if k == "beta"}
        fn = functools.partial(func, reduction=reduction, **extra)
        return input.apply(fn, target, batch_size=None if reduction == "none" else [])

    return call


for _loss_fn in (
    torch.nn.functional.l1_loss,
    torch.nn.functional.mse_loss,
    torch.nn.functional.smooth_l1_loss,
):
    _handles(_loss_fn)(_loss(_loss_fn))


def torch_function(
    cls: type[TensorDictBase],
    func: Any,
    types: Any,
    args: Sequence[Any] = (),
    kwargs: dict[str, Any] | None = None,
) -> Any:
    impl = HANDLED_FUNCTIONS.get(func)
    if impl is None or not all(issubclass(t, (torch.Tensor, TensorDictRoot)) for t in types):
        return NotImplemented
    return impl(*args, **(kwargs or {}))
