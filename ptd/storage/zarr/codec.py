"""How values without a tensor form, and attributes, are stored in zarr (tensordict 0.15's
conventions; see :mod:`ptd.storage.zarr.backend`).

A non-tensor is a 1-D ``uint8`` array holding its JSON or pickle *payload*, marked
``__tensordict_non_tensor__: {"encoding": ...}`` (:mod:`ptd.format.payload` picks the encoding
and applies the ``allow_pickle`` policy); a stack is a payload of the nested list, marked
``__tensordict_stack__`` with its shape too. Stacks of str are zarr ``string`` arrays of the
stack's shape marked ``__tensordict_stack__``. Attributes are JSON.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ptd.errors import PtdValueError
from ptd.format.names import PTD_BYTES_ATTRS, TD_NON_TENSOR_ATTR, TD_STACK_ATTR
from ptd.format.payload import (
    all_of_type,
    decode_payload,
    encode_payload,
    has_nested_shape,
    nested_to_array,
    parse_stack_shape,
    select_nested,
)
from ptd.storage.meta import NonTensorPayload
from ptd.storage.selection import Selection, selection_shape
from ptd.storage.strings import (
    FIXED_BYTES,
    FIXED_UTF8,
    FIXED_UTF32,
    STRING_TYPE_ATTR,
    VLEN_BYTES,
    VLEN_UTF8,
    StringType,
    as_object_array,
)

__all__ = [
    "attrs_json",
    "attrs_read",
    "check_stack_marker",
    "create_strings",
    "decode",
    "encode",
    "non_tensor_kind",
    "plain_python",
    "read_strings",
    "string_array",
    "string_type",
]


def plain_python(value: Any) -> Any:
    """An attribute value with numpy scalars and arrays as python values and lists, anything
    else as it is (zarr refuses what JSON cannot hold; compare
    :func:`ptd.format.attrvalues.jsonable`, which renders everything for reports)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): plain_python(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_python(v) for v in value]
    return value


