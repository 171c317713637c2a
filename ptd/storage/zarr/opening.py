"""Opening zarr stores: the store behind a path (a directory or a ``.zip`` file) or an fsspec
URL, and its root group, with zarr's failures (a missing or existing store, a file that is not
a store, damaged metadata) as one ptd error each.
"""

from __future__ import annotations

import os
import warnings
import zipfile
from typing import Any

import zarr
from zarr.storage import ZipStore

from ptd.errors import CorruptStoreError, ReadOnlyError, StoreExistsError, StoreNotFoundError
from ptd.format.detect import ROOT_ARRAY_HINT
from ptd.format.names import ZARR_JSON, ZARR_V2_GROUP
from ptd.storage import remote as _url
from ptd.storage.location import StoreLocation
from ptd.storage.targets import EXISTS_HINT
from ptd.storage.zarr.jsonguard import local_root
from ptd.storage.zarr.private import sync

__all__ = ["check_v2_mode", "local_store", "open_root", "remote_store"]


#: what zarr raises at open for a store without a (readable) root group, or a root array: not
#: a node's metadata it cannot parse
_NOT_A_NODE_ERROR = (
    FileNotFoundError,
    zarr.errors.NodeNotFoundError,
    zarr.errors.ContainsGroupError,
    zarr.errors.ContainsArrayError,
)


def _has_v2_group(path: str) -> bool:
    return os.path.isfile(os.path.join(path, ZARR_V2_GROUP))


def check_v2_mode(root: zarr.Group, mode: str, location: str) -> None:
    """Zarr v2 stores are read-only in ptd (it writes v3 only): any other mode than ``"r"``
    on a v2 store raises ReadOnlyError naming it."""
    if mode != "r" and root.metadata.zarr_format == 2:
        raise ReadOnlyError(
            f"{location} is a Zarr v2 store, which ptd opens read-only (mode 'r'); write a v3 "
            f"copy with `ptd convert {location} NEW.zarr` to modify it"
        )


def remote_store(loc: StoreLocation, mode: str) -> Any:
    """An fsspec URL (``s3://``, ``gs://``, ``memory://``...): a zarr ``FsspecStore``.

    The URL is probed first (with its storage options), so missing credentials, a missing
    bucket or store, or an existing store in mode ``w-`` are one clear error."""
    from zarr.storage import FsspecStore

    url, storage_options = loc.path, loc.options
    fs, path, kind = _url.probe(url, storage_options, marker=ZARR_JSON)
    if kind is None:
        _url.check_bucket(fs, path, url)
        if mode in ("r", "r+"):
            raise StoreNotFoundError(f"zarr store {url} does not exist")
    elif kind == "file":
        raise CorruptStoreError(f"{url} is a file, not a zarr store (a prefix with {ZARR_JSON})")
    elif kind == "marker" and mode in ("w-", "x"):
        raise StoreExistsError(f"zarr store {url} already exists (mode {mode!r}); {EXISTS_HINT}")
    elif kind == "dir" and mode in ("r", "r+"):
        if _url.probe(url, storage_options, marker=ZARR_V2_GROUP)[2] == "marker":
            return FsspecStore.from_url(
                url, storage_options=dict(storage_options or {}), read_only=mode == "r"
            )
        raise CorruptStoreError(f"{url} is not a zarr store: it has no {ZARR_JSON}")
    try:
        return FsspecStore.from_url(
            url, storage_options=dict(storage_options or {}), read_only=mode == "r"
        )
    except Exception as err:  # noqa: BLE001 - translated to one line
        raise _url.remote_error(err, url) from None


