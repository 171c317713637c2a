"""Consolidated metadata of a zarr store, kept in sync with the changes of a session.

A store that carries consolidated metadata (all of its ``zarr.json`` documents copied into the
root's) has it rewritten after *any* metadata change this session makes (also attributes), once
per session in ``flush``/``close`` rather than after each change. A store without it never gets
it, except by an explicit :meth:`Consolidation.consolidate` (``Backend.finalize``).
"""

from __future__ import annotations

import warnings
from typing import Any

import zarr

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
        """Record a metadata change: consolidated metadata (if any) is rewritten on flush."""
        if self._present is None:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ro = zarr.open_group(self._store, path=self._path, mode="r")
                self._present = ro.metadata.consolidated_metadata is not None
            except Exception:  # noqa: BLE001 - no readable consolidated metadata
                self._present = False
        if self._present:
            self._dirty = True

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
