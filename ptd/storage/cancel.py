"""Cancellation: how a long job (convert, memmap export, ``validate --data``, diff) stops at
Ctrl-C or SIGTERM promptly and cleans up.

Python raises ``KeyboardInterrupt`` wherever the main thread happens to be when SIGINT
arrives: inside an h5py callback (where it is "ignored" and the copy runs on), inside
zarr-python's event-loop wait (leaving its tasks pending and the clean-up half done). So a
long job runs as a :func:`section`: while one is open, SIGINT only *requests* cancellation (one
process-wide token), and the job's loops call :func:`check` between slabs, chunks and nodes,
which raises :class:`~ptd.errors.Interrupted` (a ``KeyboardInterrupt``) at that safe point; the
job's own clean-up then runs as for any error. A second signal while the first is pending
raises ``KeyboardInterrupt`` at once (the way out of a clean-up that hangs).

A job names the phase it is in with :func:`phase` (``"planning"``, ``"copying"``,
``"publishing"``, ``"reading"``): the ``Interrupted`` error says which one it stopped, and each
phase is logged at INFO on the ``"ptd"`` logger (``ptd --verbose`` shows them).

Outside a section, signals behave as Python's default. The section installs its SIGINT handler
only in the main thread and only over Python's default one; SIGTERM is the application's
choice (``ptd``'s command line routes it through :func:`request` too).

>>> with section():
...     check()            # nothing requested: returns
...     phase("copying")
...     request(2)         # what the SIGINT handler does
...     try:
...         check()
...     except KeyboardInterrupt as err:
...         print(type(err).__name__, err.signum, err.phase)
Interrupted 2 copying
>>> active(), unheeded()   # the job was told (check raised): nothing is carried over
(False, None)
"""

from __future__ import annotations

import functools
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

from ptd.errors import Interrupted, redact

__all__ = [
    "active",
    "cancellable",
    "check",
    "current_phase",
    "phase",
    "request",
    "requested",
    "section",
    "unheeded",
]

_lock = threading.Lock()
_depth = 0
_requested: int | None = None
_phase: str | None = None
#: a stop requested after the last job's last safe point (it finished its work)
_unheeded: int | None = None
#: whether check() has raised for the pending request (the job was told: not unheeded)
_delivered = False
_log = logging.getLogger("ptd")


def unheeded() -> int | None:
    """The signal number of a stop that came too late to be acted on: the last job had
    passed its last safe point (its output was complete) and ended normally; else None. A
    front end reports it (``ptd`` exits 130/143 and says the output is complete)."""
    return _unheeded


def phase(name: str, detail: str = "") -> None:
    """Say which phase the running job is in (logged at INFO on the ``"ptd"`` logger as
    ``name detail``, a URL's secrets hidden); the :class:`~ptd.errors.Interrupted` raised in
    it names it."""
    global _phase
    _phase = name
    _log.info("%s%s", name, f" {redact(detail)}" if detail else "")


def current_phase() -> str | None:
    """The phase the running job said it is in, or None."""
    return _phase


def active() -> bool:
    """Whether a cancellable job is running (a :func:`section` is open)."""
    return _depth > 0


def requested() -> int | None:
    """The signal number cancellation was requested by, or None."""
    return _requested


def request(signum: int) -> None:
    """Ask the running job to stop (a signal handler's work); a second request while one is
    pending raises ``KeyboardInterrupt`` at once."""
    global _requested
    if _requested is not None:
        raise KeyboardInterrupt
    _requested = int(signum)


def check() -> None:
    """Raise :class:`~ptd.errors.Interrupted` if cancellation was requested (call it between
    units of work, in any thread)."""
    global _delivered
    if _requested is not None:
        _delivered = True
        raise Interrupted(_requested, phase=_phase)


def _on_sigint(signum: int, frame: Any) -> None:
    request(signum)


@contextmanager
def section() -> Iterator[None]:
    """Run a cancellable job (see the module doc); sections nest."""
    global _depth, _requested, _phase, _unheeded, _delivered
    installed = None
    with _lock:
        if _depth == 0:
            # a stop that came after the last job's last safe point is never lost: the next
            # job in this process (``ptd demo`` runs several) stops at its first check
            _requested = _unheeded
            _phase = None
            _unheeded = None
            _delivered = False
            in_main = threading.current_thread() is threading.main_thread()
            if in_main and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
                installed = signal.signal(signal.SIGINT, _on_sigint)
        _depth += 1
    ended = False
    try:
        yield
        ended = True
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                if installed is not None:
                    signal.signal(signal.SIGINT, installed)
                _unheeded = _requested if ended and not _delivered else None
                _requested = None
                _phase = None


_P = ParamSpec("_P")
_R = TypeVar("_R")


def cancellable(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Run every call of ``fn`` as a :func:`section` (for the library's long jobs)."""

    @functools.wraps(fn)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with section():
            return fn(*args, **kwargs)

    return run
