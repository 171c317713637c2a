"""The formats ptd reads and writes: one :class:`FormatEntry` per format, in one table.

Everything that depends on which formats exist is derived from the table: detection by
content (:func:`detect_backend`, :func:`store_dir_format`), by suffix
(:func:`format_of_suffix`), the lists (:func:`writable_formats`, :func:`known_formats`), a new
store's suffix (:func:`default_suffix`), "the other format" a conversion goes to
(:func:`counterpart`), the command line's ``--to`` choices, and the backend classes and
policies by name (:func:`get_backend`, :func:`policy`).

    >>> get_backend("h5").name, policy("zarr").stores_shards, counterpart("h5")
    ('h5', True, 'zarr')
    >>> writable_formats(), known_formats()
    (('h5', 'zarr'), ('h5', 'zarr', 'memmap'))
    >>> format_of_suffix("runs/data.HDF5"), format_of_suffix("s3://b/x.zarr/"), format_of_suffix("x.npz")
    ('h5', 'zarr', None)
    >>> get_backend("hdf5")
    Traceback (most recent call last):
    ...
    ptd.errors.UnknownBackendError: Unknown backend 'hdf5'. Supported backends are ['h5', 'zarr'].

A format of one's own is one more entry (:func:`register_format`). An entry imports nothing
when it is made: its backend class and policy are loaded by functions on first use, so that
``import ptd`` (and ``ptd --help``) imports neither h5py, zarr nor numpy. Opening the store
behind a location is :mod:`ptd.storage.stores`.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ptd.errors import CorruptStoreError, PtdValueError, StoreNotFoundError, UnknownBackendError
from ptd.format.detect import (
    HEAD_BYTES,
    ROOT_ARRAY_HINT,
    file_has_hdf5_signature,
    has_hdf5_signature,
)
from ptd.format.memmap_dir import decode_key, is_memmap_dir, node_kind, read_meta_json
from ptd.format.names import MEMMAP_SUFFIX, ZARR_JSON, ZARR_V2_GROUP

if TYPE_CHECKING:
    from ptd.storage.api import Backend, FormatPolicy

__all__ = [
    "FormatEntry",
    "counterpart",
    "default_suffix",
    "detect_backend",
    "entries",
    "entry",
    "format_of_suffix",
    "get_backend",
    "known_formats",
    "policy",
    "register_format",
    "registered",
    "store_dir_format",
    "suffixes",
    "unregister_format",
    "writable_formats",
]


def _never(_: Any) -> bool:
    return False


def _same_name(name: str) -> str:
    return name


@dataclass(frozen=True)
class FormatEntry:
    """One format: its names, how its stores are told apart, and where its backend is.

    Only ``name``, ``label``, ``backend`` and ``policy`` are required; a format whose stores
    are directories sets ``local`` (and ``node_dir`` for paths that lead into a store).

    >>> entry("zarr").suffix, entry("memmap").writable, entry("h5").store_phrase
    ('.zarr', False, 'an HDF5 file')
    """

    #: the name ptd knows the format by: ``Backend.name``, ``StoreLocation.format``, ``--to``
    name: str
    #: how messages and reports name it (``"HDF5"``)
    label: str
    #: the function that imports and returns the backend class (called on first use)
    backend: Callable[[], type[Backend]]
    #: the function that returns the format's policy without importing its store library
    policy: Callable[[], FormatPolicy]
    #: path suffixes (lower case) that name the format; the first is a new store's
    suffixes: tuple[str, ...] = ()
    #: whether ptd writes it (``convert``'s destinations, ``from_dict(backend=...)``)
    writable: bool = True
    #: how a message names one of its stores (``"a zarr store"``; default ``"a <name> store"``)
    phrase: str = ""
    #: whether an existing local path (a file or a directory) is one of its stores
    local: Callable[[str], bool] = _never
    #: ``node_dir(path, arrays)``: whether a local directory is a group of one of its stores
    #: (any node, with ``arrays``), for paths that lead into a store; None: a store is no
    #: tree of directories
    node_dir: Callable[[str, bool], bool] | None = None
    #: the key a directory (or, see ``file_key``, a leaf's file) of its stores is named by
    dir_key: Callable[[str], str] = _same_name
    #: the key of a leaf kept in a file of its own inside a group's directory, from the file's
    #: name (None: not a leaf's file, or leaves are not files)
    file_key: Callable[[str], str | None] | None = None
    #: why a local path that is none of its stores still looks like one (a hint), or None
    lookalike: Callable[[str], str | None] | None = None
    #: remote stores: the name of a file inside the prefix that marks one (``zarr.json``),
    #: other names that do for an older version, and a test of a remote file's first bytes
    remote_marker: str | None = None
    remote_dir_markers: tuple[str, ...] = ()
    remote_head: Callable[[bytes], bool] | None = None
    #: the top-level package names of the Python objects that are its stores (``"h5py"``)
    object_modules: tuple[str, ...] = ()
    #: whether a URL whose scheme fsspec does not know is taken as one of its stores
    other_urls: bool = False
    #: the open options (:class:`~ptd.storage.location.OpenOptions` fields) it reads beyond
    #: the shared ones (``fast_path``, ``chunk_cache``, ``storage_options``)
    open_options: frozenset[str] = field(default_factory=frozenset)

    @property
    def suffix(self) -> str:
        """The suffix a new store is given (``""`` when the format has none)."""
        return self.suffixes[0] if self.suffixes else ""

    @property
    def store_phrase(self) -> str:
        return self.phrase or f"a {self.name} store"


# --- the built-in formats ---------------------------------------------------------------------
# (the loaders import downward, into the formats' own subpackages, on first use)


def _h5_backend() -> type[Backend]:
    from ptd.storage.h5.backend import H5Backend

    return H5Backend


def _h5_policy() -> FormatPolicy:
    from ptd.storage.h5.policy import POLICY

    return POLICY


def _zarr_backend() -> type[Backend]:
    from ptd.storage.zarr.backend import ZarrBackend

    return ZarrBackend


def _zarr_policy() -> FormatPolicy:
    from ptd.storage.zarr.policy import POLICY

    return POLICY


def _memmap_backend() -> type[Backend]:
    from ptd.storage.memmap_dir import MemmapDirBackend

    return MemmapDirBackend


def _memmap_policy() -> FormatPolicy:
    from ptd.storage.memmap_dir import MEMMAP_POLICY

    return MEMMAP_POLICY


def _is_h5_file(path: str) -> bool:
    return os.path.isfile(path) and file_has_hdf5_signature(path)


def _zarr_node_dir(path: str, arrays: bool) -> bool:
    markers = (ZARR_JSON, ZARR_V2_GROUP, ".zarray") if arrays else (ZARR_JSON, ZARR_V2_GROUP)
    return any(os.path.isfile(os.path.join(path, m)) for m in markers)


def _is_zarr_store(path: str) -> bool:
    if os.path.isdir(path):
        return _zarr_node_dir(path, False)
    import zipfile

    return zipfile.is_zipfile(path)


def _zarr_lookalike(path: str) -> str | None:
    if os.path.isdir(path) and os.path.exists(os.path.join(path, ".zarray")):
        return f"{path} holds a Zarr v2 array at its root, not a group: {ROOT_ARRAY_HINT}"
    return None


def _memmap_node_dir(path: str, arrays: bool) -> bool:
    if not arrays:
        return is_memmap_dir(path)
    meta = read_meta_json(path)
    return meta is not None and node_kind(meta) is not None


def _memmap_file_key(name: str) -> str | None:
    return decode_key(name[: -len(MEMMAP_SUFFIX)]) if name.endswith(MEMMAP_SUFFIX) else None


_BUILTIN = (
    FormatEntry(
        name="h5",
        label="HDF5",
        backend=_h5_backend,
        policy=_h5_policy,
        suffixes=(".h5", ".hdf5", ".hdf", ".he5"),
        phrase="an HDF5 file",
        local=_is_h5_file,
        remote_head=has_hdf5_signature,
        object_modules=("h5py",),
        open_options=frozenset({"locking", "swmr", "userblock_size", "follow_virtual"}),
    ),
    FormatEntry(
        name="zarr",
        label="Zarr",
        backend=_zarr_backend,
        policy=_zarr_policy,
        suffixes=(".zarr", ".zip"),
        phrase="a zarr store",
        local=_is_zarr_store,
        node_dir=_zarr_node_dir,
        lookalike=_zarr_lookalike,
        remote_marker=ZARR_JSON,
        remote_dir_markers=(ZARR_V2_GROUP,),
        object_modules=("zarr",),
        other_urls=True,
        open_options=frozenset({"use_consolidated"}),
    ),
    FormatEntry(
        name="memmap",
        label="memmap directory",
        backend=_memmap_backend,
        policy=_memmap_policy,
        writable=False,
        phrase="a memmap directory",
        local=lambda path: os.path.isdir(path) and is_memmap_dir(path),
        node_dir=_memmap_node_dir,
        dir_key=decode_key,
        file_key=_memmap_file_key,
    ),
)

#: name -> entry, in registration order (detection asks them in this order)
_TABLE: dict[str, FormatEntry] = {e.name: e for e in _BUILTIN}


# --- the table --------------------------------------------------------------------------------
def register_format(new: FormatEntry) -> FormatEntry:
    """Add a format to the registry (after the built-in ones), and return its entry.

    A name already registered raises PtdValueError; :func:`unregister_format` takes it out
    again, and :func:`registered` does both around a block (for a test).

    >>> e = FormatEntry("mine", "Mine", backend=lambda: get_backend("h5"),
    ...                 policy=lambda: policy("h5"), suffixes=(".mine",))
    >>> with registered(e):
    ...     format_of_suffix("x.mine"), "mine" in writable_formats()
    ('mine', True)
    >>> format_of_suffix("x.mine") is None
    True
    """
    if new.name in _TABLE:
        raise PtdValueError(f"a format named {new.name!r} is registered already")
    taken = {s: e.name for e in _TABLE.values() for s in e.suffixes}
    for s in new.suffixes:
        if s != s.lower() or not s.startswith("."):
            raise PtdValueError(f"format {new.name!r}: suffix {s!r} is not '.' + lower case")
        if s in taken:
            raise PtdValueError(f"format {new.name!r}: suffix {s!r} names {taken[s]} already")
    _TABLE[new.name] = new
    return new


def unregister_format(name: str) -> None:
    """Take a format :func:`register_format` added out of the registry (the built-in ones
    stay)."""
    if name in {e.name for e in _BUILTIN}:
        raise PtdValueError(f"{name!r} is a built-in format: it cannot be unregistered")
    entry(name)
    del _TABLE[name]


@contextmanager
def registered(new: FormatEntry) -> Iterator[FormatEntry]:
    """The format ``new`` registered for the duration of a ``with`` block."""
    register_format(new)
    try:
        yield new
    finally:
        unregister_format(new.name)


def entries() -> tuple[FormatEntry, ...]:
    """Every registered format, the built-in ones first."""
    return tuple(_TABLE.values())


def entry(name: str) -> FormatEntry:
    """The entry of the format ``name``; an unknown one raises UnknownBackendError."""
    try:
        return _TABLE[name]
    except (KeyError, TypeError):
        raise UnknownBackendError(
            f"Unknown backend {name!r}. Supported backends are {list(writable_formats())}."
        ) from None


def writable_formats() -> tuple[str, ...]:
    """The names of the formats ptd writes (``("h5", "zarr")`` and any registered)."""
    return tuple(e.name for e in _TABLE.values() if e.writable)


def known_formats() -> tuple[str, ...]:
    """The names of every format ptd reads (the writable ones and the read-only ones)."""
    return tuple(_TABLE)


def suffixes() -> dict[str, str]:
    """Every suffix that names a format -> that format's name."""
    return {s: e.name for e in _TABLE.values() for s in e.suffixes}


