"""Attributes and strings between formats: the same values, in the python types each format
stores (zarr: JSON; h5: numpy, a list of str as a vlen string array), strings that h5 hands
back as bytes decoded, and which unmarked string arrays are columns (one string per row).

>>> attrs_for("zarr", {"n": np.int64(3), "t": b"x"})
{'n': 3, 't': b'x'}
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
from ptd.storage.api import ArrayMeta, ValueKind

__all__ = ["attr_problem", "attrs_for", "decode_str", "is_column", "user_attrs"]


def _python(value: Any) -> Any:
    """``value`` with numpy scalars and arrays as python values and lists, bytes kept (the
    destination's backend decides how it stores them)."""
    if isinstance(value, np.ndarray):
        return _python(value.tolist())
    if isinstance(value, np.generic):
        return _python(value.item())
    if isinstance(value, dict):
        return {str(k): _python(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_python(v) for v in value]
    return jsonable(value) if not isinstance(value, bytes) else value


def attrs_for(fmt: str, attrs: dict[str, Any]) -> dict[str, Any]:
    """Attribute values the destination format can store (same values, other python types;
    bytes stay bytes)."""
    if fmt == "zarr":
        return {k: _python(v) for k, v in attrs.items()}
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


def _what(value: Any) -> str:
    name = type(value).__name__
    if "Reference" in name:
        return "HDF5 object references"
    return f"a {name} value"


def _json_problem(value: Any) -> str | None:
    """Why JSON (zarr attributes) cannot hold ``value`` as it is, or None."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return None
    if isinstance(value, (bytes, np.bytes_)):
        try:
            bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return "bytes that are not UTF-8 text (JSON has no bytes)"
        return None
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "biuf":
            return None
        if value.dtype.kind == "c":
            return "complex numbers (JSON has none)"
        return _json_problem(value.tolist()) if value.dtype.kind in "USO" else _what(value)
    if isinstance(value, np.generic):
        return _json_problem(value.item()) if value.dtype.kind != "c" else "complex numbers"
    if isinstance(value, dict):
        for k, v in value.items():
            problem = _json_problem(v) if isinstance(k, str) else "a mapping with non-str keys"
            if problem:
                return problem
        return None
    if isinstance(value, (list, tuple)):
        for v in value:
            problem = _json_problem(v)
            if problem:
                return problem
        return None
    if isinstance(value, complex):
        return "complex numbers (JSON has none)"
    return _what(value)


def attr_problem(fmt: str, value: Any) -> str | None:
    """Why a ``fmt`` store cannot hold the attribute value ``value`` unchanged, or None.

    >>> attr_problem("zarr", {"a": [1, "x"]}) is None, attr_problem("zarr", b"\\xff")
    (True, 'bytes that are not UTF-8 text (JSON has no bytes)')
    >>> attr_problem("h5", [1, "x"])
    'a list mixing numbers and text (HDF5 attributes hold arrays of one type)'
    """
    if fmt == "zarr":
        return _json_problem(value)
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes, np.generic)):
        return (
            None if not isinstance(value, np.generic) or value.dtype.kind != "O" else _what(value)
        )
    if isinstance(value, dict):
        return _json_problem(value)
    if isinstance(value, np.ndarray):
        if value.dtype.kind != "O":
            return None
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        if _all_str(value) or (value and all(isinstance(v, bytes) for v in value)):
            return None
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError):
            return "a ragged list (HDF5 attributes hold rectangular arrays)"
        if arr.dtype.kind in "biufc":
            return None
        if arr.dtype.kind == "O":
            bad = next((v for v in np.ravel(arr) if not isinstance(v, (str, bytes))), None)
            return _what(bad) if bad is not None else None
        return "a list mixing numbers and text (HDF5 attributes hold arrays of one type)"
    return _what(value)
