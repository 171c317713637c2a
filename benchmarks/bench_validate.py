#!/usr/bin/env python
"""``ptd validate --data`` and ``ptd diff`` throughput against a plain sequential read.

Generates, in a temporary directory deleted at the end, a replay-buffer-like store of about
``--size`` bytes (default 2 GB) twice: an HDF5 file (chunked, chunks of about 4 MB, no
compression, written with plain h5py) and its ``ptd convert`` to zarr (chunks of 4096 rows,
uncompressed):

    obs       float32 [N, 256]
    next/obs  float32 [N, 256]
    action    int64   [N]
    reward    float32 [N]
    done      bool    [N]

Then, each in a fresh child process that imports torch first (so that its peak RSS, from
``getrusage(RUSAGE_SELF).ru_maxrss``, includes torch, h5py and zarr):

    plain read    every leaf read once, slab by slab (16 MB, chunk-aligned), with h5py / zarr
    validate      ``ptd.validate(path, data=True)``: every chunk decoded, checked, statistics
    plain read x2 both stores read once each, one after the other (the diff's baseline)
    diff          ``ptd.diff(h5, zarr)``: structure, then every value compared

(imports are done before the clock starts) and prints throughput (logical bytes per second; for the diff, the bytes of both stores), the
ratio ptd / plain (targets: >= 0.8x) and the peak RSS of each (target: < 400 MB).

**Cold** figures: before each run the files are evicted from the page cache
(``posix_fadvise(DONTNEED)`` after ``os.sync()``; this needs no privileges, but the kernel may
keep some pages, so "cold" means "mostly from disk"). **Warm** figures: the same runs
repeated at once, the files in the page cache (when they fit in memory). Each figure is the
median of ``--repeats`` runs, ptd and plain alternating which goes first.

Usage::

    python benchmarks/bench_validate.py                  # 2 GB
    python benchmarks/bench_validate.py --size 300MB     # quicker
    python benchmarks/bench_validate.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from typing import Any

import numpy as np

ROW_LAYOUT = {  # key: (dtype, feature shape)
    "obs": ("float32", (256,)),
    "next/obs": ("float32", (256,)),
    "action": ("int64", ()),
    "reward": ("float32", ()),
    "done": ("bool", ()),
}
CHUNK = 4 << 20
SLAB = 16 << 20
ZARR_ROWS = 4096


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*([\d.]+)\s*([kmgt]?)i?b?\s*", text.lower())
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {text!r} (e.g. 300MB, 2GB)")
    return int(float(m[1]) * 1000 ** "_kmgt".index(m[2] or "_"))


def row_bytes() -> int:
    return sum(np.dtype(dt).itemsize * int(np.prod(shape)) for dt, shape in ROW_LAYOUT.values())


def make_h5(path: str, size: int) -> int:
    import h5py

    n = max(1, size // row_bytes())
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        f.attrs["__tensordict__"] = json.dumps({"batch_size": [n]})
        for key, (dt, shape) in ROW_LAYOUT.items():
            if "/" in key and key.split("/")[0] not in f:
                g = f.create_group(key.split("/")[0])
                g.attrs["__tensordict__"] = json.dumps({"batch_size": [n]})
            row = np.dtype(dt).itemsize * int(np.prod(shape))
            rows = max(1, CHUNK // row)
            ds = f.create_dataset(key, shape=(n, *shape), dtype=dt, chunks=(min(rows, n), *shape))
            step = max(rows, (64 << 20) // row // rows * rows)
            for a in range(0, n, step):
                b = min(n, a + step)
                if dt == "bool":
                    ds[a:b] = rng.random((b - a, *shape)) < 0.5
                elif dt == "int64":
                    ds[a:b] = rng.integers(0, 10, (b - a, *shape))
                else:
                    ds[a:b] = rng.standard_normal((b - a, *shape), dtype=np.float32)
    return n


def _leaves(path: str) -> list[tuple[str, Any]]:
    """(key, array) of every leaf, through h5py or zarr."""
    if path.endswith(".h5"):
        import h5py

        f = h5py.File(path, "r")
        out: list[tuple[str, Any]] = []
        f.visititems(lambda k, o: out.append((k, o)) if isinstance(o, h5py.Dataset) else None)
        return out
    import zarr

    g = zarr.open_group(path, mode="r")
    return [(k, a) for k, a in g.arrays()] + [
        (f"{k}/{k2}", a2) for k, sub in g.groups() for k2, a2 in sub.arrays()
    ]


def plain_read(path: str) -> int:
    """Every leaf once, slab by slab (chunk-aligned), as a user would without ptd."""
    total = 0
    for _key, arr in _leaves(path):
        n = arr.shape[0]
        row = arr.dtype.itemsize * int(np.prod(arr.shape[1:]))
        c0 = arr.chunks[0] if arr.chunks else 1
        rows = max(c0, SLAB // max(1, row) // c0 * c0)
        for a in range(0, n, rows):
            total += np.asarray(arr[a : min(n, a + rows)]).nbytes
    return total


def child(op: str, paths: list[str]) -> None:
    import resource
    import time

    import h5py  # noqa: F401 - imports are not what is timed
    import torch  # noqa: F401 - counted in the peak RSS, as the issue asks
    import zarr  # noqa: F401

    import ptd
    import ptd.report.diff
    import ptd.report.validate
    import ptd.storage.h5.backend
    import ptd.storage.zarr.backend

    t = time.perf_counter()
    if op == "plain":
        nbytes = sum(plain_read(p) for p in paths)
    elif op == "validate":
        rep = ptd.validate(paths[0], data=True)
        assert rep.valid, rep.problems
        assert rep.data_checked, rep.problems
        nbytes = rep.data_nbytes
    elif op == "diff":
        rep = ptd.diff(paths[0], paths[1])
        assert rep.same, rep.differences
        nbytes = 2 * rep.nbytes_compared
    else:
        raise SystemExit(f"unknown op {op}")
    secs = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": secs, "nbytes": nbytes, "rss_mb": rss}))


def evict(paths: list[str]) -> None:
    """Drop the files from the page cache (as far as the kernel lets us)."""
    os.sync()
    for p in paths:
        files = (
            [p]
            if os.path.isfile(p)
            else [os.path.join(d, f) for d, _ds, fs in os.walk(p) for f in fs]
        )
        for f in files:
            try:
                fd = os.open(f, os.O_RDONLY)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def run_child(op: str, paths: list[str], cold: bool) -> dict[str, float]:
    if cold:
        evict(paths)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run(
        [sys.executable, __file__, "--child", op, *paths],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def compare(name: str, ptd_op: str, paths: list[str], repeats: int, cold: bool) -> dict[str, Any]:
    ptd_runs, plain_runs = [], []
    for i in range(repeats):
        order = [("ptd", ptd_op), ("plain", "plain")]
        if i % 2:
            order.reverse()
        for who, op in order:
            r = run_child(op, paths, cold)
            (ptd_runs if who == "ptd" else plain_runs).append(r)
    t_ptd = statistics.median(r["seconds"] for r in ptd_runs)
    t_plain = statistics.median(r["seconds"] for r in plain_runs)
    nbytes = ptd_runs[0]["nbytes"]
    res = {
        "what": name,
        "cache": "cold" if cold else "warm",
        "bytes": nbytes,
        "ptd_s": round(t_ptd, 3),
        "plain_s": round(t_plain, 3),
        "ptd_MBps": round(nbytes / t_ptd / 1e6, 1),
        "plain_MBps": round(plain_runs[0]["nbytes"] / t_plain / 1e6, 1),
        "ratio": round(t_plain / t_ptd, 2),
        "ptd_rss_mb": round(max(r["rss_mb"] for r in ptd_runs)),
        "plain_rss_mb": round(max(r["rss_mb"] for r in plain_runs)),
    }
    print(
        f"{name:<22} {res['cache']:<5} ptd {res['ptd_MBps']:>8.1f} MB/s  plain "
        f"{res['plain_MBps']:>8.1f} MB/s  ratio {res['ratio']:.2f}x (target >= 0.8)  "
        f"peak RSS ptd {res['ptd_rss_mb']} MB (target < 400), plain {res['plain_rss_mb']} MB",
        flush=True,
    )
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=parse_size, default=parse_size("2GB"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], args.child[1:])
        return 0
    sys.path.insert(0, ROOT)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ptd-bench-validate-") as d:
        h5, zr = os.path.join(d, "data.h5"), os.path.join(d, "data.zarr")
        n = make_h5(h5, args.size)
        import ptd

        ptd.convert(h5, zr, chunks=ZARR_ROWS)
        print(
            f"store: {n} rows, {n * row_bytes() / 1e9:.2f} GB logical; h5 chunks ~4 MB, zarr "
            f"chunks {ZARR_ROWS} rows; each figure the median of {args.repeats} runs",
            flush=True,
        )
        for cold in (True, False):
            results.append(compare("validate --data (h5)", "validate", [h5], args.repeats, cold))
            results.append(compare("validate --data (zarr)", "validate", [zr], args.repeats, cold))
            results.append(compare("diff h5 zarr", "diff", [h5, zr], args.repeats, cold))
        shutil.rmtree(zr, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
