"""``ptd convert SRC [DST]``: HDF5 <-> Zarr v3 (or re-chunk), streamed, never half-written."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Annotated, Any

import typer
from rich.text import Text
from typer.core import TyperCommand

from .._common import (
    EXPAND_HELP,
    FOLLOW_VIRTUAL_HELP,
    STORAGE_OPTION_HELP,
    Bare,
    Column,
    errors_handled,
    fail,
    format_ratio,
    human_bytes,
    out_console,
    parse_batch_size,
    parse_storage_options,
    plural,
    print_json,
    print_listing,
    shape_range,
)
from ._progress import byte_progress

SHORT_HELP = "Convert HDF5 <-> Zarr v3 (or re-chunk), streamed and never half-written."

_HELP = """Convert an HDF5 file to a Zarr v3 store or back (or re-chunk within one format).

DST defaults to SRC with its suffix swapped (data.h5 -> data.zarr). The copy is streamed chunk by chunk in bounded memory and keeps every leaf's dtype, the batch-size metadata, non-tensor entries, string columns and user attributes. It is written to a temporary sibling and renamed into place only on success, so DST is never half-written; an existing DST is refused unless --overwrite. Without --compression each leaf keeps its codec where the target has it.

DST's suffix names the format: {suffixes}; a name without a suffix gets the format SRC is not ({others}) unless --to says otherwise; any other suffix is refused unless --to says the format.

SRC and DST may be URLs (s3://bucket/data.zarr; s3://bucket/data.h5 as a source only), with -O for the credentials and endpoint; a URL DST is written in place and removed again on failure. --workers N copies N chunk regions at a time on threads; --scheduler tcp://HOST:PORT runs one task per chunk region on a Dask cluster whose workers read SRC and write DST themselves (zarr DST on a shared filesystem or object store; needs ptd\\[distributed])."""


def help_text() -> str:
    """The command's help, with the suffixes and "the other format" of the formats registered
    when it is shown (a format registered after import is listed too)."""
    from ptd.storage.registry import counterpart, entries, writable_formats

    return _HELP.format(
        suffixes="; ".join(
            f"{', '.join(e.suffixes[:-1])} or {e.suffixes[-1]} for {e.label}"
            if len(e.suffixes) > 1
            else f"{e.suffix} for {e.label}"
            for e in entries()
            if e.writable and e.suffixes
        ),
        others=", ".join(f"{f} -> {counterpart(f)}" for f in writable_formats()),
    )


class ConvertCommand(TyperCommand):
    """The ``convert`` command, its help read from the registry each time it is shown."""

    @property  # type: ignore[override]
    def help(self) -> str:
        return help_text()

    @help.setter
    def help(self, value: str | None) -> None:
        pass  # (typer sets it once; the registry's is shown)


def format_name(value: str) -> str:
    """--to's value, checked against the formats ptd writes when it is parsed (so a format
    registered after import, ``register_format``, is one of them)."""
    from ptd.storage.registry import writable_formats

    names = writable_formats()
    if value not in names:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(map(repr, names))}.")
    return value


def complete_format(incomplete: str) -> list[str]:
    """--to's completions: the writable formats registered now."""
    from ptd.storage.registry import writable_formats

    return [name for name in writable_formats() if name.startswith(incomplete)]


class Layout(enum.StrEnum):
    keep = "keep"
    random_access = "random-access"
    training = "training"


class Compression(enum.StrEnum):
    none = "none"
    gzip = "gzip"
    zstd = "zstd"
    blosc = "blosc"
    lz4 = "lz4"


