"""The ``ptd`` Typer application (global options only) and how it runs as a process.

Commands live one per module under :mod:`ptd_cli.commands` and are registered on :data:`app`.
This module imports only typer and rich (plus the standard library): the :mod:`ptd` library is
imported lazily inside commands, and by :func:`get_version` only when metadata is missing;
:mod:`importlib.metadata` (tens of milliseconds) only for ``--version``.

The console script, ``python -m ptd`` and ``python -m ptd_cli`` all call :func:`run`, the one
place that turns what click and the operating system do into what a
command-line user expects:

* **usage errors** (an unknown option or command, a bad value) are one ``ptd: error: ...``
  line on stderr and exit status 2, never a Rich box;
* **global options** (``--debug``, ``--quiet``, ``--no-color``) are accepted before or after
  the subcommand (:func:`hoist_global_options`);
* **a closed stdout** (``ptd inspect big.h5 | head -1``) ends the command quietly with the exit
  status it had already decided (0, or 1 when ``validate`` found problems): nothing on stderr;
* **SIGTERM** (what CI runners send on cancel) is turned into the same interrupt as Ctrl-C, so
  every command cleans up as it does for Ctrl-C; the exit status is 143 (128 + 15) instead
  of 130. During a long job (:mod:`ptd.storage.cancel`) the signal asks the job to stop at its
  next safe point; a **second** signal before it has stopped exits at once, naming the
  temporary output it leaves behind (:func:`ptd.storage.publish.in_use`);
* **placeholders** in ``--help`` say what a value is (``PATH``, ``N``, ``CODE``); flags show
  none (:func:`cli_command`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import typer

from ptd_cli._common import Terminated, stdout_closed
from ptd_cli.completion import HELP as COMPLETION_HELP
from ptd_cli.completion import CompletionError, completion_request, run_completion

__all__ = ["CliState", "app", "cli_command", "get_version", "hoist_global_options", "run"]

app = typer.Typer(
    name="ptd",
    help="Inspect, validate and convert persistent tensor dicts (HDF5 files and Zarr v3 stores).",
    no_args_is_help=True,
    rich_markup_mode="rich",
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@dataclass
class CliState:
    """Options shared by every command, kept in ``ctx.obj``."""

    #: show full tracebacks on errors instead of a one-line message
    debug: bool = False
    #: no progress bars, no warnings (errors and results still print)
    quiet: bool = False
    #: each phase of a long job on stderr (``ptd: planning ...``)
    verbose: bool = False


def get_version() -> str:
    """The installed distribution's version, or ``ptd.__version__`` when not installed."""
    from importlib import metadata

    try:
        return metadata.version("ptd")
    except metadata.PackageNotFoundError:
        import ptd  # lazily: only when the package metadata is missing (e.g. a bare checkout)

        return str(ptd.__version__)


def version_lines() -> list[str]:
    """``ptd 0.1.0`` then one line per library that reads or writes the data (a bug report's
    first lines)."""
    from ptd.storage.versions import versions

    found = versions()
    width = max(len(k) for k in found)
    return [f"ptd {found['ptd']}"] + [
        f"  {name:<{width}}  {value or 'not installed'}"
        for name, value in found.items()
        if name != "ptd"
    ]


def _version_callback(value: bool) -> None:
    if value:
        typer.echo("\n".join(version_lines()))
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    debug: bool = typer.Option(
        False,
        "--debug",
        help="Show full tracebacks on errors (before or after the command).",
    ),
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="No progress bars nor warnings (before or after the command)."
    ),
    verbose: bool = typer.Option(
        False,
        "--verbose",
        "-v",
        help="Say on stderr what a long job is doing: planning, copying, publishing, reading.",
    ),
    no_color: bool = typer.Option(
        False, "--no-color", help="No colours (as NO_COLOR=1; before or after the command)."
    ),
    version: bool = typer.Option(
        False,
        "--version",
        callback=_version_callback,
        is_eager=True,
        help="Show the version and exit.",
    ),
) -> None:
    """[bold]ptd[/bold]: batched torch tensors stored in HDF5 files and Zarr v3 stores."""
    from ptd_cli import _common

    ctx.obj = CliState(debug=debug, quiet=quiet, verbose=verbose)
    _common.QUIET = quiet
    _phases_on_stderr(verbose or debug)
    if no_color:
        os.environ["NO_COLOR"] = "1"
    _one_line_warnings(quiet)


