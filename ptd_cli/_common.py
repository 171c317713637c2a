"""What every command shares: exit codes, the one-line error handling, consoles, formatting.

Only typer, rich and the standard library are imported here; the :mod:`ptd` library is imported
inside the commands.
"""

from __future__ import annotations

import enum
import json
import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import typer
from rich.console import Console
from rich.text import Text

__all__ = [
    "ExitCode",
    "errors_handled",
    "fail",
    "print_error",
    "message_of",
    "is_debug",
    "out_console",
    "err_console",
    "print_json",
    "human_bytes",
    "plural",
    "format_shape",
    "format_ratio",
    "parse_batch_size",
    "parse_storage_options",
    "STORAGE_OPTION_HELP",
]

#: the help of every command's ``-O/--storage-option``
STORAGE_OPTION_HELP = (
    "fsspec option for URLs (s3://, gs://...), KEY=VALUE, repeatable: "
    "-O endpoint_url=http://host:9000 -O key=ID -O secret=KEY, or -O anon=true. "
    "VALUE is read as JSON when it parses (true, 3, {...}), else as text."
)


class ExitCode(enum.IntEnum):
    """The exit status of every ``ptd`` command."""

    OK = 0  #: success (``validate``: every store is valid)
    PROBLEMS = 1  #: ``validate`` found problems
    BAD_INPUT = 2  #: unreadable input, a usage error, or a failure (one line on stderr)
    INTERRUPTED = 130  #: Ctrl-C (128 + SIGINT)


def is_debug(ctx: typer.Context | None) -> bool:
    obj = ctx.find_root().obj if ctx is not None else None
    return bool(getattr(obj, "debug", False))


def out_console() -> Console:
    """Rich console on stdout (created per call, so it follows a redirected sys.stdout)."""
    return Console(file=sys.stdout, highlight=False, soft_wrap=False)


def err_console() -> Console:
    return Console(file=sys.stderr, highlight=False, soft_wrap=True)


def print_json(doc: Any) -> None:
    """One JSON document on stdout (never through Rich: no wrapping, no markup)."""
    sys.stdout.write(json.dumps(doc, indent=2, allow_nan=True) + "\n")
    sys.stdout.flush()


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def message_of(err: BaseException, path: str | None = None) -> str:
    """A one-line description of ``err`` that names the path involved."""
    msg = str(err)
    if isinstance(err, KeyError) and len(err.args) == 1 and not msg.startswith("key "):
        msg = str(err.args[0])
    if isinstance(err, OSError) and not msg.strip(" '") and err.strerror:
        msg = err.strerror
    if isinstance(err, OSError) and getattr(err, "filename", None) and str(err.filename) not in msg:
        msg = f"{err.filename}: {msg}"
    msg = _one_line(msg) or type(err).__name__
    if path and path not in msg:
        msg = f"{path}: {msg}"
    return msg


def print_error(message: str) -> None:
    """``ptd: error: message`` as one line on stderr."""
    err_console().print(
        f"ptd: error: {_one_line(message)}", markup=False, highlight=False, soft_wrap=True
    )


def fail(message: str, code: ExitCode = ExitCode.BAD_INPUT) -> typer.Exit:
    """Print ``ptd: error: message`` on stderr; return the Exit to raise."""
    print_error(message)
    return typer.Exit(int(code))


@contextmanager
def errors_handled(
    ctx: typer.Context | None, path: str | None = None, *, interrupted: str | None = None
) -> Iterator[None]:
    """Turn every failure into ONE line on stderr and an exit code (a traceback with --debug).

    ``path``: named in the message when the error does not name it already. ``interrupted``:
    what to say after ``ptd: interrupted`` on Ctrl-C.
    """
    debug = is_debug(ctx)
    try:
        yield
    except (typer.Exit, typer.Abort):
        raise
    except KeyboardInterrupt:
        if debug:
            traceback.print_exc(file=sys.stderr)
        err_console().print(
            "ptd: interrupted"
            + (f": {interrupted}" if interrupted else (f" ({path})" if path else "")),
            markup=False,
            soft_wrap=True,
        )
        raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
    except Exception as err:  # noqa: BLE001 - the CLI's last line of defence
        if debug:
            traceback.print_exc(file=sys.stderr)
        from_ptd = type(err).__module__.startswith("ptd")
        msg = message_of(err, path)
        if not from_ptd and not isinstance(err, (OSError, ValueError)):
            msg = f"internal error ({type(err).__name__}): {msg}; run `ptd --debug ...` for the traceback"
        raise fail(msg) from None


# ------------------------------------------------------------------------------ formatting
def human_bytes(n: int | float | None) -> str:
    if n is None:
        return "?"
    n = float(n)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{int(n)} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"  # pragma: no cover


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 group``, ``2 groups``."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


def format_ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.2f}x"


def format_shape(shape: Sequence[int] | None, batch_dims: int = 0) -> Text:
    """``[1000 ¦ 64]``: the batch dims (bold cyan), then the others."""
    out = Text()
    if shape is None:
        return out
    dims = [str(d) for d in shape]
    if batch_dims <= 0:
        return Text("[" + ", ".join(dims) + "]")
    out.append("[")
    out.append(", ".join(dims[:batch_dims]), style="bold cyan")
    out.append(" ¦")
    if dims[batch_dims:]:
        out.append(" " + ", ".join(dims[batch_dims:]))
    out.append("]")
    return out


def parse_batch_size(text: str | None) -> list[int] | None:
    """``"10"`` / ``"10,4"`` / ``"[10, 4]"`` / ``""`` (no batch dims) -> a list of ints."""
    if text is None:
        return None
    t = text.strip().strip("[]()").strip()
    if not t:
        return []
    try:
        out = [int(x) for x in t.replace(" ", ",").split(",") if x]
    except ValueError:
        raise typer.BadParameter(
            f"expected N[,M...] (non-negative integers), got {text!r}"
        ) from None
    if any(n < 0 for n in out):
        raise typer.BadParameter(f"batch dims must be >= 0, got {text!r}")
    return out


def parse_storage_options(items: Sequence[str] | None) -> dict[str, Any] | None:
    """``["anon=true", "endpoint_url=http://h:9000"]`` -> ``{"anon": True, "endpoint_url": ...}``
    (None when there are none). A bad item prints one error line and exits with status 2."""
    if not items:
        return None
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise fail(f"--storage-option: expected KEY=VALUE, got {item!r}")
        try:
            value: Any = json.loads(text)
        except ValueError:
            value = text
        out[key] = value
    return out
