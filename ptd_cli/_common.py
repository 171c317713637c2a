"""What every command shares: exit codes, the one-line error handling, consoles, formatting.

Only typer, rich and the standard library are imported here; the :mod:`ptd` library is imported
inside the commands (and by :func:`redact`, once a text holds a URL).

Nothing the command line prints shows a URL's secrets: the consoles, JSON documents, error
lines, warnings and log lines all pass through :func:`ptd.errors.redact` (user-info and
secret-looking query values become ``***``), and an error line also hides the secrets of the
paths the command was given wherever they appear (:func:`redacted_message`).
"""

from __future__ import annotations

import enum
import json
import os
import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any, Literal, cast

import typer
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = [
    "EXPAND_HELP",
    "STORAGE_OPTION_HELP",
    "TABLE_ENV",
    "Bare",
    "Column",
    "ExitCode",
    "err_console",
    "errors_handled",
    "fail",
    "format_ratio",
    "format_shape",
    "human_bytes",
    "is_debug",
    "listing_layout",
    "message_of",
    "out_console",
    "parse_batch_size",
    "parse_storage_options",
    "plural",
    "print_error",
    "print_json",
    "print_listing",
    "redact",
    "redacted_message",
]

#: the help of every command's ``-O/--storage-option``
FOLLOW_VIRTUAL_HELP = (
    "HDF5: read virtual datasets whose source files all lie inside the directory of the file "
    "named (others, and external storage, stay refused, naming the source)."
)
STORAGE_OPTION_HELP = (
    "fsspec option for URLs (s3://, gs://...), KEY=VALUE, repeatable: "
    "-O endpoint_url=http://host:9000 -O key=ID -O secret=KEY, or -O anon=true. "
    "VALUE is read as JSON when it parses (true, 3, {...}), else as text."
)


#: the help of ``--expand`` (inspect, validate, convert)
EXPAND_HELP = (
    "List every alike sibling group (demo_0 ... demo_199) and every finding one by one; "
    "text output folds them (JSON always lists all)."
)


#: ``--quiet``: no progress bars (set once by the ``ptd`` group's options)
QUIET = False
#: whether stdout's reader has gone (see :func:`stdout_closed`)
STDOUT_CLOSED = False


class Terminated(KeyboardInterrupt):
    """SIGTERM, delivered as an interrupt so every command's Ctrl-C clean-up runs (exit 143)."""


class ExitCode(enum.IntEnum):
    """The exit status of every ``ptd`` command."""

    OK = 0  #: success (``validate``: every store is valid)
    PROBLEMS = 1  #: ``validate`` found problems
    BAD_INPUT = 2  #: unreadable input, a usage error, or a failure (one line on stderr)
    INTERRUPTED = 130  #: Ctrl-C (128 + SIGINT)
    TERMINATED = 143  #: SIGTERM (128 + 15), e.g. a cancelled CI job


def is_debug(ctx: typer.Context | None) -> bool:
    obj = ctx.find_root().obj if ctx is not None else None
    return bool(getattr(obj, "debug", False))


def stdout_closed() -> None:
    """The reader of stdout went away (``ptd inspect big.h5 | head -1``): point stdout at
    /dev/null, so the command ends as it would have, quietly, with the exit status it decides
    (Python's recipe for SIGPIPE; nothing is printed on stderr)."""
    global STDOUT_CLOSED
    STDOUT_CLOSED = True
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def redact(text: str) -> str:
    """``text`` with every URL's user-info and secret query values hidden
    (:func:`ptd.errors.redact`, imported only once a text holds ``://``)."""
    if "://" not in text:
        return text
    from ptd.errors import redact as hide

    return hide(text)


class RedactingFile:
    """A text stream that hides URLs' secrets in what is written to it (see the module doc);
    the rest (``isatty``, ``fileno``, ``encoding``...) is the wrapped stream's."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def redacting(stream: IO[str]) -> IO[str]:
    """``stream`` behind a :class:`RedactingFile` (typed as the stream it stands for)."""
    return cast("IO[str]", RedactingFile(stream))


class _Console(Console):
    """Rich's console, except that a closed pipe ends nothing (Rich exits with status 1)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        stdout_closed()


