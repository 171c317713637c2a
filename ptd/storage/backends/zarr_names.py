"""The names a Zarr v3 store cannot hold as they are (``ZarrBackend.escaped_name``), and how
the zarr backend stores, lists and moves nodes under their escaped names (the rule:
:mod:`ptd.format.keynames`; ``docs/format.md``, "Names a format cannot hold").

Zarr v3 reserves names starting with ``__`` for the format, zarr-python reads a backslash as a
path separator, and a metadata document's name cannot be a node's: those are stored escaped,
the original in the node's ``__ptd_name__`` attribute, which alone makes a listed name the
original.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import zarr

from ptd.errors import CorruptStoreError, PtdKeyError
from ptd.format.keynames import escape_name, impossible_name
from ptd.format.names import PTD_NAME_ATTR
from ptd.storage.backends import zarr_codec
from ptd.storage.backends.meta import ArrayMeta, NodeKind, Path

__all__ = [
    "ZARR_METADATA_NAMES",
    "escaped_name",
    "plain_path",
    "listed_name",
    "node_attrs",
    "check_name",
    "record_name",
    "children",
    "check_member",
    "walk",
]

#: names of zarr's own metadata documents (v3 and v2): no node may be called that
ZARR_METADATA_NAMES = frozenset({"zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"})


def escaped_name(name: str) -> str | None:
    """The escaped name a node called ``name`` is stored under, or None (stored as it is)."""
    if name.startswith("__") or "\\" in name or name in ZARR_METADATA_NAMES:
        return escape_name(name)
    return None


def plain_path(path: Path) -> bool:
    """Whether every name of ``path`` is stored as it is and looks like no escaped name."""
    return all("%" not in p and escaped_name(p) is None for p in path)


def listed_name(stored: str, node: Any) -> str:
    """The name a node stored as ``stored`` has: the original recorded in its
    ``__ptd_name__`` when ``stored`` is that name's escaped form, else ``stored``."""
    if "%" in stored:  # (every escaped name holds a '%')
        original = node.metadata.attributes.get(PTD_NAME_ATTR)
        if isinstance(original, str) and escaped_name(original) == stored:
            return original
    return stored


def node_attrs(path: Path, attributes: Mapping[str, Any], deep: bool) -> dict[str, Any]:
    """A node's attributes as ptd hands them out (bytes restored, the recorded original name
    of an escaped node left out)."""
    out = zarr_codec.attrs_read(attributes, deep=deep)
    if path and escaped_name(path[-1]) is not None:
        out.pop(PTD_NAME_ATTR, None)
    return out


def check_name(be: Any, path: Path) -> None:
    """Refuse (PtdKeyError) a name no store can hold, and an escaped name whose stored form
    another node has taken (a node named like an escaped name, without the record)."""
    name = path[-1]
    problem = impossible_name(name)
    if problem is not None:
        raise PtdKeyError(f"cannot create key {be.key_str(path)!r} in {be.location}: {problem}")
    stored = escaped_name(name) or name
    if "%" not in stored:
        return
    parent = be._get(path[:-1])
    if isinstance(parent, zarr.Group) and be._get(path) is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            taken = stored in parent
        if taken:
            raise PtdKeyError(
                f"cannot create key {be.key_str(path)!r} in {be.location}: it is stored as "
                f"{stored!r}, and another node has that name"
            )


def record_name(be: Any, path: Path) -> None:
    """Make the ``__ptd_name__`` record of the node just moved to ``path`` its new name's
    (set for an escaped name, dropped otherwise)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        node = be._root["/".join(be.stored_path(path))]
        attrs = dict(node.metadata.attributes)
        if escaped_name(path[-1]) is not None:
            attrs[PTD_NAME_ATTR] = path[-1]
        elif attrs.pop(PTD_NAME_ATTR, None) is None:
            return
        node.attrs.put(attrs)


def children(be: Any, path: Path) -> list[tuple[str, NodeKind]]:
    """``ZarrBackend.children``: the group's children in name order, by their names."""
    group = be._group(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        members = sorted(group.members(), key=lambda m: m[0])
    out = []
    for stored, node in members:
        check_member(be, path, stored)
        name = listed_name(stored, node)
        be._cache[path + (name,)] = node
        out.append((name, NodeKind.ARRAY if isinstance(node, zarr.Array) else NodeKind.GROUP))
    return sorted(out, key=lambda m: m[0])


def check_member(be: Any, path: Path, name: str) -> None:
    """A child name listed by the store (its consolidated metadata can say anything) must
    be a valid key: nothing may resolve outside the store or onto another node."""
    for part in name.split("/"):
        if part in ("", ".", "..") or "\x00" in part:
            raise CorruptStoreError(
                f"cannot read the metadata of {be._location}: it lists a child "
                f"{be.key_str(path + (name,))!r}, which is not a valid key (damaged or "
                "hostile metadata)"
            )


def walk(be: Any, path: Path = ()) -> list[tuple[Path, NodeKind, ArrayMeta | None]]:
    """``ZarrBackend.walk``: one ``members(max_depth=None)`` pass, then depth first in name
    order, by the names the nodes stand for."""
    group = be._group(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        members = group.members(max_depth=None)
    kids: dict[Path, list[tuple[str, Any]]] = {}
    listed: list[tuple[Path, Any]] = []
    for name, node in members:
        check_member(be, path, name)
        listed.append((tuple(name.split("/")), node))
    # stored names -> the names they stand for, parents first
    original: dict[Path, Path] = {(): ()}
    for rel, node in sorted(listed, key=lambda m: len(m[0])):
        parent = original.get(rel[:-1])
        if parent is None:
            continue
        orig = parent + (listed_name(rel[-1], node),)
        original[rel] = orig
        kids.setdefault(parent, []).append((orig[-1], node))
        be._cache[path + orig] = node
    out: list[tuple[Path, NodeKind, ArrayMeta | None]] = []

    def visit(rel: Path) -> None:
        for name, node in sorted(kids.get(rel, ()), key=lambda m: m[0]):
            p = path + rel + (name,)
            if isinstance(node, zarr.Array):
                out.append((p, NodeKind.ARRAY, be._meta(p, node)))
            else:
                out.append((p, NodeKind.GROUP, None))
                visit(rel + (name,))

    visit(())
    return out