def convert(
    ctx: typer.Context,
    src: str = typer.Argument(
        ..., metavar="SRC", help="The HDF5 file or Zarr store to read.", show_default=False
    ),
    dst: str | None = typer.Argument(
        None,
        metavar="DST",
        help="Where to write (default: SRC with its suffix swapped).",
        show_default=False,
    ),
    to: Annotated[
        str | None,
        typer.Option(
            "--to",
            parser=format_name,
            metavar="FORMAT",
            autocompletion=complete_format,
            help="Target format: h5, zarr, or another registered writable format (default: "
            "from DST's suffix, else the other one).",
        ),
    ] = None,
    chunks: int | None = typer.Option(
        None, "--chunks", min=1, metavar="ROWS", help="Rows per chunk along the first dim."
    ),
    compression: Annotated[
        Compression | None,
        typer.Option("--compression", help="Codec (default: keep each leaf's where possible)."),
    ] = None,
    level: int | None = typer.Option(None, "--level", metavar="N", help="Compression level."),
    layout: Annotated[
        Layout | None,
        typer.Option(
            "--layout",
            help="random-access (alias training): the layout fastest for random minibatches "
            "in DST's format (h5: contiguous, uncompressed; zarr: uncompressed chunks, or "
            "sharded 64 KB zstd chunks at a URL). Default: keep each leaf's.",
        ),
    ] = None,
    batch_size: str | None = typer.Option(
        None,
        "--batch-size",
        metavar="N[,M...]",
        help="Record this batch size (__tensordict__) in DST; every leaf must start with it.",
    ),
    batch_dims: int | None = typer.Option(
        None,
        "--batch-dims",
        min=0,
        metavar="K",
        help="Record each group's batch size of K leading dims, inferred per group "
        "(as `ptd validate --batch-dims K`).",
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing DST."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the plan; write nothing."),
    allow_pickle: bool = typer.Option(
        False, "--allow-pickle", help="Decode pickled zarr entries (trusted files only)."
    ),
    skip_unsupported: bool = typer.Option(
        False,
        "--skip-unsupported",
        help="Copy the rest when some keys cannot be (HDF5 references, vlen sequences, names "
        "zarr reserves); they are listed as not copied. Default: refuse, naming the key.",
    ),
    follow_virtual: bool = typer.Option(False, "--follow-virtual", help=FOLLOW_VIRTUAL_HELP),
    json_: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    verify: bool = typer.Option(
        False,
        "--verify",
        help="Compare DST with SRC afterwards (`ptd diff`: structure and every value, NaN "
        "equal to NaN); exit 1 if they differ or a leaf could not be compared.",
    ),
    rtol: float = typer.Option(
        0.0, "--rtol", min=0.0, help="--verify: relative tolerance (as `ptd diff`)."
    ),
    atol: float = typer.Option(
        0.0, "--atol", min=0.0, help="--verify: absolute tolerance (as `ptd diff`)."
    ),
    equal_nan: bool = typer.Option(
        True, "--equal-nan/--no-equal-nan", help="--verify: whether NaN equals NaN."
    ),
    allow_uncompared: bool = typer.Option(
        False,
        "--allow-uncompared",
        help="--verify: pass although some leaves could not be compared (they are listed).",
    ),
    workers: int = typer.Option(
        1, "--workers", "-w", min=1, metavar="N", help="Copy N chunk regions at a time (threads)."
    ),
    scheduler: str | None = typer.Option(
        None,
        "--scheduler",
        metavar="ADDRESS",
        help="Run on a Dask cluster (tcp://HOST:PORT), one task per chunk region.",
    ),
    storage_option: Annotated[
        list[str] | None,
        typer.Option("--storage-option", "-O", metavar="KEY=VALUE", help=STORAGE_OPTION_HELP),
    ] = None,
    expand: bool = typer.Option(False, "--expand", help=EXPAND_HELP),
) -> None:
    if level is not None and compression is None:
        raise fail("--level needs --compression (gzip, zstd, blosc or lz4)")
    if scheduler is not None and workers != 1:
        raise fail("--workers and --scheduler cannot be used together (the cluster has workers)")
    if batch_size is not None and batch_dims is not None:
        raise fail("--batch-size and --batch-dims cannot be used together")
    tuned = [
        name
        for name, given in (
            ("--rtol", rtol != 0.0),
            ("--atol", atol != 0.0),
            ("--no-equal-nan", not equal_nan),
            ("--allow-uncompared", allow_uncompared),
        )
        if given
    ]
    if tuned and not verify:
        raise fail(f"{', '.join(tuned)}: only with --verify")
    try:
        bs = parse_batch_size(batch_size)
    except typer.BadParameter as err:
        raise fail(f"--batch-size: {err}") from None
    options = parse_storage_options(storage_option)
    with errors_handled(ctx, dst or src):
        import ptd
        from ptd.transfer.convert import ConvertOptions, run
        from ptd.transfer.plan import destination

        # the arguments checked and the stores parsed once; the destination shown in errors
        opts = ConvertOptions.parse(
            src,
            dst,
            to=to,
            chunks=chunks,
            compression=compression.value if compression else None,
            level=level,
            overwrite=overwrite,
            dry_run=dry_run,
            allow_pickle=allow_pickle,
            skip_unsupported=skip_unsupported,
            workers=workers,
            scheduler=scheduler,
            storage_options=options,
            layout=layout.value if layout else None,
            batch_size=bs,
            batch_dims=batch_dims,
            follow_virtual=follow_virtual,
        )
        target = destination(opts).path
    with (
        errors_handled(ctx, src, output=str(target)),
        byte_progress("converting", enabled=not dry_run and not json_) as update,
    ):
        result = run(opts, update)
    checked = None
    if verify and not dry_run:
        with errors_handled(ctx, result.dst):
            from ._reports import counting_progress

            with counting_progress("verifying", enabled=not json_) as progress:
                checked = ptd.verify_conversion(
                    result,
                    rtol=rtol,
                    atol=atol,
                    equal_nan=equal_nan,
                    storage_options=options,
                    progress=progress,
                    follow_virtual=follow_virtual,
                )
    verified = checked is None or checked.verified(allow_uncompared)
    if json_:
        doc = result.to_dict()
        if checked is not None:
            doc["verify"] = checked.to_dict()
            doc["verify"]["verified"] = verified
        print_json(doc)
        if not verified:
            raise typer.Exit(1)
        return
    console = out_console()
    if dry_run:
        console.print(
            Text(
                f"{result.src} ({result.src_format}) -> {result.dst} ({result.dst_format})",
                style="bold",
            )
        )
        print_plan(console, result.plan, expand=expand)
        print_not_copied(console, result, "would not be copied")
        console.print(
            f"dry run: would copy {plural(result.leaves, 'leaf', 'leaves')} "
            f"({plural(result.tensors, 'tensor')}, {plural(result.non_tensors, 'non-tensor')}"
            + (f", {plural(result.tables, 'table')}" if result.tables else "")
            + ") "
            f"in {plural(result.groups, 'group')}, "
            f"{human_bytes(result.nbytes)} of tensor data"
            + ("; DST exists and would be replaced" if result.overwritten else "")
            + ". Nothing was written.",
            markup=False,
        )
        return
    print_summary(console, result)
    if checked is not None:
        from .diff import print_not_compared, render_report

        if checked.same:
            console.print(
                f"  {'verified' if verified else 'compared'}: "
                f"{plural(checked.leaves_compared, 'leaf', 'leaves')}, "
                f"{human_bytes(checked.nbytes_compared)} compared, no difference"
                + (f" ({len(checked.left_out)} not copied, as listed)" if checked.left_out else ""),
                markup=False,
            )
            print_not_compared(console, checked)
            if verified:
                return
            unread = checked.not_compared
            keys = ", ".join(repr(x["key"]) for x in unread[:5])
            more = len(unread) - 5
            raise fail(
                f"{result.dst}: not verified: {plural(len(unread), 'leaf', 'leaves')}"
                f" could not be compared ({keys}{f' and {more} more' if more > 0 else ''}); "
                "--allow-uncompared accepts that"
            )
        render_report(checked)
        raise typer.Exit(1)


