#!/usr/bin/env python
"""Training-speed benchmark (issue 14): ptd against raw h5py / zarr on the stores people train
from -- compressed and chunked.

Generates, in a temporary directory deleted at the end, a replay-buffer-like store of ``--rows``
rows (default 1,000,000; about 525 MB uncompressed):

    obs       float32 [N, 64]
    next/obs  float32 [N, 64]
    action    int64   [N]
    reward    float32 [N]
    done      bool    [N]

of one of two data kinds (``--data``, comma separated: ``normal,walk`` runs every chosen
section once per kind, the kinds' stores one after the other; rows, tables and JSON rows name
the kind; default ``normal``, the data of the figures before the walk was added):

    normal   obs, next/obs and reward standard-normal float32 (barely compressible: about
             1.1x), action uniform in [0, 18), done true with probability 0.01
    walk     compressible: obs a random walk along the rows, each column its own,
             ``x[0] ~ N(0, 1)``, ``x[t+1] = x[t] + 0.002 * N(0, 1)`` (float64, carried on from
             one generator block to the next), stored as ``float32(round(x[t], 3))``;
             ``next/obs[t] = obs[t+1]`` (the same walk one row on, as in a replay buffer);
             reward the same kind of walk (one column); action and done as ``normal``. The
             whole store compresses about 1.65x with gzip 4 + shuffle in 1024-row chunks
             (1.65x at 20,000 rows, 1.66x at 50,000, 1.67x at 200,000); zarr's bytes + zstd
             gives about 2.4x in 1024-row chunks and 1.8x in 128-row inner chunks

in the layouts a section asks for (each is written once per data kind, on first use; the
"[wrote ...]" line gives its size on disk and how much it compresses: uncompressed bytes over
bytes on disk):

    h5_gzip        HDF5, gzip level 4, ``--chunk-rows`` (1024) rows per chunk; for ``walk``
                   gzip 4 with the shuffle filter (the layout the walk data is defined by)
    zarr_default   Zarr v3, zarr's default codecs (bytes + zstd), 1024-row chunks
    zarr_sharded   Zarr v3, default codecs inside shards of ``--shard-rows`` (16384) rows made
                   of small inner chunks of ``--inner-rows`` (128) rows
    h5_plain       HDF5, contiguous and uncompressed (the fast path's layout)

Sections (``--sections``, comma separated; default all). One function per section, listed in
:data:`SECTIONS`; each returns :class:`Row` s and prints its own table:

    random   random minibatches (``--batch`` 256 unsorted rows x ``--batches`` 200), cold cache,
             on each compressed layout. raw: per leaf ``ds[sorted rows]`` (h5py) /
             ``arr.oindex[sorted rows]`` (zarr), put back in the asked order; with the
             ``zarrs`` codec pipeline too when it is installed. ptd: ``p[idx].to_tensordict()``
             on a store opened just before (the chunk cache starts empty: *cold*), with 1 and 2
             decode threads (the scaling with cores), with the default cache and without one
             (``chunk_cache=0``: decode alone). Every variant is opened before the pass and
             they take turns batch by batch, so that a shared machine's load falls on all
             alike. The bar: ptd >= 1.6x raw on 2 cores.
    shuffled shuffled epochs through ``torch.utils.data.DataLoader`` with ``ptd.data``'s
             chunk-aware sampler (batch 256, window ``--window``), ``num_workers`` 0 and 2, on
             the three compressed layouts: the first epoch (*cold*: a new DataLoader, store
             opened, workers started) and the next (*warm*: persistent workers), each against
             the mean of raw sequential reads of the whole store taken just before and after it
             (bar >= 0.7x) and raw random-index reads (bar >= 100x); ``--repeats`` rounds.
    overlap  a shuffled epoch on h5_gzip (0 workers, cold) with a simulated training step
             after each batch (``--step-ms``, a sleep: the CPU is free, as while an accelerator
             trains), the dataset's read ahead on and off, against the steps' own time.
    fromdict ``from_dict(h5_plain store, "x.zarr", backend="zarr")`` against a raw chunk-wise
             h5py -> zarr copy, each in a fresh process: time (bar <= 1.25x) and peak RSS
             growth (bar < 100 MB).
    handover ready batches (nothing read: a clone of one batch of the leaves) through a
             DataLoader with ptd.data's collate, 0 and 2 workers, the next epoch (warm): the
             DataLoader's own cost per batch, the ceiling of any 2-worker figure here.
    sequential first (*cold*: a fresh process, the store just opened) and second (*warm*) pass
             of 4096-row slices over ``h5_plain``, raw h5py and ptd in fresh processes, the
             order alternating per round: ptd / raw per round, median of at least 11 rounds
             (bar >= 1.0x), with
             the process CPU time of each pass (load-independent).

The last four sections run the measurement functions of ``bench_training_data.py`` (which
can also run them alone, with its own normal-data stores) on this script's stores.

At the end, a bar summary of the random and shuffled sections (of those that ran), h5_gzip,
zarr_default and zarr_sharded side by side, one block per data kind, PASS or MISS per cell,
under each layout's compression ratio:

    random    ptd with 2 decode threads and the default chunk cache over raw h5py / zarr,
              cold (bar >= 2.5x)
    shuffled  the next epoch (warm: persistent workers, the store open) through ptd.data:
              2 workers over 0 workers (the median of the rounds' ratios; bar >= 1.0x), and
              2 workers and 0 workers each over the raw sequential read of every leaf (the
              section's ratio; bar >= 1.0x)

(the stores were just written and sit in the OS page cache in every figure). These are the
summary's bars; the sections' own tables keep theirs (1.6x, 0.7x). ``--json`` writes every
row: one ``store`` row per store written (MB on disk, its compression ratio), the sections'
rows and the ``summary`` cells, each with its ``data`` kind.

Random-section figures are rows/s over the whole run (one pass: the cache is cold at its start, so no repeat
of it is warm); the files were just written and sit in the OS page cache, so the figures
measure decoding and library overhead, not the disk. The machine's load average is printed
with each section: on a shared machine, read the ratios rather than the absolute figures.

Usage::

    python benchmarks/bench_training.py                          # everything, 1,000,000 rows
    python benchmarks/bench_training.py --rows 100000 --sections random
    python benchmarks/bench_training.py --rows 200000 --sections shuffled,sequential --repeats 1
    python benchmarks/bench_training.py --rows 100000 --data normal,walk --sections random,shuffled
    python benchmarks/bench_training.py --json out.json
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import zarr

# ----------------------------------------------------------------------------------------------
# the data set

#: (key, dtype, trailing shape); a tuple key is nested
LEAVES: list[tuple[tuple[str, ...], np.dtype, tuple[int, ...]]] = [
    (("obs",), np.dtype("float32"), (64,)),
    (("next", "obs"), np.dtype("float32"), (64,)),
    (("action",), np.dtype("int64"), ()),
    (("reward",), np.dtype("float32"), ()),
    (("done",), np.dtype("bool"), ()),
]
ROW_BYTES = sum(dt.itemsize * int(np.prod(shape, dtype=np.int64)) for _, dt, shape in LEAVES)
#: tensordict's batch-size attribute (ptd reads it instead of inferring)
TD_META_ATTR = "__tensordict__"
#: rows generated per write, to keep the generator's memory small
GEN_BLOCK = 1 << 17
#: ``--data``: standard-normal floats (barely compressible) or rounded random walks
DATA_KINDS = ("normal", "walk")
#: the walk's step: WALK_STEP x a standard-normal draw per row and column
WALK_STEP = 0.002
#: decimals the walks are rounded to (then stored as float32)
WALK_DECIMALS = 3
PAGE_CACHE_NOTE = (
    "the stores were just written and sit in the OS page cache: figures measure decoding and "
    "library overhead, not the disk"
)


def leaf_name(key: tuple[str, ...]) -> str:
    return "/".join(key)


def _block(rng: np.random.Generator, key: tuple[str, ...], n: int) -> np.ndarray:
    name = leaf_name(key)
    if name in ("obs", "next/obs"):
        return rng.standard_normal((n, 64), dtype=np.float32)
    if name == "action":
        return rng.integers(0, 18, size=n, dtype=np.int64)
    if name == "reward":
        return rng.standard_normal(n, dtype=np.float32)
    if name == "done":
        return rng.random(n) < 0.01
    raise AssertionError(name)


def _walk(rng: np.random.Generator, at: np.ndarray, n: int) -> np.ndarray:
    """The ``n`` points of a random walk after ``at`` (float64, unrounded): ``at + cumsum`` of
    ``WALK_STEP`` x standard-normal steps along the rows, each column its own walk."""
    return at + np.cumsum(rng.standard_normal((n, *at.shape)) * WALK_STEP, axis=0)


def _rounded(x: np.ndarray) -> np.ndarray:
    return np.round(x, WALK_DECIMALS).astype(np.float32)


def _blocks(
    rows: int, seed: int, align: int, data: str = "normal"
) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
    """``(start, {leaf name: block})`` covering ``rows`` rows, each block whole chunks of
    ``align`` rows (the last one excepted); ``data``: one of :data:`DATA_KINDS`."""
    rng = np.random.default_rng(seed)
    step = max(align, GEN_BLOCK // align * align)
    if data == "normal":
        for start in range(0, rows, step):
            n = min(step, rows - start)
            yield start, {leaf_name(k): _block(rng, k, n) for k, _, _ in LEAVES}
        return
    if data != "walk":
        raise AssertionError(data)
    # the walks carry on from block to block (the last point of one is where the next starts)
    obs_at = rng.standard_normal(64)
    reward_at = np.asarray(rng.standard_normal())
    for start in range(0, rows, step):
        n = min(step, rows - start)
        nxt = _walk(rng, obs_at, n)  # points start+1 .. start+n
        action = rng.integers(0, 18, size=n, dtype=np.int64)
        reward = _walk(rng, reward_at, n)
        done = rng.random(n) < 0.01
        obs = np.concatenate([obs_at[None], nxt[:-1]])  # points start .. start+n-1
        yield (
            start,
            {
                "obs": _rounded(obs),
                "next/obs": _rounded(nxt),  # next/obs[t] == obs[t + 1]
                "action": action,
                "reward": _rounded(np.concatenate([reward_at[None], reward[:-1]])),
                "done": done,
            },
        )
        obs_at, reward_at = nxt[-1], np.asarray(reward[-1])


def _td_meta(rows: int) -> dict[str, Any]:
    return {TD_META_ATTR: {"batch_size": [rows], "version": 1}}


def write_h5(
    path: Path, rows: int, seed: int, chunk_rows: int | None, data: str = "normal", **filters: Any
) -> None:
    """An HDF5 store of ``data`` (see :data:`DATA_KINDS`); ``chunk_rows`` None: contiguous
    (then ``filters`` must be empty)."""
    with h5py.File(path, "w") as f:
        dsets = {}
        for key, dt, shape in LEAVES:
            opts: dict[str, Any] = dict(filters)
            if chunk_rows is not None:
                opts["chunks"] = (min(chunk_rows, rows), *shape)
            dsets[leaf_name(key)] = f.create_dataset(
                leaf_name(key), shape=(rows, *shape), dtype=dt, **opts
            )
        for start, block in _blocks(rows, seed, chunk_rows or 1, data):
            for name, arr in block.items():
                dsets[name][start : start + len(arr)] = arr


def write_zarr(
    path: Path,
    rows: int,
    seed: int,
    chunk_rows: int,
    shard_rows: int | None = None,
    data: str = "normal",
) -> None:
    """A Zarr v3 store of ``data`` (see :data:`DATA_KINDS`) with zarr's default codecs;
    sharded when ``shard_rows`` is given (``chunk_rows`` is then the inner chunk)."""
    root = zarr.open_group(str(path), mode="w", attributes=_td_meta(rows))
    root.create_group("next", attributes=_td_meta(rows))
    arrays = {}
    for key, dt, shape in LEAVES:
        kw: dict[str, Any] = {"chunks": (min(chunk_rows, rows), *shape)}
        if shard_rows is not None:
            outer = min(shard_rows, rows)
            outer = max(chunk_rows, outer // chunk_rows * chunk_rows)
            kw["shards"] = (outer, *shape)
        arrays[leaf_name(key)] = root.create_array(
            leaf_name(key), shape=(rows, *shape), dtype=dt, **kw
        )
    for start, block in _blocks(rows, seed, shard_rows or chunk_rows, data):
        for name, arr in block.items():
            arrays[name][start : start + len(arr)] = arr
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.consolidate_metadata(str(path))


def _write_h5_gzip(path: Path, a: argparse.Namespace, data: str) -> None:
    # normal: gzip 4 alone, as the figures before the walk data; walk: gzip 4 + shuffle (the
    # layout the walk variant is defined by)
    shuffle = {"shuffle": True} if data == "walk" else {}
    write_h5(
        path, a.rows, a.seed, a.chunk_rows, data, compression="gzip", compression_opts=4, **shuffle
    )


#: layout name -> (suffix, writer(path, args, data kind))
LAYOUTS: dict[str, tuple[str, Callable[[Path, argparse.Namespace, str], None]]] = {
    "h5_gzip": (".h5", _write_h5_gzip),
    "zarr_default": (
        ".zarr",
        lambda p, a, d: write_zarr(p, a.rows, a.seed, a.chunk_rows, data=d),
    ),
    "zarr_sharded": (
        ".zarr",
        lambda p, a, d: write_zarr(p, a.rows, a.seed, a.inner_rows, a.shard_rows, d),
    ),
    "h5_plain": (".h5", lambda p, a, d: write_h5(p, a.rows, a.seed, None, d)),
}


def layout_note(layout: str, data: str) -> str:
    """What a layout's codecs are for ``data``."""
    if layout == "h5_gzip":
        return "gzip 4 + shuffle" if data == "walk" else "gzip 4"
    if layout == "h5_plain":
        return "contiguous, uncompressed"
    return "bytes + zstd"