def default_suffix(name: str) -> str:
    """The suffix a new store of the format ``name`` is given (``"h5"`` -> ``".h5"``)."""
    return entry(name).suffix


def counterpart(name: str | None) -> str:
    """The format a conversion of a ``name`` store writes when nothing names one: the first
    writable format that is not ``name`` (h5 -> zarr, zarr -> h5, memmap -> h5)."""
    return next(f for f in writable_formats() if f != name)


def get_backend(name: str) -> type[Backend]:
    """The backend class of the format ``name``, imported on first use."""
    return entry(name).backend()


def policy(name: str) -> FormatPolicy:
    """The :class:`~ptd.storage.api.FormatPolicy` of the format ``name``, without importing its
    store library (``get_backend(name).policy`` is the same object).

    >>> policy("h5").label, policy("zarr").stores_shards
    ('HDF5', True)
    """
    return entry(name).policy()


# --- detection --------------------------------------------------------------------------------
def format_of_suffix(path: str) -> str | None:
    """The format a path's (or URL's) suffix names, or None."""
    stripped = path.rstrip("/\\")
    ext = posixpath.splitext(stripped)[1] if "://" in stripped else os.path.splitext(stripped)[1]
    return suffixes().get(ext.lower())


def store_dir_format(path: str, *, arrays: bool = False) -> str | None:
    """The format of the store (or the group of one) that the local directory ``path`` is,
    by its content, or None. ``arrays``: a node that is not a group counts too."""
    for e in _TABLE.values():
        if e.node_dir is not None and e.node_dir(path, arrays):
            return e.name
    return None


