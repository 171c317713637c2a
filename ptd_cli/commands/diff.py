"""``ptd diff A B``: structure, then values, of two stores (any formats and layouts)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.text import Text

from .._common import (
    FOLLOW_VIRTUAL_HELP,
    STORAGE_OPTION_HELP,
    Bare,
    Column,
    ExitCode,
    errors_handled,
    human_bytes,
    out_console,
    parse_storage_options,
    plural,
    print_listing,
)
from ._reports import (
    FORMAT_HELP,
    REPORT_HELP,
    check_format,
    counting_progress,
    emit,
    parse_reports,
    render,
    write_reports,
)

SHORT_HELP = "Compare two stores: structure, then values (h5 and zarr, any chunk layout)."

HELP = """Compare two stores, HDF5 or Zarr, of any chunk layout or codec: first the structure (keys, kinds, shapes, dtypes, batch sizes, non-tensor values, user attributes), then the values of every tensor leaf, streamed slab by slab in bounded memory. Values are equal when |a - b| <= atol + rtol * |b| (exactly equal by default); NaN equals NaN only with --equal-nan. Tables (HDF5 compound types, zarr structured arrays) are compared field by field. Each difference names the key (and field); value differences give the count and the first differing rows. Leaves whose values ptd cannot read (HDF5 object references, variable-length sequences) are listed as not compared. Exit status: 0 same, 1 different (or, without --allow-uncompared, a leaf not compared), 2 unreadable input or usage error."""


def diff(
    ctx: typer.Context,
    a: str = typer.Argument(
        ..., metavar="A", help="An HDF5 file or Zarr store.", show_default=False
    ),
    b: str = typer.Argument(..., metavar="B", help="Another one.", show_default=False),
    rtol: float = typer.Option(0.0, "--rtol", min=0.0, help="Relative tolerance."),
    atol: float = typer.Option(0.0, "--atol", min=0.0, help="Absolute tolerance."),
    equal_nan: bool = typer.Option(False, "--equal-nan", help="NaN equals NaN."),
    metadata_only: bool = typer.Option(
        False,
        "--metadata-only",
        help="Compare the structure and properties only (codecs too; no data is read).",
    ),
    allow_uncompared: bool = typer.Option(
        False,
        "--allow-uncompared",
        help="Exit 0 although some leaves could not be compared (they are still listed).",
    ),
    json_: bool = typer.Option(False, "--json", help="Print a JSON report (= --format json)."),
    fmt: str = typer.Option("text", "--format", metavar="FORMAT", help=FORMAT_HELP),
    report_to: Annotated[
        list[str] | None, typer.Option("--report", metavar="FORMAT=FILE", help=REPORT_HELP)
    ] = None,
    follow_virtual: bool = typer.Option(False, "--follow-virtual", help=FOLLOW_VIRTUAL_HELP),
    storage_option: Annotated[
        list[str] | None,
        typer.Option("--storage-option", "-O", metavar="KEY=VALUE", help=STORAGE_OPTION_HELP),
    ] = None,
) -> None:
    fmt = check_format(fmt, json_)
    reports_to = parse_reports(report_to)
    options = parse_storage_options(storage_option)
    with (
        counting_progress("diff", enabled=not metadata_only) as progress,
        errors_handled(ctx, f"{a} / {b}"),
    ):
        import ptd
        from ptd.report.suites import diff_suite

        report = ptd.diff(
            a,
            b,
            rtol=rtol,
            atol=atol,
            equal_nan=equal_nan,
            metadata_only=metadata_only,
            storage_options=options,
            follow_virtual=follow_virtual,
            progress=progress,
        )
    doc = report.to_dict()
    suites = [diff_suite(report)]
    if fmt == "text":
        render_report(report)
    else:
        emit(render(fmt, suites, "error", doc, "ptd diff"))
    write_reports(reports_to, suites, "error", doc, "ptd diff")
    verified = report.verified(allow_uncompared)
    raise typer.Exit(int(ExitCode.OK if verified else ExitCode.PROBLEMS))


diff.__doc__ = HELP


def render_report(report: Any) -> None:
    """The text report: a head line, one row per difference, the leaves not compared."""
    console = out_console()
    head = Text()
    if report.same and report.not_compared:
        head.append(f"same, {len(report.not_compared)} not compared ", style="bold yellow")
    elif report.same:
        head.append("same ", style="bold green")
    else:
        head.append("DIFFERENT ", style="bold red")
    head.append(f"{report.a} ({report.format_a}) vs {report.b} ({report.format_b})", style="bold")
    if report.metadata_only:
        head.append("  structure only", style="dim")
    else:
        head.append(
            f"  {plural(report.leaves_compared, 'leaf', 'leaves')} compared, "
            f"{human_bytes(report.nbytes_compared)} a side in {report.seconds:.2f} s",
            style="dim",
        )
    if not report.same:
        head.append(f": {plural(len(report.differences), 'difference')}")
    console.print(head)
    if report.differences:
        rows: list[list[Any]] = []
        width = _side_width(console)
        for d in report.differences:
            row: list[Any]
            if d.kind == "values_differ":
                row = [d.key or "/", Bare(values_line(d)), *_values_at(d, width)]
            elif d.a is None and d.b is None:
                row = [d.key or "/", d.kind, Bare(d.message), ""]
            else:
                row = [d.key or "/", d.kind, *_sides(d.a, d.b, width)]
            rows.append(row)
        columns = [Column("key"), Column("difference"), Column("A", "a"), Column("B", "b")]
        # (A and B: each side's value, or its values at the first differing elements)
        print_listing(console, columns, rows)
    if report.differences and all(
        d.kind == "values_differ" and d.count and d.count == d.both_nan for d in report.differences
    ):
        console.print("  every differing value is NaN on both sides: --equal-nan", style="dim")
    print_not_compared(console, report)


def print_not_compared(console: Any, report: Any) -> None:
    """The leaves whose values could not be compared, one line each."""
    if not report.not_compared:
        return
    console.print(
        f"not compared: {plural(len(report.not_compared), 'leaf', 'leaves')}", style="yellow"
    )
    for item in report.not_compared:
        console.print(Text(f"  {item['key']}: {item['reason']}"))


def values_line(d: Any) -> str:
    """``values_differ: 2 of 40 at [3, 1], [7, 0]; max |a-b| 96, max rel 8`` (what is known of
    a value difference; A's and B's values there go in their own columns)."""
    where = f" in field {d.field!r}" if d.field else ""
    text = f"values_differ{where}: {d.count}" + (f" of {d.total}" if d.total else "")
    first = d.first or []
    if first and first[0]["index"]:  # (a 0-d leaf has no index)
        more = ", …" if d.count > len(first) else ""
        text += " at " + ", ".join(str(f["index"]) for f in first) + more
    gaps = []
    if d.max_abs_diff is not None:
        gaps.append(f"max |a-b| {d.max_abs_diff:.6g}")
    if d.max_rel_diff is not None:
        gaps.append(f"max rel {d.max_rel_diff:.6g}")
    return text + ("; " + ", ".join(gaps) if gaps else "")


def _values_at(d: Any, width: int) -> list[str]:
    """A's and B's values at the first differing elements."""
    from ptd.report.excerpt import excerpts  # (the library loads when a command runs)

    first = d.first or []
    if not first:
        return ["-", "-"]
    more = ", …" if d.count > len(first) else ""
    a, b = (", ".join(_value(f[side]) for f in first) + more for side in ("a", "b"))
    return list(excerpts(a, b, width))


def _value(v: Any) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def _side_width(console: Any) -> int:
    """How many characters of each side's value a row shows: about a third of the terminal
    each (key and difference take the rest), at least 40."""
    return max(40, (int(console.width) - 20) // 3)


def _sides(a: Any, b: Any, width: int) -> tuple[str, str]:
    """A's and B's values as text: of two attribute dicts only the attributes that differ,
    each side whole or cut around where the two differ (never two equal-looking cuts)."""
    from ptd.report.excerpt import differing_items, excerpts

    a, b = differing_items(a, b)
    return excerpts("-" if a is None else str(a), "-" if b is None else str(b), width)
