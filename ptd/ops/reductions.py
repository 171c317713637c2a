"""Reductions of every tensor leaf: ``sum``, ``mean``, ``std``, ``min``, ``quantile``...

Written once on the container primitives of :class:`~ptd.containers.base.TensorDictBase` and mixed
into it, with tensordict 0.15's signatures and results:

- no ``dim``: every element of each leaf is reduced; the result has batch size ``[]``;
- ``dim`` (an int, or a tuple where the reduction takes one): batch dims, a negative one counted
  from the end of the batch dims; ``keepdim=True`` keeps them with size 1;
- ``dim="feature"``: each leaf's feature dims (those after the batch dims) are reduced, the
  batch size stays;
- ``reduce=True``: the leaves are reduced together into one tensor.

``min``/``max``/``cummin``/``cummax`` with a ``dim`` return ``torch.return_types`` named tuples
of two tensordicts (``values``, ``indices``), as torch does for a tensor.

Each tensor leaf goes through :meth:`LeafAccess.reduce <ptd.ops.leaf_access.LeafAccess.reduce>` with a :class:`LeafOp` that
describes the operation: a file-backed class overrides it to read the leaf in row slabs
(:mod:`ptd.containers.persistent.streaming`).

>>> import torch
>>> from ptd import TensorDict
>>> td = TensorDict(a=torch.arange(6.0).reshape(2, 3), batch_size=[2, 3])
>>> td.sum()["a"]
tensor(15.)
>>> td.mean(dim=0)["a"]
tensor([1.5000, 2.5000, 3.5000])
>>> td.max(dim=1).indices["a"]
tensor([2, 2])
"""

from __future__ import annotations

import builtins
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

import torch

from ptd.errors import PtdTypeError, PtdValueError, UnsupportedOperationError
from ptd.ops import apply as apply_ops
from ptd.ops.keys import NestedKey
from ptd.ops.leafop import (
    _NO_EMPTY_DIM,
    _WITH_INDICES,
    NO_DEFAULT,
    LeafOp,
    _pad_names,
    _pos_dim,
    _warn_tuple_dim,
)
from ptd.ops.nontensor import NonTensorData
from ptd.ops.root import is_tensordict

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase

__all__ = ["NO_DEFAULT", "LeafOp"]


def _check_feature_keepdim(keepdim: Any) -> None:
    if keepdim:
        raise PtdTypeError("dim='feature' is incompatible with keepdim=True.")


def _reduce_tree(
    td: TensorDictBase,
    op: LeafOp,
    batch_size: Sequence[int],
    nested: Callable[[TensorDictBase], Any] | None,
    names: list[str | None] | None = None,
) -> Any:
    """A new TensorDict of batch size ``batch_size`` with ``op`` applied to every tensor
    leaf; nested tensordicts go through ``nested`` (or, if None, get ``op`` on their leaves
    and the new batch size). NonTensorData entries are kept; stacks are dropped.

    When ``op`` gives (values, indices) pairs, two TensorDicts of that structure."""
    bs = torch.Size(batch_size)
    pair = not op.values_only and op.name in _WITH_INDICES
    outs = [
        td._new_tensordict({}, batch_size=bs, device=td.device, names=names)
        for _ in range(2 if pair else 1)
    ]
    for key in td._keys_str():
        meta = td._meta_str(key)
        value: Any
        if meta.kind == "nested":
            sub = td._get_str(key)
            value = nested(sub) if nested is not None else _reduce_tree(sub, op, bs, None)
        elif meta.kind == "tensor":
            value = td._leaves.reduce(td, key, op)
        else:
            if pair:
                continue
            value = td._get_str(key)
            if not isinstance(value, NonTensorData):
                continue
            value = NonTensorData(value.data, bs, value.device)
        if pair:
            outs[0]._set_str(key, value[0], inplace=False)
            outs[1]._set_str(key, value[1], inplace=False)
        else:
            outs[0]._set_str(key, value, inplace=False)
    return tuple(outs) if pair else outs[0]


