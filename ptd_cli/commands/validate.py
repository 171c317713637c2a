"""``ptd validate PATH...``: leading dims against the batch size, metadata, optional schema."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from .._common import (
    STORAGE_OPTION_HELP,
    ExitCode,
    errors_handled,
    fail,
    is_debug,
    message_of,
    out_console,
    parse_batch_size,
    parse_storage_options,
    plural,
    print_error,
    print_json,
)

SHORT_HELP = "Check leaves against the batch size, the metadata, and optionally a schema."

HELP = """Check that every leaf's leading dims match the batch size (the stored one, or --batch-size, or --batch-dims K leading dims inferred), that the metadata is readable, and with --schema that keys, dtypes and shapes match a schema saved by `ptd inspect --json` (batch dims may differ). Each problem is listed with its key, shape and what was expected. Exit status: 0 valid, 1 problems found, 2 unreadable input or usage error."""


def validate(
    ctx: typer.Context,
    paths: Annotated[
        list[str],
        typer.Argument(metavar="PATH", help="HDF5 files or Zarr stores.", show_default=False),
    ],
    batch_size: str | None = typer.Option(
        None, "--batch-size", metavar="N[,M...]", help="The batch size every leaf must start with."
    ),
    batch_dims: int | None = typer.Option(
        None, "--batch-dims", min=0, metavar="K", help="Infer a K-dim batch size instead."
    ),
    schema: str | None = typer.Option(
        None, "--schema", metavar="FILE", help="A JSON schema saved by `ptd inspect --json`."
    ),
    json_: bool = typer.Option(
        False, "--json", help="Print a JSON report with a top-level `valid`."
    ),
    storage_option: Annotated[
        list[str] | None,
        typer.Option("--storage-option", "-O", metavar="KEY=VALUE", help=STORAGE_OPTION_HELP),
    ] = None,
) -> None:
    if batch_size is not None and batch_dims is not None:
        raise fail("--batch-size and --batch-dims cannot be used together")
    try:
        bs = parse_batch_size(batch_size)
    except typer.BadParameter as err:
        raise fail(f"--batch-size: {err}") from None
    options = parse_storage_options(storage_option)
    with errors_handled(ctx, schema):
        import ptd
        from ptd.report.validate import load_schema

        doc = load_schema(schema) if schema is not None else None

    reports: list[dict[str, Any]] = []
    code = ExitCode.OK
    console = out_console()
    for path in paths:
        try:
            report = ptd.validate(
                path, batch_size=bs, batch_dims=batch_dims, schema=doc, storage_options=options
            )
        except KeyboardInterrupt:
            with errors_handled(ctx, path):
                raise
        except Exception as err:  # noqa: BLE001 - an unreadable input: report it, go on
            if is_debug(ctx):
                import traceback

                traceback.print_exc()
            msg = message_of(err, path)
            reports.append({"path": path, "valid": False, "error": msg, "problems": []})
            code = ExitCode.BAD_INPUT
            if not json_:
                print_error(msg)
            continue
        d = report.to_dict()
        d["schema"] = schema
        d["error"] = None
        reports.append(d)
        if not report.valid and code == ExitCode.OK:
            code = ExitCode.PROBLEMS
        if not json_:
            _render(console, report)
    if json_:
        print_json({"valid": code == ExitCode.OK, "reports": reports})
    raise typer.Exit(int(code))


def _render(console: Any, report: Any) -> None:
    head = Text()
    if report.valid:
        head.append("valid ", style="bold green")
    else:
        head.append("INVALID ", style="bold red")
    head.append(report.path, style="bold")
    head.append(
        f"  {report.format}, batch_size={report.batch_size} ({report.batch_size_source}), "
        f"{plural(report.leaves, 'leaf', 'leaves')}, {plural(report.groups, 'group')}"
    )
    if not report.valid:
        head.append(f": {plural(len(report.problems), 'problem')}")
    console.print(head)
    if report.problems:
        table = Table(box=None, pad_edge=False, header_style="bold dim")
        for col in ("key", "problem", "shape", "expected"):
            table.add_column(col, overflow="fold")
        for p in report.problems:
            # the message repeats key/shape/expected; show it only where those say little
            expected = "" if p.expected is None else str(p.expected)
            if p.shape is None:
                expected = (expected + "  " if expected else "") + p.message
            table.add_row(p.key or "/", p.code, "" if p.shape is None else str(p.shape), expected)
        console.print(table)
