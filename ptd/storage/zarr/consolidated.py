"""Consolidated metadata of a zarr store, never stale while a session writes.

A store that carries consolidated metadata (all of its ``zarr.json`` documents copied into the
root's) loses it at the first metadata change of a session (a new, deleted or moved array or
group, an attribute): the root ``zarr.json`` is rewritten once without it, so a reader that
opens the store meanwhile lists the live hierarchy instead of trusting a stale copy. It is
written again, once, at ``flush``/``close``. Rewriting it after every change instead would
cost a walk of the whole hierarchy per change (``benchmarks/bench_consolidated.py`` measures
both). A store without it never gets it, except by an explicit
:meth:`Consolidation.consolidate` (``Backend.finalize``, after ``from_dict`` and ``convert``).
Append-only stores (a ``ZipStore``) are never rewritten.
"""

from __future__ import annotations

import asyncio
import json
import os
import warnings
from typing import Any

import zarr
from zarr.storage import LocalStore

from ptd.format.names import ZARR_JSON
from ptd.storage.limits import check_json
from ptd.storage.paths import StoreRoot
from ptd.storage.zarr.confined import ConfinedStore
from ptd.storage.zarr.private import default_buffer_prototype, sync

__all__ = ["Consolidation"]


class Consolidation:
    """Whether the store behind a root group carries consolidated metadata, and whether this
    session changed it since it was last written."""

    def __init__(self, store: Any, path: str, *, fresh: bool) -> None:
        """``path``: the root group's path in ``store``; ``fresh``: the store was just
        created (it has no consolidated metadata)."""
        self._store = store
        self._path = path
        #: whether the store carries consolidated metadata (None: not checked yet)
        self._present: bool | None = False if fresh else None
        self._dirty = False

    def changed(self) -> None:
        """Record a metadata change: the first one drops the consolidated metadata (if any),
        which is written again on flush."""
        if self._dirty or self._present is False:
            return
        self._present = self._drop()
        self._dirty = self._present

    def _drop(self) -> bool:
        """Rewrite the root ``zarr.json`` without its consolidated metadata (readers opened
        from now on list the live hierarchy). One read and one write of that document; False
        when the store carries no consolidated metadata."""
        key = f"{self._path}/{ZARR_JSON}" if self._path else ZARR_JSON
        proto = default_buffer_prototype()
        try:
            buf = sync(self._store.get(key, prototype=proto))
            doc = json.loads(buf.to_bytes()) if buf is not None else {}
        except (ValueError, OSError):  # unreadable: nothing to keep fresh
            return False
        if not isinstance(doc, dict) or doc.get("consolidated_metadata") is None:
            return False
        if getattr(self._store, "supports_deletes", True):  # a ZipStore is append-only
            doc.pop("consolidated_metadata")
            data = json.dumps(doc, indent=2).encode()
            sync(self._store.set(key, proto.buffer.from_bytes(data)))
        return True

    def flush(self) -> None:
        """Rewrite the consolidated metadata if a change was recorded since it was written."""
        if self._dirty:
            self.consolidate()

    def consolidate(self) -> None:
        """Write the consolidated metadata (not for append-only stores)."""
        self._dirty = False
        if not getattr(self._store, "supports_deletes", True):
            return  # e.g. ZipStore: rewriting zarr.json would append a duplicate entry
        if isinstance(self._store, LocalStore):
            done = consolidate_local(self._store, self._path)
        else:
            done = sync(consolidate_listed(self._store, self._path))
        if not done:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                zarr.consolidate_metadata(self._store, path=self._path or None)
        self._present = True


def _load(file: str, paths: StoreRoot) -> Any:
    raw = paths.read(file)  # (never through a link out of the store)
    if raw is None:
        raise FileNotFoundError(file)
    check_json(raw, file)
    return json.loads(raw)