_PLAN_COLUMNS = [
    Column("key"),
    Column("kind"),
    Column("shape", "shape"),
    Column("dtype", "dtype"),
    Column("chunks", "chunks"),
    Column("codec", "codec"),
    Column("size", "size", "right"),
]


def _dims(shapes: list[list[int] | None]) -> str:
    """The shapes as one (a dim that differs as ``min–max``); ``contiguous`` for none."""
    if all(s is None for s in shapes):
        return "contiguous"
    return shape_range(shapes) or "…"


def print_plan(console: Any, plan: list[Any], *, expand: bool = False) -> None:
    """A dry run's plan, one row per key (alike sibling groups folded unless ``expand``)."""
    from ptd.report.summary import MIN_ALIKE, summarize_entries

    rows: list[list[Any]] = []
    for r in summarize_entries(plan, min_alike=None if expand else MIN_ALIKE):
        ms = r.members
        if r.kind == "group":
            key = r.key + "/" + (f" ×{r.count}" if r.folded else "")
            length = ""
            if r.folded and r.lengths is not None:
                lo, hi = r.lengths
                length = f"length {lo}" if lo == hi else f"length {lo}–{hi}"
            rows.append([key, "group", Bare(length), "", "", "", ""])
            continue
        p = r.first
        if p.kind == "link":  # made in the copy: no data of its own
            rows.append([r.key, "link", "", p.dtype or "", "", "", ""])
            continue
        copied = p.kind not in ("non_tensor", "references")
        codecs = {f"{m.src_compression or '-'} -> {m.dst_compression or '-'}" for m in ms}
        nbytes = sum(m.nbytes or 0 for m in ms)
        rows.append(
            [
                r.key,
                p.kind,
                _dims([m.shape for m in ms]),
                p.dtype or "",
                f"{_dims([m.src_chunks for m in ms])} -> {_dims([m.dst_chunks for m in ms])}"
                if copied
                else "",
                " | ".join(sorted(codecs)) if copied else "",
                human_bytes(nbytes) if nbytes else "",
            ]
        )
    if rows:
        print_listing(console, _PLAN_COLUMNS, rows)


