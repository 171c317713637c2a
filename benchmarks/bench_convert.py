#!/usr/bin/env python
"""Conversion and inspection benchmark: ``ptd convert`` / ``ptd inspect`` against plain h5py/zarr.

Generates, in a temporary directory that is deleted at the end, a replay-buffer-like HDF5 file
of about ``--size`` bytes (default 2 GB), written with plain h5py in ptd's layout (contiguous
datasets, ``__tensordict__`` batch-size attributes):

    obs       float32 [N, 256]
    next/obs  float32 [N, 256]
    action    int64   [N]
    reward    float32 [N]
    done      bool    [N]

Then, each in a fresh child process (so that its peak RSS, read with
``resource.getrusage(RUSAGE_SELF).ru_maxrss`` at the end, is its own):

    h5 -> zarr   ptd: ``ptd.convert(src, dst)``. plain: for each dataset, a zarr array with the
                 same chunks ptd picks (about 8 MB, uncompressed), filled slab by slab
                 (64 MB, chunk-aligned) from ``ds[a:b]``.
    zarr -> h5   ptd: ``ptd.convert(zarr, dst)``. plain: contiguous h5py datasets filled slab by
                 slab from ``arr[a:b]``.

and reports each side's throughput (logical bytes / second, the median of ``--convert-repeats``
runs, the two sides alternating which goes first: the disk makes single runs noisy), the ratio ptd / plain (target
>= 0.8x) and ptd's peak RSS (target < 400 MB; importing torch, h5py and zarr alone takes about
240 MB). Before each conversion ``os.sync()`` flushes the previous run's dirty pages, so that no
run pays for another's write-back.

Metadata: a second file with ``--groups`` groups x ``--leaves-per-group`` small leaves
(default 200 x 10 = 2,000 leaves): ``ptd.info(path)`` (what ``ptd inspect`` runs) and the whole
``ptd inspect --json`` command (in-process, JSON included) against a bare h5py ``visititems``
walk collecting each dataset's shape, dtype, chunks, compression and attributes (target
< 2x). Median of ``--repeats`` runs after one warm-up; the file is in the page cache, so this
measures library overhead rather than the disk.

Usage::

    python benchmarks/bench_convert.py                  # 2 GB
    python benchmarks/bench_convert.py --size 300MB     # quicker
    python benchmarks/bench_convert.py --json out.json
"""

from __future__ import annotations

import argparse
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
SLAB = 64 << 20
CHUNK = 8 << 20


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*([\d.]+)\s*([kmgt]?)i?b?\s*", text.lower())
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {text!r} (e.g. 300MB, 2GB)")
    return int(float(m[1]) * 1000 ** "_kmgt".index(m[2] or "_"))


def row_bytes() -> int:
    return sum(np.dtype(dt).itemsize * int(np.prod(shape)) for dt, shape in ROW_LAYOUT.values())


