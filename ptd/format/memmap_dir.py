"""The memmap directory format (``docs/format.md`` section 3) without torch: how keys become
file names, and what kind of node a ``meta.json`` describes.

Both the writer and loader of :mod:`ptd.containers.memmap` (torch) and the read-only storage backend of
memmap directories (:mod:`ptd.storage.memmap_dir`, for ``ptd inspect``/``validate``/
``diff``/``convert``) use these.

>>> encode_key("weird key/x"), decode_key("weird%20key%2Fx")
('weird%20key%2Fx', 'weird key/x')
>>> node_kind({"_class": "tensordict:TensorDict"}), node_kind({"_is_non_tensor": True})
('td', 'data')
>>> node_kind({"anything": 1}) is None
True

Names and attributes (``docs/format.md`` section 3, "ptd's additions"): a key named like a
field of ``meta.json`` (``device``, ``shape``, ``_type``...) is stored under its escaped name
(:func:`stored_entry_name`, ``%64evice``) with its own name in the entry (``"_ptd_name"``);
user attributes are kept in ``meta.json`` where tensordict's loader passes over them: a node's
under ``"_ptd": {"attrs": ...}``, a leaf's in its entry (``"_ptd_attrs"``).

>>> stored_entry_name("device"), stored_entry_name("obs")
('%64evice', 'obs')
>>> entry_key("%64evice", {"_ptd_name": "device"}), entry_key("%64evice", {})
('device', '%64evice')
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from ptd.format.keynames import escape_name
from ptd.format.names import (
    MEMMAP_ENTRY_ATTRS,
    MEMMAP_ENTRY_NAME,
    MEMMAP_ENTRY_SHAPE,
    MEMMAP_META,
    MEMMAP_NODE_FIELDS,
    MEMMAP_NON_TENSOR_STACK_CLASS,
    MEMMAP_NON_TENSOR_STACK_TYPE,
    MEMMAP_NON_TENSOR_TYPE,
    MEMMAP_PTD_CLASS,
    MEMMAP_PTD_FIELD,
    MEMMAP_PTD_TYPE,
    MEMMAP_SUFFIX,
    MEMMAP_TD_CLASS,
    MEMMAP_TD_TYPE,
    NAME_MAX_BYTES,
)

__all__ = [
    "decode_key",
    "encode_key",
    "entry_attrs",
    "entry_key",
    "entry_name_problem",
    "entry_shape",
    "is_memmap_dir",
    "node_attrs",
    "node_kind",
    "read_meta_json",
    "stored_entry_name",
]

_UNSAFE = set('/<>:"|?*\\ \0%') | {chr(i) for i in range(32)} | {chr(127)}
_ENCODE_TABLE = str.maketrans({c: f"%{ord(c):02X}" for c in _UNSAFE})
#: the largest meta.json read to tell whether a directory is a memmap tensordict
_META_LIMIT = 64 << 20


def encode_key(key: str) -> str:
    """The file-system name of ``key``, as tensordict 0.15 writes it (percent-encoding).

    >>> encode_key("weird key/x"), encode_key(""), encode_key("..")
    ('weird%20key%2Fx', '%', '%2E%2E')
    """
    if not key:
        return "%"
    if key in (".", ".."):
        return "%2E" * len(key)
    return key.translate(_ENCODE_TABLE)


def decode_key(name: str) -> str:
    """Invert :func:`encode_key`.

    >>> decode_key("weird%20key%2Fx")
    'weird key/x'
    """
    if name == "%":
        return ""
    out, i = [], 0
    while i < len(name):
        if name[i] == "%" and i + 2 < len(name) and _is_hex(name[i + 1 : i + 3]):
            out.append(chr(int(name[i + 1 : i + 3], 16)))
            i += 3
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


def _is_hex(s: str) -> bool:
    return len(s) == 2 and all(c in "0123456789abcdefABCDEF" for c in s)


def node_kind(meta: Mapping[str, Any]) -> str | None:
    """What a ``meta.json`` describes: ``"td"`` (a TensorDict or PersistentTensorDict
    directory), ``"data"`` (a NonTensorData), ``"stack"`` (a NonTensorStack), or None
    (something else, or nothing ptd knows)."""
    cls, typ = meta.get("_class"), meta.get("_type")
    if cls in (MEMMAP_TD_CLASS, MEMMAP_PTD_CLASS) or typ in (MEMMAP_TD_TYPE, MEMMAP_PTD_TYPE):
        return "td"
    if cls == MEMMAP_NON_TENSOR_STACK_CLASS or typ == MEMMAP_NON_TENSOR_STACK_TYPE:
        return "stack"
    if typ == MEMMAP_NON_TENSOR_TYPE or meta.get("_is_non_tensor") is True:
        return "data"
    return None


def read_meta_json(directory: str) -> dict[str, Any] | None:
    """The JSON object in ``directory``'s ``meta.json``, or None when there is none or it is
    not a JSON object (unreadable, not UTF-8, too large)."""
    path = os.path.join(directory, MEMMAP_META)
    try:
        if os.path.getsize(path) > _META_LIMIT:
            return None
        with open(path, "rb") as f:
            meta = json.loads(f.read().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    return meta if isinstance(meta, dict) else None


def is_memmap_dir(directory: str) -> bool:
    """Whether ``directory`` is a memmap tensordict: its ``meta.json`` describes a
    TensorDict (a NonTensorData directory alone is not a store)."""
    meta = read_meta_json(directory)
    return meta is not None and node_kind(meta) == "td"


# --- ptd's additions: escaped names, user attributes ------------------------------------------
def stored_entry_name(key: str) -> str:
    """The name ``key`` has in its node's ``meta.json`` (and, percent-encoded, on disk): the
    key itself, or its escaped name when ``meta.json`` uses the key's name for a field."""
    return escape_name(key, first=True) if key in MEMMAP_NODE_FIELDS else key


