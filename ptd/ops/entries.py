"""Entries and rows: adding, removing and moving entries (``create_nested``, ``clear``,
``popitem``, ``replace``, ``separates``, ``filter_empty_``, ``split_keys``, ``cat_tensors``,
``stack_tensors``), the rows of one entry (``get_at``, ``set_at_``, ``update_at_``) and new
tensordicts shaped like this one (``empty``, ``new_zeros``, ``new_ones``, ``new_full``,
``new_tensor``...), as tensordict 0.15 has them (the ``from_*`` constructors are in
:mod:`ptd.ops.factories`).

Row access goes through the container's own indexing, so on a PersistentTensorDict
``get_at``/``set_at_``/``update_at_`` read or write only the rows asked for, and ``clear``,
``popitem`` and ``create_nested`` change the file.

>>> import torch
>>> from ptd import TensorDict
>>> td = TensorDict({"a": torch.zeros(3, 2)}, batch_size=[3])
>>> td.set_at_("a", torch.ones(2), 1).get_at("a", 1)
tensor([1., 1.])
>>> td.new_zeros(5)["a"].shape
torch.Size([5, 2])
>>> TensorDict.fromkeys(["x", ("y", "z")], 1)["y", "z"]
tensor(1)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from ptd.errors import ArgumentError, PtdKeyError, PtdTypeError
from ptd.ops import joining, keysplit
from ptd.ops import locking as locking_ops
from ptd.ops.batch import infer_batch_size
from ptd.ops.foreign import adopt_non_tensor
from ptd.ops.keys import NestedKey, out_key, unravel_key
from ptd.ops.nontensor import NonTensorData, NonTensorStack
from ptd.ops.root import is_tensordict

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase

__all__: list[str] = []


class _NoDefault:
    def __repr__(self) -> str:
        return "<no default>"


_NO_DEFAULT: Any = _NoDefault()


def _size_arg(size: Sequence[Any]) -> torch.Size:
    if len(size) == 1 and isinstance(size[0], (list, tuple, torch.Size)):
        return torch.Size(size[0])
    return torch.Size([int(s) for s in size])


def _leaf_items(obj: Mapping[Any, Any] | TensorDictBase) -> Iterable[tuple[tuple[str, ...], Any]]:
    """(key parts, value) for every leaf of a nested mapping or tensordict."""
    items = (
        obj.items() if not is_tensordict(obj) else ((k, obj._get_str(k)) for k in obj._keys_str())
    )
    for key, value in items:
        parts = unravel_key(key)
        if isinstance(value, Mapping) or is_tensordict(value):
            for sub, v in _leaf_items(value):
                yield parts + sub, v
        else:
            yield parts, value


def _objects(values: Any, shape: tuple[int, ...]) -> np.ndarray:
    """A nested list of ``shape`` as an object array (its elements kept as they are)."""
    out = np.empty(shape, dtype=object)
    for at in np.ndindex(*shape):
        v = values
        for i in at:
            v = v[i]
        out[at] = v
    return out


def _numpy_index(idx: Any) -> Any:
    """A tensordict index in numpy's terms (tensors as arrays)."""
    if isinstance(idx, torch.Tensor):
        return idx.cpu().numpy()
    if isinstance(idx, tuple):
        return tuple(_numpy_index(i) for i in idx)
    if isinstance(idx, list):
        return np.asarray(idx)
    return idx


