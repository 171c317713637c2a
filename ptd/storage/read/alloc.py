"""Keeping freshly allocated read buffers off the page-fault path.

Every read returns a new array. glibc's malloc serves a request of 128 KiB or more with a fresh
``mmap`` (and gives the memory back when it is freed) until its dynamic rule has raised that
threshold, and it trims the free top of its heap above 128 KiB; in a process that holds torch
and a PersistentTensorDict the rule often never kicks in. Each 1 MB slice of a sequential pass
then lands in new pages that the kernel faults in and zeroes one by one: on the benchmark
machine this made ptd's first pass of 4096-row slices 4x slower than the same copies into
reused memory (117,000 faults per 525 MB pass against none).

:func:`tune_malloc` sets the two thresholds once per process to the values glibc's own dynamic
rule would reach (``M_MMAP_THRESHOLD`` 32 MiB, its maximum; ``M_TRIM_THRESHOLD`` 64 MiB, twice
that), so that buffers up to 32 MiB are recycled from the heap. The cost: up to 64 MiB of freed
memory may stay with the process instead of going back to the OS. It is called when a store's
fast path is first set up; nothing is changed when ``PTD_MALLOC_TUNE=0``, when the user set
``MALLOC_MMAP_THRESHOLD_``/``MALLOC_TRIM_THRESHOLD_`` themselves, or off glibc.
"""

from __future__ import annotations

import os
import sys

from ptd.storage import runtime

__all__ = ["ENV_VAR", "MMAP_THRESHOLD", "TRIM_THRESHOLD", "tune_malloc"]

#: the environment variable that leaves malloc alone (``PTD_MALLOC_TUNE=0``)
ENV_VAR = "PTD_MALLOC_TUNE"
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 64 << 20
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_done = False


def tune_malloc() -> bool:
    """Set glibc's malloc thresholds (see the module doc), once per process. Returns whether
    they were set by this call."""
    global _done
    if _done:
        return False
    _done = True
    if not sys.platform.startswith("linux"):
        return False
    if not runtime.enabled(ENV_VAR):
        return False
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or "MALLOC_TRIM_THRESHOLD_" in os.environ:
        return False
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
        mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        mallopt.restype = ctypes.c_int
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    ok = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1)
    return bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1) and ok
