#!/usr/bin/env python
"""How fast ``ptd convert`` stops at Ctrl-C / SIGTERM, and whether it leaves anything behind.

Writes a gzip-chunked HDF5 file with plain h5py (``--rows`` x 16 float64, random: about
``rows * 128`` bytes; 3,000,000 rows by default, ~380 MB) under a temporary directory, then for
each destination format and signal starts ``python -m ptd convert SRC DST`` in a fresh process,
waits until its temporary output holds ``--after`` MB (the copy is under way), sends the signal
and measures the seconds until the process has exited. Every run is cold (a new process); there
is no warm figure, since an interrupted process does not run again. Printed per case: the
median and worst stop time over ``--repeat`` runs, the exit status and whether anything was
left beside the destination.

Usage::

    python benchmarks/bench_interrupt.py                 # 3 runs per case
    python benchmarks/bench_interrupt.py --rows 1000000 --repeat 5 --dir /dev/shm
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


def one_run(src: Path, dst: Path, sig: int, after: int) -> tuple[float, int, list[str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ptd", "convert", str(src), str(dst)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    while proc.poll() is None and _tmp_bytes(dst.parent) < after:
        time.sleep(0.005)
    if proc.poll() is not None:
        raise SystemExit("the conversion ended before it could be interrupted: use more --rows")
    t0 = time.perf_counter()
    proc.send_signal(sig)
    proc.communicate(timeout=120)
    seconds = time.perf_counter() - t0
    left = sorted(p.name for p in dst.parent.iterdir() if p.name != src.name)
    for name in left:
        path = dst.parent / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return seconds, proc.returncode, left


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=3_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--after", type=float, default=16.0, help="MB written before the signal")
    ap.add_argument("--dir", default=None, help="where the temporary data goes")
    args = ap.parse_args()

    import h5py
    import numpy as np

    with tempfile.TemporaryDirectory(prefix="ptd-bench-interrupt-", dir=args.dir) as d:
        work = Path(d)
        src = work / "src.h5"
        rng = np.random.default_rng(0)
        with h5py.File(src, "w") as f:
            ds = f.create_dataset(
                "obs", (args.rows, 16), "f8", chunks=(20_000, 16), compression="gzip"
            )
            for start in range(0, args.rows, 500_000):
                stop = min(args.rows, start + 500_000)
                ds[start:stop] = rng.random((stop - start, 16))
        print(f"source: {src.stat().st_size / 1e6:.0f} MB gzip h5 in {work}; cold runs only")
        for dst_name in ("out.zarr", "out.h5"):
            for sig in (signal.SIGINT, signal.SIGTERM):
                times, codes, leftovers = [], set(), set()
                for _ in range(args.repeat):
                    s, code, left = one_run(src, work / dst_name, sig, int(args.after * 1e6))
                    times.append(s)
                    codes.add(code)
                    leftovers.update(left)
                print(
                    f"h5 -> {dst_name:<9} {signal.Signals(sig).name:<8} stop (cold) median "
                    f"{statistics.median(times):.2f} s, worst {max(times):.2f} s | exit "
                    f"{sorted(codes)} | left behind: {sorted(leftovers) or 'nothing'}"
                )


if __name__ == "__main__":
    main()
