"""The temporaries beside a destination: named with the host, removed by the next write beside
them once their process is known gone (at once on this host, by age for another host's)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ptd.storage import publish


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A running process of this host (not this one)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _temporary(directory: Path, host: str, pid: int, age: float = 0.0, tag: str = "") -> Path:
    """A temporary directory as ptd names it (``host`` empty: the old style, without one),
    last touched ``age`` seconds ago."""
    where = f"{host}-" if host else ""
    path = directory / f".ptd-tmp-{where}{pid}-{tag or 'ab12cd34'}.out.zarr"
    path.mkdir()
    (path / "zarr.json").write_text("{}")
    if age:
        then = time.time() - age
        os.utime(path / "zarr.json", (then, then))
        os.utime(path, (then, then))
    return path


def test_the_name_holds_the_host_and_the_pid(tmp_path: Path) -> None:
    tmp = publish.temp_sibling(str(tmp_path / "out.zarr"))
    name = os.path.basename(tmp)
    assert name.startswith(f".ptd-tmp-{publish.HOST}-{os.getpid()}-")
    assert name.endswith(".out.zarr")
    assert publish.host_tag(socket.gethostname()) == publish.HOST
    # sanitized and shortened; hosts that shorten alike still differ
    a = publish.host_tag("gpu-node-17.cluster.a.example")
    b = publish.host_tag("gpu-node-17.cluster.b.example")
    assert a != b
    assert a.split("_")[0] == b.split("_")[0] == "gpunode17cluster"
    assert publish.host_tag("..").startswith("host_")


def test_a_dead_process_of_this_host_is_known_at_once(tmp_path: Path) -> None:
    dead = _temporary(tmp_path, publish.HOST, _dead_pid())  # touched just now
    assert publish.remove_stale(str(tmp_path)) == [str(dead)]
    assert not dead.exists()


def test_a_running_process_keeps_its_temporary(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    time.sleep(0.1)  # (the temporary is made after its process started, as a real one is)
    alive = _temporary(tmp_path, publish.HOST, sleeper.pid)
    mine = _temporary(tmp_path, publish.HOST, os.getpid(), tag="ef567890")
    assert publish.remove_stale(str(tmp_path)) == []
    assert alive.exists()
    assert mine.exists()


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="process start times: Linux")
def test_a_reused_process_id_is_not_the_owner(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    # a temporary last touched an hour ago whose pid now belongs to a process started since:
    # that process cannot have made it
    reused = _temporary(tmp_path, publish.HOST, sleeper.pid, age=3600)
    assert publish.remove_stale(str(tmp_path)) == [str(reused)]


def test_another_hosts_temporary_goes_by_age(tmp_path: Path) -> None:
    other = publish.host_tag("some-other-machine")
    young = _temporary(tmp_path, other, _dead_pid(), tag="00000001")
    old = _temporary(tmp_path, other, os.getpid(), age=2 * publish.STALE_AFTER_S, tag="00000002")
    assert publish.remove_stale(str(tmp_path)) == [str(old)]  # its pid means nothing here
    assert young.exists()


def test_old_style_names_keep_the_old_rule(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    hour = 3600
    dead_old = _temporary(tmp_path, "", _dead_pid(), age=hour, tag="00000001")
    dead_young = _temporary(tmp_path, "", _dead_pid(), tag="00000002")
    alive_old = _temporary(tmp_path, "", sleeper.pid, age=hour, tag="00000003")
    swapped = tmp_path / f".ptd-old-{_dead_pid()}-00000004.out.zarr"  # the user's old data
    swapped.mkdir()
    assert publish.remove_stale(str(tmp_path)) == [str(dead_old)]
    assert dead_young.exists()
    assert alive_old.exists()
    assert swapped.exists()
