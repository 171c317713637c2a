"""The store behind a location: its format read from the content, and opened with its backend.

(Here, not on :class:`~ptd.storage.location.StoreLocation`: a location is a value every
backend parses its targets into, so it cannot know the backends that open it; nor in
:mod:`ptd.storage.registry`, whose table the command line reads without importing numpy.)

>>> loc = StoreLocation.parse("runs/data.h5")
>>> with_suffix_of(loc, "zarr").path, with_suffix_of(StoreLocation.parse("runs/x"), "h5").path
('runs/data.zarr', 'runs/x.h5')
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ptd.errors import ArgumentError, StoreNotFoundError
from ptd.storage.api import Backend
from ptd.storage.location import OpenOptions, ReopenSpec, StoreLocation
from ptd.storage.observers import opened
from ptd.storage.registry import (
    default_suffix,
    detect_backend,
    entry,
    get_backend,
    policy,
    store_dir_format,
    suffixes,
)

__all__ = [
    "check_follow_virtual",
    "detect",
    "open_store",
    "open_stream",
    "parse_source",
    "reopen",
    "with_suffix_of",
]


def detect(loc: StoreLocation) -> StoreLocation:
    """``loc`` with its format read from the content (an existing store), or as given.
    Missing: StoreNotFoundError; no known format: CorruptStoreError."""
    if loc.format is not None:
        return loc
    if not loc.is_remote and not os.path.exists(loc.path):
        raise StoreNotFoundError(f"{loc.path} does not exist")
    return replace(loc, format=detect_backend(loc.path, loc.options))


def check_follow_virtual(fmt: str, follow_virtual: bool | None) -> None:
    """Refuse ``follow_virtual=True`` for a format without virtual data (zarr, memmap)."""
    if follow_virtual and not policy(fmt).virtual_data:
        raise ArgumentError(
            f"follow_virtual applies to HDF5 files only: {policy(fmt).label} stores have no "
            "virtual datasets"
        )


def open_store(
    loc: StoreLocation, mode: str = "r", options: OpenOptions | None = None, **changes: Any
) -> Backend:
    """Open the store at ``loc`` with its backend (the format is detected when unknown).

    ``options`` (with ``changes``: ``fast_path=``, ``locking=``...) go to the backend; storage
    options come from the location. A location with an ``inner`` key opens the store narrowed
    to it (a missing key raises StoreNotFoundError naming the store and the key). The store
    passes through the wrappers of :mod:`ptd.storage.observers` (none outside tests)."""
    from ptd.storage.subtree import narrow

    loc = detect(loc)
    assert loc.format is not None
    opts = OpenOptions.of(options, **changes)
    check_follow_virtual(loc.format, opts.follow_virtual)
    if loc.storage_options:
        opts = OpenOptions.of(opts, storage_options=loc.options)
    be = get_backend(loc.format).open(loc.path, mode, opts)
    return opened(narrow(be, loc.inner, loc.described))


def open_stream(loc: StoreLocation, follow_virtual: bool = False) -> Backend:
    """Open ``loc`` read-only for a streamed whole-store pass (convert, memmap export,
    ``validate --data``): without memory maps, whose mapped pages would count in resident
    memory and gain a streamed copy nothing, nor a chunk cache (each chunk is read once).
    ``follow_virtual``: the open option (HDF5 virtual datasets beside the file are read)."""
    return open_store(loc, "r", fast_path=False, chunk_cache=0, follow_virtual=follow_virtual)


def reopen(spec: ReopenSpec, mode: str | None = None) -> Backend:
    """Open the store ``spec`` describes again (in a worker, after unpickling)."""
    return open_store(spec.location, spec.mode if mode is None else mode, spec.options)


def with_suffix_of(loc: StoreLocation, fmt: str) -> StoreLocation:
    """``loc`` with its format suffix swapped for the one a new ``fmt`` store is given
    (data.h5 -> data.zarr; a path without a known suffix gets one added)."""
    stem = loc.path.rstrip("/\\") or loc.path
    root, ext = os.path.splitext(stem)
    if ext.lower() not in suffixes():
        root = stem
    return replace(loc, path=root + default_suffix(fmt), format=fmt, inner=())


def parse_source(target: Any, storage_options: Mapping[str, Any] | None = None) -> StoreLocation:
    """Parse a store to read, which may lead into a store (h5ls's convention): a local path
    whose longest existing prefix is a file is that file, the rest a key inside it
    (``robo.h5/data/demo_0``); in a store kept as a tree of directories (zarr, a memmap
    directory), the store is the outermost directory of the path that is a group of it, the
    rest a key. Other paths, and URLs, are taken as they are (see
    :meth:`StoreLocation.parse`); the key is checked when the store is opened."""
    loc = StoreLocation.parse(target, storage_options)
    if loc.inner or loc.is_remote:
        return loc
    store, inner = _split_local(loc.path)
    return loc if not inner else replace(loc, path=store, inner=inner)


def _split_local(path: str) -> tuple[str, tuple[str, ...]]:
    """``(store, inner key)`` of a local path that may lead into a store (see
    :func:`parse_source`); ``(path, ())`` when it does not."""
    stripped = path.rstrip("/\\") or path
    head, tail = stripped, []
    while not os.path.exists(head):
        parent, name = os.path.split(head)
        if not parent or not name or parent == head:
            return path, ()  # nothing of it exists: "does not exist", later
        tail.append(name)
        head = parent
    tail.reverse()
    if os.path.isfile(head):
        parent, name = os.path.split(head)
        fmt = store_dir_format(parent) if parent else None
        key = entry(fmt).file_key if fmt is not None else None
        leaf = key(name) if key is not None else None
        if leaf is None:
            return (head, tuple(tail)) if tail else (path, ())
        head, tail = parent, [leaf, *tail]  # a leaf's own file: the key is its name
    fmt = store_dir_format(head, arrays=True)
    if fmt is None:
        return path, ()
    root = head
    while True:  # up to the outermost directory of the path that is of the same store
        parent = os.path.dirname(root)
        if not parent or parent == root or store_dir_format(parent) != fmt:
            break
        root = parent
    names = [] if root == head else os.path.relpath(head, root).split(os.sep)
    inner = [entry(fmt).dir_key(n) for n in names] + tail
    return (root, tuple(inner)) if inner else (path, ())
