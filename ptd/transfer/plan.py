"""Planning a conversion: where it writes (the destination and its format), whether it may,
and what happens to each entry (its chunks and codec in the destination).

Chunks: ``chunks=ROWS`` chunks every tensor by ``ROWS`` rows along its first dim. Otherwise a
chunked source keeps its chunk shape, except chunks over :data:`CHUNK_MAX`; a contiguous (h5)
source, or such large chunks, get chunks of about :data:`CHUNK_TARGET` when the destination is
zarr (or compressed), and stay contiguous on h5.

Shards: a sharded source keeps its shards and inner chunks where the destination's backend
stores shards (zarr), with or without a new ``compression`` (it applies to the inner chunks);
elsewhere (h5) its inner chunks become the chunks. ``chunks=ROWS`` writes unsharded chunks of
``ROWS`` rows, and a ``layout`` chooses its own chunks and shards.
"""

from __future__ import annotations

import math
import os
import posixpath
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ptd.errors import (
    ConvertError,
    Option,
    PickleRefusedError,
    PtdValueError,
    ReadOnlyError,
    StoreExistsError,
    StoreNotFoundError,
    UnsupportedDtypeError,
)
from ptd.format.keynames import brief_key
from ptd.format.names import ENCODING_PICKLE
from ptd.format.tables import describe_table, is_table, numeric_fields_only
from ptd.storage import remote
from ptd.storage.api import ArrayMeta, Backend, NodeKind, Path, ValueKind
from ptd.storage.location import StoreLocation
from ptd.storage.properties import ArrayProperties, Stage
from ptd.storage.registry import (
    counterpart,
    entry,
    format_of_suffix,
    get_backend,
    policy,
    suffixes,
)
from ptd.storage.stores import detect, with_suffix_of
from ptd.transfer.encoding import describe_pipeline, leaf_encoding
from ptd.transfer.layouts import LeafLayout, balanced_rows, random_access
from ptd.transfer.options import ConvertOptions, ConvertResult, LeafPlan

if TYPE_CHECKING:
    from ptd.report.scan import Scan

__all__ = [
    "CHUNK_MAX",
    "CHUNK_TARGET",
    "SMALL_CONTIGUOUS",
    "SOFT_LINK_NOTE",
    "carried_references",
    "check_destination",
    "copyable",
    "destination",
    "dst_chunks",
    "escaped_keys",
    "kept_shards",
    "leaf_target",
    "left_out_keys",
    "name_problem",
    "not_copyable",
    "paths_note",
    "plan_leaves",
    "refusal_error",
    "refusals",
    "resolve_destination",
    "soft_links",
]

#: target size of an automatic chunk, and the largest source chunk that is kept as is
CHUNK_TARGET = 8 << 20
CHUNK_MAX = 64 << 20


# ----------------------------------------------------------------------------- destination
def destination(opts: ConvertOptions, src_format: str | None = None) -> StoreLocation:
    """The destination with its format: ``opts.to``, else ``dst``'s suffix's, else the other
    format than the source's (read from ``src`` unless ``src_format`` is given). Without a
    ``dst``: ``src`` with its suffix swapped (``data.h5`` -> ``data.zarr``)."""
    to = opts.to or (format_of_suffix(opts.dst.path) if opts.dst is not None else None)
    if to is None and opts.dst is not None:
        ext = _suffix(opts.dst.path)
        if ext:
            known = ", ".join(suffixes())
            raise PtdValueError(
                f"cannot tell the format of the destination {opts.dst.path} from its suffix "
                f"{ext!r}: name it with one of {known}, or pass ",
                Option("to", "h5"),
                " or ",
                Option("to", "zarr"),
                path=opts.dst.path,
            )
    if to is None:
        src_format = src_format or detect(opts.src).format
        to = counterpart(src_format)
    if opts.dst is not None:
        return opts.dst.with_format(to)
    dst = with_suffix_of(opts.src, to)
    if opts.default_dst_options is not None:
        dst = StoreLocation(dst.path, opts.default_dst_options, to)
    return dst