def _bytes_as_text(value: Any) -> Any:
    """``value`` (bytes, or a non-empty list of bytes) as UTF-8 text, or None for anything
    else; bytes that are not UTF-8 raise ValueError (JSON holds no bytes)."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, list) and value and all(isinstance(v, bytes) for v in value):
        return [v.decode("utf-8") for v in value]
    return None


def attrs_json(attrs: Mapping[str, Any], listed: Any = None) -> dict[str, Any]:
    """Attributes as the JSON a zarr node stores: :func:`plain_python` values, where bytes (and
    lists of bytes) become their UTF-8 text, named in ``__ptd_bytes_attrs__`` so that they
    read back as bytes (:func:`attrs_read`). ``listed``: the node's current listing, when
    ``attrs`` are merged into existing ones (names set here again leave it or join it)."""
    out: dict[str, Any] = {}
    before = {n for n in listed if isinstance(n, str)} if isinstance(listed, list) else set()
    as_bytes = set(before)
    for name, value in attrs.items():
        key = str(name)
        if key == PTD_BYTES_ATTRS:
            continue
        plain = plain_python(value)
        text = _bytes_as_text(plain)
        if text is None:
            out[key] = plain
            as_bytes.discard(key)
        else:
            out[key] = text
            as_bytes.add(key)
    if as_bytes != before or (as_bytes and listed is None):
        out[PTD_BYTES_ATTRS] = sorted(as_bytes)
    return out


def attrs_read(attributes: Mapping[str, Any], *, deep: bool = False) -> dict[str, Any]:
    """A zarr node's attributes as ptd hands them out (a copy, ``deep`` or not): those named
    in ``__ptd_bytes_attrs__`` as bytes again, the listing itself left out."""
    out = copy.deepcopy(dict(attributes)) if deep else dict(attributes)
    listed = out.pop(PTD_BYTES_ATTRS, None)
    if not isinstance(listed, list):
        return out
    for name in listed:
        value = out.get(name) if isinstance(name, str) else None
        if isinstance(value, str):
            out[name] = value.encode("utf-8")
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            out[name] = [v.encode("utf-8") for v in value]
    return out


def non_tensor_kind(dt: np.dtype, marker: Any) -> str:
    """The non-tensor kind of an array of ``dt`` that holds no tensor: its payload's encoding
    (``"json"``, ``"pickle"``) when ``marker`` (its ``__tensordict_non_tensor__``) is set,
    else ``"str"``, ``"bytes"`` or ``"other"`` by its dtype."""
    if marker is not None:
        enc = marker.get("encoding") if isinstance(marker, dict) else None
        return enc if enc in ("json", "pickle") else "other"
    if dt.kind in "TUO":
        return "str"
    if dt.kind in "SV":
        return "bytes"
    return "other"


def string_type(arr: Any) -> StringType | None:
    """The kind of a zarr string array (v2 or v3) that a conversion copies as a string array
    (see :mod:`~ptd.storage.strings`), or None (numbers, a JSON/pickle payload). A
    recorded ``__ptd_string_type__`` of the same family (UTF-8 stored as bytes) wins."""
    md = arr.metadata
    attrs = md.attributes
    if attrs.get(TD_NON_TENSOR_ATTR) is not None:
        return None
    zdt = md.data_type if md.zarr_format == 3 else md.dtype
    name = type(zdt).__name__
    if name == "NullTerminatedBytes":
        recorded = StringType.parse(attrs.get(STRING_TYPE_ATTR))
        if recorded is not None and recorded.kind == FIXED_UTF8:
            return recorded
        return StringType(FIXED_BYTES, int(zdt.length))
    if name == "FixedLengthUTF32":
        return StringType(FIXED_UTF32, int(zdt.length))
    if name == "VariableLengthUTF8":
        return StringType(VLEN_UTF8)
    if name == "VariableLengthBytes":
        return StringType(VLEN_BYTES)
    return None


def read_strings(arr: Any) -> np.ndarray | None:
    """The whole string array ``arr`` (see ``Backend.read_strings``), or None when it is none."""
    stype = string_type(arr)
    if stype is None:
        return None
    data = np.asarray(arr[...])
    if stype.kind in (VLEN_UTF8, VLEN_BYTES):
        return as_object_array(data, text=stype.kind == VLEN_UTF8)
    return data


def string_array(stype: StringType, data: Any) -> tuple[Any, np.ndarray, dict[str, Any]]:
    """``(zarr dtype, data, attributes)`` of the array holding the strings ``data`` as
    ``stype``: zarr's type for it (fixed-length UTF-8, which zarr lacks, as fixed-length bytes
    with the kind recorded)."""
    from ptd.storage.zarr.private import VariableLengthBytes

    arr = np.asarray(data)
    if stype.kind in (FIXED_BYTES, FIXED_UTF8):
        if arr.dtype.kind != "S":
            arr = as_object_array(arr, text=False).astype(f"S{stype.length}")
        extra = {STRING_TYPE_ATTR: stype.tag()} if stype.kind == FIXED_UTF8 else {}
        dt = np.dtype(f"S{stype.length}")
        return dt, np.asarray(arr, dtype=dt), extra
    if stype.kind == FIXED_UTF32:
        dt = np.dtype(f"U{stype.length}")
        return dt, as_object_array(arr, text=True).astype(dt), {}
    if stype.kind == VLEN_BYTES:
        return VariableLengthBytes(), as_object_array(arr, text=False), {}
    return str, as_object_array(arr, text=True), {}


def create_strings(
    be: Any,
    path: Any,
    stype: StringType,
    data: np.ndarray,
    *,
    attrs: Mapping[str, Any] | None = None,
    chunks: Any = None,
) -> None:
    """``ZarrBackend.create_strings``: the array of zarr's type for ``stype`` (replacing a
    node at ``path``), filled with ``data``."""
    try:
        dtype, values, extra = string_array(stype, data)
    except (ValueError, TypeError) as err:
        raise PtdValueError(
            f"cannot write key {be.key_str(path)!r} to {be.location} as {stype.tag()} "
            f"strings: {err}"
        ) from None
    kwargs = be._create_kwargs(values.shape, None, chunks)
    kwargs["attributes"] = {**attrs_json(dict(attrs or {})), **extra}
    arr = be._new_array(path, values.shape, dtype, None, kwargs)
    if values.size:
        arr[...] = values


def encode(
    value: Any, stack_shape: tuple[int, ...] | None, key: str, location: str
) -> tuple[np.ndarray, dict[str, Any], bool]:
    """``(data, attributes, strings)`` of the array holding a non-tensor: one value
    (``stack_shape`` None) or a stack (``value`` nested lists of ``stack_shape``, checked).
    ``strings``: the data is a string array of the stack's shape, else a payload."""
    attributes: dict[str, Any] = {}
    if stack_shape is not None:
        attributes[TD_STACK_ATTR] = list(stack_shape)
        if all_of_type(value, len(stack_shape), str):
            arr = nested_to_array(value, stack_shape, key=key, location=location)
            return arr, attributes, True
        nested_to_array(value, stack_shape, key=key, location=location)  # shape check
    payload, encoding = encode_payload(value)
    attributes[TD_NON_TENSOR_ATTR] = {"encoding": encoding}
    return np.frombuffer(payload, dtype=np.uint8), attributes, False


