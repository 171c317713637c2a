#!/usr/bin/env python
"""What the chunk checks of ``ptd/storage/frames.py`` cost on real compressed stores.

Writes (once, under ``--dir``) an HDF5 file (shuffle + gzip) and two Zarr v3 stores (zstd,
blosc) of the same float32 data (``--rows`` x 64, chunks of 1024 rows: 256 kB decoded), then
times, with the chunk cache off, a full read of the leaf and 200 random minibatches of 256
rows through ptd (the best of ``--repeats``), and prints seconds and microseconds per chunk
decoded. Run it once with this checkout and once with a checkout of another commit on
``PYTHONPATH`` (the same ``--dir``: the stores are written once) to compare::

    PYTHONPATH=. python benchmarks/bench_decode_checks.py --dir /tmp/bdc
    PYTHONPATH=../ptd-before python benchmarks/bench_decode_checks.py --dir /tmp/bdc
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

COLS, CHUNK = 64, 1024


def _data(rows: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    walk = np.cumsum(rng.standard_normal((rows, COLS)), axis=0)
    return walk.round(2).astype("float32")


def make(directory: Path, rows: int) -> dict[str, Path]:
    import h5py
    import zarr
    from zarr.codecs import BloscCodec, ZstdCodec

    directory.mkdir(parents=True, exist_ok=True)
    paths = {
        "h5 gzip+shuffle": directory / "g.h5",
        "zarr zstd": directory / "z.zarr",
        "zarr blosc": directory / "b.zarr",
    }
    if all(p.exists() for p in paths.values()):
        return paths
    x = _data(rows)
    with h5py.File(paths["h5 gzip+shuffle"], "w") as f:
        f.create_dataset("obs", data=x, chunks=(CHUNK, COLS), compression="gzip", shuffle=True)
    for name, codec in (("zarr zstd", ZstdCodec()), ("zarr blosc", BloscCodec())):
        g = zarr.open_group(str(paths[name]), mode="w")
        a = g.create_array(
            "obs", shape=x.shape, chunks=(CHUNK, COLS), dtype="f4", compressors=codec
        )
        a[:] = x
    return paths


def bench(path: Path, repeats: int, rows: int) -> tuple[float, float]:
    from ptd import PersistentTensorDict

    opener = (
        PersistentTensorDict.from_h5 if path.suffix == ".h5" else PersistentTensorDict.from_zarr
    )
    rng = np.random.default_rng(1)
    batches = [np.sort(rng.choice(rows, 256, replace=False)) for _ in range(200)]
    full = batch = float("inf")
    for _ in range(repeats):
        p = opener(str(path), mode="r", chunk_cache=0)
        t = time.perf_counter()
        p["obs"][:]
        full = min(full, time.perf_counter() - t)
        t = time.perf_counter()
        for b in batches:
            p[b]["obs"]
        batch = min(batch, time.perf_counter() - t)
        p.close()
    return full, batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/tmp/ptd-bench-decode-checks")
    parser.add_argument("--rows", type=int, default=200 * CHUNK)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    import ptd

    print(f"ptd from {os.path.dirname(ptd.__file__)}")
    nchunks = -(-args.rows // CHUNK)
    for name, path in make(Path(args.dir), args.rows).items():
        full, batch = bench(path, args.repeats, args.rows)
        print(
            f"{name:18s} full read {full:.3f} s ({full / nchunks * 1e6:.0f} us/chunk)   "
            f"200 minibatches of 256 rows {batch:.3f} s"
        )


if __name__ == "__main__":
    main()
