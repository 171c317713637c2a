"""The names a Zarr v3 store cannot hold as they are (``ZarrBackend.escaped_name``), and how
the zarr backend stores and moves nodes under their escaped names and lists them by their originals (the rule:
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

from ptd.errors import PtdKeyError
from ptd.format.keynames import escape_name, impossible_name
from ptd.format.names import PTD_NAME_ATTR
from ptd.storage.meta import Path
from ptd.storage.zarr import codec as zarr_codec

__all__ = [
    "ZARR_METADATA_NAMES",
    "check_name",
    "escaped_name",
    "listed_name",
    "node_attrs",
    "plain_path",
    "record_name",
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
