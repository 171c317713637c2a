"""The storage backends: a registry by name, and format detection by content.

    >>> get_backend("h5").name
    'h5'
    >>> get_backend("hdf5")
    Traceback (most recent call last):
    ...
    ptd.errors.UnknownBackendError: Unknown backend 'hdf5'. Supported backends are ['h5', 'zarr'].

The backend modules are imported on first use, so ``import ptd`` does not import h5py or zarr.
"""

from __future__ import annotations

import importlib
import os
import zipfile
from typing import Any

from ptd.errors import CorruptStoreError, StoreNotFoundError, UnknownBackendError
from ptd.format.detect import (
    HEAD_BYTES,
    MEMMAP_FORMAT,
    ROOT_ARRAY_HINT,
    file_has_hdf5_signature,
    has_hdf5_signature,
    store_dir_format,
)
from ptd.format.names import ZARR_JSON
from ptd.storage.backends.base import ArrayMeta, Backend, NodeKind, NonTensorPayload, ValueKind

__all__ = [
    "BACKENDS",
    "ArrayMeta",
    "Backend",
    "NodeKind",
    "NonTensorPayload",
    "ValueKind",
    "detect_backend",
    "get_backend",
]

#: registry name -> (module, class name)
_REGISTRY: dict[str, tuple[str, str]] = {
    "h5": ("ptd.storage.backends.h5", "H5Backend"),
    "zarr": ("ptd.storage.backends.zarr", "ZarrBackend"),
    # read-only: ptd's memmap directories, for the stores' readers (inspect, validate...)
    MEMMAP_FORMAT: ("ptd.storage.backends.memmap_dir", "MemmapDirBackend"),
}
#: the supported backend names (the formats ptd reads and writes; ``"memmap"`` is read-only)
BACKENDS: tuple[str, ...] = ("h5", "zarr")


def get_backend(name: str) -> type[Backend]:
    """The backend class registered as ``name`` (``"h5"`` or ``"zarr"``)."""
    try:
        module, cls = _REGISTRY[name]
    except (KeyError, TypeError):
        raise UnknownBackendError(
            f"Unknown backend {name!r}. Supported backends are {list(BACKENDS)}."
        ) from None
    return getattr(importlib.import_module(module), cls)


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
