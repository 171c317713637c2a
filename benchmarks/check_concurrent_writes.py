#!/usr/bin/env python
"""Counts of wrong results from writes that meet inside one zarr chunk (not a timing).

Two checks, each repeated ``--tries`` times on data made under a temporary directory:

1. **zarr's own sharded copy.** ``create_array(data=...)`` of a 96 x 3 uint64 array in 3-row
   chunks inside 12-row shards, read back with zarr: how many tries came out wrong silently
   (chunks lost) and how many raised zarr's checksum error, against the same array created
   first and then assigned in one ``a[...] = arr``. zarr 3.1.2 copies chunk by chunk,
   concurrently, so two chunks of one shard race (zarr 3.1.3 copies shard by shard): the
   reason ptd's test fixtures create and then assign.
2. **ptd's threaded convert.** ``ptd.convert(src, dst, chunks=3, workers=4)`` of an HDF5
   file in 7-row chunks, with slabs of 64 bytes (``ptd.transfer.slabs.SLAB_BYTES``), so
   that no slab can hold a whole common multiple of the two chunkings; then as many random
   geometries (h5, zarr and sharded zarr sources, chunk sizes, slab budgets). A wrong
   result here means two slabs wrote into one destination chunk at once.

Usage::

    python benchmarks/check_concurrent_writes.py              # 50 tries each
    python benchmarks/check_concurrent_writes.py --tries 10 --tmp /dev/shm
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import zarr

import ptd
from ptd.transfer import slabs


def zarr_sharded_copy(base: Path, tries: int) -> None:
    arr = np.arange(96 * 3, dtype="u8").reshape(96, 3)
    for how in ("create_array(data=...)", "create, then a[...] = arr"):
        wrong = errors = 0
        for t in range(tries):
            path = base / f"copy{t}.zarr"
            root = zarr.open_group(str(path), mode="w")
            try:
                if how.startswith("create_array"):
                    root.create_array("a", data=arr, chunks=(3, 3), shards=(12, 3))
                else:
                    a = root.create_array(
                        "a", shape=arr.shape, dtype=arr.dtype, chunks=(3, 3), shards=(12, 3)
                    )
                    a[...] = arr
                back = zarr.open_array(str(path / "a"), mode="r")[...]
                wrong += not np.array_equal(back, arr)
            except ValueError:  # "Stored and computed checksum do not match"
                errors += 1
            shutil.rmtree(path)
        print(f"  {how:<28} wrong {wrong:>3} of {tries}, checksum errors {errors:>3} of {tries}")


def _convert_once(
    base: Path, kind: str, n: int, w: int, src_c: int, dst_c: int | None, shard: int = 1
) -> bool:
    data = np.arange(n * w, dtype="f4").reshape(n, w)
    if kind == "h5":
        src = base / "src.h5"
        with h5py.File(src, "w") as f:
            f.create_dataset("x", data=data, chunks=(min(src_c, n), w))
    else:
        src = base / "src.zarr"
        shutil.rmtree(src, ignore_errors=True)
        root = zarr.open_group(str(src), mode="w")
        kw: dict[str, Any] = {"chunks": (src_c, w)}
        if kind == "zarr_sharded":
            kw["shards"] = (src_c * shard, w)
        a = root.create_array("x", shape=data.shape, dtype=data.dtype, **kw)
        a[...] = data
    dst = base / "dst.zarr"
    shutil.rmtree(dst, ignore_errors=True)
    ptd.convert(src, dst, chunks=dst_c, workers=4)
    return bool(np.array_equal(zarr.open_array(str(dst / "x"), mode="r")[...], data))


def threaded_convert(base: Path, tries: int, seed: int) -> None:
    saved = slabs.SLAB_BYTES
    try:
        slabs.SLAB_BYTES = 64
        wrong = sum(not _convert_once(base, "h5", 420, 8, 7, 3) for _ in range(tries))
        print(f"  h5 chunks of 7 -> zarr chunks of 3, 64-byte slabs  wrong {wrong:>3} of {tries}")
        rng = random.Random(seed)
        wrong = 0
        for _ in range(tries):
            kind = rng.choice(["h5", "zarr", "zarr_sharded"])
            slabs.SLAB_BYTES = rng.choice([16, 64, 256, 1024])
            n, w = rng.randint(50, 600), rng.randint(1, 6)
            src_c, dst_c = rng.randint(1, 40), rng.randint(1, 40)
            # a sharded source keeps its shards (the destination's chunks are not chosen)
            shard = rng.randint(1, 4)
            wrong += not _convert_once(
                base, kind, n, w, src_c, dst_c if kind != "zarr_sharded" else None, shard
            )
        print(f"  random geometries (h5, zarr, sharded zarr)       wrong {wrong:>3} of {tries}")
    finally:
        slabs.SLAB_BYTES = saved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tries", type=int, default=50)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--tmp", type=Path, default=None, help="where the stores are written")
    a = ap.parse_args()
    if a.tmp is not None:
        a.tmp.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="ptd-writes-", dir=a.tmp))
    try:
        print(f"zarr {zarr.__version__}, ptd {ptd.__version__}; counts, not timings")
        print("1. zarr's sharded copy (96 x 3 uint64, 3-row chunks in 12-row shards)")
        zarr_sharded_copy(base, a.tries)
        print("2. ptd.convert(..., workers=4) into zarr")
        threaded_convert(base, a.tries, a.seed)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