def local_store(path: str, mode: str) -> Any:
    """A local path: a ZipStore for zip files, else the path itself (a LocalStore)."""
    exists = os.path.exists(path)
    if exists and os.path.isfile(path):
        if not zipfile.is_zipfile(path):
            raise CorruptStoreError(f"{path} is a file, not a zarr store (a directory or .zip)")
        if mode in ("w-", "x"):
            raise StoreExistsError(f"zarr store {path} already exists (mode {mode!r})")
        return ZipStore(path, mode="r" if mode == "r" else ("w" if mode == "w" else "a"))
    if path.endswith(".zip") and not exists:
        if mode in ("r", "r+"):
            raise StoreNotFoundError(f"zarr store {path} does not exist")
        return ZipStore(path, mode="w")
    if mode in ("r", "r+") and not exists:
        raise StoreNotFoundError(f"zarr store {path} does not exist")
    if (
        exists
        and mode in ("r", "r+")
        and not os.path.exists(os.path.join(path, ZARR_JSON))
        and not _has_v2_group(path)
    ):
        if not os.listdir(path):
            raise StoreNotFoundError(f"{path} is an empty directory, not a zarr store")
        if os.path.exists(os.path.join(path, ".zarray")):
            raise CorruptStoreError(
                f"{path} holds a Zarr v2 array at its root, not a group: {ROOT_ARRAY_HINT}"
            )
        raise CorruptStoreError(
            f"{path} is not a zarr store: it has no {ZARR_JSON} (v3) or {ZARR_V2_GROUP} (v2)"
        )
    if (
        exists
        and mode not in ("r", "w")
        and _has_v2_group(path)
        and not os.path.exists(os.path.join(path, ZARR_JSON))
    ):
        raise ReadOnlyError(
            f"{path} is a Zarr v2 store, which ptd opens read-only (mode 'r'); write a v3 "
            f"copy with `ptd convert {path} NEW.zarr` to modify it"
        )
    return path


def open_root(
    store: Any, mode: str, location: str, *, remote: bool, use_consolidated: bool | None = None
) -> zarr.Group:
    """The root group of ``store`` (a path, or a zarr store; named ``location`` in errors)
    opened in ``mode``; ``remote``: an fsspec URL's store, whose I/O errors are the URL's.
    ``use_consolidated=False``: never trust consolidated metadata (writable modes never do);
    consolidated metadata that zarr cannot parse is not used either."""
    kwargs: dict[str, Any] = {"mode": "w-" if mode == "x" else mode}
    if mode != "r" or use_consolidated is False:
        kwargs["use_consolidated"] = False
    if mode in ("w", "w-", "x"):
        kwargs["zarr_format"] = 3  # ptd writes v3 only
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                return zarr.open_group(store, **kwargs)
            except (ValueError, TypeError, KeyError, AttributeError) as err:
                if "use_consolidated" in kwargs or isinstance(err, _NOT_A_NODE_ERROR):
                    raise
                # consolidated metadata holding a node zarr cannot parse fails the whole open:
                # open on the live listing instead, where that node alone is unreadable
                return zarr.open_group(store, **kwargs, use_consolidated=False)
    except FileNotFoundError:
        root = local_root(store)
        if root is not None and os.path.isfile(os.path.join(root, ZARR_JSON)):
            raise CorruptStoreError(
                f"{location} is not a readable zarr store: its {ZARR_JSON} does not describe "
                "a group that zarr can open (damaged metadata?)"
            ) from None
        raise StoreNotFoundError(f"zarr store {location} does not exist") from None
    except FileExistsError:
        raise StoreExistsError(
            f"zarr store {location} already contains data (mode {mode!r}); {EXISTS_HINT}"
        ) from None
    except (zarr.errors.ContainsGroupError, zarr.errors.ContainsArrayError) as err:
        if mode in ("w-", "x") and isinstance(err, zarr.errors.ContainsGroupError):
            raise StoreExistsError(
                f"zarr store {location} already exists (mode {mode!r})"
            ) from None
        raise CorruptStoreError(
            f"{location} holds a zarr array at its root, not a group: {ROOT_ARRAY_HINT}"
        ) from None
    except zarr.errors.GroupNotFoundError:
        if local_root(store) is not None or (mode in ("r", "r+") and not _store_has_data(store)):
            raise StoreNotFoundError(f"no zarr group found in {location}") from None
        raise CorruptStoreError(f"no zarr group found in {location} (no {ZARR_JSON})") from None
    except ValueError as err:  # JSONDecodeError, invalid metadata
        raise CorruptStoreError(f"{location} is not a readable zarr store: {err}") from None
    except OSError as err:
        if remote:
            raise _url.remote_error(err, location) from None
        raise CorruptStoreError(f"cannot open zarr store {location}: {err}") from None


def _store_has_data(store: Any) -> bool:
    try:
        return not sync(store.is_empty(""))
    except Exception:  # noqa: BLE001 - a store that cannot list
        return True