def out_console() -> Console:
    """Rich console on stdout (created per call, so it follows a redirected sys.stdout).

    Lines are never wrapped nor cropped by ptd (``soft_wrap``): one line of output per line of
    text, whole, at any width; a terminal folds long ones itself. Listings go through
    :func:`print_listing`, which picks a table only where it fits.
    """
    return _Console(
        file=redacting(sys.stdout), highlight=False, soft_wrap=True, quiet=STDOUT_CLOSED
    )


# ------------------------------------------------------------------------------ listings
#: the environment variable that forces a listing layout: ``table``, ``lines`` or ``auto``
TABLE_ENV = "PTD_TABLE"
#: a table's key column may take at most this share of the width, else the lines layout
KEY_SHARE = 0.5
#: ... but always this many cells
KEY_MIN = 40
#: the gap between two table columns (and two fields of a line)
GAP = "  "


@dataclass
class Column:
    """A column of a listing: its table header, how the table justifies it, and the label of
    its field in the lines layout (``shape=[4, 3]``; ``None``: the value alone)."""

    header: str
    label: str | None = None
    justify: Literal["left", "right"] = "left"


class Bare(Text):
    """A cell shown without its column's label in the lines layout (it names itself, e.g.
    ``batch [64]``)."""


def _forced_layout() -> str:
    value = os.environ.get(TABLE_ENV, "").strip().lower()
    return value if value in ("table", "lines") else "auto"


