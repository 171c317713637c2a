"""Files of a directory store opened without leaving it.

A directory store (a local zarr store, a memmap directory) is a tree of files that someone
else may have made. A symbolic link in it can point anywhere: ``c/0 -> /etc/passwd`` would
make a read copy that file into an output, and ``obs.memmap -> ~/.bashrc`` would make a write
rewrite it. :class:`StoreRoot` is the one check: every file ptd opens below a store's root
must resolve inside that root (links whose targets stay inside are followed), and every name
taken from a store's metadata must be a plain relative name (:func:`unsafe_part`).

The check is cheap enough for every chunk: a file is opened with ``O_NOFOLLOW`` (the path is
resolved only when the last component is a link: ``ELOOP``), and each directory holding files
is resolved once and remembered (a store has far fewer directories than chunk files). Nothing
is listed at open.

>>> import os, tempfile
>>> with tempfile.TemporaryDirectory() as d:
...     with open(os.path.join(d, "a"), "wb") as f:
...         _ = f.write(b"x")
...     os.symlink("a", os.path.join(d, "inside"))
...     os.symlink("/etc/hostname", os.path.join(d, "outside"))
...     root = StoreRoot(d)
...     print(root.read(os.path.join(d, "inside")), root.read(os.path.join(d, "nothing")))
...     try:
...         root.read(os.path.join(d, "outside"))
...     except UnsupportedOperationError as err:
...         print("refused")
b'x' None
refused
"""

from __future__ import annotations

import errno
import os
import stat

from ptd.errors import CorruptStoreError, UnsupportedOperationError

__all__ = ["OUTSIDE_HINT", "StoreRoot", "check_member", "member_destination", "unsafe_part"]

#: what a refusal adds: why ptd does not follow the link
OUTSIDE_HINT = "ptd does not follow links out of a store (a store could point them at any file)"