def non_tensor_at(
    current: Any, value: NonTensorData | NonTensorStack, idx: Any, key: str
) -> NonTensorStack:
    """The non-tensor entry ``current`` with the rows ``idx`` set to ``value`` (one value for
    every row, or a stack of the selection's shape), as tensordict's ``update_at_`` does: a
    stack of the entry's batch size.

    >>> rows = NonTensorData("a", batch_size=[4])
    >>> non_tensor_at(rows, NonTensorData("b", batch_size=[2]), slice(0, 2), "lab").tolist()
    ['b', 'b', 'a', 'a']
    """
    if not isinstance(current, (NonTensorData, NonTensorStack)):
        raise PtdTypeError(
            f"update_at_ got a non-tensor value for key {key!r}, which holds "
            f"{type(current).__name__}: set it with set_/update_ instead"
        )
    shape = tuple(current.batch_size)
    rows = _objects(current.tolist(), shape)
    try:
        where = np.asarray(np.arange(rows.size).reshape(shape)[_numpy_index(idx)])
    except (IndexError, TypeError, ValueError) as err:
        raise PtdTypeError(
            f"update_at_: index {idx!r} does not apply to key {key!r}: {err}"
        ) from None
    if isinstance(value, NonTensorStack):
        given = _objects(value.tolist(), tuple(value.batch_size))
        try:
            given = np.broadcast_to(given, where.shape)
        except ValueError:
            raise PtdTypeError(
                f"update_at_: a stack of shape {list(value.batch_size)} cannot fill the rows "
                f"{list(where.shape)} of key {key!r}"
            ) from None
        values = given.reshape(-1)
    else:
        values = np.empty(where.size, dtype=object)
        for i in range(where.size):
            values[i] = value.data
    flat = rows.reshape(-1)
    # an entry that reads as bytes (strings of an h5 file) takes new strings as UTF-8 bytes,
    # so the stack keeps one type (h5 stores no mix)
    as_bytes = flat.size > 0 and all(isinstance(v, bytes) for v in flat)
    for pos, v in zip(where.reshape(-1), values, strict=True):
        flat[int(pos)] = v.encode("utf-8") if as_bytes and isinstance(v, str) else v
    return NonTensorStack.from_list(rows.tolist(), shape)


# ------------------------------------------------------------ rows of one entry
def get_at(td: TensorDictBase, key: NestedKey, index: Any, default: Any = None) -> Any:
    """``td.get(key)[index]``; on a file-backed tensordict only those rows are read.
    A missing key returns ``default`` (None, as tensordict 0.15)."""
    sub = td
    parts = unravel_key(key)
    if not sub._has(parts):
        return default
    if sub._leaves.reads_copy:
        try:
            view = sub._index(index)
        except (IndexError, TypeError, ValueError):
            view = None
        if view is not None:
            return view.get(parts)
    return sub.get(parts)[index]


def set_at_(
    td: TensorDictBase, key: NestedKey, value: Any, index: Any, *, non_blocking: bool = False
) -> TensorDictBase:
    """Write ``value`` into the rows ``index`` of the existing entry ``key``."""
    sub = td
    parts = unravel_key(key)
    if not sub._has(parts):
        raise PtdKeyError(
            f'key "{out_key(parts)}" not found in {sub._location()} with keys '
            f"{sorted(map(str, sub.keys()))}"
        )
    if sub._leaves.reads_copy:
        try:
            view = sub._index(index)
        except (IndexError, TypeError, ValueError):
            view = None
        if view is not None:
            meta = view.leaf_meta(parts)
            if meta.kind == "tensor" and not is_tensordict(value):
                # a scalar or a broadcastable value, as tensor[index] = value takes it
                value = torch.as_tensor(value, dtype=meta.dtype).expand(meta.shape)
            view.set_(parts, value)
            return sub
        current = sub.get(parts)
        current[index] = value
        sub.set_(parts, current)
        return sub
    target = sub.get(parts)
    target[index] = value
    return sub


def update_at_(
    td: TensorDictBase,
    input_dict_or_td: Mapping[Any, Any] | TensorDictBase,
    idx: Any,
    clone: bool = False,
    *,
    non_blocking: bool = False,
    keys_to_update: Sequence[NestedKey] | None = None,
) -> TensorDictBase:
    """``set_at_`` for every leaf of the input (KeyError for a key not in the tensordict)."""
    sub = td
    if isinstance(idx, tuple) and not idx:
        return cast("TensorDictBase", sub.update_(input_dict_or_td, clone=clone))
    allowed = None if keys_to_update is None else {unravel_key(k) for k in keys_to_update}
    for parts, value in _leaf_items(input_dict_or_td):
        if allowed is not None and not any(parts[: len(a)] == a for a in allowed):
            continue
        value = adopt_non_tensor(value)
        if isinstance(value, (NonTensorData, NonTensorStack)):
            sub.set_(parts, non_tensor_at(sub.get(parts), value, idx, "/".join(parts)))
            continue
        if not isinstance(value, torch.Tensor):
            raise PtdTypeError(
                f"update_at_ takes tensors (or tensordicts of them), got {type(value).__name__}"
                f" for key {out_key(parts)!r}"
            )
        if clone and isinstance(value, torch.Tensor):
            value = value.clone()
        sub.set_at_(parts, value, idx)
    return sub


