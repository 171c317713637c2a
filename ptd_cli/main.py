"""The ``ptd`` Typer application: global options only.

Commands live one per module under :mod:`ptd_cli.commands` and are registered on :data:`app`.
This module imports only typer and rich (plus the standard library): the :mod:`ptd` library is
imported lazily inside commands, and by :func:`get_version` only when metadata is missing;
:mod:`importlib.metadata` (tens of milliseconds) only for ``--version``.
"""

from __future__ import annotations

from dataclasses import dataclass

import typer

__all__ = ["CliState", "app", "get_version"]

app = typer.Typer(
    name="ptd",
    help="Inspect, validate and convert persistent tensor dicts (HDF5 files and Zarr v3 stores).",
    no_args_is_help=True,
    rich_markup_mode="rich",
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@dataclass
class CliState:
    """Options shared by every command, kept in ``ctx.obj``."""

    #: show full tracebacks on errors instead of a one-line message
    debug: bool = False


def get_version() -> str:
    """The installed distribution's version, or ``ptd.__version__`` when not installed."""
    from importlib import metadata

    try:
        return metadata.version("ptd")
    except metadata.PackageNotFoundError:
        import ptd  # lazily: only when the package metadata is missing (e.g. a bare checkout)

        return str(ptd.__version__)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"ptd {get_version()}")
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    debug: bool = typer.Option(
        False,
        "--debug",
        help="Show full tracebacks on errors.",
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
    ctx.obj = CliState(debug=debug)
    _one_line_warnings()


def _one_line_warnings() -> None:
    """Warnings as one ``ptd: warning: ...`` line on stderr (no source line); zarr's notes
    about its own data types without a v3 specification are not shown."""
    import warnings

    warnings.filterwarnings("ignore", message=".*does not have a Zarr V3 specification")

    def one_line(message, category, filename, lineno, line=None):  # type: ignore[no-untyped-def]
        return f"ptd: warning: {message}\n"

    warnings.formatwarning = one_line


# the commands, one module each under ptd_cli/commands (they import the library lazily)
from ptd_cli.commands import register as _register  # noqa: E402

_register(app)


if __name__ == "__main__":  # pragma: no cover
    app()
