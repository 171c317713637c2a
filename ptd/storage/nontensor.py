"""How much memory reading a non-tensor entry may take, checked before anything is allocated.

A non-tensor entry (a JSON or pickle payload, a string array, a foreign column read as a
stack) is decoded whole into Python objects. Its metadata can declare any shape: a payload
array of ``[2**32]`` bytes is 30 bytes of JSON, and reading it would allocate 4 GiB twice (the
array, then its bytes). So every non-tensor read is first bounded by a limit,
``PTD_MAX_NON_TENSOR`` (default :data:`DEFAULT_LIMIT`), and each backend checks what it can
against the bytes the store really holds (zarr: an uncompressed payload must have its bytes
stored, :func:`check_payload_stored`).

>>> check_non_tensor_read(1 << 10, "key 's' of data.zarr", "a 1024-byte payload")
>>> check_non_tensor_read(1 << 40, "key 's' of data.zarr", "a 2**40-byte payload")
... # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ptd.errors.PtdMemoryError: cannot read key 's' of data.zarr: it is a 2**40-byte payload, ...
"""

from __future__ import annotations

import contextlib
import math

from ptd.errors import CorruptStoreError, PtdMemoryError
from ptd.storage import runtime
from ptd.storage.limits import nbytes_of
from ptd.storage.meta import ArrayMeta
from ptd.storage.read.cache import parse_budget
from ptd.storage.selection import Selection, selection_shape

__all__ = [
    "DEFAULT_LIMIT",
    "ENV_VAR",
    "check_non_tensor_read",
    "check_payload_stored",
    "non_tensor_limit",
    "read_estimate",
]

#: the environment variable that sets the limit ("1GiB", "512MB", bytes)
ENV_VAR = "PTD_MAX_NON_TENSOR"
#: 256 MiB: far above the values tensordict stores as non-tensors (strings, configs, small
#: objects, stacks of them), and small enough that a store lying about one costs little
DEFAULT_LIMIT = 256 << 20
#: what one element of a variable-length (object) array costs at least: its reference
_OBJECT_ITEM = 8


def non_tensor_limit() -> int:
    """The limit in bytes: ``PTD_MAX_NON_TENSOR`` when set, else :data:`DEFAULT_LIMIT`."""
    text = runtime.setting(ENV_VAR)
    if not text:
        return DEFAULT_LIMIT
    return parse_budget(text, f"the environment variable {ENV_VAR}")


def check_non_tensor_read(nbytes: int, where: str, what: str) -> None:
    """Raise PtdMemoryError when reading ``nbytes`` (``what`` the entry ``where`` is) is more
    than :func:`non_tensor_limit` allows."""
    limit = non_tensor_limit()
    if nbytes > limit:
        raise PtdMemoryError(
            f"cannot read {where}: it is {what}, {nbytes:.3g} bytes to decode at once, more "
            f"than the limit for a non-tensor entry ({ENV_VAR}={limit} bytes); raise "
            f"{ENV_VAR} for a store you trust, or check the store: a damaged one can declare "
            "any shape"
        )


def read_estimate(meta: ArrayMeta, selection: Selection, *, payload: bool) -> tuple[int, str]:
    """``(bytes, description)`` of what reading ``selection`` of the non-tensor ``meta``
    allocates at least: a payload is read whole (its bytes), any other array the selected
    elements (their itemsize, or a reference each for variable-length ones)."""
    shape = tuple(int(n) for n in meta.shape)
    if payload:
        n = nbytes_of(shape, meta.dtype.itemsize)
        return n, f"a payload of {n} bytes (shape {list(shape)})"
    if selection:
        # a selection of a stack's rows, not of the array: the whole array bounds it
        with contextlib.suppress(IndexError, TypeError, ValueError):
            shape = selection_shape(shape, selection)
    dt = meta.dtype
    item = max(dt.itemsize, _OBJECT_ITEM) if dt.kind in "OT" else dt.itemsize
    n = nbytes_of(shape, max(1, item))
    return n, f"an array of {math.prod(shape)} {dt} values (shape {list(shape)})"


def check_payload_stored(declared: int, stored: int | None, where: str) -> None:
    """An uncompressed payload of ``declared`` bytes needs them stored: ``stored`` (the bytes
    under the array, metadata included; None when the store cannot tell) below ``declared``
    is a lie (missing or cut chunks), a CorruptStoreError."""
    if stored is not None and stored < declared:
        raise CorruptStoreError(
            f"cannot read {where}: its payload declares {declared} bytes but the store holds "
            f"only {stored} bytes under it, uncompressed (missing or truncated chunks: the "
            "store is damaged)"
        )