def _neither(path: str) -> str:
    return f"{path} is neither " + " nor ".join(e.store_phrase for e in _TABLE.values())


def _detect_remote(url: str, storage_options: dict[str, Any] | None) -> str:
    """:func:`detect_backend` for a remote URL: a prefix holding an entry's marker file, or a
    file whose first bytes an entry recognises."""
    from ptd.storage import remote as _url

    marked = [e for e in _TABLE.values() if e.remote_marker]
    fs, path, kind = _url.probe(
        url, storage_options, marker=marked[0].remote_marker if marked else None
    )
    if kind == "marker":
        return marked[0].name
    if kind is None:
        _url.check_bucket(fs, path, url)
        raise StoreNotFoundError(f"{url} does not exist")
    try:
        if kind == "dir":
            base = path.rstrip("/")
            for e in _TABLE.values():
                extra = e.remote_dir_markers + ((e.remote_marker,) if e is not marked[0] else ())
                if any(m and fs.exists(f"{base}/{m}") for m in extra):
                    return e.name
            raise CorruptStoreError(f"{url} is a prefix of no format ptd reads ({_neither(url)})")
        head = fs.cat_file(path, start=0, end=HEAD_BYTES)
    except CorruptStoreError:
        raise
    except Exception as err:  # noqa: BLE001 - translated to one line
        raise _url.remote_error(err, url) from None
    for e in _TABLE.values():
        if e.remote_head is not None and e.remote_head(head):
            return e.name
    raise CorruptStoreError(_neither(url))


