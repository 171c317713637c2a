"""String arrays as types of their own, so that a conversion keeps them as they are.

A store's string array (h5py's fixed-length ``|S n`` and variable-length strings, zarr's
``null_terminated_bytes``, ``fixed_length_utf32``, ``string`` and ``variable_length_bytes``) is
one of five :class:`StringType` kinds. Each backend says which kind an array is
(``Backend.string_type``), reads it whole (``read_strings``) and creates one of a kind
(``create_strings``), in its format's own type for that kind. A kind the destination format
lacks (HDF5 has no UTF-32, zarr no fixed-length UTF-8) is stored as its nearest type and the
kind is recorded in the array's ``__ptd_string_type__`` attribute (:data:`STRING_TYPE_ATTR`,
its :meth:`StringType.tag`), which the backend reads back: converting back restores the kind.

>>> StringType.parse("fixed_bytes:7"), StringType(VLEN_UTF8).tag()
(StringType(kind='fixed_bytes', length=7), 'vlen_utf8')
>>> StringType.parse("fixed_bytes") is None, StringType.parse(3) is None
(True, True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ptd.format.names import STRING_TYPE_ATTR

if TYPE_CHECKING:
    pass

__all__ = [
    "FIXED_BYTES",
    "FIXED_UTF8",
    "FIXED_UTF32",
    "STRING_TYPE_ATTR",
    "VLEN_BYTES",
    "VLEN_UTF8",
    "StringType",
    "as_object_array",
]

#: fixed-length bytes, NUL padded (numpy ``S n``; h5 ``|S n`` ASCII; zarr null_terminated_bytes)
FIXED_BYTES = "fixed_bytes"
#: fixed-length UTF-8 text of ``length`` bytes (h5 only; numpy ``S n``)
FIXED_UTF8 = "fixed_utf8"
#: fixed-length text of ``length`` characters (numpy ``U n``; zarr fixed_length_utf32)
FIXED_UTF32 = "fixed_utf32"
#: variable-length UTF-8 text (h5py's ``string_dtype()``; zarr ``string``)
VLEN_UTF8 = "vlen_utf8"
#: variable-length bytes (h5py's ``string_dtype("ascii")``; zarr variable_length_bytes)
VLEN_BYTES = "vlen_bytes"

_FIXED = (FIXED_BYTES, FIXED_UTF8, FIXED_UTF32)
_KINDS = _FIXED + (VLEN_UTF8, VLEN_BYTES)


@dataclass(frozen=True)
class StringType:
    """One kind of string array; ``length`` (of the fixed kinds only) in bytes, or in
    characters for :data:`FIXED_UTF32`."""

    kind: str
    length: int | None = None

    def tag(self) -> str:
        """The text recorded in :data:`STRING_TYPE_ATTR`: ``kind`` or ``kind:length``."""
        return self.kind if self.length is None else f"{self.kind}:{self.length}"

    @classmethod
    def parse(cls, tag: Any) -> StringType | None:
        """The type a :meth:`tag` names, or None for anything else (a foreign attribute)."""
        if not isinstance(tag, str):
            return None
        kind, _, length = tag.partition(":")
        if kind not in _KINDS:
            return None
        if kind in _FIXED:
            if not length.isdigit() or int(length) < 1:
                return None
            return cls(kind, int(length))
        return cls(kind) if not length else None


def as_object_array(data: Any, text: bool) -> np.ndarray:
    """``data`` (any array of strings or bytes, any shape) as an object array of str
    (``text``) or bytes, of the same shape."""
    arr = np.asarray(data)
    out = np.empty(arr.shape, dtype=object)
    flat = out.reshape(-1)
    for i, v in enumerate(arr.reshape(-1).tolist()):
        if text:
            flat[i] = v.decode("utf-8") if isinstance(v, bytes) else str(v)
        else:
            flat[i] = v.encode("utf-8") if isinstance(v, str) else bytes(v)
    return out