def _phases_on_stderr(shown: bool) -> None:
    """The library's INFO log (each phase of a long job) as ``ptd: ...`` lines on stderr,
    when ``shown`` (``--verbose``/``--debug``); one handler per process, writing to whatever
    ``sys.stderr`` is when a line is logged (commands may run many times in one process)."""
    logger = logging.getLogger("ptd")
    if not any(isinstance(h, _StderrLines) for h in logger.handlers):
        logger.addHandler(_StderrLines())
    logger.setLevel(logging.INFO if shown else logging.WARNING)


class _StderrLines(logging.Handler):
    """``ptd: message`` on the current ``sys.stderr``."""

    def emit(self, record: Any) -> None:
        from ptd_cli._common import redact

        try:
            sys.stderr.write(f"ptd: {redact(record.getMessage())}\n")
            sys.stderr.flush()
        except (OSError, ValueError):  # a closed stderr: nothing to tell
            pass


def _one_line_warnings(quiet: bool = False) -> None:
    """Warnings as one ``ptd: warning: ...`` line on stderr (no source line); zarr's notes
    about its own data types without a v3 specification are not shown (none with
    ``quiet``)."""
    import warnings

    if quiet:
        warnings.simplefilter("ignore")
        return

    warnings.filterwarnings("ignore", message=".*does not have a Zarr V3 specification")

    def one_line(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        line: str | None = None,
    ) -> str:
        from ptd_cli._common import redact

        return f"ptd: warning: {redact(str(message))}\n"

    warnings.formatwarning = one_line


# the commands, one module each under ptd_cli/commands (they import the library lazily)
from ptd_cli.commands import register as _register  # noqa: E402

_register(app)


@app.command("version", help="Show the versions of ptd and of the libraries it uses.")
def version(
    json_: bool = typer.Option(False, "--json", help="Print them as a JSON object."),
) -> None:
    if json_:
        import json

        from ptd.storage.versions import versions

        typer.echo(json.dumps(versions(), indent=2))
        return
    typer.echo("\n".join(version_lines()))


# ------------------------------------------------------------------- the process
#: options of the ``ptd`` group that may also be written after the subcommand
GLOBAL_FLAGS = ("--debug", "--quiet", "-q", "--verbose", "-v", "--no-color")


_signals_seen = 0


def _on_signal(signum: int, frame: Any) -> None:
    """SIGINT and SIGTERM: a long job is asked to stop at its next safe point (and cleans
    up); a second signal, while it stops or after, exits at once; otherwise the interrupt is
    raised where the program is."""
    global _signals_seen
    from ptd.storage import cancel

    _signals_seen += 1
    if _signals_seen > 1:
        _exit_now(signum)
    if cancel.active():
        cancel.request(signum)
        return
    if signum == signal.SIGTERM:
        raise Terminated()
    raise KeyboardInterrupt


def _exit_now(signum: int) -> None:
    """Exit at once (a second Ctrl-C): say which temporary outputs stay behind."""
    from ptd.storage import publish

    left = publish.in_use()
    if left:
        line = f"ptd: interrupted again: could not remove {', '.join(left)}; delete it by hand"
    else:
        line = "ptd: interrupted again: stopped at once (nothing was left behind)"
    with contextlib.suppress(OSError):
        os.write(2, (line + "\n").encode())
    os._exit(143 if signum == signal.SIGTERM else 130)


def hoist_global_options(args: Sequence[str]) -> list[str]:
    """``args`` with the global flags moved before the subcommand (``ptd inspect x --debug``
    -> ``ptd --debug inspect x``); nothing after ``--`` is touched.

    >>> hoist_global_options(["inspect", "x.h5", "--debug", "--", "--quiet"])
    ['--debug', 'inspect', 'x.h5', '--', '--quiet']
    """
    args = list(args)
    end = args.index("--") if "--" in args else len(args)
    hoisted = [a for a in args[:end] if a in GLOBAL_FLAGS]
    rest = [a for a in args[:end] if a not in GLOBAL_FLAGS]
    return hoisted + rest + args[end:]


#: what Typer's type labels become in ``--help``
_TYPE_WORDS = {
    "int": "N",
    "integer": "N",
    "float": "X",
    "str": "TEXT",
    "text": "TEXT",
    "path": "PATH",
}


def _placeholder(param: Any, shown: str | None) -> str | None:
    """What ``--help`` shows after an option: nothing for a flag or an argument (its name is
    its placeholder), its metavar, else a word for the type Typer labels ``shown``
    (``<int>`` -> ``N``, ``<a|b>`` -> ``[a|b]``), never a Python type name. Parameters are read
    by their attributes: Typer may carry its own copy of click."""
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return None
    if param.param_type_name == "argument":
        return None
    if param.metavar:
        return str(param.metavar)
    label = (shown or "").strip("<>").removesuffix("...")
    for prefix in ("list[", "tuple["):
        if label.startswith(prefix):
            label = label[len(prefix) : -1]
    if "|" in label:
        return f"[{label}]"
    return _TYPE_WORDS.get(label.split(" ")[0], "TEXT")


