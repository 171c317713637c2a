"""The README's command-line tour: real output of ``ptd`` on the built-in example dataset.

``python tools/readme_tour.py`` prints the tour; ``--write`` puts it into README.md between
the ``<!-- tour:start -->`` and ``<!-- tour:end -->`` markers; ``--check`` exits 1 when the
README's copy differs from what the commands print now (``tests/cli/test_readme_tour.py``
runs it, so the tour cannot drift from the tool).

Each command runs as a user runs it (``python -m ptd`` in a subprocess, stdout piped,
``COLUMNS=80``, no colour) in a temporary directory holding ``demo.h5`` (the dataset
``ptd demo`` builds). Durations and rates are the only figures that change from run to run:
they are shown as ``…``.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
START, END = "<!-- tour:start -->", "<!-- tour:end -->"

#: the commands of the tour, in order (run in the dataset's directory)
COMMANDS = [
    ["inspect", "demo.h5"],
    ["convert", "demo.h5", "demo.zarr", "--compression", "zstd"],
    ["validate", "demo.zarr", "--batch-size", "32"],
    ["diff", "demo.h5", "demo.zarr"],
    ["inspect", "demo.zarr", "--stats", "--depth", "0"],
]

_TIMES = [
    (re.compile(r"\d+(\.\d+)? s \([^)]*/s\)"), "… s (… /s)"),
    (re.compile(r"\b\d+\.\d+ s\b"), "… s"),
]


def _masked(text: str) -> str:
    for pattern, repl in _TIMES:
        text = pattern.sub(repl, text)
    return text


def tour() -> str:
    """The tour as Markdown (one fenced block of commands and their output)."""
    env = {
        **os.environ,
        "COLUMNS": "80",
        "NO_COLOR": "1",
        "TERM": "dumb",
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
    }
    env.pop("FORCE_COLOR", None)
    env.pop("PTD_TABLE", None)
    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ptd-tour-") as d:
        subprocess.run(
            [
                sys.executable,
                "-c",
                "from ptd_cli.commands.demo import make_example; make_example('demo.h5')",
            ],
            cwd=d,
            env=env,
            check=True,
        )
        for args in COMMANDS:
            run = subprocess.run(
                [sys.executable, "-m", "ptd", *args],
                cwd=d,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            lines.append("$ ptd " + " ".join(args))
            out = (run.stdout + run.stderr).rstrip("\n")
            lines.extend(_masked(ln).rstrip() for ln in out.splitlines())
            if run.returncode:
                lines.append(f"(exit status {run.returncode})")
            lines.append("")
    return "```console\n" + "\n".join(lines).rstrip("\n") + "\n```"


def readme_copy(text: str) -> str | None:
    """The tour block of a README's text, or None without the markers."""
    if START not in text or END not in text:
        return None
    return text.split(START, 1)[1].split(END, 1)[0].strip("\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="update README.md")
    parser.add_argument("--check", action="store_true", help="exit 1 if README.md differs")
    args = parser.parse_args()
    now = tour()
    text = README.read_text(encoding="utf-8")
    if args.write:
        head, rest = text.split(START, 1)
        tail = rest.split(END, 1)[1]
        README.write_text(f"{head}{START}\n{now}\n{END}{tail}", encoding="utf-8")
        return 0
    if args.check:
        if readme_copy(text) != now:
            print("README.md's tour is out of date: python tools/readme_tour.py --write")
            return 1
        return 0
    print(now)
    return 0


if __name__ == "__main__":
    sys.exit(main())
