"""ptd.storage.runtime: the shared pools never starve themselves, a job pool joins its
threads, settings are read and checked, and the at-fork hooks run in a child."""

from __future__ import annotations

import os
import threading
import time

import pytest

from ptd.errors import PtdValueError
from ptd.storage import runtime


def test_io_map_keeps_order_and_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTD_IO_THREADS", "3")
    live, peak, lock = [0], [0], threading.Lock()

    def one(x: int) -> int:
        with lock:
            live[0] += 1
            peak[0] = max(peak[0], live[0])
        time.sleep(0.01)
        with lock:
            live[0] -= 1
        return x * 2

    assert runtime.io_map(one, range(12)) == [x * 2 for x in range(12)]
    assert 1 < peak[0] <= 3


def test_nested_calls_run_inline_instead_of_starving_the_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # every I/O thread waits on more I/O work: with a pool of 2 and no inline rule this
    # would deadlock
    monkeypatch.setenv("PTD_IO_THREADS", "2")

    def outer(x: int) -> list[int]:
        return runtime.io_map(lambda y: x * 10 + y, range(3))

    assert runtime.io_map(outer, range(4)) == [[x * 10 + y for y in range(3)] for x in range(4)]
    runtime.set_decode_threads(2)
    try:
        got = runtime.run_parts(
            lambda x: runtime.run_parts(lambda y: x + y, [(1,), (2,)]), [(10,), (20,), (30,)]
        )
    finally:
        runtime.set_decode_threads(None)
    assert got == [[11, 12], [21, 22], [31, 32]]


def test_run_parts_raises_the_first_error_after_every_part_ended() -> None:
    ended: list[int] = []

    def part(k: int) -> int:
        time.sleep(0.02 * k)
        ended.append(k)
        if k == 1:
            raise ValueError("part 1")
        return k

    runtime.set_decode_threads(3)
    try:
        with pytest.raises(ValueError, match="part 1"):
            runtime.run_parts(part, [(0,), (1,), (2,)])
    finally:
        runtime.set_decode_threads(None)
    assert sorted(ended) == [0, 1, 2]


def test_io_map_raises_and_waits() -> None:
    started: list[int] = []
    finished: list[int] = []

    def one(x: int) -> int:
        started.append(x)
        if x == 0:
            raise OSError("disk")
        time.sleep(0.02)
        finished.append(x)
        return x

    with pytest.raises(OSError, match="disk"):
        runtime.io_map(one, range(6))
    # nothing runs on after the caller sees the error: every call that started has ended
    assert 0 in started
    assert sorted(finished) == sorted(x for x in started if x != 0)


def test_job_pool_cancels_queued_work_on_error() -> None:
    ran: list[int] = []

    def job() -> None:
        with runtime.job_pool(1, "test") as pool:
            for k in range(5):
                pool.submit(lambda k=k: (time.sleep(0.02), ran.append(k)))
            raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        job()
    assert len(ran) < 5  # the queued ones never ran
    assert not [t for t in threading.enumerate() if t.name.startswith("ptd-test")]


def test_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTD_IO_THREADS", "x")
    with pytest.raises(PtdValueError, match="PTD_IO_THREADS must be an integer"):
        runtime.io_threads()
    monkeypatch.delenv("PTD_IO_THREADS")
    assert runtime.io_threads() == 8
    monkeypatch.setenv("PTD_FAST_PATH", " Off ")
    assert not runtime.enabled("PTD_FAST_PATH")
    monkeypatch.setenv("PTD_FAST_PATH", "")
    assert runtime.enabled("PTD_FAST_PATH")  # empty: the default
    with pytest.raises(KeyError, match="PTD_NOPE is not one of ptd's settings"):
        runtime.setting("PTD_NOPE")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_fork_resets_the_pools_and_runs_the_hooks() -> None:
    runtime.run_parts(abs, [(1,), (2,)])  # the parent's pool exists
    seen: list[int] = []
    runtime.after_fork_in_child(lambda: seen.append(os.getpid()))
    r, w = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        ok = seen == [os.getpid()] and runtime.pid() == os.getpid()
        ok = ok and runtime.run_parts(lambda x: x + 1, [(1,), (2,), (3,)]) == [2, 3, 4]
        os.write(w, b"1" if ok else b"0")
        os._exit(0)
    os.close(w)
    got = os.read(r, 1)
    os.close(r)
    os.waitpid(child, 0)
    assert got == b"1"
    assert runtime.pid() == os.getpid()
