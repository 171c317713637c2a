#!/usr/bin/env python
"""Every hostile-store attack of the robustness suite, run and measured against the bar.

Imports each ``tests/robustness/attacks_*.py`` module present (a glob: modules added later are
picked up), builds each of its attacks in a fresh temporary directory, runs each command with
``attack_kit.run_ptd`` (``python -m ptd ...`` in a new process, which reports its own peak RSS,
VmHWM, at exit) and prints one row per command:

- exit status, and whether the command was *refused or reported* (one ``ptd: error:`` line and a
  non-zero exit, or ``validate``'s report of the problem with exit 1 or 2);
- seconds, wall clock, **cold process start included** (every run is a fresh process), and the
  seconds beyond an idle ``python -m ptd --version`` measured the same way (the median of
  ``--baseline`` runs);
- peak RSS, and the peak RSS beyond that idle baseline;
- PASS/FAIL against the bar: under 1 s and under 200 MB beyond the idle baseline, refused or
  reported, no hang, and the attack's watched paths (the marker a payload would create) absent.

The figures are measured here and never asserted in tests (the suite runs on busy machines).

Usage::

    python benchmarks/bench_attacks.py                  # every attack, once each
    python benchmarks/bench_attacks.py -k userinfo      # attacks whose name holds a word
    python benchmarks/bench_attacks.py --repeat 3       # the median of 3 runs per command
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ATTACKS_DIR = ROOT / "tests" / "robustness"
#: the bar each command must clear, beyond an idle ``ptd --version``
MAX_EXTRA_SECONDS = 1.0
MAX_EXTRA_BYTES = 200 << 20


@dataclass
class Row:
    attack: str
    command: str
    code: int
    seconds: float
    rss: int
    handled: bool
    clean: bool
    hung: bool

    def verdict(self, base_s: float, base_rss: int) -> str:
        why = []
        if self.hung:
            why.append("hung")
        if not self.handled:
            why.append("not refused")
        if not self.clean:
            why.append("marker/watched path touched")
        if self.seconds - base_s >= MAX_EXTRA_SECONDS:
            why.append("slow")
        if self.rss - base_rss >= MAX_EXTRA_BYTES:
            why.append("memory")
        return "PASS" if not why else "FAIL (" + ", ".join(why) + ")"


def _modules() -> list[tuple[str, list]]:
    """``(module name, its ATTACKS)`` for every attacks module present."""
    sys.path.insert(0, str(ROOT))
    out = []
    for path in sorted(ATTACKS_DIR.glob("attacks_*.py")):
        name = f"tests.robustness.{path.stem}"
        module = importlib.import_module(name)
        attacks = getattr(module, "ATTACKS", None)
        if attacks is None:
            print(f"{path.name}: no ATTACKS list, skipped", file=sys.stderr)
            continue
        outcome = getattr(module, "OUTCOME", {})
        out.append((path.stem, [(a, outcome.get(a.name, ("refused", ""))[0]) for a in attacks]))
    return out


#: commands whose answer to a hostile store may be a report rather than a refusal (a 2**62
#: array that holds nothing is "all fill value": a right answer, at once)
ANSWERING = frozenset({"validate", "inspect", "diff"})


def _handled(argv: tuple[str, ...], run: object) -> bool:
    """Refused (one ``ptd: error:`` line, a non-zero exit, no traceback), or answered by a
    report (``validate``, ``inspect``, ``diff``: exit 0/1, no error line, no traceback; the
    tests check that the answer is right), or, for ``validate``, the problem reported with
    exit 2."""
    code, stderr = run.returncode, run.stderr  # type: ignore[attr-defined]
    if "Traceback" in stderr or code < 0:
        return False
    if code in (0, 1) and argv and argv[0] in ANSWERING and "ptd: error:" not in stderr:
        return True  # an answer (a report, a diff): whether it is the right one, the tests say
    errors = [ln for ln in stderr.splitlines() if ln.startswith("ptd: error:")]
    if len(errors) == 1:
        return True
    return "validate" in argv and code in (1, 2)


def _answered(run: object) -> bool:
    """An attack whose right outcome is not a refusal (an HDF5 link out of the file is a
    skipped key, a link inside the store works): the command ran to its end, no traceback."""
    code, stderr = run.returncode, run.stderr  # type: ignore[attr-defined]
    return code in (0, 1) and "Traceback" not in stderr and "ptd: error:" not in stderr


def _state(path: Path) -> tuple[int, int, bytes] | None:
    """What a watched path holds (None when absent): it must be the same after every command,
    so a marker never appears and a file outside the store is neither read into an output
    nor written (its bytes and mtime)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    data = path.read_bytes() if path.is_file() and st.st_size <= 1 << 20 else b""
    return (st.st_size, st.st_mtime_ns, data)


