"""A backend that records what is read and written through it, for tests that check what a
piece of code asks of a store (which keys, which rows, how many bytes), not how.

:class:`RecordingBackend` wraps an open :class:`~ptd.storage.api.Backend`, forwards every call
to it (which keeps doing the work: its memory maps, chunk cache and error messages), and appends
one :class:`Call` for each call that reads or writes data: ``read``, ``read_many`` (one call per
array), ``write``, ``read_non_tensor``, ``write_non_tensor``, ``read_strings``. A fault hook,
called before each of those, may raise, to test how the caller takes a failing read.

:func:`recording` installs it on every store opened inside its block, through the seam of
:mod:`ptd.storage.observers`: a ``PersistentTensorDict`` opened there (and its views, nested
groups and reopenings), and the stores ``ptd.convert``, ``ptd.validate``, ``ptd.diff``,
``ptd.info`` and the commands open. A store opened before the block is not seen: open it (again)
inside.

>>> import os, tempfile
>>> import numpy as np
>>> from ptd.storage.registry import get_backend
>>> from ptd.storage.stores import open_store
>>> from ptd.storage.location import StoreLocation
>>> with tempfile.TemporaryDirectory() as d:
...     path = os.path.join(d, "x.h5")
...     be = get_backend("h5").open(path, "w")
...     be.create_array(("obs",), shape=(10, 2), dtype=np.dtype("f4"), data=np.ones((10, 2)))
...     be.close()
...     with recording() as rec:
...         be = open_store(StoreLocation.parse(path))
...         _ = be.read(("obs",), (np.array([7, 2, 7]),))
...         be.close()
>>> [(c.op, c.key, c.nbytes) for c in rec.calls]
[('read', 'obs', 24)]
>>> rec.rows_read("obs").tolist(), rec.reads_of("obs")[0].rows.tolist()
([2, 7], [7, 2, 7])

A fault: ``recording(fault=f)`` calls ``f(call)`` before each call is made, and what ``f``
raises the call raises (``if call.op == "read" and call.key == "obs": raise OSError(...)``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from ptd.storage.api import Backend, NonTensorPayload, Path, Selection
from ptd.storage.indexer import Joint
from ptd.storage.observers import wrapping
from ptd.storage.subtree import SubtreeBackend

__all__ = ["Call", "Recorder", "RecordingBackend", "recording"]

#: the operations recorded
READS = ("read", "read_non_tensor", "read_strings")
WRITES = ("write", "write_non_tensor")

#: what a wrapper takes of its class from the wrapped backend's class: the format's facts and
#: the class methods that answer for the format (names it can hold, codecs it writes)
_CLASS_FACTS = (
    "name",
    "policy",
    "holds_fill_value",
    "holds_dimension_names",
    "holds_maxshape",
    "holds_links",
    "holds_references",
    "references_as_paths",
    "property_attrs",
)
_CLASS_METHODS = (
    "escaped_name",
    "name_problem",
    "codec_support",
    "codec_available",
    "codec_note",
    "creation_options",
    "maybe_reference",
)


@dataclass(frozen=True)
class Call:
    """One call that read or wrote data."""

    #: ``"read"``, ``"write"``, ``"read_non_tensor"``, ``"write_non_tensor"``,
    #: ``"read_strings"``
    op: str
    #: the store's description (:attr:`Backend.location`)
    store: str
    #: the array's path in the store, as the caller named it
    path: Path
    #: the selection, one entry per leading dim: ints, slices, numpy index arrays (bool masks
    #: as the indices they select), :class:`~ptd.storage.indexer.Joint`; ``()`` is everything
    selection: tuple[Any, ...]
    #: the rows (indices along the first dim) the selection asks for, in its order, repeats
    #: kept; None for a 0-d array or a non-tensor payload without rows
    rows: np.ndarray | None
    #: the bytes returned (reads) or given (writes) where they are an array; else 0
    nbytes: int
    #: the shape returned or given (None for a non-array value)
    shape: tuple[int, ...] | None

    @property
    def key(self) -> str:
        """The path as a ``/``-joined key (``"nested/obs"``)."""
        return "/".join(self.path)


def _normalize(selection: Selection) -> tuple[Any, ...]:
    items = selection if isinstance(selection, tuple) else (selection,)
    out: list[Any] = []
    for item in items:
        if isinstance(item, (slice, Joint)) or item is Ellipsis or item is None:
            out.append(item)
        elif isinstance(item, (int, np.integer)):
            out.append(int(item))
        else:
            a = np.asarray(item)
            out.append(np.flatnonzero(a) if a.dtype == bool else a.astype(np.int64, copy=False))
    return tuple(out)


def _rows(selection: tuple[Any, ...], length: int | None) -> np.ndarray | None:
    """The first-dim indices ``selection`` asks for (non-negative), or None."""
    if length is None:
        return None
    first = selection[0] if selection else slice(None)
    if first is Ellipsis:
        first = slice(None)
    if isinstance(first, Joint):
        first = first.arrays[0]
    if isinstance(first, slice):
        return np.arange(length)[first]
    a = np.atleast_1d(np.asarray(first, dtype=np.int64))
    return np.where(a < 0, a + length, a)


def _as_path(key: str | Path) -> Path:
    return tuple(key.split("/")) if isinstance(key, str) else tuple(key)


class Recorder:
    """The calls of every :class:`RecordingBackend` made by one :func:`recording` block, in
    the order they were made (from any thread)."""

    def __init__(self, fault: Callable[[Call], None] | None = None) -> None:
        #: called with each call before it is made (its ``nbytes``/``shape`` not known yet:
        #: 0/None for reads); raising fails the call with that exception
        self.fault = fault
        self.calls: list[Call] = []
        self.backends: list[RecordingBackend] = []
        self._lock = threading.Lock()

    def add(self, call: Call) -> None:
        with self._lock:
            self.calls.append(call)

    def clear(self) -> None:
        """Forget the calls recorded so far (to record one step of a test alone)."""
        with self._lock:
            self.calls.clear()

    def reads(self, op: str | None = None) -> list[Call]:
        """The calls that read data (only ``op``'s when given)."""
        return [c for c in self.calls if c.op in READS and (op is None or c.op == op)]

    def writes(self, op: str | None = None) -> list[Call]:
        """The calls that wrote data (only ``op``'s when given)."""
        return [c for c in self.calls if c.op in WRITES and (op is None or c.op == op)]

    def reads_of(self, key: str | Path) -> list[Call]:
        """The reads of the array at ``key`` (``"nested/obs"`` or a path tuple)."""
        path = _as_path(key)
        return [c for c in self.reads() if c.path == path]

    def writes_of(self, key: str | Path) -> list[Call]:
        """The writes of the array at ``key``."""
        path = _as_path(key)
        return [c for c in self.writes() if c.path == path]

    def rows_read(self, key: str | Path) -> np.ndarray:
        """The distinct rows of ``key`` read by all its reads, sorted."""
        got = [c.rows for c in self.reads_of(key) if c.rows is not None]
        return np.unique(np.concatenate(got)) if got else np.zeros(0, dtype=np.int64)

    def bytes_read(self, key: str | Path | None = None) -> int:
        """The bytes the reads returned (of ``key`` only, when given)."""
        calls = self.reads() if key is None else self.reads_of(key)
        return sum(c.nbytes for c in calls)

    def keys_read(self) -> set[str]:
        """The keys read at all."""
        return {c.key for c in self.reads()}


class RecordingBackend(SubtreeBackend):
    """``inner`` with every data read and write recorded into ``recorder`` (see the module
    doc). It is a :class:`~ptd.storage.api.Backend` answering as ``inner`` does (its name,
    policy and format facts are ``inner``'s): build it with :meth:`wrap`."""

    _inner: Backend

    def __init__(self, inner: Backend, recorder: Recorder) -> None:
        super().__init__(inner, (), None, inner.location)
        self.recorder = recorder

    @classmethod
    def wrap(cls, inner: Backend, recorder: Recorder) -> RecordingBackend:
        """``inner`` recorded into ``recorder``, as an instance of a subclass that holds the
        format facts of ``inner``'s class."""
        facts: dict[str, Any] = {k: getattr(type(inner), k) for k in _CLASS_FACTS}
        facts.update({k: staticmethod(getattr(type(inner), k)) for k in _CLASS_METHODS})
        sub = type(f"Recording{type(inner).__name__}", (cls,), facts)
        be: RecordingBackend = sub(inner, recorder)
        recorder.backends.append(be)
        return be

    # --- recording ---------------------------------------------------------------------------
    def _length(self, path: Path) -> int | None:
        try:
            shape = self._inner.array_meta(path).shape
        except Exception:  # noqa: BLE001 - the call itself reports a bad path
            return None
        return int(shape[0]) if shape else None

    def _call(self, op: str, path: Path, selection: Selection, value: Any = None) -> Call:
        sel = _normalize(selection)
        arr = value if isinstance(value, np.ndarray) else None
        return Call(
            op=op,
            store=self._inner.location,
            path=tuple(path),
            selection=sel,
            rows=_rows(sel, self._length(path)),
            nbytes=0 if arr is None else int(arr.nbytes),
            shape=None if arr is None else tuple(arr.shape),
        )

    def _before(self, call: Call) -> None:
        if self.recorder.fault is not None:
            self.recorder.fault(call)

    def _done(self, call: Call, value: Any) -> None:
        if isinstance(value, np.ndarray):
            call = Call(
                call.op,
                call.store,
                call.path,
                call.selection,
                call.rows,
                int(value.nbytes),
                tuple(value.shape),
            )
        self.recorder.add(call)

    # --- the calls that read or write data -----------------------------------------------------
    def read(
        self, path: Path, selection: Selection = (), *, out: np.ndarray | None = None
    ) -> np.ndarray:
        call = self._call("read", path, selection)
        self._before(call)
        got = super().read(path, selection, out=out)
        self._done(call, got)
        return got

    def read_many(self, paths: Sequence[Path]) -> list[np.ndarray]:
        calls = [self._call("read", p, ()) for p in paths]
        for call in calls:
            self._before(call)
        got = super().read_many(paths)
        for call, value in zip(calls, got, strict=True):
            self._done(call, value)
        return got

    def write(self, path: Path, selection: Selection, value: np.ndarray) -> None:
        call = self._call("write", path, selection, np.asarray(value))
        self._before(call)
        super().write(path, selection, value)
        self.recorder.add(call)

    def read_strings(self, path: Path) -> np.ndarray:
        call = self._call("read_strings", path, ())
        self._before(call)
        got = super().read_strings(path)
        self._done(call, got)
        return got

    def read_non_tensor(
        self,
        path: Path,
        selection: Selection = (),
        *,
        allow_pickle: bool | None = None,
        as_stack: bool = False,
    ) -> NonTensorPayload:
        call = self._call("read_non_tensor", path, selection)
        self._before(call)
        got = super().read_non_tensor(path, selection, allow_pickle=allow_pickle, as_stack=as_stack)
        self._done(call, None)
        return got

    def write_non_tensor(
        self,
        path: Path,
        value: Any,
        *,
        stack_shape: tuple[int, ...] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        call = Call("write_non_tensor", self._inner.location, tuple(path), (), None, 0, None)
        self._before(call)
        super().write_non_tensor(path, value, stack_shape=stack_shape, options=options)
        self.recorder.add(call)

    # --- what a narrowed store leaves out, forwarded as they are (paths are the same) ----------
    def reference_attrs(self, path: Path) -> dict[str, Any]:
        return self._inner.reference_attrs(path)

    def read_reference_paths(self, path: Path, selection: Selection) -> np.ndarray:
        return self._inner.read_reference_paths(path, selection)

    def create_reference_array(
        self,
        path: Path,
        shape: tuple[int, ...],
        *,
        chunks: tuple[int, ...] | None = None,
        maxshape: tuple[int | None, ...] | None = None,
        attrs: Mapping[str, Any] | None = None,
    ) -> None:
        self._inner.create_reference_array(
            path, shape, chunks=chunks, maxshape=maxshape, attrs=attrs
        )

    def write_reference_paths(
        self, path: Path, selection: Selection, paths: np.ndarray
    ) -> list[str]:
        return self._inner.write_reference_paths(path, selection, paths)

    def set_reference_attrs(self, path: Path, refs: Mapping[str, Any]) -> list[str]:
        return self._inner.set_reference_attrs(path, refs)

    def create_soft_link(self, path: Path, target: str) -> None:
        self._inner.create_soft_link(path, target)


@contextmanager
def recording(fault: Callable[[Call], None] | None = None) -> Iterator[Recorder]:
    """Record the data calls of every store opened inside the block (see the module doc).

    ``fault``: called with each :class:`Call` before it is made; what it raises, the call
    raises (the wrapped backend is not asked)."""
    rec = Recorder(fault)

    def wrap(be: Backend) -> Backend:
        return RecordingBackend.wrap(be, rec)

    with wrapping(wrap):
        yield rec
