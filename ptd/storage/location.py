"""Where a store is: one frozen, picklable value parsed once at the boundary.

A :class:`StoreLocation` is a local path (``file://`` URLs become paths here, once) or a remote
URL (``s3://``, ``gs://``, ``memory://``...) with its storage options, and the store's format
when it is known. Everything below the public API takes one instead of re-normalising strings;
a backend's :class:`ReopenSpec` (how a forked or unpickled worker reopens the store) holds one.

>>> loc = StoreLocation.parse("file:///tmp/data%20set.h5")
>>> loc.path, loc.is_remote, loc.scheme
('/tmp/data set.h5', False, '')
>>> StoreLocation.parse("s3://bucket/x.zarr", {"anon": True}).options
{'anon': True}
>>> StoreLocation.parse("data.h5", {"anon": True})
Traceback (most recent call last):
...
ptd.errors.PtdValueError: storage options {'anon'} only apply to URLs (like 's3://bucket/data.zarr'), not to the local path data.h5

A location may lead *into* a store (``robo.h5/data/demo_0``, h5ls's convention):
:func:`ptd.storage.stores.parse_source` splits such a path into the store (``path``) and the group
or array inside it (``inner``), and :func:`ptd.storage.stores.open_store` opens the store narrowed to that
node (:mod:`ptd.storage.subtree`). Only the readers of whole stores parse their
sources that way (``ptd.info``, ``ptd.validate``, ``ptd.diff``, ``ptd.convert``'s and
``ptd.export_memmap``'s source); :meth:`StoreLocation.parse` takes a path as it is, as h5py and
tensordict do (a PersistentTensorDict is narrowed by indexing it).

The one policy for storage options: they belong to URLs. Given with a local path they are an
error (:class:`~ptd.errors.PtdValueError`), never silently dropped. A command with two stores
(``convert``, ``memmap``) hands them to whichever store is a URL, and fails the same way when
neither is.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ptd.errors import PtdTypeError, PtdValueError
from ptd.storage import remote
from ptd.storage.read.cache import parse_budget

__all__ = ["OpenOptions", "ReopenSpec", "StoreLocation", "as_path_str", "split_options"]


def as_path_str(target: Any) -> str:
    """``target`` (a str or PathLike) as a str; anything else raises PtdValueError."""
    if isinstance(target, str):
        return target
    try:
        return os.fsdecode(os.fspath(target))
    except TypeError:
        raise PtdValueError(f"expected a path or a URL, got {target!r}") from None


@dataclass(frozen=True)
class StoreLocation:
    """A store's path or URL, its storage options and (when known) its format."""

    #: a local path (``file://`` resolved), or a remote URL
    path: str
    #: the storage options as sorted ``(name, value)`` pairs (remote URLs only)
    storage_options: tuple[tuple[str, Any], ...] = ()
    #: ``"h5"``/``"zarr"`` once known (given, or detected from the content; ``"memmap"`` for
    #: a memmap directory, which is read only)
    format: str | None = field(default=None, compare=False)
    #: the key of the group or array inside the store that this location leads to (``("data",
    #: "demo_0")`` for ``robo.h5/data/demo_0``), ``()`` for the whole store
    inner: tuple[str, ...] = ()

    # --- construction ------------------------------------------------------------------------
    @classmethod
    def parse(
        cls,
        target: Any,
        storage_options: Mapping[str, Any] | None = None,
        *,
        format: str | None = None,
    ) -> StoreLocation:
        """Parse a user's path, PathLike or URL (a StoreLocation is returned as it is, with
        ``format`` filled in when given)."""
        if isinstance(target, StoreLocation):
            if storage_options is not None and dict(storage_options) != target.options:
                raise PtdValueError(f"{target.path}: storage options given twice")
            return target if format is None else replace(target, format=format)
        path = remote.normalize(as_path_str(target))
        opts: tuple[tuple[str, Any], ...] = ()
        if storage_options is not None:
            if not remote.is_remote(path):
                raise PtdValueError(
                    f"storage options {set(storage_options)} only apply to URLs (like "
                    f"'s3://bucket/data.zarr'), not to the local path {path}"
                )
            opts = tuple(sorted(dict(storage_options).items()))
        return cls(path, opts, format)

    # --- properties --------------------------------------------------------------------------
    @property
    def options(self) -> dict[str, Any] | None:
        """The storage options as a dict, or None when there are none."""
        return dict(self.storage_options) if self.storage_options else None

    @property
    def is_remote(self) -> bool:
        return remote.is_remote(self.path)

    @property
    def scheme(self) -> str:
        """``"s3"``, ``"memory"``... or ``""`` for a local path."""
        return remote.scheme(self.path)

    @property
    def name(self) -> str:
        """The last path component (``data.h5``)."""
        return self.path.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]

    @property
    def described(self) -> str:
        """The path as given: the store's, then the key inside it (``robo.h5/data/demo_0``).
        It may hold a URL's secrets: show :attr:`display` instead."""
        if not self.inner:
            return self.path
        return self.path.rstrip("/\\") + "/" + "/".join(self.inner)

    @property
    def display(self) -> str:
        """How messages, reports and logs show this location: :attr:`described` with a URL's
        user-info and secret query values hidden (:func:`ptd.storage.remote.display`).

        >>> StoreLocation.parse("http://alice:secret@host/x.zarr").display
        'http://***@host/x.zarr'
        """
        return remote.display(self.described)

    def __str__(self) -> str:
        return self.display

    def __repr__(self) -> str:
        """Like the dataclass's, without secrets: the path as :attr:`display` shows it and the
        storage options' names only (their values may be keys)."""
        options = ", ".join(name for name, _ in self.storage_options)
        return (
            f"StoreLocation(path={remote.display(self.path)!r}, storage_options=[{options}], "
            f"format={self.format!r}, inner={self.inner!r})"
        )

    def with_format(self, format: str) -> StoreLocation:
        """This location with its format known (a name of :mod:`ptd.storage.registry`)."""
        return replace(self, format=format)

    def nbytes(self) -> int | None:
        """Bytes the store occupies (a file, a directory tree, or under a URL), None if
        unknown."""
        if self.is_remote:
            return remote.remote_nbytes(self.path, self.options)
        try:
            if os.path.isfile(self.path):
                return os.path.getsize(self.path)
            total = 0
            todo = [self.path]
            while todo:  # (scandir: one stat per file; a zarr store has one file per chunk)
                with os.scandir(todo.pop()) as entries:
                    for entry in entries:
                        try:
                            if entry.is_dir(follow_symlinks=False):
                                todo.append(entry.path)
                            else:
                                total += entry.stat().st_size
                        except OSError:
                            pass
            return total
        except OSError:
            return None


