"""``ptd validate PATH...``: leading dims against the batch size, metadata, optional schema,
consolidated metadata, layout lint, and with ``--data`` every chunk."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.text import Text

from .._common import (
    EXPAND_HELP,
    FOLLOW_VIRTUAL_HELP,
    STORAGE_OPTION_HELP,
    Column,
    ExitCode,
    errors_handled,
    fail,
    human_bytes,
    is_debug,
    message_of,
    out_console,
    parse_batch_size,
    parse_storage_options,
    plural,
    print_error,
    print_listing,
    redact,
    shape_range,
)
from ._reports import (
    FORMAT_HELP,
    REPORT_HELP,
    check_fail_on,
    check_format,
    counting_progress,
    emit,
    parse_reports,
    render,
    write_reports,
)

SHORT_HELP = "Check batch sizes, metadata, schema, layout, and with --data every chunk."

HELP = """Check that every leaf's leading dims match the batch size (the stored one, or --batch-size, or --batch-dims K leading dims inferred for each group; with nothing stored each group also gets its own length and a leaf a few rows off it is a length_mismatch; named dimensions and known encodings (AnnData, hdmf/NWB) are checked exactly: dimension_mismatch, encoding_mismatch), that the metadata is readable (a zarr store's consolidated metadata is compared with the nodes really in it), and with --schema that keys, dtypes and shapes match a schema saved by `ptd inspect --json` (batch dims may differ). The layout lint reports slow or unreadable layouts (codes L001-L012, each with a fix). With --data, every chunk of every leaf is read once: undecodable chunks, checksum failures, missing chunks, NaN/Inf, schema value constraints, and per-leaf statistics in the JSON report. Exit status: 0 valid, 1 problems found (or a finding at the --fail-on severity), 2 unreadable input or usage error."""


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
        None, "--batch-dims", min=0, metavar="K", help="Infer a K-dim batch size per group instead."
    ),
    schema: str | None = typer.Option(
        None, "--schema", metavar="FILE", help="A JSON schema saved by `ptd inspect --json`."
    ),
    json_: bool = typer.Option(
        False, "--json", help="Print a JSON report with a top-level `valid` (= --format json)."
    ),
    data: bool = typer.Option(
        False, "--data", help="Read every chunk of every leaf (checksums, NaN, statistics)."
    ),
    fmt: str = typer.Option("text", "--format", metavar="FORMAT", help=FORMAT_HELP),
    report_to: Annotated[
        list[str] | None, typer.Option("--report", metavar="FORMAT=FILE", help=REPORT_HELP)
    ] = None,
    fail_on: str = typer.Option(
        "error",
        "--fail-on",
        metavar="SEVERITY",
        help="Exit 1 on a problem or lint finding of this severity or worse: error, warning, info.",
    ),
    ignore: Annotated[
        list[str] | None,
        typer.Option(
            "--ignore",
            metavar="CODE",
            help="Leave out a problem or lint code (L002, nan_values...); repeatable.",
        ),
    ] = None,
    no_lint: bool = typer.Option(False, "--no-lint", help="Skip the layout lint."),
    workers: int | None = typer.Option(
        None,
        "--workers",
        "-w",
        min=1,
        metavar="N",
        help="--data: blocks read at once (default: 4 for zarr, 2 for HDF5).",
    ),
    follow_virtual: bool = typer.Option(False, "--follow-virtual", help=FOLLOW_VIRTUAL_HELP),
    storage_option: Annotated[
        list[str] | None,
        typer.Option("--storage-option", "-O", metavar="KEY=VALUE", help=STORAGE_OPTION_HELP),
    ] = None,
    expand: bool = typer.Option(False, "--expand", help=EXPAND_HELP),
) -> None:
    if batch_size is not None and batch_dims is not None:
        raise fail("--batch-size and --batch-dims cannot be used together")
    fmt = check_format(fmt, json_)
    fail_on = check_fail_on(fail_on)
    reports_to = parse_reports(report_to)
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
    suites: list[Any] = []
    code = ExitCode.OK
    console = out_console()
    from ptd.report.suites import error_suite, validation_suite
    from ptd.report.validate import known_codes

    unknown = [c for c in ignore or () if c not in set(known_codes())]
    if unknown:
        raise fail(
            f"--ignore: unknown code {', '.join(unknown)}; known: "
            + ", ".join(dict.fromkeys(known_codes()))
        )
    for path in paths:
        try:
            # the bar is gone from the terminal before this path's report is printed
            with counting_progress("validate --data", enabled=data) as progress:
                report = ptd.validate(
                    path,
                    batch_size=bs,
                    batch_dims=batch_dims,
                    schema=doc,
                    storage_options=options,
                    data=data,
                    follow_virtual=follow_virtual,
                    lint=not no_lint,
                    ignore=tuple(ignore or ()),
                    workers=workers,
                    progress=progress if data else None,
                )
        except KeyboardInterrupt:
            with errors_handled(ctx, path):
                raise
        except Exception as err:  # noqa: BLE001 - an unreadable input: report it, go on
            if is_debug(ctx):
                import traceback

                traceback.print_exc()
            msg = message_of(err, path)
            shown = redact(path)  # as every report shows a location: no URL's secrets
            reports.append({"path": shown, "valid": False, "error": msg, "problems": []})
            suites.append(error_suite(shown, msg))
            code = ExitCode.BAD_INPUT
            if fmt == "text":
                print_error(msg)
            continue
        d = report.to_dict()
        d["schema"] = schema
        d["error"] = None
        reports.append(d)
        suites.append(validation_suite(report))
        if report.fails(fail_on) and code == ExitCode.OK:
            code = ExitCode.PROBLEMS
        if fmt == "text":
            _render(console, report, fail_on, expand=expand)
    out_doc = {"valid": code == ExitCode.OK, "fail_on": fail_on, "reports": reports}
    if fmt != "text":
        emit(render(fmt, suites, fail_on, out_doc, "ptd validate"))
    write_reports(reports_to, suites, fail_on, out_doc, "ptd validate")
    raise typer.Exit(int(code))


_STYLE = {"error": "bold red", "warning": "yellow", "info": "dim"}


def _render(console: Any, report: Any, fail_on: str = "error", expand: bool = False) -> None:
    failing = report.fails(fail_on)
    head = Text()
    if report.valid and not failing:
        head.append("valid ", style="bold green")
    elif report.valid:
        head.append("FAILED ", style="bold red")
    else:
        head.append("INVALID ", style="bold red")
    head.append(report.path, style="bold")
    head.append(
        f"  {report.format}, batch_size={report.batch_size} ({report.batch_size_source}), "
        f"{plural(report.leaves, 'leaf', 'leaves')}, {plural(report.groups, 'group')}"
    )
    errors = [p for p in report.problems if p.severity == "error"]
    if errors:
        head.append(f": {plural(len(errors), 'problem')}")
    if report.data_checked:
        rate = report.data_nbytes / report.data_seconds / 1e6 if report.data_seconds else 0.0
        head.append(
            f"; data: {human_bytes(report.data_nbytes)} read in {report.data_seconds:.2f} s "
            f"({rate:.0f} MB/s)",
            style="dim",
        )
    console.print(head)
    render_problems(console, report.problems, expand=expand)
    if report.stats:
        render_stats(console, report.stats)
    if report.lint:
        render_lint(console, report.lint, expand=expand)


_PROBLEM_COLUMNS = [
    Column("key"),
    Column("problem"),
    Column("shape", "shape"),
    Column("expected", "expected"),
    Column("message"),
]


def _problem_row(p: Any) -> list[Any]:
    # the message says why (the group's length and where it came from, what a link points to)
    code = Text(p.code, style=_STYLE.get(p.severity, ""))
    if p.severity != "error":
        code.append(f" ({p.severity})", style="dim")
    return [
        p.key or "/",
        code,
        "" if p.shape is None else str(p.shape),
        "" if p.expected is None else str(p.expected),
        p.message,
    ]


def _keys_text(group: Any) -> str:
    keys = ", ".join(k or "/" for k in group.shown_keys)
    return keys + (f", … ({group.more} more)" if group.more else "")


def render_problems(console: Any, problems: list[Any], *, expand: bool = False) -> None:
    """The problems: a listing, where a problem repeated more than a few times (the same code
    and expected value, at other keys, of shapes that differ in their first dim at most) is
    one line with its count, first keys and shapes (unless ``expand``)."""
    if not problems:
        return
    from ptd.report.summary import group_findings

    rows: list[list[Any]] = []
    folded = []
    # repeats: the same code, severity, expected value and trailing dims (lengths may differ)
    for g in group_findings(
        problems,
        code=lambda p: (
            f"{p.code} {p.severity} {p.expected!r} "
            + ("-" if p.shape is None else f"{len(p.shape)} {p.shape[1:]}")
        ),
    ):
        if g.folded and not expand:
            folded.append(g)
        else:
            rows += [_problem_row(p) for p in g.items]
    if rows:
        print_listing(console, _PROBLEM_COLUMNS, rows)
    for g in folded:
        first = g.items[0]
        line = Text()
        line.append(first.code, style=_STYLE.get(first.severity, ""))
        if first.severity != "error":
            line.append(f" ({first.severity})", style="dim")
        line.append(f" ×{g.count}", style="bold")
        line.append(f": {_keys_text(g)}")
        shape = shape_range([p.shape for p in g.items])
        if shape is not None:
            line.append(f"  shape={shape}", style="dim")
        if first.expected is not None:
            line.append(f"  expected={first.expected}", style="dim")
        console.print(line)
        console.print(Text(f"  first: {first.message}", style="dim"))


def render_stats(console: Any, stats: dict[str, dict[str, Any]]) -> None:
    columns = [Column("leaf")]
    columns += [Column(c, c, "right") for c in ("min", "max", "mean", "std", "nan", "inf")]
    columns.append(Column("chunks", "chunks", "right"))
    rows: list[list[Any]] = []
    for key, st in stats.items():
        chunks = "" if not st.get("chunks") else str(st["chunks"])
        if st.get("stored_chunks") is not None and st["stored_chunks"] != st.get("chunks"):
            chunks = f"{st['stored_chunks']}/{st['chunks']}"
        rows.append(
            [
                key,
                _num(st.get("min")),
                _num(st.get("max")),
                _num(st.get("mean")),
                _num(st.get("std")),
                str(st.get("nan", 0)) if st.get("nan") else "",
                str(st.get("inf", 0)) if st.get("inf") else "",
                chunks,
            ]
        )
    print_listing(console, columns, rows)


def render_lint(console: Any, lint: list[Any], *, expand: bool = False) -> None:
    """The lint findings, one line each; a code found more than a few times is one line with
    its count and first keys, then its first message and its fix (unless ``expand``)."""
    from ptd.report.summary import group_findings

    console.print(Text("lint:", style="bold"))
    for g in group_findings(lint):
        first = g.items[0]
        if g.folded and not expand:
            line = Text("  ")
            line.append(f"{first.code} {first.name}", style=_STYLE.get(first.severity, ""))
            line.append(f" ({first.severity})", style="dim")
            line.append(f" ×{g.count}", style="bold")
            line.append(f": {_keys_text(g)}")
            console.print(line)
            console.print(Text(f"    first: {first.message}", style="dim"))
            if first.fix:
                console.print(Text(f"    fix: {first.fix}", style="dim"))
            continue
        for f in g.items:
            line = Text("  ")
            line.append(f"{f.code} {f.name}", style=_STYLE.get(f.severity, ""))
            line.append(f" ({f.severity}) ", style="dim")
            line.append(f.message)
            if f.fix:
                line.append(f"  fix: {f.fix}", style="dim")
            console.print(line)


def _num(v: Any) -> str:
    if v is None:
        return ""
    return f"{v:.6g}"
