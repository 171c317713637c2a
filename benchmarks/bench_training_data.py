#!/usr/bin/env python
"""Training-data benchmark (issue 14, items 3-6): ptd.data's shuffled epochs, from_dict to zarr,
and sequential passes over the fast path, each next to raw h5py / zarr.

Generates, in a temporary directory deleted at the end, the replay-buffer store of
``bench_core.py`` (``--rows`` rows, default 1,000,000: obs float32[64], next/obs float32[64],
action int64, reward float32, done bool; 525 MB uncompressed) and times:

``shuffled``   on three layouts (h5 gzip level 4 with 1024-row chunks; zarr with zarr's default
               codecs (zstd) and 1024-row chunks; zarr sharded, 65536-row shards of 128-row
               zstd chunks): two shuffled epochs through one ``torch.utils.data.DataLoader``
               with ``ptd.data.ChunkShuffleSampler`` (batch 256, ``num_workers`` 0 and 2,
               persistent workers, window 8): the first epoch (which starts the workers and
               opens the store) and the next one,
               against raw random-index reads (256 unsorted rows, sorted by hand, per leaf:
               ``ds[np.sort(idx)]`` / ``arr.oindex[...]``; ``--random-batches`` of them) and a
               raw sequential read of the whole store (65536-row slabs per leaf). Bars:
               >= 100x raw random reads and >= 0.7x the raw sequential read.
``fromdict``   ``PersistentTensorDict.from_dict(h5 store, "x.zarr", backend="zarr")`` from the
               uncompressed contiguous h5 store, against a raw chunk-wise h5py -> zarr copy (8 MB
               chunks, 16 MB slabs), each in a fresh process: seconds and peak RSS growth over
               the process's RSS after imports. Bars: <= 1.25x the raw copy's time, < 100 MB
               growth.
``sequential`` first and second pass of 4096-row slices over the uncompressed contiguous h5
               store (all leaves), each measured in a fresh process (pass 1: the store was just
               opened, nothing of it mapped or cached by the process; pass 2: the same process
               again): raw h5py against ptd (fast path on). Bar: ptd >= 1.0x on both.
``overlap``    a shuffled epoch (h5 gzip, 0 workers) with a simulated training step after each
               batch (``--step-ms``, a sleep: the CPU is free, as when an accelerator trains),
               with the dataset's read ahead on and off: how much of the decode the read ahead
               hides behind the steps.
``memory``     the loader's memory on a store whose 1-D leaves have large chunks (zstd zarr,
               ``--memory-rows`` rows, default 2,000,000: obs float32[64] in 8,192-row chunks,
               action int64, reward float32 and done bool in 65,536-row chunks): two shuffled
               epochs (batch 256, window 8, ``memory_budget`` default or ``--budget``) with 0
               and 2 workers, each in a fresh process; the peak RSS summed over the process
               tree (the process and its workers, sampled every 20 ms) is printed every 1,000
               batches, beside the interpreter's own RSS (torch, ptd and the stores' libraries
               imported, nothing opened) and the budget. Cold: a fresh process, its DataLoader
               made just before; the store sits in the OS page cache (just written).
``randomness`` the sampler's randomness against a full shuffle (no store needed): distinct
               chunk groups per batch, how far rows move from their place in the store, and
               how much of the order two epochs share.

The store files were just written and sit in the OS page cache (dropping caches needs root):
"first pass" means first in a fresh process, not cold from disk. Figures are medians of
``--repeats`` rounds, raw and ptd interleaved within a round; the load average is printed: the
machine this was written on had 2 cores shared with other jobs.

Usage::

    python benchmarks/bench_training_data.py                       # everything, 1M rows
    python benchmarks/bench_training_data.py --rows 100000 --section shuffled
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import GEN_BLOCK, LEAVES, ROW_BYTES, _block, _path, write_h5

BATCH = 256
SLAB_ROWS = 65536
SECTIONS = ("shuffled", "overlap", "fromdict", "sequential", "randomness", "memory")


# ----------------------------------------------------------------------------- stores
def write_layout(path: Path, rows: int, layout: str, seed: int = 0) -> None:
    """The store in one of the issue's layouts: ``h5-gzip``, ``zarr-default``, ``zarr-sharded``."""
    rng = np.random.default_rng(seed)
    if layout == "h5-gzip":
        import h5py

        with h5py.File(path, "w") as f:
            dsets = {
                key: f.create_dataset(
                    _path(key),
                    shape=(rows, *shape),
                    dtype=dt,
                    chunks=(min(1024, rows), *shape),
                    compression="gzip",
                    compression_opts=4,
                )
                for key, dt, shape in LEAVES
            }
            for start in range(0, rows, GEN_BLOCK):
                n = min(GEN_BLOCK, rows - start)
                for key, _, _ in LEAVES:
                    dsets[key][start : start + n] = _block(rng, key, n, start)
        return
    import zarr

    meta = {"__tensordict__": {"batch_size": [rows], "version": 1}}
    root = zarr.open_group(str(path), mode="w", attributes=meta)
    root.create_group("next", attributes=meta)
    arrays = {}
    for key, dt, shape in LEAVES:
        if layout == "zarr-default":
            kw: dict[str, Any] = {"chunks": (min(1024, rows), *shape)}
        else:
            kw = {"chunks": (min(128, rows), *shape), "shards": (min(SLAB_ROWS, rows), *shape)}
        arrays[key] = root.create_array(_path(key), shape=(rows, *shape), dtype=dt, **kw)
    for start in range(0, rows, SLAB_ROWS):
        n = min(SLAB_ROWS, rows - start)
        for key, _, _ in LEAVES:
            arrays[key][start : start + n] = _block(rng, key, n, start)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.consolidate_metadata(str(path))


