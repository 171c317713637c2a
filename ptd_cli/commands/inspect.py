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

HELP = """Show what an HDF5 file or Zarr v3 store holds, from its metadata only (no array data is read): the format (detected from the content), the batch size (stored in the `__tensordict__` attribute, or inferred), and a tree of every group and leaf with its shape (batch dims first, set apart by ¦), torch dtype, chunks, codec, logical and stored bytes and their ratio. With --json, one JSON document on stdout (field names documented in `ptd.info`); save it to use as a `ptd validate --schema`."""


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
    storage_option: Annotated[
        list[str] | None,
        typer.Option("--storage-option", "-O", metavar="KEY=VALUE", help=STORAGE_OPTION_HELP),
    ] = None,
) -> None:
    options = parse_storage_options(storage_option)
    with errors_handled(ctx, path):
        import ptd

        result = ptd.info(path, depth=depth, attrs=attrs, storage_options=options)
    if json_:
        print_json(result.to_dict())
        return
    render(result, show_attrs=attrs)


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


def render(info: StoreInfo, *, show_attrs: bool = False) -> None:
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
            row: list[Any] = [key, _type_text(e), shape, "", "", "", "", ""]
        else:
            row = [
                key,
                _type_text(e),
                format_shape(e.shape, e.batch_dims),
                "-" if e.chunks is None else "[" + ", ".join(map(str, e.chunks)) + "]",
                e.compression or "-",
                human_bytes(e.nbytes) if e.nbytes is not None else "",
                human_bytes(e.stored_nbytes) if e.stored_nbytes is not None else "?",
                format_ratio(e.ratio) if e.kind == "tensor" else "",
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