def detect_backend(target: Any, storage_options: dict[str, Any] | None = None) -> str:
    """The format of an existing ``target``, judged by its content.

    A format's own Python objects (h5py's, zarr's) give that format; a local path the first
    entry whose ``local`` test accepts it; URLs (``s3://...``, with ``storage_options``) are
    told apart the same way, by their content. A missing path raises StoreNotFoundError;
    anything else CorruptStoreError naming it.
    """
    module = (type(target).__module__ or "").split(".")[0]
    for e in _TABLE.values():
        if module in e.object_modules:
            return e.name
    try:
        path = os.fsdecode(os.fspath(target))
    except TypeError:
        raise CorruptStoreError(
            f"cannot tell the format of {target!r}: expected a path, or a store object of "
            + ", ".join(m for e in _TABLE.values() for m in e.object_modules)
        ) from None
    from ptd.storage.remote import is_remote, normalize

    path = normalize(path)  # file:// -> a local path
    if is_remote(path):
        return _detect_remote(path, storage_options)
    if "://" in path:
        for e in _TABLE.values():
            if e.other_urls:
                return e.name
    if not os.path.exists(path):
        raise StoreNotFoundError(f"{path} does not exist")
    try:
        for e in _TABLE.values():
            if e.local(path):
                return e.name
    except OSError as err:
        raise CorruptStoreError(f"cannot read {path}: {err}") from None
    for e in _TABLE.values():
        hint = e.lookalike(path) if e.lookalike is not None else None
        if hint is not None:
            raise CorruptStoreError(hint)
    if os.path.isdir(path):
        raise CorruptStoreError(f"{path} is a directory of no format ptd reads ({_neither(path)})")
    raise CorruptStoreError(_neither(path))
