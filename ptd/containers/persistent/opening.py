"""Opening a PersistentTensorDict: ``from_h5``, ``from_zarr`` (batch size given, recorded or
inferred) and ``from_dict`` (write a dict, a TensorDict or another store, streamed); and opening
it again when it is unpickled (in a worker process: the pickle holds how to reopen the store)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path as FsPath
from typing import TYPE_CHECKING, Any

import torch

from ptd.containers.base import TensorDictBase
from ptd.containers.persistent.store import _check_allow_pickle, _Store
from ptd.containers.persistent.write import batch_size_of, check_dtypes, write_all
from ptd.errors import (
    ArgumentError,
    PtdKeyError,
    PtdTypeError,
    PtdValueError,
    UnsupportedOperationError,
)
from ptd.ops.batch import as_batch_size
from ptd.storage.location import OpenOptions
from ptd.storage.registry import get_backend, policy
from ptd.storage.stores import check_follow_virtual, reopen

if TYPE_CHECKING:
    from ptd.containers.persistent.persistent_tensordict import PersistentTensorDict

__all__ = ["backend_options", "check_array_options", "check_target"]


def check_target(filename: Any, group: Any, mode: str, modes: Sequence[str]) -> None:
    """Refuse a constructor call without exactly one of ``filename``/``group``, or a bad mode."""
    if filename is None and group is None:
        raise ArgumentError(
            "Either group or filename must be provided, and not both. Got group=None and filename=None."
        )
    if filename is not None and group is not None:
        raise ArgumentError(
            "Either group or filename must be provided, and not both: got both "
            f"filename={filename!r} and group={group!r}."
        )
    if mode not in modes:
        raise PtdValueError(f"Invalid mode {mode!r}; must be one of {', '.join(modes)}")


def check_array_options(backend: str, names: Iterable[str]) -> None:
    """Refuse the keyword arguments of a constructor (``from_h5(path, bogus=1)``) that are
    neither ptd's options nor creation options of the format's arrays, naming them: an
    option of the store library's own open call that ptd does not pass
    (``h5py.File(driver=...)``), or a name nothing knows."""
    fmt = policy(backend)
    given = sorted(names)
    library = [n for n in given if n in fmt.library_open_options]
    if library:
        raise ArgumentError(
            f"{', '.join(library)}: {'an option' if len(library) == 1 else 'options'} of the "
            f"{fmt.label} library's open call that ptd does not pass; ptd opens {fmt.label} "
            "files with its own settings (see the options of from_h5/from_zarr)"
        )
    if fmt.array_options is None:
        return
    unknown = [n for n in given if n not in fmt.array_options]
    if unknown:
        raise PtdTypeError(
            f"unknown option(s) {', '.join(unknown)}: not an open option of ptd (locking, "
            "fast_path, chunk_cache, storage_options, swmr, follow_virtual...) nor a creation option of "
            f"{fmt.label} arrays ({', '.join(sorted(fmt.array_options))})"
        )


def backend_options(
    backend: str,
    *,
    locking: bool | str | None = None,
    fast_path: bool | None = None,
    storage_options: Mapping[str, Any] | None = None,
    use_consolidated: bool | None = None,
    chunk_cache: int | str | None = None,
    swmr: bool | None = None,
    follow_virtual: bool | None = None,
) -> OpenOptions:
    """The :class:`~ptd.storage.location.OpenOptions` of the options a user set (None: not
    set), the one value that goes from the constructor to ``Backend.open``."""
    fmt = policy(backend)
    if use_consolidated is not None and not fmt.consolidated_metadata:
        raise ArgumentError("use_consolidated= applies to zarr stores only")
    if swmr is not None and not fmt.swmr_reading:
        raise ArgumentError(f"swmr= applies to HDF5 files only, not to {fmt.label} stores")
    check_follow_virtual(backend, follow_virtual)
    return OpenOptions.of(
        swmr=swmr,
        follow_virtual=follow_virtual,
        locking=locking,
        fast_path=fast_path,
        storage_options=storage_options,
        use_consolidated=use_consolidated,
        chunk_cache=chunk_cache,
    )


def from_h5(
    cls: type[PersistentTensorDict],
    /,
    filename: Any,
    *,
    mode: str = "r",
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    batch_size: Sequence[int] | None = None,
    non_tensor_as_stack: bool = False,
    fast_path: bool | None = None,
    chunk_cache: int | str | None = None,
    **kwargs: Any,
) -> PersistentTensorDict:
    """Open an HDF5 file; the batch size is the one given, else the recorded one, else
    the longest leading shape all entries share (``validate_batch_size=False``: a given
    ``batch_size`` is not checked). ``fast_path``, ``chunk_cache``: see the class doc."""
    return cls._open_infer(
        filename,
        "h5",
        mode,
        auto_batch_size,
        batch_dims,
        batch_size,
        non_tensor_as_stack,
        dict(kwargs, fast_path=fast_path, chunk_cache=chunk_cache),
        "from_h5",
    )


def from_zarr(
    cls: type[PersistentTensorDict],
    /,
    filename: Any,
    *,
    mode: str = "r",
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    batch_size: Sequence[int] | None = None,
    non_tensor_as_stack: bool = False,
    allow_pickle: bool | None = None,
    fast_path: bool | None = None,
    chunk_cache: int | str | None = None,
    **kwargs: Any,
) -> PersistentTensorDict:
    """Open a Zarr v3 store (path, ``Store`` or ``zarr.Group``), like :meth:`from_h5`."""
    return cls._open_infer(
        filename,
        "zarr",
        mode,
        auto_batch_size,
        batch_dims,
        batch_size,
        non_tensor_as_stack,
        dict(kwargs, allow_pickle=allow_pickle, fast_path=fast_path, chunk_cache=chunk_cache),
        "from_zarr",
    )


def open_existing(
    cls: type[PersistentTensorDict],
    filename: Any,
    backend: str,
    /,
    *,
    mode: str = "r",
    non_tensor_as_stack: bool = False,
    **kwargs: Any,
) -> PersistentTensorDict:
    """Open an existing store whose format (``backend``) is known, as ``from_h5``/``from_zarr``
    open theirs (the recorded batch size, else the inferred one): for readers that take
    either format (``ptd.data``, the memmap export), so that they need not branch on it."""
    return cls._open_infer(
        filename,
        backend,
        mode,
        False,
        None,
        None,
        non_tensor_as_stack,
        kwargs,
        f"from_{backend}",
    )


def _open_infer(
    cls: type[PersistentTensorDict],
    /,
    filename: Any,
    backend: str,
    mode: str,
    auto_batch_size: bool,
    batch_dims: int | None,
    batch_size: Any,
    non_tensor_as_stack: bool,
    kwargs: dict[str, Any],
    fname: str,
) -> PersistentTensorDict:
    if auto_batch_size and batch_size is not None:
        raise PtdTypeError(
            f"Conflicting batch sizes in {fname}: batch_size and auto_batch_size cannot be both specified."
        )
    if batch_dims is not None and not auto_batch_size:
        warnings.warn(
            f"{fname} ignores batch_dims={batch_dims} without auto_batch_size=True.",
            FutureWarning,
            stacklevel=3,
        )
        batch_dims = None
    # the opener validates (below) unless told not to; the constructor never does here
    validate = bool(kwargs.pop("validate_batch_size", True))
    is_group = not isinstance(filename, (str, os.PathLike)) and _looks_like_group(filename)
    target = {"group": filename} if is_group else {"filename": filename}
    out = cls(
        batch_size=[],
        mode=mode,
        backend=backend,
        validate_batch_size=False,
        non_tensor_as_stack=non_tensor_as_stack,
        **target,
        **kwargs,
    )
    tree = out._tree
    try:
        tree.load_all()
        if batch_size is None:
            inferred = tree.infer((), batch_dims, use_attrs=not auto_batch_size)
            bs = torch.Size(inferred) if inferred is not None else torch.Size([])
        else:
            bs = as_batch_size(batch_size)
        if validate or batch_size is None:
            tree.validate((), bs, out._backend.location)
    except BaseException:
        out.close()
        raise
    out._stored_batch = out._batch = bs
    tree.set_group_batch((), bs)
    out._names = tree.stored_names((), len(bs))
    return out


def from_dict(
    cls: type[PersistentTensorDict],
    /,
    input_dict: Mapping[str, Any] | TensorDictBase,
    filename: Any,
    *,
    auto_batch_size: bool = False,
    batch_size: Sequence[int] | None = None,
    device: Any = None,
    backend: str = "h5",
    batch_dims: int | None = None,
    allow_pickle: bool | None = None,
    **kwargs: Any,
) -> PersistentTensorDict:
    """Write a dict or tensordict (a PersistentTensorDict too: it is streamed slab by slab)
    to a new file or store, and return it open for reading and writing."""
    get_backend(backend)
    if filename is None:
        raise PtdKeyError(f"from_dict(backend={backend!r}) writes a store: pass its filename")
    _check_allow_pickle(allow_pickle)
    if batch_size is not None and batch_dims is not None:
        raise ArgumentError("Cannot pass both batch_size and batch_dims to `from_dict`.")
    bs = batch_size_of(input_dict, batch_size, batch_dims)
    check_dtypes(input_dict)  # before the file is created: no partial file on failure
    if isinstance(filename, FsPath):
        filename = str(filename)
    out = cls(
        batch_size=bs,
        filename=filename,
        mode="w",
        backend=backend,
        device=device,
        validate_batch_size=False,
        allow_pickle=True if allow_pickle is None else allow_pickle,
        **kwargs,
    )
    try:
        write_all(out, input_dict, batch_dims)
        out._backend.finalize()
    except BaseException:
        out.close()
        raise
    out._store.mode = "r+"
    out._store.allow_pickle = allow_pickle if allow_pickle is not None else True
    return out


# ---------------------------------------------------------------- pickling
def getstate(td: PersistentTensorDict) -> dict[str, Any]:
    spec = td._store.backend.reopen_spec if not td._store.backend.closed else None
    if spec is None:
        raise UnsupportedOperationError(
            f"cannot pickle a PersistentTensorDict on {td._store.backend.location}: the store "
            "is closed or cannot be reopened by name (in-memory store or a user's object)"
        )
    return {
        "spec": spec,
        "backend": td.backend,
        "mode": td.mode,
        "path": td._path,
        "stored_batch": list(td._stored_batch),
        "entries": td._entries,
        "device": td._device,
        "dataset_kwargs": td._store.dataset_kwargs,
        "allow_pickle": td._store.allow_pickle,
        "non_tensor_as_stack": td._store.non_tensor_as_stack,
        "filename": td._store.filename,
    }


def setstate(td: PersistentTensorDict, state: dict[str, Any]) -> None:
    be = reopen(state["spec"])
    store = _Store(
        be,
        filename=state["filename"],
        mode=state["mode"],
        backend_name=state["backend"],
        dataset_kwargs=state["dataset_kwargs"],
        allow_pickle=state["allow_pickle"],
        non_tensor_as_stack=state["non_tensor_as_stack"],
    )
    td._init_view(
        store,
        state["path"],
        torch.Size(state["stored_batch"]),
        state["entries"],
        state["device"],
    )
    store.tree.set_group_batch(state["path"], torch.Size(state["stored_batch"]))


def _looks_like_group(obj: Any) -> bool:
    mod = type(obj).__module__
    return mod.startswith("h5py") or (
        mod.startswith("zarr") and type(obj).__name__ in ("Group", "AsyncGroup")
    )
