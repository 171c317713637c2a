"""The storage backends: a registry by name, and format detection by content.

    >>> get_backend("h5").name
    'h5'
    >>> get_backend("hdf5")
    Traceback (most recent call last):
    ...
    ptd.errors.UnknownBackendError: Unknown backend 'hdf5'. Supported backends are ['h5', 'zarr'].

The backend packages are imported on first use, so ``import ptd`` does not import h5py or zarr.
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import replace
from typing import Any

from ptd.errors import ArgumentError, CorruptStoreError, StoreNotFoundError, UnknownBackendError
from ptd.format.detect import (
    HEAD_BYTES,
    MEMMAP_FORMAT,
    ROOT_ARRAY_HINT,
    file_has_hdf5_signature,
    has_hdf5_signature,
    store_dir_format,
)
from ptd.format.names import ZARR_JSON
from ptd.storage.api import ArrayMeta, Backend, FormatPolicy, NodeKind, NonTensorPayload, ValueKind
from ptd.storage.location import OpenOptions, ReopenSpec, StoreLocation

__all__ = [
    "BACKENDS",
    "ArrayMeta",
    "Backend",
    "NodeKind",
    "NonTensorPayload",
    "ValueKind",
    "check_follow_virtual",
    "detect",
    "detect_backend",
    "get_backend",
    "open_store",
    "open_stream",
    "policy",
    "reopen",
]

#: the supported backend names (the formats ptd reads and writes; ``"memmap"`` is read-only)
BACKENDS: tuple[str, ...] = ("h5", "zarr")


def get_backend(name: str) -> type[Backend]:
    """The backend class registered as ``name`` (``"h5"``, ``"zarr"``, or the read-only
    ``"memmap"`` for ptd's memmap directories, which the stores' readers open).

    Each backend's package is imported here, on first use, so that ``import ptd`` imports
    neither h5py nor zarr: the imports are plain ones inside the function, downward from this
    module into its own subpackages.
    """
    if name == "h5":
        from ptd.storage.h5.backend import H5Backend

        return H5Backend
    if name == "zarr":
        from ptd.storage.zarr.backend import ZarrBackend

        return ZarrBackend
    if name == MEMMAP_FORMAT:
        from ptd.storage.memmap_dir import MemmapDirBackend

        return MemmapDirBackend
    raise UnknownBackendError(f"Unknown backend {name!r}. Supported backends are {list(BACKENDS)}.")


def policy(name: str) -> FormatPolicy:
    """The :class:`~ptd.storage.api.FormatPolicy` of the format registered as ``name``,
    without importing its store library (``get_backend(name).policy`` is the same object).

    >>> policy("h5").label, policy("zarr").stores_shards
    ('HDF5', True)
    """
    if name == "h5":
        from ptd.storage.h5.policy import POLICY as H5_POLICY

        return H5_POLICY
    if name == "zarr":
        from ptd.storage.zarr.policy import POLICY as ZARR_POLICY

        return ZARR_POLICY
    if name == MEMMAP_FORMAT:
        from ptd.storage.memmap_dir import MEMMAP_POLICY

        return MEMMAP_POLICY
    raise UnknownBackendError(f"Unknown backend {name!r}. Supported backends are {list(BACKENDS)}.")


def _detect_remote(url: str, storage_options: dict[str, Any] | None) -> str:
    """:func:`detect_backend` for a remote URL: a prefix with ``zarr.json`` is zarr, a file
    with the HDF5 signature (in its first 64 kB) h5."""
    from ptd.storage import remote as _url

    fs, path, kind = _url.probe(url, storage_options, marker=ZARR_JSON)
    if kind == "marker":
        return "zarr"
    if kind is None:
        _url.check_bucket(fs, path, url)
        raise StoreNotFoundError(f"{url} does not exist")
    try:
        if kind == "dir":
            if fs.exists(f"{path.rstrip('/')}/.zgroup"):
                return "zarr"
            raise CorruptStoreError(f"{url} has no {ZARR_JSON}: not a zarr store")
        head = fs.cat_file(path, start=0, end=HEAD_BYTES)
    except CorruptStoreError:
        raise
    except Exception as err:  # noqa: BLE001 - translated to one line
        raise _url.remote_error(err, url) from None
    if has_hdf5_signature(head):
        return "h5"
    raise CorruptStoreError(f"{url} is neither an HDF5 file nor a zarr store")


def detect_backend(target: Any, storage_options: dict[str, Any] | None = None) -> str:
    """The backend name for an existing ``target``, judged by its content.

    h5py objects and HDF5 files (by signature) give ``"h5"``; zarr groups/stores, directories
    holding ``zarr.json`` (or a zarr v2 ``.zgroup``) and zip files give ``"zarr"``, a local
    memmap directory (its ``meta.json`` describing a TensorDict) ``"memmap"``; URLs
    (``s3://...``, with ``storage_options``) are told apart the same way, by their content.
    A missing path raises StoreNotFoundError; anything else CorruptStoreError naming it.
    """
    module = type(target).__module__ or ""
    if module.startswith("h5py"):
        return "h5"
    if module.startswith("zarr"):
        return "zarr"
    try:
        path = os.fsdecode(os.fspath(target))
    except TypeError:
        raise CorruptStoreError(
            f"cannot tell the format of {target!r}: expected a path, an h5py object or a zarr "
            "group/store"
        ) from None
    from ptd.storage.remote import is_remote, normalize

    path = normalize(path)  # file:// -> a local path
    if is_remote(path):
        return _detect_remote(path, storage_options)
    if "://" in path:
        return "zarr"
    if not os.path.exists(path):
        raise StoreNotFoundError(f"{path} does not exist")
    if os.path.isdir(path):
        found = store_dir_format(path)
        if found is not None:
            return found
        if os.path.exists(os.path.join(path, ".zarray")):
            raise CorruptStoreError(
                f"{path} holds a Zarr v2 array at its root, not a group: {ROOT_ARRAY_HINT}"
            )
        raise CorruptStoreError(
            f"{path} is a directory without {ZARR_JSON}: not a zarr store (nor a memmap directory)"
        )
    try:
        if file_has_hdf5_signature(path):
            return "h5"
        if zipfile.is_zipfile(path):
            return "zarr"
    except OSError as err:
        raise CorruptStoreError(f"cannot read {path}: {err}") from None
    raise CorruptStoreError(f"{path} is neither an HDF5 file nor a zarr store")


# --- the store behind a location --------------------------------------------------------------
# (here, not on StoreLocation: a location is a value every backend parses its targets into, so
# it cannot import the backends that open it)


def detect(loc: StoreLocation) -> StoreLocation:
    """``loc`` with its format read from the content (an existing store), or as given.
    Missing: StoreNotFoundError; neither format: CorruptStoreError."""
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
    to it (a missing key raises StoreNotFoundError naming the store and the key)."""
    from ptd.storage.subtree import narrow

    loc = detect(loc)
    assert loc.format is not None
    opts = OpenOptions.of(options, **changes)
    check_follow_virtual(loc.format, opts.follow_virtual)
    if loc.storage_options:
        opts = OpenOptions.of(opts, storage_options=loc.options)
    be = get_backend(loc.format).open(loc.path, mode, opts)
    return narrow(be, loc.inner, loc.described)


def open_stream(loc: StoreLocation, follow_virtual: bool = False) -> Backend:
    """Open ``loc`` read-only for a streamed whole-store pass (convert, memmap export,
    ``validate --data``): without memory maps, whose mapped pages would count in resident
    memory and gain a streamed copy nothing, nor a chunk cache (each chunk is read once).
    ``follow_virtual``: the open option (HDF5 virtual datasets beside the file are read)."""
    return open_store(loc, "r", fast_path=False, chunk_cache=0, follow_virtual=follow_virtual)


def reopen(spec: ReopenSpec, mode: str | None = None) -> Backend:
    """Open the store ``spec`` describes again (in a worker, after unpickling)."""
    return open_store(spec.location, spec.mode if mode is None else mode, spec.options)
