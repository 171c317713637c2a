"""What a file-backed tensordict refuses to do, each refusal naming the fix.

Batch-shape ops that tensordict refuses on a file (``view`` to another shape, ``permute``,
``transpose``, ``unsqueeze``, ``squeeze``) would have to load everything, so they raise and point
at ``to_tensordict()`` (``reshape``, ``flatten``... give an in-memory copy, as tensordict's do); ``select``/``exclude``/``rename_keys`` raise
``NotImplementedError`` likewise, as the reference does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import torch

from ptd.errors import ArgumentError, NotSupportedError, UnsupportedOperationError
from ptd.ops import apply as apply_ops
from ptd.ops import locking as locking_ops
from ptd.ops import reshaping
from ptd.ops import shape as shape_ops

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase
    from ptd.containers.persistent.persistent_tensordict import PersistentTensorDict

__all__ = [
    "REFUSED",
    "flatten_keys",
    "refused",
    "set_non_tensor",
    "squeeze",
    "unflatten_keys",
    "view",
]

_FIRST = "Call `to_tensordict()` first."


def _store_refuses(name: str, fix: str = _FIRST) -> str:
    """The message of a refusal that names its fix (as tensordict's _NoShapeOps words it)."""
    return f"Cannot call `{name}` on a PersistentTensorDict. {fix}"


#: select/exclude/rename_keys, worded as tensordict's _NoSelectExclude
_SELECT_LIKE = "Cannot call {} on a PersistentTensorDict. Call to_tensordict() first."
#: the operations a store refuses outright: name -> (error class, message). Each becomes a
#: method of PersistentTensorDict through :func:`refused`; the ones that refuse only some
#: arguments (``view``, ``squeeze``, ``flatten_keys(inplace=True)``...) are functions below.
REFUSED: dict[str, tuple[type[Exception], str]] = {
    "permute": (UnsupportedOperationError, _store_refuses("permute")),
    "transpose": (UnsupportedOperationError, _store_refuses("transpose")),
    "unsqueeze": (UnsupportedOperationError, _store_refuses("unsqueeze")),
    "select": (NotSupportedError, _SELECT_LIKE.format("select")),
    "exclude": (NotSupportedError, _SELECT_LIKE.format("exclude")),
    "rename_keys": (NotSupportedError, _SELECT_LIKE.format("rename_keys")),
    "share_memory_": (NotSupportedError, "Cannot call share_memory_ on a PersistentTensorDict. Call `to_tensordict()` first."),
    "pin_memory": (UnsupportedOperationError, "Cannot pin memory of a PersistentTensorDict. Call to_tensordict() before making this call."),
    "memmap_": (UnsupportedOperationError, "Cannot build a memmap TensorDict in-place from a PersistentTensorDict. Use `td.memmap()` instead."),
}  # fmt: skip


def refused(name: str) -> Callable[..., NoReturn]:
    """The method that refuses ``name`` with the error :data:`REFUSED` declares for it."""
    error, message = REFUSED[name]

    def method(td: PersistentTensorDict, *args: Any, **kwargs: Any) -> NoReturn:
        raise error(message)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"Refused on a store: {message}"
    return method


def _refuse(name: str, fix: str = _FIRST) -> UnsupportedOperationError:
    return UnsupportedOperationError(_store_refuses(name, fix))


def view(
    td: PersistentTensorDict, *shape: Any, size: Any = None, batch_size: Any = None
) -> TensorDictBase:
    """``view(dtype)`` (an in-memory copy with each leaf viewed, as tensordict) or a view
    to the same batch size (the store itself); any other shape is refused: ``reshape``
    gives an in-memory copy."""
    if len(shape) == 1 and isinstance(shape[0], torch.dtype):
        return reshaping.view(td, shape, size, batch_size)
    try:
        new = reshaping.resolve_shape(reshaping.shape_from_args(shape, size), td.numel())
    except RuntimeError:
        new = None
    if new == td.batch_size:
        return td
    raise _refuse("view", "Call `reshape` or `to_tensordict()` first.")


def squeeze(td: PersistentTensorDict, dim: int | None = None) -> TensorDictBase:
    """The store itself when no dim of size 1 would go; refused otherwise."""
    if dim is not None and td._batch and td._batch[shape_ops.normalize_dim(td, dim)] != 1:
        return td
    if dim is None and 1 not in td._batch:
        return td
    raise _refuse("squeeze")


def set_non_tensor(td: PersistentTensorDict, *args: Any, **kwargs: Any) -> NoReturn:
    """Refused, as tensordict's ``_NoSetNonTensor`` does (a locked store first says it is
    locked): ``p.set(key, NonTensorData(value))`` or ``p[key] = value`` writes one."""
    locking_ops.check_unlocked(
        td,
    )
    raise NotSupportedError(
        "set_non_tensor is not compatible with the tensordict type PersistentTensorDict. "
        "Write the value with set(key, NonTensorData(value)) or p[key] = value."
    )


def flatten_keys(
    td: PersistentTensorDict, separator: str = ".", inplace: bool = False, is_leaf: Any = None
) -> TensorDictBase:
    """An in-memory copy whose nested keys are joined by ``separator``."""
    if inplace:
        raise ArgumentError("Cannot call flatten_keys in_place with a PersistentTensorDict.")
    return apply_ops.flatten_keys(td, separator)


def unflatten_keys(
    td: PersistentTensorDict, separator: str = ".", inplace: bool = False
) -> TensorDictBase:
    """An in-memory copy whose keys are split at ``separator`` into nested ones."""
    if inplace:
        raise ArgumentError("Cannot call unflatten_keys in_place with a PersistentTensorDict.")
    return apply_ops.unflatten_keys(td, separator)
