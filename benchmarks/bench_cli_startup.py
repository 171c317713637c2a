#!/usr/bin/env python
"""CLI startup benchmark: ``ptd inspect`` / ``ptd validate`` on small stores against the bare
``python -c "import h5py, zarr"`` they cannot do without.

These are cold-process figures: every run is a fresh ``python`` process, timed by wall clock
from spawn to exit (interpreter start, imports, the command's work, rendering), and the best of
``--repeats`` (default 5) runs is kept, so that noise from the machine counts as little as
possible. One warm-up run of each command comes first: the store files and the Python modules
are then in the page cache, and the bytecode of this checkout's modules is compiled (into the
temporary directory, through ``PYTHONPYCACHEPREFIX``, even where ``PYTHONDONTWRITEBYTECODE`` is
set: an installed package has its bytecode, and compiling every module in every run would
measure the compiler).

It generates, in a temporary directory deleted at the end, one small HDF5 file and one small
Zarr v3 store written by ptd (a few tensors, a nested group, a string column), then times:

    baseline            python -c "import h5py, zarr"
    ptd --help
    ptd inspect X       for X the h5 file and the zarr store
    ptd validate X

``ptd`` here is this checkout's CLI (``python -c "from ptd_cli.main import app; app()"``, with
the repository on ``PYTHONPATH``), not whatever console script is on PATH. For each command it
says whether torch was imported, from one more run under ``python -X importtime``. Target:
``ptd inspect``/``ptd validate`` at most 2x the baseline, without torch.

Usage::

    python benchmarks/bench_cli_startup.py
    python benchmarks/bench_cli_startup.py --repeats 10 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: this checkout's CLI, as the ``ptd`` console script runs it
CLI = "import sys; sys.argv[0] = 'ptd'; from ptd_cli.main import app; app()"
BASELINE = "import h5py, zarr"
TARGET = 2.0


def make_stores(where: Path) -> dict[str, Path]:
    """A small h5 file and zarr store written by ptd, in a child process (torch is imported
    there, not here)."""
    code = r"""
import sys, torch, ptd
for fmt, path in (("h5", sys.argv[1]), ("zarr", sys.argv[2])):
    data = {
        "obs": torch.randn(64, 8),
        "action": torch.randint(0, 4, (64,)),
        "next": {"obs": torch.randn(64, 8), "done": torch.zeros(64, dtype=torch.bool)},
        "label": ptd.NonTensorStack(*[f"row-{i}" for i in range(64)]),
    }
    ptd.PersistentTensorDict.from_dict(data, path, batch_size=[64], backend=fmt).close()
"""
    paths = {"h5": where / "small.h5", "zarr": where / "small.zarr"}
    subprocess.run([sys.executable, "-c", code, str(paths["h5"]), str(paths["zarr"])],
                   check=True, env=_env(), cwd=ROOT)  # fmt: skip
    return paths


#: where the children cache their bytecode (set in main: a folder of the temporary directory)
PYCACHE: list[str] = []


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.setdefault("COLUMNS", "120")
    # an installed package has its bytecode compiled: let the warm-up run write this
    # checkout's .pyc files (under the temporary directory, not in the checkout) rather than
    # compile every module in every run, as PYTHONDONTWRITEBYTECODE=1 would have it
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if PYCACHE:
        env["PYTHONPYCACHEPREFIX"] = PYCACHE[0]
    return env


def run_once(argv: list[str]) -> tuple[float, int]:
    """Wall-clock seconds of one fresh process, and its exit status."""
    t0 = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(),
                          cwd=ROOT)  # fmt: skip
    return time.perf_counter() - t0, proc.returncode


def imports_torch(argv: list[str]) -> bool:
    """Whether the command imports torch, from ``python -X importtime``'s report."""
    proc = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, env=_env(), cwd=ROOT)  # fmt: skip
    return re.search(r"^import time:.*\|\s+torch(\.|$)", proc.stderr, re.M) is not None


def measure(name: str, argv: list[str], repeats: int) -> dict[str, Any]:
    times = []
    codes = set()
    for _ in range(repeats):
        t, code = run_once(argv)
        times.append(t)
        codes.add(code)
    return {
        "name": name,
        "best_s": min(times),
        "median_s": statistics.median(times),
        "exit_codes": sorted(codes),
        "torch": imports_torch(argv),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5, help="runs per command (best is kept)")
    ap.add_argument("--json", metavar="FILE", help="also write the figures to FILE")
    args = ap.parse_args()
    py = sys.executable
    tmp = Path(tempfile.mkdtemp(prefix="ptd_bench_cli_"))
    PYCACHE.append(str(tmp / "pycache"))
    try:
        stores = make_stores(tmp)
        commands: list[tuple[str, list[str]]] = [
            ("python -c 'import h5py, zarr'", [py, "-c", BASELINE]),
            ("ptd --help", [py, "-c", CLI, "--help"]),
        ]
        for fmt, path in stores.items():
            commands.append((f"ptd inspect small.{fmt}", [py, "-c", CLI, "inspect", str(path)]))
            commands.append((f"ptd validate small.{fmt}", [py, "-c", CLI, "validate", str(path)]))
        # one warm-up run each: the page cache, .pyc files
        for _, argv in commands:
            run_once(argv)
        rows = [measure(name, argv, args.repeats) for name, argv in commands]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    base = rows[0]["best_s"]
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs; "
          f"cold processes, best of {args.repeats} (median in brackets)")  # fmt: skip
    print(f"{'command':<28} {'best':>8} {'median':>9} {'ratio':>7}  torch  exit")
    ok = True
    for r in rows:
        r["ratio"] = r["best_s"] / base
        print(f"{r['name']:<28} {r['best_s']:>7.3f}s {'(' + format(r['median_s'], '.3f') + 's)':>9} "
              f"{r['ratio']:>6.2f}x  {'yes' if r['torch'] else 'no':<5}  "
              f"{','.join(map(str, r['exit_codes']))}")  # fmt: skip
        if r["name"].startswith(("ptd inspect", "ptd validate")):
            ok = ok and r["ratio"] <= TARGET and not r["torch"] and r["exit_codes"] == [0]
    verdict = "met" if ok else "NOT met"
    print(f"target (inspect/validate <= {TARGET:g}x the baseline, no torch, exit 0): {verdict}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"repeats": args.repeats, "target_ratio": TARGET, "rows": rows}, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