# ----------------------------------------------------------------------------------------------
# what every section shares


@dataclass
class Row:
    """One measured line: a section, a store layout, a variant, its figure and its ratio;
    ``data``: the data kind of the store (see :data:`DATA_KINDS`)."""

    section: str
    layout: str
    variant: str
    value: float
    unit: str
    ratio: float | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    data: str = "normal"


class Context:
    """What a section gets: the arguments, a temp dir, the data kind being run (``data``) and
    its stores (written on first use)."""

    def __init__(self, args: argparse.Namespace, tmp: Path) -> None:
        self.args = args
        self.tmp = tmp
        self.data = "normal"
        self._stores: dict[tuple[str, str], Path] = {}
        #: one "store" row per store written: MB on disk, compression ratio
        self.written: list[Row] = []

    def store(self, layout: str) -> Path:
        """The path of the generated store of the current data kind in ``layout`` (see
        :data:`LAYOUTS`)."""
        key = (self.data, layout)
        if key not in self._stores:
            suffix, writer = LAYOUTS[layout]
            path = self.tmp / f"{self.data}-{layout}{suffix}"
            t = time.perf_counter()
            writer(path, self.args, self.data)
            took = time.perf_counter() - t
            size = _disk_bytes(path)
            ratio = self.args.rows * ROW_BYTES / size
            note = layout_note(layout, self.data)
            print(
                f"  [wrote {layout} ({note}), {self.data} data: {self.args.rows:,} rows, "
                f"{size / 1e6:,.0f} MB on disk, compresses {ratio:.2f}x, {took:.1f} s]",
                flush=True,
            )
            self.written.append(
                Row("store", layout, note, size / 1e6, "MB", ratio,
                    "x: uncompressed bytes / bytes on disk", {"write_s": took}, self.data)
            )  # fmt: skip
            self._stores[key] = path
        return self._stores[key]

    def drop_stores(self) -> None:
        """Delete the current data kind's stores (before the next kind's are written)."""
        for (data, layout), path in list(self._stores.items()):
            if data == self.data:
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink()
                del self._stores[(data, layout)]

    def table(self, title: str, rows: list[Row]) -> None:
        """Label ``rows`` with the current data kind and print them."""
        for r in rows:
            r.data = self.data
        print_table(title, rows)