def _names_without(td: TensorDictBase, dims: Sequence[int]) -> list[str | None] | None:
    names = td._names
    if names is None:
        return None
    return [n for i, n in enumerate(names) if i not in dims]


# ------------------------------------------------------------------ the shared driver
def _reduction(
    td: TensorDictBase,
    name: str,
    dim: Any,
    keepdim: Any,
    *,
    reduce: bool | None = None,
    tuple_ok: bool = True,
    values_only: bool = True,
    call_on_nested: bool = True,
    keep_batch: bool = False,
    **kwargs: Any,
) -> Any:
    if isinstance(dim, tuple) and not dim and name not in _NO_EMPTY_DIM:
        dim = None
    if dim is None and not keepdim:
        dim = NO_DEFAULT
    if reduce:
        return td._leaves.reduce_together(td, name, dim, keepdim, **kwargs)
    q_dims: list[int] = []
    q = kwargs.get("q")
    if isinstance(q, torch.Tensor) and q.ndim == 1:
        q_dims = [q.shape[0]]
    nb = td.ndim
    if isinstance(dim, str):
        if dim != "feature":
            raise PtdValueError(f"dim must be an int, a tuple of ints or 'feature', not {dim!r}")
        _check_feature_keepdim(keepdim)
        if not call_on_nested:
            raise UnsupportedOperationError(
                f"reduction {name} must be called with call_on_nested=True when dim='feature'."
            )
        op = LeafOp(name, kwargs=kwargs, feature_from=nb)
        bs = [*q_dims, *td.batch_size]
        names: list[str | None] | None = (
            None if td._names is None else _pad_names(len(q_dims), td._names)
        )
        return _reduce_tree(
            td,
            op,
            bs,
            lambda sub: _reduction(
                sub, name, "feature", NO_DEFAULT, reduce=None, tuple_ok=tuple_ok, **kwargs
            ),
            names,
        )
    tuple_dim = None
    if (
        isinstance(dim, tuple)
        and dim
        and (
            name in ("max", "min", "prod", "cummax", "cummin", "quantile")
            or (name in ("amax", "amin") and (len(dim) > 1 or not 0 <= dim[0] < nb))
        )
    ):
        tuple_dim = dim
    if dim is not NO_DEFAULT and dim is not None:
        if isinstance(dim, tuple):
            if tuple_ok:
                dim = tuple(_pos_dim(d, nb) for d in dim)
                if name == "quantile":
                    dim = dim[0]
            else:
                dim = dim[0]  # taken as it is, as tensordict 0.15 does
        else:
            dim = _pos_dim(dim, nb)
    if dim is None:
        dim = NO_DEFAULT  # with keepdim: every element, dims kept
    if dim is NO_DEFAULT and not keepdim:
        op = LeafOp(name, kwargs=kwargs, values_only=True)
        return _reduce_tree(
            td,
            op,
            [],
            lambda sub: _reduction(sub, name, NO_DEFAULT, NO_DEFAULT, reduce=None, **kwargs),
        )
    leaf_dim: int | tuple[int, ...] | None = None if dim is NO_DEFAULT else dim
    op = LeafOp(
        name,
        dim=leaf_dim,
        keepdim=None if keepdim is NO_DEFAULT else bool(keepdim),
        kwargs=kwargs,
        values_only=values_only,
    )
    dims = (
        tuple(range(nb))
        if dim is NO_DEFAULT
        else (dim if isinstance(dim, tuple) else (dim % nb if nb else 0,))
    )
    if keep_batch:
        bs = list(td.batch_size)
        names = td._names
    elif dim is NO_DEFAULT:
        bs = [1] * nb
        names = td._names
    elif keepdim:
        bs = [1 if i in dims else b for i, b in enumerate(td.batch_size)]
        names = td._names
    else:
        bs = [b for i, b in enumerate(td.batch_size) if i not in dims]
        names = _names_without(td, dims)
    if names is not None:
        names = _pad_names(len(q_dims), names)
    nested_fn: Callable[[TensorDictBase], Any] | None = None
    if call_on_nested:

        def nested_fn(sub: TensorDictBase) -> Any:
            return _reduction(
                sub,
                name,
                dim if dim is not NO_DEFAULT else None,
                keepdim,
                reduce=None,
                tuple_ok=tuple_ok,
                values_only=values_only,
                call_on_nested=call_on_nested,
                keep_batch=keep_batch,
                **kwargs,
            )

    result = _reduce_tree(td, op, [*q_dims, *bs], nested_fn, names)
    if tuple_dim is not None:
        _warn_tuple_dim(name, tuple_dim)
    return result