def entry_key(stored: str, entry: Mapping[str, Any]) -> str:
    """The key an entry of ``meta.json`` stored under ``stored`` holds: the name its
    ``"_ptd_name"`` gives when ``stored`` is that name escaped, else ``stored`` itself."""
    name = entry.get(MEMMAP_ENTRY_NAME)
    if isinstance(name, str) and name != stored and stored_entry_name(name) == stored:
        return name
    return stored


def entry_name_problem(key: str, tensor: bool) -> str | None:
    """Why a memmap directory cannot hold a key named ``key``, or None: every name has a
    file name (percent-encoding), but one may be longer than file systems allow."""
    name = encode_key(stored_entry_name(key)) + (MEMMAP_SUFFIX if tensor else "")
    size = len(name.encode("utf-8"))
    if size > NAME_MAX_BYTES:
        return (
            f"its file name would be {size} bytes, and file systems hold at most {NAME_MAX_BYTES}"
        )
    return None


def node_attrs(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The user attributes a node's ``meta.json`` keeps (``{}`` when none)."""
    field = meta.get(MEMMAP_PTD_FIELD)
    attrs = field.get("attrs") if isinstance(field, dict) else None
    return dict(attrs) if isinstance(attrs, dict) else {}


def entry_shape(entry: Mapping[str, Any], data: Any) -> tuple[int, ...] | None:
    """The array shape an entry of ``meta.json`` records for a ``NonTensorData`` written from a
    string array (``MEMMAP_ENTRY_SHAPE``), when ``data`` (its value) is a nested list of that
    shape; None otherwise (a value of its own: 0-d).

    >>> entry_shape({"_ptd_shape": [1]}, ["alice"])
    (1,)
    >>> entry_shape({"_ptd_shape": [2]}, ["alice"]) is None
    True
    """
    shape = entry.get(MEMMAP_ENTRY_SHAPE)
    if not (
        isinstance(shape, list)
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)
    ):
        return None
    level = [data]
    for n in shape:  # every level a list of that length
        if not all(isinstance(x, list) and len(x) == n for x in level):
            return None
        level = [y for x in level for y in x]
    return tuple(shape)


def entry_attrs(entry: Mapping[str, Any]) -> dict[str, Any]:
    """The user attributes an entry of ``meta.json`` keeps (``{}`` when none)."""
    attrs = entry.get(MEMMAP_ENTRY_ATTRS)
    return dict(attrs) if isinstance(attrs, dict) else {}
