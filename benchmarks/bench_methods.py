#!/usr/bin/env python
"""Per-call cost of container methods: ptd.TensorDict against a plain dict of tensors.

The method families are plain functions bound as methods (docs/architecture.md, "The
containers"); this measures what a call costs on a small in-memory tensordict, where the
container's own work dominates (the tensors are tiny), next to the same work written as a dict
comprehension over ``torch`` tensors:

    get                 ``td["a"]``                       raw: ``d["a"]``
    set                 ``td["a"] = x``                   raw: ``d["a"] = x``
    keys (nested)       ``td.keys(True, True)``           raw: walk of nested dicts
    sum                 ``td.sum()``                      raw: ``{k: v.sum()}``
    add                 ``td + td``                       raw: ``{k: v + v}``
    add_ (in place)     ``td.add_(1)``                    raw: ``v.add_(1)`` per leaf
    apply               ``td.apply(lambda t: t * 2)``     raw: ``{k: v * 2}``
    index               ``td[3]``                         raw: ``{k: v[3]}``
    stack               ``torch.stack([td, td])``         raw: ``{k: torch.stack([v, v])}``
    clone               ``td.clone()``                    raw: ``{k: v.clone()}``

The tensordict has ``--leaves`` leaves (default 8) of shape ``[--rows, 4]`` in two nested
levels. Every figure is the median of ``--repeats`` timed rounds of ``--calls`` calls after one
warm-up round: warm figures (everything is in memory; there is no cold case for an in-memory
container). The ratio is ptd's time over raw's: the price of the container (key walking,
batch-size checks, results built as TensorDicts).

    python benchmarks/bench_methods.py                 # both columns and the ratio
    python benchmarks/bench_methods.py --json out.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch


def _median_us(fn: Callable[[], Any], calls: int, repeats: int) -> float:
    for _ in range(calls):  # warm-up
        fn()
    rounds = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        rounds.append((time.perf_counter() - t0) / calls)
    return statistics.median(rounds) * 1e6


def _raw_tree(leaves: int, rows: int) -> dict[str, Any]:
    half = leaves // 2
    flat = {f"a{i}": torch.rand(rows, 4) for i in range(half)}
    flat["n"] = {f"b{i}": torch.rand(rows, 4) for i in range(leaves - half)}
    return flat


def _raw_map(tree: dict[str, Any], fn: Callable[[torch.Tensor], torch.Tensor]) -> dict[str, Any]:
    return {k: _raw_map(v, fn) if isinstance(v, dict) else fn(v) for k, v in tree.items()}


def _raw_keys(tree: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for k, v in tree.items():
        if isinstance(v, dict):
            out.extend(_raw_keys(v, (*prefix, k)))
        else:
            out.append((*prefix, k))
    return out


def _raw_stack(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    return {
        k: _raw_stack(v, b[k]) if isinstance(v, dict) else torch.stack([v, b[k]])
        for k, v in a.items()
    }


def _raw_inplace(tree: dict[str, Any]) -> None:
    for v in tree.values():
        if isinstance(v, dict):
            _raw_inplace(v)
        else:
            v.add_(1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--leaves", type=int, default=8)
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--calls", type=int, default=2000, help="calls per timed round")
    ap.add_argument("--repeats", type=int, default=7, help="timed rounds (the median is shown)")
    ap.add_argument("--json", metavar="OUT", type=Path, help="also write the figures as JSON")
    args = ap.parse_args()

    import ptd
    from ptd import TensorDict

    raw = _raw_tree(args.leaves, args.rows)
    td = TensorDict(_raw_map(raw, lambda t: t.clone()), batch_size=[args.rows])
    x = torch.rand(args.rows, 4)
    cases: list[tuple[str, Callable[[], Any], Callable[[], Any]]] = [
        ("get", lambda: td["a0"], lambda: raw["a0"]),
        ("set", lambda: td.__setitem__("a0", x), lambda: raw.__setitem__("a0", x)),
        ("keys (nested)", lambda: td.keys(True, True), lambda: _raw_keys(raw)),
        ("sum", lambda: td.sum(), lambda: _raw_map(raw, torch.sum)),
        ("add", lambda: td + td, lambda: _raw_map(raw, lambda t: t + t)),
        ("add_ (in place)", lambda: td.add_(1), lambda: _raw_inplace(raw)),
        ("apply", lambda: td.apply(lambda t: t * 2), lambda: _raw_map(raw, lambda t: t * 2)),
        ("index", lambda: td[3], lambda: _raw_map(raw, lambda t: t[3])),
        ("stack", lambda: torch.stack([td, td]), lambda: _raw_stack(raw, raw)),
        ("clone", lambda: td.clone(), lambda: _raw_map(raw, torch.clone)),
    ]
    print(
        f"bench_methods: TensorDict of {args.leaves} leaves [{args.rows}, 4] in two levels; "
        f"median of {args.repeats} rounds of {args.calls} calls after a warm-up (warm)"
    )
    print(
        f"python {platform.python_version()}, torch {torch.__version__}, ptd {ptd.__version__}; "
        f"ptd imported from {Path(ptd.__file__).parent}"
    )
    header = f"{'operation':18s} {'raw (us/call)':>14s} {'ptd (us/call)':>14s} {'ptd/raw':>8s}"
    print(header)
    print("-" * len(header))
    figures = {}
    for name, mine, theirs in cases:
        t_raw = _median_us(theirs, args.calls, args.repeats)
        t_ptd = _median_us(mine, args.calls, args.repeats)
        figures[name] = {"raw_us": t_raw, "ptd_us": t_ptd, "ratio": t_ptd / t_raw}
        print(f"{name:18s} {t_raw:14.2f} {t_ptd:14.2f} {t_ptd / t_raw:7.1f}x")
    print("ratio: ptd's time over a plain dict of tensors doing the same (lower is better); warm")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
