"""Apply, conversions and key selection, written once on the container primitives.

``apply``/``apply_``/``named_apply`` map a function over the tensor leaves; ``to_tensordict``,
``to_dict`` and ``numpy`` convert; ``flatten_keys``/``unflatten_keys``/``select``/``exclude``
reshape the key tree. Results are new in-memory TensorDicts (made by the
container's ``_new_tensordict``); in-place forms go through the container's leaf strategy
(:meth:`LeafAccess.map_inplace <ptd.ops.leaf_access.LeafAccess.map_inplace>`), which a store
streams in row slabs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import torch

from ptd.errors import BatchSizeError, PtdKeyError
from ptd.ops import locking as locking_ops
from ptd.ops.batch import as_batch_size, fits
from ptd.ops.keys import NestedKey, out_key, unravel_key
from ptd.ops.lastop import last_op
from ptd.ops.nontensor import NonTensorData, NonTensorStack
from ptd.ops.root import is_tensordict

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase

__all__ = ["pick_operand"]

_NO_DEFAULT: Any = object()


# ------------------------------------------------------------------ leaf-wise maps
def _tensor_leaves(td: TensorDictBase) -> Iterator[tuple[tuple[str, ...], torch.Tensor]]:
    for key in td.keys(True, True):
        yield unravel_key(key), td.get(key)


def apply_(td: TensorDictBase, fn: Callable[..., torch.Tensor], *others: Any) -> TensorDictBase:
    """Apply ``fn`` to every tensor leaf and write the result back in place; ``others``
    (tensordicts, dicts, tensors or numbers) give ``fn`` the matching entry."""
    return td._leaves.map_inplace(td, lambda t, o: fn(t, *o), tuple(others))


def apply(
    td: TensorDictBase,
    fn: Callable[..., Any],
    *others: Any,
    batch_size: Sequence[int] | None = None,
    device: Any = _NO_DEFAULT,
    names: Sequence[str | None] | None = _NO_DEFAULT,
    inplace: bool = False,
    default: Any = _NO_DEFAULT,
    filter_empty: bool | None = None,
    propagate_lock: bool = False,
    call_on_nested: bool = False,
    out: TensorDictBase | None = None,
    **constructor_kwargs: Any,
) -> Any:  # a TensorDictBase, or None (filter_empty)
    """A new in-memory TensorDict with ``fn(leaf, *matching entries of others)`` for every
    tensor leaf (tensordict 0.15's rules).

    Leaves for which ``fn`` returns None are left out; non-tensor entries are kept.
    ``filter_empty``: True drops nested results left empty and returns None when nothing
    remains; None (default) does the same except for tensordicts that were empty to begin
    with; False keeps empty results. ``inplace=True`` writes into this tensordict and
    returns it; ``out`` writes into ``out``. ``default``: the value passed for an entry an
    ``other`` lacks (KeyError without it). ``call_on_nested``: ``fn`` gets nested
    tensordicts whole. ``others`` may be tensordicts, dicts (ptd extension), tensors or
    numbers.

    >>> import torch
    >>> from ptd import TensorDict
    >>> td = TensorDict({"a": torch.zeros(2), "n": {"b": torch.ones(2)}}, batch_size=[2])
    >>> td.apply(lambda x: None, filter_empty=True) is None
    True
    >>> td.apply(lambda x, y: x + y, {"a": torch.ones(2), "n": {"b": 1}})["n", "b"]
    tensor([2., 2.])
    """
    return _apply_rec(
        td,
        fn,
        others,
        named=False,
        nested_keys=False,
        prefix=(),
        batch_size=batch_size,
        device=device,
        names=names,
        inplace=inplace,
        default=default,
        filter_empty=filter_empty,
        propagate_lock=propagate_lock,
        call_on_nested=call_on_nested,
        out=out,
    )


def named_apply(
    td: TensorDictBase,
    fn: Callable[..., Any],
    *others: Any,
    nested_keys: bool = False,
    batch_size: Sequence[int] | None = None,
    device: Any = _NO_DEFAULT,
    names: Sequence[str | None] | None = _NO_DEFAULT,
    inplace: bool = False,
    default: Any = _NO_DEFAULT,
    filter_empty: bool | None = None,
    propagate_lock: bool = False,
    call_on_nested: bool = False,
    out: TensorDictBase | None = None,
    **constructor_kwargs: Any,
) -> Any:  # a TensorDictBase, or None (filter_empty)
    """As :meth:`apply`, with ``fn(key, leaf, *others)``: ``key`` is the leaf's own name, or
    its full nested key (a tuple below the top level) with ``nested_keys=True``."""
    return _apply_rec(
        td,
        fn,
        others,
        named=True,
        nested_keys=nested_keys,
        prefix=(),
        batch_size=batch_size,
        device=device,
        names=names,
        inplace=inplace,
        default=default,
        filter_empty=filter_empty,
        propagate_lock=propagate_lock,
        call_on_nested=call_on_nested,
        out=out,
    )


def _apply_rec(
    td: TensorDictBase,
    fn: Callable[..., Any],
    others: tuple[Any, ...],
    *,
    named: bool,
    nested_keys: bool,
    prefix: tuple[str, ...],
    batch_size: Sequence[int] | None,
    device: Any,
    names: Any,
    inplace: bool,
    default: Any,
    filter_empty: bool | None,
    propagate_lock: bool,
    call_on_nested: bool,
    out: TensorDictBase | None,
) -> Any:  # a TensorDictBase, or None (filter_empty)
    if inplace and not named and not call_on_nested and out is None and default is _NO_DEFAULT:
        # the streaming path (file-backed tensordicts write row slabs)
        return td._leaves.map_inplace(td, lambda t, o: fn(t, *o), tuple(others))
    me = td
    was_locked = me.is_locked
    out_bs = td.batch_size if batch_size is None else as_batch_size(batch_size)
    if inplace:
        result: TensorDictBase | None = me
    elif out is not None:
        locking_ops.check_unlocked(
            out,
        )  # tensordict refuses a locked out up front
        result = out
    else:
        if names is _NO_DEFAULT:
            names = td._names if batch_size is None else None
        result = td._new_tensordict(
            {},
            batch_size=out_bs,
            device=td.device if device is _NO_DEFAULT else device,
            names=names,
        )
    any_set = False
    for key in td._keys_str():
        meta = td._meta_str(key)
        value = td._get_str(key)
        subs = [_get_any(o, key, default) for o in others]
        if meta.kind == "nested" and not call_on_nested:
            sub_out = None
            if out is not None and key in out._keys_str():
                sub_out = out._get_str(key)
            new = _apply_rec(
                value,
                fn,
                tuple(subs),
                named=named,
                nested_keys=nested_keys,
                prefix=prefix + (key,),
                batch_size=batch_size,  # a nested tensordict gets it too, as tensordict
                device=device,
                names=_NO_DEFAULT if batch_size is None else None,
                inplace=inplace,
                default=default,
                filter_empty=filter_empty,
                propagate_lock=False,
                call_on_nested=call_on_nested,
                out=sub_out,
            )
        elif meta.kind == "non_tensor":
            new = value
            if batch_size is not None and isinstance(value, NonTensorData):
                new = NonTensorData(value.data, out_bs)
            if inplace:
                any_set = True
                continue
        else:
            if named:
                name: Any = out_key(prefix + (key,)) if nested_keys else key
                new = fn(name, value, *subs)
            else:
                new = fn(value, *subs)
        if new is None:
            continue
        any_set = True
        assert result is not None
        if inplace:
            if new is not value:
                result.set_(key, new)
        elif out is not None:
            if meta.kind == "nested" and new is sub_out:
                continue  # written into out's nested tensordict already
            # tensordict replaces each entry of out (a new dtype or shape is taken); a
            # file-backed out writes into an array of the same shape and dtype instead
            result.set(key, new, inplace=_same_array(result, key, new))
        else:
            shape = new.shape if isinstance(new, torch.Tensor) else None
            if batch_size is not None and shape is not None and not fits(shape, out_bs):
                raise BatchSizeError(
                    f"batch dimension mismatch, got self.batch_size={out_bs} and value.shape="
                    f"{shape} for key {key!r}. The leading dimensions of a value "
                    "must match the batch size."
                )
            result._set_str(key, new, inplace=False)
    if not any_set and (filter_empty or (filter_empty is None and not me.is_empty())):
        return None
    if propagate_lock and was_locked and result is not None and not inplace:
        result.lock_()
    return result


def pin_memory(td: TensorDictBase, *_: Any, **__: Any) -> TensorDictBase:
    """A new TensorDict whose tensors are in pinned (page-locked) memory, so that
    ``.to("cuda", non_blocking=True)`` overlaps the copy; the DataLoader's ``pin_memory=True``
    calls it on each batch. Needs an accelerator build of torch."""
    return cast("TensorDictBase", td.apply(lambda t: t.pin_memory()))


# ------------------------------------------------------------------ conversions
def to_tensordict(td: TensorDictBase, *, retain_none: bool | None = None) -> TensorDictBase:
    """An in-memory :class:`ptd.TensorDict` copy of every entry."""
    out = td._new_tensordict({}, batch_size=td.batch_size, device=td.device, names=td._names)
    for key in td._keys_str():
        value = td._get_str(key)
        if is_tensordict(value):
            value = value.to_tensordict()
        elif isinstance(value, torch.Tensor) and not td._leaves.reads_copy:
            value = value.clone()
        out._set_str(key, value, inplace=False)
    return out


def to_dict(
    td: TensorDictBase, *, retain_none: bool = True, convert_tensors: bool = False
) -> dict[str, Any]:
    """A plain nested dict of tensors (and python values for non-tensor entries)."""
    out: dict[str, Any] = {}
    for key in td._keys_str():
        value = td._get_str(key)
        if is_tensordict(value):
            out[key] = value.to_dict(convert_tensors=convert_tensors)
        elif isinstance(value, NonTensorData):
            out[key] = value.data
        elif isinstance(value, NonTensorStack):
            out[key] = value.tolist()
        else:
            out[key] = value.tolist() if convert_tensors else value
    return out


def numpy(td: TensorDictBase) -> dict[str, Any]:
    """A plain nested dict of numpy arrays (and python values for non-tensor entries)."""

    def conv(d: dict[str, Any]) -> dict[str, Any]:
        return {
            k: conv(v) if isinstance(v, dict) else v.numpy() if isinstance(v, torch.Tensor) else v
            for k, v in d.items()
        }

    return conv(td.to_dict())


@last_op()
def flatten_keys(
    td: TensorDictBase, separator: str = ".", inplace: bool = False, is_leaf: Any = None
) -> TensorDictBase:
    """A copy whose nested keys are joined by ``separator`` (``inplace=True``: this
    tensordict, its nested entries replaced by their flattened leaves, which are appended
    after its own leaves; nested tensordicts left without leaves are dropped).

    >>> import torch, ptd
    >>> td = ptd.TensorDict({"a": {"b": torch.zeros(2)}, "c": torch.ones(2)}, [2])
    >>> td.flatten_keys(inplace=True) is td, list(td.keys())
    (True, ['c', 'a.b'])
    """
    if inplace:
        sub = td
        locking_ops.check_unlocked(
            sub,
        )
        flat = sub.flatten_keys(separator)
        for key in [k for k in sub._keys_str() if is_tensordict(sub._get_str(k))]:
            sub.del_(key)
        for key in flat._keys_str():
            if key not in sub._keys_str():
                sub._set_str(key, flat._get_str(key), inplace=False)
        return sub
    out = td._new_tensordict({}, batch_size=td.batch_size, device=td.device, names=td._names)
    for parts, meta in td._metas(True):
        if meta.kind == "nested":
            continue
        value = td.get(parts)
        out._set_str(separator.join(parts), value, inplace=False)
    return out


@last_op()
def unflatten_keys(
    td: TensorDictBase, separator: str = ".", inplace: bool = False
) -> TensorDictBase:
    """A copy where keys containing ``separator`` become nested keys (``inplace=True``:
    this tensordict, those keys replaced by nested entries appended after the others).

    >>> import torch, ptd
    >>> td = ptd.TensorDict({"a.b": torch.zeros(2), "c": torch.ones(2)}, [2])
    >>> td.unflatten_keys(inplace=True) is td, list(td.keys(True, True))
    (True, ['c', ('a', 'b')])
    """
    if inplace:
        sub = td
        locking_ops.check_unlocked(
            sub,
        )
        moved = [k for k in sub._keys_str() if separator in k]
        values = {k: sub._get_str(k) for k in moved}
        for key in moved:
            sub.del_(key)
        for key, value in values.items():
            if is_tensordict(value):
                value = value.unflatten_keys(separator)
            sub.set(tuple(key.split(separator)), value)
        return sub
    out = td._new_tensordict({}, batch_size=td.batch_size, device=td.device, names=td._names)
    for key in td._keys_str():
        value = td._get_str(key)
        if is_tensordict(value):
            value = value.unflatten_keys(separator)
        out.set(tuple(key.split(separator)), value)
    return out


def select(
    td: TensorDictBase, *keys: NestedKey, inplace: bool = False, strict: bool = True
) -> TensorDictBase:
    """A copy with only ``keys`` (nested keys allowed)."""
    out = td._new_tensordict({}, batch_size=td.batch_size, device=td.device, names=td._names)
    for key in keys:
        parts = unravel_key(key)
        if not td._has(parts):
            if strict:
                raise td._missing(key)
            continue
        node: TensorDictBase = out
        for i, part in enumerate(parts[:-1]):
            if part not in node._keys_str():
                src = td.get(parts[: i + 1])
                node._set_str(
                    part,
                    td._new_tensordict({}, batch_size=src.batch_size, device=td.device),
                    inplace=False,
                )
            node = node._get_str(part)
        value = td.get(parts)
        if is_tensordict(value):
            value = value.to_tensordict()
        node._set_str(parts[-1], value, inplace=False)
    if inplace:
        for key in list(td.keys()):
            if not any(unravel_key(k)[0] == key for k in keys):
                td.del_(key)
        return td
    return out


def exclude(td: TensorDictBase, *keys: NestedKey, inplace: bool = False) -> TensorDictBase:
    """A copy without ``keys``."""
    drop = {unravel_key(k) for k in keys}
    if inplace:
        for parts in drop:
            if td._has(parts):
                td.del_(parts)
        return td
    out = td.to_tensordict()
    for parts in drop:
        if out._has(parts):
            out.del_(parts)
    return out


def pick_operand(other: Any, parts: tuple[str, ...], rows: slice | None) -> Any:
    """The operand matching leaf ``parts``; with ``rows``, cut to those rows of the first batch
    dim (tensordicts, and tensors that carry the batch dims, i.e. have the leaf's ndim).
    A mapping operand gives its entry at ``parts``."""
    if isinstance(other, tuple):
        return tuple(pick_operand(o, parts, rows) for o in other)
    if is_tensordict(other):
        value = other._get_strict(parts)
        return value if rows is None or not other.batch_size else value[rows]
    if isinstance(other, Mapping):
        value = other
        for part in parts:
            value = value[part] if part in value else value[parts]
            if not isinstance(value, Mapping):
                break
        if isinstance(value, torch.Tensor) and rows is not None and value.ndim:
            return value[rows]
        return value
    return other


def _get_any(obj: Any, key: str, default: Any = _NO_DEFAULT) -> Any:
    """The entry ``key`` of a tensordict or mapping operand (``default`` when it lacks it, or
    KeyError); any other operand (tensor, number, None) as it is."""
    if is_tensordict(obj):
        if key in obj._keys_str():
            return obj._get_str(key)
    elif isinstance(obj, Mapping):
        if key in obj:
            return obj[key]
    else:
        return obj
    if default is _NO_DEFAULT:
        raise PtdKeyError(f"key {key!r} not found in an operand of apply (pass default=...)")
    return default


def _same_array(out: Any, key: str, value: Any) -> bool:
    """Whether ``apply(out=...)`` writes ``value`` into ``out``'s entry ``key`` in place: only
    for a file-backed ``out`` whose array has the value's shape and dtype (or whose
    non-tensor entry gets a non-tensor)."""
    if not out._leaves.writes_into_entries or key not in out._keys_str():
        return False
    meta = out._meta_str(key)
    if not isinstance(value, torch.Tensor):
        return bool(meta.kind == "non_tensor")
    return bool(meta.kind == "tensor" and meta.shape == value.shape and meta.dtype == value.dtype)
