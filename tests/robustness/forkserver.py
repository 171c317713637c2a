"""Run ``ptd`` commands (and library snippets) in forked children of one warm process.

A new ``python -m ptd`` pays for its imports on every command (half a second to a second on
a busy 2-core machine, two with torch), and the hostile-store tests run hundreds of commands.
A :class:`ForkServer` imports the modules once; each request forks a child that becomes the
command: its own working directory, environment, stdin (``/dev/null``), stdout and stderr
(files), argv, exit handlers and exit status, a new session (so a hung one is killed with
everything it started). The server waits for it and reports its status and peak RSS.

What a child cannot show is the cost of a fresh start (imports, the memory they take);
``benchmarks/bench_attacks.py`` measures that with new processes (``attack_kit.run_ptd``).
The tests use these children for behaviour: exit status, output, files, hangs, and a
generous memory bound (the child's VmHWM counts the pages it shares with the server, as a
fresh process counts the same imports).

Run as ``python -m tests.robustness.forkserver MODULE...``: the server, which imports each
MODULE, then answers one JSON request per line on stdin with two JSON lines on stdout
(``{"pid": ...}`` when the child starts, ``{"status": ..., "maxrss": ...}`` when it ends).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import runpy
import select
import signal
import subprocess
import sys
import threading
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------ the server


def _write_hwm(path: str) -> None:
    """The process's own peak RSS (``VmHWM``, bytes) into ``path``."""
    try:
        with open("/proc/self/status") as f:
            kb = next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:"))
        with open(path, "w") as f:
            f.write(str(kb * 1024))
    except (OSError, StopIteration, ValueError):
        pass


def _become(request: dict[str, Any]) -> None:
    """In the forked child: become the requested command, then exit with its status."""
    code = 1
    try:
        os.setsid()
        # opened while the control pipes hold fds 0 and 1, so these land above 2; dup2 then
        # puts them in place of the pipes
        opened = (
            os.open(os.devnull, os.O_RDONLY),
            os.open(request["stdout"], os.O_WRONLY | os.O_TRUNC),
            os.open(request["stderr"], os.O_WRONLY | os.O_TRUNC),
        )
        for target, fd in enumerate(opened):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        atexit.register(_write_hwm, request["hwm"])
        try:
            if request.get("code") is not None:
                sys.argv = ["-c", *request["argv"]]
                exec(compile(request["code"], "<string>", "exec"), {"__name__": "__main__"})
            else:
                sys.argv = [request["name"], *request["argv"]]
                runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as stop:  # what the interpreter does with it
            if stop.code is None:
                code = 0
            elif isinstance(stop.code, int):
                code = stop.code
            else:
                print(stop.code, file=sys.stderr)
                code = 1
        except BaseException:  # noqa: BLE001 - printed as the interpreter would
            traceback.print_exc()
            code = 1
        atexit._run_exitfuncs()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def serve(modules: Sequence[str]) -> None:
    """The server's loop (see the module doc)."""
    for name in modules:
        importlib.import_module(name)

    def say(message: dict[str, Any]) -> None:
        os.write(1, json.dumps(message).encode() + b"\n")

    say({"ready": os.getpid()})
    buf = b""
    while True:
        while b"\n" not in buf:
            chunk = os.read(0, 65536)
            if not chunk:
                return
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _become(request)
        say({"pid": pid})
        _, status, usage = os.wait4(pid, 0)
        say({"status": os.waitstatus_to_exitcode(status), "maxrss": usage.ru_maxrss * 1024})


# ------------------------------------------------------------------------------ the client


class ForkServer:
    """A warm process that imports ``modules`` once and runs each request in a fork of itself.

    Started on the first :meth:`run`; one request at a time (a lock serialises callers).
    """

    def __init__(self, modules: Sequence[str]) -> None:
        self.modules = tuple(modules)
        self._proc: subprocess.Popen[bytes] | None = None
        self._buf = b""
        self._lock = threading.Lock()

    def _start(self) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.robustness.forkserver", *self.modules],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=ROOT,
            env=env,
        )
        self._proc, self._buf = proc, b""
        ready = self._message(timeout=300)
        if ready is None or "ready" not in ready:
            self.close()
            raise RuntimeError(f"the fork server importing {self.modules} did not start")
        return proc

    def _message(self, timeout: float | None) -> dict[str, Any] | None:
        """The next JSON line from the server; None when ``timeout`` passed or it died."""
        assert self._proc is not None
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        while b"\n" not in self._buf:
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def run(
        self,
        argv: Sequence[str],
        *,
        stdout: str,
        stderr: str,
        hwm: str,
        cwd: str,
        env: Mapping[str, str],
        timeout: float,
        module: str = "ptd",
        name: str = "ptd",
        code: str | None = None,
    ) -> tuple[int, int, bool]:
        """Run ``python -m MODULE ARGV`` (or ``python -c CODE ARGV``) in a child, its output into
        the files ``stdout``/``stderr``; ``(exit status, wait4's peak RSS, hung)``. A child
        still running after ``timeout`` seconds is killed with its session (``hung``)."""
        request = {
            "argv": list(argv),
            "stdout": stdout,
            "stderr": stderr,
            "hwm": hwm,
            "cwd": cwd,
            "env": dict(env),
            "module": module,
            "name": name,
            "code": code,
        }
        with self._lock:
            proc = self._proc if self._proc is not None and self._proc.poll() is None else None
            proc = proc or self._start()
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(request).encode() + b"\n")
            proc.stdin.flush()
            started = self._message(timeout=60)
            if started is None or "pid" not in started:
                self.close()
                raise RuntimeError("the fork server did not start the command")
            hung = False
            done = self._message(timeout=timeout)
            if done is None:
                hung = True
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(started["pid"], signal.SIGKILL)
                done = self._message(timeout=60)
            if done is None:
                self.close()
                raise RuntimeError("the fork server lost a command it had started")
            return int(done["status"]), int(done["maxrss"]), hung

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(OSError):
                if proc.stdin is not None:
                    proc.stdin.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


if __name__ == "__main__":
    serve(sys.argv[1:])