def _disk_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def import_ptd() -> Any:
    here = Path(__file__).resolve().parent.parent
    if str(here) not in sys.path:
        sys.path.insert(0, str(here))
    import ptd

    return ptd


def open_ptd(layout: str, path: Path, **kw: Any) -> Any:
    """``from_h5``/``from_zarr`` of a generated store, read-only."""
    ptd = import_ptd()
    opener = (
        ptd.PersistentTensorDict.from_h5
        if layout.startswith("h5")
        else ptd.PersistentTensorDict.from_zarr
    )
    return opener(str(path), **kw)


def load_note() -> str:
    try:
        one, five, _ = os.getloadavg()
    except OSError:  # pragma: no cover
        return "load average unknown"
    return f"load average {one:.2f} (1 min) / {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def print_table(title: str, rows: list[Row]) -> None:
    print(f"\n{title}")
    width = max([len(r.variant) for r in rows] + [10])
    lw = max([len(f"{r.layout} [{r.data}]") for r in rows] + [13])
    for r in rows:
        ratio = f"{r.ratio:6.2f}x" if r.ratio is not None else " " * 7
        where = f"{r.layout} [{r.data}]"
        print(
            f"  {where:<{lw}} {r.variant:<{width}}  "
            f"{r.value:>14,.{2 if r.unit == 's' else 0}f} {r.unit:<7} {ratio}"
            f"  {r.note}"
        )


