"""The cost of keeping file access inside a store (``ptd.storage.paths.StoreRoot``), per chunk.

Writes a zarr v3 store with many small chunks (uncompressed: one file each), then times:

* a raw ``os.open``/``os.pread``/``os.close`` of every chunk file (what the chunk reader did
  before), against ``StoreRoot.read`` (``O_NOFOLLOW``, a remembered directory, an ``fstat``);
* the first mapping of every chunk through the fast path (``ZarrMaps``), and a full read of
  the array through ptd, zstd-compressed (ptd's chunk reader) and uncompressed (maps).

Run: ``python benchmarks/bench_confined_paths.py [CHUNKS]`` (default 20000). It prints
microseconds per chunk; nothing is asserted.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np
import zarr

try:
    from ptd.storage.paths import StoreRoot
except ImportError:  # a ptd before the check: its full reads only, for comparison
    StoreRoot = None  # type: ignore[assignment,misc]


def _best(fn: Callable[[], None], repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        store = os.path.join(d, "s.zarr")
        root = zarr.open_group(store, mode="w", zarr_format=3)
        for name, comp in (("raw", None), ("zstd", zarr.codecs.ZstdCodec())):
            a = root.create_array(
                name, shape=(n, 16), dtype="float32", chunks=(1, 16), compressors=comp
            )
            a[:] = np.random.default_rng(0).random((n, 16), dtype=np.float32)
        files = [os.path.join(store, "raw", "c", str(i), "0") for i in range(n)]

        def plain() -> None:
            for f in files:
                fd = os.open(f, os.O_RDONLY)
                os.pread(fd, 64, 0)
                os.close(fd)

        print(f"{n} chunk files, {len(set(os.path.dirname(f) for f in files))} directories")
        if StoreRoot is None:
            print(f"open+pread+close     {_best(plain) / n * 1e6:7.2f} us/chunk")
        else:

            def confined_cold() -> None:  # a new store: every directory checked once
                paths = StoreRoot(store)
                for f in files:
                    paths.read(f)

            warm = StoreRoot(store)

            def confined_warm() -> None:
                for f in files:
                    warm.read(f)

            # interleaved, best of 7 each: the machine may be busy
            times: dict[str, float] = {"plain": 1e9, "cold": 1e9, "warm": 1e9}
            for _ in range(7):
                for key, fn in (("plain", plain), ("cold", confined_cold), ("warm", confined_warm)):
                    times[key] = min(times[key], _best(fn, 1))
            base = times["plain"]
            print(f"open+pread+close     {base / n * 1e6:7.2f} us/chunk")
            for key in ("warm", "cold"):
                t = times[key]
                print(
                    f"StoreRoot.read {key}  {t / n * 1e6:7.2f} us/chunk  (+{(t - base) / n * 1e6:.2f})"
                )

        import ptd

        for name, fast in (("raw", True), ("zstd", True)):

            def full(name: str = name, fast: bool = fast) -> None:
                p = ptd.PersistentTensorDict.from_zarr(
                    store, mode="r", fast_path=fast, chunk_cache=0
                )
                p[name]
                p.close()

            t = _best(full, 3)
            print(f"full read of {name:4s} (one chunk per row) {t / n * 1e6:7.2f} us/chunk")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20000)
