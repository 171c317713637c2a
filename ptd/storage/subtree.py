"""A store narrowed to one of its groups, or to one array: ``ptd inspect robo.h5/data/demo_0``.

:func:`narrow` wraps an open backend so that the node at ``inner`` is the root: every path
given to the wrapper is relative to it (``("actions",)`` is ``data/demo_0/actions`` of the
file), and every path it reports is too (``walk``, ``array_meta(...).path``, the links and
skipped keys found by listing). A narrowed *array* is shown as a root group holding that one
array (under its own name), with its parent group's attributes, so its parent's stored batch
size still applies to it.

The wrapper forwards every call to the backend it wraps, which keeps doing the work (its memory
maps, chunk cache and error messages, which name the file and the full key). It is a
:class:`~ptd.storage.api.Backend` itself, so everything written against that
interface (the reports, convert) takes it as it takes any store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ptd.errors import PtdKeyError, StoreNotFoundError, UnsupportedOperationError
from ptd.storage.api import (
    ArrayMeta,
    Backend,
    NewArray,
    NodeKind,
    NonTensorPayload,
    Path,
    Selection,
    ValueKind,
)
from ptd.storage.chunk_info import ChunkInfo
from ptd.storage.location import OpenOptions
from ptd.storage.properties import ArrayProperties, StoreProperties

if TYPE_CHECKING:
    from ptd.storage.location import ReopenSpec
    from ptd.storage.strings import StringType

__all__ = ["SubtreeBackend", "narrow"]


def narrow(be: Backend, inner: Path, described: str) -> Backend:
    """``be`` narrowed to the node at ``inner`` (``be`` itself when ``inner`` is empty).

    ``described`` names the path the user gave (``robo.h5/data/demo_0``), for messages. A
    missing node raises StoreNotFoundError naming the file and the key (``be`` is closed)."""
    if not inner:
        return be
    try:
        kind = be.kind(inner)
    except PtdKeyError:
        kind = None
    except BaseException:
        be.close()
        raise
    if kind is None:
        key = "/".join(inner)
        be.close()
        raise StoreNotFoundError(f"{described} does not exist: {be.location} has no key {key!r}")
    if kind is NodeKind.GROUP:
        return SubtreeBackend(be, inner, None, described)
    return SubtreeBackend(be, inner[:-1], inner[-1], described)


class SubtreeBackend(Backend):
    """The store ``inner`` narrowed to the group at ``prefix`` (or to its one array ``leaf``);
    see the module doc."""

    def __init__(self, inner: Backend, prefix: Path, leaf: str | None, described: str) -> None:
        super().__init__(described, writable=inner.writable)
        self.name = inner.name
        self.property_attrs = inner.property_attrs
        self._inner = inner
        self._prefix = prefix
        self._leaf = leaf
        self._seen: tuple[int, ...] = (-1, -1, -1, -1, -1)

    # --- paths -------------------------------------------------------------------------------
    def _full(self, path: Path) -> Path:
        """The path in the wrapped store of the node at ``path`` here."""
        if self._leaf is not None and path and path[0] != self._leaf:
            raise PtdKeyError(f"key {self.key_str(path)!r} not found in {self._location}")
        return self._prefix + tuple(path)

    def _rel(self, full: Path) -> Path | None:
        """``full`` relative to the root here, or None when it is outside."""
        n = len(self._prefix)
        if full[:n] != self._prefix:
            return None
        rel = full[n:]
        if self._leaf is not None and (not rel or rel[0] != self._leaf):
            return None
        return rel

    def stored_sizes(self, paths: Sequence[Path]) -> dict[Path, int]:
        full = {self._full(p): p for p in paths}
        return {full[q]: n for q, n in self._inner.stored_sizes(list(full)).items()}

    def stored_path(self, path: Path) -> Path:
        """``path`` as the whole store names it (``("actions",)`` -> ``("data", "demo_0",
        "actions")``, with the wrapped format's escaped names)."""
        return self._inner.stored_path(self._full(path))

    def _sync(self) -> None:
        """The wrapped backend's listing findings, relative to the root here."""
        be = self._inner
        seen = (
            len(be.walk_links),
            len(be.walk_skipped),
            len(be.data_elsewhere),
            len(be.attrs_skipped),
            len(be.hidden_dimensions),
        )
        if seen == self._seen:
            return
        self._seen = seen

        def rel(d: Mapping[Path, Any]) -> dict[Path, Any]:
            out = {}
            for k, v in d.items():
                r = self._rel(k)
                if r:
                    out[r] = v
            return out

        self.walk_links = rel(be.walk_links)
        self.walk_skipped = rel(be.walk_skipped)
        self.data_elsewhere = rel(be.data_elsewhere)
        self.attrs_skipped = rel(be.attrs_skipped)
        self.hidden_dimensions = rel(be.hidden_dimensions)

    def _meta(self, meta: ArrayMeta) -> ArrayMeta:
        rel = self._rel(meta.path)
        return meta if rel is None else replace(meta, path=rel)

    # --- lifecycle ---------------------------------------------------------------------------
    @classmethod
    def open(
        cls, target: Any, mode: str = "r", options: OpenOptions | None = None, **changes: Any
    ) -> Backend:
        raise UnsupportedOperationError(
            "a narrowed store is opened through its location: "
            "ptd.storage.stores.open_store(StoreLocation.parse_source(...))"
        )

    def _flush_before_close(self) -> None:
        pass

    def _release_handles(self) -> None:
        self._inner.close()

    @property
    def closed(self) -> bool:
        return self._closed or self._inner.closed

    @property
    def writable(self) -> bool:
        return self._inner.writable and not self.closed

    @property
    def format_version(self) -> int | None:
        return self._inner.format_version

    @property
    def reopen_spec(self) -> ReopenSpec | None:
        """The wrapped store's, narrowed the same way when it is reopened."""
        spec = self._inner.reopen_spec
        if spec is None:
            return None
        inner = self._prefix + ((self._leaf,) if self._leaf is not None else ())
        return replace(spec, location=replace(spec.location, inner=inner))

    def raw_group(self, path: Path) -> Any:
        return self._inner.raw_group(self._full(path))

    def flush(self) -> None:
        self._inner.flush()

    def finalize(self) -> None:
        self._inner.finalize()

    # --- structure ---------------------------------------------------------------------------
    def kind(self, path: Path) -> NodeKind | None:
        if not path:
            return NodeKind.GROUP
        try:
            return self._inner.kind(self._full(path))
        except PtdKeyError:
            return None

    def children(self, path: Path) -> list[tuple[str, NodeKind]]:
        kids = self._inner.children(self._full(path))
        if self._leaf is not None and not path:
            kids = [(n, k) for n, k in kids if n == self._leaf]
        self._sync()
        return kids

    def array_meta(self, path: Path) -> ArrayMeta:
        meta = self._meta(self._inner.array_meta(self._full(path)))
        self._sync()
        return meta

    def array_properties(self, path: Path, meta: ArrayMeta | None = None) -> ArrayProperties:
        full = self._full(path)
        props = self._inner.array_properties(
            full, None if meta is None else replace(meta, path=full)
        )
        return replace(props, path=tuple(path))

    def dimension_names(
        self, path: Path, meta: ArrayMeta | None = None
    ) -> tuple[str | None, ...] | None:
        full = self._full(path)
        return self._inner.dimension_names(full, None if meta is None else replace(meta, path=full))

    def store_properties(self) -> StoreProperties:
        return self._inner.store_properties()

    def walk(self, path: Path = ()) -> list[tuple[Path, NodeKind, ArrayMeta | None]]:
        nodes: list[tuple[Path, NodeKind, ArrayMeta | None]]
        if self._leaf is not None and not path:  # narrow() makes leaves of arrays only
            full = self._prefix + (self._leaf,)
            nodes = [(full, NodeKind.ARRAY, self._inner.array_meta(full))]
        else:
            nodes = self._inner.walk(self._full(path))
        out: list[tuple[Path, NodeKind, ArrayMeta | None]] = []
        for p, kind, meta in nodes:
            rel = self._rel(p)
            if rel:
                out.append((rel, kind, None if meta is None else self._meta(meta)))
        self._sync()
        return out

    def create_group(self, path: Path, attrs: Mapping[str, Any] | None = None) -> None:
        self._inner.create_group(self._full(path), attrs)

    def create_array(
        self,
        path: Path,
        *,
        shape: Sequence[int],
        dtype: np.dtype,
        data: np.ndarray | None = None,
        attrs: Mapping[str, Any] | None = None,
        chunks: Sequence[int] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        self._inner.create_array(
            self._full(path),
            shape=shape,
            dtype=dtype,
            data=data,
            attrs=attrs,
            chunks=chunks,
            options=options,
        )

    def create_arrays(self, specs: Sequence[NewArray]) -> None:
        self._inner.create_arrays([replace(s, path=self._full(s.path)) for s in specs])

    def create_groups(self, specs: Sequence[tuple[Path, Mapping[str, Any] | None]]) -> None:
        self._inner.create_groups([(self._full(p), a) for p, a in specs])

    def delete(self, path: Path) -> None:
        if not path:
            raise UnsupportedOperationError(f"cannot delete the root of {self._location}")
        self._inner.delete(self._full(path))

    def move(self, src: Path, dst: Path) -> None:
        self._inner.move(self._full(src), self._full(dst))

    # --- attributes and data -----------------------------------------------------------------
    def get_attrs(self, path: Path) -> dict[str, Any]:
        return self._inner.get_attrs(self._full(path))

    def set_attrs(self, path: Path, attrs: Mapping[str, Any]) -> None:
        self._inner.set_attrs(self._full(path), attrs)

    def read(
        self,
        path: Path,
        selection: Selection = (),
        *,
        out: np.ndarray | None = None,
    ) -> np.ndarray:
        return self._inner.read(self._full(path), selection, out=out)

    def read_many(self, paths: Sequence[Path]) -> list[np.ndarray]:
        return self._inner.read_many([self._full(p) for p in paths])

    def write(self, path: Path, selection: Selection, value: np.ndarray) -> None:
        self._inner.write(self._full(path), selection, value)

    def string_type(self, meta: ArrayMeta) -> StringType | None:
        return self._inner.string_type(replace(meta, path=self._full(meta.path)))

    def read_strings(self, path: Path) -> np.ndarray:
        return self._inner.read_strings(self._full(path))

    def create_strings(
        self,
        path: Path,
        stype: StringType,
        data: np.ndarray,
        *,
        attrs: Mapping[str, Any] | None = None,
        chunks: Sequence[int] | None = None,
        dimension_names: tuple[str | None, ...] | None = None,
    ) -> None:
        self._inner.create_strings(
            self._full(path),
            stype,
            data,
            attrs=attrs,
            chunks=chunks,
            dimension_names=dimension_names,
        )

    def read_non_tensor(
        self,
        path: Path,
        selection: Selection = (),
        *,
        allow_pickle: bool | None = None,
        as_stack: bool = False,
    ) -> NonTensorPayload:
        return self._inner.read_non_tensor(
            self._full(path), selection, allow_pickle=allow_pickle, as_stack=as_stack
        )

    def write_non_tensor(
        self,
        path: Path,
        value: Any,
        *,
        stack_shape: tuple[int, ...] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        self._inner.write_non_tensor(
            self._full(path), value, stack_shape=stack_shape, options=options
        )

    # --- the hooks: everything above goes to the wrapped backend -----------------------------
    def _group(self, path: Path) -> Any:
        return self._inner.raw_group(self._full(path))

    def _exists(self, path: Path) -> bool:
        return self.kind(path) is not None

    def _delete(self, path: Path, key: str) -> None:  # pragma: no cover - delete() forwards
        self._inner.delete(self._full(path))

    def _move(self, src: Path, dst: Path) -> None:  # pragma: no cover - move() forwards
        self._inner.move(self._full(src), self._full(dst))

    def _array_handle(self, path: Path) -> Any:
        # (the wrapped backend's handle: chunk_info and friends ask for it)
        return self._inner._array_handle(self._full(path))

    def _chunk_info(self, handle: Any, list_stored: bool) -> ChunkInfo:
        return self._inner._chunk_info(handle, list_stored)

    def _read(self, handle: Any, selection: Selection) -> np.ndarray:  # pragma: no cover
        return self._inner._read(handle, selection)

    def _write(self, handle: Any, selection: Selection, value: np.ndarray) -> None:
        self._inner._write(handle, selection, value)  # pragma: no cover - write() forwards

    def _non_tensor_entry(self, path: Path) -> Any:
        return self._inner._non_tensor_entry(self._full(path))

    def _decode_non_tensor(
        self,
        entry: Any,
        key: str,
        selection: Selection,
        *,
        allow_pickle: bool | None,
        as_stack: bool,
    ) -> NonTensorPayload:  # pragma: no cover - read_non_tensor() forwards
        return self._inner._decode_non_tensor(
            entry, key, selection, allow_pickle=allow_pickle, as_stack=as_stack
        )

    def _value_kind(
        self, dtype: np.dtype, attrs: Mapping[str, Any]
    ) -> tuple[ValueKind, str | None]:
        return self._inner._value_kind(dtype, attrs)
