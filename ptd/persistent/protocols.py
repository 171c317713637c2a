"""What each method family mixed into :class:`~ptd.persistent.persistent_tensordict.PersistentTensorDict`
needs from it.

Like the core mixins (:mod:`ptd.core.protocols`), :class:`~ptd.persistent.leaves.LeafIOMixin`,
:class:`~ptd.persistent.refused.RefusedOpsMixin` and :class:`~ptd.persistent.opening.OpenersMixin`
annotate ``self`` (or ``cls``) with the protocol below that declares exactly what they use; each
use on the class checks, structurally, that it provides it. Nothing here runs: the mixin modules
import this one under ``if TYPE_CHECKING:``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch

    from ptd.core import indexing as ix
    from ptd.core.base import EntryMeta
    from ptd.persistent.persistent_tensordict import PersistentTensorDict
    from ptd.persistent.store import _Store
    from ptd.storage.backends.base import Backend, Path
    from ptd.storage.tree import StoreTree

__all__ = ["LeafHost", "RefusedHost", "OpenerClass", "PicklingHost"]


class LeafHost(Protocol):
    """What :class:`~ptd.persistent.leaves.LeafIOMixin` uses: the view's selection, the shared
    store, and the nodes reached from it (which are PersistentTensorDicts)."""

    @property
    def _store(self) -> _Store: ...

    @property
    def _backend(self) -> Backend: ...

    @property
    def _tree(self) -> StoreTree: ...

    @property
    def _entries(self) -> tuple[ix.Entry, ...] | None: ...

    @property
    def _batch(self) -> torch.Size: ...

    @property
    def _stored_batch(self) -> torch.Size: ...

    @property
    def _device(self) -> torch.device | None: ...

    #: cached by ``_simple_selection`` (absent until the first call)
    _simple_sel: tuple[ix.Entry, ...] | None

    def _entries_full(self) -> tuple[ix.Entry, ...]: ...

    def _reads_as_stack(self, meta: Any) -> bool: ...

    def _create_after_delete(self, path: Path, value: Any) -> None: ...

    def _tensor_leaf_metas(self) -> list[tuple[tuple[str, ...], EntryMeta]]: ...

    def _index(self, index: Any) -> PersistentTensorDict: ...

    def _walk(self, parts: tuple[str, ...]) -> tuple[PersistentTensorDict, str]: ...

    # the family's own methods that call each other
    def _simple_selection(self) -> tuple[ix.Entry, ...] | None: ...

    def _leaf_view_shape(self, meta: Any) -> tuple[int, ...]: ...

    def _read_leaf(
        self, path: Path, meta: Any, entries: tuple[ix.Entry, ...] | None = ...
    ) -> torch.Tensor: ...

    def _read_stack_view(
        self, path: Path, meta: Any, entries: tuple[ix.Entry, ...] | None = ...
    ) -> Any: ...


class RefusedHost(Protocol):
    """What :meth:`~ptd.persistent.refused.RefusedOpsMixin.squeeze` uses."""

    @property
    def _batch(self) -> torch.Size: ...

    def _dim(self, dim: int, extra: int = ...) -> int: ...

    def _refuse(self, name: str, fix: str = ...) -> Exception: ...


class OpenerClass(Protocol):
    """What the class methods of :class:`~ptd.persistent.opening.OpenersMixin` use: the class
    itself, called as the constructor (``cls(filename=..., mode=..., ...)``)."""

    def __call__(self, *args: Any, **kwargs: Any) -> PersistentTensorDict: ...

    def _open_infer(
        self,
        filename: Any,
        backend: str,
        mode: str,
        auto_batch_size: bool,
        batch_dims: int | None,
        batch_size: Any,
        non_tensor_as_stack: bool,
        kwargs: dict[str, Any],
        fname: str,
    ) -> PersistentTensorDict: ...


class PicklingHost(Protocol):
    """What pickling (``__getstate__``/``__setstate__`` of
    :class:`~ptd.persistent.opening.OpenersMixin`) uses."""

    @property
    def _store(self) -> _Store: ...

    @property
    def _path(self) -> Path: ...

    @property
    def _stored_batch(self) -> torch.Size: ...

    @property
    def _entries(self) -> tuple[ix.Entry, ...] | None: ...

    @property
    def _device(self) -> torch.device | None: ...

    @property
    def backend(self) -> str: ...

    @property
    def mode(self) -> str: ...

    def _init_view(
        self,
        store: _Store,
        path: Path,
        stored_batch: torch.Size,
        entries: tuple[ix.Entry, ...] | None,
        device: torch.device | None,
    ) -> None: ...


if TYPE_CHECKING:

    def _conforms(cls: type[PersistentTensorDict], td: PersistentTensorDict) -> None:
        """For mypy only: the class provides what each method family needs."""
        _leaves: LeafHost = td
        _refused: RefusedHost = td
        _pickling: PicklingHost = td
        _opener: OpenerClass = cls
