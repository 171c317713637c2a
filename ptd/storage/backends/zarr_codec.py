"""How values without a tensor form, and attributes, are stored in zarr (tensordict 0.15's
conventions; see :mod:`ptd.storage.backends.zarr`).

A non-tensor is a 1-D ``uint8`` array holding its JSON or pickle *payload*, marked
``__tensordict_non_tensor__: {"encoding": ...}`` (:mod:`ptd.format.payload` picks the encoding
and applies the ``allow_pickle`` policy); a stack is a payload of the nested list, marked
``__tensordict_stack__`` with its shape too. Stacks of str are zarr ``string`` arrays of the
stack's shape marked ``__tensordict_stack__``. Attributes are JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ptd.errors import PtdValueError
from ptd.format.names import TD_NON_TENSOR_ATTR, TD_STACK_ATTR
from ptd.format.payload import (
    all_of_type,
    decode_payload,
    encode_payload,
    has_nested_shape,
    nested_to_array,
    parse_stack_shape,
    select_nested,
)
from ptd.storage.backends.meta import NonTensorPayload
from ptd.storage.backends.selection import Selection, selection_shape

__all__ = ["jsonable", "non_tensor_kind", "encode", "check_stack_marker", "decode"]


def jsonable(value: Any) -> Any:
    """An attribute value as JSON-able python (numpy scalars/arrays -> python/lists)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


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
