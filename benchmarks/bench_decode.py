#!/usr/bin/env python
"""Decode benchmark: what one gzip + shuffle HDF5 chunk costs ptd to turn into rows.

Makes, in memory, the chunks of the training benchmark's compressible data (``obs``: a
rounded random walk, float32 [1024, 64] per chunk, the layout ``bench_training.py --data
walk`` writes) compressed as HDF5's filters store them (shuffle, then deflate level 4), and
times, warm (the same chunks again and again, all in memory; median of ``--repeats``):

    inflate      zlib (``zlib.decompressobj``) against libdeflate (the ``deflate`` package,
                 a dependency of ptd), per chunk
    un-shuffle   a whole chunk un-shuffled into a new array (what ptd did before), against
                 ptd's copy of only the rows asked straight out of the shuffled bytes
                 (``ptd.storage.read.shuffled.copy_rows``), for 1 random row (a random
                 minibatch touches about one row per chunk) and for the whole chunk

Usage::

    python benchmarks/bench_decode.py
    python benchmarks/bench_decode.py --chunks 200 --repeats 7
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROWS, COLS = 1024, 64


def _chunks(n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(COLS)
    out = []
    for _ in range(n):
        steps = rng.standard_normal((ROWS, COLS)) * 0.002
        walk = x + np.cumsum(steps, axis=0)
        x = walk[-1]
        out.append(np.round(walk, 3).astype("<f4"))
    return out


def _shuffle(a: np.ndarray) -> bytes:
    return a.view(np.uint8).reshape(-1, a.dtype.itemsize).T.tobytes()


def _median_s(fn: Callable[[], Any], repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, default=100, help="chunks of 1024 x 64 float32")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import deflate

    from ptd.storage.read.shuffled import ShuffledChunk, copy_rows

    chunks = _chunks(args.chunks, 0)
    nbytes = chunks[0].nbytes
    shuffled = [_shuffle(c) for c in chunks]
    packed = [zlib.compress(s, 4) for s in shuffled]
    ratio = sum(len(s) for s in shuffled) / sum(len(p) for p in packed)
    print(
        f"bench_decode: {args.chunks} chunks of {ROWS} x {COLS} float32 ({nbytes >> 10} KiB), "
        f"shuffle + deflate 4 ({ratio:.2f}x), warm (in memory), median of {args.repeats}"
    )

    def inflate_zlib() -> None:
        for p in packed:
            d = zlib.decompressobj()
            d.decompress(p, nbytes)

    def inflate_libdeflate() -> None:
        for p in packed:
            deflate.zlib_decompress(p, nbytes)

    t_zlib = _median_s(inflate_zlib, args.repeats)
    t_fast = _median_s(inflate_libdeflate, args.repeats)
    print("\n  inflate (per chunk, warm)")
    print(f"    zlib        {t_zlib / args.chunks * 1e6:8.1f} us")
    print(
        f"    libdeflate  {t_fast / args.chunks * 1e6:8.1f} us   {t_zlib / t_fast:.2f}x zlib's "
        "speed"
    )

    raws = [np.frombuffer(s, np.uint8) for s in shuffled]
    rng = np.random.default_rng(1)
    rows = rng.integers(0, ROWS, size=len(raws))

    def whole_then_row() -> None:  # before: the chunk un-shuffled whole, then the row copied
        for raw, r in zip(raws, rows, strict=True):
            flat = np.empty(raw.size, np.uint8)
            flat[:] = raw.reshape(4, -1).T.reshape(-1)
            out = np.empty((1, COLS), "<f4")
            out[0] = flat.view("<f4").reshape(ROWS, COLS)[r]

    def fused_row() -> None:  # now: the row copied out of the shuffled bytes
        for raw, r in zip(raws, rows, strict=True):
            out = np.empty((1, COLS), "<f4")
            copy_rows(out, (slice(0, 1),), ShuffledChunk(raw, (ROWS, COLS), np.dtype("<f4")),
                      (slice(int(r), int(r) + 1),))  # fmt: skip

    def whole_then_all() -> None:
        for raw in raws:
            flat = np.empty(raw.size, np.uint8)
            flat[:] = raw.reshape(4, -1).T.reshape(-1)
            out = np.empty((ROWS, COLS), "<f4")
            out[...] = flat.view("<f4").reshape(ROWS, COLS)

    def fused_all() -> None:
        for raw in raws:
            out = np.empty((ROWS, COLS), "<f4")
            copy_rows(out, (slice(None),), ShuffledChunk(raw, (ROWS, COLS), np.dtype("<f4")),
                      (slice(None),))  # fmt: skip

    print("\n  un-shuffle and copy out (per chunk, warm)")
    for label, before, after in (
        ("1 random row", whole_then_row, fused_row),
        ("the whole chunk", whole_then_all, fused_all),
    ):
        tb = _median_s(before, args.repeats) / len(raws)
        ta = _median_s(after, args.repeats) / len(raws)
        print(
            f"    {label:<16} whole chunk first {tb * 1e6:8.1f} us, fused {ta * 1e6:8.1f} us   "
            f"{tb / ta:.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
