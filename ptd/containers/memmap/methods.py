"""What the memmap methods of every tensordict do (``memmap``, ``memmap_``, ``memmap_like``,
``save``, ``load_memmap``, ``load_memmap_``, ``memmap_refresh_``): :mod:`ptd.ops.memmap`
declares them with tensordict 0.15's signatures and reaches these functions through a
container's ``_io`` (:mod:`ptd.containers.io`).

- A directory is written by :mod:`ptd.containers.memmap.writer` (a hidden sibling renamed into place: an
  error leaves the prefix as it was; a store is streamed slab by slab) and the result maps its
  files (``mode="r+"``), locked, ``is_memmap()`` True. Without a prefix the files live in a
  temporary directory removed at once (POSIX keeps the mapped files until unmapped).
- An existing prefix is replaced as a whole with ``existsok=True`` when it is empty or holds a
  saved tensordict (a ``meta.json``); ptd never deletes a directory of other files.
- A ``.tdz`` prefix (or ``archive=True``) writes a zip archive (:mod:`ptd.containers.memmap.archive`); the
  result is mapped copy-on-write from the staged files, not locked, as tensordict's.
- ``num_threads > 1`` writes the leaf files on a thread pool (reads of the source one at a
  time); ``return_early=True`` then returns a :class:`MemmapFuture` at once.

>>> import os, tempfile, torch
>>> from ptd import TensorDict
>>> with tempfile.TemporaryDirectory() as tmp:
...     td = TensorDict({"a": torch.ones(4, 2)}, batch_size=[4])
...     buf = td.memmap_like(os.path.join(tmp, "buf"), num_threads=2)
...     print(buf["a"].sum().item(), buf.is_memmap(), buf.saved_path.name)
0.0 True buf
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import torch

from ptd.containers.base import TensorDictBase
from ptd.containers.memmap.archive import (
    ARCHIVE_SUFFIX,
    check_archive_destination,
    extract_to_temp,
    is_archive,
    pack_dir,
)
from ptd.containers.memmap.loader import encode_key, load_dir, map_leaf
from ptd.containers.memmap.writer import _Leaf, _Node, _source_path, _write
from ptd.errors import (
    NotSupportedError,
    PrefixExistsError,
    PtdTypeError,
    PtdValueError,
    UnsupportedOperationError,
)
from ptd.format.names import MEMMAP_META
from ptd.ops.keys import unravel_key
from ptd.ops.nontensor import NonTensorData
from ptd.storage import runtime
from ptd.storage.paths import StoreRoot
from ptd.storage.publish import remove

if TYPE_CHECKING:
    from ptd.containers.tensordict import TensorDict

__all__ = [
    "MemmapFuture",
    "load_into",
    "load_memmap",
    "memmap_inplace",
    "memmap_tensordict",
]


class MemmapFuture:
    """What ``memmap(..., num_threads=n, return_early=True)`` (n > 1) returns while the files
    are written: :meth:`result` waits and gives the tensordict (or raises the write's error).
    Do not use the source tensordict until then."""

    def __init__(self, future: Future[Any]) -> None:
        self._future = future

    def result(self, timeout: float | None = None) -> Any:
        """Wait for the files (at most ``timeout`` seconds) and return the tensordict."""
        return self._future.result(timeout)

    def done(self) -> bool:
        """Whether the files are written (or the write failed)."""
        return self._future.done()

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the files; errors are raised by :meth:`result`."""
        self._future.exception(timeout)


def _check_threads(num_threads: Any) -> int:
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 0:
        raise PtdValueError(f"num_threads must be an int >= 0, got {num_threads!r}")
    return num_threads


def _early(fn: Callable[[], Any]) -> MemmapFuture:
    return MemmapFuture(runtime.background(fn, "memmap-early"))


def _check_replaceable(path: str, overwrite: bool) -> None:
    """A prefix that exists and is not empty is replaced as a whole with ``existsok=True``:
    only one that holds a saved tensordict, never a directory of other files."""
    if os.path.isdir(path) and not os.path.islink(path):
        if not os.listdir(path):
            return
        if not overwrite:
            raise PrefixExistsError(
                f"{path} already exists and is not empty: pass existsok=True to replace it"
            )
        if not os.path.isfile(os.path.join(path, MEMMAP_META)):
            raise PrefixExistsError(
                f"{path} is a non-empty directory that holds no saved tensordict (no "
                f"{MEMMAP_META}): ptd replaces a memmap prefix as a whole and will not delete "
                "other files; choose an empty or new directory"
            )
    elif os.path.lexists(path):
        raise PrefixExistsError(f"cannot write a memmap directory at {path}: it is a file")


def _source_inside(src: Any, path: str) -> bool:
    source = _source_path(src)
    real = os.path.realpath(path)
    return source is not None and os.path.commonpath([source, real]) == real


def mark_memmap(td: Any, path: str | None) -> None:
    """Record that ``td`` (and each nested TensorDict) is mapped from ``path``."""
    td._is_memmap = True
    td._memmap_prefix = path
    for key, value in td._data.items():
        if isinstance(value, TensorDictBase) and not isinstance(value, NonTensorData):
            mark_memmap(value, None if path is None else os.path.join(path, encode_key(key)))


def memmap_tensordict(
    src: TensorDictBase,
    prefix: Any = None,
    *,
    overwrite: bool = True,
    progress: Callable[[int], Any] | None = None,
    num_threads: int = 0,
    return_early: bool = False,
    like: bool = False,
    archive: bool | None = None,
    compression: str | int | None = None,
) -> TensorDict | MemmapFuture:
    """``src.memmap(prefix)`` / ``memmap_like`` / ``save``: write and return the mapped copy (see
    the module docstring). ``overwrite`` is the methods' ``existsok``."""
    _check_threads(num_threads)
    path = None if prefix is None else os.path.abspath(os.fspath(prefix))
    to_archive = archive if archive is not None else bool(path and path.endswith(ARCHIVE_SUFFIX))
    if to_archive:
        if path is None:
            raise PtdValueError("A path is required to write a memmap archive.")
        if return_early:
            raise NotSupportedError("return_early is not supported when writing a memmap archive.")
        return _to_archive(src, path, overwrite, compression, like, num_threads, progress)
    if compression is not None:
        raise PtdValueError(
            "compression is only supported when writing a memmap archive (pass archive=True "
            "or use a '.tdz' prefix)."
        )
    if return_early and num_threads > 1:
        return _early(
            lambda: memmap_tensordict(
                src,
                path,
                overwrite=overwrite,
                progress=progress,
                num_threads=num_threads,
                like=like,
            )
        )
    if path is not None and not _source_inside(src, path):  # that one is refused by _write
        _check_replaceable(path, overwrite)
    plan, _, root = _write(
        src,
        path,
        overwrite=overwrite,
        progress=progress,
        slab_bytes=None,
        like=like,
        num_threads=num_threads,
    )
    try:
        out = _materialize(plan, root)
    finally:
        if path is None and os.name == "posix":
            remove(root)
    out.lock_()
    mark_memmap(out, path)
    return out


def _to_archive(
    src: TensorDictBase,
    path: str,
    overwrite: bool,
    compression: str | int | None,
    like: bool,
    num_threads: int,
    progress: Callable[[int], Any] | None,
) -> TensorDict:
    """Stage the directory beside ``path``, zip it there, map the result from the staged files
    copy-on-write (so it does not change the archive), then remove the staging directory."""
    check_archive_destination(path, overwrite)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    stage = tempfile.mkdtemp(prefix=".ptd-tdz-stage-", dir=os.path.dirname(path))
    try:
        staged = os.path.join(stage, "td")
        plan, _, root = _write(
            src,
            staged,
            overwrite=False,
            progress=progress,
            slab_bytes=None,
            like=like,
            num_threads=num_threads,
        )
        pack_dir(root, path, compression)
        return _materialize(plan, root, mode="r")
    finally:
        if os.name == "posix":
            remove(stage)


def memmap_inplace(
    td: TensorDict,
    prefix: Any = None,
    *,
    overwrite: bool = True,
    progress: Callable[[int], Any] | None = None,
    num_threads: int = 0,
    return_early: bool = False,
) -> TensorDict | MemmapFuture:
    """``td.memmap_(prefix)``: write the directory (into the tensordict's own one when it is
    memory-mapped and no prefix is given), then swap every leaf of ``td`` (nested ones too)
    for its memory-mapped twin, and lock ``td``."""
    if prefix is None:
        prefix = td.__dict__.get("_memmap_prefix")
    if return_early and _check_threads(num_threads) > 1:
        return _early(
            lambda: memmap_inplace(
                td, prefix, overwrite=overwrite, progress=progress, num_threads=num_threads
            )
        )
    new = memmap_tensordict(
        td, prefix, overwrite=overwrite, progress=progress, num_threads=num_threads
    )
    _adopt(td, new)
    td.lock_()
    mark_memmap(td, new.__dict__.get("_memmap_prefix"))
    return td


def _adopt(dst: Any, src: Any) -> None:
    for key, value in src._data.items():
        old = dst._data.get(key)
        if isinstance(value, TensorDictBase) and type(old) is type(value):
            _adopt(old, value)
        else:
            dst._data[key] = value
    if dst._device is not None and dst._device.type != "cpu":
        dst._device = torch.device("cpu")


def _materialize(plan: _Node, root: str, mode: str = "r+") -> TensorDict:
    from ptd.containers.tensordict import TensorDict

    out = TensorDict({}, batch_size=plan.batch_size, device="cpu", names=plan.names)
    for key, item in plan.entries.items():
        if isinstance(item, _Leaf):
            out._data[key] = map_leaf(
                os.path.join(root, item.rel), item.dtype, item.shape, mode, key, StoreRoot(root)
            )
        elif isinstance(item, _Node):
            out._data[key] = _materialize(item, root, mode)
        elif isinstance(item, NonTensorData):
            out._data[key] = NonTensorData(item.data, plan.batch_size)
        else:
            out._data[key] = item
    return out


# ============================================================================ loading


def _subdir(root: str, subpath: Any) -> str:
    if isinstance(subpath, str):
        parts: tuple[str, ...] = tuple(p for p in subpath.split("/") if p)
    else:
        parts = unravel_key(subpath)
    here = root
    for part in parts:
        robust = os.path.join(here, encode_key(part))
        legacy = os.path.join(here, part)
        if os.path.isfile(os.path.join(robust, MEMMAP_META)):
            here = robust
        elif "/" not in part and os.path.isfile(os.path.join(legacy, MEMMAP_META)):
            here = legacy
        else:
            here = robust
    if not os.path.isfile(os.path.join(here, MEMMAP_META)):
        raise PtdValueError(
            f"No tensordict found under subpath {'/'.join(parts)!r} (missing {MEMMAP_META} in "
            f"{here})."
        )
    return here


def load_memmap(
    prefix: str | os.PathLike[str],
    *,
    mode: str | None = "r+",
    allow_pickle: bool | None = False,
    device: Any = None,
    out: TensorDictBase | None = None,
    subpath: Any = None,
) -> TensorDictBase:
    """Load a memmap directory, or a ``.tdz`` archive, as a :class:`ptd.TensorDict` whose leaves
    are mapped from the files (see :func:`ptd.containers.memmap.loader.load_dir`).

    ``mode`` None maps each file shared when this process may write it, copy-on-write
    otherwise. An archive is extracted to a temporary directory (in bounded blocks) and mapped
    copy-on-write: writes into the result never reach it (``mode="r+"`` is refused).
    ``subpath`` (a nested key or an ``"a/b"`` path) loads one nested tensordict; ``device``
    copies the leaves there; ``out`` receives the entries (see :func:`load_into`).
    """
    path = os.path.abspath(os.fspath(prefix))
    if os.path.isfile(path):
        if not is_archive(path):
            raise PtdValueError(
                f"{path} is a file but not a memory-mapped tensordict archive (expected a zip "
                f"file with a top-level {MEMMAP_META} entry)."
            )
        if mode == "r+":
            raise UnsupportedOperationError(
                f"cannot load the archive {path} with mode='r+': ptd maps an archive "
                "copy-on-write (mode='r'); unpack it to a directory to write into its files"
            )
        root = extract_to_temp(path)
        try:
            td = load_dir(root if subpath is None else _subdir(root, subpath), "r", allow_pickle)
        finally:
            if os.name == "posix":
                remove(root)
    else:
        td = load_dir(path if subpath is None else _subdir(path, subpath), mode, allow_pickle)
    if device is not None and torch.device(device).type != "cpu":
        td = td.to(device)  # type: ignore[assignment]
    if out is not None:
        load_into(out, td)
        return out
    return td


def load_into(dst: TensorDictBase, src: TensorDictBase) -> None:
    """Make ``dst`` hold the entries of ``src``: its nested tensordicts are kept, its leaves
    replaced (a store writes them into its file), its keys that ``src`` lacks removed."""
    if not isinstance(dst, TensorDictBase):
        raise PtdTypeError(f"out must be a tensordict, got a {type(dst).__name__}")
    keep = set(src._keys_str())
    for key in list(dst._keys_str()):
        if key not in keep:
            dst.del_(key)
    if tuple(dst.batch_size) != tuple(src.batch_size):
        dst.batch_size = src.batch_size
    for key in src._keys_str():
        value = src._get_str(key)
        if (
            src._meta_str(key).kind == "nested"
            and key in dst._keys_str()
            and dst._meta_str(key).kind == "nested"
        ):
            load_into(dst._get_str(key), value)
            continue
        if key in dst._keys_str():
            dst.del_(key)
        dst.set(key, value)


def saved_dir(prefix: Any) -> str | None:
    """The directory a load from ``prefix`` maps (None for an archive)."""
    path = os.path.abspath(os.fspath(prefix))
    return None if os.path.isfile(path) else path
