"""Attribute values and the formats that hold them: which python values an HDF5 attribute
(h5py: numpy scalars and arrays of one type) or a JSON document (zarr attributes, memmap's
``meta.json``) holds unchanged, and the same values in the types each stores.

These are facts of the on-disk formats, so they live here; the backends' policies
(``ptd/storage/h5/policy.py``...) and the writers above them use them.

>>> json_values({"n": np.int64(3), "t": b"x"})
{'n': 3, 't': b'x'}
>>> hdf5_values({"tags": ["a", "b"]})["tags"].dtype
dtype('O')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["hdf5_problem", "hdf5_values", "json_problem", "json_values", "jsonable"]


def jsonable(value: Any) -> Any:
    """An attribute value as JSON-able python (bytes decoded, numpy unwrapped, NaN kept)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        return jsonable(value.item())
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


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


def json_values(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Attribute values as JSON holds them (zarr, memmap's ``meta.json``): numpy scalars and
    arrays as python values and lists; bytes stay bytes (the writer decides how it stores
    them)."""
    return {k: _python(v) for k, v in attrs.items()}


def hdf5_values(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Attribute values as HDF5 (h5py) stores them: the same values, a list of str as an
    object array (h5py stores that only as a vlen string attribute)."""
    out: dict[str, Any] = {}
    for k, v in attrs.items():
        if isinstance(v, (list, tuple)) and v and _all_str(v):
            v = np.array(v, dtype=object)
        out[k] = v
    return out


def _all_str(v: Any) -> bool:
    if isinstance(v, (list, tuple)):
        return all(_all_str(x) for x in v)
    return isinstance(v, str)


def _what(value: Any) -> str:
    name = type(value).__name__
    if "Reference" in name:
        return "HDF5 object references"
    return f"a {name} value"


def json_problem(value: Any) -> str | None:
    """Why JSON (zarr attributes, memmap's ``meta.json``) cannot hold ``value`` as it is, or
    None.

    >>> json_problem({"a": [1, "x"]}) is None, json_problem(b"\\xff")
    (True, 'bytes that are not UTF-8 text (JSON has no bytes)')
    """
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
        return json_problem(value.tolist()) if value.dtype.kind in "USO" else _what(value)
    if isinstance(value, np.generic):
        return json_problem(value.item()) if value.dtype.kind != "c" else "complex numbers"
    if isinstance(value, dict):
        for k, v in value.items():
            problem = json_problem(v) if isinstance(k, str) else "a mapping with non-str keys"
            if problem:
                return problem
        return None
    if isinstance(value, (list, tuple)):
        for v in value:
            problem = json_problem(v)
            if problem:
                return problem
        return None
    if isinstance(value, complex):
        return "complex numbers (JSON has none)"
    return _what(value)


def hdf5_problem(value: Any) -> str | None:
    """Why an HDF5 attribute cannot hold ``value`` unchanged, or None.

    >>> hdf5_problem([1, "x"])
    'a list mixing numbers and text (HDF5 attributes hold arrays of one type)'
    >>> hdf5_problem({"a": 1}) is None
    True
    """
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes, np.generic)):
        return (
            None if not isinstance(value, np.generic) or value.dtype.kind != "O" else _what(value)
        )
    if isinstance(value, dict):
        return json_problem(value)
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