def _fix_placeholders(command: Any) -> None:
    for param in command.params:
        original = param.display_type_rich

        def display(ctx: Any, _param: Any = param, _original: Any = original) -> str | None:
            return _placeholder(_param, _original(ctx))

        param.display_type_rich = display
    help_option = command.get_help_option  # made per context, not among the params

    def get_help_option(ctx: Any, _made: Any = help_option) -> Any:
        option = _made(ctx)
        if option is not None:
            option.display_type_rich = lambda ctx: None
        return option

    command.get_help_option = get_help_option
    for sub in getattr(command, "commands", {}).values():
        _fix_placeholders(sub)


def cli_command() -> Any:
    """The ``ptd`` click command (the Typer app, its help placeholders fixed)."""
    command = typer.main.get_command(app)
    _fix_placeholders(command)
    for param in command.params:  # Typer's two completion options: ptd's help lines
        option: Any = param  # an Option (Typer may carry its own click: read, not imported)
        for flag in option.opts:
            if flag in COMPLETION_HELP:
                option.help = COMPLETION_HELP[flag]
    return command


def run(args: Sequence[str] | None = None) -> None:
    """Run ``ptd`` with ``args`` (default ``sys.argv[1:]``) and exit with its status."""
    argv = hoist_global_options(sys.argv[1:] if args is None else args)
    try:
        signal.signal(signal.SIGTERM, _on_signal)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _on_signal)
    except ValueError:  # not the main thread (an embedding): leave signals alone
        pass
    code = 0
    try:
        code = _main(argv)
        sys.stdout.flush()
    except BrokenPipeError:  # a plain write to a closed stdout: end quietly, as decided
        stdout_closed()
    except Terminated:
        code = 143
    if _signals_seen:
        # interrupted and cleaned up: the status is decided. Another signal now would kill
        # the interpreter mid-exit (its handlers are reset while it finalizes): ignored.
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError):  # pragma: no cover - not the main thread
                signal.signal(sig, signal.SIG_IGN)
    sys.exit(code)


def _main(argv: list[str]) -> int:
    from ptd_cli._common import print_error

    request = completion_request(argv)
    if request is not None:  # before Typer, which would ignore a named shell
        try:
            run_completion(*request)
        except CompletionError as err:
            print_error(str(err))
            return 2
        except OSError as err:
            where = f": {err.filename}" if err.filename else ""
            print_error(f"cannot install the completion script: {err.strerror or err}{where}")
            return 1
        return 0
    command = cli_command()
    try:
        result = command.main(argv, prog_name="ptd", standalone_mode=False)
    except typer.Exit as err:
        return int(err.exit_code)
    except typer.Abort as err:  # an interrupt outside a command's own handling
        return 143 if isinstance(err.__context__, Terminated) else 130
    except Terminated:
        return 143
    except KeyboardInterrupt:
        print_error("interrupted")
        return 130
    except Exception as err:  # click's usage errors (Typer may carry its own click)
        if type(err).__name__ == "NoArgsIsHelpError":  # `ptd` alone: the help, on stdout
            typer.echo(err.ctx.get_help())  # type: ignore[attr-defined]
            return 0
        if not hasattr(err, "format_message") or not hasattr(err, "exit_code"):
            raise
        ctx = getattr(err, "ctx", None)
        hint = ""
        if ctx is not None:
            path = ctx.command_path if ctx.parent is not None else "ptd"
            hint = f" (see `{path} -h`)"
        print_error(err.format_message() + (hint if err.exit_code == 2 else ""))
        return int(err.exit_code)
    code = int(result) if isinstance(result, int) else 0
    return _after_late_stop(code)


def _after_late_stop(code: int) -> int:
    """A Ctrl-C or SIGTERM that came after the job had finished its work (past its last
    safe point: the output is complete and kept): said, and the exit status is the
    interrupt's."""
    from ptd.storage import cancel

    signum = cancel.unheeded()
    if signum is None:
        return code
    print_late = "ptd: interrupted after the work was done: the output is complete and kept"
    with contextlib.suppress(OSError):
        os.write(2, (print_late + "\n").encode())
    return 143 if signum == signal.SIGTERM else 130


if __name__ == "__main__":  # pragma: no cover
    run()
