"""Which leaves of a store a :class:`~ptd.data.StoreDataset` reads, and how many rows they have.

A dataset's rows run along the first dim of the leaves it reads. Files made by other tools
hold more than those leaves: D4RL's ``metadata/`` (scalars, strings, policy weights), LeRobot's
``meta/episodes/*`` (one row per episode), an NWB electrodes table (one row per electrode).
Such a side group makes the whole store's batch size ``[]``, yet it is not part of the rows.
:func:`select_rows` picks the leaves and their row count:

- ``keys`` given: the leaves named (a group names every leaf below it; ``"infos/qpos"`` and
  ``("infos", "qpos")`` are the same leaf); they must share their first dim (or fit
  ``batch_size``), else :class:`~ptd.errors.BatchSizeError` names each key and its length.
- no ``keys``: every leaf when the store's batch size has a dim (recorded or inferred);
  otherwise the *row length* ``N`` is ``batch_size[0]`` if given, else the first dim of the
  leaves that hold the most bytes (the data, not the tables beside it). A leaf that has no
  ``N`` rows (or no dims) is left out when it sits in a *side group*: a group below the store
  with no leaf of ``N`` rows anywhere under it. A leaf of another length *beside* the rows (in a
  group that holds ``N``-row leaves) is refused: that is a broken column, not side data.

>>> import os, tempfile, torch
>>> from ptd import PersistentTensorDict
>>> with tempfile.TemporaryDirectory() as d:
...     td = PersistentTensorDict.from_dict(
...         {"obs": torch.zeros(10, 3), "meta": {"ends": torch.tensor([4, 10])}},
...         os.path.join(d, "x.h5"), batch_size=[])
...     sel = select_rows(td)
...     td.close()
>>> print(td.batch_size, sel.batch_size, sel.keys, sel.side_groups)
torch.Size([]) torch.Size([10]) [('obs',)] [('meta',)]
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from ptd.errors import BatchSizeError, PtdTypeError, PtdValueError
from ptd.format.shapes import fits
from ptd.storage.api import NodeKind

if TYPE_CHECKING:
    from ptd.containers.persistent.persistent_tensordict import PersistentTensorDict
    from ptd.storage.tree import StoreTree

__all__ = ["RowLeaves", "resolve_keys", "select_rows", "where_of"]

Key = tuple[str, ...]


@dataclass(frozen=True)
class RowLeaves:
    """The leaves a dataset reads and the batch size of their rows."""

    #: the leaves read (relative to the store or group), in the store's order
    keys: list[Key]
    #: the batch size the leaves share: ``[N]`` (rows along the first dim), or the one given
    batch_size: torch.Size
    #: leaves not read, with their shape (None: a leaf without a shape that counts, a string)
    left_out: dict[Key, tuple[int, ...] | None] = field(default_factory=dict)
    #: the outermost side groups the left-out leaves sit in
    side_groups: list[Key] = field(default_factory=list)


def _name(key: Key) -> str:
    return "/".join(key)


def where_of(td: PersistentTensorDict) -> str:
    """The store (and group) ``td`` reads, for messages: ``/data/d4rl.hdf5`` or
    ``/data/robo.h5 (group data/demo_0)``."""
    node = td.store_node
    return f"{node.location} (group {_name(node.path)})" if node.path else node.location


def _leaves_below(tree: StoreTree, root: Key, rel: Key) -> list[Key]:
    """Every leaf under the group ``root + rel``, relative to ``root``, in store order."""
    out: list[Key] = []
    for name in tree.children(root + rel):
        sub = rel + (name,)
        if tree.kind(root + sub) is NodeKind.GROUP:
            out.extend(_leaves_below(tree, root, sub))
        else:
            out.append(sub)
    return out


def _as_key(key: Any) -> Key:
    if isinstance(key, str):
        parts = tuple(p for p in key.split("/") if p)
    elif isinstance(key, tuple) and key and all(isinstance(p, str) for p in key):
        parts = tuple(p for k in key for p in k.split("/") if p)
    else:
        raise PtdTypeError(
            f"a key is a str ('infos/qpos') or a tuple of str (('infos', 'qpos')), not {key!r}"
        )
    if not parts:
        raise PtdTypeError(f"empty key {key!r}")
    return parts


def resolve_keys(td: PersistentTensorDict, keys: Iterable[Any]) -> list[Key]:
    """The leaves ``keys`` name in ``td``, in store order: a leaf names itself, a group every
    leaf below it. Raises :class:`~ptd.errors.PtdValueError` naming the keys that are neither."""
    node = td.store_node
    tree, root = node.tree, node.path
    wanted: set[Key] = set()
    missing: list[str] = []
    for k in keys:
        key = _as_key(k)
        kind = tree.kind(root + key)
        if kind is None:
            missing.append(_name(key))
        elif kind is NodeKind.GROUP:
            wanted.update(_leaves_below(tree, root, key))
        else:
            wanted.add(key)
    if missing:
        top = ", ".join(tree.children(root)[:12])
        raise PtdValueError(
            f"keys {missing} are not leaves or groups of {where_of(td)} (its keys: {top})"
        )
    return [k for k in _leaves_below(tree, root, ()) if k in wanted]


def _row_shape(tree: StoreTree, path: Key) -> tuple[int, ...] | None:
    """The shape that holds rows (numeric arrays, ptd's stacks), or None (a string...)."""
    return tree.shape_for_batch(path)


def _nbytes(tree: StoreTree, path: Key, shape: tuple[int, ...]) -> int:
    return math.prod(shape) * max(1, tree.meta(path).dtype.itemsize)


def _lengths(shapes: Mapping[Key, tuple[int, ...] | None]) -> str:
    """``'a' [100], 'b' [99]`` grouped by length: each length with (up to 4 of) its keys."""
    by_len: dict[str, list[str]] = {}
    for key, shape in shapes.items():
        n = "no dims" if not shape else f"{shape[0]} rows"
        by_len.setdefault(n, []).append(repr(_name(key)))
    parts = []
    for n, names in by_len.items():
        more = f" and {len(names) - 4} more" if len(names) > 4 else ""
        parts.append(f"{n}: {', '.join(names[:4])}{more}")
    return "; ".join(parts)


def select_rows(
    td: PersistentTensorDict,
    keys: Iterable[Any] | None = None,
    batch_size: Sequence[int] | None = None,
    validate: bool = True,
) -> RowLeaves:
    """The leaves of ``td`` (a whole store or group) that a dataset reads and their batch size,
    by the rule of the module doc. ``batch_size``: the rows' batch size, given (``[N]`` or more
    dims); ``validate=False``: do not check the leaves against it (asked-for keys are read as
    they are; without keys, the leaves that do not fit it are left out)."""
    node = td.store_node
    tree, root, where = node.tree, node.path, where_of(td)
    given = torch.Size(batch_size) if batch_size is not None else None
    if given is not None and not given:
        raise BatchSizeError(f"StoreDataset over {where}: batch_size=[] gives no rows to read")
    if keys is not None:
        return _select_keys(td, resolve_keys(td, keys), given, validate)
    leaves = _leaves_below(tree, root, ())
    shapes = {k: _row_shape(tree, root + k) for k in leaves}
    store_batch = torch.Size(td.batch_size)
    if given is None and store_batch:
        return RowLeaves(leaves, torch.Size(store_batch[:1]))
    n = given[0] if given is not None else _main_length(tree, root, shapes, where)
    target = given if given is not None else torch.Size([n])
    read: list[Key] = []
    left: dict[Key, tuple[int, ...] | None] = {}
    beside: dict[Key, tuple[int, ...] | None] = {}
    has_rows = {k for k, s in shapes.items() if s and s[0] == n}
    for key in leaves:
        shape = shapes[key]
        if shape is not None and shape and fits(shape, target if validate else target[:1]):
            read.append(key)
        elif _in_side_group(key, has_rows):
            left[key] = shape  # side data
        elif shape is None:
            read.append(key)  # a string beside the rows: read as it is, as tensordict does
        elif not shape or not validate:
            left[key] = shape  # a leaf without dims (no rows), or lenient: left out
        else:
            beside[key] = shape
    side = _side_groups(left, has_rows)
    if validate:
        _refuse_episodes(where, leaves, shapes, has_rows, side)
    if beside:
        rows = {k: shapes[k] for k in read if shapes[k] is not None}
        raise BatchSizeError(
            f"StoreDataset over {where}: the rows are {list(target)} ({_lengths(rows)}), but "
            f"{_lengths(beside)} sit beside them (not in a side group of their own): a column of "
            f"another length. Pass keys=[...] to read the leaves you want (e.g. keys="
            f"{[_name(k) for k in read[:6]]}), or batch_size={list(target)} with "
            f"validate_batch_size=False to leave out whatever does not fit"
        )
    if not any(shapes[k] for k in read):
        raise BatchSizeError(
            f"StoreDataset over {where}: no leaf has {list(target)} leading dims "
            f"({_lengths({k: s for k, s in shapes.items() if s is not None}) or 'no shaped leaf'})"
        )
    return RowLeaves(read, target, left, side)


def _select_keys(
    td: PersistentTensorDict, keys: list[Key], given: torch.Size | None, validate: bool
) -> RowLeaves:
    node = td.store_node
    tree, root, where = node.tree, node.path, where_of(td)
    shapes = {k: _row_shape(tree, root + k) for k in keys}
    shaped = {k: s for k, s in shapes.items() if s is not None}
    if given is not None:
        bad = {k: s for k, s in shaped.items() if not fits(s, given)}
        if bad and validate:
            raise BatchSizeError(
                f"StoreDataset over {where}: batch_size={list(given)} does not fit "
                + ", ".join(f"{_name(k)!r} of shape {list(s)}" for k, s in list(bad.items())[:6])
                + " (pass validate_batch_size=False to read them as they are)"
            )
        return RowLeaves(keys, given)
    if not shaped or not any(shaped.values()):
        raise BatchSizeError(
            f"StoreDataset over {where}: none of the keys {[_name(k) for k in keys[:6]]} has "
            f"rows (a leading dim){': ' + _lengths(shaped) if shaped else ''}"
        )
    firsts = {s[0] if s else None for s in shaped.values()}
    if len(firsts) > 1:
        raise BatchSizeError(
            f"StoreDataset over {where}: the keys asked for do not share their first dim "
            f"({_lengths(shaped)}); ask for leaves of one length"
        )
    (n,) = firsts
    assert n is not None
    return RowLeaves(keys, torch.Size([n]))


def _layout(
    group: Key, leaves: list[Key], shapes: dict[Key, tuple[int, ...] | None]
) -> frozenset[tuple[Key, tuple[int, ...] | None]]:
    """The leaves under ``group`` (relative to it) with their trailing shapes."""
    d = len(group)
    return frozenset(
        (k[d:], None if shapes[k] is None else tuple(shapes[k] or ())[1:])
        for k in leaves
        if k[:d] == group
    )


def _refuse_episodes(
    where: str,
    leaves: list[Key],
    shapes: dict[Key, tuple[int, ...] | None],
    has_rows: set[Key],
    side: list[Key],
) -> None:
    """Refuse an episode file: side groups that have the layout of a sibling group holding
    the rows (``data/demo_1`` beside ``data/demo_0``) are episodes of other lengths, not side
    data; reading one of them and leaving out the others would be a silent surprise."""
    for group in side:
        parent = group[:-1]
        siblings = {k[: len(parent) + 1] for k in has_rows if k[: len(parent)] == parent}
        layout = _layout(group, leaves, shapes)
        alike = sorted(
            g for g in siblings if len(g) > len(parent) and _layout(g, leaves, shapes) == layout
        )
        if not alike or not any(s for (_, s) in layout if s is not None):
            continue
        episodes = sorted(
            {g for g in side if g[:-1] == parent and _layout(g, leaves, shapes) == layout}
            | set(alike)
        )
        lengths = sorted(
            {s[0] for k, s in shapes.items() if s and k[: len(parent) + 1] in episodes}
        )
        names = [_name(g) for g in episodes]
        shown = ", ".join(names[:3]) + (f" ... ({len(names)} groups)" if len(names) > 3 else "")
        raise BatchSizeError(
            f"StoreDataset over {where}: {_name(parent) or 'the store'} holds groups of one "
            f"layout and different lengths ({shown}; {lengths[0]} to {lengths[-1]} rows): "
            f"episodes, not one table of rows. A dataset reads rows of one length: pass "
            f"keys=[{names[0]!r}] for one episode (or the leaves of one length you want)"
        )


def _main_length(
    tree: StoreTree, root: Key, shapes: dict[Key, tuple[int, ...] | None], where: str
) -> int:
    """The first dim of the leaves that hold the most bytes (ties: the longer)."""
    weight: dict[int, int] = {}
    for key, shape in shapes.items():
        if shape:
            weight[shape[0]] = weight.get(shape[0], 0) + _nbytes(tree, root + key, shape)
    if not weight:
        raise BatchSizeError(
            f"StoreDataset over {where}: no leaf has a leading dim to take rows along"
        )
    return max(weight, key=lambda n: (weight[n], n))


def _in_side_group(key: Key, has_rows: set[Key]) -> bool:
    """True when some group above ``key`` (below the store) holds no leaf of the row length."""
    return _side_group_of(key, has_rows) is not None


def _side_group_of(key: Key, has_rows: set[Key]) -> Key | None:
    for depth in range(1, len(key)):
        group = key[:depth]
        if not any(k[:depth] == group for k in has_rows):
            return group
    return None


def _side_groups(left: dict[Key, tuple[int, ...] | None], has_rows: set[Key]) -> list[Key]:
    out: list[Key] = []
    for key in left:
        g = _side_group_of(key, has_rows)
        if g is not None and g not in out:
            out.append(g)
    return out