# ----------------------------------------------------------------------------------------------
# section: random minibatches, cold cache


class _RawH5:
    def __init__(self, path: Path) -> None:
        self.f = h5py.File(path, "r")
        self.ds = [self.f[leaf_name(k)] for k, _, _ in LEAVES]

    def rows(self, idx: np.ndarray) -> list[np.ndarray]:
        order = np.argsort(idx, kind="stable")
        back = np.empty_like(order)
        back[order] = np.arange(len(order))
        return [ds[idx[order]][back] for ds in self.ds]

    def close(self) -> None:
        self.f.close()


class _RawZarr:
    def __init__(self, path: Path, pipeline: str | None = None) -> None:
        self.pipeline = pipeline
        with self._config():
            root = zarr.open_group(str(path), mode="r")
            self.arrs = [root[leaf_name(k)] for k, _, _ in LEAVES]

    def _config(self) -> Any:
        if self.pipeline is None:
            return contextlib.nullcontext()
        return zarr.config.set({"codec_pipeline.path": self.pipeline})

    def rows(self, idx: np.ndarray) -> list[np.ndarray]:
        order = np.argsort(idx, kind="stable")
        back = np.empty_like(order)
        back[order] = np.arange(len(order))
        with self._config():
            return [np.asarray(a.oindex[idx[order]])[back] for a in self.arrs]

    def close(self) -> None:
        pass


class _Ptd:
    """ptd on a store opened at the start of the pass (cold cache), ``threads`` decode
    threads while it reads."""

    def __init__(self, layout: str, path: Path, threads: int, cache: Any) -> None:
        self.p = open_ptd(layout, path, chunk_cache=cache)
        self.threads = threads

    def rows(self, idx: np.ndarray) -> Any:
        import torch

        from ptd.storage.runtime import set_decode_threads

        set_decode_threads(self.threads)
        try:
            return self.p[torch.as_tensor(idx)].to_tensordict()
        finally:
            set_decode_threads(None)

    def stats(self) -> str:
        reader = self.p._store.backend._chunked
        if reader is None or reader.cache is None:
            return ""
        c = reader.cache
        return f", cache hits {c.hits:,} of {c.hits + c.misses:,}"

    def close(self) -> None:
        self.p.close()


def _batches(args: argparse.Namespace) -> list[np.ndarray]:
    """``--batches`` batches of ``--batch`` distinct rows, unsorted (the same for every
    variant)."""
    rng = np.random.default_rng(args.seed + 1)
    return [rng.choice(args.rows, size=args.batch, replace=False) for _ in range(args.batches)]


def _same(got: Any, want: list[np.ndarray], what: str) -> None:
    """Raise SystemExit unless ``got`` (a TensorDict or a list of arrays) equals ``want``."""
    for i, ((key, _, _), w) in enumerate(zip(LEAVES, want, strict=True)):
        g = got[i] if isinstance(got, list) else got.get(key).numpy()
        if g.shape != w.shape or g.tobytes() != w.tobytes():
            raise SystemExit(f"MISMATCH: {what} differs from the raw read on {leaf_name(key)}")


def interleaved(
    variants: list[tuple[str, Any]], batches: list[np.ndarray]
) -> list[tuple[float, float]]:
    """Run every variant on every batch, in turns (the first variant of a turn rotating), so
    that the load of a shared machine falls on all alike: ``(wall s, process CPU s)`` of each,
    the first batch excepted (it is read first by each, checked against the first variant's,
    and not timed)."""
    want = variants[0][1].rows(batches[0])
    for name, v in variants[1:]:
        _same(v.rows(batches[0]), want, name)
    wall = [0.0] * len(variants)
    cpu = [0.0] * len(variants)
    for turn, idx in enumerate(batches[1:]):
        for j in range(len(variants)):
            k = (turn + j) % len(variants)
            t, c = time.perf_counter(), time.process_time()
            variants[k][1].rows(idx)
            wall[k] += time.perf_counter() - t
            cpu[k] += time.process_time() - c
    return list(zip(wall, cpu, strict=True))


