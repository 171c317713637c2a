"""One module per ``ptd`` command; :func:`register` adds them to the app.

Each module imports only typer, rich and the standard library at import time: the :mod:`ptd`
library is imported inside the command function, so ``ptd --help`` stays fast.
"""

from __future__ import annotations

import typer

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    from . import convert, demo, diff, inspect, memmap, validate

    app.command("inspect", help=inspect.HELP, short_help=inspect.SHORT_HELP)(inspect.inspect)
    app.command("convert", cls=convert.ConvertCommand, short_help=convert.SHORT_HELP)(
        convert.convert
    )
    app.command("validate", help=validate.HELP, short_help=validate.SHORT_HELP)(validate.validate)
    app.command("diff", help=diff.HELP, short_help=diff.SHORT_HELP)(diff.diff)
    app.command("memmap", help=memmap.HELP, short_help=memmap.SHORT_HELP)(memmap.memmap)
    app.command("demo", help=demo.HELP, short_help=demo.SHORT_HELP)(demo.demo)
