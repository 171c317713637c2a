"""The memmap methods of every tensordict, with tensordict 0.15's signatures (bound as methods of :class:`~ptd.containers.base.TensorDictBase`): ``memmap``, ``memmap_``, ``memmap_like``, ``save`` /
``dumps``, ``load`` / ``load_memmap`` (class methods), ``load_memmap_`` / ``load_``,
``memmap_refresh_``, ``is_memmap`` and ``saved_path``.

The work is done by :mod:`ptd.containers.memmap`, reached through the container's ``_io``
(:class:`ptd.ops.interface.ContainerIO`: this package sits below it); :mod:`ptd.containers.memmap.methods` says what is written and how. On a
PersistentTensorDict, ``memmap``/``save``/``memmap_like`` stream the store leaf by leaf, slab by
slab, and return an in-memory TensorDict mapped from the files (``memmap_`` is refused, as in
tensordict).

Differences from tensordict 0.15.3, on purpose: an existing prefix is replaced as a whole
(written beside it, then renamed: always atomic), and only if it is empty or holds a saved
tensordict; ``load_memmap`` refuses pickled non-tensors unless ``allow_pickle=True``;
an archive is mapped copy-on-write; ``copy_existing``/``share_non_tensor`` are accepted and have
no effect (a leaf is always copied; non-tensors stay in the process); ``robust_key=False``
(legacy file names) is refused for writing.

>>> import os, tempfile, torch
>>> from ptd import TensorDict
>>> with tempfile.TemporaryDirectory() as tmp:
...     td = TensorDict({"a": torch.arange(3.0), "n": {"b": torch.ones(3)}}, batch_size=[3])
...     mm = td.save(os.path.join(tmp, "td"))
...     back = TensorDict.load(os.path.join(tmp, "td"))
...     print(mm.is_memmap(), mm.is_locked, back.is_memmap(), back["n", "b"].sum().item())
True True False 3.0
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ptd.errors import ArgumentError, UnsupportedOperationError

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase


__all__: list[str] = []


def _check_robust_key(robust_key: Any) -> None:
    if robust_key is False:
        raise ArgumentError(
            "robust_key=False (keys used unchanged as file names) is not supported by ptd: "
            "it writes percent-encoded names, which tensordict reads by default"
        )


def memmap(
    td: TensorDictBase,
    prefix: str | os.PathLike[str] | None = None,
    copy_existing: bool = False,
    *,
    num_threads: int = 0,
    return_early: bool = False,
    share_non_tensor: bool = False,
    existsok: bool = True,
    robust_key: bool | None = True,
    archive: bool | None = None,
    compression: str | int | None = None,
    atomic: bool = False,
    overwrite: bool | None = None,
    progress: Any = None,
) -> Any:
    """Write every entry to the memmap directory ``prefix`` (tensordict 0.15's layout; a
    temporary one when None; a zip archive for a ``.tdz`` prefix or ``archive=True``) and
    return a locked TensorDict whose leaves are mapped from the files.

    ``existsok=False`` refuses an existing non-empty prefix (FileExistsError, also a
    RuntimeError as in tensordict); ``num_threads`` > 1 writes the files on threads, and with
    ``return_early`` returns a future (``.result()``). ``overwrite`` is ptd's older name of
    ``existsok``; ``progress`` is called with the bytes of each slab written.
    """
    _check_robust_key(robust_key)
    return td._io.memmap_tensordict(
        td,
        prefix,
        overwrite=existsok if overwrite is None else overwrite,
        progress=progress,
        num_threads=num_threads,
        return_early=return_early,
        archive=archive,
        compression=compression,
    )


def save(
    td: TensorDictBase,
    prefix: str | os.PathLike[str] | None = None,
    copy_existing: bool = False,
    *,
    num_threads: int = 0,
    return_early: bool = False,
    share_non_tensor: bool = False,
    robust_key: bool | None = True,
    archive: bool | None = None,
    compression: str | int | None = None,
    atomic: bool = False,
) -> Any:
    """:meth:`memmap` with ``existsok=True``: save to disk, return the mapped copy. Read it
    back with :meth:`load`."""
    return td.memmap(
        prefix,
        copy_existing,
        num_threads=num_threads,
        return_early=return_early,
        share_non_tensor=share_non_tensor,
        existsok=True,
        robust_key=robust_key,
        archive=archive,
        compression=compression,
        atomic=atomic,
    )


dumps = save


def memmap_(
    td: TensorDictBase,
    prefix: str | os.PathLike[str] | None = None,
    copy_existing: bool = False,
    *,
    num_threads: int = 0,
    return_early: bool = False,
    share_non_tensor: bool = False,
    existsok: bool = True,
    robust_key: bool | None = True,
    atomic: bool = False,
    overwrite: bool | None = None,
) -> Any:
    """Like :meth:`memmap`, but swap this tensordict's own leaves for the mapped ones and
    lock it; returns ``self``. Without ``prefix``, a memory-mapped tensordict is written
    back to its own directory."""
    _check_robust_key(robust_key)
    return td._io.memmap_inplace(
        td,
        prefix,
        overwrite=existsok if overwrite is None else overwrite,
        num_threads=num_threads,
        return_early=return_early,
    )


def memmap_like(
    td: TensorDictBase,
    prefix: str | os.PathLike[str] | None = None,
    copy_existing: bool = False,
    *,
    existsok: bool = True,
    num_threads: int = 0,
    return_early: bool = False,
    share_non_tensor: bool = False,
    robust_key: bool | None = True,
    archive: bool | None = None,
) -> Any:
    """A memory-mapped tensordict with the keys, shapes and dtypes of this one, its tensor
    leaves zero-filled (sparse files: nothing is read; non-tensor entries are copied).
    Locked, as :meth:`memmap`'s result. ptd writes a fresh directory: an existing prefix is
    replaced, its files are not reused."""
    _check_robust_key(robust_key)
    return td._io.memmap_tensordict(
        td,
        prefix,
        overwrite=existsok,
        num_threads=num_threads,
        return_early=return_early,
        like=True,
        archive=archive,
    )


def load_memmap(
    cls: type[TensorDictBase],
    /,
    prefix: str | os.PathLike[str],
    device: Any = None,
    non_blocking: bool = False,
    *,
    out: Any = None,
    robust_key: bool | None = True,
    subpath: Any = None,
    mode: str | None = None,
    num_threads: int = 0,
    allow_pickle: bool | None = False,
) -> Any:
    """Load a memmap directory or ``.tdz`` archive (ptd's or tensordict 0.15's) as a
    :class:`ptd.TensorDict` whose leaves are mapped from the files; see
    :func:`ptd.containers.memmap.methods.load_memmap`. Pickled non-tensors are refused unless
    ``allow_pickle`` is True (trusted data); None refuses too (tensordict 0.15 loads them with a
    FutureWarning)."""
    return cls._io.load_memmap(
        prefix,
        mode=mode,
        allow_pickle=allow_pickle,
        device=device,
        out=out,
        subpath=subpath,
    )


def load(
    cls: type[TensorDictBase], /, prefix: str | os.PathLike[str], *args: Any, **kwargs: Any
) -> Any:
    """:meth:`load_memmap` (read what :meth:`save` wrote)."""
    return cls.load_memmap(prefix, *args, **kwargs)


def load_memmap_(
    td: TensorDictBase,
    prefix: str | os.PathLike[str],
    robust_key: bool | None = True,
    *,
    allow_pickle: bool | None = False,
    mode: str | None = None,
) -> Any:
    """Load a saved tensordict into this one and return it: nested tensordicts are kept,
    leaves replaced (a store writes them into its file), keys the saved data lacks
    removed. A memory-mapped tensordict stays memory-mapped, now to ``prefix``."""
    was = td.is_memmap()
    if was:
        td.unlock_()
    td._io.load_memmap(prefix, mode=mode, allow_pickle=allow_pickle, device=td.device, out=td)
    path = os.path.abspath(os.fspath(prefix))
    if was and mode != "r" and os.path.isdir(path):
        td.lock_()
        mark_memmap(td, path)
    return td


def load_(td: TensorDictBase, prefix: str | os.PathLike[str], *args: Any, **kwargs: Any) -> Any:
    """Deprecated (as in tensordict 0.15): :meth:`load_memmap_`."""
    warnings.warn(
        "TensorDictBase.load_() is deprecated and will be removed in TensorDict 0.17; "
        "use load_memmap_() instead",
        DeprecationWarning,
        stacklevel=2,
    )
    return td.load_memmap_(prefix, *args, **kwargs)


def memmap_refresh_(td: TensorDictBase, *, allow_pickle: bool | None = False) -> Any:
    """Reload a memory-mapped tensordict from its :attr:`saved_path` (after another
    process changed the files) and return it."""
    if not td.is_memmap() or td._memmap_prefix is None:
        raise UnsupportedOperationError(
            "Cannot refresh a TensorDict that is not memory mapped or has no path associated."
        )
    return td.load_memmap_(td._memmap_prefix, allow_pickle=allow_pickle)


def is_memmap(td: TensorDictBase) -> bool:
    """Whether this tensordict is memory-mapped: the result of :meth:`memmap`,
    :meth:`memmap_like` or :meth:`memmap_` (to a directory), while it stays locked.
    :meth:`load_memmap`'s result is not (a new entry would not be mapped)."""
    return bool(td.__dict__.get("_is_memmap")) and bool(td.is_locked)


