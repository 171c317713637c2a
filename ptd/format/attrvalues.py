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

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = [
    "hdf5_json_text",
    "hdf5_problem",
    "hdf5_values",
    "json_problem",
    "json_values",
    "jsonable",
]


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
    object array (h5py stores that only as a vlen string attribute); values HDF5 has no type
    for stay as they are (the backend stores their JSON text: :func:`hdf5_json_text`)."""
    out: dict[str, Any] = {}
    for k, v in attrs.items():
        if isinstance(v, (list, tuple)) and v and _all_str(v) and hdf5_json_text(v) is None:
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
    """Why an HDF5 attribute cannot hold ``value``, or None: values of an HDF5 type (numbers,
    text, bytes, rectangular arrays of one type) are stored as they are, and any other value
    that JSON holds (a dict, a list of dicts, a ragged or mixed list: NGFF's ``multiscales``)
    as its JSON text (:func:`hdf5_json_text`).

    >>> hdf5_problem([1, "x"]) is None, hdf5_problem([{"a": 1}, [2, 3]]) is None
    (True, True)
    >>> hdf5_problem([1 + 2j, {"a": 1}])
    'complex numbers (JSON has none)'
    """
    native = _hdf5_native_problem(value)
    return None if native is None else json_problem(value)


def hdf5_json_text(value: Any) -> str | None:
    """The JSON text an HDF5 attribute holds in place of ``value`` when HDF5 has no type for
    it (a dict, a list of dicts, a ragged list, a list mixing numbers and text or holding
    None); None for a value HDF5 stores as it is. The HDF5 backend lists the attributes it
    stored so in ``__ptd_json_attrs__`` and reads only those back as the value; any other
    reader (h5py, netCDF, h5dump) sees a string attribute holding JSON.

    >>> hdf5_json_text([{"path": "0"}, None]), hdf5_json_text([1, 2]) is None
    ('[{"path": "0"}, null]', True)
    """
    if _hdf5_native_problem(value) is None:
        return None
    return json.dumps(_json_ready(value), ensure_ascii=False)


def _json_ready(value: Any) -> Any:
    """``value`` in the python types ``json.dumps`` takes (numpy unwrapped, UTF-8 bytes as
    text, tuples as lists)."""
    if isinstance(value, (bytes, np.bytes_)):
        return bytes(value).decode("utf-8")
    if isinstance(value, np.ndarray):
        return _json_ready(value.tolist())
    if isinstance(value, np.generic):
        return _json_ready(value.item())
    if isinstance(value, Mapping):
        return {str(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    return value


def _hdf5_native_problem(value: Any) -> str | None:
    """Why HDF5 has no attribute type that holds ``value`` as it is, or None."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes, np.generic)):
        return (
            None if not isinstance(value, np.generic) or value.dtype.kind != "O" else _what(value)
        )
    if isinstance(value, Mapping):
        return "a mapping (HDF5 attributes have no mapping type)"
    if isinstance(value, np.ndarray):
        if value.dtype.kind != "O":
            return None
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        try:
            arr = np.asarray(value)
        except (ValueError, TypeError):
            return "a ragged list (HDF5 attributes hold rectangular arrays)"
        if arr.dtype.kind in "biufc" or (arr.dtype.kind == "S" and _all_bytes(value)):
            return None
        if arr.dtype.kind == "U" and _all_str(value):
            return None
        if arr.dtype.kind == "O":
            bad = [v for v in np.ravel(arr) if not isinstance(v, (str, bytes))]
            if bad:
                return _what(bad[0])
            if arr.ndim == 1 and (_all_str(value) or _all_bytes(value)):
                return None
            return "a list mixing text and bytes (HDF5 attributes hold arrays of one type)"
        return "a list mixing numbers and text (HDF5 attributes hold arrays of one type)"
    return _what(value)


def _all_bytes(v: Any) -> bool:
    if isinstance(v, (list, tuple)):
        return all(_all_bytes(x) for x in v)
    return isinstance(v, bytes)
