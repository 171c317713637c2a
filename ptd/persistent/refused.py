"""What a file-backed tensordict refuses to do, each refusal naming the fix.

Batch-shape ops that tensordict refuses on a file (``view`` to another shape, ``permute``,
``transpose``, ``unsqueeze``, ``squeeze``) would have to load everything, so they raise and point
at ``to_tensordict()`` (``reshape``, ``flatten``... give an in-memory copy, as tensordict's do); ``select``/``exclude``/``rename_keys`` raise
``NotImplementedError`` likewise, as the reference does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import torch

from ptd.core import reshaping
from ptd.errors import ArgumentError, NotSupportedError, UnsupportedOperationError

if TYPE_CHECKING:
    from ptd.core.base import TensorDictBase
    from ptd.persistent.protocols import RefusedHost

__all__ = ["RefusedOpsMixin"]


class RefusedOpsMixin:
    """Mixed in before :class:`ptd.base.TensorDictBase` by PersistentTensorDict."""

    def _refuse(
        self, name: str, fix: str = "Call `to_tensordict()` first."
    ) -> UnsupportedOperationError:
        return UnsupportedOperationError(f"Cannot call `{name}` on a PersistentTensorDict. {fix}")

    def is_memmap(self) -> bool:
        """A store is never a memory-mapped tensordict (``memmap()`` makes one)."""
        return False

    def is_shared(self) -> bool:
        """A store is never in shared memory."""
        return False

    def view(
        self: RefusedHost, *shape: Any, size: Any = None, batch_size: Any = None
    ) -> TensorDictBase:
        """``view(dtype)`` (an in-memory copy with each leaf viewed, as tensordict) or a view
        to the same batch size (the store itself); any other shape is refused: ``reshape``
        gives an in-memory copy."""
        td = cast("TensorDictBase", self)
        if len(shape) == 1 and isinstance(shape[0], torch.dtype):
            return reshaping.view(td, shape, size, batch_size)
        try:
            new = reshaping.resolve_shape(reshaping.shape_from_args(shape, size), td.numel())
        except RuntimeError:
            new = None
        if new == td.batch_size:
            return td
        raise self._refuse("view", "Call `reshape` or `to_tensordict()` first.")

    def permute(self, *args: Any, **kwargs: Any) -> TensorDictBase:
        raise self._refuse("permute")

    def transpose(self, *args: Any, **kwargs: Any) -> TensorDictBase:
        raise self._refuse("transpose")

    def unsqueeze(self, *args: Any, **kwargs: Any) -> TensorDictBase:
        raise self._refuse("unsqueeze")

    def squeeze(self: RefusedHost, dim: int | None = None) -> TensorDictBase:
        # self is the PersistentTensorDict (a TensorDictBase) this is mixed into
        if dim is not None and self._batch and self._batch[self._dim(dim)] != 1:
            return cast("TensorDictBase", self)
        if dim is None and 1 not in self._batch:
            return cast("TensorDictBase", self)
        raise self._refuse("squeeze")

    def select(self, *keys: Any, **kwargs: Any) -> TensorDictBase:
        raise NotSupportedError(
            "Cannot call select on a PersistentTensorDict. Call to_tensordict() first."
        )

    def exclude(self, *keys: Any, **kwargs: Any) -> TensorDictBase:
        raise NotSupportedError(
            "Cannot call exclude on a PersistentTensorDict. Call to_tensordict() first."
        )

    def rename_keys(self, *args: Any, **kwargs: Any) -> TensorDictBase:
        raise NotSupportedError(
            "Cannot call rename_keys on a PersistentTensorDict. Call to_tensordict() first."
        )

    def set_non_tensor(self, *args: Any, **kwargs: Any) -> TensorDictBase:
        """Refused, as tensordict's ``_NoSetNonTensor`` does (a locked store first says it is
        locked): ``p.set(key, NonTensorData(value))`` or ``p[key] = value`` writes one."""
        cast("TensorDictBase", self)._check_unlocked()
        raise NotSupportedError(
            "set_non_tensor is not compatible with the tensordict type PersistentTensorDict. "
            "Write the value with set(key, NonTensorData(value)) or p[key] = value."
        )

    def share_memory_(self) -> TensorDictBase:
        raise NotSupportedError(
            "Cannot call share_memory_ on a PersistentTensorDict. Call `to_tensordict()` first."
        )

    def pin_memory(self, *args: Any, **kwargs: Any) -> TensorDictBase:
        raise UnsupportedOperationError(
            "Cannot pin memory of a PersistentTensorDict. Call to_tensordict() before making this call."
        )

    def memmap_(self, *args: Any, **kwargs: Any) -> TensorDictBase:
        raise UnsupportedOperationError(
            "Cannot build a memmap TensorDict in-place from a PersistentTensorDict. Use `td.memmap()` instead."
        )

    def flatten_keys(
        self, separator: str = ".", inplace: bool = False, is_leaf: Any = None
    ) -> TensorDictBase:
        """An in-memory copy whose nested keys are joined by ``separator``."""
        if inplace:
            raise ArgumentError("Cannot call flatten_keys in_place with a PersistentTensorDict.")
        # TensorDictBase's, next in the class's MRO (mypy sees object after a mixin)
        return super().flatten_keys(separator)  # type: ignore[misc]

    def unflatten_keys(self, separator: str = ".", inplace: bool = False) -> TensorDictBase:
        if inplace:
            raise ArgumentError("Cannot call unflatten_keys in_place with a PersistentTensorDict.")
        # TensorDictBase's, next in the class's MRO (mypy sees object after a mixin)
        return super().unflatten_keys(separator)  # type: ignore[misc]
