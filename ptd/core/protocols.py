"""What each method family mixed into :class:`~ptd.core.base.TensorDictBase` needs from it.

:class:`~ptd.core.transforms.TransformsMixin`, :class:`~ptd.core.ops.OpsMixin`, the reductions and pointwise mixins and
:class:`~ptd.core.shape.ShapeMixin` are written on a few primitives of the class they are mixed
into. Their methods annotate ``self`` with the protocol below that declares exactly those
primitives (and the methods of the family that call each other): the mixin type-checks on its
own, and each use on a concrete class checks, structurally, that the class provides them. This
is mypy's pattern for mixins; nothing here runs: the mixin modules import this one under
``if TYPE_CHECKING:``, so the runtime import graph does not change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch

    from ptd.core.base import EntryMeta, TensorDictBase
    from ptd.core.keys import NestedKey
    from ptd.core.leafop import LeafOp

__all__ = [
    "ContainerPrimitives",
    "TransformsHost",
    "OpsHost",
    "ShapeHost",
    "ReductionsHost",
    "PointwiseHost",
]


class ContainerPrimitives(Protocol):
    """The primitives every method family reads: sizes, device and the direct children."""

    @property
    def batch_size(self) -> torch.Size: ...

    @property
    def device(self) -> torch.device | None: ...

    @property
    def ndim(self) -> int: ...

    def _keys_str(self) -> list[str]: ...

    def _get_str(self, key: str) -> Any: ...


class TransformsHost(ContainerPrimitives, Protocol):
    """What :class:`~ptd.core.transforms.TransformsMixin` uses."""

    @property
    def _names(self) -> list[str | None] | None: ...

    def _meta_str(self, key: str) -> EntryMeta: ...

    def _metas(self, include_nested: bool) -> Iterator[tuple[tuple[str, ...], EntryMeta]]: ...

    def _has(self, parts: tuple[str, ...]) -> bool: ...

    def _missing(self, key: NestedKey) -> Exception: ...

    def keys(self, include_nested: bool = ..., leaves_only: bool = ...) -> Iterable[NestedKey]: ...

    def get(self, key: NestedKey) -> Any: ...

    def set_(self, key: NestedKey, value: Any) -> TensorDictBase: ...

    def del_(self, key: NestedKey) -> TensorDictBase: ...

    # the family's own methods that call each other
    def _tensor_leaves(self) -> Iterator[tuple[tuple[str, ...], torch.Tensor]]: ...

    def _map_inplace(
        self, fn: Callable[[torch.Tensor, Any], torch.Tensor | None], other: Any = ...
    ) -> TensorDictBase: ...

    def apply_(
        self, fn: Callable[..., torch.Tensor], *others: TensorDictBase
    ) -> TensorDictBase: ...

    def _reads_copy(self) -> bool: ...

    def to_tensordict(self) -> TensorDictBase: ...

    def to_dict(self) -> dict[str, Any]: ...

    def _apply_rec(
        self,
        fn: Callable[..., Any],
        others: tuple[Any, ...],
        *,
        named: bool,
        nested_keys: bool,
        prefix: tuple[str, ...],
        batch_size: Sequence[int] | None,
        device: Any,
        names: Any,
        inplace: bool,
        default: Any,
        filter_empty: bool | None,
        propagate_lock: bool,
        call_on_nested: bool,
        out: TensorDictBase | None,
    ) -> Any: ...


class OpsHost(ContainerPrimitives, Protocol):
    """What :class:`~ptd.core.ops.OpsMixin` uses."""

    def _tensor_leaves(self) -> Iterator[tuple[tuple[str, ...], torch.Tensor]]: ...

    def apply(
        self,
        fn: Callable[..., Any],
        *others: TensorDictBase | Mapping[str, Any],
        batch_size: Sequence[int] | None = ...,
        device: Any = ...,
    ) -> TensorDictBase: ...

    def _map_inplace(
        self, fn: Callable[[torch.Tensor, Any], torch.Tensor | None], other: Any = ...
    ) -> TensorDictBase: ...

    def get(self, key: NestedKey) -> Any: ...

    def set_(self, key: NestedKey, value: Any) -> TensorDictBase: ...

    def update_(self, input_dict_or_td: Mapping[Any, Any] | TensorDictBase) -> TensorDictBase: ...

    # the family's own methods that call each other
    def _compare(
        self, other: Any, op: Callable[[Any, Any], Any], default: bool = ...
    ) -> TensorDictBase | bool: ...

    def _detached_copy(self) -> TensorDictBase: ...

    def _detached(self, value: TensorDictBase) -> TensorDictBase: ...

    def _location(self) -> str: ...

    def _get_strict(self, key: NestedKey) -> Any: ...

    def to(self, *args: Any, **kwargs: Any) -> TensorDictBase: ...

    def _to_device(self, device: torch.device) -> TensorDictBase: ...


class ShapeHost(ContainerPrimitives, Protocol):
    """What :class:`~ptd.core.shape.ShapeMixin` uses."""

    def _index(self, index: Any) -> TensorDictBase: ...

    def _detached(self, value: TensorDictBase) -> TensorDictBase: ...

    def apply(
        self,
        fn: Callable[..., Any],
        *others: TensorDictBase | Mapping[str, Any],
        batch_size: Sequence[int] | None = ...,
    ) -> TensorDictBase: ...

    def update_(self, input_dict_or_td: Mapping[Any, Any] | TensorDictBase) -> TensorDictBase: ...

    def _reads_copy(self) -> bool: ...

    def _check_unlocked(self) -> None: ...

    def _del_str(self, key: str) -> None: ...

    def _set_str(self, key: str, value: Any, *, inplace: bool) -> None: ...

    # the family's own methods that call each other
    def _rebind(self, result: TensorDictBase) -> TensorDictBase: ...

    def _batch_map(
        self,
        fn: Callable[[torch.Tensor], torch.Tensor],
        batch_size: Sequence[int] | None = ...,
        *,
        lock: bool = ...,
    ) -> TensorDictBase: ...

    @property
    def is_locked(self) -> bool: ...

    def _dim(self, dim: int, extra: int = ...) -> int: ...

    def split(
        self, split_size: int | Sequence[int], dim: int = ...
    ) -> tuple[TensorDictBase, ...]: ...

    def unsqueeze(self, dim: int) -> TensorDictBase: ...

    def flatten(self, start_dim: int = ..., end_dim: int = ...) -> TensorDictBase: ...

    def flip(self, dims: int | Sequence[int]) -> TensorDictBase: ...

    def permute(self, *dims: Any) -> TensorDictBase: ...

    def transpose(self, dim0: int, dim1: int) -> TensorDictBase: ...

    def expand(self, *shape: Any) -> TensorDictBase: ...

    def repeat_interleave(
        self, repeats: int | torch.Tensor, dim: int | None = ..., *, output_size: int | None = ...
    ) -> TensorDictBase: ...


class ReductionsHost(ContainerPrimitives, Protocol):
    """What :class:`ReductionsMixin` uses of the class it is mixed into (mypy only)."""

    @property
    def _names(self) -> list[str | None] | None: ...

    def _meta_str(self, key: str) -> EntryMeta: ...

    def _metas(self, include_nested: bool) -> Iterator[tuple[tuple[str, ...], EntryMeta]]: ...

    def _walk(self, parts: tuple[str, ...]) -> tuple[TensorDictBase, str]: ...

    def _tensor_leaves(self) -> Iterator[tuple[tuple[str, ...], torch.Tensor]]: ...

    # the family's own methods that call each other
    def _reduce_leaf(self, key: str, op: LeafOp) -> Any: ...

    def _reduce_tree(
        self,
        op: LeafOp,
        batch_size: Sequence[int],
        nested: Callable[[TensorDictBase], Any] | None,
        names: list[str | None] | None = ...,
    ) -> Any: ...

    def _names_without(self, dims: Sequence[int]) -> list[str | None] | None: ...

    def _reduction(self, name: str, dim: Any, keepdim: Any, **kwargs: Any) -> Any: ...

    def _reduce_together(self, name: str, dim: Any, keepdim: Any, **kwargs: Any) -> Any: ...

    def _all_any(self, name: str, dim: int | None) -> bool | TensorDictBase: ...

    def _tensor_leaf_keys(self) -> list[tuple[tuple[str, ...], Any]]: ...

    def _extremum(
        self, name: str, dim: Any, keepdim: Any, reduce: bool | None, return_indices: bool
    ) -> Any: ...

    def logsumexp(
        self,
        dim: int | tuple[int, ...] | None = ...,
        keepdim: bool = ...,
        *,
        out: TensorDictBase | None = ...,
    ) -> TensorDictBase: ...

    def softmax(self, dim: int, dtype: torch.dtype | None = ...) -> TensorDictBase: ...


class PointwiseHost(ContainerPrimitives, Protocol):
    """What :class:`PointwiseMixin` uses of the class it is mixed into (mypy only)."""

    def _metas(self, include_nested: bool) -> Iterator[tuple[tuple[str, ...], EntryMeta]]: ...

    def apply(self, fn: Callable[..., Any], *others: Any, **kwargs: Any) -> TensorDictBase: ...

    def expand(self, *shape: Any) -> TensorDictBase: ...

    def _map_inplace(
        self, fn: Callable[[torch.Tensor, Any], torch.Tensor | None], other: Any = ...
    ) -> TensorDictBase: ...

    def keys(self, include_nested: bool = ..., leaves_only: bool = ...) -> Any: ...

    def get(self, key: NestedKey) -> Any: ...

    # the family's own methods that call each other
    def _pointwise(
        self, fn: Callable[..., Any], *operands: Any, default: Any = ...
    ) -> TensorDictBase: ...

    def _inplace(self, fn: Callable[..., Any], *operands: Any) -> TensorDictBase: ...

    def _operands(
        self, operands: Sequence[Any], *, inplace: bool
    ) -> tuple[TensorDictBase, list[Any]]: ...

    def clamp_max(self, other: Any, *, default: Any = ...) -> TensorDictBase: ...

    def clamp_min(self, other: Any, default: Any = ...) -> TensorDictBase: ...

    def clamp(self, min: Any = ..., max: Any = ..., *, out: Any = ...) -> TensorDictBase: ...

    def pow_(self, other: Any) -> TensorDictBase: ...

    def clamp_max_(self, other: Any) -> TensorDictBase: ...

    def is_empty(self) -> bool: ...

    def clamp_min_(self, other: Any) -> TensorDictBase: ...

    def add_(self, other: Any, *, alpha: float | None = ...) -> TensorDictBase: ...

    def sub_(self, other: Any, alpha: float | None = ...) -> TensorDictBase: ...

    def mul_(self, other: Any) -> TensorDictBase: ...

    def div_(self, other: Any) -> TensorDictBase: ...


if TYPE_CHECKING:

    def _conforms(td: TensorDictBase) -> None:
        """For mypy only: the base class provides what each method family needs (each use
        checks it too; this checks it once even where no use does)."""
        _transforms: TransformsHost = td
        _ops: OpsHost = td
        _shape: ShapeHost = td
        _reductions: ReductionsHost = td
        _pointwise: PointwiseHost = td