def saved_path(td: TensorDictBase) -> Path:
    """The directory a memory-mapped tensordict is mapped from (AttributeError otherwise)."""
    path = td._memmap_prefix
    if td.is_memmap() and path is not None:
        return Path(path)
    raise AttributeError(
        f"The tensordict has no saved path (memmap={td.is_memmap()}, path={path})."
    )


def make_memmap(
    td: TensorDictBase,
    key: Any,
    shape: Any,
    *,
    dtype: Any = None,
    robust_key: bool | None = True,
) -> Any:
    """Add an uninitialised leaf of ``shape``/``dtype`` (default dtype: torch's) at ``key``
    of a memory-mapped tensordict, with its file in the tensordict's directory; returns
    it. Missing nested levels are created; an existing key is refused (RuntimeError)."""
    _check_robust_key(robust_key)
    return td._io.make_memmap(td, key, shape=shape, dtype=dtype)


def make_memmap_from_tensor(
    td: TensorDictBase,
    key: Any,
    tensor: Any,
    *,
    copy_data: bool = True,
    existsok: bool = True,
    robust_key: bool | None = True,
) -> Any:
    """Like :meth:`make_memmap`, with the shape and dtype of ``tensor`` and (``copy_data``)
    its values."""
    _check_robust_key(robust_key)
    if not copy_data:
        return td._io.make_memmap(td, key, shape=tensor.shape, dtype=tensor.dtype)
    return td._io.make_memmap(td, key, tensor=tensor)


def make_memmap_from_storage(
    td: TensorDictBase,
    key: Any,
    storage: Any,
    shape: Any,
    *,
    dtype: Any = None,
    robust_key: bool | None = True,
) -> Any:
    """Like :meth:`make_memmap_from_tensor`, from the bytes of an untyped ``storage`` viewed
    as ``dtype`` and ``shape``. ptd copies them into the tensordict's directory (tensordict
    maps the storage's own file when it has one)."""
    _check_robust_key(robust_key)
    return td._io.make_memmap(td, key, shape=shape, dtype=dtype, storage=storage)


def mark_memmap(td: TensorDictBase, path: str | None) -> None:
    td._is_memmap = True
    td._memmap_prefix = path