_WINDOWS = os.name == "nt"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_BINARY = getattr(os, "O_BINARY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
#: directories remembered per root before the memory is cleared (a store with more chunk
#: directories than this resolves some of them again: a few lstat calls each)
_MAX_DIRS = 1 << 16


def unsafe_part(part: str) -> str | None:
    """Why one ``/``-separated component of a store-relative name could leave the store or
    name something else than it says (None when it is a plain name): empty, ``.``, ``..``,
    a backslash (a separator on Windows, and in zarr-python's key handling), a NUL byte, or
    (on Windows) a drive (``C:``)."""
    if part in ("", ".", ".."):
        return f"the component {part!r} is not a name"
    if "\\" in part:
        return "it holds a backslash"
    if "\x00" in part:
        return "it holds a NUL byte"
    if _WINDOWS and len(part) >= 2 and part[1] == ":" and part[0].isalpha():
        return "it names a drive"
    return None


def check_member(name: str, where: str) -> list[str]:
    """The components of ``name``, a path relative to a store (an archive member, a key read
    from metadata); CorruptStoreError naming ``name`` and ``where`` when it is absolute or a
    component is not a plain name (:func:`unsafe_part`)."""
    if name.startswith(("/", "\\")):
        raise CorruptStoreError(f"{where}: {name!r} is an absolute path, not a name inside it")
    parts = name.split("/")
    for part in parts:
        why = unsafe_part(part)
        if why is not None:
            raise CorruptStoreError(f"{where}: {name!r} is not a name inside it: {why}")
    return parts


def member_destination(root: str, name: str, where: str, *, is_link: bool = False) -> str:
    """Where the archive member ``name`` is extracted below the fresh directory ``root``
    (its parent directories are created): CorruptStoreError naming ``name`` and ``where``
    for a name that is absolute or not a plain relative path (:func:`check_member`), for a
    symbolic-link member (``is_link``: ptd extracts files only), and for a member whose file
    exists already (a duplicate, or a file where a directory goes). Open the result with
    ``open(dst, "xb")``: it is created, never written through."""
    parts = check_member(name, where)
    if is_link:
        raise CorruptStoreError(f"{where}: the entry {name!r} is a symbolic link, not a file")
    dst = os.path.join(root, *parts)
    parent = os.path.dirname(dst)
    try:
        StoreRoot(root).makedirs(parent)
    except (FileExistsError, NotADirectoryError):
        raise CorruptStoreError(
            f"{where}: the entry {name!r} lies below another entry that is a file"
        ) from None
    if os.path.lexists(dst):
        raise CorruptStoreError(f"{where}: the entry {name!r} is there twice (or is a directory)")
    return dst


class StoreRoot:
    """The directory a store lives in, and the files below it opened without leaving it.

    ``root`` is what the user named (it may itself be a link: the user chose it); what
    lies below it must resolve inside ``realpath(root)``. ``location`` names the store in
    errors. Instances pickle (the remembered directories are plain strings)."""

    def __init__(self, root: str | os.PathLike[str], location: str | None = None) -> None:
        self.root = os.path.abspath(os.fspath(root))
        self.location = location if location is not None else self.root
        self._real = os.path.realpath(self.root)
        self._prefix = self._real.rstrip(os.sep) + os.sep
        #: how a path below the root (as the user named it) starts
        self._below = self.root.rstrip(os.sep) + os.sep
        #: directories known to resolve inside the root
        self._dirs: set[str] = set()

    def __reduce__(self) -> tuple[type[StoreRoot], tuple[str, str]]:
        return StoreRoot, (self.root, self.location)

    # --- checks ------------------------------------------------------------------------------
    def contains(self, real: str) -> bool:
        """Whether the resolved path ``real`` is the root or below it."""
        return real == self._real or real.startswith(self._prefix)

    def relative(self, path: str) -> str:
        """``path`` as the store names it (relative to the root, ``/``-separated)."""
        return os.path.relpath(os.path.abspath(path), self.root).replace(os.sep, "/")

    def _refuse(self, path: str, real: str) -> UnsupportedOperationError:
        return UnsupportedOperationError(
            f"{self.location}: {self.relative(path)!r} is a symbolic link (or lies under one) "
            f"that leads outside the store, to {real}: {OUTSIDE_HINT}"
        )

    def check_dir(self, directory: str) -> None:
        """Refuse ``directory`` (below the root) when it resolves outside the root. Each
        directory found inside is remembered; a new one costs one ``lstat`` when its parent is
        known (its target is resolved only when it is a link). A missing one is fine: it
        would be created inside."""
        if directory in self._dirs or directory == self.root:
            return
        parent, _, name = directory.rpartition(os.sep)
        if not directory.startswith(self._below) or name in ("", ".", "..") or "/.." in parent:
            spelled = os.path.normpath(os.path.abspath(directory))
            if spelled != directory and spelled.startswith(self._below):
                self.check_dir(spelled)  # the same directory, spelled from the root
                return
            real = os.path.realpath(directory)  # (not spelled below the root: resolved whole)
            if not self.contains(real):
                raise self._refuse(directory, real)
            return
        self.check_dir(parent)
        try:
            st = os.lstat(directory)
        except (FileNotFoundError, NotADirectoryError):
            return
        if stat.S_ISLNK(st.st_mode):
            real = os.path.realpath(directory)
            if not self.contains(real):
                raise self._refuse(directory, real)
            if not os.path.isdir(real):
                return
        elif not stat.S_ISDIR(st.st_mode):
            return
        if len(self._dirs) >= _MAX_DIRS:
            self._dirs.clear()
        self._dirs.add(directory)

    def check(self, path: str) -> str:
        """``path`` (a file or directory below the root) when it resolves inside the root;
        UnsupportedOperationError naming it otherwise. One ``lstat`` and a remembered
        directory check; the target of a link is resolved only when it is one."""
        if path == self.root:
            return path  # (the user named it)
        self.check_dir(os.path.dirname(path))
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            return path
        if stat.S_ISLNK(st.st_mode):
            real = os.path.realpath(path)
            if not self.contains(real):
                raise self._refuse(path, real)
        return path

    def stat(self, path: str) -> os.stat_result:
        """``os.stat(path)`` for a file below the root: a link is followed only when it stays
        inside (UnsupportedOperationError otherwise). One ``lstat`` when it is no link."""
        directory = path.rpartition(os.sep)[0]
        if directory not in self._dirs:
            self.check_dir(directory or os.curdir)
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode):
            st = os.stat(self.check(path))
        return st

    def forget(self) -> None:
        """Drop the remembered directories (after the store's directories were moved or
        deleted)."""
        self._dirs.clear()

    # --- opening -----------------------------------------------------------------------------
    def open(self, path: str, flags: int = os.O_RDONLY, mode: int = 0o666) -> int:
        """``os.open(path, flags)`` for a file below the root, refusing a path that resolves
        outside it. The last component is opened with ``O_NOFOLLOW``; only when it is a link
        is its target resolved, checked and opened instead. A read-only open does not block
        on a FIFO, and anything but a regular file is refused (CorruptStoreError).
        FileNotFoundError as ``os.open`` raises it."""
        return self.open_sized(path, flags, mode)[0]

    def open_sized(self, path: str, flags: int = os.O_RDONLY, mode: int = 0o666) -> tuple[int, int]:
        """:meth:`open`, and the size of the file a read-only open found (else -1)."""
        directory = path.rpartition(os.sep)[0]
        if directory not in self._dirs:
            self.check_dir(directory or os.curdir)
        reading = flags & (os.O_WRONLY | os.O_RDWR) == 0
        extra = _NOFOLLOW | _BINARY | _CLOEXEC | (_NONBLOCK if reading else 0)
        try:
            fd = os.open(path, flags | extra, mode)
        except OSError as err:
            if err.errno not in (errno.ELOOP, errno.EMLINK) or not _NOFOLLOW:
                raise
            real = os.path.realpath(path)
            if not self.contains(real):
                raise self._refuse(path, real) from None
            fd = os.open(real, flags | (extra & ~_NOFOLLOW), mode)
        if not _NOFOLLOW:  # no O_NOFOLLOW here: check what was opened by name
            try:
                self.check(path)
            except BaseException:
                os.close(fd)
                raise
        if reading:
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    raise CorruptStoreError(
                        f"{self.location}: {self.relative(path)!r} is not a regular file"
                    )
            except BaseException:
                os.close(fd)
                raise
            return fd, st.st_size
        return fd, -1

    def read(self, path: str, offset: int | None = None, size: int | None = None) -> bytes | None:
        """The bytes of the file ``path`` (or ``size`` of them from ``offset``: fewer when
        the file is shorter), None when it does not exist."""
        try:
            fd, found = self.open_sized(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            if offset is None:
                offset, size = 0, found  # (the open's fstat: one call less)
            assert size is not None
            chunks: list[bytes] = []
            got = 0
            while got < size:
                part = os.pread(fd, size - got, offset + got)
                if not part:
                    break
                chunks.append(part)
                got += len(part)
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)
        finally:
            os.close(fd)

    def makedirs(self, directory: str) -> None:
        """``os.makedirs(directory, exist_ok=True)`` below the root, refused when an existing
        part of it is a link out of the root (nothing is created then)."""
        self.check_dir(directory)
        os.makedirs(directory, exist_ok=True)

    def write(self, path: str, data: bytes | memoryview) -> None:
        """Create or replace the contents of the file ``path`` below the root (its directory
        is created), never through a link out of the root."""
        self.makedirs(os.path.dirname(path))
        fd = self.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            view = memoryview(data).cast("B")
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
