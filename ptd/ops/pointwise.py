"""Elementwise math on every tensor leaf: ``abs``, ``exp``, ``clamp``, ``add``, ``lerp``...

Written once on the container primitives of :class:`~ptd.containers.base.TensorDictBase`, which
binds them as methods, with tensordict 0.15's signatures. Each op has an out-of-place form, which returns a
new in-memory :class:`ptd.TensorDict` (also for a PersistentTensorDict), and most have an
in-place ``name_`` form, which writes into the leaves (on a PersistentTensorDict, back to the
store, slab by slab; see :class:`ptd.ops.leaf_access.LeafAccess`).

Operands: a number; a tensordict, paired with ``self`` leaf by leaf (its keys must match, unless
``default=`` is given: ``"intersection"`` keeps the common keys, a value stands in for a missing
leaf); a tensor with dims, which lines up with the *batch* dims and is broadcast over each
leaf's feature dims. In-place ops check every leaf's dtype against the operands before writing
anything, so a refused cast leaves the data as it was.

>>> import torch
>>> from ptd import TensorDict
>>> td = TensorDict(a=torch.tensor([-1.0, 4.0]), b=torch.tensor([[1, 2], [3, 4]]), batch_size=[2])
>>> td.abs()["a"]
tensor([1., 4.])
>>> td.clamp(0, 2)["b"]
tensor([[1, 2],
        [2, 2]])
>>> td.mul(torch.tensor([10, 100]))["b"]
tensor([[ 10,  20],
        [300, 400]])
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import torch

from ptd.errors import (
    NotSupportedError,
    PtdKeyError,
    PtdTypeError,
    PtdValueError,
    UnsupportedOperationError,
)
from ptd.ops.operands import (
    _as_leaf_tensordict,
    _as_tensor,
    _BatchTensor,
    _dry,
    _expanded,
    _map_tree,
    _mismatch,
    _on_leaf,
    _value,
    _where_td,
    _with_default,
)
from ptd.ops.root import is_tensordict

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase

__all__ = ["INPLACE_UNARY_OPS", "PREDICATES", "UNARY_OPS"]

#: unary ops with an out-of-place form ``name()`` and an in-place form ``name_()``
UNARY_OPS = [
    "abs",
    "acos",
    "asin",
    "atan",
    "ceil",
    "cos",
    "cosh",
    "erf",
    "erfc",
    "exp",
    "expm1",
    "floor",
    "frac",
    "lgamma",
    "log",
    "log10",
    "log1p",
    "log2",
    "neg",
    "reciprocal",
    "round",
    "sigmoid",
    "sign",
    "sin",
    "sinh",
    "sqrt",
    "tan",
    "tanh",
    "trunc",
]
INPLACE_UNARY_OPS = tuple(f"{n}_" for n in UNARY_OPS)
#: unary ops giving a bool leaf (out of place only)
PREDICATES = ("isfinite", "isnan", "isneginf", "isposinf", "isreal")


def _unary(name: str) -> Callable[[TensorDictBase], TensorDictBase]:
    fn = getattr(torch.Tensor, name)

    def method(td: TensorDictBase) -> TensorDictBase:
        return _pointwise(td, fn)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"A new tensordict with ``torch.{name}`` applied to every leaf."
    return method


def _unary_inplace(name: str) -> Callable[[TensorDictBase], TensorDictBase]:
    fn = getattr(torch.Tensor, name)

    def method(td: TensorDictBase) -> TensorDictBase:
        return _inplace(td, fn)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"Apply ``torch.Tensor.{name}`` to every leaf in place; returns self."
    return method


# ------------------------------------------------------------------ machinery
def _operands(
    td: TensorDictBase, operands: Sequence[Any], *, inplace: bool
) -> tuple[TensorDictBase, list[Any]]:
    """``self`` (expanded when an operand has more batch dims, out of place) and the
    operands, tensors with dims wrapped as batch-aligned."""
    me = td
    shapes = [
        o.shape if isinstance(o, torch.Tensor) else o.batch_size
        for o in operands
        if (isinstance(o, torch.Tensor) and o.ndim)
        or (is_tensordict(o) and o.batch_size and o.batch_size != td.batch_size)
    ]
    if not shapes:
        return me, list(operands)
    shape = torch.broadcast_shapes(td.batch_size, *shapes)
    if shape != td.batch_size:
        if inplace:
            raise PtdValueError(
                f"cannot broadcast operands of shapes {[list(s) for s in shapes]} into the "
                f"batch size {list(td.batch_size)} in place"
            )
        me = td.expand(shape)
    out: list[Any] = []
    for o in operands:
        if isinstance(o, torch.Tensor) and o.ndim:
            out.append(_BatchTensor(o.expand(shape)))
        elif is_tensordict(o) and o.batch_size != shape:
            out.append(o.expand(shape))
        else:
            out.append(o)
    return me, out


def _pointwise(
    td: TensorDictBase, fn: Callable[..., Any], *operands: Any, default: Any = None
) -> TensorDictBase:
    """A new TensorDict of ``fn(leaf, *operand leaves)``."""
    me, ops = _operands(td, operands, inplace=False)
    tds = [o for o in ops if is_tensordict(o)]
    if default is not None and tds:
        return _with_default(me, fn, ops, default)
    mine = set(me.keys(True, True))
    for o in tds:
        theirs = set(o.keys(True, True))
        if theirs != mine:
            raise _mismatch(mine, theirs)
    flags = [is_tensordict(o) for o in ops]

    def leaf_fn(x: torch.Tensor, leaves: list[Any]) -> Any:
        it = iter(leaves)
        args = [next(it) if f else _on_leaf(o, x) for f, o in zip(flags, ops, strict=True)]
        return fn(x, *args)

    return _map_tree(me, leaf_fn, tds)


def _inplace(td: TensorDictBase, fn: Callable[..., Any], *operands: Any) -> TensorDictBase:
    """Apply ``fn(leaf, *operand leaves)`` (a torch in-place method) to every leaf and
    write the result back; leaves and operands are checked for dtypes first."""
    td._leaves.check_writable(td)
    _, ops = _operands(td, operands, inplace=True)
    leaves = [(p, m) for p, m in td._metas(True) if m.kind == "tensor"]
    for o in ops:
        if is_tensordict(o):
            missing = {p for p, _ in leaves if not o._has(p)}
            if missing:
                raise _mismatch({k[0] if len(k) == 1 else k for k in missing}, set())
    for parts, meta in leaves:
        assert meta.dtype is not None
        fn(torch.empty(0, dtype=meta.dtype), *(_dry(o, parts) for o in ops))
    # batch-aligned tensors become tensordicts of expanded views, so that a file-backed
    # tensordict can cut them into the row slabs it streams
    packed = tuple(_as_leaf_tensordict(td, o) for o in ops)

    def leaf_fn(t: torch.Tensor, o: Any) -> torch.Tensor:
        return cast(torch.Tensor, fn(t, *o))

    return td._leaves.map_inplace(td, leaf_fn, packed)


# ------------------------------------------------------------------ unary
abs = _unary("abs")


abs_ = _unary_inplace("abs_")


acos = _unary("acos")


acos_ = _unary_inplace("acos_")


asin = _unary("asin")


asin_ = _unary_inplace("asin_")


atan = _unary("atan")


atan_ = _unary_inplace("atan_")


ceil = _unary("ceil")


ceil_ = _unary_inplace("ceil_")


cos = _unary("cos")


cos_ = _unary_inplace("cos_")


cosh = _unary("cosh")


cosh_ = _unary_inplace("cosh_")


erf = _unary("erf")


erf_ = _unary_inplace("erf_")


erfc = _unary("erfc")


erfc_ = _unary_inplace("erfc_")


exp = _unary("exp")


exp_ = _unary_inplace("exp_")


expm1 = _unary("expm1")


expm1_ = _unary_inplace("expm1_")


floor = _unary("floor")


floor_ = _unary_inplace("floor_")


frac = _unary("frac")


frac_ = _unary_inplace("frac_")


lgamma = _unary("lgamma")


lgamma_ = _unary_inplace("lgamma_")


log = _unary("log")


log_ = _unary_inplace("log_")


log10 = _unary("log10")


log10_ = _unary_inplace("log10_")


log1p = _unary("log1p")


log1p_ = _unary_inplace("log1p_")


log2 = _unary("log2")


log2_ = _unary_inplace("log2_")


neg = _unary("neg")


neg_ = _unary_inplace("neg_")


reciprocal = _unary("reciprocal")


reciprocal_ = _unary_inplace("reciprocal_")


round = _unary("round")


round_ = _unary_inplace("round_")


sigmoid = _unary("sigmoid")


sigmoid_ = _unary_inplace("sigmoid_")


sign = _unary("sign")


sign_ = _unary_inplace("sign_")


sin = _unary("sin")


sin_ = _unary_inplace("sin_")


sinh = _unary("sinh")


sinh_ = _unary_inplace("sinh_")


sqrt = _unary("sqrt")


sqrt_ = _unary_inplace("sqrt_")


tan = _unary("tan")


tan_ = _unary_inplace("tan_")


tanh = _unary("tanh")


tanh_ = _unary_inplace("tanh_")


trunc = _unary("trunc")


trunc_ = _unary_inplace("trunc_")


isfinite = _unary("isfinite")


isnan = _unary("isnan")


isneginf = _unary("isneginf")


isposinf = _unary("isposinf")


isreal = _unary("isreal")


def abs_operator(td: TensorDictBase) -> TensorDictBase:
    return _pointwise(td, torch.abs)


def neg_operator(td: TensorDictBase) -> TensorDictBase:
    return _pointwise(td, torch.neg)


def invert(td: TensorDictBase) -> TensorDictBase:
    return _pointwise(td, operator.invert)


# ------------------------------------------------------------------ binary, out of place
def add(
    td: TensorDictBase, other: Any, *, alpha: float | None = None, default: Any = None
) -> TensorDictBase:
    """``self + alpha * other``, leaf by leaf."""
    if alpha is None:
        return _pointwise(td, torch.add, other, default=default)
    return _pointwise(td, lambda x, y: torch.add(x, y, alpha=alpha), other, default=default)


def sub(
    td: TensorDictBase, other: Any, *, alpha: float | None = None, default: Any = None
) -> TensorDictBase:
    """``self - alpha * other``, leaf by leaf."""
    if alpha is None:
        return _pointwise(td, torch.sub, other, default=default)
    return _pointwise(td, lambda x, y: torch.sub(x, y, alpha=alpha), other, default=default)


def rsub(
    td: TensorDictBase, other: Any, *, alpha: float | None = None, default: Any = None
) -> TensorDictBase:
    """``other - alpha * self``, leaf by leaf."""
    a = 1 if alpha is None else alpha
    return _pointwise(td, lambda x, y: torch.rsub(x, y, alpha=a), other, default=default)


def mul(td: TensorDictBase, other: Any, *, default: Any = None) -> TensorDictBase:
    return _pointwise(td, torch.mul, other, default=default)


def div(td: TensorDictBase, other: Any, *, default: Any = None) -> TensorDictBase:
    return _pointwise(td, torch.div, other, default=default)


def pow(td: TensorDictBase, other: Any, *, default: Any = None) -> TensorDictBase:
    return _pointwise(td, torch.pow, other, default=default)


def mod(td: TensorDictBase, other: Any) -> TensorDictBase:
    return _pointwise(td, lambda x, y: x % y, other)


def maximum(td: TensorDictBase, other: Any, *, default: Any = None) -> TensorDictBase:
    return _pointwise(td, lambda x, y: torch.maximum(x, _as_tensor(y, x)), other, default=default)


def minimum(td: TensorDictBase, other: Any, *, default: Any = None) -> TensorDictBase:
    return _pointwise(td, lambda x, y: torch.minimum(x, _as_tensor(y, x)), other, default=default)


def bitwise_and(td: TensorDictBase, other: Any, *, default: Any = None) -> TensorDictBase:
    return _pointwise(td, torch.bitwise_and, other, default=default)


def logical_and(td: TensorDictBase, other: Any, *, default: Any = None) -> TensorDictBase:
    return _pointwise(td, torch.logical_and, other, default=default)


def clamp_max(td: TensorDictBase, other: Any, *, default: Any = None) -> TensorDictBase:
    return _pointwise(td, torch.clamp_max, other, default=default)


def clamp_min(td: TensorDictBase, other: Any, default: Any = None) -> TensorDictBase:
    return _pointwise(td, torch.clamp_min, other, default=default)


def clamp(
    td: TensorDictBase, min: Any = None, max: Any = None, *, out: Any = None
) -> TensorDictBase:
    """Every leaf clamped into ``[min, max]`` (tensordict bounds: both or neither)."""
    if out is not None:
        if min is None and max is None:
            raise PtdValueError(
                "clamp() with min/max=None isn't implemented with specified output."
            )
        result = td.clamp(min, max)
        keys, out_keys = set(result.keys(True, True)), set(out.keys(True, True))
        if keys != out_keys:
            raise PtdKeyError(
                f"out must have the keys of the result: it lacks {keys - out_keys or '{}'} "
                f"and has the extra keys {out_keys - keys or '{}'}."
            )
        for key in keys:
            want, have = result.get(key).dtype, out.get(key).dtype
            if want != have:
                raise NotSupportedError(f"Found dtype {have} but expected {want} for key {key!r}.")
        return cast("TensorDictBase", out.update_(result))
    if min is None and max is None:
        raise PtdTypeError("clamp() needs at least one of min and max")
    if min is None:
        return td.clamp_max(max)
    if max is None:
        return td.clamp_min(min)
    if is_tensordict(min) != is_tensordict(max):
        raise PtdValueError(
            "Mixed tensordict and non-tensordict min/max values are not authorized."
        )
    return _pointwise(td, torch.clamp, min, max)


def lerp(td: TensorDictBase, end: Any, weight: Any) -> TensorDictBase:
    """``self + weight * (end - self)``, leaf by leaf."""
    return _pointwise(td, torch.lerp, end, weight)


def addcmul(
    td: TensorDictBase, other1: Any, other2: Any, *, value: float | None = 1
) -> TensorDictBase:
    """``self + value * other1 * other2``, leaf by leaf."""
    return _pointwise(
        td, lambda x, a, b: torch.addcmul(x, a, b, value=_value(value)), other1, other2
    )


def addcdiv(
    td: TensorDictBase, other1: Any, other2: Any, value: float | None = 1
) -> TensorDictBase:
    """``self + value * other1 / other2``, leaf by leaf."""
    return _pointwise(
        td, lambda x, a, b: torch.addcdiv(x, a, b, value=_value(value)), other1, other2
    )


# ------------------------------------------------------------------ masks
def masked_fill(td: TensorDictBase, mask: torch.Tensor, value: float | bool) -> TensorDictBase:
    """A copy with ``value`` where ``mask`` (over the batch dims) is True."""
    return td.to_tensordict().masked_fill_(mask, value)


def where(
    td: TensorDictBase,
    condition: torch.Tensor,
    other: Any,
    *,
    out: TensorDictBase | None = None,
    pad: Any = None,
    update_batch_size: bool = False,
) -> TensorDictBase:
    """``torch.where(condition, leaf, other)`` for every leaf, ``condition`` lining up with
    the batch dims. A tensordict ``other`` is paired by key; a key that only one side has
    takes ``pad`` on the other (KeyError without ``pad``)."""
    me = td
    if is_tensordict(out) and out._leaves.reads_copy:
        raise UnsupportedOperationError(
            "Cannot use a persistent tensordict as output of torch.where."
        )
    if is_tensordict(other):
        return _where_td(me, condition, other, out, pad)

    def pick(x: torch.Tensor, _: list[Any]) -> torch.Tensor:
        return torch.where(_expanded(condition, x.shape), x, other)

    result = _map_tree(me, pick, [])
    if out is None:
        return result
    if not result.is_empty():
        out.update(result)
    return out


# ------------------------------------------------------------------ binary, in place
def add_(td: TensorDictBase, other: Any, *, alpha: float | None = None) -> TensorDictBase:
    if alpha is None:
        return _inplace(td, torch.Tensor.add_, other)
    return _inplace(td, lambda x, y: x.add_(y, alpha=alpha), other)


def sub_(td: TensorDictBase, other: Any, alpha: float | None = None) -> TensorDictBase:
    if alpha is None:
        return _inplace(td, torch.Tensor.sub_, other)
    return _inplace(td, lambda x, y: x.sub_(y, alpha=alpha), other)


def mul_(td: TensorDictBase, other: Any) -> TensorDictBase:
    return _inplace(td, torch.Tensor.mul_, other)


def div_(td: TensorDictBase, other: Any) -> TensorDictBase:
    return _inplace(td, torch.Tensor.div_, other)


def pow_(td: TensorDictBase, other: Any) -> TensorDictBase:
    return _inplace(td, torch.Tensor.pow_, other)


def maximum_(td: TensorDictBase, other: Any) -> TensorDictBase:
    return _inplace(td, lambda x, y: torch.maximum(x, _as_tensor(y, x), out=x), other)


def minimum_(td: TensorDictBase, other: Any) -> TensorDictBase:
    return _inplace(td, lambda x, y: torch.minimum(x, _as_tensor(y, x), out=x), other)


def clamp_max_(td: TensorDictBase, other: Any) -> TensorDictBase:
    return _inplace(td, torch.Tensor.clamp_max_, other)


def clamp_min_(td: TensorDictBase, other: Any) -> TensorDictBase:
    return _inplace(td, torch.Tensor.clamp_min_, other)


def clamp_(td: TensorDictBase, min: Any = None, max: Any = None) -> TensorDictBase:
    """In-place :meth:`clamp` (ptd only: tensordict 0.15 has no ``clamp_``)."""
    if min is None and max is None:
        raise PtdTypeError("clamp_() needs at least one of min and max")
    if min is None:
        return td.clamp_max_(max)
    if max is None:
        return td.clamp_min_(min)
    return _inplace(td, torch.Tensor.clamp_, min, max)


def lerp_(td: TensorDictBase, end: Any, weight: Any) -> TensorDictBase:
    return _inplace(td, torch.Tensor.lerp_, end, weight)


def addcmul_(
    td: TensorDictBase, other1: Any, other2: Any, *, value: float | None = 1
) -> TensorDictBase:
    return _inplace(td, lambda x, a, b: x.addcmul_(a, b, value=_value(value)), other1, other2)


def addcdiv_(
    td: TensorDictBase, other1: Any, other2: Any, *, value: float | None = 1
) -> TensorDictBase:
    return _inplace(td, lambda x, a, b: x.addcdiv_(a, b, value=_value(value)), other1, other2)


# ------------------------------------------------------------------ operators
def add_operator(td: TensorDictBase, other: Any) -> TensorDictBase:
    return _pointwise(td, torch.add, other)


def radd(td: TensorDictBase, other: Any) -> TensorDictBase:
    return _pointwise(td, lambda x, y: y + x, other)


def sub_operator(td: TensorDictBase, other: Any) -> TensorDictBase:
    return _pointwise(td, torch.sub, other)


def rsub_operator(td: TensorDictBase, other: Any) -> TensorDictBase:
    return _pointwise(td, lambda x, y: y - x, other)


def mul_operator(td: TensorDictBase, other: Any) -> TensorDictBase:
    return _pointwise(td, torch.mul, other)


def rmul(td: TensorDictBase, other: Any) -> TensorDictBase:
    return _pointwise(td, lambda x, y: y * x, other)


def truediv(td: TensorDictBase, other: Any) -> TensorDictBase:
    return _pointwise(td, torch.div, other)


def rtruediv(td: TensorDictBase, other: Any) -> TensorDictBase:
    return _pointwise(td, lambda x, y: y / x, other)


def pow_operator(td: TensorDictBase, other: Any) -> TensorDictBase:
    return _pointwise(td, torch.pow, other)


def rpow(td: TensorDictBase, other: Any) -> TensorDictBase:
    raise NotSupportedError(
        "rpow isn't implemented for tensordict yet. Make sure both elements are wrapped in "
        "a tensordict for this to work."
    )


def mod_operator(td: TensorDictBase, other: Any) -> TensorDictBase:
    return _pointwise(td, lambda x, y: x % y, other)


def and_operator(td: TensorDictBase, other: Any) -> TensorDictBase:
    return _pointwise(td, lambda x, y: x & y, other)


def rand(td: TensorDictBase, other: Any) -> TensorDictBase:
    return _pointwise(td, lambda x, y: y & x, other)


def or_operator(td: TensorDictBase, other: Any) -> TensorDictBase:
    return _pointwise(td, lambda x, y: x | y, other)


def ror(td: TensorDictBase, other: Any) -> TensorDictBase:
    return _pointwise(td, lambda x, y: y | x, other)


def xor(td: TensorDictBase, other: Any) -> TensorDictBase:
    return _pointwise(td, lambda x, y: x ^ y, other)


def rxor(td: TensorDictBase, other: Any) -> TensorDictBase:
    return _pointwise(td, lambda x, y: y ^ x, other)


def iadd(td: TensorDictBase, other: Any) -> TensorDictBase:
    return td.add_(other)


def isub(td: TensorDictBase, other: Any) -> TensorDictBase:
    return td.sub_(other)


def imul(td: TensorDictBase, other: Any) -> TensorDictBase:
    return td.mul_(other)


def itruediv(td: TensorDictBase, other: Any) -> TensorDictBase:
    return td.div_(other)


def ipow(td: TensorDictBase, other: Any) -> TensorDictBase:
    return td.pow_(other)