def _suffix(path: str) -> str:
    """A path's (or URL's) suffix, ``""`` for none."""
    stripped = path.rstrip("/\\")
    return posixpath.splitext(posixpath.basename(stripped.replace("\\", "/")))[1]


def resolve_destination(
    src: Any,
    dst: Any = None,
    to: str | None = None,
    *,
    storage_options: dict[str, Any] | None = None,
) -> tuple[str, str]:
    """``(dst path, dst format)`` as :func:`ptd.convert` chooses them (reads ``src``'s format
    when neither ``to`` nor ``dst``'s suffix names one; a URL ``src`` with
    ``storage_options``)."""
    loc = destination(ConvertOptions.parse(src, dst, to=to, storage_options=storage_options))
    assert loc.format is not None
    return loc.path, loc.format


def check_destination(src: StoreLocation, dst: StoreLocation, opts: ConvertOptions) -> bool:
    """Refuse a destination the conversion may not write: an existing one without
    ``overwrite``, a missing or (unless a dry run) unwritable parent directory; a URL must be
    zarr, not the source itself, in an existing bucket. Returns whether ``dst`` exists."""
    exists = _check_remote_destination(src, dst) if dst.is_remote else os.path.lexists(dst.path)
    if exists and not opts.overwrite:
        raise StoreExistsError(
            f"{dst.path} already exists; pass ",
            Option("overwrite"),
            " to replace it",
            path=dst.path,
        )
    if not dst.is_remote:
        parent = os.path.dirname(os.path.abspath(dst.path))
        if not os.path.isdir(parent):
            raise StoreNotFoundError(
                f"cannot write {dst.path}: the directory {parent} does not exist"
            )
        if not opts.dry_run and not os.access(parent, os.W_OK | os.X_OK):
            raise ReadOnlyError(
                f"cannot write {dst.path}: permission denied on the directory {parent}"
            )
    return exists


def _check_remote_destination(src: StoreLocation, dst: StoreLocation) -> bool:
    """A URL destination: zarr only, not the source itself, its bucket present. Returns
    whether something is there already."""
    assert dst.format is not None
    if not policy(dst.format).writes_remote:
        raise PtdValueError(
            f"cannot write {dst.path}: HDF5 destinations must be local paths (h5py writes local "
            "files); convert to zarr (",
            Option("to", "zarr"),
            "), or write the HDF5 file locally and upload it",
            path=dst.path,
        )
    if dst.path.rstrip("/") == src.path.rstrip("/"):
        raise PtdValueError(f"cannot convert {src.path} onto itself: choose another destination")
    fs, path, kind = remote.probe(dst.path, dst.options)
    if kind is None:
        remote.check_bucket(fs, path, dst.path)
    return kind is not None


# ----------------------------------------------------------------------------- chunks
#: a source array chunked only because its format chunks everything (zarr), of one chunk and
#: at most this many bytes, is contiguous in a destination that stores arrays contiguously
SMALL_CONTIGUOUS = 1 << 20