def section_random(ctx: Context) -> list[Row]:
    """Random minibatches (``--batch`` unsorted rows x ``--batches``), cold cache: ptd vs raw
    h5py/zarr on each compressed layout, with 1 and 2 decode threads, cache on and off; every
    variant opened before the pass and run in turns, batch by batch."""
    args = ctx.args
    batches = _batches(args)
    rows_timed = args.batch * (len(batches) - 1)
    out: list[Row] = []
    print(
        f"\n== random minibatches, {ctx.data} data: {args.batch} unsorted rows x "
        f"{args.batches}, cold cache =="
    )
    print(f"  {load_note()}")
    for layout in ctx.args.layouts.split(","):
        path = ctx.store(layout)
        gc.collect()
        h5 = layout.startswith("h5")
        variants: list[tuple[str, Any]] = [
            ("raw h5py" if h5 else "raw zarr", _RawH5(path) if h5 else _RawZarr(path))
        ]
        if not h5 and _has_zarrs():
            variants.append(("raw zarr + zarrs", _RawZarr(path, "zarrs.ZarrsCodecPipeline")))
        for threads, cache in ((1, None), (2, None), (1, 0), (2, 0)):
            variants.append((ptd_variant(threads, cache), _Ptd(layout, path, threads, cache)))
        try:
            figures = interleaved(variants, batches)
            raw_rate = rows_timed / figures[0][0]
            rows = []
            for (name, v), (wall, cpu) in zip(variants, figures, strict=True):
                rate = rows_timed / wall
                note = f"cpu {cpu:.1f} s" + (v.stats() if isinstance(v, _Ptd) else "")
                ratio = None if not rows else rate / raw_rate
                rows.append(
                    Row("random", layout, name, rate, "rows/s", ratio, note, {"cpu_s": cpu})
                )
        finally:
            for _, v in variants:
                v.close()
        ctx.table(f"  {layout} (cold: every variant opened just before the pass)", rows)
        out.extend(rows)
    print(
        f"  ({PAGE_CACHE_NOTE}; ratios are rows/s over raw's; cpu: process CPU seconds of the "
        f"timed batches, all threads; after the run: {load_note()})"
    )
    return out


def ptd_variant(threads: int, cache: int | None) -> str:
    """The random section's name of a ptd variant (``cache`` None: the default cache)."""
    return f"ptd, {threads} thread{'s' if threads > 1 else ''}, " + (
        f"cache {_budget_note()} (default)" if cache is None else "no cache"
    )


def _has_zarrs() -> bool:
    """Whether the ``zarrs`` codec pipeline (Rust, parallel) is installed."""
    try:
        import zarrs  # noqa: F401
    except ImportError:
        return False
    return True


def _budget_note() -> str:
    from ptd.storage.read.cache import cache_budget

    return f"{cache_budget(None) / (1 << 20):.0f} MiB"


# ----------------------------------------------------------------------------------------------
# sections measured by bench_training_data.py's functions, on this script's stores


def _data_bench() -> Any:
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    import_ptd()
    import bench_training_data

    return bench_training_data


def _loader_note(args: argparse.Namespace) -> str:
    """The hand-over and prefetch settings the shuffled section's loaders run with."""
    import ptd.data

    handover = (
        f"{args.handover} batches per hand-over"
        if args.handover
        else "hand-overs: ptd.data.loader's choice (handover_for)"
    )
    prefetch = (
        f"prefetch_factor {args.prefetch_factor}"
        if args.prefetch_factor
        else f"prefetch: {ptd.data.PREFETCH_BATCHES} batches per worker"
    )
    return f"{handover}, {prefetch}"


def section_shuffled(ctx: Context) -> list[Row]:
    """Shuffled epochs through a DataLoader with ptd.data's chunk-aware sampler (batch 256,
    window ``--window``, 0 and 2 workers), raw sequential reads interleaved with them; see
    ``bench_training_data.measure_shuffled``."""
    bd = _data_bench()
    args = ctx.args
    out: list[Row] = []
    print(
        f"\n== shuffled epochs, {ctx.data} data: DataLoader + ChunkShuffleSampler, batch "
        f"{bd.BATCH}, window "
        f"{args.window}, 0 and 2 workers ({_loader_note(args)}); median of {args.repeats} "
        "rounds =="
    )
    print(f"  {load_note()}")
    print(
        "  first epoch: cold (a new DataLoader: store opened, workers started, nothing "
        "decoded); next epoch: warm (persistent workers, store open; decoded blocks are "
        "replaced as the epoch moves on). Ratios: ptd over the mean of the raw sequential "
        "reads just before and after it, and over raw random-index reads (256 sorted rows "
        f"x {args.random_batches}, cold)."
    )
    for layout in ctx.args.layouts.split(","):
        path = ctx.store(layout)
        med = bd.measure_shuffled(
            path,
            args.rows,
            args.repeats,
            args.random_batches,
            args.window,
            args.prefetch_factor,
            args.handover,
        )
        rows = [
            Row("shuffled", layout, "raw random-index reads", med["raw_random"], "rows/s"),
            Row("shuffled", layout, "raw sequential read", med["raw_seq"], "rows/s"),
        ]
        for w in (0, 2):
            for tag, label in ((f"w{w}", "first (cold)"), (f"w{w} next", "next (warm)")):
                rows.append(
                    Row(
                        "shuffled",
                        layout,
                        f"ptd.data {w} workers, {label}",
                        med[tag],
                        "rows/s",
                        med[tag + " / seq"],
                        f"x raw sequential (bar 0.7x); {med[tag + ' / random']:,.0f}x raw "
                        "random (bar 100x)",
                        # 2 workers over 0 (the median of the rounds' ratios)
                        {"over 0 workers": med[f"{tag} / w0{tag[2:]}"]} if w else {},
                    )
                )
        ctx.table(f"  {layout}", rows)
        out.extend(rows)
    return out