def reduce_concatenated(
    td: TensorDictBase, name: str, dim: Any, keepdim: Any, **kwargs: Any
) -> Any:
    """``reduce=True``: the leaves reduced together into one tensor."""
    leaves = [
        t
        for _, t in apply_ops._tensor_leaves(
            td,
        )
    ]
    if not leaves:
        raise PtdValueError(
            f"{name}(reduce=True) reduces the tensor leaves together, and this tensordict "
            "has no tensor leaves."
        )
    fn = getattr(torch, name)
    if dim is NO_DEFAULT:
        flat = torch.cat([t.contiguous().flatten() for t in leaves])
        if name == "quantile":
            q = kwargs.pop("q")
            return fn(flat, q, **kwargs)
        return fn(flat, **kwargs)
    warn_neg = leaves[0].ndim != td.ndim and builtins.any(
        isinstance(d, int) and d < 0 for d in (dim if isinstance(dim, tuple) else (dim,))
    )
    if dim == "feature":
        nb = td.ndim
        leaves = [t.flatten(nb, -1) if t.ndim > nb else t.unsqueeze(-1) for t in leaves]
        cat_dim: int = -1
        dim, keepdim = -1, False
    else:
        cat_dim = dim[0] if isinstance(dim, tuple) else dim
    joined = torch.cat(leaves, dim=cat_dim)
    kw: dict[str, Any] = {}
    if keepdim is not NO_DEFAULT:
        kw["keepdim"] = keepdim
    kw.update(kwargs)
    if name == "quantile":
        q = kw.pop("q")
        result = fn(joined, q, dim=dim, **kw)
    else:
        result = fn(joined, dim=dim, **kw)
    if warn_neg:
        warnings.warn(
            f"{name}(dim={dim}, reduce=True) counts a negative dim from the end of each "
            "leaf (tensordict 0.17 will count it from the end of the batch dims).",
            FutureWarning,
            stacklevel=3,
        )
    return result


# ------------------------------------------------------------------ all / any
def all(td: TensorDictBase, dim: int | None = None) -> bool | TensorDictBase:
    """True when every element of every leaf is nonzero; with ``dim`` (a batch dim), a
    new tensordict of booleans without that dim."""
    return _all_any(td, "all", dim)


def any(td: TensorDictBase, dim: int | None = None) -> bool | TensorDictBase:
    """True when any element of any leaf is nonzero; with ``dim``, per batch dim."""
    return _all_any(td, "any", dim)


def _all_any(td: TensorDictBase, name: str, dim: int | None) -> bool | TensorDictBase:
    nb = td.ndim
    if dim is not None and not -nb <= dim < nb:
        raise UnsupportedOperationError(
            "dim must be greater than or equal to -tensordict.batch_dims and smaller than "
            "tensordict.batch_dims"
        )
    if dim is not None:
        d = dim % nb
        op = LeafOp(name, dim=d)
        return cast(
            "bool | TensorDictBase",
            _reduce_tree(
                td,
                op,
                [b for i, b in enumerate(td.batch_size) if i != d],
                lambda sub: _all_any(sub, name, d),
                _names_without(td, [d]),
            ),
        )
    want = name == "all"
    for parts, _ in _tensor_leaf_keys(
        td,
    ):
        node, last = td._walk(parts)
        if bool(node._leaves.reduce(node, last, LeafOp(name))) != want:
            return not want
    return want


