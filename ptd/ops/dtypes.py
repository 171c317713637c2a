"""The one table between torch dtypes and stored (numpy) dtypes.

Most torch dtypes have a numpy twin and are stored as such. Those numpy lacks (bfloat16, the
float8 family) are stored as unsigned integers of the same width, which keeps every bit, and the
torch dtype is recorded in the ``__ptd_dtype__`` attribute of the array::

    >>> import torch
    >>> from ptd.ops.dtypes import to_storage, from_storage
    >>> t = torch.tensor([1.5, -2.0], dtype=torch.bfloat16)
    >>> arr, attrs = to_storage(t, key="x")
    >>> arr.dtype, attrs
    (dtype('uint16'), {'__ptd_dtype__': 'bfloat16'})
    >>> from_storage(arr, attrs)
    tensor([ 1.5000, -2.0000], dtype=torch.bfloat16)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from ptd.errors import UnsupportedDtypeError
from ptd.format import dtypes as fmt_dtypes
from ptd.format.names import PTD_DTYPE_ATTR

__all__ = [
    "dtype_abbrev",
    "dtype_from_str",
    "from_storage",
    "storage_dtype",
    "to_storage",
    "torch_dtype_of",
]

#: torch dtype -> the numpy dtype storing it directly (built from :mod:`ptd.format.dtypes`)
_DIRECT: dict[torch.dtype, np.dtype] = {getattr(torch, n): d for n, d in fmt_dtypes.DIRECT.items()}

#: torch dtypes numpy lacks: stored as the bits of an unsigned int of the same width
_BITS: dict[torch.dtype, tuple[np.dtype, torch.dtype]] = {
    getattr(torch, n): (d, getattr(torch, str(d)))
    for n, d in fmt_dtypes.BITS.items()
    if hasattr(torch, n)
}

_BY_NAME: dict[str, torch.dtype] = {
    str(d).removeprefix("torch."): d for d in list(_DIRECT) + list(_BITS)
}


def dtype_from_str(name: str) -> torch.dtype:
    """``"bfloat16"`` or ``"torch.bfloat16"`` -> ``torch.bfloat16``.

    >>> dtype_from_str("torch.int64")
    torch.int64
    """
    found = _BY_NAME.get(name)
    if found is not None:
        return found
    try:
        return _BY_NAME[name.removeprefix("torch.")]
    except KeyError:
        raise UnsupportedDtypeError(f"unknown torch dtype {name!r}") from None


def storage_dtype(dtype: torch.dtype, key: str = "?") -> tuple[np.dtype, dict[str, str]]:
    """The numpy dtype a torch dtype is stored as, and the attributes that mark it."""
    if dtype in _DIRECT:
        return _DIRECT[dtype], {}
    if dtype in _BITS:
        return _BITS[dtype][0], {PTD_DTYPE_ATTR: str(dtype).removeprefix("torch.")}
    raise UnsupportedDtypeError(
        f"cannot store key {key!r}: dtype {dtype} is not supported "
        f"(supported: {', '.join(sorted(_BY_NAME))})"
    )


def to_storage(tensor: torch.Tensor, key: str = "?") -> tuple[np.ndarray, dict[str, str]]:
    """A numpy array holding ``tensor``'s bits, and the attributes to store beside it.

    The array shares memory with ``tensor`` when it is on the CPU and contiguous.
    """
    tensor = tensor.detach()
    if tensor.device.type != "cpu":
        tensor = tensor.cpu()
    np_dtype, attrs = storage_dtype(tensor.dtype, key)
    if tensor.dtype in _BITS:
        tensor = tensor.contiguous().view(_BITS[tensor.dtype][1])
    if tensor.is_conj():
        tensor = tensor.resolve_conj()
    if tensor.is_neg():
        tensor = tensor.resolve_neg()
    arr = tensor.numpy()
    assert arr.dtype == np_dtype
    return arr, attrs


def torch_dtype_of(
    np_dtype: np.dtype, attrs: Mapping[str, Any] | None = None
) -> torch.dtype | None:
    """The torch dtype of a stored array, or ``None`` when it is not a tensor (see
    :func:`ptd.format.dtypes.torch_dtype_name`)."""
    name = fmt_dtypes.torch_dtype_name(np_dtype, attrs)
    return _BY_NAME.get(name) if name is not None else None


def from_storage(
    arr: np.ndarray, attrs: Mapping[str, Any] | None = None, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """Turn a stored array (as read) into a tensor of its torch dtype, without a second copy."""
    if dtype is None:
        dtype = torch_dtype_of(arr.dtype, attrs)
        if dtype is None:
            raise UnsupportedDtypeError(f"stored dtype {arr.dtype} has no torch equivalent")
    flags = arr.flags
    if not (flags.writeable and flags.c_contiguous and arr.dtype.isnative):
        if not arr.dtype.isnative:
            arr = arr.astype(arr.dtype.newbyteorder("="))
        arr = (
            np.array(arr, order="C", copy=True)
            if not (arr.flags.writeable and arr.flags.c_contiguous)
            else arr
        )
    t = torch.from_numpy(arr)
    if dtype in _BITS:
        t = t.view(dtype)
    return t


def dtype_abbrev(dtype: torch.dtype) -> str:
    """tensordict's short dtype names used in reprs: ``f32``, ``i64``, ``u8``, ``bool``, ``bf16``.

    >>> dtype_abbrev(torch.float32), dtype_abbrev(torch.bfloat16), dtype_abbrev(torch.bool)
    ('f32', 'bf16', 'bool')
    """
    name = str(dtype).removeprefix("torch.")
    for long, short in (
        ("bfloat", "bf"),
        ("float", "f"),
        ("uint", "u"),
        ("int", "i"),
        ("complex", "c"),
    ):
        if name.startswith(long):
            return short + name[len(long) :]
    return name
