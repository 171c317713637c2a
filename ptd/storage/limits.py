"""Sanity limits checked before ptd allocates memory or fills a disk on a store's word.

A damaged or hostile store can declare any shape: ``[2**40, 4]`` costs a few bytes of metadata.
Reading it whole, or exporting it, must fail at once with a ptd error rather than exhaust the
machine's memory (or its disk) or run for days.

>>> check_read(1024, "key 'x' of data.h5")
>>> check_read(1 << 62, "key 'x' of data.h5")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ptd.errors.PtdMemoryError: cannot read key 'x' of data.h5: it needs 4.6e+18 bytes, more than this machine's memory ...
"""

from __future__ import annotations

import functools
import math
import os
import shutil
from collections.abc import Sequence

import numpy as np

from ptd.errors import PtdMemoryError, PtdValueError, StoreIOError, StoreLimitError
from ptd.storage import runtime

__all__ = [
    "check_chunks",
    "check_declared",
    "check_depth",
    "check_free_space",
    "check_json",
    "check_read",
    "json_depth",
    "limit",
    "nbytes_of",
    "physical_memory",
    "show_path",
]


def limit(name: str) -> int:
    """The integer value of the ``PTD_MAX_*`` setting ``name`` (see ``runtime.SETTINGS``)."""
    text = runtime.setting(name)
    try:
        value = int(text)
    except ValueError:
        raise PtdValueError(
            f"the environment variable {name} must be an integer >= 1, got {text!r}"
        ) from None
    return max(1, value)


def check_declared(shape: Sequence[int], itemsize: int, what: str) -> None:
    """Raise PtdMemoryError when an array of ``shape`` declares more bytes than
    ``PTD_MAX_ARRAY_BYTES`` (1 PiB by default: no real array is that large, and a few bytes of
    metadata can declare 2**62 elements).

    >>> check_declared((2**62,), 1, "key 'x' of s.zarr")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ptd.errors.PtdMemoryError: key 'x' of s.zarr declares 4.6e+18 bytes ..., more than ...
    """
    n = nbytes_of(shape, itemsize)
    most = limit("PTD_MAX_ARRAY_BYTES")
    if n > most:
        raise PtdMemoryError(
            f"{what} declares {n:.2g} bytes (shape {list(shape)}), more than the limit of "
            f"{most:.2g} bytes (PTD_MAX_ARRAY_BYTES); the store is probably damaged"
        )


def show_path(path: Sequence[str], keep: int = 4) -> str:
    """A key for a message, with the middle of a very deep one left out.

    >>> show_path(["g"] * 300)
    "'g/g/g/g/.../g/g/g/g' (300 levels)"
    """
    parts = list(path)
    if len(parts) <= 2 * keep + 1:
        return repr("/".join(parts))
    head, tail = "/".join(parts[:keep]), "/".join(parts[-keep:])
    return f"'{head}/.../{tail}' ({len(parts)} levels)"


def check_depth(path: Sequence[str], where: str) -> None:
    """Raise StoreLimitError when ``path`` is nested deeper than ``PTD_MAX_DEPTH`` (256:
    tensordicts nest a handful of levels, HDF5 files from instruments a few dozen)."""
    most = limit("PTD_MAX_DEPTH")
    if len(path) > most:
        raise StoreLimitError(
            f"{where} nests groups more than {most} levels deep, at {show_path(path)} "
            "(PTD_MAX_DEPTH); the store is probably damaged or hostile"
        )


_QUOTE = ord('"')
#: every byte but quotes and brackets, for ``bytes.translate`` to delete
_NOT_QUOTE_OR_BRACKET = bytes(b for b in range(256) if b not in b'"[]{}')
#: +1 for an opening bracket, -1 for a closing one, indexed by byte value
_BRACKET_STEP = np.zeros(256, dtype=np.int8)
_BRACKET_STEP[list(b"[{")] = 1
_BRACKET_STEP[list(b"]}")] = -1
#: brackets :func:`json_depth` counts at a time (its arrays are a few times this in bytes)
_DEPTH_BLOCK = 1 << 22


