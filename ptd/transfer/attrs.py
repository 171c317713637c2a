"""Attributes and strings between formats: the same values, in the python types each format
stores (zarr: JSON; h5: numpy, a list of str as a vlen string array), strings that h5 hands
back as bytes decoded, and which unmarked string arrays are columns (one string per row).

>>> attrs_for("zarr", {"n": np.int64(3), "t": b"x"})
{'n': 3, 't': 'x'}
>>> attrs_for("h5", {"tags": ["a", "b"]})["tags"].dtype
dtype('O')
>>> decode_str([b"caf\\xc3\\xa9", [b"x"]])
['café', ['x']]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ptd.format.names import PTD_JSON_ATTR, RESERVED_ATTRS, TD_NON_TENSOR_ATTR
from ptd.report.info import jsonable
from ptd.storage.backends.base import ArrayMeta, ValueKind

__all__ = ["attrs_for", "user_attrs", "decode_str", "is_column"]


def attrs_for(fmt: str, attrs: dict[str, Any]) -> dict[str, Any]:
    """Attribute values the destination format can store (same values, other python types)."""
    if fmt == "zarr":
        return {k: jsonable(v) for k, v in attrs.items()}
    out: dict[str, Any] = {}
    for k, v in attrs.items():
        if isinstance(v, (list, tuple)) and v and _all_str(v):
            # h5py stores a list of str only as an object array (a vlen string attribute)
            v = np.array(v, dtype=object)
        out[k] = v
    return out


def _all_str(v: Any) -> bool:
    if isinstance(v, (list, tuple)):
        return all(_all_str(x) for x in v)
    return isinstance(v, str)


def user_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    """The attributes that are the user's (not ptd's or tensordict's own)."""
    return {k: v for k, v in attrs.items() if k not in RESERVED_ATTRS}


def decode_str(value: Any) -> Any:
    """h5 hands back variable-length strings as bytes: decode them (nested lists too)."""
    if isinstance(value, (bytes, np.bytes_)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return bytes(value)
    if isinstance(value, list):
        return [decode_str(v) for v in value]
    if isinstance(value, np.ndarray) and value.dtype.kind in "OS":
        return decode_str(value.tolist())
    return value


def is_column(meta: ArrayMeta, src_fmt: str) -> bool:
    """An unmarked string (or zarr bytes) array with dims: one string per element."""
    if meta.kind is not ValueKind.NON_TENSOR or meta.stack_shape is not None or not meta.shape:
        return False
    if TD_NON_TENSOR_ATTR in meta.attrs or meta.attrs.get(PTD_JSON_ATTR):
        return False
    return meta.non_tensor_kind == "str" or (meta.non_tensor_kind == "bytes" and src_fmt == "zarr")
