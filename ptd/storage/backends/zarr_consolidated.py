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

import json
import warnings
from typing import Any

import zarr
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync

from ptd.format.names import ZARR_JSON

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
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            zarr.consolidate_metadata(self._store, path=self._path or None)
        self._present = True