def copy_at_(
    td: TensorDictBase,
    tensordict: TensorDictBase,
    idx: Any,
    non_blocking: bool = False,
    *,
    fast: bool = True,
) -> TensorDictBase:
    """Copy ``tensordict`` into the rows ``idx`` (``update_at_`` with every key)."""
    if fast is None:
        raise PtdTypeError("copy_at_(..., fast=None) is not supported: pass True or False")
    return td.update_at_(tensordict, idx)


# ------------------------------------------------------------ entries
def create_nested(td: TensorDictBase, key: NestedKey) -> TensorDictBase:
    """Put an empty nested tensordict (of this batch size) at ``key``, replacing what
    was there."""
    sub = td
    node, last = sub._walk(unravel_key(key), create=True)
    locking_ops.check_unlocked(
        node,
    )
    if last in node._keys_str():
        node._del_str(last)
    node._new_nested(last)
    return sub


def clear(td: TensorDictBase) -> TensorDictBase:
    """Delete every entry (from the file, for a PersistentTensorDict)."""
    sub = td
    for key in list(sub._keys_str()):
        sub.del_(key)
    return sub


def popitem(td: TensorDictBase) -> tuple[NestedKey, Any]:
    """Remove and return the last (key, value) pair."""
    sub = td
    keys = sub._keys_str()
    if not keys:
        raise PtdKeyError(f"popitem(): {type(sub).__name__} is empty")
    return keys[-1], sub.pop(keys[-1])


def split_keys(
    td: TensorDictBase,
    *key_sets: Any,
    inplace: bool = False,
    default: Any = _NO_DEFAULT,
    strict: bool = True,
    reproduce_struct: bool = False,
) -> tuple[TensorDictBase, ...]:
    """One tensordict per key set (a list of keys, a dict ``{key: new_key}`` or a
    ``fn(key, value) -> bool``), and a last one with the keys no set took. ``inplace``
    removes the taken keys from this tensordict and returns it last; ``strict=False``
    skips missing keys (or sets ``default`` for them). See :mod:`ptd.ops.keysplit`."""
    if not strict and default is _NO_DEFAULT:
        default = None
    return keysplit.split_keys(
        td,
        key_sets,
        inplace=inplace,
        default=default,
        strict=strict,
        reproduce_struct=reproduce_struct,
    )


def separates(
    td: TensorDictBase,
    *keys: NestedKey,
    default: Any = _NO_DEFAULT,
    strict: bool = True,
    filter_empty: bool = True,
) -> TensorDictBase:
    """Remove the entries ``keys`` (from the file, for a PersistentTensorDict) and return
    them in a new in-memory tensordict; a missing key raises unless ``default`` is given or
    ``strict=False``."""
    sub = td
    out = sub.empty(recurse=True) if not sub._leaves.reads_copy else sub.to_tensordict().empty(True)
    strict = strict and default is _NO_DEFAULT
    for key in keys:
        parts = unravel_key(key)
        if sub._has(parts):
            out.set(parts, sub.pop(parts))
        elif strict:
            raise PtdKeyError(f"key {out_key(parts)!r} not found in {sub._location()}")
        elif default is not _NO_DEFAULT and default is not None:
            out.set(parts, default)
    out.filter_empty_()
    if filter_empty:
        sub.filter_empty_()
    return out


def filter_empty_(td: TensorDictBase) -> TensorDictBase:
    """Delete the nested tensordicts that hold no leaf (recursively)."""
    node = td
    for key in list(node._keys_str()):
        if node._meta_str(key).kind == "nested":
            sub = node._get_str(key)
            sub.filter_empty_()
            if not sub._keys_str():
                node.del_(key)
    return node


def replace(td: TensorDictBase, *args: Any, **kwargs: Any) -> TensorDictBase:
    """A shallow copy with some entries replaced (``update`` on a copy: nested
    tensordicts merge); ``self`` when there is nothing to replace."""
    sub = td
    if len(args) > 1:
        raise ArgumentError(
            "Only a single argument containing a dictionary-like structure of entries to "
            f"replace can be passed to replace. Received {len(args)} arguments instead."
        )
    entries: dict[Any, Any] = {}
    if args:
        entries.update(
            {k: args[0]._get_str(k) for k in args[0]._keys_str()}
            if is_tensordict(args[0])
            else dict(args[0])
        )
    entries.update(kwargs)
    if not entries:
        return sub
    out = sub.to_tensordict() if sub._leaves.reads_copy else sub.copy()
    for key, value in entries.items():
        parts = unravel_key(key)
        if (
            out._has(parts)
            and out.leaf_meta(parts).kind == "nested"
            and (isinstance(value, Mapping) or is_tensordict(value))
        ):
            out.set(parts, out.get(parts).replace(value))
        else:
            out.set(parts, value)
    return out


