"""Consolidated metadata of a local zarr store, checked against the store's real listing.

A zarr v3 store may carry *consolidated metadata*: a copy of every node's ``zarr.json`` inside
the root's, so that a reader lists the whole hierarchy with one read. zarr-python opens a store
read-only through it, and tools that add or change arrays later (``zarr.Group.create_array``)
do not rewrite it: the copy goes stale, and an array added since is invisible to every reader
that trusts it. :func:`check_consolidated` lists the nodes really present (one ``zarr.json``
per group and array; chunk files are not walked) and compares both.

Only local directory stores are checked (a URL or a zip file gives no findings). Nothing here
imports zarr: ``zarr.json`` is plain JSON.

>>> import json, os, tempfile
>>> with tempfile.TemporaryDirectory() as d:
...     def put(rel, doc):
...         os.makedirs(os.path.join(d, rel), exist_ok=True)
...         with open(os.path.join(d, rel, "zarr.json"), "w") as f:
...             json.dump(doc, f)
...     arr = {"node_type": "array", "shape": [4], "data_type": "int32"}
...     put("a", arr); put("late", arr)
...     put("", {"node_type": "group", "consolidated_metadata": {"metadata": {"a": arr}}})
...     found = check_consolidated(d)
>>> [(f.key, f.code) for f in found]
[('late', 'consolidated_missing')]
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from ptd.errors import CorruptStoreError
from ptd.format.names import ZARR_JSON
from ptd.storage.api import Backend
from ptd.storage.limits import check_json
from ptd.storage.location import StoreLocation
from ptd.storage.registry import policy
from ptd.storage.stores import detect, open_store

__all__ = [
    "CONSOLIDATED_CODES",
    "ConsolidatedFinding",
    "check_consolidated",
    "has_consolidated",
    "open_checked",
]

#: the codes :func:`check_consolidated` reports
CONSOLIDATED_CODES = (
    "consolidated_missing",  # a node in the store that the consolidated metadata lacks
    "consolidated_extra",  # a node in the consolidated metadata that the store lacks
    "consolidated_differs",  # a node whose metadata differs (node type, shape, dtype, ...)
)

#: the fields of a node's metadata compared (their names in messages)
_FIELDS = (
    ("node_type", "node type"),
    ("shape", "shape"),
    ("data_type", "dtype"),
    ("chunk_grid", "chunks"),
    ("codecs", "codecs"),
    ("fill_value", "fill value"),
    ("attributes", "attributes"),
)


@dataclass
class ConsolidatedFinding:
    """One disagreement: the key (``"a/b"``), a code from :data:`CONSOLIDATED_CODES`, and a
    message naming what differs."""

    key: str
    code: str
    message: str


def _load(path: str) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    check_json(raw, path)  # refused by name (StoreLimitError), not taken for "no document"
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _consolidated(root_doc: dict[str, Any]) -> dict[str, Any] | None:
    cm = root_doc.get("consolidated_metadata")
    if not isinstance(cm, dict) or not isinstance(cm.get("metadata"), dict):
        return None
    # damaged or hostile documents: entries that are not objects compare as empty ones
    return {str(k): (v if isinstance(v, dict) else {}) for k, v in cm["metadata"].items()}


def has_consolidated(store_path: str) -> bool | None:
    """Whether the local zarr v3 store at ``store_path`` carries consolidated metadata (None
    when it is not a local directory store with a readable root ``zarr.json``)."""
    root = _load(os.path.join(store_path, ZARR_JSON)) if os.path.isdir(store_path) else None
    if root is None:
        return None
    return _consolidated(root) is not None


def real_listing(
    store_path: str,
    known: dict[str, dict[str, Any]] | None = None,
    since: float | None = None,
) -> dict[str, dict[str, Any]]:
    """Every node below the root of a local zarr v3 store: ``"a/b"`` -> its ``zarr.json``
    document (an unreadable one maps to ``{}``). Arrays' chunk directories are not walked.

    ``known``/``since``: a node in ``known`` whose ``zarr.json`` was last modified before
    ``since`` (a time stamp) is taken from ``known`` instead of being read."""
    out: dict[str, dict[str, Any]] = {}
    base_len = len(store_path.rstrip(os.sep)) + 1
    for d, dirs, _files in os.walk(store_path):
        keep = []
        for name in sorted(dirs):
            sub = os.path.join(d, name)
            meta_path = os.path.join(sub, ZARR_JSON)
            try:
                mtime = os.stat(meta_path).st_mtime
            except OSError:
                continue  # not a node (chunks of an array, or a stray directory)
            key = sub[base_len:].replace(os.sep, "/")
            if known is not None and since is not None and key in known and mtime < since:
                doc = known[key]
            else:
                doc = _load(meta_path) or {}
            out[key] = doc
            if doc.get("node_type") != "array":
                keep.append(name)
        dirs[:] = keep
    return out


def _differences(real: dict[str, Any], cons: dict[str, Any]) -> list[str]:
    out = []
    for name, label in _FIELDS:
        if name == "attributes":
            a, b = real.get(name) or {}, cons.get(name) or {}
        else:
            a, b = real.get(name), cons.get(name)
        if a != b:
            if name in ("shape", "data_type", "node_type", "fill_value"):
                out.append(f"{label} {b!r} in the consolidated metadata, {a!r} in the store")
            else:
                out.append(f"{label} differ")
    return out


def check_consolidated(store_path: str, *, thorough: bool = True) -> list[ConsolidatedFinding]:
    """Compare the consolidated metadata of the local zarr store at ``store_path`` with the
    nodes really in it. No consolidated metadata (or not a local directory store): ``[]``.
    ``thorough=False`` (``ptd inspect``): every node's presence is checked, but only the
    ``zarr.json`` documents modified after the root's (where consolidation writes) are read
    and compared; a change that kept an older time stamp (a copy preserving times made before
    the consolidation) is then missed.
    Consolidated metadata naming a key that is no valid name (``..``, ``""``, NUL) raises
    ``CorruptStoreError``, as opening the store does."""
    root = _load(os.path.join(store_path, ZARR_JSON)) if os.path.isdir(store_path) else None
    cons = _consolidated(root) if root is not None else None
    if cons is None:
        return []
    for key in cons:
        if any(part in ("", ".", "..") or "\x00" in part for part in key.split("/")):
            raise CorruptStoreError(
                f"cannot read the metadata of {store_path}: its consolidated metadata lists "
                f"{key!r}, which is not a valid key (damaged or hostile metadata)"
            )
    since = None
    if not thorough:
        try:
            since = os.stat(os.path.join(store_path, ZARR_JSON)).st_mtime
        except OSError:
            since = None
    real = real_listing(store_path, cons, since)
    found: list[ConsolidatedFinding] = []
    for key in sorted(set(real) | set(cons)):
        r, c = real.get(key), cons.get(key)
        what = "array" if (r or c or {}).get("node_type") == "array" else "group"
        if c is None:
            found.append(
                ConsolidatedFinding(
                    key,
                    "consolidated_missing",
                    f"{what} {key!r} is in the store but not in its consolidated metadata: "
                    "readers that trust it do not see it (re-consolidate: "
                    "zarr.consolidate_metadata)",
                )
            )
        elif r is None:
            found.append(
                ConsolidatedFinding(
                    key,
                    "consolidated_extra",
                    f"{what} {key!r} is in the consolidated metadata but not in the store "
                    "(deleted since; re-consolidate: zarr.consolidate_metadata)",
                )
            )
        else:
            diff = _differences(r, c)
            if diff:
                found.append(
                    ConsolidatedFinding(
                        key,
                        "consolidated_differs",
                        f"{what} {key!r} differs from its consolidated metadata: "
                        + "; ".join(diff),
                    )
                )
    return found


def narrowed_findings(
    found: list[ConsolidatedFinding], inner: tuple[str, ...]
) -> list[ConsolidatedFinding]:
    """The findings about the nodes below the key ``inner`` of a store (a location leading
    into it), with their keys relative to it."""
    if not inner:
        return found
    prefix = "/".join(inner) + "/"
    return [
        ConsolidatedFinding(f.key[len(prefix) :], f.code, f.message)
        for f in found
        if f.key.startswith(prefix)
    ]


def open_checked(
    loc: StoreLocation,
    *,
    use_consolidated: bool | None = None,
    follow_virtual: bool | None = None,
) -> tuple[Backend, list[ConsolidatedFinding]]:
    """Open a store read-only for a streamed pass (no memory maps), after checking a local
    zarr store's consolidated metadata: when it is stale (or ``use_consolidated=False``) the
    store is opened on its real listing. ``follow_virtual``: the open option (HDF5's virtual
    datasets beside the file are read). Returns the backend (close it) and the findings."""
    stale = [] if loc.is_remote or not os.path.isdir(loc.path) else check_consolidated(loc.path)
    stale = narrowed_findings(stale, loc.inner)
    loc = detect(loc)
    opts: dict[str, Any] = {"fast_path": False}
    assert loc.format is not None
    if policy(loc.format).consolidated_metadata and (stale or use_consolidated is False):
        opts["use_consolidated"] = False
    if follow_virtual:
        opts["follow_virtual"] = True
    return open_store(loc, "r", **opts), stale