def split_options(
    storage_options: Mapping[str, Any] | None, *targets: Any
) -> tuple[StoreLocation, ...]:
    """Parse several stores that share one set of storage options (a command's ``-O``): the
    options go to each store that is a URL; when none is, they are an error. A target that is
    already a StoreLocation is kept as it is."""
    parsed = [(t, StoreLocation.parse(t)) for t in targets]
    if storage_options is None:
        return tuple(loc for _, loc in parsed)
    if not any(loc.is_remote for _, loc in parsed):
        shown = ", ".join(loc.path for _, loc in parsed)
        raise PtdValueError(
            f"storage options {set(storage_options)} only apply to URLs (like "
            f"'s3://bucket/data.zarr'), and none of {shown} is one"
        )
    opts = tuple(sorted(dict(storage_options).items()))
    return tuple(
        replace(loc, storage_options=opts)
        if loc.is_remote and not isinstance(target, StoreLocation)
        else loc
        for target, loc in parsed
    )


@dataclass(frozen=True)
class OpenOptions:
    """How a store is opened: one value from the constructor (``PersistentTensorDict(...)``,
    ``from_h5``, ``from_zarr``, ``StoreDataset``'s ``open_kwargs``) through a pickle or a
    worker's reopen (:class:`ReopenSpec`) to ``Backend.open``. A backend reads the fields its
    format has (``locking``, ``swmr`` and ``userblock_size`` are HDF5's, ``use_consolidated`` zarr's)
    and leaves the others (``follow_virtual=True`` is refused by a format without virtual
    data); the storage options of a URL travel with its location.

    >>> o = OpenOptions.of(fast_path=False, chunk_cache="1MiB")
    >>> o.fast_path, o.chunk_cache, o.given()
    (False, 1048576, {'fast_path': False, 'chunk_cache': 1048576})
    >>> OpenOptions.of(fastpath=True)
    Traceback (most recent call last):
    ...
    ptd.errors.PtdTypeError: unknown open option(s) fastpath; the options are locking, fast_path, chunk_cache, use_consolidated, userblock_size, storage_options, swmr, follow_virtual
    """

    #: h5py's file locking (``True``/``False``/``"best-effort"``), None: h5py's default
    locking: bool | str | None = None
    #: memory maps for uncompressed data, None: on unless ``PTD_FAST_PATH`` says off
    fast_path: bool | None = None
    #: the decoded-chunk cache's budget in bytes, None: ``PTD_CHUNK_CACHE`` or 64 MiB
    chunk_cache: int | None = None
    #: zarr: read the consolidated metadata (None: when the store has it)
    use_consolidated: bool | None = None
    #: HDF5: bytes a new file reserves at its start for another program's header
    userblock_size: int = 0
    #: fsspec options of a URL, as sorted ``(name, value)`` pairs
    storage_options: tuple[tuple[str, Any], ...] | None = None
    #: HDF5: open for SWMR reading (a file an SWMR writer appends to), None: when the file
    #: says it is being written that way
    swmr: bool | None = None
    #: HDF5: read virtual datasets whose source files all lie inside the directory of the
    #: file named (:mod:`ptd.storage.h5.elsewhere`); None/False: never read
    follow_virtual: bool | None = None

    @classmethod
    def of(cls, options: OpenOptions | None = None, **changes: Any) -> OpenOptions:
        """``options`` (default: none given) with ``changes`` applied, checked: an unknown
        name raises PtdTypeError naming it, a bad ``chunk_cache`` PtdValueError; a None in
        ``changes`` leaves that field as it is."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise PtdTypeError(
                f"unknown open option(s) {', '.join(unknown)}; the options are "
                f"{', '.join(f.name for f in fields(cls))}"
            )
        given = {k: v for k, v in changes.items() if v is not None}
        if "chunk_cache" in given:
            given["chunk_cache"] = parse_budget(given["chunk_cache"])
        if "fast_path" in given:
            given["fast_path"] = bool(given["fast_path"])
        if "use_consolidated" in given:
            given["use_consolidated"] = bool(given["use_consolidated"])
        if "swmr" in given:
            given["swmr"] = bool(given["swmr"])
        if "follow_virtual" in given:
            given["follow_virtual"] = bool(given["follow_virtual"])
        if "storage_options" in given:
            given["storage_options"] = tuple(sorted(dict(given["storage_options"]).items()))
        return replace(options or cls(), **given)

    def given(self) -> dict[str, Any]:
        """The options set (not at their defaults), the storage options as a dict."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value != f.default:
                out[f.name] = dict(value) if f.name == "storage_options" else value
        return out

    @property
    def storage(self) -> dict[str, Any] | None:
        """The storage options as a dict, or None."""
        return None if self.storage_options is None else dict(self.storage_options)


