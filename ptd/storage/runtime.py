"""The process ptd runs in: its threads, what happens at ``fork``, and its ``PTD_*`` settings.

**Threads.** ptd makes its threads here and nowhere else, in three kinds:

* one **CPU pool** (:func:`cpu_pool`), shared by every open store: it decodes chunks
  (:mod:`ptd.storage.read.decoded`) and splits large copies out of memory maps
  (:mod:`ptd.storage.read.mapped`). Its size is :func:`decode_threads`:
  ``PTD_DECODE_THREADS``, else ``torch.get_num_threads()`` when torch is loaded (1 in a
  DataLoader worker, which is parallel already), else the CPU count; at most 16.
* one bounded **I/O executor** (:func:`io_map`, :func:`io_submit`): many small store
  operations at once (creating or reading thousands of small zarr arrays, a dataset's read
  ahead), at most ``PTD_IO_THREADS`` (default 8) in flight;
* **job pools** (:func:`job_pool`): the workers of one long job (``convert --workers``,
  ``validate --data``, ``diff``, a memmap export), made for the job and joined when it ends;
  and an object's own thread (:func:`serial_worker`: a dataset's read ahead, one block after
  another; :func:`background`: ``memmap(return_early=True)``).

A task on a shared pool never waits on that same pool: :func:`run_parts` and :func:`io_map`
run inline when called from one of the pool's own threads, so a pool cannot starve itself
however calls nest. Jobs wait on their tasks, so they get threads of their own.

**Fork.** Threads do not survive ``fork``: the shared pools are made again on first use in a
child, and :func:`after_fork_in_child` registers what else a module resets there (the chunk
caches' bookkeeping, the stores that reopen their files). :func:`pid` is this process's id,
kept current by the at-fork hook (cheaper than ``os.getpid()`` on every read).

**Settings.** :data:`SETTINGS` lists every environment variable ptd reads, with its default
and meaning; :func:`setting` reads one (at each call, so a test or a DataLoader worker may set
it). Cancellation (Ctrl-C, SIGTERM) is :mod:`ptd.storage.cancel`'s.

>>> run_parts(pow, [(2, 3), (3, 2)])
[8, 9]
>>> setting("PTD_FAST_PATH") in ("", "0", "1", "false", "off", "no", "true", "on", "yes")
True
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from ptd.errors import PtdValueError

__all__ = [
    "MAX_DECODE_THREADS",
    "SETTINGS",
    "Setting",
    "after_fork_in_child",
    "background",
    "cpu_pool",
    "decode_threads",
    "enabled",
    "io_map",
    "io_submit",
    "io_threads",
    "job_pool",
    "pid",
    "run_parts",
    "serial_worker",
    "set_decode_threads",
    "setting",
]

_T = TypeVar("_T")
_R = TypeVar("_R")


# --- settings ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """One environment variable ptd reads: its default (as the text it would hold) and what
    it does."""

    name: str
    default: str
    doc: str


#: every environment variable ptd reads, by name
SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in (
        Setting(
            "PTD_DECODE_THREADS",
            "",
            "threads of the CPU pool that decodes chunks (an integer >= 1, at most 16); unset: "
            "torch's thread count when torch is loaded, else the CPU count",
        ),
        Setting(
            "PTD_IO_THREADS",
            "8",
            "store operations in flight at once on the I/O executor (an integer >= 1)",
        ),
        Setting(
            "PTD_CHUNK_CACHE",
            "",
            "the decoded-chunk cache budget of each open store ('256MB', '0' for none); "
            "unset: 64 MiB",
        ),
        Setting(
            "PTD_FAST_PATH",
            "1",
            "memory maps for uncompressed, contiguous data (0/false/no/off: read through the "
            "store library)",
        ),
        Setting(
            "PTD_MALLOC_TUNE",
            "1",
            "glibc malloc thresholds set when the fast path starts, so that large read "
            "buffers are not page-faulted again (0/false/no/off: leave malloc alone)",
        ),
        Setting(
            "PTD_MAX_ARRAY_BYTES",
            str(2**50),
            "an array whose shape x itemsize declares more bytes than this (default 1 PiB, far "
            "above any real array) is refused for data reads, checks, diffs and conversions, "
            "and reported by validate (a damaged or hostile store can declare any shape)",
        ),
        Setting(
            "PTD_MAX_CHUNKS",
            str(10**8),
            "a data check or diff visits at most this many chunks of an array whose stored "
            "chunks cannot be listed (remote and zip stores); local stores visit the stored ones",
        ),
        Setting(
            "PTD_MAX_DEPTH",
            "256",
            "groups nested deeper than this are refused (a CorruptStoreError naming the path)",
        ),
        Setting(
            "PTD_MAX_JSON_DEPTH",
            "128",
            "zarr metadata documents (zarr.json, .zarray, .zattrs, .zgroup, consolidated "
            "metadata) nested deeper than this are refused before they are parsed further",
        ),
        Setting(
            "PTD_MAX_JSON_BYTES",
            str(128 * 2**20),
            "zarr metadata documents larger than this many bytes are refused",
        ),
        Setting(
            "PTD_MAX_ATTRS",
            "1000",
            "attributes read from one node; the others are counted, not read",
        ),
        Setting(
            "PTD_MAX_NON_TENSOR",
            "",
            "the most bytes one non-tensor entry (a payload, a string array) may need to be "
            "decoded ('1GiB', '512MB'); unset: 256 MiB",
        ),
        Setting(
            "PTD_UNTESTED_ZARR",
            "",
            "1: use a zarr-python outside the tested range anyway (a warning instead of an error)",
        ),
    )
}

_OFF = frozenset({"0", "false", "no", "off"})


def setting(name: str) -> str:
    """The value of the environment variable ``name`` (one of :data:`SETTINGS`), stripped; its
    default when unset or empty."""
    if name not in SETTINGS:  # a typo here would silently read nothing
        raise KeyError(f"{name} is not one of ptd's settings ({', '.join(SETTINGS)})")
    value = os.environ.get(name, "").strip()
    return value or SETTINGS[name].default


def enabled(name: str) -> bool:
    """Whether an on/off setting is on (anything but 0/false/no/off)."""
    return setting(name).lower() not in _OFF


def _positive_int(name: str, upper: int) -> int | None:
    text = setting(name)
    if not text:
        return None
    try:
        n = int(text)
    except ValueError:
        raise PtdValueError(
            f"the environment variable {name} must be an integer >= 1, got {text!r}"
        ) from None
    return max(1, min(n, upper))


# --- fork ----------------------------------------------------------------------------------

_PID = os.getpid()
_at_fork: list[Callable[[], None]] = []


def pid() -> int:
    """This process's id, kept current across ``fork``."""
    return _PID


