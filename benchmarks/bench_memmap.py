#!/usr/bin/env python
"""Store -> memmap directory benchmark: ``PersistentTensorDict.memmap`` against a plain copy.

Generates, in a temporary directory that is deleted at the end, a chunked store of about
``--size-mb`` MB (default 2048) per backend:

    obs       float32 [N, 256]     (1 KiB rows, ~80 % of the bytes)
    next/obs  float32 [N, 48]
    action    int64   [N, 4]
    reward    bfloat16 [N]         (stored as uint16 bits, as ptd writes it)
    done      bool    [N]

chunked on disk (``--chunk-mb`` MB chunks along the rows, no compression), written slab by slab
with h5py / zarr directly. Then, for each backend, it times, each in a fresh child process
whose peak RSS is read with ``resource.getrusage`` at the end:

    ptd     ``PersistentTensorDict.from_h5/from_zarr(path).memmap(dst)`` (the stream path:
            bounded, chunk-aligned slabs written with plain file writes; the files are mapped
            at the end)
    plain   the same arrays copied chunk by chunk with h5py/zarr + numpy: read a chunk-aligned
            slab, ``slab.tofile(f)``, into one raw file per array (no meta.json)

Both sides are run ``--repeats`` times, interleaved, after one warm-up read of the store (so the
source is in the page cache for both) and an ``os.sync()`` before each run; the best and the
median runs are reported. Writing gigabytes to a real disk is bound by the kernel's dirty-page
writeback, which makes single runs noisy; ``--dir /dev/shm`` (a tmpfs) measures the libraries
without the disk. Targets (issue 4): ptd >= 0.7x
the plain copy's throughput, ptd's peak RSS < 400 MB.

Usage::

    python benchmarks/bench_memmap.py                        # 2 GB, h5 and zarr
    python benchmarks/bench_memmap.py --size-mb 500          # quicker
    python benchmarks/bench_memmap.py --backend h5 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

#: (key, numpy dtype, feature shape, ptd dtype marker or None)
LAYOUT = [
    ("obs", np.float32, (256,), None),
    ("next/obs", np.float32, (48,), None),
    ("action", np.int64, (4,), None),
    ("reward", np.uint16, (), "bfloat16"),
    ("done", np.bool_, (), None),
]
SLAB_BYTES = 32 << 20


def row_bytes() -> int:
    return sum(
        np.dtype(dt).itemsize * int(np.prod(feat, dtype=np.int64)) for _, dt, feat, _ in LAYOUT
    )


def rows_for(size_mb: float) -> int:
    return max(1, int(size_mb * 2**20) // row_bytes())


def chunk_rows(feat: tuple[int, ...], dtype: np.dtype, chunk_mb: float) -> int:
    per_row = np.dtype(dtype).itemsize * int(np.prod(feat, dtype=np.int64))
    return max(1, int(chunk_mb * 2**20) // per_row)


def fill(dtype: np.dtype, start: int, n: int, feat: tuple[int, ...]) -> np.ndarray:
    base = (np.arange(start, start + n, dtype=np.int64) % 251).reshape((n,) + (1,) * len(feat))
    arr = np.broadcast_to(base, (n,) + feat)
    if np.dtype(dtype) == np.bool_:
        return (arr % 2 == 1).astype(np.bool_)
    return arr.astype(dtype)


# ------------------------------------------------------------------------------ generation


def generate(path: str, backend: str, n: int, chunk_mb: float) -> None:
    if backend == "h5":
        import h5py

        with h5py.File(path, "w") as f:
            f.attrs["__tensordict__"] = json.dumps({"batch_size": [n], "version": 1})
            f.create_group("next").attrs["__tensordict__"] = json.dumps(
                {"batch_size": [n], "version": 1}
            )
            for key, dt, feat, marker in LAYOUT:
                c = min(n, chunk_rows(feat, dt, chunk_mb))
                ds = f.create_dataset(key, shape=(n,) + feat, dtype=dt, chunks=(c,) + feat)
                if marker:
                    ds.attrs["__ptd_dtype__"] = marker
                step = max(
                    c,
                    SLAB_BYTES
                    // max(1, ds.dtype.itemsize * int(np.prod(feat, dtype=np.int64)))
                    // c
                    * c,
                )
                for s in range(0, n, step):
                    ds[s : s + step] = fill(dt, s, min(step, n - s), feat)
    else:
        import zarr

        root = zarr.open_group(path, mode="w")
        root.attrs["__tensordict__"] = {"batch_size": [n], "version": 1}
        root.create_group("next").attrs["__tensordict__"] = {"batch_size": [n], "version": 1}
        for key, dt, feat, marker in LAYOUT:
            c = min(n, chunk_rows(feat, dt, chunk_mb))
            arr = root.create_array(
                key,
                shape=(n,) + feat,
                dtype=dt,
                chunks=(c,) + feat,
                compressors=None,
                attributes={"__ptd_dtype__": marker} if marker else {},
            )
            step = max(
                c,
                SLAB_BYTES
                // max(1, np.dtype(dt).itemsize * int(np.prod(feat, dtype=np.int64)))
                // c
                * c,
            )
            for s in range(0, n, step):
                arr[s : s + step] = fill(dt, s, min(step, n - s), feat)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "consolidated metadata is not part of the spec"
            zarr.consolidate_metadata(path)


# ------------------------------------------------------------------------------ child runs


def child_plain(src: str, dst: str, backend: str) -> int:
    """Chunk-aligned slabs read with h5py/zarr, written with ``tofile``: one file per array."""
    os.makedirs(dst)
    total = 0
    if backend == "h5":
        import h5py

        f = h5py.File(src, "r")
        arrays = [(key, f[key]) for key, *_ in LAYOUT]
    else:
        import zarr

        g = zarr.open_group(src, mode="r", use_consolidated=True)
        arrays = [(key, g[key]) for key, *_ in LAYOUT]
    for key, arr in arrays:
        row = arr.dtype.itemsize * int(np.prod(arr.shape[1:], dtype=np.int64))
        c = arr.chunks[0]
        step = max(c, SLAB_BYTES // row // c * c)
        buf = np.empty((min(step, arr.shape[0]),) + tuple(arr.shape[1:]), dtype=arr.dtype)
        with open(os.path.join(dst, key.replace("/", "_") + ".memmap"), "wb") as out:
            for s in range(0, arr.shape[0], step):
                e = min(arr.shape[0], s + step)
                if backend == "h5":  # h5py's fastest path: straight into a reused buffer
                    slab = buf[: e - s]
                    arr.read_direct(slab, source_sel=np.s_[s:e])
                else:
                    slab = np.asarray(arr[s:e])
                slab.tofile(out)
                total += slab.nbytes
    return total


def child_ptd(src: str, dst: str, backend: str) -> int:
    from ptd import PersistentTensorDict

    p = (
        PersistentTensorDict.from_h5(src)
        if backend == "h5"
        else PersistentTensorDict.from_zarr(src)
    )
    mm = p.memmap(dst)
    total = sum(mm.get(k).numel() * mm.get(k).element_size() for k in mm.keys(True, True))
    p.close()
    return total


def child_main(kind: str, src: str, dst: str, backend: str) -> None:
    # imports are not part of the copy: load them first (both sides import torch, so that
    # the RSS baselines are alike)
    import h5py  # noqa: F401
    import torch  # noqa: F401
    import zarr  # noqa: F401

    if kind == "ptd":
        import ptd.containers.memmap
        import ptd.containers.persistent.persistent_tensordict  # noqa: F401
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    nbytes = (child_ptd if kind == "ptd" else child_plain)(src, dst, backend)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    print(
        json.dumps(
            {
                "seconds": seconds,
                "nbytes": nbytes,
                "peak_rss": peak * scale,
                "import_rss": base_rss * scale,
            }
        )
    )


def run_child(kind: str, src: str, dst: str, backend: str) -> dict:
    shutil.rmtree(dst, ignore_errors=True)
    os.sync()  # start each run with no dirty pages of an earlier one waiting for writeback
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", kind, src, dst, backend],
        check=True,
        capture_output=True,
        text=True,
    )
    shutil.rmtree(dst, ignore_errors=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def warm(path: str) -> None:
    files = (
        [path]
        if os.path.isfile(path)
        else [os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs]
    )
    for name in files:
        with open(name, "rb") as f:
            while f.read(64 << 20):
                pass


# ------------------------------------------------------------------------------ main


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--size-mb", type=float, default=2048, help="store size per backend (default 2048)"
    )
    ap.add_argument("--chunk-mb", type=float, default=4, help="chunk size on disk (default 4)")
    ap.add_argument("--backend", choices=["h5", "zarr", "both"], default="both")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where to make the temporary directory")
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument(
        "--child", nargs=4, metavar=("KIND", "SRC", "DST", "BACKEND"), help=argparse.SUPPRESS
    )
    args = ap.parse_args()
    if args.child:
        child_main(*args.child)
        return

    n = rows_for(args.size_mb)
    backends = ["h5", "zarr"] if args.backend == "both" else [args.backend]
    tmp = tempfile.mkdtemp(prefix="ptd-bench-memmap-", dir=args.dir)
    results = {
        "rows": n,
        "size_bytes": n * row_bytes(),
        "chunk_mb": args.chunk_mb,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "backends": {},
    }
    print(
        f"store: {n:,} rows, {n * row_bytes() / 2**20:,.0f} MiB per backend, {args.chunk_mb} MiB chunks, in {tmp}"
    )
    try:
        for backend in backends:
            src = os.path.join(tmp, "src.h5" if backend == "h5" else "src.zarr")
            t0 = time.perf_counter()
            generate(src, backend, n, args.chunk_mb)
            print(f"[{backend}] generated in {time.perf_counter() - t0:.1f} s")
            warm(src)
            runs: dict[str, list[dict]] = {"plain": [], "ptd": []}
            for _ in range(args.repeats):
                for kind in ("plain", "ptd"):
                    r = run_child(kind, src, os.path.join(tmp, f"out-{kind}"), backend)
                    runs[kind].append(r)
                    print(
                        f"[{backend}] {kind:5s} {r['nbytes'] / 2**20 / r['seconds']:8.1f} MiB/s  "
                        f"{r['seconds']:6.2f} s  peak RSS {r['peak_rss'] / 2**20:6.1f} MiB "
                        f"(after imports {r['import_rss'] / 2**20:.1f} MiB)"
                    )
            best = {k: min(v, key=lambda r: r["seconds"]) for k, v in runs.items()}
            ratio = best["plain"]["seconds"] / best["ptd"]["seconds"]
            med = {k: statistics.median(r["seconds"] for r in v) for k, v in runs.items()}
            peak = max(r["peak_rss"] for r in runs["ptd"])
            summary = {
                "plain_mib_s": best["plain"]["nbytes"] / 2**20 / best["plain"]["seconds"],
                "ptd_mib_s": best["ptd"]["nbytes"] / 2**20 / best["ptd"]["seconds"],
                "ratio": ratio,
                "median_ratio": med["plain"] / med["ptd"],
                "ptd_peak_rss_mib": peak / 2**20,
                "plain_peak_rss_mib": max(r["peak_rss"] for r in runs["plain"]) / 2**20,
                "runs": runs,
            }
            results["backends"][backend] = summary
            ok_t = "ok" if ratio >= 0.7 else "BELOW TARGET"
            ok_m = "ok" if peak < 400 * 2**20 else "ABOVE TARGET"
            print(
                f"[{backend}] ptd/plain throughput {ratio:.2f}x best, {med['plain'] / med['ptd']:.2f}x median "
                f"(target >= 0.7x: {ok_t}); "
                f"ptd peak RSS {peak / 2**20:.0f} MiB (target < 400 MB: {ok_m})"
            )
            shutil.rmtree(src, ignore_errors=True) if os.path.isdir(src) else os.remove(src)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