def _tensor_leaf_keys(td: TensorDictBase) -> list[tuple[tuple[str, ...], Any]]:
    return [(p, m) for p, m in td._metas(True) if m.kind == "tensor"]


# ------------------------------------------------------------------ sum / mean / ...
def sum(
    td: TensorDictBase,
    dim: int | tuple[int, ...] | Literal["feature"] = NO_DEFAULT,
    keepdim: bool = NO_DEFAULT,
    *,
    dtype: torch.dtype | None = None,
    reduce: bool | None = None,
    key_transform: Callable[[NestedKey], NestedKey] | None = None,
) -> TensorDictBase | torch.Tensor:
    """The sum of every leaf (see the module docstring for ``dim``/``keepdim``/``reduce``)."""
    result = _reduction(td, "sum", dim, keepdim, reduce=reduce, dtype=dtype)
    return cast("TensorDictBase | torch.Tensor", _transform(result, key_transform, reduce))


def mean(
    td: TensorDictBase,
    dim: int | tuple[int, ...] | Literal["feature"] = NO_DEFAULT,
    keepdim: bool = NO_DEFAULT,
    *,
    dtype: torch.dtype | None = None,
    reduce: bool | None = None,
    key_transform: Callable[[NestedKey], NestedKey] | None = None,
) -> TensorDictBase | torch.Tensor:
    """The mean of every leaf (integer leaves need ``dtype``, as in torch)."""
    result = _reduction(td, "mean", dim, keepdim, reduce=reduce, dtype=dtype)
    return cast("TensorDictBase | torch.Tensor", _transform(result, key_transform, reduce))


def nansum(
    td: TensorDictBase,
    dim: int | tuple[int, ...] | Literal["feature"] = NO_DEFAULT,
    keepdim: bool = NO_DEFAULT,
    *,
    dtype: torch.dtype | None = None,
    reduce: bool | None = None,
) -> TensorDictBase | torch.Tensor:
    """The sum of every leaf, NaN counted as zero."""
    return cast(
        "TensorDictBase | torch.Tensor",
        _reduction(td, "nansum", dim, keepdim, reduce=reduce, dtype=dtype),
    )


def nanmean(
    td: TensorDictBase,
    dim: int | tuple[int, ...] | Literal["feature"] = NO_DEFAULT,
    keepdim: bool = NO_DEFAULT,
    *,
    dtype: torch.dtype | None = None,
    reduce: bool | None = None,
) -> TensorDictBase | torch.Tensor:
    """The mean of every leaf, NaN left out."""
    return cast(
        "TensorDictBase | torch.Tensor",
        _reduction(td, "nanmean", dim, keepdim, reduce=reduce, dtype=dtype),
    )


def prod(
    td: TensorDictBase,
    dim: int | tuple[int, ...] | Literal["feature"] = NO_DEFAULT,
    keepdim: bool = NO_DEFAULT,
    *,
    dtype: torch.dtype | None = None,
    reduce: bool | None = None,
) -> TensorDictBase | torch.Tensor:
    """The product of every leaf (one dim at a time, as torch.prod)."""
    result = _reduction(td, "prod", dim, False, reduce=reduce, tuple_ok=False, dtype=dtype)
    if keepdim:
        d = dim[0] if isinstance(dim, tuple) else dim
        if d is not None and d is not NO_DEFAULT and d != "feature":
            result = result.unsqueeze(d)
        else:
            result = result.reshape([1] * td.ndim)
    return cast("TensorDictBase | torch.Tensor", result)