def after_fork_in_child(fn: Callable[[], None]) -> Callable[[], None]:
    """Run ``fn`` in every forked child, after this module has reset its own pools (usable as
    a decorator); hooks run in the order they were registered."""
    _at_fork.append(fn)
    return fn


def _forked() -> None:
    global _PID, _lock, _cpu, _io
    _PID = os.getpid()
    # the parent's threads are not here, and its locks may have been held at the fork
    _lock = threading.Lock()
    _cpu = _io = None
    for fn in _at_fork:
        fn()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


# --- the shared pools ------------------------------------------------------------------------

#: the CPU pool's size is at most this
MAX_DECODE_THREADS = 16
_MAX_IO_THREADS = 64

_lock = threading.Lock()
_cpu: tuple[ThreadPoolExecutor, int] | None = None
_io: tuple[ThreadPoolExecutor, int] | None = None
_decode_override: int | None = None
#: set on the shared pools' own threads (which pool a thread belongs to)
_local = threading.local()


def decode_threads() -> int:
    """The CPU pool's size (see the module doc)."""
    if _decode_override is not None:
        return _decode_override
    n = _positive_int("PTD_DECODE_THREADS", MAX_DECODE_THREADS)
    if n is not None:
        return n
    torch = sys.modules.get("torch")
    n = torch.get_num_threads() if torch is not None else (os.cpu_count() or 1)
    return max(1, min(int(n), MAX_DECODE_THREADS))


def set_decode_threads(n: int | None) -> None:
    """Use ``n`` threads to decode chunks in this process (None: back to the default)."""
    global _decode_override
    if n is not None and (not isinstance(n, int) or n < 1):
        raise PtdValueError(f"the decode thread count must be an int >= 1 or None, got {n!r}")
    _decode_override = None if n is None else min(n, MAX_DECODE_THREADS)


