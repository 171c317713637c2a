"""``ptd memmap SRC DST``: export a store to a tensordict memory-mapped directory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer
from rich.text import Text

from .._common import (
    STORAGE_OPTION_HELP,
    errors_handled,
    human_bytes,
    out_console,
    parse_storage_options,
    plural,
    print_json,
)
from ._progress import byte_progress

SHORT_HELP = "Export a store to a tensordict memory-mapped directory."

HELP = """Export an HDF5 file or Zarr store to a memory-mapped directory in tensordict 0.15's layout (`TensorDict.load_memmap` / `ptd.containers.memmap.load_memmap` read it), streamed leaf by leaf with a progress bar. Written to a temporary sibling and renamed into place on success; an existing non-empty DST is refused unless --overwrite."""


def memmap(
    ctx: typer.Context,
    src: str = typer.Argument(
        ..., metavar="SRC", help="The HDF5 file or Zarr store to read.", show_default=False
    ),
    dst: str = typer.Argument(
        ..., metavar="DST", help="The directory to create.", show_default=False
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing DST."),
    allow_pickle: bool = typer.Option(
        False, "--allow-pickle", help="Decode pickled zarr entries (trusted files only)."
    ),
    skip_unsupported: bool = typer.Option(
        False,
        "--skip-unsupported",
        help="Write the rest when some leaves cannot be (HDF5 references, vlen sequences, "
        "compound types); they are listed as not copied. Default: refuse, naming the key.",
    ),
    json_: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    storage_option: Annotated[
        list[str] | None,
        typer.Option("--storage-option", "-O", metavar="KEY=VALUE", help=STORAGE_OPTION_HELP),
    ] = None,
) -> None:
    options = parse_storage_options(storage_option)
    with errors_handled(ctx, src, output=dst):
        import ptd
        from ptd.containers.memmap import export_memmap

        total = ptd.info(src, storage_options=options).totals.nbytes
        with byte_progress("memmap", total, enabled=not json_) as update:
            done = 0

            def advance(n: int) -> None:
                nonlocal done
                done += n
                update(done, total)

            summary = export_memmap(
                src,
                dst,
                overwrite=overwrite,
                progress=advance,
                allow_pickle=allow_pickle,
                storage_options=options,
                skip_unsupported=skip_unsupported,
            )
    if json_:
        from dataclasses import asdict

        print_json(asdict(summary))
        return
    print_summary(out_console(), src, summary)


def print_summary(console: Any, src: str, summary: Any, name: Callable[[str], str] = str) -> None:
    line = Text()
    line.append("memmap ", style="bold green")
    line.append(f"{name(src)} -> {name(summary.path)}")
    console.print(line)
    rate = summary.nbytes / summary.seconds if summary.seconds > 0 else None
    console.print(
        f"  {plural(summary.leaves, 'tensor')}, {plural(summary.non_tensors, 'non-tensor')}, "
        f"{plural(summary.groups, 'group')}; {human_bytes(summary.nbytes)} in {summary.seconds:.2f} s"
        + (f" ({human_bytes(rate)}/s)" if rate else "")
        + (f"; {summary.pickled} non-tensor entries pickled" if summary.pickled else ""),
        markup=False,
    )
    escaped = getattr(summary, "escaped", None) or []
    if escaped:
        console.print(
            f"  stored under escaped names ({_shown(escaped)}): meta.json uses these names for "
            "its own fields; ptd loads them under their own names, tensordict as %-escaped",
            markup=False,
        )
    from .convert import print_not_copied

    print_not_copied(console, summary)


def _shown(keys: list[str]) -> str:
    return ", ".join(keys[:3]) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