def std(
    td: TensorDictBase,
    dim: int | tuple[int, ...] | Literal["feature"] = NO_DEFAULT,
    keepdim: bool = NO_DEFAULT,
    *,
    correction: int = 1,
    reduce: bool | None = None,
    key_transform: Callable[[NestedKey], NestedKey] | None = None,
) -> TensorDictBase | torch.Tensor:
    """The standard deviation of every leaf (``correction=1``: Bessel's)."""
    result = _reduction(td, "std", dim, keepdim, reduce=reduce, correction=correction)
    return cast("TensorDictBase | torch.Tensor", _transform(result, key_transform, reduce))


def var(
    td: TensorDictBase,
    dim: int | tuple[int, ...] | Literal["feature"] = NO_DEFAULT,
    keepdim: bool = NO_DEFAULT,
    *,
    correction: int = 1,
    reduce: bool | None = None,
    key_transform: Callable[[NestedKey], NestedKey] | None = None,
) -> TensorDictBase | torch.Tensor:
    """The variance of every leaf (``correction=1``: Bessel's)."""
    result = _reduction(td, "var", dim, keepdim, reduce=reduce, correction=correction)
    return cast("TensorDictBase | torch.Tensor", _transform(result, key_transform, reduce))


def quantile(
    td: TensorDictBase,
    q: float | torch.Tensor,
    dim: int | tuple[int, ...] | Literal["feature"] = NO_DEFAULT,
    keepdim: bool = NO_DEFAULT,
    *,
    interpolation: str = "linear",
    reduce: bool | None = None,
    key_transform: Callable[[NestedKey], NestedKey] | None = None,
) -> TensorDictBase | torch.Tensor:
    """The ``q``-quantiles of every leaf (a 1-d ``q`` adds a leading batch dim)."""
    result = _reduction(
        td, "quantile", dim, keepdim, reduce=reduce, q=q, interpolation=interpolation
    )
    return cast("TensorDictBase | torch.Tensor", _transform(result, key_transform, reduce))


# ------------------------------------------------------------------ min / max
def amin(
    td: TensorDictBase, dim: int = NO_DEFAULT, keepdim: bool = False, *, reduce: bool | None = None
) -> TensorDictBase | torch.Tensor:
    """The minimum of every leaf, values only."""
    return cast(
        "TensorDictBase | torch.Tensor",
        _reduction(td, "amin", dim, keepdim, reduce=reduce, tuple_ok=False, call_on_nested=False),
    )


def amax(
    td: TensorDictBase, dim: int = NO_DEFAULT, keepdim: bool = False, *, reduce: bool | None = None
) -> TensorDictBase | torch.Tensor:
    """The maximum of every leaf, values only."""
    return cast(
        "TensorDictBase | torch.Tensor",
        _reduction(td, "amax", dim, keepdim, reduce=reduce, tuple_ok=False, call_on_nested=False),
    )


def min(
    td: TensorDictBase,
    dim: int = NO_DEFAULT,
    keepdim: bool = False,
    *,
    reduce: bool | None = None,
    return_indices: bool = True,
) -> Any:
    """The minimum of every leaf; with ``dim``, ``(values, indices)`` tensordicts."""
    return _extremum(td, "min", dim, keepdim, reduce, return_indices)


def max(
    td: TensorDictBase,
    dim: int = NO_DEFAULT,
    keepdim: bool = False,
    *,
    reduce: bool | None = None,
    return_indices: bool = True,
) -> Any:
    """The maximum of every leaf; with ``dim``, ``(values, indices)`` tensordicts."""
    return _extremum(td, "max", dim, keepdim, reduce, return_indices)


def cummin(
    td: TensorDictBase, dim: int, *, reduce: bool | None = None, return_indices: bool = True
) -> Any:
    """The running minimum along a batch dim: ``(values, indices)`` tensordicts."""
    return _extremum(td, "cummin", dim, NO_DEFAULT, reduce, return_indices)


