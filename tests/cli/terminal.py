"""What a terminal shows after a command ran in it: the command runs in a real pseudo-terminal
(``os.openpty``), and the bytes it wrote are replayed on a small screen model that knows the
control sequences Rich uses for live displays (carriage return, cursor up/down/column, erase in
line and display; colours ignored). A progress bar left behind is on the screen; one erased is
not."""

from __future__ import annotations

import fcntl
import os
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
_CSI = re.compile(r"\x1b\[([?0-9;]*)([A-Za-z])")
_OSC = re.compile(r"\x1b\][^\x07\x1b]*(\x07|\x1b\\)")


def screen(data: str, width: int = 120) -> list[str]:
    """The lines a terminal of ``width`` columns shows after ``data`` (scrollback included),
    trailing blanks stripped."""
    lines: list[list[str]] = [[]]
    row = col = 0
    data = _OSC.sub("", data)
    i = 0
    while i < len(data):
        ch = data[i]
        if ch == "\x1b":
            m = _CSI.match(data, i)
            if m is None:  # a two-character escape (charset...): skipped
                i += 2
                continue
            params, op = m.group(1), m.group(2)
            nums = [int(p) for p in params.lstrip("?").split(";") if p.isdigit()]
            n = nums[0] if nums else None
            if op == "A":
                row = max(0, row - (n or 1))
            elif op == "B":
                row += n or 1
            elif op == "C":
                col += n or 1
            elif op == "D":
                col = max(0, col - (n or 1))
            elif op == "G":
                col = max(0, (n or 1) - 1)
            elif op == "K":
                while len(lines) <= row:
                    lines.append([])
                line = lines[row]
                if (n or 0) == 0:
                    del line[col:]
                elif n == 1:
                    line[: col + 1] = [" "] * min(len(line), col + 1)
                else:
                    line.clear()
            elif op == "J" and (n or 0) in (0, 2):
                del lines[row + 1 :]
                if row < len(lines):
                    del lines[row][col:]
            i = m.end()
            continue
        if ch == "\r":
            col = 0
        elif ch == "\n":
            row += 1
            col = 0
        elif ch == "\b":
            col = max(0, col - 1)
        elif ch >= " ":
            if col >= width:
                row, col = row + 1, 0
            while len(lines) <= row:
                lines.append([])
            line = lines[row]
            line.extend(" " * (col - len(line)))
            if col < len(line):
                line[col] = ch
            else:
                line.append(ch)
            col += 1
        while len(lines) <= row:
            lines.append([])
        i += 1
    return ["".join(x).rstrip() for x in lines]


def run_in_terminal(args: list[str], cwd: Path, timeout: float = 120) -> tuple[int, list[str]]:
    """Run ``python -m ptd ARGS`` with stdin, stdout and stderr on one pseudo-terminal of 120
    columns; its exit status and what the terminal shows afterwards."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "PTD_TABLE")}
    env.update(PYTHONPATH=str(ROOT), TERM="xterm-256color")
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ptd", *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        cwd=cwd,
        env=env,
        close_fds=True,
    )
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the other side closed (EIO on Linux)
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    code = proc.wait(timeout=timeout)
    return code, screen(b"".join(chunks).decode("utf-8", "replace"))