def cat_tensors(
    td: TensorDictBase,
    *keys: NestedKey,
    out_key: NestedKey,
    dim: int = 0,
    keep_entries: bool = False,
) -> TensorDictBase:
    """``torch.cat`` of the entries ``keys`` into ``out_key``."""
    return _join_tensors(td, keys, out_key, dim, keep_entries, torch.cat)


def stack_tensors(
    td: TensorDictBase,
    *keys: NestedKey,
    out_key: NestedKey,
    dim: int = 0,
    keep_entries: bool = False,
) -> TensorDictBase:
    """``torch.stack`` of the entries ``keys`` into ``out_key``."""
    return _join_tensors(td, keys, out_key, dim, keep_entries, torch.stack)


def _join_tensors(
    td: TensorDictBase,
    keys: Sequence[NestedKey],
    out_key: NestedKey,
    dim: int,
    keep_entries: bool,
    op: Callable[..., torch.Tensor],
) -> TensorDictBase:
    sub = td
    entries = [sub.get(k) for k in keys]
    result = op(entries, dim=dim)
    if keep_entries:
        return sub.set(out_key, result)
    deleted = 0
    try:
        for key in keys:
            sub.del_(key)
            deleted += 1
        return sub.set(out_key, result)
    except Exception:
        for i in reversed(range(deleted)):  # put back what was deleted, parents first
            sub.set(keys[i], entries[i])
        raise


def auto_batch_size_(
    td: TensorDictBase, batch_dims: int | None = None, keep_compliant_size: bool = False
) -> TensorDictBase:
    """Set the batch size to the longest leading shape every entry shares (nested
    tensordicts first get their own)."""
    node = td
    shapes = []
    for key in node._keys_str():
        meta = node._meta_str(key)
        if meta.kind == "nested":
            sub = node._get_str(key)
            if not (keep_compliant_size and batch_dims is not None and sub.ndim == batch_dims):
                sub.auto_batch_size_(batch_dims)
            shapes.append(sub.batch_size)
        elif meta.kind == "tensor":
            shapes.append(meta.shape)
    # both container classes give batch_size a setter
    node.batch_size = infer_batch_size(shapes, batch_dims)
    return node


# ------------------------------------------------------------ new containers
def empty(
    td: TensorDictBase,
    recurse: bool = False,
    *,
    batch_size: Sequence[int] | None = None,
    device: Any = _NO_DEFAULT,
    names: Sequence[str | None] | None = None,
) -> TensorDictBase:
    """An in-memory tensordict with no tensor leaves; ``recurse`` keeps the nested
    structure (and the non-tensor entries)."""
    node = td
    bs = node.batch_size if batch_size is None else torch.Size(batch_size)
    out = td._new_tensordict(
        {},
        batch_size=bs,
        device=node.device if device is _NO_DEFAULT else device,
        names=names if names is not None or batch_size is not None else node._names,
    )
    if recurse:
        for key in node._keys_str():
            meta = node._meta_str(key)
            if meta.kind == "nested":
                sub = node._get_str(key)
                extra = list(sub.batch_size[node.ndim :])
                out._set_str(key, sub.empty(True, batch_size=list(bs) + extra), inplace=False)
            elif meta.kind == "non_tensor" and batch_size is None:
                out._set_str(key, node._get_str(key), inplace=False)
    return out


def _new_like(
    td: TensorDictBase,
    size: torch.Size,
    make: Callable[..., torch.Tensor],
    dtype: torch.dtype | None,
    device: Any,
    requires_grad: bool,
) -> TensorDictBase:
    sub = td
    nb = sub.ndim
    kwargs: dict[str, Any] = {"requires_grad": requires_grad}
    if device is not _NO_DEFAULT:
        kwargs["device"] = device

    def leaf(t: torch.Tensor) -> torch.Tensor:
        return make(t, tuple(size) + tuple(t.shape[nb:]), dtype=dtype or t.dtype, **kwargs)

    if device is _NO_DEFAULT:
        return cast("TensorDictBase", sub.apply(leaf, batch_size=size))
    return cast("TensorDictBase", sub.apply(leaf, batch_size=size, device=device))