def cummax(
    td: TensorDictBase, dim: int, *, reduce: bool | None = None, return_indices: bool = True
) -> Any:
    """The running maximum along a batch dim: ``(values, indices)`` tensordicts."""
    return _extremum(td, "cummax", dim, NO_DEFAULT, reduce, return_indices)


def _extremum(
    td: TensorDictBase,
    name: str,
    dim: Any,
    keepdim: Any,
    reduce: bool | None,
    return_indices: bool,
) -> Any:
    result = _reduction(
        td,
        name,
        dim,
        keepdim,
        reduce=reduce,
        tuple_ok=False,
        values_only=not return_indices,
        call_on_nested=False,
        keep_batch=name.startswith("cum"),
    )
    if (
        isinstance(result, tuple)
        and not isinstance(result, torch.Tensor)
        and is_tensordict(result[0])
    ):
        return getattr(torch.return_types, name)(result)
    return result


# ------------------------------------------------------------------ logsumexp, softmax, norm
def logsumexp(
    td: TensorDictBase,
    dim: int | tuple[int, ...] | None = None,
    keepdim: bool = False,
    *,
    out: TensorDictBase | None = None,
) -> TensorDictBase:
    """``log(sum(exp(x)))`` over batch dims (all of them by default), computed stably."""
    nb = td.ndim
    if dim is None:
        dims = tuple(range(nb))
    else:
        raw = dim if isinstance(dim, tuple) else (dim,)
        dims = tuple(d + nb if d < 0 else d for d in raw)
    if builtins.any(not 0 <= d < nb for d in dims):
        raise PtdValueError(
            f"The dimension {dim} is incompatible with a tensordict with batch_size "
            f"{td.batch_size}."
        )
    if keepdim:
        bs = [1 if i in dims else b for i, b in enumerate(td.batch_size)]
        names = td._names
    else:
        bs = [b for i, b in enumerate(td.batch_size) if i not in dims]
        names = _names_without(td, dims)
    op = LeafOp("logsumexp", dim=dims, keepdim=keepdim)
    result = _reduce_tree(td, op, bs, lambda sub: sub.logsumexp(dims, keepdim), names)
    if out is not None:  # written into out's tensors where it has them, as torch's out=
        return cast("TensorDictBase", out.update(result, inplace=True))
    return cast("TensorDictBase", result)


def softmax(td: TensorDictBase, dim: int, dtype: torch.dtype | None = None) -> TensorDictBase:
    """Softmax along a batch dim, leaf by leaf."""
    if not isinstance(dim, int):
        raise PtdValueError(f"Expected dim of type int, got {type(dim)}.")
    d = _pos_dim(dim, td.ndim)
    op = LeafOp("softmax", dim=d, kwargs={"dtype": dtype})
    return cast(
        "TensorDictBase",
        _reduce_tree(td, op, td.batch_size, lambda sub: sub.softmax(d, dtype), td._names),
    )


def norm(
    td: TensorDictBase,
    *,
    out: TensorDictBase | None = None,
    dtype: torch.dtype | None = None,
    key_transform: Callable[[NestedKey], NestedKey] | None = None,
) -> TensorDictBase:
    """The 2-norm of every leaf, over all its elements; batch size ``[]``."""
    op = LeafOp("norm", kwargs={} if dtype is None else {"dtype": dtype})
    result = _reduce_tree(td, op, [], None)
    if out is not None:
        out.update(result)
        result = out
    return cast("TensorDictBase", _transform(result, key_transform, None))


def _transform(
    result: Any, key_transform: Callable[[NestedKey], NestedKey] | None, reduce: Any
) -> Any:
    """The result with every part of every key renamed by ``key_transform``."""
    if key_transform is None or reduce or not is_tensordict(result):
        return result
    out = result._new_tensordict({}, batch_size=result.batch_size, device=result.device)
    for key in result._keys_str():
        value = result._get_str(key)
        if is_tensordict(value):
            value = _transform(value, key_transform, None)
        out._set_str(cast(str, key_transform(key)), value, inplace=False)
    return out
