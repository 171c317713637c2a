#!/usr/bin/env python
"""Scaling-out benchmark: ``ptd convert`` with ``--workers 1``, ``--workers 2`` and
``--scheduler`` on a 2-worker Dask LocalCluster, on a generated store of about ``--size``
(default 1 GB).

The source, generated in a temporary directory (deleted at the end), is a replay-buffer-like
Zarr v3 store chunked by 8,192 rows (about 8 MB) and compressed with zstd level 1:

    obs       float32 [N, 256]      next/obs  float32 [N, 256]
    action    int64   [N]           reward    float32 [N]          done  bool [N]

Each run re-compresses it with zstd level 5 (decode + encode: CPU-bound, the codecs release the
GIL), as the exact command

    ptd convert SRC DST --compression zstd --level 5 [--workers N | --scheduler tcp://...]

run in a fresh child process through the CLI, whose peak RSS (``ru_maxrss``) is read at the end:
that is the client's for the distributed run. The cluster (scheduler and 2 worker processes, one
thread each, on 127.0.0.1) runs in another process, started (and its workers' ``import ptd``
done, as on a long-lived cluster) before the timed runs. Note that zarr already encodes the
chunks of one region on several threads, so ``--workers 1`` is not single-core: on a 2-core
machine the headroom for ``--workers 2`` and for 2 Dask workers is small. The three
destinations are compared file by file (chunks and metadata, consolidated metadata included):
the distributed result must equal the local one. Reports logical bytes / second of each run
(the median of ``--repeats``) and the client's peak RSS (target < 300 MB).

Usage::

    python benchmarks/bench_distributed.py                 # 1 GB
    python benchmarks/bench_distributed.py --size 200MB    # quicker
    python benchmarks/bench_distributed.py --json out.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

ROW_LAYOUT = {  # key: (dtype, feature shape)
    "obs": ("float32", (256,)),
    "next/obs": ("float32", (256,)),
    "action": ("int64", ()),
    "reward": ("float32", ()),
    "done": ("bool", ()),
}
CHUNK_ROWS = 8192
RSS_TARGET_MB = 300
_RSS_TAG = "PTD_BENCH_MAXRSS_KB="


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*([\d.]+)\s*([kKmMgG]?)[bB]?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {text!r}")
    return int(float(m[1]) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m[2].lower()])


def generate(path: str, size: int) -> int:
    """The source store; returns its logical bytes."""
    import zarr

    row = sum(np.dtype(dt).itemsize * int(np.prod(shape)) for dt, shape in ROW_LAYOUT.values())
    n = max(CHUNK_ROWS, size // row)
    rng = np.random.default_rng(0)
    root = zarr.open_group(path, mode="w")
    root.attrs["__tensordict__"] = {"batch_size": [n], "version": 1}
    nxt = root.create_group("next")
    nxt.attrs["__tensordict__"] = {"batch_size": [n], "version": 1}
    codec = [{"name": "zstd", "configuration": {"level": 1, "checksum": False}}]
    arrays = {}
    for key, (dt, shape) in ROW_LAYOUT.items():
        arrays[key] = root.create_array(
            key, shape=(n, *shape), dtype=dt, chunks=(CHUNK_ROWS, *shape), compressors=codec
        )
    for start in range(0, n, CHUNK_ROWS):
        stop = min(n, start + CHUNK_ROWS)
        rows = stop - start
        # two decimals: compressible like real observations, not like noise
        obs = np.round(rng.standard_normal((rows, 256)), 2).astype(np.float32)
        arrays["obs"][start:stop] = obs
        arrays["next/obs"][start:stop] = np.roll(obs, -1, axis=0)
        arrays["action"][start:stop] = rng.integers(0, 18, rows)
        arrays["reward"][start:stop] = np.round(rng.standard_normal(rows), 1)
        arrays["done"][start:stop] = rng.random(rows) < 0.01
    zarr.consolidate_metadata(path)
    return n * row


# ----------------------------------------------------------------------------- children
def child_cli(args: list[str]) -> None:
    """Run ``ptd ARGS`` in this process, then print its peak RSS."""
    import resource

    from ptd_cli.main import app

    try:
        app(args=args, prog_name="ptd", standalone_mode=False)
    finally:
        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(f"{_RSS_TAG}{kb}", file=sys.stderr, flush=True)


def child_cluster() -> None:
    """A LocalCluster with 2 worker processes; prints its address, lives until stdin closes."""
    import importlib

    from distributed import Client, LocalCluster

    with LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
    ) as cluster:
        # a long-lived cluster has ptd (and torch) imported already: do it before the timed runs
        with Client(cluster) as client:
            client.run(importlib.import_module, "ptd.transfer.distributed")
        print(cluster.scheduler_address, flush=True)
        sys.stdin.read()


# ----------------------------------------------------------------------------- parent
def run_cli(args: list[str]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, __file__, "--child-cli", *args], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(f"ptd {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")
    m = re.search(_RSS_TAG + r"(\d+)", proc.stderr)
    doc = json.loads(proc.stdout)
    doc["client_rss_mb"] = int(m[1]) / 1024 if m else None
    return doc


def digest(root: str) -> dict[str, str]:
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=parse_size, default=parse_size("1GB"))
    ap.add_argument("--repeats", type=int, default=1, help="runs of each mode (median)")
    ap.add_argument("--dir", default=None, help="where to generate (default: a temp dir)")
    ap.add_argument("--json", default=None, help="also write the results to this file")
    ap.add_argument("--child-cli", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    ap.add_argument("--child-cluster", action="store_true", help=argparse.SUPPRESS)
    ns = ap.parse_args()
    if ns.child_cli is not None:
        return child_cli(ns.child_cli)
    if ns.child_cluster:
        return child_cluster()

    with tempfile.TemporaryDirectory(prefix="ptd-bench-dist-", dir=ns.dir) as tmp:
        src = os.path.join(tmp, "src.zarr")
        t = time.perf_counter()
        nbytes = generate(src, ns.size)
        print(f"generated {src}: {nbytes / 1e9:.2f} GB logical in {time.perf_counter() - t:.1f} s")
        cluster = subprocess.Popen(
            [sys.executable, __file__, "--child-cluster"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            address = cluster.stdout.readline().strip()
            if not address.startswith("tcp://"):
                raise SystemExit(f"the cluster did not start (got {address!r})")
            print(f"cluster: {address} (2 worker processes x 1 thread)")
            common = ["--compression", "zstd", "--level", "5", "--json"]
            modes = {
                "--workers 1": ["--workers", "1"],
                "--workers 2": ["--workers", "2"],
                "--scheduler (2 workers)": ["--scheduler", address],
            }
            results: dict[str, Any] = {}
            digests: dict[str, dict[str, str]] = {}
            for name, extra in modes.items():
                runs = []
                for i in range(ns.repeats):
                    dst = os.path.join(tmp, f"dst-{len(results)}-{i}.zarr")
                    os.sync()
                    runs.append(run_cli(["convert", src, dst, *common, *extra]))
                    if i == 0:
                        digests[name] = digest(dst)
                    subprocess.run(["rm", "-rf", dst], check=True)
                secs = statistics.median(r["seconds"] for r in runs)
                results[name] = {
                    "seconds": secs,
                    "throughput_mb_s": nbytes / secs / 1e6,
                    "client_rss_mb": max(r["client_rss_mb"] or 0 for r in runs),
                    "regions": runs[0]["regions"],
                    "stored_mb": runs[0]["stored_nbytes"] / 1e6,
                }
        finally:
            cluster.stdin.close()
            cluster.wait(timeout=60)
        base = digests["--workers 1"]
        equal = {name: d == base for name, d in digests.items()}
        print(f"\n{'mode':<26}{'seconds':>9}{'MB/s':>9}{'speedup':>9}{'client RSS':>12}  equal")
        t1 = results["--workers 1"]["seconds"]
        for name, r in results.items():
            print(
                f"{name:<26}{r['seconds']:>9.2f}{r['throughput_mb_s']:>9.0f}"
                f"{t1 / r['seconds']:>8.2f}x{r['client_rss_mb']:>9.0f} MB  {equal[name]}"
            )
        dist_rss = results["--scheduler (2 workers)"]["client_rss_mb"]
        print(
            f"\n{nbytes / 1e9:.2f} GB logical, {results['--workers 1']['regions']} chunk regions; "
            f"distributed result equal to the local one: {equal['--scheduler (2 workers)']}; "
            f"client peak RSS {dist_rss:.0f} MB (target < {RSS_TARGET_MB} MB): "
            f"{'OK' if dist_rss < RSS_TARGET_MB else 'OVER'}"
        )
        if ns.json:
            with open(ns.json, "w") as f:
                json.dump(
                    {"nbytes": nbytes, "cpus": os.cpu_count(), "results": results, "equal": equal},
                    f,
                    indent=2,
                )
        if not all(equal.values()):
            raise SystemExit("the results differ")


if __name__ == "__main__":
    main()