def json_depth(raw: bytes) -> int:
    r"""The deepest nesting of JSON text ``raw`` (a scalar is 0, ``[]`` is 1), measured on the
    text without parsing it: escaped backslashes and quotes are dropped, then every byte but
    quotes and brackets; a bracket after an odd number of quotes is inside a string, and the
    running count of the others peaks at the depth. Up to the first byte a parser rejects,
    its tokens and these agree (a string it leaves open only adds brackets here), so its
    nesting never exceeds this count: text this calls shallow cannot send a recursive parser
    deep, valid JSON or not. In C (``bytes`` methods, numpy): about 10 ms for a megabyte of
    consolidated metadata.

    >>> json_depth(b'{"a": [1, {"b": "]]] \\" [[["}]}')
    3
    >>> json_depth(b'["\\\\", [[]]]')
    3
    >>> json_depth(b"[" * 300)
    300
    """
    if b"\\" in raw:
        # pairs of backslashes first (left to right, as a parser pairs them), then what is
        # left of an odd run escapes the quote after it
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    tokens = raw.translate(None, _NOT_QUOTE_OR_BRACKET)
    deepest = depth = 0
    inside = 0  # 1 within a string at the start of the block
    for at in range(0, len(tokens), _DEPTH_BLOCK):
        block = np.frombuffer(
            tokens, dtype=np.uint8, count=min(_DEPTH_BLOCK, len(tokens) - at), offset=at
        )
        quotes = np.cumsum(block == _QUOTE, dtype=np.int64) + inside
        steps = np.where(quotes % 2 == 1, 0, _BRACKET_STEP[block])
        running = np.cumsum(steps, dtype=np.int64) + depth
        deepest = max(deepest, int(running.max()))
        depth, inside = int(running[-1]), int(quotes[-1] % 2)
    return deepest


def check_json(data: bytes | str, what: str) -> None:
    """Raise StoreLimitError when a metadata document is larger than
    ``PTD_MAX_JSON_BYTES`` or nested deeper than ``PTD_MAX_JSON_DEPTH``, before a parser that
    recurses (Python's ``json``, hence zarr) or the code that walks its result sees it.

    Cheap for what real stores hold: a document with fewer brackets than the depth limit
    cannot be too deep; one with more is measured by :func:`json_depth` on its text, without
    parsing it. Invalid JSON is left to the caller's parser and its error.

    >>> check_json(b'{"a": [1, 2]}', "s.zarr/zarr.json")
    >>> check_json(b"[" * 5000 + b"]" * 5000, "s.zarr/zarr.json")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ptd.errors.StoreLimitError: s.zarr/zarr.json is nested more than 128 levels deep ...
    """
    raw = data.encode() if isinstance(data, str) else bytes(data)
    most_bytes = limit("PTD_MAX_JSON_BYTES")
    if len(raw) > most_bytes:
        raise StoreLimitError(
            f"{what} holds {len(raw)} bytes of metadata, more than the limit of {most_bytes} "
            "(PTD_MAX_JSON_BYTES); the store is probably damaged or hostile"
        )
    most = limit("PTD_MAX_JSON_DEPTH")
    if raw.count(b"[") + raw.count(b"{") <= most:
        return
    if json_depth(raw) > most:
        raise StoreLimitError(
            f"{what} is nested more than {most} levels deep (PTD_MAX_JSON_DEPTH); the store "
            "is probably damaged or hostile"
        )


@functools.lru_cache(maxsize=1)
def physical_memory() -> int:
    """Bytes of physical memory (a large number when the platform does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):  # pragma: no cover - non-POSIX
        return 1 << 50


def nbytes_of(shape: Sequence[int], itemsize: int) -> int:
    """``prod(shape) * itemsize`` in python ints (no overflow, whatever the shape)."""
    return math.prod(int(d) for d in shape) * int(itemsize)


def check_read(nbytes: int, what: str) -> None:
    """Raise PtdMemoryError when reading ``nbytes`` cannot fit in this machine's memory."""
    if nbytes > physical_memory():
        raise PtdMemoryError(
            f"cannot read {what}: it needs {nbytes:.2g} bytes, more than this machine's memory "
            f"({physical_memory():.2g} bytes); read fewer rows (index it first), or check the "
            "store: a damaged one can declare any shape"
        )


def check_chunks(chunks: Sequence[int] | None, itemsize: int, what: str) -> None:
    """A chunk is decoded whole: raise PtdMemoryError when one cannot fit in memory."""
    if chunks:
        n = nbytes_of(chunks, itemsize)
        if n > physical_memory():
            raise PtdMemoryError(
                f"cannot read {what}: one of its chunks ({list(chunks)}) needs {n:.2g} bytes, "
                f"more than this machine's memory ({physical_memory():.2g} bytes); the store is "
                "probably damaged"
            )


def check_free_space(directory: str, nbytes: int, what: str) -> None:
    """Raise StoreIOError when ``directory``'s file system has less than ``nbytes`` free."""
    try:
        free = shutil.disk_usage(directory).free
    except OSError:  # pragma: no cover - the write itself will report the problem
        return
    if nbytes > free:
        raise StoreIOError(
            f"cannot write {what}: it needs {nbytes:.3g} bytes and {directory} has only "
            f"{free:.3g} bytes free"
        )