def section_overlap(ctx: Context) -> list[Row]:
    """A shuffled epoch (0 workers, cold) on h5 gzip with a simulated training step after each
    batch, the dataset's read ahead on and off; see ``bench_training_data.measure_overlap``."""
    bd = _data_bench()
    args = ctx.args
    med = bd.measure_overlap(ctx.store("h5_gzip"), args.rows, args.repeats, args.step_ms)
    print(
        f"\n== read ahead, {ctx.data} data: a shuffled epoch, 0 workers, a {args.step_ms} ms "
        "training step after "
        f"each batch (a sleep: the CPU is free, as while an accelerator trains); first epoch "
        f"(cold); median of {args.repeats} =="
    )
    print(f"  {load_note()}")
    rows = [Row("overlap", "h5_gzip", "the training steps alone", med["steps"], "s")]
    for k in ("ahead", "no ahead"):
        rows.append(
            Row(
                "overlap",
                "h5_gzip",
                f"epoch, read ahead {'on' if k == 'ahead' else 'off'}",
                med[k],
                "s",
                med[k] / med["steps"],
                f"x the steps alone (+{med[k] - med['steps']:.2f} s of loading not hidden)",
            )
        )
    ctx.table("  h5_gzip", rows)
    return rows


def section_fromdict(ctx: Context) -> list[Row]:
    """``from_dict(h5 store, "x.zarr", backend="zarr")`` against a raw chunk-wise copy, each
    in a fresh process; see ``bench_training_data.measure_fromdict``."""
    bd = _data_bench()
    src = ctx.store("h5_plain")
    med = bd.measure_fromdict(src, ctx.tmp, ctx.args.repeats)
    mb = ctx.args.rows * ROW_BYTES / 1e6
    print(
        f"\n== from_dict(store, zarr), {ctx.data} data: {mb:,.0f} MB uncompressed contiguous "
        "h5 -> zarr, a fresh "
        f"process each (cold process, files in the page cache); median of {ctx.args.repeats} =="
    )
    print(f"  {load_note()}")
    rows = []
    for op in ("raw", "ptd"):
        m = med[op]
        ratio = None if op == "raw" else m["seconds"] / med["raw"]["seconds"]
        rows.append(
            Row(
                "fromdict",
                "h5_plain",
                "raw chunk-wise h5py->zarr copy" if op == "raw" else "ptd from_dict",
                m["seconds"],
                "s",
                ratio,
                f"{'x raw time (bar <= 1.25x); ' if ratio else ''}peak RSS growth "
                f"{m['growth_mb']:.0f} MB{' (bar < 100 MB)' if ratio else ''}",
            )
        )
    ctx.table("  h5_plain -> zarr", rows)
    return rows


def section_sequential(ctx: Context) -> list[Row]:
    """First (cold: a fresh process, the store just opened) and second (warm: the same
    process) pass of 4096-row slices over the uncompressed contiguous h5 store; see
    ``bench_training_data.measure_sequential``."""
    bd = _data_bench()
    src = ctx.store("h5_plain")
    reps = max(ctx.args.repeats, 11)  # a pass is ~0.1 s: the rounds spread by +-30%
    med = bd.measure_sequential(src, ctx.args.rows, reps)
    print(
        f"\n== sequential passes, {ctx.data} data: 4096-row slices, all leaves, uncompressed "
        "contiguous h5; each "
        f"round two fresh processes (raw, ptd; order alternating); median of {reps} =="
    )
    print(f"  {load_note()}")
    rows = []
    for k, label in (("first", "first pass (cold process)"), ("second", "second pass (warm)")):
        rows.append(Row("sequential", "h5_plain", f"raw h5py, {label}", med["raw"][k], "rows/s"))
        rows.append(
            Row(
                "sequential",
                "h5_plain",
                f"ptd, {label}",
                med["ptd"][k],
                "rows/s",
                med["ratio"][k],
                "x raw (median of the rounds' ratios; bar 1.0x); process CPU s raw "
                f"{med['raw'][k + '_cpu']:.3f}, ptd {med['ptd'][k + '_cpu']:.3f}: "
                f"{med['ratio'][k + '_cpu']:.2f}x less CPU",
            )
        )
    ctx.table("  h5_plain", rows)
    return rows


