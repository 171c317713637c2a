"""Metadata documents checked before zarr parses them.

zarr-python reads every ``zarr.json`` (and the v2 ``.zarray``/``.zattrs``/``.zgroup``/
``.zmetadata``) through its store's ``get`` and hands the bytes straight to Python's ``json``
module, which recurses once per nesting level: a 20 kB document of ``[[[[...]]]]`` ends in a
RecursionError deep inside zarr, and one a little shallower parses into a value that every
later walk over the attributes must survive. :class:`CheckedLocalStore` is a ``LocalStore``
whose ``get`` runs :func:`ptd.storage.limits.check_json` on each metadata document first
(size and nesting limits, ``PTD_MAX_JSON_BYTES``/``PTD_MAX_JSON_DEPTH``), so a hostile
document is refused by name (a :class:`~ptd.errors.StoreLimitError`) before zarr sees it.
Chunk data is passed through untouched, with no cost beyond one name comparison.

Stores opened read-only from a local directory get it (:func:`guarded`); what ptd parses
itself (consolidated metadata, the nodes zarr cannot parse) calls ``check_json`` directly.
"""

from __future__ import annotations

import os
from typing import Any

from zarr.storage import LocalStore

from ptd.storage.limits import check_json

__all__ = ["METADATA_NAMES", "CheckedLocalStore", "guarded", "is_plain_directory", "local_root"]

#: the names of the documents zarr parses as JSON
METADATA_NAMES = frozenset({"zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"})


class CheckedLocalStore(LocalStore):
    """A ``LocalStore`` that checks each metadata document it returns (see the module doc)."""

    async def get(
        self, key: str, prototype: Any = None, byte_range: Any = None
    ) -> Any:  # (the signature of zarr's Store.get)
        buf = await super().get(key, prototype=prototype, byte_range=byte_range)
        if buf is not None and byte_range is None and key.rsplit("/", 1)[-1] in METADATA_NAMES:
            check_json(buf.to_bytes(), os.path.join(str(self.root), key))
        return buf


def guarded(store: Any, mode: str) -> Any:
    """``store`` as :func:`~ptd.storage.zarr.opening.local_store` returned it, with a local
    directory opened read-only made a :class:`CheckedLocalStore`; anything else unchanged
    (writable stores are the user's own; zip and remote stores are left to zarr)."""
    if mode == "r" and isinstance(store, str) and os.path.isdir(store):
        return CheckedLocalStore(store, read_only=True)
    return store


def is_plain_directory(store: Any) -> bool:
    """Whether ``store`` is zarr's own ``LocalStore`` or this checked one: a plain directory
    whose chunk files ptd may map and decode itself (not a subclass of another kind)."""
    return type(store) in (LocalStore, CheckedLocalStore)


def local_root(store: Any) -> str | None:
    """The directory of a store that :func:`guarded` may have wrapped: the path itself, or
    the checked store's root; None for any other store."""
    if isinstance(store, str):
        return store
    if isinstance(store, CheckedLocalStore):
        return str(store.root)
    return None