def dst_chunks(
    meta: ArrayMeta, rows: int | None, contiguous: bool, compressed: bool
) -> tuple[int, ...] | None:
    """The destination's chunk shape for a leaf (None: contiguous; see the module doc);
    ``contiguous``: the destination may store it unchunked
    (``FormatPolicy.stores_contiguous``)."""
    shape = tuple(meta.shape)
    if not shape or 0 in shape:
        return None
    row_bytes = max(1, math.prod(shape[1:]) * meta.dtype.itemsize)
    if rows is not None:
        return (max(1, min(int(rows), shape[0])),) + shape[1:]
    src = tuple(meta.chunks) if meta.chunks is not None else None
    if src is not None and math.prod(src) * meta.dtype.itemsize <= CHUNK_MAX:
        return src
    if contiguous and not compressed and src is None:
        return None  # contiguous, like the source
    return (balanced_rows(shape[0], CHUNK_TARGET // row_bytes),) + shape[1:]


def _bare_properties(meta: ArrayMeta) -> ArrayProperties:
    return ArrayProperties(
        meta.path,
        tuple(meta.shape),
        meta.dtype,
        meta.chunks,
        meta.shards,
        (),
        None,
        None,
        None,
        dict(meta.attrs),
        {},
        "chunked" if meta.chunks else "contiguous",
    )


def _one_small_chunk(meta: ArrayMeta, props: ArrayProperties) -> bool:
    shape = tuple(meta.shape)
    if not shape or meta.chunks is None or props.resizable:
        return False
    whole = all(c >= s for c, s in zip(meta.chunks, shape, strict=False))
    return whole and math.prod(shape) * meta.dtype.itemsize <= SMALL_CONTIGUOUS


def leaf_target(
    meta: ArrayMeta,
    opts: ConvertOptions,
    fmt: str,
    notes: list[str],
    remote: bool,
    props: ArrayProperties | None = None,
    src: type[Backend] | None = None,
) -> LeafLayout:
    """Chunks, shards and encoding of a tensor leaf in the ``fmt`` destination: the layout
    ``opts.layout`` asks for, else the source's as far as ``fmt`` has it (``opts.chunks`` and
    ``opts.compression`` applied; the properties ``props`` of the source, from a ``src``
    store, carried as :mod:`ptd.transfer.encoding` says). The notes it calls for are added
    to ``notes`` (once each)."""
    dst = get_backend(fmt)
    props = props if props is not None else _bare_properties(meta)
    if opts.layout == "random-access":
        base = random_access(meta, dst.policy, remote=remote, resizable=bool(props.resizable))
        leaf = leaf_encoding(
            props,
            dst,
            compression=base.codec or "none",
            level=base.level,
            raw=True,
        )
        _add_notes(notes, leaf.notes)
        return replace(base, encoding=leaf)
    chosen = opts.compression not in (None, "none")
    source_coded = any(c.stage is not Stage.SERIALIZER for c in props.pipeline)
    if not dst.policy.stores_chunks:  # raw files: no chunks, no codecs (a chosen one refused)
        if chosen:
            dst.policy.chosen_steps(opts.compression, opts.level or 0)
        leaf = leaf_encoding(props, dst, compression=None, level=None, compressible=False)
        _add_notes(notes, leaf.notes)
        return LeafLayout(None, None, None, None, leaf)
    if (
        opts.chunks is None
        and not chosen
        and src is not None
        and src.policy.chunks_required
        and not dst.policy.chunks_required
        and _one_small_chunk(meta, props)
    ):
        chunks: tuple[int, ...] | None = None
        _add_notes(
            notes,
            [
                f"arrays of one small chunk (at most {SMALL_CONTIGUOUS >> 20} MiB) were written "
                f"contiguous, as {fmt} stores them smaller so (uncompressed)"
            ],
        )
    else:
        contiguous = dst.policy.stores_contiguous
        chunks = dst_chunks(meta, opts.chunks, contiguous, chosen or source_coded)
    if chunks is None and props.resizable and tuple(meta.shape) and 0 not in meta.shape:
        # (a resizable leaf is chunked: HDF5 holds a maxshape only so)
        chunks = dst_chunks(replace(meta, chunks=None), opts.chunks, False, True)
    leaf = leaf_encoding(
        props,
        dst,
        compression=opts.compression,
        level=opts.level,
        compressible=chunks is not None,
    )
    _add_notes(notes, leaf.notes)
    codec = opts.compression if chosen else None
    return LeafLayout(chunks, kept_shards(meta, chunks, fmt, opts.chunks), codec, opts.level, leaf)


def _add_notes(notes: list[str], new: list[str]) -> None:
    for note in new:
        if note not in notes:
            notes.append(note)


def kept_shards(
    meta: ArrayMeta, chunks: tuple[int, ...] | None, fmt: str, rows: int | None
) -> tuple[int, ...] | None:
    """The source's shard shape, kept when the ``fmt`` destination stores shards, no chunk
    rows were asked for and the destination's chunks are the source's inner chunks; else None
    (see the module doc)."""
    if meta.shards is None or rows is not None or chunks is None:
        return None
    if tuple(chunks) != tuple(meta.chunks or ()) or not get_backend(fmt).policy.stores_shards:
        return None
    return tuple(meta.shards)


# ----------------------------------------------------------------------------- leaves
#: said once when a table goes to a zarr store


def copyable(meta: ArrayMeta, fmt: str) -> bool:
    """Whether an unsupported leaf can still be copied to ``fmt`` as its raw values: the
    tables (compound types) its policy takes (``FormatPolicy.tables``: without objects to h5,
    of plain number fields to zarr); references, vlen sequences and array types never."""
    dt = meta.dtype
    if not is_table(dt) or dt.hasobject or meta.kind is not ValueKind.UNSUPPORTED:
        return False
    tables = policy(fmt).tables
    return tables == "any" or (tables == "numeric" and numeric_fields_only(dt))


def carried_references(meta: ArrayMeta, fmt: str) -> bool:
    """Whether a leaf of object references is copied to ``fmt``: as new references to the
    objects at the same paths, in a format that holds references (region references never)."""
    return meta.reference == "object" and entry(fmt).writable and get_backend(fmt).holds_references


#: how a soft link is noted in a scan's ``links`` (see :mod:`ptd.storage.h5.links`)
SOFT_LINK_NOTE = "soft link to "


def soft_links(
    s: Scan, fmt: str, refused: dict[Path, str]
) -> tuple[dict[Path, str], dict[Path, str]]:
    """``(made, lost)``: the scan's soft links a ``fmt`` destination recreates (path -> the
    target as the source spells it; the copy keeps every key's name, so the same target
    names the same node), and those it leaves out, with why: a format without links, or a
    target the copy does not hold. The data behind a link is never copied in its place."""
    holds = entry(fmt).writable and get_backend(fmt).holds_links
    listed = {p for p, _, _ in s.nodes}
    made: dict[Path, str] = {}
    lost: dict[Path, str] = {}
    for path, note in s.links.items():
        if not note.startswith(SOFT_LINK_NOTE):
            continue
        if any(path[:i] in made or path[:i] in lost for i in range(1, len(path))):
            continue  # under another link: it goes with that one
        target = note[len(SOFT_LINK_NOTE) :]
        where = f"a soft link to {target}"
        if not holds:
            lost[path] = f"{where}, which {fmt} cannot hold"
            continue
        full = posixpath.normpath(
            target if target.startswith("/") else "/".join(("",) + path[:-1] + (target,))
        )
        dest = tuple(n for n in full.split("/") if n)
        if dest not in listed or any(dest[:i] in refused for i in range(1, len(dest) + 1)):
            lost[path] = f"{where}, whose target the copy does not hold"
            continue
        made[path] = target
    return made, lost


def name_problem(fmt: str, name: str, *, array: bool = False) -> str | None:
    """Why a ``fmt`` destination (``"memmap"`` too) cannot hold a node named ``name`` at all
    (the backend's rule: names it can hold only escaped are not refused), or None."""
    return get_backend(fmt).name_problem(name, array=array)


def escaped_keys(s: Scan, fmt: str) -> list[str]:
    """The keys of the scan whose last name a ``fmt`` destination stores escaped."""
    if not entry(fmt).writable:
        return []
    cls = get_backend(fmt)
    return ["/".join(p) for p, _, _ in s.nodes if cls.escaped_name(p[-1]) is not None]


def pickled_keys(s: Scan) -> dict[Path, str]:
    """The scan's pickled entries (a pickled payload, an array whose codecs unpickle), with
    why a copy leaves them out unless ``allow_pickle``: decoding them runs code."""
    out: dict[Path, str] = {}
    for path, _kind, meta in s.nodes:
        if (
            meta is not None
            and meta.kind is ValueKind.NON_TENSOR
            and meta.non_tensor_kind == ENCODING_PICKLE
        ):
            out[path] = (
                f"key {brief_key('/'.join(path))!r} is pickled: decoding it would run code the "
                "file holds"
            )
    return out


def pickle_refusal(result: ConvertResult, pickled: dict[Path, str]) -> PickleRefusedError:
    """The one line refusing a conversion of a store with pickled entries, before anything
    is written: it names the first and both ways on."""
    path, why = next(iter(pickled.items()))
    more = len(pickled) - 1
    also = f" (and {more} more key{'s' if more > 1 else ''})" if more else ""
    return PickleRefusedError(
        f"cannot convert {result.src} to {result.dst_format}: {why}{also}; pass ",
        Option("allow_pickle"),
        " only for a file you trust, or ",
        Option("skip_unsupported"),
        " to copy the rest and list these as not copied",
        path=result.src,
        key="/".join(path),
    )


def refusals(s: Scan, fmt: str, *, allow_pickle: bool = True) -> dict[Path, str]:
    """The nodes a ``fmt`` destination cannot hold, with why (a group's covers its subtree):
    names it cannot hold, and leaves ptd cannot copy (``"key 'c' holds HDF5 object
    references, which ptd cannot copy"``); without ``allow_pickle``, pickled entries
    (:func:`pickled_keys`) too."""
    out: dict[Path, str] = {} if allow_pickle else pickled_keys(s)
    for path, kind, meta in s.nodes:
        if any(path[:i] in out for i in range(1, len(path))):
            continue
        key = brief_key("/".join(path))
        why = name_problem(fmt, path[-1], array=kind is NodeKind.ARRAY)
        if why is not None:
            what = "group" if kind is NodeKind.GROUP else "key"
            out[path] = f"{what} {key!r} cannot be stored in {fmt} under its name: {why}"
        elif meta is not None and meta.kind is ValueKind.UNSUPPORTED:
            if copyable(meta, fmt) or carried_references(meta, fmt):
                continue
            out[path] = f"key {key!r} holds {meta.unsupported}, which ptd cannot copy"
        elif path in s.backend.data_elsewhere:
            shown = ", ".join(s.backend.data_elsewhere[path]) or "none listed"
            out[path] = (
                f"key {key!r} keeps its data outside the file (a virtual dataset or external "
                f"storage; sources: {shown}), which ptd does not follow (it could read any "
                "file on this machine; --follow-virtual reads a virtual dataset whose sources "
                "lie beside the file)"
            )
    return out


def not_copyable(
    loc: StoreLocation, fmt: str
) -> tuple[dict[Path, str], dict[Path, str], list[dict[str, str]]]:
    """``(skipped, refused, lost)`` of the store at ``loc`` for a ``fmt`` destination
    (``"h5"``, ``"zarr"`` or ``"memmap"``): the links a listing skips, :func:`refusals`, and
    :func:`lost_properties`."""
    from ptd.report.scan import scan, streamed

    with streamed(loc) as be:
        s = scan(be, be.name)
        refused = refusals(s, fmt)
        return dict(s.skipped), refused, lost_properties(s, fmt, refused)


def lost_properties(s: Scan, fmt: str, refused: dict[Path, str]) -> list[dict[str, str]]:
    """The properties of the scan's arrays that a ``fmt`` destination has no place for
    (dimension names, a maxshape that lets an array grow), each ``{"key", "property",
    "reason"}``; codecs are not among them (the values are written decoded)."""
    dst = get_backend(fmt)
    if dst.holds_dimension_names and dst.holds_maxshape:
        return []
    what = entry(fmt).store_phrase
    out: list[dict[str, str]] = []
    for path, kind, meta in s.nodes:
        if kind is not NodeKind.ARRAY or meta is None or path in refused:
            continue
        if meta.kind is not ValueKind.NUMERIC:
            continue
        props = s.backend.array_properties(path, meta)
        key = "/".join(path)
        if props.dimension_names is not None and not dst.holds_dimension_names:
            out.append(
                {
                    "key": key,
                    "property": "dimension_names",
                    "reason": f"{what} has no dimension names",
                }
            )
        if props.resizable and not dst.holds_maxshape:
            out.append(
                {"key": key, "property": "maxshape", "reason": f"{what} holds fixed-size arrays"}
            )
    return out


def plan_leaves(s: Scan, opts: ConvertOptions, result: ConvertResult) -> dict[Path, LeafLayout]:
    """Fill ``result``'s plan and counts: one :class:`LeafPlan` per node of the scan, with
    the chunks and codec each tensor gets in ``result.dst_format``; the nodes it cannot copy
    (:func:`refusals`, and the links the scan skipped), and the properties of a leaf that
    are not kept (``"property"``), go to ``result.not_copied``. Returns each tensor leaf's
    target (what the copy creates)."""
    targets: dict[Path, LeafLayout] = {}
    to = result.dst_format
    dst_cls = get_backend(to)
    resize_note = (
        f"{s.format} arrays resize freely; their {to} copies are fixed-size (ptd records a "
        "source's HDF5 maxshape and restores it)"
    )
    total = 0
    refused = refusals(s, to, allow_pickle=opts.allow_pickle)
    for path, reason in s.skipped.items():
        result.not_copied.append({"key": "/".join(path), "reason": reason})
    for path, reason in refused.items():
        result.not_copied.append({"key": "/".join(path), "reason": reason})
    made, lost = soft_links(s, to, refused)
    for path, reason in lost.items():
        result.not_copied.append({"key": "/".join(path), "reason": reason})
    gone = refused | made | lost
    escaped = escaped_keys(s, to)
    if escaped:
        shown = ", ".join(repr(k) for k in escaped[:3]) + (", ..." if len(escaped) > 3 else "")
        result.notes.append(
            f"{len(escaped)} name{'s' if len(escaped) > 1 else ''} that {to} cannot hold as "
            f"{'they are' if len(escaped) > 1 else 'it is'} stored escaped, the original "
            f"recorded (ptd reads it back): {shown}"
        )
    for path, link_to in made.items():
        result.plan.append(LeafPlan("/".join(path), "link", dtype=f"soft link to {link_to}"))
    as_paths: list[str] = []
    for path, kind, meta in s.nodes:
        if any(path[:i] in gone for i in range(1, len(path) + 1)):
            continue
        key = "/".join(path)
        if kind is NodeKind.GROUP:
            result.groups += 1
            result.plan.append(LeafPlan(key, "group"))
            continue
        assert meta is not None
        if meta.kind is ValueKind.NON_TENSOR:
            result.non_tensors += 1
            result.plan.append(LeafPlan(key, "non_tensor", shape=list(meta.shape)))
            continue
        nbytes = math.prod(meta.shape) * meta.dtype.itemsize
        if carried_references(meta, to):
            result.plan.append(
                LeafPlan(key, "references", shape=list(meta.shape), dtype="object references")
            )
            as_paths.append(key)
            continue
        props = s.backend.array_properties(path, meta)
        target = leaf_target(
            meta, opts, to, result.notes, remote.is_remote(result.dst), props, type(s.backend)
        )
        targets[path] = target
        chunks = target.chunks
        assert target.encoding is not None
        for prop, reason in target.encoding.dropped:
            result.not_copied.append({"key": key, "property": prop, "reason": reason})
        if props.resizable and target.encoding.encoding.maxshape is None:
            result.not_copied.append(
                {"key": key, "property": "maxshape", "reason": "the copy is fixed-size"}
            )
        if (
            props.maxshape is None
            and s.backend.policy.chunks_required
            and not dst_cls.policy.chunks_required
            and resize_note not in result.notes
        ):
            result.notes.append(resize_note)
        table = meta.kind is not ValueKind.NUMERIC and is_table(meta.dtype)
        note = dst_cls.policy.table_note
        if table and note is not None and note not in result.notes:
            result.notes.append(note)
        result.plan.append(
            LeafPlan(
                key,
                "tensor" if meta.kind is ValueKind.NUMERIC else "table" if table else "unsupported",
                shape=list(meta.shape),
                dtype=meta.torch_dtype
                or (describe_table(meta.dtype) if table else str(meta.dtype)),
                nbytes=nbytes,
                src_chunks=list(meta.chunks) if meta.chunks else None,
                dst_chunks=list(chunks) if chunks else None,
                dst_shards=list(target.shards) if target.shards else None,
                src_compression=props.compression,
                dst_compression=describe_pipeline(target.encoding.encoding.pipeline),
            )
        )
        if table:
            result.tables += 1
        else:
            result.tensors += 1
            total += nbytes
    result.nbytes = total
    if dst_cls.references_as_paths and (as_paths or made):
        result.notes.append(paths_note(to, as_paths, ["/".join(p) for p in made]))
    return targets


def paths_note(fmt: str, references: list[str], links: list[str], attrs: bool = False) -> str:
    """The note of a ``fmt`` copy that holds references and soft links only as the paths
    they name (:attr:`Backend.references_as_paths`), naming each.

    >>> paths_note("zarr", ["electrodes/group"], ["electrodes/shank0/device"])  # doctest: +ELLIPSIS
    "in the zarr copy, the object references of 'electrodes/group' and the soft link ..."
    """
    parts = []
    if references:
        shown = ", ".join(repr(k) for k in references)
        parts.append(f"the object references of {shown}")
    if links:
        shown = ", ".join(repr(k) for k in links)
        parts.append(f"the soft link{'s' if len(links) > 1 else ''} {shown}")
    if attrs:
        parts.append("the object-reference attributes")
    return (
        f"in the {fmt} copy, {' and '.join(parts)} are stored as the paths they name "
        "(hdmf-zarr's spelling: zarr tools see strings and JSON, not references; ptd reads "
        "them back as references, and an HDF5 copy of it makes them again)"
    )


#: the free space a compressed leaf needs at least: its logical bytes divided by this
COMPRESSED_RATIO_MAX = 16


def raw_nbytes(result: ConvertResult) -> int:
    """Bytes the leaves of the plan need in the destination at least: the uncompressed ones'
    logical bytes, a fraction of the compressed ones' (an absurd shape in damaged metadata is
    refused before anything is written)."""
    return sum(
        lp.nbytes if lp.dst_compression is None else lp.nbytes // COMPRESSED_RATIO_MAX
        for lp in result.plan
        if lp.kind != "group"
    )


def refusal_error(result: ConvertResult, refused: dict[Path, str]) -> ConvertError:
    """The one line refusing a conversion because of ``refused`` nodes (the first named)."""
    first = next(iter(refused.values()))
    more = len(refused) - 1
    also = f" (and {more} more key{'s' if more > 1 else ''})" if more else ""
    return ConvertError(
        f"cannot convert {result.src} to {result.dst_format}: {first}{also}; pass ",
        Option("skip_unsupported"),
        " to copy the rest and list these as not copied",
        path=result.src,
    )


def left_out_keys(
    loc: StoreLocation, fmt: str, skip_unsupported: bool
) -> tuple[dict[str, str], list[dict[str, str]]]:
    """The keys (``"a/b"``) of the store at ``loc`` that a ``fmt`` copy leaves out, with why:
    its skipped links, and its :func:`refusals` when ``skip_unsupported`` (otherwise they
    raise UnsupportedDtypeError naming the first); and the properties it does not keep
    (:func:`lost_properties`)."""
    skipped, refused, lost = not_copyable(loc, fmt)
    if refused and not skip_unsupported:
        first = next(iter(refused.values()))
        more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
        raise UnsupportedDtypeError(
            f"cannot write {loc.path} as a {fmt} copy: {first}{more}; pass ",
            Option("skip_unsupported"),
            " to write the rest",
            path=loc.path,
        )
    return {"/".join(k): r for k, r in {**skipped, **refused}.items()}, lost
