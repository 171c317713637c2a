"""A Rich byte progress bar on stderr, shown only when stderr is a terminal.

:mod:`rich.progress` is imported only when a bar is drawn: the command modules import this one
at import time, and ``ptd --help`` or a redirected run has no use for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from .._common import err_console


@contextmanager
def byte_progress(
    description: str, total: int | None = None, *, enabled: bool = True
) -> Iterator[Callable[[int, int | None], None]]:
    """Yield ``update(done, total)``; draws a bar (bytes, rate, ETA) when stderr is a terminal."""
    from .. import _common

    console = err_console()
    if not enabled or _common.QUIET or not console.is_terminal:

        def ignore(done: int, total: int | None = None) -> None:
            return None

        yield ignore
        return
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )
    with progress:
        task = progress.add_task(description, total=total)

        def update(done: int, total: int | None = None) -> None:
            if total is not None:
                progress.update(task, completed=done, total=total)
            else:
                progress.update(task, completed=done)

        yield update