def open_raw(path: Path) -> tuple[Any, dict[tuple[str, ...], Any]]:
    """(handle, leaf -> h5py dataset / zarr array)."""
    if str(path).endswith(".h5"):
        import h5py

        f = h5py.File(path, "r")
        return f, {key: f[_path(key)] for key, _, _ in LEAVES}
    import zarr

    g = zarr.open_group(str(path), mode="r")
    return None, {key: g[_path(key)] for key, _, _ in LEAVES}


def raw_random(path: Path, rows: int, batches: int, seed: int = 1) -> float:
    """Rows/s of raw random minibatches (unsorted indices sorted by hand, per leaf)."""
    f, arrs = open_raw(path)
    rng = np.random.default_rng(seed)
    zarr_like = f is None
    t0 = time.perf_counter()
    for _ in range(batches):
        idx = np.sort(rng.choice(rows, BATCH, replace=False))
        for a in arrs.values():
            _ = a.oindex[idx] if zarr_like else a[idx]
    dt = time.perf_counter() - t0
    if f is not None:
        f.close()
    return batches * BATCH / dt


def raw_sequential(path: Path, rows: int) -> float:
    """Rows/s of a raw read of the whole store, SLAB_ROWS rows per leaf at a time."""
    f, arrs = open_raw(path)
    t0 = time.perf_counter()
    for start in range(0, rows, SLAB_ROWS):
        for a in arrs.values():
            _ = a[start : start + SLAB_ROWS]
    dt = time.perf_counter() - t0
    if f is not None:
        f.close()
    return rows / dt


def ptd_epochs(
    path: Path,
    workers: int,
    window: int,
    epochs: int = 2,
    prefetch: int | None = None,
    handover: int | None = None,
) -> list[tuple[float, int]]:
    """Rows/s and rows seen of ``epochs`` shuffled epochs through one DataLoader (persistent
    workers: the first epoch pays for starting them, the next ones do not); ``prefetch``: the
    DataLoader's ``prefetch_factor``, ``handover``: batches per hand-over (None:
    ptd.data.loader's defaults)."""
    import ptd.data

    extra = {"prefetch_factor": prefetch} if prefetch and workers else {}
    dl = ptd.data.loader(
        str(path),
        BATCH,
        window=window,
        seed=0,
        num_workers=workers,
        handover=handover,
        persistent_workers=bool(workers),
        multiprocessing_context="fork" if workers else None,
        **extra,
    )
    out = []
    for epoch in range(epochs):
        dl.batch_sampler.set_epoch(epoch)  # type: ignore[union-attr]
        t0 = time.perf_counter()
        seen = 0
        for batch in dl:
            seen += int(batch.batch_size[0])
        out.append((seen / (time.perf_counter() - t0), seen))
    return out


