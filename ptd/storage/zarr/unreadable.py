"""Zarr nodes whose metadata zarr-python cannot parse, listed instead of failing the store.

zarr-python parses a group's children together (``Group.members``): one child whose metadata
it cannot read (a Zarr v2 ``|S7`` array with ``"fill_value": 0``, a ``data_type`` or codec it
does not know, malformed JSON, a missing field) makes the whole listing fail. The zarr backend
then lists that group child by child (:func:`child_names`): each child that zarr opens is a
node as usual, and each one whose metadata document exists but does not parse becomes an
:class:`UnreadableNode`, described as an unsupported leaf (:meth:`UnreadableNode.meta`)
naming zarr's reason. The store opens and every other key reads; reading that key raises an
error naming it.

Whether a name is a node at all is decided by its metadata document (``zarr.json`` for v3,
``.zarray``/``.zgroup`` for v2), read as plain bytes: zarr's own ``KeyError`` cannot tell a
missing node from a document that lacks a required field.
"""

from __future__ import annotations

import json
import logging
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import zarr

from ptd.errors import CorruptStoreError, UnsupportedDtypeError
from ptd.format.names import ZARR_JSON, ZARR_V2_GROUP
from ptd.storage.meta import ArrayMeta, NodeKind, Path, ValueKind
from ptd.storage.zarr.private import default_buffer_prototype, sync

__all__ = [
    "UnreadableNode",
    "child_names",
    "find_unreadable",
    "kind_of",
    "listed_members",
    "quiet_failed_listing",
    "unreadable_or_missing",
]

#: the documents that make a name a node, in the order they are looked for
_NODE_DOCS = (ZARR_JSON, ".zarray", ZARR_V2_GROUP)
#: names in a group's listing that are metadata documents, not children
_NOT_CHILDREN = frozenset({ZARR_JSON, ".zarray", ZARR_V2_GROUP, ".zattrs", ".zmetadata"})


#: the dtype of a node whose document names none numpy understands
_NO_DTYPE = np.dtype("V0")


@dataclass(frozen=True)
class UnreadableNode:
    """A node whose metadata document exists but zarr cannot parse."""

    path: Path
    #: zarr's error, e.g. ``"TypeError: Invalid type: 0. Expected a base64-encoded string."``
    error: str
    #: the document that failed (``"zarr.json"``, ``".zarray"``, ``".zgroup"``)
    document: str
    #: the shape the document states, when it states one that reads as a shape, else ``()``
    shape: tuple[int, ...] = ()
    #: the stored dtype the document states, when numpy understands it, else ``V0``
    dtype: np.dtype = _NO_DTYPE
    #: the document says the node is a group (its children are not listed)
    group: bool = False

    @property
    def reason(self) -> str:
        """What the node holds, for listings and messages (``meta.unsupported``)."""
        what = "group metadata" if self.group else "metadata"
        return f"{what} that zarr {zarr.__version__} cannot read ({self.document}: {self.error})"

    def error_for(self, key: str, location: str) -> UnsupportedDtypeError:
        """The error of a read (or a listing) of this node as key ``key`` of ``location``."""
        return UnsupportedDtypeError(
            f"cannot read key {key!r} of {location}: it holds {self.reason}"
        )

    def meta(self) -> ArrayMeta:
        """The node as an unsupported leaf."""
        return ArrayMeta(
            path=self.path,
            shape=self.shape,
            dtype=self.dtype,
            kind=ValueKind.UNSUPPORTED,
            torch_dtype=None,
            unsupported=self.reason,
            unreadable=True,
        )


def _prefix(root_path: str, path: Path) -> str:
    parts = ([root_path] if root_path else []) + list(path)
    return "/".join(parts)


def _get_bytes(store: Any, key: str) -> bytes | None:
    try:
        buf = sync(store.get(key, prototype=default_buffer_prototype()))
    except (OSError, ValueError, KeyError):
        return None
    return None if buf is None else bytes(buf.to_bytes())


