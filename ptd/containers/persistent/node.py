"""The public read interface of a PersistentTensorDict's store: :class:`StoreNode`.

Code that plans its own reads (``ptd.data``'s chunk-aligned reads, the memmap writer's row
slabs, a user's own loader) needs more than the container's reads: which backend holds the
store, where the node sits in it, the metadata the store already read, and reads in the
store's own coordinates, straight into a caller's buffer. ``td.store_node`` gives exactly
that, and nothing that writes.

>>> import os, tempfile, numpy as np, torch
>>> from ptd import PersistentTensorDict
>>> with tempfile.TemporaryDirectory() as d:
...     td = PersistentTensorDict.from_dict(
...         {"obs": torch.arange(12.0).reshape(6, 2)}, os.path.join(d, "x.h5"))
...     node = td.store_node
...     meta = node.meta(("obs",))
...     out = np.empty((2, 2), dtype=meta.dtype)
...     _ = node.read(("obs",), (slice(2, 4),), out=out)
...     print(node.path, tuple(meta.shape), out.tolist(), td[1:3].store_node.selected)
...     td.close()
() (6, 2) [[4.0, 5.0], [6.0, 7.0]] True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ptd.containers.persistent.store import _backend as open_backend
from ptd.errors import UnsupportedOperationError
from ptd.storage.api import ArrayMeta, Backend, NodeKind, Path, Selection
from ptd.storage.remote import is_remote
from ptd.storage.tree import StoreTree

if TYPE_CHECKING:
    from ptd.containers.persistent.persistent_tensordict import PersistentTensorDict

__all__ = ["StoreNode"]


class StoreNode:
    """The store behind one :class:`~ptd.PersistentTensorDict` node (the store itself, a
    nested group, or an indexed view of either). Keys are tuples of names relative to the
    node; :meth:`read` works in the stored array's coordinates whatever rows the view
    selects, :meth:`read_leaf` as the view selects them."""

    __slots__ = ("_td",)

    def __init__(self, td: PersistentTensorDict) -> None:
        self._td = td

    @property
    def backend(self) -> Backend:
        """The open backend (:class:`~ptd.storage.api.Backend`); raises
        :class:`~ptd.errors.ClosedStoreError` once the store is closed."""
        return open_backend(self._td)

    @property
    def location(self) -> str:
        """The store's path or URL, as messages name it."""
        return str(self._td._store.backend.location)

    @property
    def remote(self) -> bool:
        """True for a store served over fsspec (a URL that is not ``file://``)."""
        return is_remote(self.location)

    @property
    def path(self) -> Path:
        """The node's path in the store (``()`` for the root)."""
        return self._td._path

    @property
    def tree(self) -> StoreTree:
        """The store's structure cache: children, kinds, array metadata, group batch sizes."""
        return self._td._store.tree

    @property
    def selected(self) -> bool:
        """True for an indexed view (it selects rows or elements of the stored arrays)."""
        return self._td._entries is not None

    def key_path(self, key: tuple[str, ...]) -> Path:
        """The store path of ``key`` (relative to the node)."""
        return self._td._path + tuple(key)

    def meta(self, key: tuple[str, ...]) -> ArrayMeta:
        """The stored array ``key``'s metadata (shape, dtype, chunks, codecs, attributes),
        from the structure cache."""
        return self._td._store.tree.meta(self.key_path(key))

    def attrs(self, key: tuple[str, ...] = ()) -> dict[str, Any]:
        """The attributes stored on ``key`` (an array's from the cached metadata, a group's
        from the store); ``()``: the node's own."""
        path = self.key_path(key)
        if self._td._store.tree.kind(path) is NodeKind.ARRAY:
            return dict(self._td._store.tree.meta(path).attrs)
        return self.backend.get_attrs(path)

    def read(
        self, key: tuple[str, ...], selection: Selection = (), out: np.ndarray | None = None
    ) -> np.ndarray:
        """The stored array ``key``'s elements ``selection`` (stored coordinates, the
        backend's selection), decoded into ``out`` when given (then returned)."""
        if out is None:
            return self.backend.read(self.key_path(key), selection)
        return self.backend.read(self.key_path(key), selection, out=out)

    def read_leaf(self, key: tuple[str, ...]) -> torch.Tensor:
        """The leaf ``key`` as this node reads it (the rows a view selects), a new tensor."""
        path = self.key_path(key)
        return self._td._read_leaf(path, self._td._store.tree.meta(path))

    def with_batch_size(
        self, batch_size: torch.Size | list[int], *, validate: bool = True
    ) -> PersistentTensorDict:
        """This node (not an indexed view) seen with another batch size, without writing it
        to the store: a store whose recorded batch size is ``[]`` (side groups of another
        length) seen with its rows' ``[N]``. Every leaf must start with ``batch_size``
        (:class:`~ptd.errors.BatchSizeError` otherwise) unless ``validate=False``, for a
        reader that picked the leaves that do and reads only those."""
        td = self._td
        if td._entries is not None:
            raise UnsupportedOperationError(
                f"with_batch_size needs a store or group, not an indexed view of {self.location}"
            )
        size = torch.Size(batch_size)
        if validate:
            td._store.tree.validate(td._path, size, td._location())
        return type(td)._view(td._store, td._path, size, None, td._device)

    def same_store(self, other: StoreNode) -> bool:
        """True when both nodes read the same open store (not a reopened copy)."""
        return self._td._store is other._td._store