# ----------------------------------------------------------------------------- data
def make_store(path: str, size: int) -> tuple[int, int]:
    """Write the replay-like h5 file; return (rows, logical bytes)."""
    import h5py

    n = max(1, size // row_bytes())
    rng = np.random.default_rng(0)
    meta = json.dumps({"batch_size": [n], "version": 1})
    with h5py.File(path, "w") as f:
        f.attrs["__tensordict__"] = meta
        f.create_group("next").attrs["__tensordict__"] = meta
        for key, (dt, feat) in ROW_LAYOUT.items():
            ds = f.create_dataset(key, shape=(n, *feat), dtype=dt)
            row = np.dtype(dt).itemsize * int(np.prod(feat))
            step = max(1, SLAB // row)
            for a in range(0, n, step):
                b = min(n, a + step)
                if dt == "bool":
                    ds[a:b] = rng.random(b - a) > 0.5
                elif dt == "int64":
                    ds[a:b] = rng.integers(0, 18, b - a)
                else:
                    ds[a:b] = rng.standard_normal((b - a, *feat), dtype=np.float32)
    return n, n * row_bytes()


def make_meta_store(path: str, groups: int, leaves: int) -> None:
    import h5py

    meta = json.dumps({"batch_size": [8], "version": 1})
    with h5py.File(path, "w") as f:
        f.attrs["__tensordict__"] = meta
        for g in range(groups):
            grp = f.create_group(f"g{g:03d}")
            grp.attrs["__tensordict__"] = meta
            for i in range(leaves):
                grp.create_dataset(f"leaf{i:02d}", data=np.zeros((8, 4), dtype=np.float32))


# ----------------------------------------------------------------------------- the copies
def plain_h5_to_zarr(src: str, dst: str) -> None:
    import h5py
    import zarr

    out = zarr.open_group(dst, mode="w-")
    with h5py.File(src, "r") as f:
        items: list[tuple[str, Any]] = []
        f.visititems(lambda name, obj: items.append((name, obj)))
        for name, obj in items:
            if isinstance(obj, h5py.Group):
                out.require_group(name).attrs.update({k: _plain(v) for k, v in obj.attrs.items()})
                continue
            n = obj.shape[0]
            row = obj.dtype.itemsize * int(np.prod(obj.shape[1:]))
            crow = min(n, max(1, CHUNK // row))
            arr = out.create_array(
                name,
                shape=obj.shape,
                dtype=obj.dtype,
                chunks=(crow, *obj.shape[1:]),
                compressors=None,
            )
            step = max(crow, SLAB // row // crow * crow)
            for a in range(0, n, step):
                arr[a : a + step] = obj[a : a + step]
    zarr.consolidate_metadata(dst)


def plain_zarr_to_h5(src: str, dst: str) -> None:
    import h5py
    import zarr

    g = zarr.open_group(src, mode="r")
    with h5py.File(dst, "w-") as f:
        for name, node in g.members(max_depth=None):
            if isinstance(node, zarr.Group):
                f.require_group(name)
                continue
            ds = f.create_dataset(name, shape=node.shape, dtype=node.dtype)
            n = node.shape[0]
            row = node.dtype.itemsize * int(np.prod(node.shape[1:]))
            crow = node.chunks[0]
            step = max(crow, SLAB // row // crow * crow)
            for a in range(0, n, step):
                ds[a : a + step] = node[a : a + step]


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, str) and v.startswith("{"):
        return json.loads(v)
    return v


def child(op: str, src: str, dst: str) -> None:
    """Run one copy; print {"seconds", "maxrss_mb"} as JSON."""
    import resource
    import warnings

    warnings.simplefilter("ignore")
    if op.startswith("ptd"):
        # import costs outside the timing, as for the plain side (ptd loads backends lazily)
        import ptd.storage.h5.backend
        import ptd.storage.zarr.backend
    else:
        import h5py  # noqa: F401
        import zarr  # noqa: F401
    t0 = time.perf_counter()
    if op == "ptd":
        import ptd

        ptd.convert(src, dst)
    elif op == "plain-h5-zarr":
        plain_h5_to_zarr(src, dst)
    elif op == "plain-zarr-h5":
        plain_zarr_to_h5(src, dst)
    else:
        raise SystemExit(f"unknown op {op}")
    seconds = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KB -> MB on Linux
    print(json.dumps({"seconds": seconds, "maxrss_mb": rss}))


def run_child(op: str, src: str, dst: str) -> dict[str, float]:
    # flush the previous run's dirty pages first: each run then pays for its own writes only
    if hasattr(os, "sync"):
        os.sync()
    out = subprocess.run(
        [sys.executable, __file__, "--child", op, src, dst],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _rm(path: str) -> None:
    import shutil

    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.unlink(path)


# ----------------------------------------------------------------------------- metadata
def bare_walk(path: str) -> int:
    import h5py

    found: list[tuple] = []

    def visit(name: str, obj: Any) -> None:
        if isinstance(obj, h5py.Dataset):
            found.append((name, obj.shape, obj.dtype, obj.chunks, obj.compression, dict(obj.attrs)))
        else:
            found.append((name, dict(obj.attrs)))

    with h5py.File(path, "r") as f:
        f.visititems(visit)
    return len(found)


def time_it(fn: Any, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--size", type=parse_size, default=parse_size("2GB"), help="store size (default 2GB)"
    )
    ap.add_argument("--groups", type=int, default=200)
    ap.add_argument("--leaves-per-group", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5, help="inspect timings: runs after a warm-up")
    ap.add_argument(
        "--convert-repeats",
        type=int,
        default=5,
        help="conversions per side, alternated; the median time is reported",
    )
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument("--child", nargs=3, metavar=("OP", "SRC", "DST"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return 0

    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="ptd-bench-convert-") as tmp:
        src = os.path.join(tmp, "data.h5")
        t0 = time.perf_counter()
        rows, nbytes = make_store(src, args.size)
        print(
            f"store: {rows:,} rows, {nbytes / 1e6:,.0f} MB logical ({time.perf_counter() - t0:.1f} s to write)"
        )
        results["rows"], results["nbytes"] = rows, nbytes
        print(
            f"{'':14}{'plain MB/s':>12}{'ptd MB/s':>12}{'ratio':>9}{'ptd peak RSS':>15}{'plain peak RSS':>16}"
        )
        ok = True
        for label, (pop, psrc, pdst, tsrc, tdst) in {
            "h5 -> zarr": (
                "plain-h5-zarr",
                src,
                os.path.join(tmp, "plain.zarr"),
                src,
                os.path.join(tmp, "ptd.zarr"),
            ),
            "zarr -> h5": (
                "plain-zarr-h5",
                os.path.join(tmp, "ptd.zarr"),
                os.path.join(tmp, "plain.h5"),
                os.path.join(tmp, "ptd.zarr"),
                os.path.join(tmp, "ptd.h5"),
            ),
        }.items():
            plain_runs, ptd_runs = [], []
            for r in range(args.convert_repeats):
                # alternate which side goes first: the run after another one pays for part of
                # its file-system work (deletes, journal), whatever os.sync() does
                sides = [(pop, psrc, pdst, plain_runs), ("ptd", tsrc, tdst, ptd_runs)]
                for op, s_, d_, acc in sides if r % 2 == 0 else sides[::-1]:
                    _rm(d_)
                    acc.append(run_child(op, s_, d_))
            # median time (write-back makes single runs noisy), worst peak RSS
            plain, mine = (
                {
                    "seconds": statistics.median(x["seconds"] for x in runs),
                    "maxrss_mb": max(x["maxrss_mb"] for x in runs),
                    "runs_s": [round(x["seconds"], 3) for x in runs],
                }
                for runs in (plain_runs, ptd_runs)
            )
            p_rate, m_rate = nbytes / plain["seconds"] / 1e6, nbytes / mine["seconds"] / 1e6
            ratio = m_rate / p_rate
            ok &= ratio >= 0.8 and mine["maxrss_mb"] < 400
            print(
                f"{label:14}{p_rate:12,.0f}{m_rate:12,.0f}{ratio:8.2f}x{mine['maxrss_mb']:12,.0f} MB"
                f"{plain['maxrss_mb']:13,.0f} MB"
            )
            results[label] = {
                "plain": plain,
                "ptd": mine,
                "plain_MBps": p_rate,
                "ptd_MBps": m_rate,
                "ratio": ratio,
            }
            _rm(pdst)
        print("targets: ratio >= 0.8x, ptd peak RSS < 400 MB:", "met" if ok else "NOT met")

        meta = os.path.join(tmp, "meta.h5")
        make_meta_store(meta, args.groups, args.leaves_per_group)
        from typer.testing import CliRunner

        import ptd
        from ptd_cli.main import app

        runner = CliRunner()

        def cli() -> None:
            r = runner.invoke(app, ["inspect", meta, "--json"])
            assert r.exit_code == 0, r.output

        n = args.groups * args.leaves_per_group
        bare = time_it(lambda: bare_walk(meta), args.repeats)
        info = time_it(lambda: ptd.info(meta), args.repeats)
        whole = time_it(cli, args.repeats)
        print(
            f"inspect, {n:,} leaves in {args.groups} groups: bare visititems {bare * 1e3:.1f} ms, "
            f"ptd.info {info * 1e3:.1f} ms ({info / bare:.2f}x), `ptd inspect --json` "
            f"{whole * 1e3:.1f} ms ({whole / bare:.2f}x); target < 2x:",
            "met" if info / bare < 2 else "NOT met",
        )
        results["inspect"] = {
            "leaves": n,
            "bare_s": bare,
            "info_s": info,
            "cli_s": whole,
            "info_ratio": info / bare,
            "cli_ratio": whole / bare,
        }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