@dataclass(frozen=True)
class ReopenSpec:
    """How to open a backend's store again in another process (a DataLoader worker, an
    unpickled PersistentTensorDict). ``mode`` is never ``"w"``/``"w-"``/``"x"``: reopening must
    not wipe nor refuse what this session wrote."""

    location: StoreLocation
    mode: str = "r"
    #: how it is opened (the location carries a URL's storage options)
    options: OpenOptions = field(default_factory=OpenOptions)

    @classmethod
    def make(
        cls, location: StoreLocation, mode: str, options: OpenOptions | None = None, **changes: Any
    ) -> ReopenSpec:
        return cls(location, mode, OpenOptions.of(options, **changes))

    def with_mode(self, mode: str) -> ReopenSpec:
        return replace(self, mode=mode)

    def streaming(self) -> ReopenSpec:
        """The same store opened for a streamed pass: without memory maps (see
        :func:`ptd.storage.stores.open_stream`)."""
        return replace(self, options=replace(self.options, fast_path=False, chunk_cache=0))

    def absolute(self) -> ReopenSpec:
        """A spec whose local path is absolute (for workers that may run elsewhere)."""
        if self.location.is_remote:
            return self
        return replace(
            self, location=replace(self.location, path=os.path.abspath(self.location.path))
        )
