"""What each method family mixed into :class:`~ptd.core.base.TensorDictBase` needs from it.

:class:`~ptd.core.transforms.TransformsMixin`, :class:`~ptd.core.ops.OpsMixin` and
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

__all__ = ["ContainerPrimitives", "TransformsHost", "OpsHost", "ShapeHost"]


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
    def _binary(self, other: Any, op: Callable[[Any, Any], Any]) -> TensorDictBase: ...

    def _compare(self, other: Any, op: Callable[[Any, Any], Any]) -> TensorDictBase: ...

    def to(self, *args: Any, **kwargs: Any) -> TensorDictBase: ...

    def _to_device(self, device: torch.device) -> TensorDictBase: ...

    def add_(self, other: Any, *, alpha: float | None = ...) -> TensorDictBase: ...

    def sub_(self, other: Any, *, alpha: float | None = ...) -> TensorDictBase: ...

    def mul_(self, other: Any) -> TensorDictBase: ...

    def div_(self, other: Any) -> TensorDictBase: ...


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

    # the family's own methods that call each other
    def _batch_map(
        self,
        fn: Callable[[torch.Tensor], torch.Tensor],
        batch_size: Sequence[int] | None = ...,
    ) -> TensorDictBase: ...

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


if TYPE_CHECKING:

    def _conforms(td: TensorDictBase) -> None:
        """For mypy only: the base class provides what each method family needs (each use
        checks it too; this checks it once even where no use does)."""
        _transforms: TransformsHost = td
        _ops: OpsHost = td
        _shape: ShapeHost = td
