"""The root class of every ptd container, defined below the container classes so that the
method families can tell a container from any other value without importing them.

>>> import ptd.containers
>>> from ptd import TensorDict
>>> from ptd.ops.root import is_tensordict
>>> is_tensordict(TensorDict({}, batch_size=[2])), is_tensordict({})
(True, False)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeGuard

if TYPE_CHECKING:  # debt: the families are still typed against the class, not Container
    from ptd.containers.base import TensorDictBase

__all__ = ["TensorDictRoot", "is_tensordict"]


class TensorDictRoot:
    """The root of every ptd container class (TensorDict, PersistentTensorDict), defined here
    so that :func:`is_tensordict` needs no import of the classes."""

    __slots__ = ()


def is_tensordict(obj: object) -> TypeGuard[TensorDictBase]:
    """True for any ptd container (in memory or store-backed). For type checkers, ``obj`` is then
    a :class:`~ptd.containers.base.TensorDictBase` (every container class derives from it)."""
    return isinstance(obj, TensorDictRoot)
