"""A cache of a store's structure and array metadata, and batch-size inference over it.

One :class:`StoreTree` is shared by a PersistentTensorDict, its nested groups and its views. It
asks the backend once per group (or walks the whole store once, when the batch size is
validated at open) and is kept up to date by the structural writes that ptd makes. A store
changed by another process after opening is the user's business, as with h5py.

Batch sizes here are plain tuples (no torch: ``ptd.info``/``ptd.validate`` use the tree too);
the ``__tensordict__`` attribute is read through :func:`ptd.format.tdmeta.parse_td_meta`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType

from ptd.format.shapes import check_leaf, common_prefix, fits
from ptd.format.tdmeta import parse_td_meta
from ptd.storage.api import ArrayMeta, Backend, NodeKind, Path, ValueKind
from ptd.storage.limits import check_depth

__all__ = ["StoreTree"]


class StoreTree:
    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._children: dict[Path, list[str]] = {}
        self._kinds: dict[Path, NodeKind] = {(): NodeKind.GROUP}
        self._metas: dict[Path, ArrayMeta] = {}
        self._group_batch: dict[Path, tuple[int, ...]] = {}
        #: arrays whose declared size was checked against this machine's memory
        self.memory_checked: dict[Path, bool] = {}

    # ------------------------------------------------------------------ structure
    def load_all(self) -> None:
        """Fill the cache with one walk over the store."""
        self.fill(self.backend.walk(()))

    def fill(self, nodes: Iterable[tuple[Path, NodeKind, ArrayMeta | None]]) -> None:
        """Fill the cache from the nodes of a walk (``Backend.walk``'s items) that a caller
        has already made."""
        children: dict[Path, list[str]] = {(): []}
        for path, kind, meta in nodes:
            children.setdefault(path[:-1], []).append(path[-1])
            self._kinds[path] = kind
            if kind is NodeKind.GROUP:
                children.setdefault(path, [])
            elif meta is not None:
                self._metas[path] = meta
        self._children.update(children)

    @property
    def group_batches(self) -> Mapping[Path, tuple[int, ...]]:
        """The batch size inferred so far for each group (read-only)."""
        return MappingProxyType(self._group_batch)

    def children(self, path: Path) -> list[str]:
        names = self._children.get(path)
        if names is None:
            check_depth(path, str(self.backend.location))
            listed = self.backend.children(path)
            names = [n for n, _ in listed]
            for n, k in listed:
                self._kinds[path + (n,)] = k
            self._children[path] = names
        return names

    def kind(self, path: Path) -> NodeKind | None:
        if path in self._kinds:
            return self._kinds[path]
        if (path[:-1] in self._children or self.kind(path[:-1]) is NodeKind.GROUP) and path[
            -1
        ] in self.children(path[:-1]):
            return self._kinds.get(path)
        return None

    def meta(self, path: Path) -> ArrayMeta:
        meta = self._metas.get(path)
        if meta is None:
            meta = self.backend.array_meta(path)
            self._metas[path] = meta
        return meta

    def invalidate(self, path: Path) -> None:
        """Forget ``path`` and everything below it (after a create/delete/move)."""
        for cache in (
            self._kinds,
            self._metas,
            self._children,
            self._group_batch,
            self.memory_checked,
        ):
            for p in [p for p in cache if p[: len(path)] == path]:
                del cache[p]
        self._children.pop(path[:-1], None)
        self._kinds[()] = NodeKind.GROUP

    # ------------------------------------------------------------------ batch sizes
    def shape_for_batch(self, path: Path) -> tuple[int, ...] | None:
        """The shape that counts for batch inference and checks, or None if it does not."""
        kind = self.kind(path)
        if kind is NodeKind.GROUP:
            return None
        meta = self.meta(path)
        if meta.kind is ValueKind.NUMERIC:
            return meta.shape
        if meta.stack_shape is not None:
            return meta.stack_shape
        return None

    def stored_batch_attr(self, path: Path) -> tuple[int, ...] | None:
        """The batch size recorded in the group's ``__tensordict__`` attribute, if usable."""
        meta = parse_td_meta(self.backend.get_attrs(path)).meta
        return meta.batch_size if meta is not None else None

    def stored_names(self, path: Path, ndim: int) -> list[str | None] | None:
        """Dim names recorded in the ``__tensordict__`` attribute, when they fit ``ndim``."""
        meta = parse_td_meta(self.backend.get_attrs(path)).meta
        if meta is None or meta.names is None or len(meta.names) != ndim:
            return None
        return list(meta.names)

    def infer(
        self, path: Path = (), batch_dims: int | None = None, use_attrs: bool = True
    ) -> tuple[int, ...] | None:
        """Infer the batch size of the group at ``path`` (and of every group below it).

        Each group takes its recorded ``__tensordict__`` batch size when it fits its children,
        else the longest leading shape its children share. A group without any shaped
        descendant (only strings, or empty) does not constrain its parent and returns None.
        Groups are visited children first with a stack, not recursion (a hostile store nests
        groups thousands of levels deep).
        """
        found: dict[Path, tuple[int, ...] | None] = {}
        todo: list[tuple[Path, bool]] = [(path, False)]
        while todo:
            group, ready = todo.pop()
            kids = [group + (name,) for name in self.children(group)]
            subgroups = [p for p in kids if self.kind(p) is NodeKind.GROUP]
            if not ready:
                todo.append((group, True))
                todo.extend((p, False) for p in reversed(subgroups))
                continue
            shapes: list[tuple[int, ...]] = []
            for p in kids:
                if p in found:
                    sub = found[p]
                    if sub is not None:
                        shapes.append(tuple(sub))
                elif self.kind(p) is not NodeKind.GROUP:
                    shape = self.shape_for_batch(p)
                    if shape is not None:
                        shapes.append(shape)
            recorded = self.stored_batch_attr(group) if use_attrs else None
            if recorded is not None and all(fits(s, recorded) for s in shapes):
                result: tuple[int, ...] | None = recorded
            elif shapes:
                result = common_prefix(shapes, batch_dims)
            else:
                result = None
            found[group] = result
            if result is not None:
                self._group_batch[group] = result
                for p in subgroups:
                    if p not in self._group_batch:
                        self._set_unconstrained(p, result)
        return found[path]

    def _set_unconstrained(self, path: Path, batch: tuple[int, ...]) -> None:
        self._group_batch[path] = batch
        todo = [path]
        while todo:
            group = todo.pop()
            for name in self.children(group):
                p = group + (name,)
                if self.kind(p) is NodeKind.GROUP and p not in self._group_batch:
                    self._group_batch[p] = batch
                    todo.append(p)

    def group_batch(self, path: Path, parent_batch: Sequence[int]) -> tuple[int, ...]:
        """The batch size of a nested group: recorded or inferred (if it extends the parent's),
        else the parent's."""
        parent = tuple(parent_batch)
        found = self._group_batch.get(path)
        if found is None:
            recorded = self.stored_batch_attr(path)
            found = recorded if recorded is not None and fits(recorded, parent) else parent
            self._group_batch[path] = found
        if not fits(found, parent):
            found = parent
            self._group_batch[path] = found
        return found

    def set_group_batch(self, path: Path, batch: Sequence[int]) -> None:
        self._group_batch[path] = tuple(batch)

    def validate(self, path: Path, batch: Sequence[int], where: str) -> None:
        """Check every shaped leaf below ``path`` against ``batch`` (raises BatchSizeError)."""
        todo = [path]
        while todo:
            group = todo.pop()
            for name in self.children(group):
                p = group + (name,)
                if self.kind(p) is NodeKind.GROUP:
                    todo.append(p)
                    continue
                shape = self.shape_for_batch(p)
                if shape is not None:
                    check_leaf(shape, batch, key="/".join(p), where=where)