def print_summary(console: Any, result: Any, name: Callable[[str], str] = str) -> None:
    """The summary of a finished conversion (``name`` shortens the paths shown)."""
    line = Text()
    line.append("converted ", style="bold green")
    line.append(
        f"{name(result.src)} ({result.src_format}) -> {name(result.dst)} ({result.dst_format})"
    )
    console.print(line)
    rate = result.throughput
    console.print(
        f"  {plural(result.leaves, 'leaf', 'leaves')} ({plural(result.tensors, 'tensor')}, "
        f"{plural(result.non_tensors, 'non-tensor')}"
        + (f", {plural(result.tables, 'table')}" if result.tables else "")
        + f"), {plural(result.groups, 'group')}; "
        f"{human_bytes(result.nbytes)} of tensor data stored in {human_bytes(result.stored_nbytes)} "
        f"(ratio {format_ratio(result.ratio)}); "
        + (
            f"{human_bytes(result.src_bytes)} -> {human_bytes(result.dst_bytes)} on disk"
            if result.src_bytes is not None
            else f"{human_bytes(result.dst_bytes)} on disk"
        )
        + f"; {result.seconds:.2f} s"
        + (f" ({human_bytes(rate)}/s)" if rate else ""),
        markup=False,
    )
    if getattr(result, "scheduler", None):
        console.print(
            f"  {plural(result.regions, 'task')} on the Dask cluster at {result.scheduler}",
            markup=False,
        )
    elif getattr(result, "workers", 1) > 1:
        console.print(
            f"  {plural(result.regions, 'chunk region')} copied by {result.workers} threads",
            markup=False,
        )
    for note in result.notes:
        console.print(f"  note: {note}", markup=False)
    print_not_copied(console, result)


def print_not_copied(console: Any, result: Any, what: str = "not copied") -> None:
    """What of the source is not in the destination: a heading that counts every entry of
    ``result.not_copied`` (as many as ``--json`` lists), then one line per key, and one line per
    attribute or property with the keys it applies to (``_some`` names how many).
    """
    from ptd.format.keynames import brief_key  # (the library loads when a command runs)

    items = getattr(result, "not_copied", None) or []
    if not items:
        return
    nodes = [i for i in items if not i.get("property") and not i.get("attr")]
    # attributes a destination cannot hold: one line per attribute name and reason
    attrs: dict[tuple[str, str], list[str]] = {}
    # properties of copied leaves that are not kept, one line per kind with its keys
    props: dict[tuple[str, str], list[str]] = {}
    for item in items:
        if item.get("property"):
            props.setdefault((item["property"], item["reason"]), []).append(item["key"])
        elif item.get("attr"):
            attrs.setdefault((item["attr"], item["reason"]), []).append(item["key"])
    kinds = [
        plural(n, one, many)
        for n, one, many in (
            (len(nodes), "key", "keys"),
            (sum(map(len, attrs.values())), "attribute", "attributes"),
            (sum(map(len, props.values())), "property", "properties"),
        )
        if n
    ]
    console.print(
        f"  {plural(len(items), 'item')} {what}"
        + (f" ({', '.join(kinds)})" if len(kinds) > 1 else "")
        + ":",
        markup=False,
        style="yellow",
    )
    for item in nodes:
        console.print(f"  {what}: {brief_key(item['key'])}: {item['reason']}", markup=False)
    for (attr, reason), keys in attrs.items():
        console.print(
            f"  {what}: attribute {attr!r} of {_some(keys)}: {reason}", markup=False, style="yellow"
        )
    for (prop, reason), keys in props.items():
        console.print(f"  {what}: {prop} of {_some(keys)}: {reason}", markup=False, style="yellow")


def _some(keys: list[str]) -> str:
    """The first keys of a list, and how many more (so that the keys a line stands for can be
    counted from it)."""
    return ", ".join(keys[:3]) + (f" (and {len(keys) - 3} more)" if len(keys) > 3 else "")
