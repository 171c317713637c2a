"""The dtype table, keyed by torch dtype *names* (``"float32"``, ``"bfloat16"``): which numpy
dtype stores each, without importing torch.

Most torch dtypes have a numpy twin and are stored as such. Those numpy lacks (bfloat16, the
float8 family) are stored as unsigned integers of the same width, which keeps every bit, and
the torch dtype's name is recorded in the ``__ptd_dtype__`` attribute of the array.
:mod:`ptd.ops.dtypes` maps these names to torch dtypes.

>>> torch_dtype_name(np.dtype("<f4")), torch_dtype_name(np.dtype(">i8"))
('float32', 'int64')
>>> torch_dtype_name(np.dtype("uint16"), {"__ptd_dtype__": "bfloat16"})
'bfloat16'
>>> torch_dtype_name(np.dtype("S5")) is None
True
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ptd.format.names import PTD_DTYPE_ATTR

__all__ = ["BITS", "DIRECT", "STORABLE", "canonical_name", "torch_dtype_name"]

#: torch dtype name -> the numpy dtype that stores it directly
DIRECT: dict[str, np.dtype] = {
    name: np.dtype(name if name != "bool" else np.bool_)
    for name in (
        "bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
        "float16", "float32", "float64", "complex64", "complex128",
    )
}  # fmt: skip
_BY_NUMPY: dict[np.dtype, str] = {v: k for k, v in DIRECT.items()}

#: torch dtype name -> the unsigned integer dtype holding its bits (numpy has no such dtype)
BITS: dict[str, np.dtype] = {
    "bfloat16": np.dtype(np.uint16),
    "float8_e4m3fn": np.dtype(np.uint8),
    "float8_e5m2": np.dtype(np.uint8),
    "float8_e4m3fnuz": np.dtype(np.uint8),
    "float8_e5m2fnuz": np.dtype(np.uint8),
}

#: every torch dtype name ptd can store
STORABLE: frozenset[str] = frozenset(DIRECT) | frozenset(BITS)


def canonical_name(name: str) -> str | None:
    """``"torch.bfloat16"`` or ``"bfloat16"`` -> ``"bfloat16"``; None when not storable."""
    name = str(name).removeprefix("torch.")
    return name if name in STORABLE else None


def torch_dtype_name(np_dtype: Any, attrs: Mapping[str, Any] | None = None) -> str | None:
    """The torch dtype name of a stored array, or None when it holds no tensor.

    A ``__ptd_dtype__`` marker names a bits-stored dtype (it must match the stored width);
    big-endian arrays of a numeric dtype map to their native twin (they are byte-swapped on
    read); strings, objects, compound and long-double arrays have none.
    """
    np_dtype = np.dtype(np_dtype)
    marker = (attrs or {}).get(PTD_DTYPE_ATTR)
    if marker is not None:
        if isinstance(marker, bytes):
            marker = marker.decode(errors="replace")
        name = canonical_name(str(marker))
        if name in BITS and np_dtype.itemsize == BITS[name].itemsize:
            return name
        return None
    if np_dtype.kind not in "biufc" or np_dtype.fields is not None:
        return None
    if np_dtype.byteorder not in ("=", "|", "<" if np.little_endian else ">"):
        np_dtype = np_dtype.newbyteorder("=")
    return _BY_NUMPY.get(np_dtype)