def _stated_shape(doc: Any) -> tuple[int, ...]:
    shape = doc.get("shape") if isinstance(doc, dict) else None
    if isinstance(shape, list) and all(type(n) is int and n >= 0 for n in shape):
        return tuple(shape)
    return ()


def _stated_dtype(doc: Any) -> np.dtype:
    name = None
    if isinstance(doc, dict):
        name = doc.get("data_type", doc.get("dtype"))
    if isinstance(name, str):
        try:
            return np.dtype(name)
        except (TypeError, ValueError):
            pass
    return np.dtype("V0")


def find_unreadable(
    store: Any, root_path: str, path: Path, err: BaseException, stored: Path | None = None
) -> UnreadableNode | None:
    """The node at ``path`` (stored as ``stored``, by default ``path``, below the root group
    at ``root_path`` in ``store``) that zarr failed to open with ``err``, or None when no
    metadata document is there (no node)."""
    prefix = _prefix(root_path, path if stored is None else stored)
    for doc_name in _NODE_DOCS:
        raw = _get_bytes(store, f"{prefix}/{doc_name}")
        if raw is None:
            continue
        try:
            doc: Any = json.loads(raw)
        except ValueError:
            doc = None
        node_type = doc.get("node_type") if isinstance(doc, dict) else None
        return UnreadableNode(
            path=path,
            error=f"{type(err).__name__}: {err}",
            document=doc_name,
            shape=_stated_shape(doc),
            dtype=_stated_dtype(doc),
            group=doc_name == ZARR_V2_GROUP or node_type == "group",
        )
    return None


def child_names(store: Any, root_path: str, path: Path) -> list[str]:
    """The names listed under the group at ``path`` in ``store``, metadata documents left out
    (some may not be nodes: the caller opens each), in name order."""
    prefix = _prefix(root_path, path)

    async def listing() -> list[str]:
        return [name async for name in store.list_dir(prefix)]

    return sorted(n for n in sync(listing()) if n not in _NOT_CHILDREN)


def unreadable_or_missing(
    be: Any, path: Path, err: BaseException, *, stored: Path | None = None
) -> UnreadableNode | None:
    """What is at ``path`` of the zarr backend ``be`` when zarr failed to open it with
    ``err``: a document zarr cannot parse is an :class:`UnreadableNode`; without one, nothing
    is there (zarr's ``KeyError`` says either: a missing node, a missing field)."""
    node = find_unreadable(be._store, be._root.path, path, err, stored)
    if node is None and not isinstance(err, (KeyError, FileNotFoundError)):
        raise CorruptStoreError(
            f"cannot read the metadata of key {be.key_str(path)!r} in {be.location}: "
            f"{type(err).__name__}: {err}"
        ) from None
    return node


def kind_of(node: Any) -> NodeKind:
    """A zarr group, or a leaf: an array or (an :class:`UnreadableNode`) an unsupported one."""
    return NodeKind.GROUP if isinstance(node, zarr.Group) else NodeKind.ARRAY


def listed_members(group: Any, max_depth: int | None) -> list[tuple[str, Any]] | None:
    """``group.members(max_depth=...)``, or None when zarr cannot list them (one node's
    metadata does not parse: the caller lists group by group). A listing from consolidated
    metadata that fails is damaged itself (every node was parsed at open): that error is
    raised."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return list(group.members(max_depth=max_depth))
    except Exception:
        if group.metadata.consolidated_metadata is not None:
            raise
        quiet_failed_listing()
        return None


class _FailedListingFilter(logging.Filter):
    """Drops asyncio's "Task exception was never retrieved" reports of zarr's own listing
    tasks: when ``Group.members`` fails on one child, the tasks of the other children that
    failed too are never awaited, and asyncio reports each one when it is collected. ptd lists
    those children one by one instead, and reports them itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        return not ("never retrieved" in text and "_getitem_semaphore" in text)


_FILTER = _FailedListingFilter()


def quiet_failed_listing() -> None:
    """Install :class:`_FailedListingFilter` on asyncio's logger (once)."""
    logger = logging.getLogger("asyncio")
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
