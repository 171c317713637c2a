"""What the lower modules of :mod:`ptd.core` need from the classes defined above them, without
importing them: the root class of every container (for ``isinstance`` checks) and a registry of
factories (a new in-memory TensorDict, memmap export) that the defining modules fill in.

This is what keeps the package free of import cycles: :mod:`ptd.core.ops` and
:mod:`ptd.core.base` never import :mod:`ptd.core.tensordict`; it registers itself here when it
is imported. A lookup of a factory not registered yet imports its provider module by name
(like the backend registry does), so ``from ptd.core.base import TensorDictBase`` alone works.

>>> from ptd.core.registry import new_tensordict
>>> new_tensordict({}, batch_size=[2])
TensorDict(batch_size=[2], fields={})
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeGuard

if TYPE_CHECKING:
    from ptd.core.base import TensorDictBase

__all__ = ["TensorDictRoot", "register", "lookup", "new_tensordict", "is_tensordict"]


class TensorDictRoot:
    """The root of every ptd container class (TensorDict, PersistentTensorDict)."""

    __slots__ = ()


#: factory name -> the module that registers it when imported
_PROVIDERS: dict[str, str] = {
    "TensorDict": "ptd.core.tensordict",
    "memmap_tensordict": "ptd.memmap",
    "memmap_inplace": "ptd.memmap",
    "load_memmap": "ptd.memmap",
    "load_into": "ptd.memmap",
    "make_memmap": "ptd.memmap",
    "PersistentTensorDict": "ptd.persistent.persistent_tensordict",
}
_REGISTERED: dict[str, Callable[..., Any]] = {}


def register(name: str, factory: Callable[..., Any]) -> None:
    """Register ``factory`` under ``name`` (one of the names in ``_PROVIDERS``)."""
    if name not in _PROVIDERS:
        raise KeyError(f"unknown factory {name!r}")
    _REGISTERED[name] = factory


def lookup(name: str) -> Callable[..., Any]:
    """The factory registered as ``name``, importing its provider on first use."""
    found = _REGISTERED.get(name)
    if found is None:
        importlib.import_module(_PROVIDERS[name])
        found = _REGISTERED[name]
    return found


def new_tensordict(*args: Any, **kwargs: Any) -> TensorDictBase:
    """``ptd.TensorDict(*args, **kwargs)``."""
    return lookup("TensorDict")(*args, **kwargs)  # type: ignore[no-any-return]


def is_tensordict(obj: object) -> TypeGuard[TensorDictBase]:
    """True for any ptd container (in memory or store-backed). For type checkers, ``obj`` is then
    a :class:`~ptd.core.base.TensorDictBase` (every container class derives from it)."""
    return isinstance(obj, TensorDictRoot)