def check_stack_marker(
    attrs: Mapping[str, Any], shape: tuple[int, ...], key: str, location: str
) -> None:
    """Check the ``__tensordict_stack__`` marker of an array of ``shape``: a shape, and for a
    string stack (no payload) the array's own shape; else PtdValueError."""
    stack = attrs.get(TD_STACK_ATTR)
    if stack is None:
        return
    payload = attrs.get(TD_NON_TENSOR_ATTR) is not None
    stack_shape = parse_stack_shape(stack)
    if stack_shape is None or (not payload and stack_shape != shape):
        raise PtdValueError(
            f"Corrupt non-tensor stack (key {key!r} in {location}): its "
            f"{TD_STACK_ATTR} attribute {stack!r} is not a shape"
            + ("" if payload else f" equal to the array's {list(shape)}")
        )


def decode(
    arr: Any,
    key: str,
    location: str,
    selection: Selection,
    *,
    allow_pickle: bool | None,
    as_stack: bool,
    read_rows: Callable[[Any, Selection], np.ndarray],
) -> NonTensorPayload:
    """The non-tensor in the ``zarr.Array`` ``arr`` (its stack marker already checked by
    :func:`check_stack_marker`): a payload, a string stack, a foreign column read as a stack
    (``as_stack``), or one value. ``read_rows`` reads the rows ``selection`` picks."""
    attrs = arr.metadata.attributes
    marker = attrs.get(TD_NON_TENSOR_ATTR)
    stack = attrs.get(TD_STACK_ATTR)
    if marker is not None:
        encoding = marker.get("encoding") if isinstance(marker, dict) else None
        raw = np.asarray(arr[...])
        if raw.dtype != np.uint8 or raw.ndim != 1:
            raise PtdValueError(
                f"Corrupt non-tensor payload (key {key!r} in {location}): expected "
                f"a 1-D uint8 array, got {raw.dtype} of shape {list(raw.shape)}"
            )
        value = decode_payload(
            raw.tobytes(), encoding, allow_pickle=allow_pickle, key=key, location=location
        )
        if stack is None:
            return NonTensorPayload(value)
        stack_shape = parse_stack_shape(stack)
        assert stack_shape is not None  # checked by check_stack_marker
        if not has_nested_shape(value, stack_shape):
            raise PtdValueError(
                f"Corrupt non-tensor stack (key {key!r} in {location}): the decoded "
                f"value is not a nested list of shape {list(stack_shape)}"
            )
        shape = selection_shape(stack_shape, selection)
        value = select_nested(value, selection)
        return NonTensorPayload(value, is_stack=bool(shape), stack_shape=shape)
    if stack is not None or (as_stack and arr.ndim):
        return NonTensorPayload.of_rows(read_rows(arr, selection))
    value = arr[...] if arr.ndim else arr[()]
    if isinstance(value, np.ndarray) and value.dtype.kind == "T":
        value = value.astype(object)
    elif isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    return NonTensorPayload(value)