class _ReadyBatches:
    """A dataset whose batches cost nothing to make (a clone of one ready batch of the
    benchmark's leaves; with ``handover > 1``, a hand-over of that many batches): what is left
    of a DataLoader epoch is its own per-batch hand-over."""

    def __init__(self, rows: int, handover: int = 1) -> None:
        ptd = import_ptd()
        import torch

        self.sizes = (rows,) * handover if handover > 1 else ()
        rows *= handover
        self.td = ptd.TensorDict(
            {
                "obs": torch.zeros(rows, 64),
                "next": {"obs": torch.zeros(rows, 64)},
                "action": torch.zeros(rows, dtype=torch.int64),
                "reward": torch.zeros(rows),
                "done": torch.zeros(rows, dtype=torch.bool),
            },
            [rows],
        )

    def __len__(self) -> int:
        return 1 << 40

    def __getitems__(self, idx: Any) -> Any:
        from ptd.data.transport import HandOver

        return HandOver(self.td.clone(), self.sizes) if self.sizes else self.td.clone()

    def __getitem__(self, i: int) -> Any:  # pragma: no cover - __getitems__ is used
        return self.td[0]


def section_handover(ctx: Context) -> list[Row]:
    """The DataLoader's own cost per batch, with nothing to read: ready batches of the
    benchmark's leaves (``--batch`` rows) through ``ptd.data.collate`` with 0 and 2 workers
    (persistent, 16 batches in flight per worker), the next epoch (warm), one batch per
    message and, through ``ptd.data.StoreLoader``, hand-overs of ``--handover`` batches (default
    16) per message. With 2 workers this is the most rows/s any dataset can reach through a
    DataLoader on this machine: the ceiling the shuffled section's 2-worker figures run
    against."""
    from ptd.data import StoreLoader, collate, prefetch_for

    rows, n = ctx.args.batch, 4000
    print(
        f"\n== hand-over: ready {rows}-row batches through a DataLoader (nothing read), "
        f"{n} batches, next epoch (warm) =="
    )
    print(f"  {load_note()}")
    out = []
    k = ctx.args.handover or 16
    for workers, handover in ((0, 1), (2, 1), (2, k)):
        per = rows * handover
        items = [list(range(i * per, (i + 1) * per)) for i in range(n // handover)]
        dl = StoreLoader(
            _ReadyBatches(rows, handover),  # type: ignore[arg-type]
            batch_sampler=items,
            num_workers=workers,
            collate_fn=collate,
            persistent_workers=workers > 0,
            prefetch_factor=prefetch_for(handover) if workers else None,
        )
        took = 0.0
        for _epoch in range(2):
            t = time.perf_counter()
            seen = sum(int(b.batch_size[0]) for b in dl)
            took = time.perf_counter() - t
            assert seen == len(items) * per, seen
        batches = len(items) * handover
        rate = batches * rows / took
        what = f"{handover} batches per message" if handover > 1 else "a batch per message"
        out.append(
            Row(
                "handover",
                "none",
                f"{workers} workers, {what}, next epoch (warm)",
                rate,
                "rows/s",
                None,
                f"{took / batches * 1e6:.0f} us per batch",
            )
        )
        del dl
    print_table("  ready batches", out)
    return out


#: section name -> function (run in this order)
SECTIONS: dict[str, Callable[[Context], list[Row]]] = {
    "random": section_random,
    "shuffled": section_shuffled,
    "overlap": section_overlap,
    "fromdict": section_fromdict,
    "sequential": section_sequential,
    "handover": section_handover,
}


# ----------------------------------------------------------------------------------------------
# the bar summary

#: the summary's layouts, side by side
SUMMARY_LAYOUTS = ("h5_gzip", "zarr_default", "zarr_sharded")
#: the random section's ptd variant the summary shows: 2 decode threads, the default cache
SUMMARY_PTD: tuple[int, int | None] = (2, None)


@dataclass
class _Bar:
    """A summary line: the figure of ``variant``'s row of ``section`` (its ratio, or
    ``extra[key]``) against ``bar``."""

    section: str
    what: str
    variant: str
    bar: float
    key: str | None = None


def _summary_bars(batch: int, sections: set[str]) -> list[_Bar]:
    bars = []
    if "random" in sections:
        bars.append(
            _Bar("random", f"random {batch}-row batches (cold): ptd / raw h5py|zarr",
                 ptd_variant(*SUMMARY_PTD), 2.5)
        )  # fmt: skip
    if "shuffled" in sections:
        w0, w2 = (f"ptd.data {w} workers, next (warm)" for w in (0, 2))
        bars += [
            _Bar("shuffled", "shuffled, next epoch (warm): 2 workers / 0 workers", w2, 1.0,
                 "over 0 workers"),
            _Bar("shuffled", "shuffled, next epoch (warm): 2 workers / raw seq.", w2, 1.0),
            _Bar("shuffled", "shuffled, next epoch (warm): 0 workers / raw seq.", w0, 1.0),
        ]  # fmt: skip
    return bars


def print_summary(
    rows: list[Row], written: list[Row], kinds: list[str], layouts: list[str], batch: int
) -> list[Row]:
    """The bar summary of the random and shuffled sections (those that ran), the layouts side
    by side, one block per data kind; returns its cells as rows (section ``summary``)."""
    shown = [x for x in SUMMARY_LAYOUTS if x in layouts]
    index = {(r.data, r.section, r.layout, r.variant): r for r in rows}
    ran = {r.section for r in rows}
    bars = _summary_bars(batch, ran)
    out: list[Row] = []
    if not bars or not shown:
        return out
    label, col = max(len(b.what) for b in bars) + 2, 14
    head = ["\n== bar summary (PASS: the ratio meets the bar)."]
    if "random" in ran:
        head.append(
            "random: cold (every variant opened just before its pass, chunk cache empty), "
            f"ptd = '{ptd_variant(*SUMMARY_PTD)}'."
        )
    if "shuffled" in ran:
        head.append(
            "shuffled: the next epoch (warm: persistent workers, store open); 'raw seq.': the "
            "mean of the raw sequential reads of every leaf just before and after it."
        )
    head.append(f"The stores were just written and sit in the OS page cache; {load_note()} ==")
    print(" ".join(head))
    for data in kinds:
        mine = [b for b in bars if any(k[:2] == (data, b.section) for k in index)]
        if not mine:
            continue
        print(f"\n  {f'{data} data':<{label}} {'bar':>7}" + "".join(f"{x:>{col}}" for x in shown))
        comp = {r.layout: f"{r.ratio:.2f}x" for r in written if r.data == data}
        print(
            f"  {'compression (uncompressed / on disk)':<{label}} {'':>7}"
            + "".join(f"{comp.get(x, '-'):>{col}}" for x in shown)
        )
        for b in mine:
            cells = []
            for x in shown:
                r = index.get((data, b.section, x, b.variant))
                ratio = None
                if r is not None:
                    ratio = r.ratio if b.key is None else r.extra[b.key]
                if ratio is None:
                    cells.append(f"{'-':>{col}}")
                    continue
                ok = "PASS" if ratio >= b.bar else "MISS"
                cells.append(f"{f'{ratio:.2f}x {ok}':>{col}}")
                out.append(
                    Row("summary", x, b.what, ratio, "x", ratio, f"{ok} (bar >= {b.bar:.1f}x)",
                        {"bar": b.bar, "of": b.variant}, data)
                )  # fmt: skip
            print(f"  {b.what:<{label}} {f'>= {b.bar:.1f}x':>7}" + "".join(cells))
    return out


# ----------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows of the generated store")
    ap.add_argument(
        "--sections",
        default=",".join(SECTIONS),
        help=f"comma-separated sections to run (of {', '.join(SECTIONS)})",
    )
    ap.add_argument("--chunk-rows", type=int, default=1024, help="rows per chunk (h5/zarr)")
    ap.add_argument("--inner-rows", type=int, default=128, help="rows per inner chunk (sharded)")
    ap.add_argument("--shard-rows", type=int, default=16384, help="rows per shard (sharded)")
    ap.add_argument("--batch", type=int, default=256, help="rows per random minibatch")
    ap.add_argument("--batches", type=int, default=200, help="random minibatches per run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--repeats", type=int, default=3, help="rounds (shuffled, fromdict, sequential)"
    )
    ap.add_argument("--window", type=int, default=8, help="the sampler's window (shuffled)")
    ap.add_argument(
        "--step-ms", type=float, default=1.0, help="overlap: the simulated training step (ms)"
    )
    ap.add_argument(
        "--layouts",
        default="h5_gzip,zarr_default,zarr_sharded",
        help="random, shuffled: the compressed layouts to run (comma separated)",
    )
    ap.add_argument(
        "--prefetch-factor",
        type=int,
        default=None,
        help="shuffled: the DataLoader's prefetch_factor with workers (default: ptd.data.loader's)",
    )
    ap.add_argument(
        "--handover",
        type=int,
        default=None,
        help="shuffled, handover: batches per hand-over (default: ptd.data.loader's choice; "
        "the handover section: 16)",
    )
    ap.add_argument(
        "--random-batches", type=int, default=20,
        help="raw random-index batches the shuffled section compares with",
    )  # fmt: skip
    ap.add_argument(
        "--data",
        default="normal",
        help="data kind(s) of the generated stores, comma separated (of "
        f"{', '.join(DATA_KINDS)}; default normal): every chosen section runs once per kind",
    )
    ap.add_argument("--tmp", default=None, help="directory for the generated stores")
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    wanted = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in SECTIONS]
    if unknown:
        print(f"unknown section(s) {unknown}; choose from {list(SECTIONS)}", file=sys.stderr)
        return 2
    bad = [
        x for x in args.layouts.split(",") if x not in ("h5_gzip", "zarr_default", "zarr_sharded")
    ]
    if bad:
        print(f"unknown layout(s) {bad}; choose from h5_gzip, zarr_default, zarr_sharded",
              file=sys.stderr)  # fmt: skip
        return 2
    kinds = list(dict.fromkeys(d.strip() for d in args.data.split(",") if d.strip()))
    if not kinds or any(d not in DATA_KINDS for d in kinds):
        print(f"unknown data kind(s) in {args.data!r}; choose from {', '.join(DATA_KINDS)}",
              file=sys.stderr)  # fmt: skip
        return 2
    print(
        f"bench_training: {args.rows:,} rows ({args.rows * ROW_BYTES / 1e6:,.0f} MB uncompressed), "
        f"data {', '.join(kinds)}, "
        f"python {platform.python_version()}, h5py {h5py.__version__}, zarr {zarr.__version__}, "
        f"{os.cpu_count()} CPUs"
    )
    if args.tmp:  # (a directory to put the generated stores in: made if missing)
        os.makedirs(args.tmp, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="ptd-bench-training-", dir=args.tmp))
    rows: list[Row] = []
    try:
        ctx = Context(args, tmp)
        for data in kinds:
            ctx.data = data
            for name in wanted:
                got = SECTIONS[name](ctx)
                for r in got:
                    r.data = data
                rows.extend(got)
            ctx.drop_stores()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rows.extend(print_summary(rows, ctx.written, kinds, args.layouts.split(","), args.batch))
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(r) for r in ctx.written + rows], f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
