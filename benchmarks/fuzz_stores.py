"""Fuzz ptd with seeded mutants of HDF5 files and Zarr v2/v3 stores, and count what happens.

    python benchmarks/fuzz_stores.py --cases 2000 --seed 0 --jobs 2 [--keep DIR] [--timeout S]
    python benchmarks/fuzz_stores.py --seeds 31 55 --keep /tmp/fuzz      # reproduce some seeds

Each case is one mutant (``tests/robustness/fuzz/mutations.py``) run through ``ptd inspect``,
``ptd validate --data``, ``ptd convert`` and ``to_tensordict()`` in a long-lived worker
subprocess (``tests/robustness/fuzz/worker.py``), with a per-case timeout and memory cap.
Prints the counts by outcome class (``ok``; ``refused:CLASS``: the library read refused with
that ptd error and nothing else was wrong; then each problem: traceback, internal-error,
error-lines, stderr-noise, bad-exit, lib-non-ptd-error, memory, memory-cap, value-mismatch,
outside-data, code-ran, leftover, store-modified, validate-missed, hang, crash), the worst
seeds of each problem class, the slowest cases and the largest memory growth. ``--keep DIR``
copies each failing case's directory (mutant, outputs, ``outcome.json``) to ``DIR/SEED``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.robustness.fuzz.harness import Outcome, run_seeds, summary, table

#: the order problem classes are listed in, worst first
SEVERITY = (
    "code-ran", "outside-data", "crash", "memory-cap", "memory", "hang", "store-modified",
    "value-mismatch", "leftover", "traceback", "lib-non-ptd-error", "internal-error",
    "bad-exit", "error-lines", "stderr-noise", "validate-missed", "oracle-hang", "harness-error",
)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--cases", type=int, default=1000, help="how many seeds (default 1000)")
    ap.add_argument("--seed", type=int, default=0, help="the first seed (default 0)")
    ap.add_argument("--seeds", type=int, nargs="+", help="run exactly these seeds instead")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds a case may take")
    ap.add_argument("--mem-cap-mb", type=int, default=2048, help="RSS growth that kills a case")
    ap.add_argument("--keep", type=Path, help="copy failing cases here (DIR/SEED)")
    ap.add_argument("--keep-all", action="store_true", help="with --keep: every case")
    ap.add_argument("--table", action="store_true", help="print every failing case")
    args = ap.parse_args(argv)
    seeds = args.seeds or list(range(args.seed, args.seed + args.cases))
    done = 0
    start = time.monotonic()

    def progress(o: Outcome) -> None:
        nonlocal done
        done += 1
        if done % 100 == 0 or not o.ok:
            mark = "ok" if o.ok else ",".join(o.classes())
            print(f"[{done}/{len(seeds)} {time.monotonic() - start:.0f}s] seed {o.seed} "
                  f"{o.base} {o.mutation}: {mark}", file=sys.stderr)  # fmt: skip

    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    outcomes = run_seeds(
        seeds,
        jobs=args.jobs,
        timeout=args.timeout,
        mem_cap=args.mem_cap_mb << 20,
        keep=args.keep,
        keep_all=args.keep_all,
        progress=progress,
    )
    wall = time.monotonic() - start
    print(f"{len(outcomes)} cases, {args.jobs} workers, {wall:.1f} s "
          f"({wall / max(1, len(outcomes)) * args.jobs:.2f} s a case per worker)")  # fmt: skip
    print("\noutcome classes (a case counts once per class):")
    for cls, n in summary(outcomes).items():
        print(f"  {n:6}  {cls}")
    failing = [o for o in outcomes if not o.ok]
    by_class: dict[str, list[Outcome]] = {}
    for o in failing:
        for c in o.classes():
            by_class.setdefault(c, []).append(o)
    if by_class:
        print("\nseeds by problem class, worst class first (up to 8 each; mutation families):")
        for cls in sorted(by_class, key=lambda c: SEVERITY.index(c) if c in SEVERITY else 99):
            cases = by_class[cls]
            fams = sorted({o.mutation.split(":")[0] + "/" + o.base for o in cases})
            seeds_s = " ".join(str(o.seed) for o in cases[:8])
            print(f"  {cls:18} {len(cases):5}  seeds {seeds_s}  [{', '.join(fams)[:150]}]")
    ran = [o for o in outcomes if o.ok or all(p[1] != "hang" for p in o.problems)]
    print("\nslowest cases (seconds for all four steps, worker already started):")
    for o in sorted(ran, key=lambda o: -o.seconds)[:5]:
        print(f"  {o.seconds:7.2f}  seed {o.seed} {o.base} {o.mutation} {o.detail[:60]}")
    print("largest RSS growth above the idle worker (sampled every 20 ms):")
    for o in sorted(outcomes, key=lambda o: -o.peak_rss_delta)[:5]:
        print(f"  {o.peak_rss_delta / 2**20:7.0f} MiB  seed {o.seed} {o.base} {o.mutation}")
    if args.table and failing:
        print("\n" + table(failing, limit=10_000))
    if args.keep and failing:
        print(f"\nfailing cases written to {args.keep}/SEED (outcome.json beside the mutant)")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
