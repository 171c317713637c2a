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

from ptd.errors import PtdMemoryError, StoreIOError

__all__ = ["check_chunks", "check_free_space", "check_read", "nbytes_of", "physical_memory"]


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