def measure_shuffled(
    path: Path,
    rows: int,
    repeats: int,
    random_batches: int,
    window: int,
    prefetch: int | None = None,
    handover: int | None = None,
) -> dict[str, float]:
    """Shuffled epochs on one store, raw reads interleaved with them: each round reads the
    store raw in sequence, runs two epochs with 0 workers, reads it raw again, runs two epochs
    with 2 workers, and reads it raw a third time; each ptd epoch is compared with the mean of
    the raw sequential reads just before and after it (the machine's load moves between them).
    Returns medians over the rounds: rows/s (``raw_random``, ``raw_seq``, ``w0``, ``w0 next``,
    ``w2``, ``w2 next``) and ratios (``... / seq``, ``... / random``; ``w2 / w0`` and
    ``w2 next / w0 next``: 2 workers over 0 workers in the same round)."""
    res: dict[str, list[float]] = {}

    def add(k: str, v: float) -> None:
        res.setdefault(k, []).append(v)

    for r in range(repeats):
        rnd = raw_random(path, rows, random_batches, seed=r)
        add("raw_random", rnd)
        seq = [raw_sequential(path, rows)]
        epochs = {}
        for w in (0, 2):
            epochs[w] = ptd_epochs(path, w, window, prefetch=prefetch, handover=handover)
            seq.append(raw_sequential(path, rows))
        for k in seq:
            add("raw_seq", k)
        for i, w in enumerate((0, 2)):
            (first, seen), (nxt, seen2) = epochs[w]
            assert seen == seen2 == rows, (seen, seen2, rows)
            around = (seq[i] + seq[i + 1]) / 2
            for tag, v in ((f"w{w}", first), (f"w{w} next", nxt)):
                add(tag, v)
                add(f"{tag} / seq", v / around)
                add(f"{tag} / random", v / rnd)
        for sfx in ("", " next"):  # 2 workers over 0, epoch for epoch
            add(f"w2{sfx} / w0{sfx}", epochs[2][bool(sfx)][0] / epochs[0][bool(sfx)][0])
    return {k: statistics.median(v) for k, v in res.items()}


def overlap_epoch(path: Path, read_ahead: bool, step_ms: float) -> float:
    """Seconds of one shuffled epoch (0 workers, a new loader: cold) when each batch is
    followed by a training step of ``step_ms`` that leaves the CPU free (``time.sleep``: what
    a step on an accelerator looks like to the loading process)."""
    import ptd.data

    dl = ptd.data.loader(str(path), BATCH, window=8, seed=0, read_ahead=read_ahead)
    t0 = time.perf_counter()
    for _ in dl:
        time.sleep(step_ms / 1e3)
    dt = time.perf_counter() - t0
    dl.dataset.close()  # type: ignore[attr-defined]
    return dt


