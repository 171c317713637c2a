"""The constructors the method families need from the container classes, handed to them.

:mod:`ptd.ops` sits below :mod:`ptd.containers` and never imports it: a function such as
``reductions.sum`` builds its result as an in-memory TensorDict, ``td.memmap()`` needs the memmap
writer, ``TensorDict.from_h5`` the store-backed class. The container modules that define
those register them here when they are imported, and :mod:`ptd.containers` imports all of
them, so they are registered before any container exists (a container is the only way to reach
these functions). Nothing here imports anything by name: a lookup of a name nobody registered
is a bug, and raises saying which module should have registered it.

========================  ===============================================
``TensorDict``            :mod:`ptd.containers.tensordict`
``PersistentTensorDict``  :mod:`ptd.containers.persistent.persistent_tensordict`
``memmap_tensordict``,    :mod:`ptd.containers.memmap`
``memmap_inplace``,
``load_memmap``,
``load_into``,
``make_memmap``
========================  ===============================================

>>> import ptd.containers
>>> from ptd.ops.registry import new_tensordict
>>> new_tensordict({}, batch_size=[2])
TensorDict(batch_size=[2], fields={})
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeGuard

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase

__all__ = ["TensorDictRoot", "is_tensordict", "lookup", "new_tensordict", "register"]


class TensorDictRoot:
    """The root of every ptd container class (TensorDict, PersistentTensorDict), defined here
    so that :func:`is_tensordict` needs no import of the classes."""

    __slots__ = ()


#: name -> the module that registers it
PROVIDERS: dict[str, str] = {
    "TensorDict": "ptd.containers.tensordict",
    "PersistentTensorDict": "ptd.containers.persistent.persistent_tensordict",
    "memmap_tensordict": "ptd.containers.memmap",
    "memmap_inplace": "ptd.containers.memmap",
    "load_memmap": "ptd.containers.memmap",
    "load_into": "ptd.containers.memmap",
    "make_memmap": "ptd.containers.memmap",
}
_REGISTERED: dict[str, Callable[..., Any]] = {}


def register(name: str, factory: Callable[..., Any]) -> None:
    """Register ``factory`` under ``name`` (one of :data:`PROVIDERS`)."""
    if name not in PROVIDERS:
        raise KeyError(f"unknown factory {name!r}")
    _REGISTERED[name] = factory


def lookup(name: str) -> Callable[..., Any]:
    """The factory registered as ``name``."""
    found = _REGISTERED.get(name)
    if found is None:
        raise RuntimeError(
            f"{name} is not registered: {PROVIDERS[name]} registers it when imported, and "
            "ptd.containers imports it (import ptd.containers, or use ptd.TensorDict)"
        )
    return found


def new_tensordict(*args: Any, **kwargs: Any) -> TensorDictBase:
    """``ptd.TensorDict(*args, **kwargs)``."""
    return lookup("TensorDict")(*args, **kwargs)  # type: ignore[no-any-return]


def is_tensordict(obj: object) -> TypeGuard[TensorDictBase]:
    """True for any ptd container (in memory or store-backed). For type checkers, ``obj`` is then
    a :class:`~ptd.containers.base.TensorDictBase` (every container class derives from it)."""
    return isinstance(obj, TensorDictRoot)
