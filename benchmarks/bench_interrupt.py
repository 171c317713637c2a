#!/usr/bin/env python
"""How fast ``ptd convert`` stops at Ctrl-C / SIGTERM in each phase, and whether it leaves
anything behind (the interrupt tests check the behaviour and never time it: the figures are
here).

Writes two sources with plain h5py under a temporary directory: a gzip-chunked HDF5 file
(``--rows`` x 16 float64, random: about ``rows * 128`` bytes; 3,000,000 rows by default,
~380 MB) and one of ``--nodes`` small leaves (3,000 by default: planning, creating and
publishing them take long enough to land a signal in each phase). Then for each destination
format, phase and signal it starts ``python -m ptd --verbose convert SRC DST`` in a fresh
process, waits for the moment (``mid-data``: the temporary output holds ``--after`` MB of the
big source; ``planning``/``copying``/``publishing``: the command's own phase line, many-leaf
source), sends the signal and measures the seconds until the process has exited.

The clock starts at the signal, so no figure counts the start-up; still, every run is a new
process, and the first run of a case is *cold* (its source and ptd's modules may not be in the
page cache yet) and the next ones *warm*. Printed apart: the cold run's seconds, then the
median and worst of the warm ones, the exit statuses and what was left beside the destination.

Usage::

    python benchmarks/bench_interrupt.py                 # 1 cold + 3 warm runs per case
    python benchmarks/bench_interrupt.py --rows 1000000 --repeat 5 --dir /dev/shm
    python benchmarks/bench_interrupt.py --phases publishing   # one phase only
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _tmp_bytes(directory: Path) -> int:
    total = 0
    for p in directory.iterdir():
        if not p.name.startswith(".ptd-tmp-"):
            continue
        for f in [p] if p.is_file() else p.rglob("*"):
            with contextlib.suppress(OSError):
                total += f.stat().st_size if f.is_file() else 0
    return total


def _clear(directory: Path, keep: set[str]) -> list[str]:
    left = sorted(p.name for p in directory.iterdir() if p.name not in keep)
    for name in left:
        path = directory / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return left


def one_run(
    src: Path, dst: Path, sig: int, moment: str, after: int, keep: set[str]
) -> tuple[float, int, list[str]]:
    """One interrupted conversion: (seconds from the signal to the exit, exit status, what
    was left beside the destination)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ptd", "--verbose", "convert", str(src), str(dst)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    assert proc.stderr is not None
    if moment == "mid-data":
        while proc.poll() is None and _tmp_bytes(dst.parent) < after:
            time.sleep(0.005)
    else:
        for line in proc.stderr:
            if line.startswith(f"ptd: {moment}"):
                break
    if proc.poll() is not None:
        raise SystemExit(f"the conversion ended before {moment}: use more --rows / --nodes")
    t0 = time.perf_counter()
    proc.send_signal(sig)
    proc.wait(timeout=300)
    seconds = time.perf_counter() - t0
    proc.stderr.read()
    proc.stderr.close()
    return seconds, proc.returncode, _clear(dst.parent, keep)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=3_000_000)
    ap.add_argument("--nodes", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=3, help="warm runs per case (after 1 cold)")
    ap.add_argument("--after", type=float, default=16.0, help="MB written before the signal")
    ap.add_argument("--dir", default=None, help="where the temporary data goes")
    ap.add_argument(
        "--phases",
        default="mid-data,planning,copying,publishing",
        help="comma-separated moments: mid-data, planning, copying, publishing",
    )
    args = ap.parse_args()

    import h5py
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="ptd-bench-interrupt-", dir=args.dir) as d:
        work = Path(d)
        big = work / "big.h5"
        rng = np.random.default_rng(0)
        with h5py.File(big, "w") as f:
            ds = f.create_dataset(
                "obs", (args.rows, 16), "f8", chunks=(20_000, 16), compression="gzip"
            )
            for start in range(0, args.rows, 500_000):
                stop = min(args.rows, start + 500_000)
                ds[start:stop] = rng.random((stop - start, 16))
        many = work / "many.h5"
        with h5py.File(many, "w") as f:
            for i in range(args.nodes):
                f.create_dataset(f"g{i // 100}/x{i}", data=np.arange(10.0))
        keep = {big.name, many.name}
        print(
            f"sources: {big.stat().st_size / 1e6:.0f} MB gzip h5, {args.nodes} small leaves; in "
            f"{work}. Seconds from the signal to the exit; 1 cold run, then {args.repeat} warm"
        )
        for moment in args.phases.split(","):
            src = big if moment == "mid-data" else many
            for dst_name in ("out.zarr", "out.h5"):
                for sig in (signal.SIGINT, signal.SIGTERM):
                    runs = [
                        one_run(src, work / dst_name, sig, moment, int(args.after * 1e6), keep)
                        for _ in range(1 + args.repeat)
                    ]
                    cold, warm = runs[0], runs[1:]
                    times = [r[0] for r in warm]
                    codes = sorted({r[1] for r in runs})
                    left = sorted({n for r in runs for n in r[2]})
                    warm_text = (
                        f"warm median {statistics.median(times):.2f} s, worst {max(times):.2f} s"
                        if times
                        else "no warm run"
                    )
                    print(
                        f"{moment:<10} -> {dst_name:<9} {signal.Signals(sig).name:<8} cold "
                        f"{cold[0]:.2f} s | {warm_text} | exit {codes} | left behind: "
                        f"{left or 'nothing'}"
                    )


if __name__ == "__main__":
    main()
