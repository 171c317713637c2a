#!/usr/bin/env python
"""Stores with many small nodes, and Zarr v2 stores: ``ptd convert`` next to plain loops.

Part 1 (``--nodes``, default 10,000): an HDF5 file with that many small float32 datasets
(``[16, 4]``, 256 bytes each) in one group, written with plain h5py. Then:

    h5 -> zarr  ptd: ``ptd.convert(src, dst)``. plain: an h5py ``visititems`` walk creating
                each zarr array with zarr-python (same chunks: the whole array, uncompressed)
                and writing its data, one at a time (what a user's first script does).
    h5 -> h5    ptd: ``ptd.convert(src, dst.h5)``. plain: h5py ``visititems`` + create_dataset.
    zarr -> h5  the zarr store ptd wrote, back to h5. ptd: ``ptd.convert``. plain: zarr-python
                ``members(max_depth=None)`` + h5py create_dataset of each array's data.
    inspect     ``ptd.info(src)`` (what ``ptd inspect`` runs) and ``ptd.validate(src)``.
    memmap      ``ptd.containers.memmap.export_memmap(src, dir)``. plain: a ``visititems`` walk writing
                each dataset's bytes to a file and one ``meta.json`` per group.
    validate    ``ptd.validate(src, data=True)`` (``ptd validate --data``). plain: a walk
      --data    reading every dataset and checking ``np.isfinite(...).all()``.
    diff        ``ptd.diff(src, copy)`` against the plain h5 -> h5 copy. plain: a walk of both
                files comparing every dataset with ``np.array_equal``.

The target for memmap, validate --data and diff: ptd within 1.5x of the plain loop (ratio
plain / ptd at least 0.67x).

Figures (``--nodes 5000 --skip-v2``, a shared 2-core machine, CPU seconds of the cold run, ptd
/ plain, ratio plain / ptd), before -> after the per-dataset metadata cache of issue 38:
``ptd.info`` 3.53 -> 3.07 s; ``ptd.validate`` 3.66 -> 2.62 s; memmap 10.90 -> 8.90 s against
3.22-3.54 s (0.32x -> 0.36x); validate --data 6.01 -> 4.29 s against 2.07-2.11 s (0.35x ->
0.48x); diff 8.42 -> 7.24 s against 3.60-3.65 s (0.43x -> 0.50x). Still short of the target:
per node ptd opens each link itself (``h5py.h5o.open``, a netCDF dimension check, a soft-link
and cycle check), reads its attributes and stored size for the listing, runs the lint and
layout checks, and (memmap) opens the source twice -- once to list what it leaves out, once
to copy -- work the plain loops do not do.

Part 2 (``--v2-arrays``, default 50 arrays of ``--v2-rows`` x 64 float32, blosc-compressed,
chunked by 4096 rows): a Zarr v2 store written by zarr-python (``zarr_format=2``, what xarray
wrote for years), converted to Zarr v3 by ``ptd.convert`` and by a plain zarr-python copy
(open the v2 group, create each v3 array with the same chunks and a blosc codec, copy it
chunk-row by chunk-row).

Cold: each measurement runs in a fresh child process (imports, and the first pass over the
files, included; the source file is in the page cache since it was just written). Warm: the
same conversion again in that process, right after (imports done, metadata caches warm).
Every figure is seconds of wall time; ratios are plain / ptd (> 1: ptd faster). A second line
gives the CPU seconds each side used (all its threads; ``time.process_time``): on a machine
shared with other jobs wall times swing with the load, CPU times much less.

Usage::

    python benchmarks/bench_many_nodes.py                    # 10,000 nodes (the issue's size)
    python benchmarks/bench_many_nodes.py --nodes 2000       # quicker
    python benchmarks/bench_many_nodes.py --dir /dev/shm     # where the temporary data goes
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, os, shutil, sys, time, warnings
warnings.simplefilter("ignore")
t0 = time.perf_counter()
what, src, dst = sys.argv[1], sys.argv[2], sys.argv[3]

def run_once(dst):
    if what == "ptd":
        import ptd
        ptd.convert(src, dst)
    elif what == "ptd-info":
        import ptd
        ptd.info(src)
    elif what == "ptd-validate":
        import ptd
        ptd.validate(src)
    elif what == "plain-zarr":
        import h5py, zarr
        with h5py.File(src, "r") as f:
            root = zarr.open_group(dst, mode="w")
            def visit(name, obj):
                if isinstance(obj, h5py.Group):
                    root.require_group(name)
                else:
                    a = root.create_array(name, shape=obj.shape, dtype=obj.dtype,
                                          chunks=obj.shape or None, compressors=None)
                    a[...] = obj[()]
            f.visititems(visit)
    elif what == "plain-h5":
        import h5py
        with h5py.File(src, "r") as f, h5py.File(dst, "w") as g:
            def visit(name, obj):
                if isinstance(obj, h5py.Group):
                    g.require_group(name)
                else:
                    g.create_dataset(name, data=obj[()])
            f.visititems(visit)
    elif what == "plain-zarr-h5":
        import h5py, zarr
        src_g = zarr.open_group(src, mode="r")
        with h5py.File(dst, "w") as g:
            for name, node in src_g.members(max_depth=None):
                if isinstance(node, zarr.Group):
                    g.require_group(name)
                else:
                    g.create_dataset(name, data=node[...])
    elif what == "ptd-memmap":
        from ptd.containers.memmap import export_memmap
        export_memmap(src, dst)
    elif what == "plain-memmap":
        # what a user's script does: each dataset's bytes to a file, one meta.json per group
        import h5py, numpy as np
        metas = {}
        with h5py.File(src, "r") as f:
            def visit(name, obj):
                path = os.path.join(dst, name)
                if isinstance(obj, h5py.Group):
                    os.makedirs(path, exist_ok=True)
                    metas[path] = {}
                else:
                    parent, leaf = os.path.split(path)
                    np.ascontiguousarray(obj[()]).tofile(path + ".memmap")
                    metas.setdefault(parent, {})[leaf] = {"shape": list(obj.shape),
                                                          "dtype": str(obj.dtype)}
            os.makedirs(dst, exist_ok=True)
            metas[dst] = {}
            f.visititems(visit)
        for path, meta in metas.items():
            with open(os.path.join(path, "meta.json"), "w") as out:
                json.dump(meta, out)
    elif what == "ptd-validate-data":
        import ptd
        ptd.validate(src, data=True)
    elif what == "plain-validate-data":
        # read every dataset and check it is finite: the loop a CI script writes
        import h5py, numpy as np
        bad = []
        with h5py.File(src, "r") as f:
            def visit(name, obj):
                if isinstance(obj, h5py.Dataset) and not np.isfinite(obj[()]).all():
                    bad.append(name)
            f.visititems(visit)
    elif what == "ptd-diff":
        import ptd
        ptd.diff(src, dst)
    elif what == "plain-diff":
        import h5py, numpy as np
        differ = []
        with h5py.File(src, "r") as f, h5py.File(dst, "r") as g:
            def visit(name, obj):
                if isinstance(obj, h5py.Dataset):
                    other = g.get(name)
                    if other is None or not np.array_equal(obj[()], other[()]):
                        differ.append(name)
            f.visititems(visit)
    elif what == "plain-v2":
        import zarr
        src_g = zarr.open_group(src, mode="r")
        dst_g = zarr.open_group(dst, mode="w", zarr_format=3)
        codec = {"name": "blosc", "configuration": {"cname": "lz4", "clevel": 5, "shuffle": "shuffle"}}
        for name, arr in src_g.arrays():
            out = dst_g.create_array(name, shape=arr.shape, dtype=arr.dtype, chunks=arr.chunks,
                                     compressors=[codec])
            step = arr.chunks[0]
            for a in range(0, arr.shape[0], step):
                out[a:a + step] = arr[a:a + step]
    else:
        raise SystemExit(f"unknown {what}")

cold, cpu = time.perf_counter(), time.process_time()
run_once(dst)
cold, cold_cpu = time.perf_counter() - cold, time.process_time() - cpu
total = time.perf_counter() - t0
base, ext = os.path.splitext(dst)
w, cpu = time.perf_counter(), time.process_time()
run_once(dst if what.endswith("diff") or dst == "-" else base + "-warm" + ext)
warm, warm_cpu = time.perf_counter() - w, time.process_time() - cpu
print(json.dumps({"cold": cold, "cold_with_imports": total, "warm": warm,
                  "cold_cpu": cold_cpu, "warm_cpu": warm_cpu}))
"""


