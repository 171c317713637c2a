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

The one policy for storage options: they belong to URLs. Given with a local path they are an
error (:class:`~ptd.errors.PtdValueError`), never silently dropped. A command with two stores
(``convert``, ``memmap``) hands them to whichever store is a URL, and fails the same way when
neither is.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ptd.errors import PtdValueError, StoreNotFoundError
from ptd.format.detect import DEFAULT_SUFFIX, FORMATS, SUFFIXES, format_of_suffix
from ptd.storage import remote

if TYPE_CHECKING:
    from ptd.storage.backends.base import Backend

__all__ = ["StoreLocation", "ReopenSpec", "as_path_str", "split_options"]


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
    #: ``"h5"``/``"zarr"`` once known (given, or detected from the content)
    format: str | None = field(default=None, compare=False)

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
        if format is not None and format not in FORMATS:
            raise PtdValueError(f"unknown format {format!r}; choose one of {', '.join(FORMATS)}")
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
    def suffix_format(self) -> str | None:
        """The format its suffix names (``.h5`` -> ``"h5"``), or None."""
        return format_of_suffix(self.path)

    def __str__(self) -> str:
        return self.path

    # --- the store behind it -----------------------------------------------------------------
    def detect(self) -> StoreLocation:
        """This location with its format read from the content (an existing store), or as
        given. Missing: StoreNotFoundError; neither format: CorruptStoreError."""
        if self.format is not None:
            return self
        from ptd.storage.backends import detect_backend

        if not self.is_remote and not os.path.exists(self.path):
            raise StoreNotFoundError(f"{self.path} does not exist")
        return replace(self, format=detect_backend(self.path, self.options))

    def with_format(self, format: str) -> StoreLocation:
        if format not in FORMATS:
            raise PtdValueError(f"unknown format {format!r}; choose one of {', '.join(FORMATS)}")
        return replace(self, format=format)

    def with_suffix_of(self, format: str) -> StoreLocation:
        """This path with its format suffix swapped for ``format``'s (data.h5 -> data.zarr)."""
        stem = self.path.rstrip("/\\") or self.path
        root, ext = os.path.splitext(stem)
        if ext.lower() not in SUFFIXES:
            root = stem
        return replace(self, path=root + DEFAULT_SUFFIX[format], format=format)

    def open(self, mode: str = "r", **options: Any) -> Backend:
        """Open the store with its backend (the format is detected when unknown).

        ``options`` go to the backend (``fast_path=``, ``locking=``...); storage options come
        from the location."""
        from ptd.storage.backends import get_backend

        loc = self.detect() if self.format is None else self
        assert loc.format is not None
        if loc.storage_options:
            options["storage_options"] = loc.options
        return get_backend(loc.format).open(loc.path, mode, **options)

    def open_stream(self) -> Backend:
        """Open read-only for a streamed whole-store pass (convert, memmap export, ``validate
        --data``): without memory maps, whose mapped pages would count in resident memory and
        gain a streamed copy nothing, nor a chunk cache (each chunk is read once)."""
        return self.open("r", fast_path=False, chunk_cache=0)

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
class ReopenSpec:
    """How to open a backend's store again in another process (a DataLoader worker, an
    unpickled PersistentTensorDict). ``mode`` is never ``"w"``/``"w-"``/``"x"``: reopening must
    not wipe nor refuse what this session wrote."""

    location: StoreLocation
    mode: str = "r"
    #: backend options (``locking``, ``fast_path``), as sorted ``(name, value)`` pairs
    options: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def make(cls, location: StoreLocation, mode: str, **options: Any) -> ReopenSpec:
        kept = {k: v for k, v in options.items() if v is not None}
        return cls(location, mode, tuple(sorted(kept.items())))

    def open(self, mode: str | None = None) -> Backend:
        return self.location.open(self.mode if mode is None else mode, **dict(self.options))

    def with_mode(self, mode: str) -> ReopenSpec:
        return replace(self, mode=mode)

    def streaming(self) -> ReopenSpec:
        """The same store opened for a streamed pass: without memory maps (see
        :meth:`StoreLocation.open_stream`)."""
        opts = dict(self.options, fast_path=False, chunk_cache=0)
        return replace(self, options=tuple(sorted(opts.items())))

    def absolute(self) -> ReopenSpec:
        """A spec whose local path is absolute (for workers that may run elsewhere)."""
        if self.location.is_remote:
            return self
        return replace(
            self, location=replace(self.location, path=os.path.abspath(self.location.path))
        )