def _median_run(kit: object, argv: tuple[str, ...], cwd: Path, repeat: int) -> object:
    runs = [kit.run_ptd(argv, cwd=cwd, fresh=True) for _ in range(repeat)]  # type: ignore[attr-defined]
    runs.sort(key=lambda r: r.seconds)
    return runs[len(runs) // 2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("-k", default="", help="only attacks whose name holds this text")
    ap.add_argument("--repeat", type=int, default=1, help="runs per command (the median shown)")
    ap.add_argument("--baseline", type=int, default=5, help="runs of the idle `ptd --version`")
    ap.add_argument("--dir", default=None, help="where the temporary stores go")
    args = ap.parse_args()

    sys.path.insert(0, str(ROOT))
    from tests.robustness import attack_kit as kit

    with tempfile.TemporaryDirectory(prefix="ptd-bench-attacks-", dir=args.dir) as d:
        idle = [kit.run_ptd(["--version"], cwd=Path(d), fresh=True) for _ in range(args.baseline)]
    base_s = statistics.median(r.seconds for r in idle)
    base_rss = int(statistics.median(r.peak_rss for r in idle))
    print(
        f"idle baseline `python -m ptd --version` (median of {args.baseline}, cold process start "
        f"included): {base_s:.2f} s, peak RSS {base_rss / 2**20:.0f} MB"
    )
    print(
        f"bar: < {MAX_EXTRA_SECONDS:.0f} s and < {MAX_EXTRA_BYTES >> 20} MB beyond the baseline, "
        "refused or reported, marker absent; every run is a fresh process (cold start included)"
    )
    header = (
        f"{'attack':<34} {'command':<44} {'exit':>4} {'s':>6} {'+s':>6} "
        f"{'RSS MB':>7} {'+MB':>6}  verdict"
    )
    rows: list[Row] = []
    for module, attacks in _modules():
        print(f"\n== {module} ({len(attacks)} attacks)")
        print(header)
        for attack, expected in attacks:
            if args.k not in attack.name:
                continue
            d = tempfile.mkdtemp(prefix="ptd-attack-", dir=args.dir)
            try:
                work = Path(d)
                store = attack.make(work)
                before = {p: _state(p) for p in attack.watch(work)}
                for command in attack.commands:
                    argv = kit.expand(command, store, work)
                    run = _median_run(kit, argv, work, args.repeat)
                    clean = all(_state(p) == before[p] for p in before)
                    row = Row(
                        attack.name,
                        " ".join(command),
                        run.returncode,
                        run.seconds,
                        run.peak_rss,
                        _handled(argv, run) or (expected != "refused" and _answered(run)),
                        clean,
                        run.hung,
                    )
                    rows.append(row)
                    shown = row.command if len(row.command) <= 44 else row.command[:41] + "..."
                    print(
                        f"{row.attack[:34]:<34} {shown:<44} {row.code:>4} {row.seconds:>6.2f} "
                        f"{row.seconds - base_s:>+6.2f} {row.rss / 2**20:>7.0f} "
                        f"{(row.rss - base_rss) / 2**20:>+6.0f}  {row.verdict(base_s, base_rss)}"
                    )
            finally:
                # (not shutil.rmtree: it recurses once per level, and some stores nest 1,000+)
                subprocess.run(["rm", "-rf", d], check=False)
    failed = [r for r in rows if r.verdict(base_s, base_rss) != "PASS"]
    print(f"\n{len(rows)} commands, {len(rows) - len(failed)} PASS, {len(failed)} FAIL")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
