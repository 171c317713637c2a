"""The container interface: what the method families of :mod:`ptd.ops` use of a container
besides its public methods.

A concrete class implements the **primitives**; :class:`~ptd.containers.base.TensorDictBase`
derives the **walk** from them and keeps the **state** the families read and write. These
names start with an underscore because they are not for users, but they are the contract
between ptd's layers: any layer above :mod:`ptd.ops` may use them (``tools/check_imports.py``
allows these names, and only these, across packages). mypy checks that every container class
satisfies :class:`Container` (``ptd/containers/base.py``).

================================  ===========================================================
primitive                         what it does
================================  ===========================================================
``batch_size``, ``device``        the shared leading dims; the device leaves are cast to
``_keys_str()``                   names of the direct children, in order
``_meta_str(key)``                what a child is (:class:`~ptd.containers.base.EntryMeta`),
                                  without reading its data
``_get_str(key)``                 a child: tensor, nested container, NonTensorData or -Stack
``_set_str(key, value, inplace)``  store a checked value (replace it, or write into it)
``_del_str(key)``                 delete a child
``_new_nested(key)``              create an empty nested container with this batch size
``_index(index)``                 the container indexed along its batch dims
``_set_at(index, value)``         write a value into the rows ``index`` selects
``_leaves``                       the leaf strategy (:mod:`ptd.ops.leaf_access`)
``_new_tensordict(...)``          a new in-memory container (``ptd.TensorDict``'s arguments):
                                  what every family builds its results with; reachable from a
                                  class as well as from an instance (``cls._new_tensordict``)
``_io``                           what lives above :mod:`ptd.ops` and a family calls:
                                  the store-backed openers and the memmap directory format
                                  (:class:`ContainerIO`)
================================  ===========================================================

The families never import :mod:`ptd.containers` (not even for typing): a function builds its
result with ``td._new_tensordict(...)`` and reaches a store or a memmap directory through
``td._io``, so :mod:`ptd.ops` stays below the classes and can be driven by any object that
satisfies :class:`Container`.

Derived by the base class: ``_walk(parts)`` (the container holding the last part of a nested
key), ``_has(parts)``, ``_get_strict(key)`` (KeyError when missing), ``_metas(nested)`` (every
entry's metadata), ``_location()`` and ``_missing(key)`` (for error messages), ``_detached(v)``
(what an out-of-place result holds of a derived container: a copy in memory for a store).
State: ``_names`` (dim names), ``_is_locked``, ``_last_op``/``_last_op_queue`` (what a ``with``
block undoes).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

import torch

if TYPE_CHECKING:
    from ptd.containers.base import EntryMeta, TensorDictBase
    from ptd.errors import PtdKeyError
    from ptd.ops.keys import NestedKey
    from ptd.ops.leaf_access import LeafAccess

__all__ = ["Container", "ContainerIO"]


class ContainerIO(Protocol):
    """What the families reach of the layers above them through a container's ``_io``: the
    store-backed class's openers (``PersistentTensorDict.from_h5``/``from_zarr``/``from_dict``)
    and the memmap directory format (:mod:`ptd.containers.memmap`). One object serves every
    container class; :mod:`ptd.containers` sets it on the base class."""

    def from_h5(self, filename: Any, *, mode: str = ..., **kwargs: Any) -> TensorDictBase: ...
    def from_zarr(self, filename: Any, *, mode: str = ..., **kwargs: Any) -> TensorDictBase: ...
    def write_store(self, source: Any, filename: Any, **kwargs: Any) -> TensorDictBase: ...
    def memmap_tensordict(self, src: Any, prefix: Any = ..., **kwargs: Any) -> Any: ...
    def memmap_inplace(self, td: Any, prefix: Any = ..., **kwargs: Any) -> Any: ...
    def load_memmap(self, prefix: Any, **kwargs: Any) -> TensorDictBase: ...
    def make_memmap(self, td: Any, key: Any, **kwargs: Any) -> torch.Tensor: ...


class Container(Protocol):
    """What :mod:`ptd.ops` needs of a container beyond its public methods."""

    _names: list[str | None] | None
    _is_locked: bool
    _leaves: LeafAccess
    #: what a ``with td.method():`` block undoes on exit (:mod:`ptd.ops.lastop`)
    _last_op: tuple[str, tuple[Any, ...], dict[str, Any], Any] | None
    _last_op_queue: list[Any] | None
    #: the store-backed openers and the memmap format (set by :mod:`ptd.containers`)
    _io: ContainerIO

    @property
    def batch_size(self) -> torch.Size: ...
    @property
    def device(self) -> torch.device | None: ...

    # primitives
    def _keys_str(self) -> list[str]: ...
    def _meta_str(self, key: str) -> EntryMeta: ...
    def _get_str(self, key: str, default: Any = ..., **kwargs: Any) -> Any: ...
    def _set_str(self, key: str, value: Any, *, inplace: bool) -> None: ...
    def _del_str(self, key: str) -> None: ...
    def _new_nested(self, key: str) -> TensorDictBase: ...
    def _index(self, index: Any) -> TensorDictBase: ...
    def _set_at(self, index: Any, value: Any) -> None: ...
    def _new_tensordict(
        self,
        source: Any = None,
        batch_size: Any = None,
        device: Any = None,
        names: Any = None,
        **kwargs: Any,
    ) -> TensorDictBase: ...

    # derived by the base class
    def _walk(
        self, parts: tuple[str, ...], *, create: bool = False
    ) -> tuple[TensorDictBase, str]: ...
    def _has(self, parts: tuple[str, ...]) -> bool: ...
    def _get_strict(self, key: NestedKey) -> Any: ...
    def _metas(self, include_nested: bool) -> Iterator[tuple[tuple[str, ...], EntryMeta]]: ...
    def _location(self) -> str: ...
    def _missing(self, key: NestedKey) -> PtdKeyError: ...
    def _detached(self, value: TensorDictBase) -> TensorDictBase: ...