def consolidate_local(store: LocalStore, path: str) -> bool:
    """``zarr.consolidate_metadata`` for a Zarr v3 hierarchy in a local directory, without
    zarr parsing every node's metadata: each node's ``zarr.json`` is read as JSON (groups are
    listed by their directories; arrays are not entered) and the root's is written again with
    them all, as zarr writes it (each group's own ``consolidated_metadata`` empty). False (and
    nothing written) when the root is not a v3 group."""
    base = os.path.join(str(store.root), *path.split("/")) if path else str(store.root)
    root_file = os.path.join(base, ZARR_JSON)
    paths = store.paths if isinstance(store, ConfinedStore) else StoreRoot(store.root)
    try:
        root = _load(root_file, paths)
    except (OSError, ValueError):
        return False
    if not isinstance(root, dict) or root.get("zarr_format") != 3:
        return False
    if root.get("node_type") != "group":
        return False
    flat: dict[str, Any] = {}
    todo = [("", base)]
    st = os.stat(base)
    seen = {(st.st_dev, st.st_ino)}
    while todo:
        rel, directory = todo.pop()
        with os.scandir(directory) as it:
            subdirs = sorted(e.name for e in it if e.is_dir(follow_symlinks=True))
        for name in subdirs:
            try:
                doc = _load(os.path.join(directory, name, ZARR_JSON), paths)
            except FileNotFoundError:
                continue  # not a node (zarr lists only those with metadata)
            except (OSError, ValueError):
                return False  # damaged: zarr's own pass says what is wrong
            if not isinstance(doc, dict) or doc.get("zarr_format") != 3:
                return False
            key = rel + name
            if doc.get("node_type") == "group":
                doc["consolidated_metadata"] = _empty()
                sub = os.path.join(directory, name)
                st = os.stat(sub)
                if (st.st_dev, st.st_ino) in seen:
                    return False  # a directory link back into the tree: zarr's business
                seen.add((st.st_dev, st.st_ino))
                todo.append((key + "/", sub))
            flat[key] = doc
    paths.write(root_file, _with_nodes(root, flat))
    return True


def _with_nodes(root: dict[str, Any], flat: dict[str, Any]) -> bytes:
    """The root document carrying ``flat`` as its consolidated metadata (nodes in key order,
    so that every store gets the same bytes)."""
    root["consolidated_metadata"] = {**_empty(), "metadata": dict(sorted(flat.items()))}
    return json.dumps(root, allow_nan=True).encode()


async def consolidate_listed(store: Any, path: str) -> bool:
    """:func:`consolidate_local` for any listable store (a URL): the nodes' documents fetched
    concurrently, level by level."""
    if not getattr(store, "supports_listing", False):
        return False
    proto = default_buffer_prototype()
    prefix = f"{path}/" if path else ""
    sem = asyncio.Semaphore(64)

    async def get(key: str) -> Any:
        async with sem:
            buf = await store.get(key, prototype=proto)
        return None if buf is None else json.loads(buf.to_bytes())

    async def names(rel: str) -> list[str]:
        async with sem:
            return sorted([n async for n in store.list_dir((prefix + rel).rstrip("/"))])

    try:
        root = await get(prefix + ZARR_JSON)
        if not isinstance(root, dict) or root.get("zarr_format") != 3:
            return False
        if root.get("node_type") != "group":
            return False
        flat: dict[str, Any] = {}
        level = [""]
        while level:
            listed = await asyncio.gather(*(names(rel) for rel in level))
            keys = [
                rel + n for rel, ns in zip(level, listed, strict=True) for n in ns if n != ZARR_JSON
            ]
            docs = await asyncio.gather(*(get(f"{prefix}{k}/{ZARR_JSON}") for k in keys))
            level = []
            for key, doc in zip(keys, docs, strict=True):
                if doc is None:
                    continue  # not a node
                if not isinstance(doc, dict) or doc.get("zarr_format") != 3:
                    return False
                if doc.get("node_type") == "group":
                    doc["consolidated_metadata"] = _empty()
                    level.append(key + "/")
                flat[key] = doc
    except (OSError, ValueError):
        return False  # zarr's own pass says what is wrong
    await store.set(prefix + ZARR_JSON, proto.buffer.from_bytes(_with_nodes(root, flat)))
    return True


def _empty() -> dict[str, Any]:
    """Consolidated metadata with no nodes (what zarr writes for each group inside one)."""
    return {"kind": "inline", "must_understand": False, "metadata": {}}