def _known_width(console: Console) -> int | None:
    """The width a table may take: ``COLUMNS``, else the terminal's; ``None`` when stdout is
    not a terminal and ``COLUMNS`` is not set (a pipe, a file, a CI log)."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return console.width if console.is_terminal else None


def _plain(cell: Text | str) -> Text:
    return cell if isinstance(cell, Text) else Text(str(cell))


def _table_width(columns: Sequence[Column], rows: Sequence[Sequence[Text | str]]) -> list[int]:
    widths = [cell_len(c.header) for c in columns]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], _plain(cell).cell_len)
    return widths


def listing_layout(
    console: Console, columns: Sequence[Column], rows: Sequence[Sequence[Text | str]]
) -> str:
    """``"table"`` or ``"lines"`` for this listing (see :func:`print_listing`)."""
    forced = _forced_layout()
    if forced != "auto":
        return forced
    width = _known_width(console)
    if width is None or not rows:
        return "lines" if rows else "table"
    widths = _table_width(columns, rows)
    total = sum(widths) + len(GAP) * (len(widths) - 1)
    key_cap = max(KEY_MIN, int(width * KEY_SHARE))
    return "table" if total <= width and widths[0] <= key_cap else "lines"


def print_listing(
    console: Console,
    columns: Sequence[Column],
    rows: Sequence[Sequence[Text | str]],
    *,
    line_keys: Sequence[Text | str] | None = None,
) -> None:
    """Print ``rows`` (the first cell of each is its key) as a table, or one line per row.

    The rule (README, "Output at any width"): a table when stdout is a terminal or ``COLUMNS``
    is set, the table at its natural width fits that width, and its key column takes at most
    half of it (or 40 cells); otherwise one line per row: the whole key (``line_keys``, e.g.
    the full path where the table shows a tree), then each non-empty field, ``label=value``,
    two spaces apart. ``PTD_TABLE=table`` or ``lines`` forces one (a forced table is drawn at
    its natural width, never squeezed). Either way no key nor value is cut, and every column
    is there.
    """
    layout = listing_layout(console, columns, rows)
    if layout == "lines":
        keys = line_keys if line_keys is not None else [row[0] for row in rows]
        for key, row in zip(keys, rows, strict=True):
            line = _plain(key).copy()
            for col, cell in zip(columns[1:], row[1:], strict=True):
                text = _plain(cell)
                if not text.plain.strip():
                    continue
                line.append(GAP)
                if col.label and not isinstance(cell, Bare):
                    line.append(f"{col.label}=", style="dim")
                line.append_text(text)
            console.print(line)
        return
    widths = _table_width(columns, rows)
    table = Table(
        box=None,
        pad_edge=False,
        show_edge=False,
        header_style="bold dim",
        padding=(0, len(GAP) // 2),
        collapse_padding=False,
    )
    for col in columns:
        table.add_column(col.header, justify=col.justify, no_wrap=True)
    for row in rows:
        table.add_row(*row)
    natural = sum(widths) + len(GAP) * (len(widths) - 1)
    saved = console.width
    if natural > saved:
        console.width = natural  # a forced table: never squeezed
    try:
        console.print(table, crop=False)
    finally:
        console.width = saved


def err_console() -> Console:
    return Console(file=redacting(sys.stderr), highlight=False, soft_wrap=True)


def print_json(doc: Any) -> None:
    """One JSON document on stdout (never through Rich: no wrapping, no markup), URLs'
    secrets hidden."""
    try:
        sys.stdout.write(redact(json.dumps(doc, indent=2, allow_nan=True)) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        stdout_closed()


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


#: library arguments whose command-line option is not ``--`` + the name with dashes
_FLAGS = {"existsok": "--overwrite", "storage_options": "-O KEY=VALUE"}


def cli_option(option: Any) -> str:
    """How the command line spells a library argument named as a fix in an error
    (:class:`ptd.errors.Option`): ``overwrite`` -> ``--overwrite``, ``to="zarr"`` ->
    ``--to zarr``, ``batch_size=[4]`` -> ``--batch-size 4``.

    >>> from ptd.errors import Option
    >>> cli_option(Option("skip_unsupported")), cli_option(Option("to", "zarr"))
    ('--skip-unsupported', '--to zarr')
    >>> cli_option(Option("batch_size", [4, 2])), cli_option(Option("chunks", None))
    ('--batch-size 4,2', '--chunks')
    """
    flag = _FLAGS.get(option.name, "--" + option.name.replace("_", "-"))
    value = option.value
    if value is True or value is None or " " in flag:
        return flag
    if value is False:
        return "--no-" + flag[2:]
    if isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    return f"{flag} {value}"


def redacted_message(text: str, *given: str | None) -> str:
    """``text`` with URLs' secrets hidden, and the secrets of the locations a command was
    ``given`` hidden wherever they appear (a library may echo a URL without its scheme)."""
    from ptd.storage.remote import scrub

    return scrub(text, *(word for g in given if g for word in g.split()))


def message_of(err: BaseException, path: str | None = None) -> str:
    """A one-line description of ``err`` that names the path involved (the library's
    arguments named as fixes spelled as this command line's options), URLs' secrets
    hidden."""
    render = getattr(err, "render", None)
    msg = render(cli_option) if callable(render) else str(err)
    if isinstance(err, KeyError) and len(err.args) == 1 and not msg.startswith("key "):
        msg = str(err.args[0])
    if isinstance(err, OSError) and not msg.strip(" '") and err.strerror:
        msg = err.strerror
    if isinstance(err, OSError) and getattr(err, "filename", None) and str(err.filename) not in msg:
        msg = f"{err.filename}: {msg}"
    msg = redacted_message(_one_line(msg), path) or type(err).__name__
    named = getattr(err, "path", None)  # a ptd error names its store in this field
    shown = redact(path) if path else None
    if shown and shown not in msg and not (isinstance(named, str) and named in msg):
        msg = f"{shown}: {msg}"
    return msg


def print_error(message: str) -> None:
    """``ptd: error: message`` as one line on stderr (URLs' secrets hidden)."""
    err_console().print(
        f"ptd: error: {_one_line(redact(message))}", markup=False, highlight=False, soft_wrap=True
    )


def fail(message: str, code: ExitCode = ExitCode.BAD_INPUT) -> typer.Exit:
    """Print ``ptd: error: message`` on stderr; return the Exit to raise."""
    print_error(message)
    return typer.Exit(int(code))


def interrupted_line(err: BaseException, path: str | None, output: str | None) -> str:
    """The one line after Ctrl-C or SIGTERM: the phase the job stopped in (the library's
    ``Interrupted.phase``) and, for a job writing ``output``, whether its partial output is
    gone (checked by the library: ``Interrupted.left_behind``).

    >>> from ptd.errors import Interrupted
    >>> err = Interrupted(2, phase="copying")
    >>> interrupted_line(err, "in.h5", "out.zarr")
    'ptd: interrupted while copying: out.zarr was not written (nothing was left behind)'
    >>> err.left_behind = ("/d/.ptd-tmp-1-ab.out.zarr",)
    >>> interrupted_line(err, "in.h5", "out.zarr")
    'ptd: interrupted while copying: out.zarr was not written; could not remove /d/.ptd-tmp-1-ab.out.zarr'
    >>> interrupted_line(Interrupted(15, phase="reading"), "in.h5", None)
    'ptd: interrupted while reading (in.h5)'
    """
    phase = getattr(err, "phase", None)
    line = "ptd: interrupted" + (f" while {phase}" if phase else "")
    path = redact(path) if path else path
    shown = redact(output) if output else output
    if output is None:
        return line + (f" ({path})" if path else "")
    left = tuple(getattr(err, "left_behind", ()) or ())
    replaced = os.path.lexists(output) and "://" not in output
    what = (
        f"{shown} was not replaced (its old content is kept)"
        if replaced
        else (f"{shown} was not written")
    )
    if left:
        return f"{line}: {what}; could not remove {', '.join(left)}"
    return f"{line}: {what} (nothing was left behind)"


@contextmanager
def errors_handled(
    ctx: typer.Context | None, path: str | None = None, *, output: str | None = None
) -> Iterator[None]:
    """Turn every failure into ONE line on stderr and an exit code (a traceback with --debug).

    ``path``: named in the message when the error does not name it already. ``output``: what
    the job writes, named after ``ptd: interrupted`` on Ctrl-C (:func:`interrupted_line`).
    """
    debug = is_debug(ctx)
    try:
        yield
    except (typer.Exit, typer.Abort):
        raise
    except KeyboardInterrupt as err:
        if debug:
            traceback.print_exc(file=sys.stderr)
        by_term = isinstance(err, Terminated) or getattr(err, "signum", None) == 15
        code = ExitCode.TERMINATED if by_term else ExitCode.INTERRUPTED
        err_console().print(
            redacted_message(interrupted_line(err, path, output), path, output),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(int(code)) from None
    except Exception as err:  # noqa: BLE001 - the CLI's last line of defence
        if debug:
            traceback.print_exc(file=sys.stderr)
        from_ptd = type(err).__module__.startswith("ptd")
        msg = message_of(err, path)
        if not from_ptd and not isinstance(err, (OSError, ValueError)):
            msg = f"internal error ({type(err).__name__}): {msg}; run `ptd --debug ...` for the traceback"
        raise fail(redacted_message(msg, path, output)) from None


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


def range_dims(shapes: Sequence[Sequence[int] | None]) -> list[str] | None:
    """Several shapes as one, each dim as text: ``"200–219"`` where it differs (None where
    the shapes do not line up: some missing, or of different lengths)."""
    from ptd.report.summary import dim_ranges

    ranges = dim_ranges(shapes)
    if ranges is None:
        return None
    return [str(a) if a == b else f"{a}–{b}" for a, b in ranges]


def shape_range(shapes: Sequence[Sequence[int] | None]) -> str | None:
    """``[200–219, 100]``: several shapes as one (see :func:`range_dims`), or None."""
    dims = range_dims(shapes)
    return None if dims is None else "[" + ", ".join(dims) + "]"


def format_shape(shape: Sequence[int | str] | None, batch_dims: int = 0) -> Text:
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
