"""The fuzzing worker: ``python -m tests.robustness.fuzz.worker BASES_DIR``.

It imports ptd, torch, h5py and zarr once, then reads cases from stdin, one JSON object a line
(``{"seed": S, "dir": CASE_DIR}``), and for each:

1. makes the mutant in ``CASE_DIR`` (:func:`~.mutations.make_mutant`) and snapshots the
   directory (bytes of every regular file, the target of every link);
2. runs ``ptd inspect STORE``, ``ptd validate --data STORE`` and ``ptd convert STORE OUT`` (to
   the other format) in this process, through :func:`ptd_cli.main.run` as the console script
   does, with file descriptors 1 and 2 sent to files (so whatever C code prints is seen too);
3. reads the store with the library (``from_h5``/``from_zarr(allow_pickle=False)``,
   ``to_tensordict()``);
4. compares what ptd returned (and what convert wrote) with plain h5py / zarr-python
   (:mod:`.oracle`), looks for "outside" values, the ``PWNED`` marker, temporaries, a
   half-written output, and any change to the directory but the output.

Before each step it writes ``{"step": NAME}`` and at the end ``{"result": {...}}`` on its
protocol stream (the stdout it was started with; fd 1 itself goes to /dev/null), so that the
parent knows which step hung or crashed. Memory: ``RLIMIT_DATA`` is set to what the process
uses after its imports plus ``PTD_FUZZ_MEM_MB`` (default 3072), so an allocation past it
raises ``MemoryError`` instead of taking the machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import stat
import sys
import tempfile
import traceback
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: the classes of problem a case can have (the harness adds hang, crash and memory-cap)
PROBLEMS = (
    "traceback",  # a Python traceback on stderr, or an exception out of the CLI's run()
    "internal-error",  # the CLI's "internal error (...)" line: an error ptd did not translate
    "error-lines",  # exit 2 without exactly one "ptd: error:" line, or an empty message
    "stderr-noise",  # other lines on stderr (HDF5 diagnostics, raw warnings)
    "bad-exit",  # an exit status other than 0, 1 (validate) or 2
    "lib-non-ptd-error",  # the library raised something that is not a PtdError
    "memory",  # MemoryError (the worker's RLIMIT_DATA)
    "value-mismatch",  # ptd's values differ from h5py's / zarr's, or exist where they raised
    "outside-data",  # a value only the "outside" store holds reached ptd's result or output
    "code-ran",  # the PWNED marker exists
    "leftover",  # a .ptd-tmp-* left behind, or an output after a failed convert
    "store-modified",  # the store (or anything beside it) changed
    "validate-missed",  # validate --data said valid, the library read refused the store
)

#: which steps a case runs, in order
STEPS = ("make", "inspect", "validate", "convert", "read", "oracle")


class _Stream:
    """The protocol stream: one JSON object a line, flushed."""

    def __init__(self, fd: int) -> None:
        self._f = os.fdopen(fd, "w", buffering=1)

    def send(self, obj: dict[str, Any]) -> None:
        self._f.write(json.dumps(obj) + "\n")
        self._f.flush()


@contextlib.contextmanager
def _captured(scratch: Path) -> Iterator[dict[str, str]]:
    """fds 1 and 2 (and sys.stdout/sys.stderr, which write to them) to files; the dict gets
    ``out`` and ``err`` on exit."""
    got: dict[str, str] = {}
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(scratch / "out", "w+b") as out, open(scratch / "err", "w+b") as err:
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        try:
            yield got
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            out.seek(0)
            err.seek(0)
            got["out"] = out.read().decode("utf-8", "replace")
            got["err"] = err.read().decode("utf-8", "replace")


def snapshot(directory: Path, skip: tuple[Path, ...]) -> dict[str, Any]:
    """Every entry under ``directory`` except ``skip``: the bytes of regular files, the target
    of links, the kind of anything else (links are never followed)."""
    found: dict[str, Any] = {}
    for root, dirs, files in os.walk(directory, followlinks=False):
        here = Path(root)
        dirs[:] = [d for d in dirs if here / d not in skip]
        for name in dirs + files:
            p = here / name
            if p in skip:
                continue
            st = os.lstat(p)
            rel = str(p.relative_to(directory))
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("link", os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                found[rel] = ("file", p.read_bytes(), st.st_mtime_ns)
            elif stat.S_ISDIR(st.st_mode):
                found[rel] = ("dir",)
            else:
                found[rel] = ("other", stat.S_IFMT(st.st_mode))
    return found


def _cli(argv: list[str], scratch: Path) -> dict[str, Any]:
    """Run ``ptd ARGV`` here as the console script does; its exit status and output."""
    import ptd_cli.main as cli_main

    cli_main._signals_seen = 0
    escaped = None
    code: Any = 0
    with _captured(scratch) as got, warnings.catch_warnings():
        try:
            cli_main.run(argv)
        except SystemExit as done:
            code = done.code
        except BaseException as err:  # noqa: BLE001 - what a user would see as a traceback
            escaped = f"{type(err).__name__}: {err}"
            traceback.print_exc()
            code = 1
    if code is None:
        code = 0
    return {"code": code if isinstance(code, int) else 1, "escaped": escaped, **got}


def _check_cli(step: str, run: dict[str, Any], problems: list[list[str]]) -> None:
    err = run["err"]
    lines = [ln for ln in err.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ptd: error:")]
    others = [ln for ln in lines if not ln.startswith(("ptd: error:", "ptd: warning:"))]
    if run["escaped"] or "Traceback" in err or "Traceback" in run["out"]:
        last = run["escaped"] or (lines[-1] if lines else "")
        problems.append([step, "traceback", last[:300]])
        return
    if any("internal error" in ln for ln in errors):
        problems.append([step, "internal-error", errors[0][:300]])
        return
    code = run["code"]
    allowed = (0, 1, 2) if step == "validate" else (0, 2)
    if code not in allowed:
        problems.append([step, "bad-exit", f"exit {code}: {(lines or [''])[-1][:200]}"])
    elif code == 2 and (len(errors) != 1 or not errors[0][len("ptd: error:") :].strip()):
        problems.append([step, "error-lines", f"{len(errors)} error lines: {err[-300:]!r}"])
    if others:
        problems.append([step, "stderr-noise", others[0][:300]])


def _memory_error(text: str) -> bool:
    return "MemoryError" in text


def _library_read(fmt: str, store: Path) -> tuple[str, dict[str, Any], str]:
    """(outcome, numeric leaves by "a/b" key, message): outcome is ``ok``,
    ``refused:CLASS`` (a PtdError), ``raised:CLASS`` (anything else)."""
    import torch

    from ptd import PersistentTensorDict
    from ptd.errors import PtdError

    leaves: dict[str, Any] = {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if fmt == "h5":
                p = PersistentTensorDict.from_h5(store)
            else:
                p = PersistentTensorDict.from_zarr(store, allow_pickle=False)
            with p:
                td = p.to_tensordict()
            for key, value in td.items(include_nested=True, leaves_only=True):
                if isinstance(value, torch.Tensor) and value.dtype != torch.bfloat16:
                    name = "/".join(key) if isinstance(key, tuple) else str(key)
                    leaves[name] = value.detach().cpu().numpy()
    except PtdError as err:
        msg = str(err)
        if not msg.strip():
            return f"refused:{type(err).__name__}", {}, "<empty message>"
        return f"refused:{type(err).__name__}", {}, msg
    except KeyboardInterrupt:
        raise
    except BaseException as err:  # noqa: BLE001 - the finding (SystemExit included)
        return f"raised:{type(err).__name__}", {}, f"{type(err).__name__}: {err}"
    return "ok", leaves, ""


def _named_not_checked(report: str, message: str) -> bool:
    """Whether validate's ``report`` lists the key the read refused (named ``key '...'`` in
    its ``message``) as ``not_checked``, because its data lies outside the file."""
    found = re.search(r"key '([^']*)'", message)
    if found is None or "outside the file" not in message:
        return False
    return any(found.group(1) in line and "not_checked" in line for line in report.splitlines())


def run_case(seed: int, case: Path, bases: Path, stream: _Stream) -> dict[str, Any]:
    from .bases import fmt_of
    from .mutations import MARKER, describe, make_mutant
    from .oracle import OracleError, holds_secret, oracle_for, output_arrays, same_values

    scratch = Path(tempfile.mkdtemp(prefix="fuzz-io-"))
    problems: list[list[str]] = []
    base, family = describe(seed)
    result: dict[str, Any] = {"seed": seed, "base": base, "mutation": family, "detail": ""}
    stream.send({"step": "make"})
    try:
        m = make_mutant(seed, bases, case)
    except Exception as err:  # noqa: BLE001 - a harness defect, reported as such
        result["problems"] = [["make", "harness-error", f"{type(err).__name__}: {err}"]]
        return result
    result.update(mutation=m.mutation, detail=m.detail, store=str(m.store))
    stream.send({"step": "made", "mutation": m.mutation, "detail": m.detail})
    other = "zarr" if fmt_of(m.base) == "h5" else "h5"
    out = case / f"out.{other}"
    marker = case / MARKER
    before = snapshot(case, skip=(out,))
    runs: dict[str, dict[str, Any]] = {}
    for step, argv in (
        ("inspect", ["inspect", str(m.store)]),
        ("validate", ["validate", "--data", str(m.store)]),
        ("convert", ["convert", str(m.store), str(out)]),
    ):
        stream.send({"step": step})
        run = _cli(argv, scratch)
        runs[step] = run
        _check_cli(step, run, problems)
        if _memory_error(run["err"]):
            problems.append([step, "memory", "MemoryError"])
        if step == "convert" and run["code"] != 0 and os.path.lexists(out):
            problems.append([step, "leftover", f"{out.name} exists after exit {run['code']}"])
    result["codes"] = {k: v["code"] for k, v in runs.items()}
    result["stderr"] = {k: v["err"][-400:] for k, v in runs.items()}
    stream.send({"step": "read"})
    outcome, leaves, message = _library_read(m.fmt, m.store)
    result["read"] = outcome
    result["read_message"] = message[:300]
    if outcome.startswith("raised:"):
        kind = "memory" if outcome == "raised:MemoryError" else "lib-non-ptd-error"
        problems.append(["read", kind, message[:300]])
    elif message == "<empty message>":
        problems.append(["read", "error-lines", f"{outcome} with an empty message"])
    # a refused pickle is policy, not damage: validate need not call it a problem; nor data
    # kept in other files (a virtual dataset, external storage), which validate names as not
    # checked (a warning) while the read refuses it unless asked to follow it
    if (
        runs["validate"]["code"] == 0
        and outcome.startswith("refused:")
        and (outcome != "refused:PickleRefusedError")
        and not _named_not_checked(runs["validate"]["out"], message)
    ):
        problems.append(["validate", "validate-missed", f"valid, but the read: {message[:200]}"])
    for key, values in leaves.items():
        if holds_secret(values):
            problems.append(["read", "outside-data", f"{key} holds the outside store's values"])
    converted: dict[str, Any] = {}
    if runs["convert"]["code"] == 0 and out.exists():
        try:
            converted = dict(output_arrays(other, out))
        except Exception as err:  # noqa: BLE001
            problems.append(["convert", "value-mismatch", f"output unreadable: {err}"[:300]])
        for key, values in converted.items():
            if holds_secret(values):
                problems.append(["convert", "outside-data", f"{key} in the output"])
    # the oracle: only what ptd returned or wrote is looked up
    stream.send({"step": "oracle"})
    if leaves or converted:
        with oracle_for(m.fmt, m.store) as oracle:
            for step, found in (("read", leaves), ("convert", converted)):
                for key, values in sorted(found.items()):
                    try:
                        ref = oracle.read(key)
                    except OracleError as err:
                        problems.append(
                            [
                                step,
                                "value-mismatch",
                                f"{key}: ptd gave values, reference: {err}"[:300],
                            ]
                        )
                        continue
                    if not hasattr(ref, "shape"):
                        continue  # the oracle cannot tell
                    diff = same_values(values, ref)
                    if diff:
                        problems.append([step, "value-mismatch", f"{key}: {diff}"])
    # what the case left behind
    if marker.exists():
        problems.append(["all", "code-ran", f"{marker} was created"])
    temps = [str(p.relative_to(case)) for p in case.rglob(".ptd-tmp-*")]
    if temps:
        problems.append(["all", "leftover", ", ".join(temps)[:300]])
    after = snapshot(case, skip=(out,))
    changed = sorted(set(before) ^ set(after) | {k for k in before if before[k] != after.get(k)})
    changed = [c for c in changed if not c.startswith(".ptd-tmp-") and c != MARKER]
    if changed:
        problems.append(["all", "store-modified", ", ".join(changed)[:300]])
    result["problems"] = problems
    for name in ("out", "err"):
        with contextlib.suppress(OSError):
            (scratch / name).unlink()
    with contextlib.suppress(OSError):
        scratch.rmdir()
    return result


def _limit_memory() -> None:
    extra = int(os.environ.get("PTD_FUZZ_MEM_MB", "3072")) << 20
    with open("/proc/self/status") as f:
        data = next(int(ln.split()[1]) * 1024 for ln in f if ln.startswith("VmData:"))
    _soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    limit = data + extra
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))


def main() -> None:
    bases = Path(sys.argv[1])
    proto = _Stream(os.dup(1))
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    os.environ.update(COLUMNS="200", NO_COLOR="1", TERM="dumb")
    os.environ.pop("FORCE_COLOR", None)
    import h5py  # noqa: F401
    import torch  # noqa: F401
    import zarr  # noqa: F401

    import ptd  # noqa: F401
    import ptd_cli.main  # noqa: F401
    from ptd import PersistentTensorDict  # noqa: F401

    _limit_memory()
    proto.send({"ready": os.getpid()})
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        result = run_case(int(job["seed"]), Path(job["dir"]), bases, proto)
        proto.send({"result": result})


if __name__ == "__main__":
    main()
