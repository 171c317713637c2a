#!/usr/bin/env python
"""Core read benchmark: ptd against raw h5py / zarr on the same files.

Generates, in a temporary directory that is deleted at the end, a replay-buffer-like store of
``--rows`` rows (default 1,000,000, about 525 MB per backend):

    obs       float32 [N, 64]
    next/obs  float32 [N, 64]
    action    int64   [N]
    reward    float32 [N]
    done      bool    [N]

as an HDF5 file (plain h5py, contiguous datasets, as ``PersistentTensorDict.from_dict`` writes
them) and as a Zarr v3 group (``--zarr-chunk-rows`` rows per chunk, no compression,
consolidated metadata), plus a separate store with many small leaves for the metadata benchmark.
Then, for each backend, it times:

    random minibatches  256 unsorted random rows, all leaves. raw: indices sorted by hand,
                        ``ds[np.sort(idx)]`` (h5py) / ``arr.oindex[np.sort(idx)]`` (zarr) per
                        leaf; ptd: ``p[torch_idx].to_tensordict()`` with the unsorted indices
                        (ptd also has to put the rows back in the asked order).
    sequential slices   ``--slice-rows`` rows at a time over the first ``--seq-rows`` rows.
                        raw: ``ds[i:i+k]`` per leaf; ptd: ``p[i:i+k].to_tensordict()``.
    full read           raw: ``ds[()]`` / ``arr[...]`` per leaf; ptd: ``p.to_tensordict()``.
    metadata            a store of ``--meta-groups`` x ``--meta-leaves`` small leaves. raw:
                        open + ``visititems`` (h5py) / ``members(max_depth=None)`` (zarr)
                        collecting every shape and dtype; ptd: ``from_h5``/``from_zarr``
                        (which validates the batch size) + ``keys(True, True)`` + ``leaf_meta``.

ptd is timed with its memory-map fast path off and on (``--fast-path both``, the default: two
columns side by side), or one of them (``--fast-path on|off``).

Every measurement is one warm-up followed by ``--repeats`` timed rounds (default 5), raw and
each ptd variant interleaved within a round so that load bursts on a shared machine hit them
alike; the figure reported is the median repeat. The files are freshly written, so they are in
the OS page cache: this measures the library overhead, not the disk.

Targets: the core issue's, data reads ptd/raw throughput >= 0.8x and metadata ptd/raw time
<= 1.5x; with the fast path on (issue 8, h5): random minibatches >= 10x raw h5py, sequential
slices and the full read >= 1.5x.

Usage::

    python benchmarks/bench_core.py                     # full run, both backends
    python benchmarks/bench_core.py --rows 100000       # quicker
    python benchmarks/bench_core.py --raw-only          # only the raw side (no ptd needed)
    python benchmarks/bench_core.py --backend h5 --json out.json
    python benchmarks/bench_core.py --backend h5 --fast-path on   # only the fast path
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import statistics
import subprocess
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
#: the batch-size group attribute of tensordict's zarr format (written by from_dict); the h5 files
#: get no attributes, as tensordict writes them, so ptd infers the batch size from the shapes
TD_META_ATTR = "__tensordict__"
#: rows generated per write, to keep the generator's memory small
GEN_BLOCK = 1 << 17
PAGE_CACHE_NOTE = (
    "files were just written, so they are in the OS page cache (dropping caches is not possible "
    "here): figures measure library overhead, not the disk"
)


def _path(key: tuple[str, ...]) -> str:
    return "/".join(key)


def _block(rng: np.random.Generator, key: tuple[str, ...], n: int, start: int) -> np.ndarray:
    """Deterministic-ish content for rows [start, start+n) of a leaf."""
    name = _path(key)
    if name in ("obs", "next/obs"):
        return rng.standard_normal((n, 64), dtype=np.float32)
    if name == "action":
        return rng.integers(0, 18, size=n, dtype=np.int64)
    if name == "reward":
        return rng.standard_normal(n, dtype=np.float32)
    if name == "done":
        return rng.random(n) < 0.01
    raise AssertionError(name)


def _consolidate(path: Path) -> None:
    # as from_dict does; zarr warns that consolidated metadata is not in the v3 spec yet
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.consolidate_metadata(str(path))


def write_h5(path: Path, rows: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        dsets = {}
        for key, dt, shape in LEAVES:
            # contiguous: no chunks, no filters (h5py's default, as from_dict writes)
            dsets[key] = f.create_dataset(_path(key), shape=(rows, *shape), dtype=dt)
        for start in range(0, rows, GEN_BLOCK):
            n = min(GEN_BLOCK, rows - start)
            for key, _, _ in LEAVES:
                dsets[key][start : start + n] = _block(rng, key, n, start)


def write_zarr(path: Path, rows: int, seed: int, chunk_rows: int) -> None:
    rng = np.random.default_rng(seed)
    meta = {TD_META_ATTR: {"batch_size": [rows], "version": 1}}
    root = zarr.open_group(str(path), mode="w", attributes=meta)
    root.create_group("next", attributes=meta)
    arrays = {}
    for key, dt, shape in LEAVES:
        arrays[key] = root.create_array(
            _path(key),
            shape=(rows, *shape),
            dtype=dt,
            chunks=(max(1, min(chunk_rows, rows)), *shape),
            compressors=None,
        )
    block = max(chunk_rows, GEN_BLOCK // chunk_rows * chunk_rows)  # whole chunks per write
    for start in range(0, rows, block):
        n = min(block, rows - start)
        for key, _, _ in LEAVES:
            arrays[key][start : start + n] = _block(rng, key, n, start)
    _consolidate(path)


def _meta_leaf_specs(groups: int, leaves: int, batch: int) -> Iterator[tuple[str, np.ndarray]]:
    dtypes = ["float32", "int64", "bool", "float16", "uint8"]
    for g in range(groups):
        for i in range(leaves):
            shape = (batch,) if i % 2 == 0 else (batch, 1 + i % 4)
            yield f"g{g:03d}/x{i:02d}", np.zeros(shape, dtype=dtypes[i % len(dtypes)])


def write_meta_h5(path: Path, groups: int, leaves: int, batch: int) -> None:
    with h5py.File(path, "w") as f:
        for name, value in _meta_leaf_specs(groups, leaves, batch):
            f.create_dataset(name, data=value)


def write_meta_zarr(path: Path, groups: int, leaves: int, batch: int) -> None:
    meta = {TD_META_ATTR: {"batch_size": [batch], "version": 1}}
    root = zarr.open_group(str(path), mode="w", attributes=meta)
    for g in range(groups):
        root.create_group(f"g{g:03d}", attributes=meta)
    for name, value in _meta_leaf_specs(groups, leaves, batch):
        arr = root.create_array(name, shape=value.shape, dtype=value.dtype, compressors=None)
        arr[...] = value
    _consolidate(path)


# ----------------------------------------------------------------------------------------------
# raw readers (the baseline)


class RawH5:
    def __init__(self, path: Path) -> None:
        self.f = h5py.File(path, "r")
        self.ds = [self.f[_path(k)] for k, _, _ in LEAVES]

    def rows(self, idx: np.ndarray) -> list[np.ndarray]:
        s = np.sort(idx)  # h5py needs increasing indices
        return [d[s] for d in self.ds]

    def slice(self, a: int, b: int) -> list[np.ndarray]:
        return [d[a:b] for d in self.ds]

    def full(self) -> list[np.ndarray]:
        return [d[()] for d in self.ds]

    def close(self) -> None:
        self.f.close()


class RawZarr:
    def __init__(self, path: Path) -> None:
        self.g = zarr.open_group(str(path), mode="r")
        self.ds = [self.g[_path(k)] for k, _, _ in LEAVES]

    def rows(self, idx: np.ndarray) -> list[np.ndarray]:
        s = np.sort(idx)
        return [d.oindex[s] for d in self.ds]

    def slice(self, a: int, b: int) -> list[np.ndarray]:
        return [d[a:b] for d in self.ds]

    def full(self) -> list[np.ndarray]:
        return [d[...] for d in self.ds]

    def close(self) -> None:
        pass


def raw_meta_h5(path: Path) -> int:
    found: dict[str, tuple[tuple[int, ...], np.dtype]] = {}

    def visit(name: str, obj: Any) -> None:
        if isinstance(obj, h5py.Dataset):
            found[name] = (obj.shape, obj.dtype)

    with h5py.File(path, "r") as f:
        f.visititems(visit)
    return len(found)


def raw_meta_zarr(path: Path) -> int:
    g = zarr.open_group(str(path), mode="r")
    found = {
        name: (node.shape, node.dtype)
        for name, node in g.members(max_depth=None)
        if isinstance(node, zarr.Array)
    }
    return len(found)


# ----------------------------------------------------------------------------------------------
# ptd readers


REPO_ROOT = Path(__file__).resolve().parent.parent


def import_ptd() -> Any:
    """``import ptd``: the installed one, else the one in this checkout."""
    try:
        import ptd
    except ModuleNotFoundError as e:
        if e.name != "ptd" or not (REPO_ROOT / "ptd" / "__init__.py").is_file():
            raise
        sys.path.insert(0, str(REPO_ROOT))
        import ptd
    return ptd


def open_ptd(ptd: Any, backend: str, path: Path, fast_path: bool | None = None) -> Any:
    cls = ptd.PersistentTensorDict
    kw = {} if fast_path is None else {"fast_path": fast_path}
    return cls.from_h5(str(path), **kw) if backend == "h5" else cls.from_zarr(str(path), **kw)


def ptd_meta(ptd: Any, backend: str, path: Path) -> int:
    n = 0
    with open_ptd(ptd, backend, path) as p:
        for key in p.keys(include_nested=True, leaves_only=True):
            m = p.leaf_meta(key)
            _ = (m.shape, m.dtype)
            n += 1
    return n


# ----------------------------------------------------------------------------------------------
# timing


@dataclass
class Variant:
    """One ptd configuration timed against raw: ``"ptd"``, ``"fast path off"``/``"on"``."""

    name: str
    value: float
    ratio: float
    target: str
    ok: bool
    times_s: list[float] = field(default_factory=list)


@dataclass
class Row:
    op: str
    unit: str  # "rows/s", "MB/s" or "ms"
    raw: float
    variants: list[Variant] = field(default_factory=list)
    detail: str = ""
    raw_times_s: list[float] = field(default_factory=list)


#: targets per operation kind for ptd with the fast path on (h5: issue 8); everything else keeps
#: the core targets (reads >= 0.8x raw, metadata <= 1.5x raw)
FAST_TARGETS = {("h5", "random"): 10.0, ("h5", "seq"): 1.5, ("h5", "full"): 1.5}
CORE_READ_TARGET = 0.8
CORE_META_TARGET = 1.5


def _minor_faults() -> int:
    try:
        import resource
    except ImportError:  # not on Windows
        return 0
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


#: minor page faults of each function's repeats in the last :func:`measure` call
LAST_FAULTS: list[list[int]] = []


def _time(fn: Callable[[], Any], faults: list[int]) -> float:
    gc.collect()
    f0 = _minor_faults()
    t0 = time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    faults.append(_minor_faults() - f0)
    return dt


def measure(fns: list[Callable[[], Any]], repeats: int) -> list[list[float]]:
    """One warm-up each, then ``repeats`` rounds timing every function once, interleaved
    (so that a burst of load on the machine hits them all alike). The minor page faults of
    each repeat are left in :data:`LAST_FAULTS`."""
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    LAST_FAULTS[:] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, t, f in zip(fns, times, LAST_FAULTS, strict=True):
            t.append(_time(fn, f))
    return times


def faults_note(names: list[str]) -> str:
    """``"; minor page faults per repeat: raw N, off N, on N"`` for the last measurement:
    fresh output memory is faulted in page by page, and how often the C allocator hands it
    back to the OS between reads (which both raw and ptd pay) moves the figures."""
    if not any(statistics.median(f) for f in LAST_FAULTS if f):  # none (or no getrusage)
        return ""
    parts = [
        f"{name} {int(statistics.median(f)):,}"
        for name, f in zip(["raw", *names], LAST_FAULTS, strict=False)
    ]
    return "; minor page faults per repeat: " + ", ".join(parts)


def throughput_row(
    backend: str,
    kind: str,
    op: str,
    work: float,
    unit: str,
    raw_t: list[float],
    variants: list[tuple[str, list[float]]],
    detail: str,
) -> Row:
    """Throughput (``work`` per second, median repeat) of raw and of each ptd variant."""
    raw = work / statistics.median(raw_t)
    row = Row(op, unit, raw, detail=detail, raw_times_s=raw_t)
    for name, t in variants:
        value = work / statistics.median(t)
        fast = FAST_TARGETS.get((backend, kind), CORE_READ_TARGET)
        need = fast if name == "on" else CORE_READ_TARGET
        ratio = value / raw
        row.variants.append(Variant(name, value, ratio, f">= {need:g}x", ratio >= need, t))
    return row


def time_row(
    op: str, raw_t: list[float], variants: list[tuple[str, list[float]]], detail: str
) -> Row:
    row = Row(op, "ms", statistics.median(raw_t) * 1e3, detail=detail, raw_times_s=raw_t)
    for name, t in variants:
        value = statistics.median(t) * 1e3
        ratio = value / row.raw
        row.variants.append(
            Variant(name, value, ratio, f"<= {CORE_META_TARGET:g}x", ratio <= CORE_META_TARGET, t)
        )
    return row


# ----------------------------------------------------------------------------------------------
# correctness checks (outside the timings): ptd must return what raw returns


def _check_equal(td: Any, expected: list[np.ndarray], what: str) -> None:
    import torch

    for (key, dt, _), exp in zip(LEAVES, expected, strict=True):
        got = td[key] if len(key) > 1 else td[key[0]]
        if not isinstance(got, torch.Tensor):
            raise AssertionError(f"{what}: {key} is a {type(got).__name__}, not a torch.Tensor")
        g = got.numpy()
        if g.dtype != dt or g.shape != exp.shape or not np.array_equal(g, exp):
            raise AssertionError(
                f"{what}: {_path(key)} differs from raw: got {g.dtype}{list(g.shape)}, "
                f"expected {exp.dtype}{list(exp.shape)}"
            )


# ----------------------------------------------------------------------------------------------
# one backend


def bench_backend(
    backend: str, data: Path, meta: Path, args: argparse.Namespace, ptd: Any | None
) -> list[Row]:
    import torch

    rows_n = args.rows
    raw = RawH5(data) if backend == "h5" else RawZarr(data)
    # the ptd variants timed next to raw: fast path off and/or on (one open store each)
    names = {"both": ["off", "on"], "on": ["on"], "off": ["off"]}[args.fast_path]
    stores: list[tuple[str, Any]] = []
    out: list[Row] = []
    try:
        if ptd is not None:
            for name in names:
                stores.append((name, open_ptd(ptd, backend, data, fast_path=name == "on")))
        for _, p in stores:
            if tuple(p.batch_size) != (rows_n,):
                raise AssertionError(f"ptd batch_size {tuple(p.batch_size)} != ({rows_n},)")

        # -- random minibatches
        rng = np.random.default_rng(args.seed + 1)
        bs = min(args.batch_size, rows_n)
        idxs = [rng.choice(rows_n, size=bs, replace=False) for _ in range(args.batches)]
        tidxs = [torch.from_numpy(i) for i in idxs]
        # raw rows come back sorted; rank of each asked index puts them in the asked order
        order = np.argsort(np.argsort(idxs[0]))
        exp = [a[order] for a in raw.rows(idxs[0])]
        for name, p in stores:
            _check_equal(p[tidxs[0]].to_tensordict(), exp, f"random minibatch ({name})")

        def raw_rand() -> None:
            for i in idxs:
                raw.rows(i)

        def ptd_rand(p: Any) -> Callable[[], None]:
            def run() -> None:
                for t in tidxs:
                    p[t].to_tensordict()

            return run

        rt, *pts = measure([raw_rand, *(ptd_rand(p) for _, p in stores)], args.repeats)
        out.append(
            throughput_row(
                backend,
                "random",
                f"random minibatch ({bs} rows)",
                bs * args.batches,
                "rows/s",
                rt,
                [(name, t) for (name, _), t in zip(stores, pts, strict=True)],
                f"{args.batches} batches of {bs} unsorted unique rows, 5 leaves"
                + faults_note([n for n, _ in stores]),
            )
        )
        if backend == "zarr":
            c = max(1, min(args.zarr_chunk_rows, rows_n))
            touched = statistics.mean(len(np.unique(i // c)) for i in idxs)
            out[-1].detail += (
                f"; each batch touches {touched:.1f} of {-(-rows_n // c)} chunks per leaf, "
                f"and zarr reads whole chunks ({c:,} rows each)"
            )

        # -- sequential slices
        k = min(args.slice_rows, rows_n)
        seq_end = min(args.seq_rows, rows_n) // k * k or k
        starts = list(range(0, seq_end, k))
        for name, p in stores:
            _check_equal(
                p[starts[-1] : starts[-1] + k].to_tensordict(),
                raw.slice(starts[-1], starts[-1] + k),
                f"slice ({name})",
            )

        def raw_seq() -> None:
            for s in starts:
                raw.slice(s, s + k)

        def ptd_seq(p: Any) -> Callable[[], None]:
            def run() -> None:
                for s in starts:
                    p[s : s + k].to_tensordict()

            return run

        rt, *pts = measure([raw_seq, *(ptd_seq(p) for _, p in stores)], args.repeats)
        out.append(
            throughput_row(
                backend,
                "seq",
                f"sequential slices ({k} rows)",
                len(starts) * k,
                "rows/s",
                rt,
                [(name, t) for (name, _), t in zip(stores, pts, strict=True)],
                f"{len(starts)} slices over rows [0, {len(starts) * k})"
                + faults_note([n for n, _ in stores]),
            )
        )

        # -- full read
        full = raw.full()
        for name, p in stores:
            _check_equal(p.to_tensordict(), full, f"full read ({name})")
        del full
        rt, *pts = measure(
            [raw.full, *((lambda p=p: p.to_tensordict()) for _, p in stores)], args.repeats
        )
        mb = rows_n * ROW_BYTES / 1e6
        out.append(
            throughput_row(
                backend,
                "full",
                "full read",
                mb,
                "MB/s",
                rt,
                [(name, t) for (name, _), t in zip(stores, pts, strict=True)],
                f"{mb:.0f} MB, 5 leaves" + faults_note([n for n, _ in stores]),
            )
        )
        if args.rss:
            on = args.fast_path != "off"
            out[-1].detail += f"; fast path {'on' if on else 'off'}: " + rss_detail(
                backend, data, ptd is not None, on
            )
    finally:
        for _, p in stores:
            p.close()
        raw.close()

    # -- metadata (the fast path plays no part: one ptd column)
    raw_meta = raw_meta_h5 if backend == "h5" else raw_meta_zarr
    n_leaves = args.meta_groups * args.meta_leaves
    got = raw_meta(meta)
    if got != n_leaves:
        raise AssertionError(f"raw metadata listed {got} leaves, expected {n_leaves}")
    fns: list[Callable[[], Any]] = [lambda: raw_meta(meta)]
    if ptd is not None:
        got = ptd_meta(ptd, backend, meta)
        if got != n_leaves:
            raise AssertionError(f"ptd metadata listed {got} leaves, expected {n_leaves}")
        fns.append(lambda: ptd_meta(ptd, backend, meta))
    rt, *pts = measure(fns, args.repeats)
    out.append(
        time_row(
            f"metadata ({n_leaves} leaves)",
            rt,
            [("ptd", t) for t in pts],
            f"open{' + validate' if ptd is not None else ''} + shape/dtype of "
            f"{args.meta_groups} groups x {args.meta_leaves} leaves",
        )
    )
    return out


# ----------------------------------------------------------------------------------------------
# optional: peak RSS of a full read, in a child process


def _rss_child(backend: str, path: str, use_ptd: bool) -> None:
    # VmHWM, not getrusage's ru_maxrss: the latter survives exec and so reports the parent's peak
    def status_kb(field: str) -> int:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        raise RuntimeError(f"no {field} in /proc/self/status")

    if use_ptd:
        ptd = import_ptd()
        p = open_ptd(ptd, backend, Path(path))
        before = status_kb("VmRSS")
        td = p.to_tensordict()
    else:
        r = RawH5(Path(path)) if backend == "h5" else RawZarr(Path(path))
        before = status_kb("VmRSS")
        td = r.full()
    peak = status_kb("VmHWM")
    del td
    print(json.dumps({"growth_mb": (peak - before) / 1024}))


def rss_detail(backend: str, path: Path, with_ptd: bool, fast_path: bool = True) -> str:
    env = dict(os.environ, PTD_FAST_PATH="1" if fast_path else "0")

    def run(use_ptd: bool) -> float:
        cmd = [sys.executable, __file__, "--_rss-child", backend, str(path), str(int(use_ptd))]
        res = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
        return float(json.loads(res.stdout.strip().splitlines()[-1])["growth_mb"])

    text = f"peak RSS growth raw {run(False):.0f} MB"
    if with_ptd:
        text += f", ptd {run(True):.0f} MB"
    return text


# ----------------------------------------------------------------------------------------------
# output


def _fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    if unit == "ms":
        return f"{v:,.1f} ms"
    if unit == "MB/s":
        return f"{v:,.0f} MB/s"
    return f"{v:,.0f} rows/s"


_VARIANT_LABEL = {"ptd": "ptd", "off": "ptd fast path off", "on": "ptd fast path on"}


def print_table(backend: str, rows: list[Row], repeats: int) -> None:
    names = [v.name for v in rows[0].variants] if rows else []
    for r in rows:  # metadata rows have one "ptd" column: print it under each
        for v in r.variants:
            if v.name not in names:
                names.append(v.name)
    names = [n for n in names if n != "ptd"] or ["ptd"]
    head = ["operation", "raw"]
    for n in names:
        head += [_VARIANT_LABEL.get(n, n), "ratio", "target", ""]
    table = [tuple(head)]
    for r in rows:
        cells = [r.op, _fmt(r.raw, r.unit)]
        by_name = {v.name: v for v in r.variants}
        for n in names:
            v = by_name.get(n) or by_name.get("ptd")
            if v is None:
                cells += ["-", "-", "", ""]
            else:
                cells += [
                    _fmt(v.value, r.unit),
                    f"{v.ratio:.2f}x",
                    v.target,
                    "ok" if v.ok else "MISSED",
                ]
        table.append(tuple(cells))
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    title = f"{backend}  (median of {repeats} repeats after 1 warm-up, interleaved)"
    print(f"\n{title}\n{'=' * len(title)}")
    for i, row in enumerate(table):
        cells = [
            c.ljust(w) if j == 0 else c.rjust(w)
            for j, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        print("  ".join(cells).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    for r in rows:
        print(f"  * {r.op}: {r.detail}")
    print(
        "  ratio: ptd/raw throughput for reads (higher is better), ptd/raw time for metadata "
        "(lower is better); the fast path does not change metadata (one figure)"
    )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows N (default 1,000,000)")
    ap.add_argument("--backend", choices=["h5", "zarr", "both"], default="both")
    ap.add_argument("--json", metavar="OUT", type=Path, help="also write the figures as JSON")
    ap.add_argument("--raw-only", action="store_true", help="time only raw h5py/zarr (no ptd)")
    ap.add_argument("--repeats", type=int, default=5, help="timed repeats per figure (median)")
    ap.add_argument(
        "--fast-path",
        choices=["on", "off", "both"],
        default="both",
        help="time ptd with the memory-map fast path on, off, or both side by side (default)",
    )
    ap.add_argument("--batches", type=int, default=200, help="random minibatches per repeat")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--slice-rows", type=int, default=4096)
    ap.add_argument(
        "--seq-rows",
        type=int,
        default=262_144,
        help="rows covered by the sequential slices (default 262,144)",
    )
    ap.add_argument("--zarr-chunk-rows", type=int, default=65_536)
    ap.add_argument("--meta-groups", type=int, default=200)
    ap.add_argument("--meta-leaves", type=int, default=10, help="leaves per group")
    ap.add_argument("--meta-batch", type=int, default=16, help="batch size of the metadata store")
    ap.add_argument(
        "--rss",
        action="store_true",
        help="also report the peak RSS growth of a full read (child processes)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--tmpdir", type=Path, default=None, help="where to generate (default: system temp)"
    )
    args = ap.parse_args(argv)
    if args.rows < 1 or args.repeats < 1 or args.batches < 1:
        ap.error("--rows, --repeats and --batches must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    if argv is None and len(sys.argv) == 5 and sys.argv[1] == "--_rss-child":
        _rss_child(sys.argv[2], sys.argv[3], sys.argv[4] == "1")
        return 0
    args = parse_args(argv)
    backends = ["h5", "zarr"] if args.backend == "both" else [args.backend]

    ptd = None
    if not args.raw_only:
        try:
            ptd = import_ptd()
            _ = ptd.PersistentTensorDict
        except Exception as e:  # noqa: BLE001
            print(
                f"error: cannot use ptd ({type(e).__name__}: {e}); run with --raw-only to time "
                "only raw h5py/zarr",
                file=sys.stderr,
            )
            return 2

    import torch

    print(
        f"bench_core: N={args.rows:,} rows x {ROW_BYTES} B = {args.rows * ROW_BYTES / 1e6:,.0f} MB "
        f"per backend; backends: {', '.join(backends)}; {'raw only' if ptd is None else 'raw vs ptd'}"
    )
    print(
        f"python {platform.python_version()}, torch {torch.__version__}, numpy {np.__version__}, "
        f"h5py {h5py.__version__}, zarr {zarr.__version__}"
        + ("" if ptd is None else f", ptd {getattr(ptd, '__version__', '?')}")
        + f"; {os.cpu_count()} CPUs"
    )
    print(f"note: {PAGE_CACHE_NOTE}")

    if args.tmpdir:  # (a directory to put the generated stores in: made if missing)
        os.makedirs(args.tmpdir, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="ptd-bench-", dir=args.tmpdir))
    results: dict[str, list[Row]] = {}
    try:
        for backend in backends:
            t0 = time.perf_counter()
            if backend == "h5":
                data, meta = tmp / "data.h5", tmp / "meta.h5"
                write_h5(data, args.rows, args.seed)
                write_meta_h5(meta, args.meta_groups, args.meta_leaves, args.meta_batch)
            else:
                data, meta = tmp / "data.zarr", tmp / "meta.zarr"
                write_zarr(data, args.rows, args.seed, args.zarr_chunk_rows)
                write_meta_zarr(meta, args.meta_groups, args.meta_leaves, args.meta_batch)
            print(
                f"\n[{backend}] generated {data.name} and {meta.name} in "
                f"{time.perf_counter() - t0:.1f} s"
                + (
                    f" (zarr chunks: {args.zarr_chunk_rows:,} rows, no compression)"
                    if backend == "zarr"
                    else " (contiguous datasets)"
                )
            )
            try:
                results[backend] = bench_backend(backend, data, meta, args, ptd)
            except Exception as e:
                if ptd is None:
                    raise
                import traceback

                traceback.print_exc()
                print(f"[{backend}] FAILED: {type(e).__name__}: {e}", file=sys.stderr)
                results[backend] = []
                continue
            print_table(backend, results[backend], args.repeats)
            # free the disk (and page cache) before the next backend
            if data.is_dir():
                shutil.rmtree(data, ignore_errors=True)
            else:
                data.unlink()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    missed = [
        (b, r.op + ("" if v.name == "ptd" else f" (fast path {v.name})"))
        for b, rs in results.items()
        for r in rs
        for v in r.variants
        if not v.ok
    ]
    failed = [b for b, rs in results.items() if not rs]
    if ptd is not None:
        print()
        if failed:
            print(f"FAILED to run against ptd: {', '.join(failed)}")
        print("targets missed: " + (", ".join(f"{b}: {op}" for b, op in missed) or "none"))
    if args.json:
        payload = {
            "rows": args.rows,
            "row_bytes": ROW_BYTES,
            "statistic": f"median of {args.repeats} repeats after 1 warm-up",
            "note": PAGE_CACHE_NOTE,
            "raw_only": ptd is None,
            "versions": {
                "python": platform.python_version(),
                "torch": torch.__version__,
                "numpy": np.__version__,
                "h5py": h5py.__version__,
                "zarr": zarr.__version__,
                "ptd": None if ptd is None else getattr(ptd, "__version__", None),
            },
            "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "results": {b: [asdict(r) for r in rs] for b, rs in results.items()},
            "failed": failed,
            "targets_missed": [f"{b}: {op}" for b, op in missed],
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
