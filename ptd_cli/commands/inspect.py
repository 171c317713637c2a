"""``ptd inspect PATH``: the format, the batch size and a tree of every group and leaf."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from .._common import (
    EXPAND_HELP,
    FOLLOW_VIRTUAL_HELP,
    STORAGE_OPTION_HELP,
    Bare,
    Column,
    errors_handled,
    format_ratio,
    format_shape,
    human_bytes,
    out_console,
    parse_storage_options,
    plural,
    print_json,
    print_listing,
    range_dims,
)

if TYPE_CHECKING:
    from ptd.report.info import EntryInfo, StoreInfo
    from ptd.report.summary import ListingRow

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
    follow_virtual: bool = typer.Option(False, "--follow-virtual", help=FOLLOW_VIRTUAL_HELP),
    storage_option: Annotated[
        list[str] | None,
        typer.Option("--storage-option", "-O", metavar="KEY=VALUE", help=STORAGE_OPTION_HELP),
    ] = None,
    expand: bool = typer.Option(False, "--expand", help=EXPAND_HELP),
) -> None:
    options = parse_storage_options(storage_option)
    with errors_handled(ctx, path):
        import ptd

        result = ptd.info(path, depth=depth, attrs=attrs, storage_options=options)
    checked = None
    if stats:
        from ._reports import counting_progress

        with (
            counting_progress("inspect --stats", enabled=True) as progress,
            errors_handled(ctx, path),
        ):
            from ptd.report.datacheck import HISTOGRAM_BINS

            checked = ptd.validate(
                path,
                storage_options=options,
                data=True,
                follow_virtual=follow_virtual,
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
    render(result, show_attrs=attrs, checked=checked, expand=expand)


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
        if kind == "pickle":  # never decoded without --allow-pickle: say what it is
            kind = "pickled"
        return Text(f"{kind} stack" if e.stack else kind, style="magenta")
    if e.kind == "table":
        return Text(e.reason or "table", style="cyan")
    if e.kind == "reference":
        return Text(e.reason or "reference", style="cyan")
    return Text(f"unsupported: {e.reason or e.storage_dtype}", style="red")


def _link_target(link: str) -> str:
    """``"soft link to /obs"`` -> ``"/obs"``, ``"hard link to 'obs'"`` -> ``"obs"`` (the JSON
    keeps the full text)."""
    for head in ("soft link to ", "hard link to "):
        if link.startswith(head):
            return link[len(head) :].strip("'")
    return link


def _key_text(shown: str, r: ListingRow[EntryInfo]) -> Text:
    """A row's key (``shown``: its name or its whole key), ``/`` after a group, ``×N`` after a
    folded one, the target of a link."""
    e = r.first
    key = Text(
        shown + ("/" if r.kind == "group" else ""), style="bold" if r.kind == "group" else ""
    )
    if r.folded:
        key.append(f" ×{r.count}", style="bold cyan")
    if e.link and not r.folded:
        key.append(" -> " + _link_target(e.link), style="dim italic")
    return key


def _sum(values: list[int | None]) -> int | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def _codec_text(e: EntryInfo) -> str:
    """The pipeline in order, lossy steps marked: ``lossy:bitround(keepbits=10)+zstd(3)``."""
    if e.pipeline is None:
        return e.compression or "-"
    steps = [("lossy:" if c["lossy"] else "") + c["step"] for c in e.pipeline]
    return "+".join(steps) or "-"


def _properties_text(e: EntryInfo) -> str:
    """What the array states beyond its codecs, where it is not the default: the fill value,
    dimension names, the dims it can grow along, an unusual layout."""
    parts = []
    if e.fill_value is not None:
        parts.append(f"fill={e.fill_value}")
    if e.dimension_names is not None:
        parts.append("dims=[" + ",".join("-" if n is None else n for n in e.dimension_names) + "]")
    if e.resizable and e.maxshape is not None:
        parts.append(
            "maxshape=[" + ",".join("∞" if m is None else str(m) for m in e.maxshape) + "]"
        )
    if e.layout in ("compact", "virtual", "external"):
        parts.append(f"layout={e.layout}")
    return " ".join(parts)


def _ratio_cell(ms: Sequence[EntryInfo], nbytes: int | None, stored: int | None) -> str:
    """The compression ratio, or where the data is when it is not in the store (``virtual``,
    ``external``: no ratio, the stored bytes are not the data's)."""
    elsewhere = sorted({m.layout or "elsewhere" for m in ms if m.sources is not None})
    if elsewhere:
        return "|".join(elsewhere)
    return format_ratio(nbytes / stored if nbytes is not None and stored else None)


def _entry_cells(
    r: ListingRow[EntryInfo], show_attrs: bool, sharded: bool, props: bool = False
) -> list[Any]:
    """The cells after the key of one row (a row of several members shows their shapes as
    ranges and their sizes summed)."""
    e, ms = r.first, r.members
    if r.kind == "group":
        shape = Bare()
        if r.folded and r.lengths is not None:
            lo, hi = r.lengths
            shape.append("length ")
            shape.append(str(lo) if lo == hi else f"{lo}–{hi}", style="bold cyan")
        else:
            batch = range_dims([m.batch_size for m in ms])
            shape.append("batch ")
            shape.append("?" if batch is None else "[" + ", ".join(batch) + "]", style="bold cyan")
        sources = {_source(m.batch_size_source, m.stored_batch_size) for m in ms}
        shape.append(f" ({', '.join(sorted(sources))})", style="dim")
        cells: list[Any] = [_type_text(e), shape, "", "", "", "", "", ""] + [""] * sharded
        cells += [""] * props
    else:
        merged = range_dims([m.shape for m in ms])
        chunks = (
            "-"
            if all(m.chunks is None for m in ms)
            else "[" + ", ".join(range_dims([m.chunks for m in ms]) or ["…"]) + "]"
        )
        shards: list[list[int] | None] = [m.shards for m in ms if m.shards is not None]
        codecs = sorted({_codec_text(m) for m in ms})
        nbytes = _sum([m.nbytes for m in ms])
        stored = _sum([m.stored_nbytes for m in ms])
        per_row = [m.random_row_bytes for m in ms if m.random_row_bytes is not None]
        cells = [
            _type_text(e),
            format_shape(merged, min(m.batch_dims for m in ms)),
            chunks,
            *(
                ["[" + ", ".join(range_dims(shards) or ["…"]) + "]" if shards else ""]
                if sharded
                else []
            ),
            "|".join(codecs),
            human_bytes(nbytes) if nbytes is not None else "",
            human_bytes(stored) if stored is not None else "?",
            _ratio_cell(ms, nbytes, stored) if e.kind in ("tensor", "table") else "",
            _per_row_range(per_row),
            *(
                [Bare(" | ".join(sorted({_properties_text(m) for m in ms} - {""})))]
                if props
                else []
            ),
        ]
    if show_attrs:
        cells.append(_attrs(e.attrs) if e.attrs else "")
    return cells


def _per_row_range(values: list[int]) -> Text | str:
    if not values:
        return ""
    lo, hi = min(values), max(values)
    if lo == hi:
        return _per_row(lo)
    return Text(f"{human_bytes(lo)}–{human_bytes(hi)}", style="yellow" if hi >= 1024 else "")


def _tree_prefixes(entries: Sequence[Any]) -> list[str]:
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


def render(
    info: StoreInfo, *, show_attrs: bool = False, checked: Any = None, expand: bool = False
) -> None:
    """The text of ``ptd inspect``: alike sibling groups folded unless ``expand``."""
    console = out_console()
    head = Text()
    head.append(info.path + (f"/{info.inner}" if info.inner else ""), style="bold")
    head.append(f"  {info.format}", style="cyan")
    if info.zarr_format is not None:
        head.append(f" v{info.zarr_format}", style="cyan")
        if info.zarr_format == 2:
            head.append(" (read-only)", style="dim")
    head.append("  batch_size=")
    head.append(str(info.batch_size), style="bold cyan")
    head.append(f" ({_source(info.batch_size_source, info.stored_batch_size)})", style="dim")
    if info.userblock_size:
        head.append(f"  userblock={human_bytes(info.userblock_size)}", style="cyan")
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
    from ptd.report.summary import MIN_ALIKE, summarize_entries

    rows: list[list[Any]] = []
    line_keys: list[Any] = []
    # a shards column only where an array is sharded (its chunks are the inner chunks)
    sharded = any(e.shards is not None for e in info.entries)
    # a properties column only where an array states a fill value, dim names, growth...
    props = any(_properties_text(e) for e in info.entries)
    listing = summarize_entries(info.entries, min_alike=None if expand else MIN_ALIKE)
    for prefix, r in zip(_tree_prefixes(listing), listing, strict=True):
        key = Text(prefix, style="dim")
        key.append_text(_key_text(r.name, r))
        rows.append([key, *_entry_cells(r, show_attrs, sharded, props)])
        line_keys.append(_key_text(r.key, r))
    if rows:
        columns = [
            Column("key"),
            Column("type"),
            Column("shape", "shape"),
            Column("chunks", "chunks"),
            *([Column("shards", "shards")] if sharded else []),
            Column("codec", "codec"),
            Column("size", "size", "right"),
            Column("stored", "stored", "right"),
            Column("ratio", "ratio", "right"),
            Column("per row", "per_row", "right"),
            *([Column("properties", "properties")] if props else []),
        ]
        if show_attrs:
            columns.append(Column("attrs", "attrs"))
        print_listing(console, columns, rows, line_keys=line_keys)
    t = info.totals
    foot = Text()
    foot.append("total: ", style="bold")
    foot.append(
        f"{plural(t.groups, 'group')}, {plural(t.tensors, 'tensor')}, "
        f"{plural(t.non_tensors, 'non-tensor')}"
        + (f", {plural(t.tables, 'table')}" if t.tables else "")
        + (f", {plural(t.references, 'reference column')}" if t.references else "")
        + (f", {t.unsupported} unsupported" if t.unsupported else "")
        + f"; {human_bytes(t.nbytes)} logical, {human_bytes(t.stored_nbytes)} stored"
        + f" ({format_ratio(t.ratio)}), {human_bytes(t.file_bytes)} on disk"
    )
    if info.depth is not None:
        foot.append(f"  (listed to depth {info.depth})", style="dim")
    console.print(foot)
    if checked is not None:
        from .validate import render_lint, render_problems

        if stats:
            st_columns = [Column("leaf")]
            st_columns += [Column(c, c, "right") for c in ("min", "max", "mean", "std", "nan")]
            st_columns.append(Column("histogram or counts", "histogram"))
            print_listing(console, st_columns, [[k, *_stat_cells(st)] for k, st in stats.items()])
            for k, st in stats.items():
                if st.get("channels"):
                    console.print(Text(f"{k}: {channel_summary(st)}"), soft_wrap=True)

        render_problems(console, [p for p in checked.problems if p.check == "data"], expand=expand)
        if checked.lint:
            render_lint(console, checked.lint, expand=expand)
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


def value_counts(values: list[list[Any]]) -> str:
    """``0:17 1:15 2:20`` (a leaf's few distinct values and how many elements hold each)."""
    return " ".join(f"{v}:{c}" for v, c in values)


def channel_summary(st: dict[str, Any]) -> str:
    """``per channel (axis 1): mean 127.4 / 128.1 / 126.9, min 0 / 0 / 0, max 255 / 255 / 255``."""
    ch = st["channels"]

    def row(name: str) -> str:
        return f"{name} " + " / ".join(f"{c[name]:.4g}" for c in ch)

    return f"per channel (axis {st['channel_axis']}): " + ", ".join(
        row(n) for n in ("mean", "min", "max")
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
        (
            value_counts(st["values"])
            if st.get("values")
            else Text(sparkline(st.get("histogram")), style="cyan")
        ),
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
