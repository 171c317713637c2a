"""``ptd inspect PATH``: the format, the batch size and a tree of every group and leaf."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from .._common import (
    STORAGE_OPTION_HELP,
    errors_handled,
    format_ratio,
    format_shape,
    human_bytes,
    out_console,
    parse_storage_options,
    plural,
    print_json,
)

if TYPE_CHECKING:
    from ptd.report.info import EntryInfo, StoreInfo

SHORT_HELP = "Show a store's format, batch size and every group and leaf (metadata only)."

HELP = """Show what an HDF5 file or Zarr v3 store holds, from its metadata only (no array data is read): the format (detected from the content), the batch size (stored in the `__tensordict__` attribute, or inferred), and a tree of every group and leaf with its shape (batch dims first, set apart by ¦), torch dtype, chunks, codec, logical and stored bytes and their ratio, and the bytes read and decoded per random row ("per row": a whole chunk when compressed; `ptd convert --layout random-access` brings it down to the row). With --json, one JSON document on stdout (field names documented in `ptd.info`); save it to use as a `ptd validate --schema`."""


def inspect(
    ctx: typer.Context,
    path: str = typer.Argument(
        ..., metavar="PATH", help="An HDF5 file or a Zarr v3 store.", show_default=False
    ),
    json_: bool = typer.Option(False, "--json", help="Print one JSON document to stdout."),
    depth: int | None = typer.Option(
        None, "--depth", min=0, help="List entries down to this many levels (totals cover all)."
    ),
    attrs: bool = typer.Option(False, "--attrs", help="Show user attributes too."),
    stats: bool = typer.Option(
        False,
        "--stats",
        help="Read every chunk: min/max/mean/std/NaN and a histogram per leaf, then the lint.",
    ),
    storage_option: Annotated[
        list[str] | None,
        typer.Option("--storage-option", "-O", metavar="KEY=VALUE", help=STORAGE_OPTION_HELP),
    ] = None,
) -> None:
    options = parse_storage_options(storage_option)
    with errors_handled(ctx, path):
        import ptd

        result = ptd.info(path, depth=depth, attrs=attrs, storage_options=options)
    checked = None
    if stats:
        from ._reports import counting_progress

        with counting_progress("inspect --stats", enabled=True) as progress:
            with errors_handled(ctx, path):
                from ptd.report.datacheck import HISTOGRAM_BINS

                checked = ptd.validate(
                    path,
                    storage_options=options,
                    data=True,
                    progress=progress,
                    histogram_bins=HISTOGRAM_BINS,
                )
    if json_:
        doc = result.to_dict()
        if checked is not None:
            doc["stats"] = checked.stats
            doc["lint"] = [p.to_dict() for p in checked.lint]
            doc["data_problems"] = [p.to_dict() for p in checked.problems if p.check == "data"]
        print_json(doc)
        return
    render(result, show_attrs=attrs, checked=checked)


inspect.__doc__ = HELP


def _source(src: str | None, stored: list[int] | None) -> str:
    if src == "stored":
        return "stored"
    if src == "inferred" and stored is not None:
        return f"inferred; stored {stored} does not fit"
    return src or ""


def _type_text(e: EntryInfo) -> Text:
    if e.kind == "group":
        return Text("group", style="bold")
    if e.kind == "tensor":
        return Text(str(e.dtype), style="green")
    if e.kind == "non_tensor":
        kind = e.non_tensor_kind or "other"
        return Text(f"{kind} stack" if e.stack else kind, style="magenta")
    return Text(f"unsupported: {e.reason or e.storage_dtype}", style="red")


def _link_target(link: str) -> str:
    """``"soft link to /obs"`` -> ``"/obs"``, ``"hard link to 'obs'"`` -> ``"obs"`` (the JSON
    keeps the full text)."""
    for head in ("soft link to ", "hard link to "):
        if link.startswith(head):
            return link[len(head) :].strip("'")
    return link


def _tree_prefixes(entries: list[EntryInfo]) -> list[str]:
    """Tree glyphs for each entry of a depth-first, parents-first listing."""
    n = len(entries)
    last = [True] * n
    # an entry is not last if a later entry at the same depth shares its parent
    for i, e in enumerate(entries):
        parent = e.key.rpartition("/")[0]
        for j in range(i + 1, n):
            f = entries[j]
            if f.depth < e.depth:
                break
            if f.depth == e.depth and f.key.rpartition("/")[0] == parent:
                last[i] = False
                break
    out = []
    open_levels: list[bool] = []  # for each ancestor depth: does it have later siblings?
    for i, e in enumerate(entries):
        del open_levels[e.depth - 1 :]
        stem = "".join("│   " if more else "    " for more in open_levels)
        out.append(stem + ("└── " if last[i] else "├── "))
        open_levels.append(not last[i])
    return out


def render(info: StoreInfo, *, show_attrs: bool = False, checked: Any = None) -> None:
    console = out_console()
    head = Text()
    head.append(info.path, style="bold")
    head.append(f"  {info.format}", style="cyan")
    if info.zarr_format is not None:
        head.append(f" v{info.zarr_format}", style="cyan")
        if info.zarr_format == 2:
            head.append(" (read-only)", style="dim")
    head.append("  batch_size=")
    head.append(str(info.batch_size), style="bold cyan")
    head.append(f" ({_source(info.batch_size_source, info.stored_batch_size)})", style="dim")
    console.print(head)
    for where, problem in _metadata_problems(info):
        warn = Text("warning: ", style="bold yellow")
        warn.append(f"{where}: {problem}" if where else problem)
        console.print(warn)
    for item in info.skipped:
        warn = Text("skipped: ", style="bold yellow")
        warn.append(f"{item['key']}: {item['reason']}")
        console.print(warn)
    for c in info.consolidated:
        warn = Text("warning: ", style="bold yellow")
        warn.append(f"{c['code']}: {c['message']}")
        console.print(warn)
    if info.consolidated:
        console.print(
            Text(
                "  the listing below is what readers trusting the consolidated metadata see; "
                "`ptd validate` checks the real nodes",
                style="dim",
            )
        )
    stats: dict[str, Any] = checked.stats if checked is not None else {}
    if info.attrs:
        console.print(Text(f"attrs: {_attrs(info.attrs)}", style="dim"))
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold dim")
    for col, kw in (
        ("key", {"no_wrap": True}),
        ("type", {"no_wrap": True}),
        ("shape", {"overflow": "fold"}),
        ("chunks", {"overflow": "fold"}),
        ("codec", {"overflow": "fold"}),
        ("size", {"justify": "right", "no_wrap": True}),
        ("stored", {"justify": "right", "no_wrap": True}),
        ("ratio", {"justify": "right", "no_wrap": True}),
        ("per row", {"justify": "right", "no_wrap": True}),
    ):
        table.add_column(col, **kw)
    if show_attrs:
        table.add_column("attrs", overflow="fold")
    for prefix, e in zip(_tree_prefixes(info.entries), info.entries, strict=True):
        key = Text(prefix, style="dim")
        key.append(
            e.name + ("/" if e.kind == "group" else ""), style="bold" if e.kind == "group" else ""
        )
        if e.link:
            key.append(" -> " + _link_target(e.link), style="dim italic")
        if e.kind == "group":
            shape = Text("batch ")
            shape.append(str(e.batch_size), style="bold cyan")
            shape.append(f" ({_source(e.batch_size_source, e.stored_batch_size)})", style="dim")
            row: list[Any] = [key, _type_text(e), shape, "", "", "", "", "", ""]
        else:
            row = [
                key,
                _type_text(e),
                format_shape(e.shape, e.batch_dims),
                "-"
                if e.chunks is None
                else str(e.chunks) + (f" in {e.shards}" if e.shards else ""),
                e.compression or "-",
                human_bytes(e.nbytes) if e.nbytes is not None else "",
                human_bytes(e.stored_nbytes) if e.stored_nbytes is not None else "?",
                format_ratio(e.ratio) if e.kind == "tensor" else "",
                _per_row(e.random_row_bytes),
            ]
        if show_attrs:
            row.append(_attrs(e.attrs) if e.attrs else "")
        table.add_row(*row)
    if info.entries:
        console.print(table)
    t = info.totals
    foot = Text()
    foot.append("total: ", style="bold")
    foot.append(
        f"{plural(t.groups, 'group')}, {plural(t.tensors, 'tensor')}, "
        f"{plural(t.non_tensors, 'non-tensor')}"
        + (f", {t.unsupported} unsupported" if t.unsupported else "")
        + f"; {human_bytes(t.nbytes)} logical, {human_bytes(t.stored_nbytes)} stored"
        + f" ({format_ratio(t.ratio)}), {human_bytes(t.file_bytes)} on disk"
    )
    if info.depth is not None:
        foot.append(f"  (listed to depth {info.depth})", style="dim")
    console.print(foot)
    if checked is not None:
        from .validate import render_lint

        if stats:
            st_table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold dim")
            st_table.add_column("leaf", no_wrap=True)
            for col in ("min", "max", "mean", "std", "nan"):
                st_table.add_column(col, justify="right", no_wrap=True)
            st_table.add_column("histogram (min..max)", no_wrap=True)
            for leaf_key, st in stats.items():
                st_table.add_row(leaf_key, *_stat_cells(st))
            console.print(st_table)

        for p in checked.problems:
            if p.check == "data":
                line = Text(
                    f"{p.severity}: ", style="bold red" if p.severity == "error" else "yellow"
                )
                line.append(f"{p.code}: {p.message}")
                console.print(line)
        if checked.lint:
            render_lint(console, checked.lint)
        else:
            console.print(Text("lint: nothing found", style="dim"))


_BARS = "▁▂▃▄▅▆▇█"


def sparkline(counts: list[int] | None) -> str:
    """A histogram as one line of block characters (empty bins are spaces)."""
    if not counts:
        return ""
    top = max(counts) or 1
    return "".join(
        " " if c == 0 else _BARS[min(len(_BARS) - 1, (c * len(_BARS) - 1) // top)] for c in counts
    )


def _stat_cells(st: dict[str, Any] | None) -> list[Any]:
    if not st:
        return ["", "", "", "", "", ""]

    def num(v: Any) -> str:
        return "" if v is None else f"{v:.4g}"

    nan = st.get("nan") or 0
    return [
        num(st.get("min")),
        num(st.get("max")),
        num(st.get("mean")),
        num(st.get("std")),
        Text(str(nan), style="bold red") if nan else "",
        Text(sparkline(st.get("histogram")), style="cyan"),
    ]


def _metadata_problems(info: StoreInfo) -> list[tuple[str, str]]:
    """(key, problem) for the root and each listed group whose ``__tensordict__`` attribute
    was ignored, or part of it."""
    out = [("", info.metadata_problem)] if info.metadata_problem else []
    out += [(e.key, e.metadata_problem) for e in info.entries if e.metadata_problem]
    return out


def _attrs(attrs: dict[str, Any] | None) -> str:
    if not attrs:
        return ""
    return ", ".join(f"{k}={v!r}" for k, v in attrs.items())


def _per_row(n: int | None) -> Text | str:
    """Bytes decoded per random row, in yellow when it is a whole chunk's worth (a kB or more)."""
    if n is None:
        return ""
    return Text(human_bytes(n), style="yellow" if n >= 1024 else "")
