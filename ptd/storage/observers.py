"""Wrappers every store ptd opens passes through: the seam test helpers watch stores by.

Every backend ptd opens for a caller (``PersistentTensorDict``'s constructor and openers,
:func:`ptd.storage.stores.open_store`, hence ``ptd.convert``, ``ptd.validate``, ``ptd.diff``,
``ptd.info`` and the commands) goes through :func:`opened` before it is used. Inside
:func:`wrapping`, each one is handed to the wrapper, and whatever the wrapper returns (a
:class:`~ptd.storage.api.Backend` that forwards to it) is used instead. Outside, :func:`opened`
returns the store as it is, at the cost of one empty-list check.

:class:`ptd.testing.recording.RecordingBackend` is the wrapper this seam was made for; nothing
in the library installs one.

>>> import os, tempfile
>>> from ptd.storage.registry import get_backend
>>> seen = []
>>> def note(be):
...     seen.append(be.location)
...     return be
>>> with tempfile.TemporaryDirectory() as d, wrapping(note):
...     be = opened(get_backend("h5").open(os.path.join(d, "x.h5"), "w"))
...     be.close()
>>> len(seen)
1
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ptd.storage.api import Backend

__all__ = ["opened", "wrapping"]

#: the wrappers installed, outermost last
_WRAPPERS: list[Callable[[Backend], Backend]] = []
_LOCK = threading.Lock()


@contextmanager
def wrapping(wrap: Callable[[Backend], Backend]) -> Iterator[None]:
    """Hand every store opened inside the block to ``wrap`` and use what it returns (in this
    process, from any thread). Blocks nest: the inner block's wrapper wraps the outer's."""
    with _LOCK:
        _WRAPPERS.append(wrap)
    try:
        yield
    finally:
        with _LOCK:
            _WRAPPERS.remove(wrap)


def opened(be: Backend) -> Backend:
    """``be`` passed through the wrappers installed by :func:`wrapping` (``be`` itself when
    there are none)."""
    if not _WRAPPERS:
        return be
    with _LOCK:
        wrappers = list(_WRAPPERS)
    for wrap in wrappers:
        be = wrap(be)
    return be
