#!/usr/bin/env python
"""What keeping zarr consolidated metadata fresh costs per structural change.

Generates, in a temporary directory deleted at the end, a zarr store of ``--groups`` groups x
``--leaves`` small leaves (default 50 x 10 = 500 arrays, plus the root's) with consolidated
metadata (what ``from_dict`` and ``convert`` write). Then, in a writable session, adds
``--ops`` new leaves one by one (each a structural change) and reports the cost per change of:

    ptd          what ptd does: the first change rewrites the root ``zarr.json`` without its
                 consolidated metadata (readers opened meanwhile list the live hierarchy),
                 ``close()`` writes it again once. Per change, and the one-off costs apart.
    refresh      the other choice: consolidated metadata rewritten after every change
                 (``zarr.consolidate_metadata``, a walk of the whole hierarchy each time).
    raw zarr     ``group.create_array`` with no consolidation at all (the floor).

Figures are warm (the store is in the page cache and the libraries are imported; the first
change of a session, which also drops the consolidated metadata, is reported apart as the
one-off cost of a session).

Usage::

    python benchmarks/bench_consolidated.py                    # 500 arrays, 50 changes
    python benchmarks/bench_consolidated.py --groups 200 --ops 20
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch
import zarr

from ptd import PersistentTensorDict

warnings.filterwarnings("ignore")


def make_store(path: Path, groups: int, leaves: int) -> None:
    data = {f"g{i}": {f"x{j}": torch.zeros(4, 2) for j in range(leaves)} for i in range(groups)}
    PersistentTensorDict.from_dict(data, str(path), backend="zarr", batch_size=[4]).close()


def bench_ptd(path: Path, ops: int) -> tuple[float, list[float], float]:
    p = PersistentTensorDict.from_zarr(str(path), mode="r+")
    times = []
    for k in range(ops):
        t0 = time.perf_counter()
        p[f"new{k}"] = torch.zeros(4)
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    p.close()
    close = time.perf_counter() - t0
    return times[0], times[1:], close


def bench_refresh(path: Path, ops: int) -> list[float]:
    p = PersistentTensorDict.from_zarr(str(path), mode="r+")
    times = []
    for k in range(ops):
        t0 = time.perf_counter()
        p[f"ref{k}"] = torch.zeros(4)
        zarr.consolidate_metadata(str(path))
        times.append(time.perf_counter() - t0)
    p.close()
    return times


def bench_raw(path: Path, ops: int) -> list[float]:
    g = zarr.open_group(str(path), mode="r+", use_consolidated=False)
    times = []
    for k in range(ops):
        t0 = time.perf_counter()
        a = g.create_array(f"raw{k}", shape=(4,), dtype="float32", compressors=None)
        a[...] = np.zeros(4, dtype="float32")
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--groups", type=int, default=50)
    ap.add_argument("--leaves", type=int, default=10)
    ap.add_argument("--ops", type=int, default=50)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.zarr"
        make_store(path, args.groups, args.leaves)
        n = args.groups * (args.leaves + 1)
        print(f"store: {n} nodes, consolidated; {args.ops} new leaves per session (warm)")
        first, rest, close = bench_ptd(path, args.ops)
        zarr.consolidate_metadata(str(path))
        refresh = bench_refresh(path, args.ops)
        raw = bench_raw(path, args.ops)
        ptd_ms = statistics.median(rest) * 1e3
        ref_ms = statistics.median(refresh) * 1e3
        raw_ms = statistics.median(raw) * 1e3
        print(f"raw zarr create_array (no consolidation)  {raw_ms:8.2f} ms / change")
        print(f"ptd (drop once, consolidate at close)     {ptd_ms:8.2f} ms / change")
        print(f"    one-off: first change {first * 1e3:.2f} ms, close {close * 1e3:.2f} ms")
        print(f"refresh after every change                {ref_ms:8.2f} ms / change")
        print(
            f"ratio refresh / ptd per change: {ref_ms / ptd_ms:.1f}x; ptd / raw: {ptd_ms / raw_ms:.1f}x"
        )


if __name__ == "__main__":
    main()