def child(what: str, src: str, dst: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, what, src, dst], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def make_many(path: str, n: int) -> None:
    import h5py
    import numpy as np

    with h5py.File(path, "w") as f:
        g = f.create_group("data")
        for i in range(n):
            g.create_dataset(f"d{i:05d}", data=np.full((16, 4), i, dtype="f4"))


def make_v2(path: str, arrays: int, rows: int) -> None:
    import warnings

    import numpy as np
    import zarr

    warnings.simplefilter("ignore")
    g = zarr.open_group(path, mode="w", zarr_format=2)
    rng = np.random.default_rng(0)
    for i in range(arrays):
        a = g.create_array(f"a{i:03d}", shape=(rows, 64), dtype="f4", chunks=(4096, 64))
        a[:] = rng.standard_normal((rows, 64)).astype("f4")


def row(label: str, ptd_r: dict[str, float], plain_r: dict[str, float] | None) -> None:
    def f(x: float | None) -> str:
        return "    -" if x is None else f"{x:7.2f}"

    line = f"{label:<26} ptd cold {f(ptd_r['cold'])} s,"
    line += f" warm {f(ptd_r['warm'])} s"
    if plain_r is not None:
        line += f" | plain cold {f(plain_r['cold'])} s, warm {f(plain_r['warm'])} s"
        line += f" | ratio cold {plain_r['cold'] / ptd_r['cold']:.1f}x"
        if ptd_r["warm"] and plain_r["warm"]:
            line += f", warm {plain_r['warm'] / ptd_r['warm']:.1f}x"
    print(line, flush=True)
    # CPU seconds (all threads): what a loaded machine cannot take away
    line = f"{'':<26} cpu: ptd cold {f(ptd_r['cold_cpu'])} s, warm {f(ptd_r['warm_cpu'])} s"
    if plain_r is not None:
        line += f" | plain cold {f(plain_r['cold_cpu'])} s, warm {f(plain_r['warm_cpu'])} s"
        line += f" | ratio cold {plain_r['cold_cpu'] / max(ptd_r['cold_cpu'], 1e-9):.1f}x"
    print(line, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--v2-arrays", type=int, default=50)
    ap.add_argument("--v2-rows", type=int, default=65_536)
    ap.add_argument("--dir", default=None, help="parent of the temporary directory")
    ap.add_argument("--skip-v2", action="store_true")
    ap.add_argument("--skip-many", action="store_true")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="ptd-bench-nodes-", dir=args.dir)
    try:
        print(f"data in {tmp}; cold = fresh process, warm = the same conversion again in it")
        if not args.skip_many:
            src = os.path.join(tmp, "many.h5")
            t = time.perf_counter()
            make_many(src, args.nodes)
            print(
                f"{args.nodes} datasets [16, 4] float32 written in {time.perf_counter() - t:.1f} s"
            )
            p = child("ptd", src, os.path.join(tmp, "ptd.zarr"))
            q = child("plain-zarr", src, os.path.join(tmp, "plain.zarr"))
            row(f"h5 -> zarr ({args.nodes} nodes)", p, q)
            p = child("ptd", src, os.path.join(tmp, "ptd.h5"))
            q = child("plain-h5", src, os.path.join(tmp, "plain.h5"))
            row(f"h5 -> h5 ({args.nodes} nodes)", p, q)
            # the zarr store ptd wrote (consolidated metadata, as ptd and xarray write it)
            zsrc = os.path.join(tmp, "ptd.zarr")
            p = child("ptd", zsrc, os.path.join(tmp, "from-zarr-ptd.h5"))
            q = child("plain-zarr-h5", zsrc, os.path.join(tmp, "from-zarr-plain.h5"))
            row(f"zarr -> h5 ({args.nodes} nodes)", p, q)
            row("ptd.info (inspect)", child("ptd-info", src, "-"), None)
            row("ptd.validate", child("ptd-validate", src, "-"), None)
            # the small-node commands the target is 1.5x a plain loop for (ratio >= 0.67x)
            p = child("ptd-memmap", src, os.path.join(tmp, "ptd.mm"))
            q = child("plain-memmap", src, os.path.join(tmp, "plain.mm"))
            row(f"memmap ({args.nodes} nodes)", p, q)
            p = child("ptd-validate-data", src, "-")
            q = child("plain-validate-data", src, "-")
            row("validate --data", p, q)
            copy = os.path.join(tmp, "plain.h5")
            row("diff h5 vs h5 copy", child("ptd-diff", src, copy), child("plain-diff", src, copy))
        if not args.skip_v2:
            src = os.path.join(tmp, "v2.zarr")
            make_v2(src, args.v2_arrays, args.v2_rows)
            mb = args.v2_arrays * args.v2_rows * 64 * 4 / 1e6
            print(
                f"zarr v2 store: {args.v2_arrays} arrays [{args.v2_rows}, 64] float32 "
                f"(blosc lz4), {mb:.0f} MB logical"
            )
            p = child("ptd", src, os.path.join(tmp, "v3-ptd.zarr"))
            q = child("plain-v2", src, os.path.join(tmp, "v3-plain.zarr"))
            row("zarr v2 -> v3", p, q)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
