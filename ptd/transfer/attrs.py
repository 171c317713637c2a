"""Attributes and strings between formats: the attributes that are the user's, strings that
h5 hands back as bytes decoded, and which unmarked string arrays are columns (one string per
row). How each format holds an attribute value is its policy's
(``FormatPolicy.attrs_for``/``attr_problem``, from :mod:`ptd.format.attrvalues`).

>>> decode_str([b"caf\\xc3\\xa9", [b"x"]])
['café', ['x']]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ptd.format.names import PTD_JSON_ATTR, RESERVED_ATTRS, TD_NON_TENSOR_ATTR
from ptd.storage.api import ArrayMeta, FormatPolicy, ValueKind

__all__ = ["decode_str", "is_column", "user_attrs"]


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


def is_column(meta: ArrayMeta, src: FormatPolicy) -> bool:
    """An unmarked string array with dims (or bytes array, in a format that reads those as
    columns: :attr:`~ptd.storage.api.FormatPolicy.bytes_columns`): one value per element."""
    if meta.kind is not ValueKind.NON_TENSOR or meta.stack_shape is not None or not meta.shape:
        return False
    if TD_NON_TENSOR_ATTR in meta.attrs or meta.attrs.get(PTD_JSON_ATTR):
        return False
    return meta.non_tensor_kind == "str" or (meta.non_tensor_kind == "bytes" and src.bytes_columns)