def io_threads() -> int:
    """The I/O executor's bound (``PTD_IO_THREADS``, default 8)."""
    return _positive_int("PTD_IO_THREADS", _MAX_IO_THREADS) or 8


def _mark(kind: str) -> None:
    _local.pool = kind


def _pool(kind: str, n: int) -> ThreadPoolExecutor:
    """The shared ``kind`` pool (``"cpu"``/``"io"``) with ``n`` threads, made (again) when
    missing or of another size; the old one finishes what it runs and goes."""
    global _cpu, _io
    with _lock:
        have = _cpu if kind == "cpu" else _io
        if have is not None and have[1] == n:
            return have[0]
        pool = ThreadPoolExecutor(
            max_workers=n,
            thread_name_prefix=f"ptd-{kind}",
            initializer=_mark,
            initargs=(kind,),
        )
        if kind == "cpu":
            _cpu = (pool, n)
        else:
            _io = (pool, n)
    if have is not None:
        have[0].shutdown(wait=False)
    return pool


def cpu_pool() -> ThreadPoolExecutor:
    """The shared CPU pool, of :func:`decode_threads` threads."""
    return _pool("cpu", decode_threads())


def _on(kind: str) -> bool:
    return getattr(_local, "pool", None) == kind


def run_parts(fn: Callable[..., _R], parts: Sequence[tuple[Any, ...]]) -> list[_R]:
    """``[fn(*p) for p in parts]``, the first part on the calling thread and the others on the
    CPU pool at the same time (inline on a pool thread): for splitting one large copy."""
    if len(parts) <= 1 or _on("cpu"):
        return [fn(*p) for p in parts]
    pool = cpu_pool()
    futures = [pool.submit(fn, *p) for p in parts[1:]]
    try:
        first = fn(*parts[0])
    finally:
        wait(futures)  # the first error is raised once every part has ended
    return [first, *(f.result() for f in futures)]


def io_submit(fn: Callable[..., _R], *args: Any) -> Future[_R]:
    """Run ``fn(*args)`` on the I/O executor (at once, inline, on one of its own threads)."""
    if _on("io"):
        done: Future[_R] = Future()
        try:
            done.set_result(fn(*args))
        except BaseException as err:  # noqa: BLE001 - handed to the caller by the future
            done.set_exception(err)
        return done
    return _pool("io", io_threads()).submit(fn, *args)


def io_map(fn: Callable[[_T], _R], items: Iterable[_T]) -> list[_R]:
    """``[fn(x) for x in items]`` on the I/O executor, at most :func:`io_threads` at once, in
    order; the first error is raised once every started call has ended (inline on one of its
    own threads)."""
    todo = list(items)
    if len(todo) <= 1 or _on("io"):
        return [fn(x) for x in todo]
    futures = [io_submit(fn, x) for x in todo]
    try:
        return [f.result() for f in futures]
    except BaseException:
        for f in futures:
            f.cancel()
        for f in futures:
            if not f.cancelled():
                f.exception()  # wait: nothing runs on after the caller sees the error
        raise


# --- the threads of one job or one object ----------------------------------------------------


@contextmanager
def job_pool(workers: int, name: str) -> Iterator[ThreadPoolExecutor]:
    """The ``workers`` threads of one long job (``ptd-<name>`` in a thread listing): at exit
    the queued tasks are cancelled when the job failed (or was interrupted), and the running
    ones are waited for either way, so that nothing writes on after the job returns."""
    pool = ThreadPoolExecutor(max(1, int(workers)), thread_name_prefix=f"ptd-{name}")
    ok = False
    try:
        yield pool
        ok = True
    finally:
        pool.shutdown(wait=True, cancel_futures=not ok)


def serial_worker(name: str) -> ThreadPoolExecutor:
    """One thread of an object's own (``ptd-<name>``), running what it is given one after
    another; the owner shuts it down (and makes a new one in a forked child)."""
    return ThreadPoolExecutor(1, thread_name_prefix=f"ptd-{name}")


def background(fn: Callable[[], _R], name: str) -> Future[_R]:
    """Run ``fn()`` on a thread of its own (``ptd-<name>``), which ends with it."""
    pool = ThreadPoolExecutor(1, thread_name_prefix=f"ptd-{name}")
    try:
        return pool.submit(fn)
    finally:
        pool.shutdown(wait=False)
