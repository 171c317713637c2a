"""Reading and writing the leaves of a PersistentTensorDict (or of a lazy view of one): only the
rows a view selects are read or written (a read is one ``Backend.read`` of the view's
selection: storage's indexer puts unsorted and repeated rows in order), and in-place ops on
large leaves stream row slabs (:mod:`ptd.transfer.slabs`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from ptd.containers.tensordict import assign_nested
from ptd.errors import PtdValueError, UnsupportedOperationError
from ptd.ops import indexing as ix
from ptd.ops.apply import pick_operand
from ptd.ops.dtypes import dtype_from_str, from_storage, to_storage
from ptd.ops.nontensor import NonTensorData, NonTensorStack
from ptd.storage.api import Backend, Path
from ptd.storage.indexer import Joint
from ptd.storage.limits import check_chunks, check_read, nbytes_of, physical_memory

if TYPE_CHECKING:
    from ptd.containers.persistent.persistent_tensordict import PersistentTensorDict

__all__: list[str] = []


def _read_stack_view(
    td: PersistentTensorDict, path: Path, meta: Any, entries: tuple[ix.Entry, ...] | None = None
) -> Any:
    """The rows of a stack that the view selects. The backend reads only those rows
    (a JSON/pickle payload is decoded whole, then cut); the view's order and repeats are
    applied in memory, and its new dims put in."""
    if entries is None:
        entries = td._entries_full()
    if ix.has_new_dims(entries):
        core = td._read_stack_view(path, meta, ix.stored_entries(entries))
        return _stack_new_dims(core, entries)
    foreign = meta.stack_shape is None
    allow = td._store.allow_pickle
    stack_ndim = len(meta.shape if foreign else meta.stack_shape)
    if stack_ndim < len(entries) or any(
        isinstance(e, ix.Points) and len(e.arrays) > 1 for e in entries
    ):
        # a stack shorter than the batch: read it whole and pick (joint index arrays
        # over several dims are refused by _entry_as_index)
        payload = td._backend.read_non_tensor(path, (), allow_pickle=allow, as_stack=foreign)
        full = NonTensorStack.from_list(payload.value, payload.stack_shape)
        index = tuple(_entry_as_index(e) for e in entries)
        return _stack_pick(full, index)
    # variable-length rows have no known size: read a span only when it is dense
    row = _row_nbytes(meta) if meta.dtype.kind not in "OT" else 1 << 18
    plan = ix.plan_read(entries, row)
    payload = td._backend.read_non_tensor(
        path, plan.selection, allow_pickle=allow, as_stack=foreign
    )
    if not payload.is_stack:
        return NonTensorData(payload.value, ())
    stack = NonTensorStack.from_list(payload.value, payload.stack_shape)
    if plan.post is None:
        return stack
    return _stack_pick(
        stack, tuple(slice(None) if p is None else torch.as_tensor(p) for p in plan.post)
    )


def _read_leaf(
    td: PersistentTensorDict,
    path: Path,
    meta: Any,
    entries: tuple[ix.Entry, ...] | None = None,
) -> torch.Tensor:
    if entries is None:
        entries = td._entries
        simple = td._simple_selection()
    else:
        simple = entries if all(isinstance(e, (int, slice)) for e in entries) else None
    if simple is None and ix.has_new_dims(entries):
        # read the stored rows, then put the view's new dims in
        assert entries is not None
        core = td._read_leaf(path, meta, ix.stored_entries(entries))
        return ix.expand_new_dims(core, entries)
    dtype = dtype_from_str(meta.torch_dtype)
    be = td._store.backend
    checked = td._store.tree.memory_checked
    if path not in checked:
        _check_leaf_memory(path, meta, entries, be)
        # a whole-array read that fits says so for every read of this array
        if nbytes_of(meta.shape, meta.dtype.itemsize) <= physical_memory():
            checked[path] = True
    # one read: storage's indexer folds the view's order and repeats into the output
    arr = be.read(path, () if entries is None else simple or _read_selection(entries))
    t = from_storage(arr, meta.attrs, dtype)
    return t if td._device is None else t.to(td._device)


def _read_selection(entries: tuple[ix.Entry, ...]) -> tuple[Any, ...]:
    """Stored entries as the selection ``Backend.read`` takes: ints, slices and index arrays
    as they are (unsorted, repeats kept: storage's indexer puts the rows in order), joint
    arrays as a :class:`~ptd.storage.indexer.Joint`."""
    return tuple(
        (e.arrays[0] if len(e.arrays) == 1 else Joint(e.arrays)) if isinstance(e, ix.Points) else e
        for e in entries
    )


def _simple_selection(td: PersistentTensorDict) -> tuple[Any, ...] | None:
    """The view's entries when they are only ints and slices (cached): a direct read."""
    sel = td.__dict__.get("_simple_sel", False)
    if sel is False:
        entries = td._entries
        sel = (
            entries
            if entries is not None and all(isinstance(e, (int, slice)) for e in entries)
            else None
        )
        td._simple_sel = sel
    return cast("tuple[Any, ...] | None", sel)


def _leaf_view_shape(td: PersistentTensorDict, meta: Any) -> tuple[int, ...]:
    return tuple(td._batch) + tuple(meta.shape[len(td._stored_batch) :])


def _write_leaf(td: PersistentTensorDict, path: Path, meta: Any, value: Any) -> None:
    """Write ``value`` (tensor or number) into the selected rows of an existing leaf."""
    key = "/".join(path)
    dtype = dtype_from_str(meta.torch_dtype)
    if not isinstance(value, torch.Tensor):
        value = torch.as_tensor(value)
    if value.requires_grad:
        value = value.detach()
    target = td._leaf_view_shape(meta)
    try:
        value = torch.broadcast_to(value.to(dtype), target)
    except RuntimeError:
        raise PtdValueError(
            f"cannot write a value of shape {list(value.shape)} into key {key!r} of "
            f"{td._backend.location}: the selection has shape {list(target)}. To replace "
            f"the entry, use set(key, value, inplace=False)."
        ) from None
    entries = td._entries
    if entries is not None and 0 in td._batch:
        return
    if ix.has_new_dims(entries):  # the last copy along each new dim is written
        assert entries is not None
        value = value[ix.drop_index(entries)]
        entries = ix.stored_entries(entries)
    arr, _ = to_storage(value.contiguous(), key)
    be = td._backend
    if entries is None:
        be.write(path, (), arr)
        return
    plan = ix.plan_write(entries, _row_nbytes(meta))
    if not plan.box:
        if plan.take is not None:
            arr = np.take(arr, plan.take[1], axis=plan.take[0])
        be.write(path, plan.selection, arr)
        return
    assert plan.post is not None
    box = be.read(path, plan.selection)
    be.write(path, plan.selection, ix.box_assign(box, plan.post, arr))


def _write_non_tensor_rows(td: PersistentTensorDict, path: Path, meta: Any, value: Any) -> None:
    """Rows of a stack through a view: read the stack, change the rows, write it back."""
    if not td._reads_as_stack(meta):
        return td._create_after_delete(path, value)
    payload = td._backend.read_non_tensor(
        path, (), allow_pickle=td._store.allow_pickle, as_stack=meta.stack_shape is None
    )
    grid = payload.value
    entries = td._entries_full()
    if ix.has_new_dims(entries):
        if isinstance(value, NonTensorStack):
            value = value[ix.drop_index(entries)]
        entries = ix.stored_entries(entries)
    index = tuple(_entry_as_index(e) for e in entries)
    assign_nested(grid, tuple(payload.stack_shape), index, value)
    td._backend.write_non_tensor(
        path, grid, stack_shape=tuple(payload.stack_shape), options=td._store.dataset_kwargs
    )
    td._tree.invalidate(path)


def _check_leaf_memory(
    path: Path, meta: Any, entries: tuple[ix.Entry, ...] | None, be: Backend
) -> None:
    """A damaged store can declare any shape: refuse a read (or a chunk decode) that cannot fit
    in memory before anything is allocated."""
    itemsize = meta.dtype.itemsize
    if meta.chunks:
        check_chunks(meta.chunks, itemsize, f"key {'/'.join(path)!r} of {be.location}")
    if nbytes_of(meta.shape, itemsize) > physical_memory():
        shape = (
            tuple(meta.shape)
            if entries is None
            else (tuple(ix.view_shape(entries)) + tuple(meta.shape[ix.stored_ndim(entries) :]))
        )
        check_read(nbytes_of(shape, itemsize), f"key {'/'.join(path)!r} of {be.location}")


def slab_operand(other: Any, parts: tuple[str, ...], rows: slice | None, leaf_ndim: int) -> Any:
    """The operand of leaf ``parts`` for the slab ``rows``: a tensordict's matching leaf cut to
    the rows, a plain tensor that carries the batch dims (full leaf ndim) cut to the rows, and
    anything else as it is (each cut once: a leaf taken from a tensordict is not cut again)."""
    if isinstance(other, tuple):
        return tuple(slab_operand(o, parts, rows, leaf_ndim) for o in other)
    if rows is not None and isinstance(other, torch.Tensor) and other.ndim == leaf_ndim > 0:
        return other[rows]
    return pick_operand(other, parts, rows)


def _row_nbytes(meta: Any) -> int:
    """Bytes of one index along the first dim of an array (for choosing fancy vs span reads)."""
    n = meta.dtype.itemsize
    for d in meta.shape[1:]:
        n *= d
    return cast("int", max(1, n))


def _entry_as_index(e: ix.Entry) -> Any:
    if isinstance(e, ix.Points):
        if len(e.arrays) != 1:
            raise UnsupportedOperationError(
                "joint index arrays over a non-tensor stack are not supported lazily"
            )
        return torch.as_tensor(e.arrays[0])
    return e


def _stack_new_dims(core: Any, entries: tuple[ix.Entry, ...]) -> Any:
    """A stack read through the stored entries, with the view's new dims put in."""
    if isinstance(core, NonTensorData):  # one stored value: it stands for every row
        return NonTensorData(core.data, ix.view_shape(entries))
    out = core[ix.unsqueeze_index(entries)]
    axis = 0
    for e in entries:
        if isinstance(e, ix.NewDim) and e.size != 1:
            out = out[(slice(None),) * axis + (torch.zeros(e.size, dtype=torch.long),)]
        axis += not isinstance(e, int)
    return out


def _stack_pick(stack: NonTensorStack, index: tuple[Any, ...]) -> Any:
    # orthogonal indexing, one dim at a time (each entry indexes its own dim)
    out: Any = stack
    dim = 0
    for e in index:
        pre = (slice(None),) * dim
        out = out[pre + (e,)]
        if not isinstance(e, int):
            dim += 1
        if isinstance(out, NonTensorData):
            return out
    return out