def measure_overlap(path: Path, rows: int, repeats: int, step_ms: float) -> dict[str, float]:
    """Medians over ``repeats`` rounds (the order alternating) of the epoch seconds with and
    without the read ahead, and of the steps' own time (the floor: the same sleeps, no
    loading)."""
    res: dict[str, list[float]] = {"ahead": [], "no ahead": [], "steps": []}
    for r in range(repeats):
        for ahead in (True, False) if r % 2 == 0 else (False, True):
            res["ahead" if ahead else "no ahead"].append(overlap_epoch(path, ahead, step_ms))
        t0 = time.perf_counter()
        for _ in range(-(-rows // BATCH)):  # the steps alone (a sleep overshoots a little)
            time.sleep(step_ms / 1e3)
        res["steps"].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in res.items()}


def section_overlap(tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    path = tmp / "h5-gzip.h5"
    if not path.exists():
        write_layout(path, args.rows, "h5-gzip")
    med = measure_overlap(path, args.rows, args.repeats, args.step_ms)
    print(f"\n[overlap] h5-gzip, {args.rows:,} rows, 0 workers, a {args.step_ms} ms step after "
          f"each batch (sleep); first epoch (cold); median of {args.repeats}, {_load()}")  # fmt: skip
    print(f"  the steps alone          {med['steps']:7.2f} s")
    for k in ("ahead", "no ahead"):
        over = med[k] - med["steps"]
        print(f"  read ahead {'on ' if k == 'ahead' else 'off'}          {med[k]:7.2f} s "
              f"(+{over:.2f} s over the steps)")  # fmt: skip
    return med


def section_shuffled(tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for layout in ("h5-gzip", "zarr-default", "zarr-sharded"):
        path = tmp / (f"{layout}.h5" if layout.startswith("h5") else f"{layout}.zarr")
        t0 = time.perf_counter()
        write_layout(path, args.rows, layout)
        made = time.perf_counter() - t0
        med = measure_shuffled(path, args.rows, args.repeats, args.random_batches, args.window)
        out[layout] = med
        print(f"\n[shuffled] {layout}: {args.rows:,} rows (written in {made:.1f} s), "
              f"batch {BATCH}, window {args.window}; median of {args.repeats}, {_load()}")  # fmt: skip
        print(f"  raw random-index reads  {med['raw_random']:>12,.0f} rows/s")
        print(f"  raw sequential read     {med['raw_seq']:>12,.0f} rows/s")
        for w in (0, 2):
            for tag, label in ((f"w{w}", "first epoch"), (f"w{w} next", "next epoch ")):
                print(
                    f"  ptd.data {label}, {w} workers {med[tag]:>10,.0f} rows/s "
                    f"{med[tag + ' / random']:7.1f}x raw random (bar 100x) "
                    f"{med[tag + ' / seq']:5.2f}x raw sequential (bar 0.7x)"
                )
        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink()
    return out


# ----------------------------------------------------------------------------- from_dict
def _rss_mb(field: str = "VmRSS") -> float:
    """``field`` of /proc/self/status in MB: VmRSS (now) or VmHWM (this process's peak; not
    getrusage's ru_maxrss, which survives exec and so reports a larger parent's RSS)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def raw_copy(src: str, dst: str) -> None:
    """A plain chunk-wise h5py -> zarr copy: 8 MB chunks, 16 MB slabs."""
    import h5py
    import zarr

    out = zarr.open_group(dst, mode="w-")
    with h5py.File(src, "r") as f:
        for key, _, _ in LEAVES:
            ds = f[_path(key)]
            n = ds.shape[0]
            row = ds.dtype.itemsize * int(np.prod(ds.shape[1:]))
            crow = min(n, max(1, (8 << 20) // row))
            arr = out.create_array(
                _path(key), shape=ds.shape, dtype=ds.dtype, chunks=(crow, *ds.shape[1:]),
                compressors=None,
            )  # fmt: skip
            step = max(crow, (16 << 20) // row // crow * crow)
            for a in range(0, n, step):
                arr[a : a + step] = ds[a : a + step]


def child_fromdict(op: str, src: str, dst: str) -> None:
    if op == "ptd":
        import ptd
        import ptd.storage.h5.backend
        import ptd.storage.zarr.backend  # noqa: F401
        from ptd import PersistentTensorDict
    import h5py  # noqa: F401
    import zarr  # noqa: F401

    base = _rss_mb()
    t0 = time.perf_counter()
    if op == "ptd":
        p = PersistentTensorDict.from_h5(src)
        q = PersistentTensorDict.from_dict(p, dst, backend="zarr")
        q.close()
        p.close()
    else:
        raw_copy(src, dst)
    seconds = time.perf_counter() - t0
    peak = _rss_mb("VmHWM")
    print(json.dumps({"seconds": seconds, "growth_mb": peak - base}))


def _run_child(*argv: str) -> dict[str, float]:
    if hasattr(os, "sync"):
        os.sync()
    out = subprocess.run(
        [sys.executable, __file__, "--child", *argv], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def measure_fromdict(src: Path, tmp: Path, repeats: int) -> dict[str, dict[str, float]]:
    """Medians of ``repeats`` rounds (raw then ptd, each in a fresh process) of seconds and
    peak RSS growth of the copy of ``src`` to zarr."""
    res: dict[str, list[dict[str, float]]] = {"raw": [], "ptd": []}
    for r in range(repeats):
        for op in ("raw", "ptd"):
            dst = tmp / f"fd-{op}-{r}.zarr"
            res[op].append(_run_child("fromdict", op, str(src), str(dst)))
            shutil.rmtree(dst, ignore_errors=True)
    return {
        op: {k: statistics.median(x[k] for x in v) for k in ("seconds", "growth_mb")}
        for op, v in res.items()
    }


def section_fromdict(tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    src = tmp / "plain.h5"
    if not src.exists():
        write_h5(src, args.rows, 0)
    med = measure_fromdict(src, tmp, args.repeats)
    mb = args.rows * ROW_BYTES / 1e6
    print(f"\n[fromdict] {mb:,.0f} MB uncompressed contiguous h5 -> zarr, fresh process each, "
          f"median of {args.repeats}, {_load()}")  # fmt: skip
    for op in ("raw", "ptd"):
        m = med[op]
        print(f"  {op:>4}: {m['seconds']:7.2f} s  {mb / m['seconds']:7.0f} MB/s  "
              f"peak RSS growth {m['growth_mb']:6.0f} MB")  # fmt: skip
    ratio = med["ptd"]["seconds"] / med["raw"]["seconds"]
    print(f"  ptd/raw time {ratio:.2f}x (bar <= 1.25x); growth {med['ptd']['growth_mb']:.0f} MB "
          "(bar < 100 MB)")  # fmt: skip
    return med


# ----------------------------------------------------------------------------- sequential
def child_sequential(op: str, src: str, rows: str) -> None:
    n = int(rows)
    if op == "ptd":
        from ptd import PersistentTensorDict

        p = PersistentTensorDict.from_h5(src)

        def one_pass() -> None:
            for start in range(0, n, 4096):
                p[start : start + 4096].to_tensordict()
    else:
        import h5py

        f = h5py.File(src, "r")
        dsets = [f[_path(key)] for key, _, _ in LEAVES]

        def one_pass() -> None:
            for start in range(0, n, 4096):
                [d[start : start + 4096] for d in dsets]  # a batch: every leaf, as bench_core

    times, cpu = [], []
    for _ in range(2):
        t0, c0 = time.perf_counter(), time.process_time()
        one_pass()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    print(json.dumps({"first": n / times[0], "second": n / times[1],
                      "first_cpu": cpu[0], "second_cpu": cpu[1]}))  # fmt: skip


def measure_sequential(src: Path, rows: int, repeats: int) -> dict[str, dict[str, float]]:
    """Medians over ``repeats`` rounds (raw then ptd, then ptd then raw: the order alternates,
    each a fresh process) of rows/s of the first and second pass, and of the per-round ratios
    (``ratio``: ptd over the raw run of the same round)."""
    res: dict[str, list[dict[str, float]]] = {"raw": [], "ptd": [], "ratio": []}
    for r in range(repeats):
        got = {}
        for op in ("raw", "ptd") if r % 2 == 0 else ("ptd", "raw"):
            got[op] = _run_child("sequential", op, str(src), str(rows))
            res[op].append(got[op])
        res["ratio"].append(
            {k: got["ptd"][k] / got["raw"][k] for k in ("first", "second")}
            # CPU: raw's CPU seconds over ptd's (> 1: ptd used less), load-independent
            | {f"{k}_cpu": got["raw"][f"{k}_cpu"] / got["ptd"][f"{k}_cpu"] for k in ("first", "second")}
        )  # fmt: skip
    keys = ("first", "second", "first_cpu", "second_cpu")
    return {op: {k: statistics.median(x[k] for x in v) for k in keys} for op, v in res.items()}


def section_sequential(tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    src = tmp / "plain.h5"
    if not src.exists():
        write_h5(src, args.rows, 0)
    reps = max(args.repeats, 11)  # a pass is ~0.1 s: the rounds spread by +-30%
    med = measure_sequential(src, args.rows, reps)
    print(f"\n[sequential] 4096-row slices over the uncompressed contiguous h5 store, all leaves; "
          f"each run a fresh process; median of {reps}, {_load()}")  # fmt: skip
    for k in ("first", "second"):
        r, p = med["raw"][k], med["ptd"][k]
        print(f"  {k:>6} pass: raw h5py {r:>12,.0f} rows/s   ptd {p:>12,.0f} rows/s   "
              f"{med['ratio'][k]:5.2f}x (median of the rounds' ratios; bar 1.0x); CPU s raw "
              f"{med['raw'][k + '_cpu']:.3f} ptd {med['ptd'][k + '_cpu']:.3f} "
              f"({med['ratio'][k + '_cpu']:.2f}x less)")  # fmt: skip
    return med


# ----------------------------------------------------------------------------- randomness
def section_randomness(args: argparse.Namespace) -> dict[str, Any]:
    """The sampler's order against a full shuffle, on the geometry of the h5-gzip layout."""
    from ptd.data import ChunkShuffleSampler

    n = args.rows
    chunk = 1024
    group = 7 * chunk  # what ptd.data picks for 1024-row chunks of 525 B rows (4 MB groups)
    out: dict[str, Any] = {}

    def stats(order: np.ndarray, order2: np.ndarray) -> dict[str, float]:
        batches = order[: len(order) // BATCH * BATCH].reshape(-1, BATCH)
        chunks_per_batch = np.mean([len(np.unique(b // chunk)) for b in batches])
        pos = np.empty(n, dtype=np.int64)
        pos[order] = np.arange(n)
        move = np.abs(pos - np.arange(n)) / n  # how far a row moved, as a fraction of the epoch
        # neighbours in the store that stay within one batch of each other
        near = np.mean(np.abs(pos[1:] - pos[:-1]) < BATCH)
        pos2 = np.empty(n, dtype=np.int64)
        pos2[order2] = np.arange(n)
        same_batch = np.mean(
            (pos[:-1] // BATCH == pos[1:] // BATCH) & (pos2[:-1] // BATCH == pos2[1:] // BATCH)
        )
        corr = float(np.corrcoef(pos, pos2)[0, 1])
        return {
            "chunks per batch": float(chunks_per_batch),
            "median move": float(np.median(move)),
            "store neighbours within a batch apart": float(near),
            "neighbours sharing a batch in 2 epochs": float(same_batch),
            "position corr. epoch 0 vs 1": corr,
        }

    rng = np.random.default_rng(0)
    out["full shuffle"] = stats(rng.permutation(n), rng.permutation(n))
    for window in (1, 4, 8, 32):
        s = ChunkShuffleSampler(n, BATCH, group_rows=group, window=window, seed=0)
        e0 = np.concatenate([np.asarray(b) for b in s])
        s.set_epoch(1)
        e1 = np.concatenate([np.asarray(b) for b in s])
        out[f"window {window} ({window * group:,} rows)"] = stats(e0, e1)
    keys = list(next(iter(out.values())))
    print(f"\n[randomness] {n:,} rows, 1024-row chunks, {group}-row groups, batch {BATCH}")
    print("  " + " | ".join(["order".ljust(26)] + [k for k in keys]))
    for name, st in out.items():
        print("  " + " | ".join([name.ljust(26)] + [f"{st[k]:.4g}".rjust(len(k)) for k in keys]))
    return out


# ----------------------------------------------------------------------------- memory
MEMORY_CHUNKS = {"obs": 8192, "action": 65536, "reward": 65536, "done": 65536}


def write_memory_store(path: Path, rows: int, seed: int = 0) -> None:
    """The memory section's store, written with plain zarr: obs float32[64] in 8,192-row
    chunks, the 1-D leaves (action int64, reward float32, done bool) in 65,536-row chunks,
    zarr's default codecs (zstd)."""
    import zarr

    rng = np.random.default_rng(seed)
    meta = {"__tensordict__": {"batch_size": [rows], "version": 1}}
    root = zarr.open_group(str(path), mode="w", attributes=meta)
    specs = {
        "obs": (np.float32, (64,)),
        "action": (np.int64, ()),
        "reward": (np.float32, ()),
        "done": (np.bool_, ()),
    }
    arrays = {
        key: root.create_array(
            key, shape=(rows, *shape), dtype=dt, chunks=(min(MEMORY_CHUNKS[key], rows), *shape)
        )
        for key, (dt, shape) in specs.items()
    }
    for start in range(0, rows, SLAB_ROWS):
        n = min(SLAB_ROWS, rows - start)
        arrays["obs"][start : start + n] = rng.standard_normal((n, 64), dtype=np.float32)
        arrays["action"][start : start + n] = rng.integers(0, 18, n)
        arrays["reward"][start : start + n] = rng.standard_normal(n, dtype=np.float32)
        arrays["done"][start : start + n] = rng.random(n) < 0.001
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.consolidate_metadata(str(path))


def _tree_rss() -> int:
    """Bytes of RSS of this process and its children (the DataLoader's workers), from /proc."""
    pids = [os.getpid()]
    try:
        with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as f:
            pids += [int(p) for p in f.read().split()]
    except OSError:  # pragma: no cover (no /proc: this process alone)
        pass
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:  # a worker that just ended
            pass
    return total


def child_memory(store: str, workers: str, budget: str, every: str) -> None:
    """Two shuffled epochs over ``store``; prints one JSON line per ``every`` batches (the
    peak tree RSS since the last line) and a last line with the totals."""
    import threading

    import torch  # noqa: F401

    import ptd.data
    import ptd.storage.zarr.backend

    base = _tree_rss()
    extra = {} if budget == "default" else {"memory_budget": budget}
    w = int(workers)
    dl = ptd.data.loader(
        store,
        BATCH,
        window=8,
        seed=0,
        num_workers=w,
        persistent_workers=bool(w),
        multiprocessing_context="fork" if w else None,
        **extra,
    )
    peak = [0]
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], _tree_rss())
            stop.wait(0.02)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    n = 0
    ds = dl.dataset
    for epoch in range(2):
        dl.batch_sampler.set_epoch(epoch)  # type: ignore[union-attr]
        for _batch in dl:
            n += 1
            if n % int(every) == 0:
                now = peak[0]
                peak[0] = _tree_rss()
                print(json.dumps({"batches": n, "epoch": epoch, "peak": now}), flush=True)
    stop.set()
    t.join()
    print(
        json.dumps(
            {
                "base": base,
                "budget": getattr(ds, "memory_budget", None),
                "held_max": getattr(ds, "held_bytes_max", None),
                "repr": repr(dl),
            }
        ),
        flush=True,
    )


def measure_memory(store: Path, workers: int, budget: str, every: int) -> dict[str, Any]:
    if hasattr(os, "sync"):
        os.sync()
    out = subprocess.run(
        [sys.executable, __file__, "--child", "memory", str(store), str(workers), budget,
         str(every)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    lines = [json.loads(line) for line in out.stdout.strip().splitlines() if line.startswith("{")]
    return {"samples": lines[:-1], **lines[-1]}


def section_memory(tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    rows = args.memory_rows
    store = tmp / "memory.zarr"
    t0 = time.perf_counter()
    write_memory_store(store, rows)
    print(
        f"\n== memory: {rows:,} rows, obs float32[64] in 8,192-row chunks, 1-D leaves in "
        f"65,536-row chunks, zstd zarr (written in {time.perf_counter() - t0:.0f} s); "
        f"{_load()}"
    )
    out: dict[str, Any] = {}
    mb = 1e6
    for w in (0, 2):
        res = measure_memory(store, w, args.budget, 1000)
        out[f"w{w}"] = res
        budget = res["budget"]
        print(
            f"  {w} workers: interpreter alone {res['base'] / mb:,.0f} MB; budget "
            + (f"{budget / mb:,.0f} MB per process" if budget else "none (before the budget)")
            + (f"; held at most {res['held_max'] / mb:,.1f} MB" if res.get("held_max") else "")
        )
        for s in res["samples"]:
            print(
                f"    batches {s['batches']:>6,} (epoch {s['epoch']}): peak RSS over the tree "
                f"{s['peak'] / mb:8,.0f} MB ({(s['peak'] - res['base']) / mb:+8,.0f} MB over "
                "the interpreter)"
            )
    shutil.rmtree(store, ignore_errors=True)
    return out


# ----------------------------------------------------------------------------- main
def _load() -> str:
    try:
        one, five, _ = os.getloadavg()
        return f"load average {one:.1f}/{five:.1f} on {os.cpu_count()} cores"
    except OSError:  # pragma: no cover
        return "load unknown"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--window", type=int, default=8)
    ap.add_argument("--random-batches", type=int, default=50)
    ap.add_argument("--step-ms", type=float, default=1.0, help="overlap: the training step")
    ap.add_argument("--memory-rows", type=int, default=2_000_000, help="memory: the store's rows")
    ap.add_argument("--budget", default="default", help="memory: memory_budget (default: ptd's)")
    ap.add_argument("--section", choices=SECTIONS, action="append")
    ap.add_argument("--json", help="write the figures to this file")
    ap.add_argument("--tmp", help="directory for the generated stores (default: a temp dir)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        kind, *rest = sys.argv[2:]
        children: dict[str, Callable[..., None]] = {
            "fromdict": child_fromdict,
            "sequential": child_sequential,
            "memory": child_memory,
        }
        children[kind](*rest)
        return 0
    args = parse_args(argv)
    sections = args.section or list(SECTIONS)
    if args.tmp:  # (a directory to put the generated stores in: made if missing)
        os.makedirs(args.tmp, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="ptd-bench-train-", dir=args.tmp))
    results: dict[str, Any] = {"rows": args.rows}
    runs: dict[str, Callable[[], Any]] = {
        "shuffled": lambda: section_shuffled(tmp, args),
        "overlap": lambda: section_overlap(tmp, args),
        "fromdict": lambda: section_fromdict(tmp, args),
        "sequential": lambda: section_sequential(tmp, args),
        "randomness": lambda: section_randomness(args),
        "memory": lambda: section_memory(tmp, args),
    }
    try:
        for name in sections:
            results[name] = runs[name]()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
