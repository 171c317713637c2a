"""``ptd.info(path)``: what a store holds, from its metadata alone (no array data is read).

>>> import os, tempfile, torch
>>> import ptd
>>> with tempfile.TemporaryDirectory() as d:
...     path = os.path.join(d, "x.h5")
...     ptd.PersistentTensorDict.from_dict({"obs": torch.zeros(4, 3)}, path, batch_size=[4]).close()
...     info = ptd.info(path)
>>> info.format, info.batch_size, info.batch_size_source
('h5', [4], 'stored')
>>> [(e.key, e.kind, e.shape, e.batch_dims, e.dtype) for e in info.entries]
[('obs', 'tensor', [4, 3], 1, 'float32')]

The JSON document (``StoreInfo.to_dict()``, printed by ``ptd inspect --json``) has these fields,
which are stable (new fields may be added; none is renamed or removed within a
``format_version``):

``format_version``
    ``1``.
``path``, ``format``
    the store's path, and ``"h5"``, ``"zarr"`` or ``"memmap"`` (a memmap directory; detected
    from the content).
``inner``
    for a path leading into a store (``robo.h5/data/demo_0``): the key of the group or array
    inside it that is described (``"data/demo_0"``), else ``null``. Every key of ``entries``
    is then relative to it; ``totals.file_bytes`` is still the whole store's.
``batch_size``, ``batch_size_source``, ``stored_batch_size``
    the root's batch size; ``"stored"`` when it is the ``__tensordict__`` attribute,
    ``"inferred"`` when it was inferred from the entries (no attribute, or one that does not
    fit them: then ``stored_batch_size`` shows it); ``stored_batch_size`` is the attribute's
    batch size or ``null``.
``metadata_problem``
    why the root's ``__tensordict__`` attribute was ignored, or part of it (a malformed
    attribute, a batch size that does not fit the entries, dim names that do not fit the batch
    size), or ``null``. The batch size is then the one a ``PersistentTensorDict`` opened on the
    store gets: inferred from the entries.
``userblock_size``
    bytes reserved at the start of an HDF5 file for another program's header (``0``: none,
    and always for zarr).
``depth``
    the ``--depth`` limit the entries were listed with, or ``null`` for all.
``attrs``
    the root's user attributes (``null`` unless asked for).
``entries``
    every group and leaf below the root, depth first, parents before children. Each has:

    ``key`` (``"a/b"``), ``name`` (``"b"``), ``depth`` (1 for the root's children), ``kind``
    (``"group"``, ``"tensor"``, ``"non_tensor"``, ``"table"`` (records of named fields: an HDF5
    compound type, a zarr structured array; :mod:`ptd.format.tables`), ``"reference"`` (HDF5
    object or region references: an NWB table's ``group`` column) or ``"unsupported"``),
    ``shape`` (a tensor's or table's
    full shape; a non-tensor's stack shape, ``[]`` for one value; ``null`` for groups),
    ``batch_dims`` (how many leading dims of ``shape`` are batch dims), ``dtype`` (the torch
    dtype, e.g. ``"bfloat16"``; ``null`` unless a tensor), ``storage_dtype`` (the stored numpy
    dtype), ``chunks`` (what one read decodes: the chunk shape, the inner chunk shape of a
    sharded zarr array; ``null`` when contiguous), ``shards`` (the shard shape of a sharded
    zarr array, ``null`` otherwise), ``compression`` (e.g. ``"gzip(4)"``, ``"zstd(3)"``, ``null``),
    ``nbytes`` (a tensor's logical bytes), ``stored_nbytes`` (bytes in the store, ``null`` when
    unknown), ``ratio`` (``nbytes / stored_nbytes``), ``non_tensor_kind`` (``"str"``,
    ``"bytes"``, ``"json"``, ``"pickle"``, ``"opaque"``, ``"other"``), ``stack`` (a non-tensor
    with one value per batch row), groups' ``batch_size``, ``batch_size_source`` (also
    ``"parent"``: a group that does not constrain its batch takes its parent's),
    ``stored_batch_size`` and ``metadata_problem`` (``null`` for leaves), and ``attrs`` (user
    attributes, ``null`` unless asked for), ``link`` (an HDF5 soft or extra hard link: what
    it links to, e.g. ``"soft link to /obs"``; ``null`` otherwise) and ``reason`` (an
    unsupported leaf: what it holds, e.g. ``"HDF5 object references"``; a table: its fields,
    ``"table (t f8, id i4)"``), ``fields`` (a table's: ``[{"name", "dtype"}]``, numpy dtype
    strings; ``null`` otherwise).

    Arrays also carry their property inventory: ``pipeline`` (every codec step in order from
    the values to the stored bytes, filters included and the serializer left out, each
    ``{"step", "stage", "lossy"}``: ``"delta(dtype=f8)"``, ``"filter"``, ``false``;
    ``compression`` is the same steps as one line), ``fill_value`` (what unwritten elements
    read as, ``"nan"``, ``"-1"``; ``null`` for zeros, both formats' default),
    ``dimension_names`` (``["time", null]``; ``null`` when no dim is named), ``maxshape``
    (``[null, 4]``: ``null`` per unlimited dim; ``null`` when the store states none, as zarr,
    whose arrays resize freely), ``resizable`` (the dims the array can grow along, per its
    maxshape) and ``layout`` (``contiguous``, ``chunked``, ``compact``, ``sharded``,
    ``virtual``, ``external``). Data in other files (``virtual``, ``external``) has no
    ``ratio``, is left out of the totals' ratio, and lists its ``sources`` (the files it lies
    in, as the store names them). ``random_row_bytes``: what reading one random row decodes
    (:func:`ptd.storage.api.random_row_cost`, the cost the lint's L004 judges).
``zarr_format``
    ``2`` or ``3`` for a zarr store (v2 stores are read, never written), ``null`` for HDF5.
``skipped``
    keys the store holds that ptd does not list nor read, each ``{"key", "reason"}``: HDF5
    external links (never followed), dangling soft links, links to their own parent group.
``consolidated``
    for a local zarr store whose consolidated metadata disagrees with the nodes really in it:
    one ``{"key", "code", "message"}`` per node missing from it, extra in it or different
    (codes of :mod:`ptd.report.consolidated`); left out of the document otherwise. The entries listed are the
    ones a reader trusting the consolidated metadata sees (``ptd validate`` checks the real
    ones).
``totals``
    ``groups``, ``tensors``, ``non_tensors``, ``tables``, ``references``, ``unsupported`` (counts over the whole store,
    whatever ``depth``), ``nbytes``/``stored_nbytes``/``ratio`` (over tensors), and
    ``file_bytes`` (what the file or store occupies on disk).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from ptd.errors import PtdError
from ptd.format.attrvalues import jsonable
from ptd.format.names import PTD_JSON_ATTR, RESERVED_ATTRS, TD_NON_TENSOR_ATTR
from ptd.format.shapes import fits
from ptd.format.tables import describe_table, is_table, table_fields
from ptd.report.consolidated import check_consolidated, narrowed_findings
from ptd.report.scan import scan, streamed
from ptd.report.summary import subtree_signatures
from ptd.storage import remote, spelled
from ptd.storage.api import ArrayMeta, Backend, NodeKind, Path, ValueKind, random_row_cost
from ptd.storage.properties import Stage, same_fill
from ptd.storage.stores import parse_source

__all__ = ["FORMAT_VERSION", "EntryInfo", "StoreInfo", "Totals", "info", "jsonable"]

#: version of the JSON document (``StoreInfo.to_dict()``)
FORMAT_VERSION = 1


@dataclass
class EntryInfo:
    """One group or leaf of a store (see the module doc for each field)."""

    key: str
    name: str
    depth: int
    kind: str
    shape: list[int] | None = None
    batch_dims: int = 0
    dtype: str | None = None
    storage_dtype: str | None = None
    chunks: list[int] | None = None
    #: a sharded zarr array: the shard shape (``chunks`` is the inner chunk shape), else None
    shards: list[int] | None = None
    compression: str | None = None
    nbytes: int | None = None
    stored_nbytes: int | None = None
    ratio: float | None = None
    non_tensor_kind: str | None = None
    stack: bool = False
    batch_size: list[int] | None = None
    batch_size_source: str | None = None
    stored_batch_size: list[int] | None = None
    metadata_problem: str | None = None
    attrs: dict[str, Any] | None = None
    random_row_bytes: int | None = None
    #: an HDF5 soft or extra hard link: what it links to (``"soft link to /obs"``), else None
    link: str | None = None
    #: an unsupported leaf: what it holds (``"HDF5 object references"``), a table's fields
    #: (``"table (t f8, id i4)"``), else None
    reason: str | None = None
    #: a table's fields, ``{"name", "dtype"}`` each, else None
    fields: list[dict[str, str]] | None = None
    #: the codec pipeline in order, serializer left out: ``{"step", "stage", "lossy"}`` each
    #: (``step`` as in ``compression``; ``stage``: filter, compressor, checksum)
    pipeline: list[dict[str, Any]] | None = None
    #: the fill value unwritten elements read as (``"nan"``, ``"-1"``), None when the store
    #: states none (zeros)
    fill_value: str | None = None
    #: a name per dimension (None for an unnamed one), None when no dimension is named
    dimension_names: list[str | None] | None = None
    #: the largest shape the array can grow to (None per unlimited dim), None when unstated
    maxshape: list[int | None] | None = None
    #: the dims the array can grow along (empty: fixed, or not stated)
    resizable: list[int] = field(default_factory=list)
    #: contiguous, chunked, compact, sharded, virtual, external
    layout: str | None = None
    #: the files the data lies in when it is outside the store (a virtual dataset's source
    #: files, external storage's raw files), which ptd does not read; None otherwise
    sources: list[str] | None = None
    #: a group listed at the ``depth`` limit: the signature of its whole subtree, which its
    #: listed children do not show (:func:`ptd.report.summary.subtree_signatures`; text
    #: listings fold sibling groups by it); not part of the JSON document
    subtree: tuple[Any, ...] | None = field(default=None, repr=False, compare=False)

    @property
    def batch_shape(self) -> list[int]:
        return list(self.shape or [])[: self.batch_dims]

    @property
    def feature_shape(self) -> list[int]:
        return list(self.shape or [])[self.batch_dims :]


@dataclass
class Totals:
    groups: int = 0
    tensors: int = 0
    non_tensors: int = 0
    tables: int = 0
    references: int = 0
    unsupported: int = 0
    #: logical bytes of every tensor
    nbytes: int = 0
    #: stored bytes of the tensors whose stored size is known (None if none is)
    stored_nbytes: int | None = None
    ratio: float | None = None
    #: what the file or store occupies on disk
    file_bytes: int | None = None


@dataclass
class StoreInfo:
    """What ``ptd.info`` found (see the module doc for the fields)."""

    path: str
    format: str
    batch_size: list[int]
    batch_size_source: str
    stored_batch_size: list[int] | None
    entries: list[EntryInfo]
    totals: Totals
    depth: int | None = None
    attrs: dict[str, Any] | None = None
    metadata_problem: str | None = None
    consolidated: list[dict[str, str]] = field(default_factory=list)
    #: the Zarr format version (2 or 3) of a zarr store, None for HDF5
    zarr_format: int | None = None
    #: keys the store holds that are not listed nor read: ``{"key", "reason"}`` each
    skipped: list[dict[str, str]] = field(default_factory=list)
    #: the key inside the store the report is narrowed to (``"data/demo_0"``), or None
    inner: str | None = None
    #: bytes reserved at the start of an HDF5 file for another program (0: none)
    userblock_size: int = 0
    format_version: int = field(default=FORMAT_VERSION)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {
            "format_version": d.pop("format_version"),
            "path": d.pop("path"),
            "inner": d.pop("inner"),
            "format": d.pop("format"),
            "zarr_format": d.pop("zarr_format"),
            "userblock_size": d.pop("userblock_size"),
            "batch_size": d.pop("batch_size"),
            "batch_size_source": d.pop("batch_size_source"),
            "stored_batch_size": d.pop("stored_batch_size"),
            "metadata_problem": d.pop("metadata_problem"),
            "depth": d.pop("depth"),
            "attrs": d.pop("attrs"),
            **({"consolidated": d.pop("consolidated")} if self.consolidated else {}),
            "entries": [{k: v for k, v in e.items() if k != "subtree"} for e in d.pop("entries")],
            "totals": d.pop("totals"),
            "skipped": d.pop("skipped"),
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)


def attrs_not_read(be: Backend, path: Path) -> str | None:
    """Why some attributes of the node at ``path`` were not read (more than
    ``PTD_MAX_ATTRS``: the count), or None."""
    for name, reason in be.attrs_skipped.get(path, {}).items():
        if name.endswith(" more)"):
            return reason
    return None


def _with_attrs_note(problem: str, be: Backend, path: Path) -> str | None:
    note = attrs_not_read(be, path)
    return "; ".join(p for p in (problem, note) if p) or None


def user_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: jsonable(v) for k, v in attrs.items() if k not in RESERVED_ATTRS}


def _ratio(nbytes: int | None, stored: int | None) -> float | None:
    if nbytes is None or not stored:
        return None
    return round(nbytes / stored, 4)


def leaf_shape(meta: ArrayMeta) -> list[int]:
    """The shape a leaf has as an entry: a non-tensor payload/JSON value is one value (``[]``),
    a marked stack has its stack shape."""
    if meta.kind is ValueKind.NON_TENSOR:
        if meta.stack_shape is not None:
            return list(meta.stack_shape)
        if TD_NON_TENSOR_ATTR in meta.attrs or meta.attrs.get(PTD_JSON_ATTR):
            return []
    return list(meta.shape)


def info(
    path: Any,
    *,
    depth: int | None = None,
    attrs: bool = False,
    storage_options: dict[str, Any] | None = None,
) -> StoreInfo:
    """Describe the store at ``path`` (an HDF5 file or a Zarr v3 store, told apart by content;
    a URL such as ``s3://bucket/data.zarr`` is read with ``storage_options``).

    ``depth`` limits the listed entries to that many levels (totals always cover everything);
    ``attrs`` adds every node's user attributes. Only metadata is read.
    """
    loc = parse_source(path, storage_options)
    p = loc.path
    stale = [] if loc.is_remote or not os.path.isdir(p) else check_consolidated(p, thorough=False)
    stale = narrowed_findings(stale, loc.inner)
    with streamed(loc) as be:
        fmt = be.name
        s = scan(be, fmt)
        # the sizes the arrays' metadata does not state, asked of the store at once (zarr's:
        # one listing of its chunk files)
        untold = [
            q
            for q, k, m in s.nodes
            if k is NodeKind.ARRAY and (m is None or m.stored_nbytes is None)
        ]
        stored_sizes = be.stored_sizes(untold) if untold else {}
        entries: list[EntryInfo] = []
        # with a depth limit, every node as a bare entry too: what the groups at the limit hold
        walked: list[EntryInfo] = []
        totals = Totals()
        t_stored = 0
        t_nbytes = 0  # the logical bytes of the tensors whose stored bytes are in the store
        any_stored = False
        for q, kind, meta in s.nodes:
            d = len(q)
            listed = depth is None or d <= depth
            key = "/".join(q)
            if kind is NodeKind.GROUP:
                totals.groups += 1
                gb = s.batches[q]
                if listed:
                    g = EntryInfo(
                        key=key,
                        name=q[-1],
                        depth=d,
                        kind="group",
                        batch_size=list(gb.batch),
                        batch_size_source=gb.source,
                        stored_batch_size=gb.stored,
                        metadata_problem=_with_attrs_note(gb.problem, be, q),
                        attrs=user_attrs(spelled.user_attrs(be.name, s.group_attrs.get(q, {})))
                        if attrs
                        else None,
                        link=s.links.get(q),
                    )
                    entries.append(g)
                else:  # below the depth limit: walked only, for the signatures of the groups
                    g = EntryInfo(
                        key=key, name=q[-1], depth=d, kind="group", batch_size=list(gb.batch)
                    )
                if depth is not None:
                    # one entry per group (a signature reads its kind, key and batch size, which
                    # the listed entry has too; ``subtree`` is set after the signatures)
                    walked.append(g)
                continue
            assert meta is not None
            group_batch = s.batches[q[:-1]].batch
            shape = leaf_shape(meta)
            stored = meta.stored_nbytes if meta.stored_nbytes is not None else stored_sizes.get(q)
            e = EntryInfo(
                key=key,
                name=q[-1],
                depth=d,
                kind="tensor",
                shape=shape,
                batch_dims=len(group_batch) if fits(shape, group_batch) else 0,
                storage_dtype=str(meta.dtype),
                chunks=list(meta.chunks) if meta.chunks is not None else None,
                shards=list(meta.shards) if meta.shards is not None else None,
                compression=meta.compression,
                stored_nbytes=stored,
                attrs=user_attrs(spelled.user_attrs(be.name, meta.attrs)) if attrs else None,
                link=s.links.get(q),
            )
            elsewhere = be.data_elsewhere.get(q)
            if elsewhere is not None:
                e.sources = list(elsewhere)
            if meta.kind is ValueKind.NUMERIC:
                totals.tensors += 1
                e.dtype = meta.torch_dtype
                e.nbytes = math.prod(meta.shape) * meta.dtype.itemsize
                e.ratio = _ratio(e.nbytes, stored) if elsewhere is None else None
                cost = random_row_cost(meta, be.policy, local=not loc.is_remote)
                e.random_row_bytes = cost.nbytes if cost is not None else None
                totals.nbytes += e.nbytes
                if stored is not None and elsewhere is None:
                    any_stored = True
                    t_stored += stored
                    t_nbytes += e.nbytes
            elif meta.kind is ValueKind.NON_TENSOR:
                totals.non_tensors += 1
                e.kind = "non_tensor"
                e.non_tensor_kind = meta.non_tensor_kind
                e.stack = meta.stack_shape is not None
            elif is_table(meta.dtype) and not meta.unreadable:
                totals.tables += 1
                e.kind = "table"
                e.reason = describe_table(meta.dtype)
                e.fields = [{"name": n, "dtype": dt.str} for n, dt in table_fields(meta.dtype)]
                e.nbytes = math.prod(meta.shape) * meta.dtype.itemsize
                e.ratio = _ratio(e.nbytes, stored)
            elif meta.reference is not None:
                totals.references += 1
                e.kind = "reference"
                e.reason = meta.unsupported
            else:
                totals.unsupported += 1
                e.kind = "unsupported"
                e.reason = meta.unsupported
            if depth is not None:
                walked.append(e)
            if listed:
                if not meta.unreadable:
                    _add_properties(e, be, q, meta)
                entries.append(e)
        if depth is not None:
            whole = subtree_signatures(walked)
            for e in entries:
                if e.kind == "group" and e.depth == depth:
                    e.subtree = whole.get(e.key)
        if any_stored:
            totals.stored_nbytes = t_stored
            totals.ratio = _ratio(t_nbytes, t_stored)
        totals.file_bytes = loc.nbytes() if loc.is_remote or os.path.exists(p) else None
        root = s.batches[()]
        return StoreInfo(
            path=remote.display(p),
            format=fmt,
            batch_size=list(root.batch),
            batch_size_source=root.source,
            stored_batch_size=root.stored,
            metadata_problem=_with_attrs_note(root.problem, be, ()),
            entries=entries,
            totals=totals,
            depth=depth,
            attrs=user_attrs(spelled.user_attrs(be.name, s.group_attrs.get((), {})))
            if attrs
            else None,
            consolidated=[{"key": f.key, "code": f.code, "message": f.message} for f in stale],
            zarr_format=be.format_version,
            userblock_size=_userblock(be),
            skipped=[{"key": "/".join(k), "reason": r} for k, r in s.skipped.items()],
            inner="/".join(loc.inner) or None,
        )


def _add_properties(e: EntryInfo, be: Backend, path: Path, meta: ArrayMeta) -> None:
    """The array's property inventory (:meth:`Backend.array_properties`) into ``e``."""
    try:
        props = be.array_properties(path, meta)
    except PtdError:
        return  # what the listing already has stands
    e.pipeline = [
        {"step": c.describe(), "stage": c.stage.value, "lossy": c.lossy}
        for c in props.pipeline
        if c.stage is not Stage.SERIALIZER
    ]
    e.compression = props.compression
    if not same_fill(props.fill_value, None):
        e.fill_value = props.fill_description()
    if props.dimension_names is not None:
        e.dimension_names = list(props.dimension_names)
    if props.maxshape is not None:
        e.maxshape = list(props.maxshape)
    e.resizable = list(props.resizable)
    e.layout = props.layout


def _userblock(be: Backend) -> int:
    try:
        return be.store_properties().userblock_size
    except PtdError:
        return 0
