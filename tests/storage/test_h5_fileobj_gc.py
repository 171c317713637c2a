"""HDF5 files read through a Python file object (URLs): the deadlock between h5py's global lock
and a garbage collection on the thread that serves the read (ptd/storage/h5/opening.py).

The file object below hands each read to a helper thread, as fsspec hands it to its IO thread.
That thread allocates enough cyclic garbage to start a collection; an unreachable h5py object
is waiting to be collected. Without the pause, its finalizer blocks on h5py's lock, held by the
reading thread, and the read times out here (a hang in real life).
"""

from __future__ import annotations

import gc
import io
import threading
from pathlib import Path

import h5py
import numpy as np
import pytest

from ptd.storage.h5.opening import GcPausedFile, gc_paused


class _ServedElsewhere(io.RawIOBase):
    """Reads served by another thread, which makes garbage (and so collections) as it works."""

    def __init__(self, data: bytes) -> None:
        self._buf = io.BytesIO(data)
        self.timed_out = False

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, pos: int, whence: int = 0) -> int:
        return self._buf.seek(pos, whence)

    def tell(self) -> int:
        return self._buf.tell()

    def readinto(self, b) -> int:  # type: ignore[no-untyped-def, override]
        out: list[int] = []

        def serve() -> None:
            for _ in range(5000):  # well past the first generation's threshold
                cyc: list = []
                cyc.append(cyc)
            out.append(self._buf.readinto(b))

        worker = threading.Thread(target=serve, daemon=True)
        worker.start()
        worker.join(timeout=10)
        if worker.is_alive():
            self.timed_out = True
            raise OSError("the read was not served in time (deadlock)")
        return out[0]


def _h5_bytes(tmp_path: Path) -> bytes:
    path = tmp_path / "a.h5"
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(100)
    return path.read_bytes()


def _leave_h5py_garbage(tmp_path: Path) -> None:
    """An unreachable reference cycle holding an open h5py file."""
    holder: dict = {"f": h5py.File(tmp_path / "garbage.h5", "w")}
    holder["self"] = holder


def test_reads_through_a_file_object_do_not_deadlock_on_collection(tmp_path: Path) -> None:
    raw = _ServedElsewhere(_h5_bytes(tmp_path))
    was = gc.isenabled()
    gc.disable()  # keep the garbage young until the read starts
    try:
        gc.collect()
        _leave_h5py_garbage(tmp_path)
        gc.enable()
        with gc_paused(), h5py.File(GcPausedFile(raw), "r") as f:
            got = f["x"][:]
    finally:
        if was:
            gc.enable()
        else:  # pragma: no cover - the suite runs with collection on
            gc.disable()
    assert not raw.timed_out
    assert np.array_equal(got, np.arange(100))
    gc.collect()  # the deferred collection happens now, h5py's lock free


def test_gc_paused_nests_and_restores() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # was off before: stays off
    finally:
        gc.enable()


def test_gc_paused_resumes_after_an_error() -> None:
    with pytest.raises(KeyError), gc_paused():
        raise KeyError("x")
    assert gc.isenabled()


def test_paused_file_delegates(tmp_path: Path) -> None:
    raw = io.BytesIO(b"0123456789")
    f = GcPausedFile(raw)
    f.seek(3)
    assert f.read(2) == b"34"
    assert f.tell() == 5
    buf = bytearray(3)
    assert f.readinto(buf) == 3
    assert bytes(buf) == b"567"
    f.close()
    assert raw.closed