def new_zeros(
    td: TensorDictBase,
    *size: Any,
    dtype: torch.dtype | None = None,
    device: Any = _NO_DEFAULT,
    requires_grad: bool = False,
    layout: torch.layout = torch.strided,
    pin_memory: bool | None = None,
    empty_lazy: bool = False,
) -> TensorDictBase:
    """A new tensordict of batch size ``size`` whose leaves are zeros (dtype and
    feature dims of each leaf kept unless ``dtype``)."""
    return _new_like(
        td, _size_arg(size), lambda t, s, **kw: t.new_zeros(s, **kw), dtype, device, requires_grad
    )


def new_ones(
    td: TensorDictBase,
    *size: Any,
    dtype: torch.dtype | None = None,
    device: Any = _NO_DEFAULT,
    requires_grad: bool = False,
    layout: torch.layout = torch.strided,
    pin_memory: bool | None = None,
    empty_lazy: bool = False,
) -> TensorDictBase:
    return _new_like(
        td, _size_arg(size), lambda t, s, **kw: t.new_ones(s, **kw), dtype, device, requires_grad
    )


def new_empty(
    td: TensorDictBase,
    *size: Any,
    dtype: torch.dtype | None = None,
    device: Any = _NO_DEFAULT,
    requires_grad: bool = False,
    layout: torch.layout = torch.strided,
    pin_memory: bool | None = None,
    empty_lazy: bool = False,
) -> TensorDictBase:
    return _new_like(
        td, _size_arg(size), lambda t, s, **kw: t.new_empty(s, **kw), dtype, device, requires_grad
    )


def new_full(
    td: TensorDictBase,
    size: Sequence[int],
    fill_value: Any,
    *,
    dtype: torch.dtype | None = None,
    device: Any = _NO_DEFAULT,
    requires_grad: bool = False,
    layout: torch.layout = torch.strided,
    pin_memory: bool | None = None,
    empty_lazy: bool = False,
) -> TensorDictBase:
    return _new_like(
        td,
        torch.Size(size),
        lambda t, s, **kw: t.new_full(s, fill_value, **kw),
        dtype,
        device,
        requires_grad,
    )


def new_tensor(
    td: TensorDictBase,
    data: Any,
    *,
    dtype: torch.dtype | None = None,
    device: Any = _NO_DEFAULT,
    requires_grad: bool = False,
    pin_memory: bool | None = None,
) -> TensorDictBase:
    """Each leaf's ``new_tensor(data)`` (leaf by leaf for a tensordict ``data``): a copy of
    ``data`` with the leaf's dtype, unless ``dtype``. Like ``Tensor.new_tensor``, a
    tensor ``data`` warns that ``clone().detach()`` is the recommended way to copy it."""
    sub = td
    if is_tensordict(data):
        shape, data_device = data.batch_size, data.device
    elif isinstance(data, torch.Tensor):
        shape, data_device = data.shape, data.device
    else:
        as_t = torch.as_tensor(data)
        shape, data_device = as_t.shape, as_t.device
    kwargs: dict[str, Any] = {"requires_grad": requires_grad}
    kwargs["device"] = data_device if device is _NO_DEFAULT else device
    if dtype is not None:
        kwargs["dtype"] = dtype
    if is_tensordict(data):
        return cast(
            "TensorDictBase",
            sub.apply(
                lambda x, y: x.new_tensor(y, **kwargs),
                data,
                batch_size=shape,
                device=kwargs["device"],
            ),
        )
    return cast(
        "TensorDictBase",
        sub.apply(
            lambda x: x.new_tensor(data, **kwargs), batch_size=shape, device=kwargs["device"]
        ),
    )


# ------------------------------------------------------------ stack / cat as methods
def maybe_dense_stack(
    input: Sequence[TensorDictBase], dim: int = 0, *, out: Any = None, **kwargs: Any
) -> Any:
    """ptd has no lazy stacks: the same as :meth:`stack`."""
    return joining.stack(input, dim, out=out)
