"""Drive fuzzing workers: send seeds, enforce a per-case timeout and a memory cap, restart a
worker that hung, crashed or grew too large, and sort every case into an outcome class.

:func:`run_seeds` is what the test and ``benchmarks/fuzz_stores.py`` call. A case's outcome
(:class:`Outcome`) lists its problems as ``(step, class, detail)``; the classes are
:data:`~.worker.PROBLEMS` plus ``hang`` (no answer within the timeout: the worker is killed),
``crash`` (the worker died: a signal or an exit), ``memory-cap`` (its RSS passed the cap) and
``oracle-hang`` (ptd's steps were done; h5py or zarr-python, reading back what ptd returned,
did not finish: ptd returned values for data the reference library chokes on).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[3]
#: a case's default time limit (generous: a busy machine must not turn a slow case into a hang)
CASE_TIMEOUT = 60.0
#: a worker whose RSS grows this far past what it had when ready is killed ("memory-cap")
MEM_CAP = 2 << 30


@dataclass
class Outcome:
    seed: int
    base: str = ""
    mutation: str = ""
    detail: str = ""
    problems: list[list[str]] = field(default_factory=list)
    read: str = ""  #: the library read: ok, refused:CLASS, raised:CLASS
    codes: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    peak_rss_delta: int = 0  #: bytes above the worker's idle RSS (sampled)
    stderr: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def classes(self) -> list[str]:
        return sorted({p[1] for p in self.problems})

    def repro(self) -> str:
        return f"python benchmarks/fuzz_stores.py --seeds {self.seed} --keep /tmp/fuzz-{self.seed}"


class _Worker:
    def __init__(self, bases: Path) -> None:
        self.bases = bases
        self.proc: subprocess.Popen[bytes] | None = None
        self.buf = b""
        self.idle_rss = 0
        self.errlog = tempfile.TemporaryFile()  # noqa: SIM115 - kept for the worker's life
        self.case: tuple[int, Path, float] | None = None
        self.step = ""
        self.made: tuple[str, str] | None = None
        self.peak = 0

    def start(self) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        }
        self.errlog.seek(0)
        self.errlog.truncate()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-X",
                "faulthandler",
                "-m",
                "tests.robustness.fuzz.worker",
                str(self.bases),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.errlog,
            cwd=ROOT,
            env=env,
            start_new_session=True,
        )
        self.buf = b""
        msg = self._read_one(timeout=300)
        if msg is None or "ready" not in msg:
            self.errlog.seek(0)
            raise RuntimeError(f"fuzz worker did not start: {self.errlog.read()[-2000:]!r}")
        self.idle_rss = psutil.Process(self.proc.pid).memory_info().rss

    def _read_one(self, timeout: float) -> dict[str, Any] | None:
        assert self.proc is not None
        assert self.proc.stdout is not None
        end = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([self.proc.stdout], [], [], left)
            if r:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    return None
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def send(self, seed: int, case: Path) -> None:
        assert self.proc is not None
        assert self.proc.stdin is not None
        self.case = (seed, case, time.monotonic())
        self.step = "start"
        self.made = None
        self.peak = 0
        self.proc.stdin.write(json.dumps({"seed": seed, "dir": str(case)}).encode() + b"\n")
        self.proc.stdin.flush()

    def kill(self) -> int | None:
        if self.proc is None:
            return None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        code = self.proc.wait()
        self.close_pipes()
        self.proc = None
        return code

    def close_pipes(self) -> None:
        if self.proc is not None:
            for pipe in (self.proc.stdin, self.proc.stdout):
                with contextlib.suppress(OSError):
                    if pipe is not None:
                        pipe.close()

    def stderr_tail(self) -> str:
        self.errlog.seek(0)
        return self.errlog.read()[-600:].decode("utf-8", "replace")


def _outcome_from(result: dict[str, Any], seconds: float, peak: int) -> Outcome:
    return Outcome(
        seed=result["seed"],
        base=result.get("base", ""),
        mutation=result.get("mutation", ""),
        detail=result.get("detail", ""),
        problems=result.get("problems", []),
        read=result.get("read", ""),
        codes=result.get("codes", {}),
        seconds=seconds,
        peak_rss_delta=peak,
        stderr=result.get("stderr", {}),
    )


def _special_files(directory: str, names: list[str]) -> list[str]:
    """What ``--keep`` cannot copy (FIFOs, devices): left out; the mutation says it."""
    return [
        n
        for n in names
        if not os.path.islink(os.path.join(directory, n))
        and not os.path.isfile(os.path.join(directory, n))
        and not os.path.isdir(os.path.join(directory, n))
    ]


def run_seeds(
    seeds: Iterable[int],
    jobs: int = 1,
    timeout: float = CASE_TIMEOUT,
    mem_cap: int = MEM_CAP,
    keep: Path | None = None,
    keep_all: bool = False,
    progress: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """Run each seed's mutant through every step in ``jobs`` workers; one Outcome per seed, in
    seed order. ``keep``: copy each failing case's directory (the mutant and what the
    commands left) to ``keep/SEED`` (every case with ``keep_all``)."""
    from .bases import build
    from .mutations import describe

    pending = list(seeds)
    todo = list(reversed(pending))
    outcomes: dict[int, Outcome] = {}
    work = Path(tempfile.mkdtemp(prefix="ptd-fuzz-"))
    try:
        bases = build(work / "bases")
        workers = [_Worker(bases) for _ in range(max(1, min(jobs, len(pending))))]
        for w in workers:
            w.start()

        def finish(w: _Worker, outcome: Outcome) -> None:
            assert w.case is not None
            seed, case, _ = w.case
            w.case = None
            if keep is not None and (keep_all or not outcome.ok):
                dest = keep / str(seed)
                shutil.rmtree(dest, ignore_errors=True)
                with contextlib.suppress(OSError, shutil.Error):  # keep what can be copied
                    shutil.copytree(case, dest, symlinks=True, ignore=_special_files)
                (dest / "outcome.json").write_text(json.dumps(outcome.__dict__, indent=1))
            shutil.rmtree(case, ignore_errors=True)
            outcomes[seed] = outcome
            if progress is not None:
                progress(outcome)

        def lost(w: _Worker, cls: str, detail: str) -> None:
            assert w.case is not None
            seed, _, started = w.case
            base, family = describe(seed)
            mutation, detail = w.made or (family, "")
            o = Outcome(
                seed,
                base,
                mutation,
                detail,
                seconds=time.monotonic() - started,
                peak_rss_delta=w.peak,
            )
            o.problems = [[w.step, cls, detail]]
            finish(w, o)
            w.start()

        while todo or any(w.case for w in workers):
            for w in workers:
                if w.case is None and todo:
                    seed = todo.pop()
                    case = work / f"case-{seed}"
                    case.mkdir()
                    w.send(seed, case)
            busy = [w for w in workers if w.case is not None]
            assert all(w.proc is not None and w.proc.stdout is not None for w in busy)
            r, _, _ = select.select([w.proc.stdout for w in busy if w.proc], [], [], 0.02)
            for w in busy:
                assert w.proc is not None
                assert w.case is not None
                with contextlib.suppress(psutil.Error):
                    rss = psutil.Process(w.proc.pid).memory_info().rss - w.idle_rss
                    w.peak = max(w.peak, rss)
                if w.proc.stdout in r or b"\n" in w.buf:
                    while True:
                        msg = w._read_one(timeout=0) if b"\n" in w.buf else None
                        if msg is None:
                            chunk = os.read(w.proc.stdout.fileno(), 65536)
                            if not chunk:
                                code = w.kill()
                                lost(w, "crash", f"worker died (status {code}): {w.stderr_tail()}")
                                break
                            w.buf += chunk
                            if b"\n" not in w.buf:
                                break
                            continue
                        if "step" in msg:
                            w.step = msg["step"]
                            if "mutation" in msg:
                                w.made = (msg["mutation"], msg["detail"])
                        elif "result" in msg:
                            finish(
                                w,
                                _outcome_from(msg["result"], time.monotonic() - w.case[2], w.peak),
                            )
                            break
                        if b"\n" not in w.buf:
                            break
                    if w.case is None:
                        continue
                if w.peak > mem_cap:
                    w.kill()
                    lost(w, "memory-cap", f"RSS grew by {w.peak >> 20} MiB")
                elif time.monotonic() - w.case[2] > timeout:
                    w.kill()
                    # in the oracle step, h5py/zarr-python is what did not finish
                    cls = "oracle-hang" if w.step == "oracle" else "hang"
                    lost(w, cls, f"no answer after {timeout:.0f} s")
        for w in workers:
            if w.proc is not None and w.proc.stdin is not None:
                w.proc.stdin.close()
                try:
                    w.proc.wait(timeout=30)
                    w.close_pipes()
                except subprocess.TimeoutExpired:
                    w.kill()
            w.errlog.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return [outcomes[s] for s in pending]


# ------------------------------------------------------------------------------ reports
def table(outcomes: Iterable[Outcome], limit: int = 200) -> str:
    """The failing cases, one line each per problem: seed, base, mutation, step, class,
    detail, then the reproduction command."""
    rows = []
    for o in outcomes:
        for step, cls, detail in o.problems:
            rows.append((str(o.seed), o.base, o.mutation, step, cls, detail.replace("\n", " ")))
    if not rows:
        return "no failing cases"
    head = ("seed", "base", "mutation", "step", "problem", "detail")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(5)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=False)) + "  detail"]
    for r in rows[:limit]:
        lines.append(
            "  ".join(c.ljust(w) for c, w in zip(r[:5], widths, strict=False)) + "  " + r[5][:160]
        )
    if len(rows) > limit:
        lines.append(f"... and {len(rows) - limit} more")
    lines.append(
        "reproduce one: python benchmarks/fuzz_stores.py --seeds SEED --keep /tmp/fuzz-SEED"
    )
    return "\n".join(lines)


def summary(outcomes: list[Outcome]) -> dict[str, int]:
    """Counts by outcome class: ``ok``, ``refused:CLASS`` (library read refused with a ptd
    error, and no problem), and each problem class (a case counts once per class)."""
    counts: dict[str, int] = {}
    for o in outcomes:
        keys = o.classes() or [("ok" if o.read == "ok" else o.read or "ok")]
        for k in keys:
            counts[k] = counts.get(k, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
