"""``split_keys``: one tensordict per set of keys, and one with what no set took.

As tensordict 0.15: a key set is a list of keys, a dict ``{key: new_key}`` (taken and
renamed) or a callable ``fn(key, value) -> bool`` called on the tensor leaves that earlier sets
left; the last tensordict loses the nested tensordicts left empty unless
``reproduce_struct=True``. With ``inplace=True`` the taken entries are removed from the
tensordict itself, which is returned last (a store stays a store: only the taken entries are
read into memory, the rest is not loaded); otherwise the last one is a new in-memory tensordict.
Nothing is removed when a key is missing or the tensordict is locked.

>>> import torch
>>> from ptd import TensorDict
>>> td = TensorDict(a=torch.zeros(2), b=torch.ones(2), n={"c": torch.zeros(2)}, batch_size=[2])
>>> ab, rest = td.split_keys({"a": "x", ("n", "c"): "c"})
>>> sorted(ab.keys()), sorted(rest.keys())
(['c', 'x'], ['b'])
>>> rest2 = td.split_keys(["b"], inplace=True)[-1]
>>> rest2 is td, sorted(td.keys())
(True, ['a', 'n'])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ptd.errors import PtdKeyError
from ptd.ops import locking as locking_ops
from ptd.ops.keys import out_key, unravel_key
from ptd.ops.root import is_tensordict

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase

__all__ = ["split_keys"]

Parts = tuple[str, ...]


def _under(parts: Parts, taken: Iterable[Parts]) -> bool:
    """Whether ``parts`` or one of its parents was taken already."""
    return any(parts[: len(t)] == t for t in taken)


def _key_map(key_set: Any, src: TensorDictBase, taken: list[Parts]) -> dict[Parts, Parts]:
    """The keys a set takes, each with the key it gets in its output."""
    if callable(key_set) and not isinstance(key_set, Iterable):
        fn: Callable[[Parts, Any], bool] = key_set
        chosen = []
        for key in src.keys(True, True):
            parts = unravel_key(key)
            if _under(parts, taken) or src.leaf_meta(parts).kind != "tensor":
                continue
            if fn(parts, src.get(parts)):
                chosen.append(parts)
        return {p: p for p in chosen}
    if isinstance(key_set, dict):
        return {unravel_key(k): unravel_key(v) for k, v in key_set.items()}
    return {unravel_key(k): unravel_key(k) for k in key_set}


def split_keys(
    td: TensorDictBase,
    key_sets: tuple[Any, ...],
    *,
    inplace: bool,
    default: Any,
    strict: bool,
    reproduce_struct: bool,
) -> tuple[TensorDictBase, ...]:
    """See the module docstring; ``default`` is None when a missing key is skipped."""
    # not in place: a copy of every level (leaves shared; a store is read into memory, as
    # tensordict does)
    copy = td.to_tensordict if td._leaves.reads_copy else lambda: td.apply(lambda t: t)
    src = td if inplace else copy()
    outs: list[TensorDictBase] = []
    taken: list[Parts] = []
    for key_set in key_sets:
        out = td.empty(recurse=reproduce_struct)
        if reproduce_struct:  # the structure only: a non-tensor goes where its key is named
            for parts, meta in list(out._metas(True)):
                if meta.kind == "non_tensor":
                    out.del_(parts)
        for parts, new in _key_map(key_set, src, taken).items():
            if src._has(parts) and not _under(parts, taken):
                value = src.get(parts)
                if inplace and is_tensordict(value) and value._leaves.reads_copy:
                    value = value.to_tensordict()  # it leaves the store
                out.set(new, value)
                taken.append(parts)
            elif strict:
                raise PtdKeyError(
                    f'key "{out_key(parts)}" not found in {type(td).__name__} with keys '
                    f"{sorted(map(str, src.keys()))}"
                )
            elif default is not None:
                out.set(new, default)
        outs.append(out)
    if inplace and taken:
        locking_ops.check_unlocked(
            td,
        )
    for parts in taken:
        src.del_(parts)
    if not reproduce_struct:
        src.filter_empty_()
    return (*outs, src)
