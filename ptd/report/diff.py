"""``ptd.diff(a, b)``: what differs between two stores, across formats and layouts.

Two passes. The *structure*: keys present on one side only, kinds (group / tensor /
non-tensor), shapes, torch dtypes, every group's batch size, non-tensor values and user
attributes (of groups and leaves; ptd's reserved attributes are compared through what they
mean: batch sizes and dtypes). Then, unless ``metadata_only``, the *values* of every tensor
leaf present on both sides with the same shape, streamed in row slabs (about 4 MiB a side,
both stores read at once on a small thread pool), so memory stays bounded whatever the size.
An HDF5 file and a zarr store, or two chunk layouts and codecs of one dataset, compare equal
when they hold the same values.

Values are equal when ``|a - b| <= atol + rtol * |b|`` (exact equality when both are 0, the
default); NaN equals NaN only with ``equal_nan``. Each difference names the key; value
differences also give the count of differing elements and the first differing rows.

>>> import os, tempfile, numpy as np
>>> from ptd.storage.registry import get_backend
>>> with tempfile.TemporaryDirectory() as d:
...     for name, last in (("a.h5", 0.0), ("b.h5", 9.0)):
...         be = get_backend("h5").open(os.path.join(d, name), "w")
...         be.create_array(("x",), shape=(4,), dtype=np.dtype("f4"),
...                         data=np.array([1, 2, 3, last], "f4"))
...         be.close()
...     rep = diff(os.path.join(d, "a.h5"), os.path.join(d, "b.h5"))
>>> rep.same, [(x.key, x.kind, x.count, x.first_rows) for x in rep.differences]
(False, [('x', 'values_differ', 1, [3])])
"""

from __future__ import annotations

import contextlib
import math
import posixpath
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import closing
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ptd.errors import PickleRefusedError, PtdError, PtdValueError
from ptd.format.attrvalues import jsonable
from ptd.format.tables import describe_table, is_table, table_fields
from ptd.report.consolidated import open_checked
from ptd.report.excerpt import excerpts
from ptd.report.info import leaf_shape, user_attrs
from ptd.report.scan import Scan, scan
from ptd.storage import cancel, remote, runtime, spelled
from ptd.storage.api import ArrayMeta, Backend, NodeKind, Path, ValueKind
from ptd.storage.cancel import cancellable
from ptd.storage.limits import check_declared
from ptd.storage.location import StoreLocation, as_path_str
from ptd.storage.properties import fill_text as _fill_text
from ptd.storage.properties import same_fill
from ptd.storage.registry import policy
from ptd.storage.stores import detect, parse_source

__all__ = ["DIFF_KINDS", "DiffReport", "Difference", "diff"]

#: every ``Difference.kind``
DIFF_KINDS = (
    "only_in_a",
    "only_in_b",
    "kind_differs",
    "shape_differs",
    "dtype_differs",
    "batch_size_differs",
    "non_tensor_differs",
    "attrs_differ",
    "properties_differ",
    "values_differ",
)
#: bytes of one slab of one side
SLAB_BYTES = 4 * 2**20
#: a leaf of at most this many bytes a side is read in one piece, without the thread pool
SMALL_LEAF = 256 * 2**10
_FIRST_ROWS = 5


@dataclass
class Difference:
    """One difference: the key (``""`` for the root), its kind (:data:`DIFF_KINDS`), a
    message, and what each side has; value differences add the count of differing elements,
    the first differing rows, the first differing elements with both values (``first``:
    ``{"index": [...], "a": ..., "b": ...}``) and, for numbers, the largest absolute and
    relative differences (as ``numpy.testing.assert_allclose`` reports them: ``|a - b|`` and
    ``|a - b| / |b|`` over the differing elements, NaN pairs left out)."""

    key: str
    kind: str
    message: str
    a: Any = None
    b: Any = None
    count: int | None = None
    first_rows: list[int] | None = None
    #: for a table (compound) leaf: the field whose values differ
    field: str | None = None
    #: of ``count``: the elements NaN on both sides (equal with ``equal_nan``)
    both_nan: int = 0
    #: the first differing elements: their index and the value on each side
    first: list[dict[str, Any]] | None = None
    #: the largest ``|a - b|`` and ``|a - b| / |b|`` of the differing elements (numbers)
    max_abs_diff: float | None = None
    max_rel_diff: float | None = None
    #: the number of elements (records of a table) compared
    total: int | None = None


@dataclass
class DiffReport:
    a: str
    b: str
    format_a: str
    format_b: str
    same: bool
    differences: list[Difference] = field(default_factory=list)
    metadata_only: bool = False
    rtol: float = 0.0
    atol: float = 0.0
    equal_nan: bool = False
    #: tensor leaves whose values were compared, their logical bytes (one side), seconds
    leaves_compared: int = 0
    nbytes_compared: int = 0
    seconds: float = 0.0
    #: leaves on both sides whose values could not be compared, each ``{"key", "reason"}``
    #: (HDF5 object references, variable-length sequences...): ``same`` says nothing of them
    not_compared: list[dict[str, str]] = field(default_factory=list)
    #: keys of A that B lacks on purpose, each ``{"key", "reason"}``: a conversion's
    #: ``not_copied`` (:func:`ptd.verify_conversion`); not differences
    left_out: list[dict[str, str]] = field(default_factory=list)

    def verified(self, allow_uncompared: bool = False) -> bool:
        """Whether the comparison shows the stores hold the same: no difference, and every
        leaf compared (unless ``allow_uncompared``)."""
        return self.same and (allow_uncompared or not self.not_compared)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["differences"] = [jsonable(x) for x in d["differences"]]
        return d


def _nodes(s: Scan) -> dict[str, tuple[Path, NodeKind, ArrayMeta | None]]:
    return {"/".join(p): (p, k, m) for p, k, m in s.nodes}


def _user(s: Scan, attrs: Any, path: Path = ()) -> dict[str, Any]:
    """A node's user attributes: neither ptd's own nor those through which the store's format
    spells a property (:mod:`ptd.storage.spelled`; the property itself is compared). An
    object reference is compared as the path it names (``{"reference to": "/a/b"}``)."""
    out = user_attrs(spelled.user_attrs(s.backend.name, attrs))
    raw = attrs.values() if isinstance(attrs, dict) else ()
    if s.backend.holds_references and any(s.backend.maybe_reference(v) for v in raw):
        with contextlib.suppress(PtdError):
            for name, target in s.backend.reference_attrs(path).items():
                if name in out:
                    out[name] = {"reference to": target}
    return out


def _link_target(path: Path, note: str | None) -> str | None:
    """The absolute target of a soft link noted ``note`` at ``path`` (a relative target
    resolved from the link's group: a zarr copy spells targets absolute), else None."""
    prefix = "soft link to "
    if note is None or not note.startswith(prefix):
        return None
    target = note[len(prefix) :]
    if not target.startswith("/"):
        target = "/".join(("",) + path[:-1] + (target,))
    return posixpath.normpath(target)


def _equal(a: Any, b: Any) -> bool:
    """Attribute values (JSON-able python) equal, NaN equal to NaN: an attribute is a value
    stated once, and a NaN copied is the same statement."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _kind(kind: NodeKind, meta: ArrayMeta | None) -> str:
    if kind is NodeKind.GROUP or meta is None:
        return "group"
    return {ValueKind.NUMERIC: "tensor", ValueKind.NON_TENSOR: "non_tensor"}.get(
        meta.kind, "unsupported"
    )


def _shape(meta: ArrayMeta) -> list[int]:
    return leaf_shape(meta)


def _structure(
    sa: Scan,
    sb: Scan,
    out: list[Difference],
    tables: list[tuple[Path, ArrayMeta, ArrayMeta]],
    not_compared: list[dict[str, str]],
    codecs: bool = False,
) -> list[tuple[Path, ArrayMeta, ArrayMeta]]:
    """Structure differences into ``out``; returns the tensor pairs whose values to compare.
    Table (compound) pairs of the same fields go to ``tables``, to be compared field by
    field; leaves whose values cannot be compared to ``not_compared``."""
    na, nb = _nodes(sa), _nodes(sb)
    pairs: list[tuple[Path, ArrayMeta, ArrayMeta]] = []
    ga, gb = _user(sa, sa.group_attrs.get((), {})), _user(sb, sb.group_attrs.get((), {}))
    if not _equal(ga, gb):
        out.append(Difference("", "attrs_differ", "the root's user attributes differ", ga, gb))
    ba, bb = list(sa.batches[()].batch), list(sb.batches[()].batch)
    if ba != bb:
        out.append(Difference("", "batch_size_differs", f"batch size {ba} vs {bb}", ba, bb))
    order = list(na) + [k for k in nb if k not in na]
    # a node only on one side, or of another kind, is reported alone: not its descendants
    reported: list[str] = []
    # a soft link on both sides to the same path is the same link: its target is compared
    # under the target's own key, not once more under the link's
    same_links = {
        "/".join(p)
        for p, note in sa.links.items()
        if _link_target(p, note) is not None
        and _link_target(p, note) == _link_target(p, sb.links.get(p))
    }
    for key in order:
        if any(key.startswith(r + "/") for r in reported):
            continue
        if key in same_links or any(key.startswith(r + "/") for r in same_links):
            continue
        if key not in nb or key not in na:
            reported.append(key)
        if key not in nb:
            out.append(
                Difference(key, "only_in_a", f"{key!r} is only in A", _kind(*na[key][1:]), None)
            )
            continue
        if key not in na:
            out.append(
                Difference(key, "only_in_b", f"{key!r} is only in B", None, _kind(*nb[key][1:]))
            )
            continue
        (pa, kind_a, ma), (_pb, kind_b, mb) = na[key], nb[key]
        ka, kb = _kind(kind_a, ma), _kind(kind_b, mb)
        if ka != kb:
            reported.append(key)
            out.append(
                Difference(key, "kind_differs", f"{key!r} is a {ka} in A, a {kb} in B", ka, kb)
            )
            continue
        if ka == "group":
            b1, b2 = list(sa.batches[pa].batch), list(sb.batches[pa].batch)
            if b1 != b2:
                out.append(
                    Difference(
                        key, "batch_size_differs", f"{key!r}: batch size {b1} vs {b2}", b1, b2
                    )
                )
            a1 = _user(sa, sa.group_attrs.get(pa, {}), pa)
            a2 = _user(sb, sb.group_attrs.get(pa, {}), pa)
            if not _equal(a1, a2):
                out.append(
                    Difference(key, "attrs_differ", f"{key!r}: user attributes differ", a1, a2)
                )
            continue
        assert ma is not None
        assert mb is not None
        a1, a2 = _user(sa, ma.attrs, pa), _user(sb, mb.attrs, pa)
        if not _equal(a1, a2):
            out.append(Difference(key, "attrs_differ", f"{key!r}: user attributes differ", a1, a2))
        s1, s2 = _shape(ma), _shape(mb)
        if s1 != s2:
            out.append(Difference(key, "shape_differs", f"{key!r}: shape {s1} vs {s2}", s1, s2))
            continue
        if ka == "tensor":
            if ma.torch_dtype != mb.torch_dtype:
                out.append(
                    Difference(
                        key,
                        "dtype_differs",
                        f"{key!r}: dtype {ma.torch_dtype} vs {mb.torch_dtype}",
                        ma.torch_dtype,
                        mb.torch_dtype,
                    )
                )
            pairs.append((pa, ma, mb))
            _properties(key, pa, sa, sb, ma, mb, out, codecs)
        elif ka == "unsupported" and _references(sa, sb, ma, mb):
            if not codecs:
                _reference_values(key, pa, sa, sb, ma, out)
            _properties(key, pa, sa, sb, ma, mb, out, codecs)
        elif ka == "unsupported":
            _unsupported_pair(key, pa, ma, mb, out, tables, not_compared)
            _properties(key, pa, sa, sb, ma, mb, out, codecs)
    if codecs:
        ua = sa.backend.store_properties().userblock_size
        ub = sb.backend.store_properties().userblock_size
        if ua != ub and sa.backend.name == sb.backend.name:
            out.append(
                Difference(
                    "",
                    "properties_differ",
                    f"user block of {ua} vs {ub} bytes",
                    {"userblock_size": ua},
                    {"userblock_size": ub},
                )
            )
    return pairs


def _properties(
    key: str,
    path: Path,
    sa: Scan,
    sb: Scan,
    ma: ArrayMeta,
    mb: ArrayMeta,
    out: list[Difference],
    codecs: bool,
) -> None:
    """The properties that give the values their meaning, compared where both formats state
    them: the fill value, dimension names, the dims the array can grow along; with ``codecs``
    (``metadata_only``) also the codec pipeline, when both stores are of one format (two
    formats spell their codecs apart)."""
    ba, bb = sa.backend, sb.backend
    try:
        pa, pb = ba.array_properties(path, ma), bb.array_properties(path, mb)
    except PtdError:
        return  # the values pass reports an unreadable leaf
    a: dict[str, Any] = {}
    b: dict[str, Any] = {}
    if ba.holds_fill_value and bb.holds_fill_value and not same_fill(pa.fill_value, pb.fill_value):
        a["fill_value"], b["fill_value"] = pa.fill_description(), pb.fill_description()
    if (
        ba.holds_dimension_names
        and bb.holds_dimension_names
        and pa.dimension_names != pb.dimension_names
    ):
        a["dimension_names"] = list(pa.dimension_names or []) or None
        b["dimension_names"] = list(pb.dimension_names or []) or None
    fa, fb = pa.cf_fill_value, pb.cf_fill_value  # netCDF's _FillValue, however spelled
    if (
        ba.holds_fill_value
        and bb.holds_fill_value
        and ((fa is None) != (fb is None) or (fa is not None and not same_fill(fa, fb)))
    ):
        a["cf_fill_value"], b["cf_fill_value"] = _fill_text(fa), _fill_text(fb)
    if ba.holds_maxshape and bb.holds_maxshape and pa.resizable != pb.resizable:
        a["resizable"], b["resizable"] = list(pa.resizable), list(pb.resizable)
    if codecs and ba.name == bb.name and pa.compression != pb.compression:
        a["pipeline"], b["pipeline"] = pa.compression, pb.compression
    if a or b:
        names = ", ".join(a)
        out.append(Difference(key, "properties_differ", f"{key!r}: {names} differ", a, b))


def _references(sa: Scan, sb: Scan, ma: ArrayMeta, mb: ArrayMeta) -> bool:
    """Whether both leaves are object references that both stores can read as paths."""
    return (
        ma.reference == mb.reference == "object"
        and sa.backend.holds_references
        and sb.backend.holds_references
    )


#: references compared a slab of this many at a time (each read as a python str)
REFERENCE_ROWS = 1 << 16


def _reference_values(
    key: str, path: Path, sa: Scan, sb: Scan, ma: ArrayMeta, out: list[Difference]
) -> None:
    """Two arrays of object references compared by the paths they name, a slab at a time:
    the first row that differs is reported."""
    shape = tuple(ma.shape)
    rows = shape[0] if shape else 0
    slabs: list[Any] = [()] if not shape else []
    per_row = max(1, math.prod(shape[1:]))
    step = max(1, REFERENCE_ROWS // per_row)
    slabs += [(slice(i, min(rows, i + step)),) for i in range(0, rows, step)]
    for sl in slabs:
        va = sa.backend.read_reference_paths(path, sl)
        vb = sb.backend.read_reference_paths(path, sl)
        if va.tolist() != vb.tolist():
            flat_a, flat_b = va.ravel().tolist(), vb.ravel().tolist()
            i = next(j for j, (x, y) in enumerate(zip(flat_a, flat_b, strict=True)) if x != y)
            out.append(
                Difference(
                    key,
                    "values_differ",
                    f"{key!r}: a reference names {flat_a[i]!r} vs {flat_b[i]!r}",
                    flat_a[i],
                    flat_b[i],
                )
            )
            return


def _unsupported_pair(
    key: str,
    path: Path,
    ma: ArrayMeta,
    mb: ArrayMeta,
    out: list[Difference],
    tables: list[tuple[Path, ArrayMeta, ArrayMeta]],
    not_compared: list[dict[str, str]],
) -> None:
    """A leaf that is no tensor on either side: a table is compared field by field when both
    sides have the same fields; anything else is listed as not compared."""
    if is_table(ma.dtype) and is_table(mb.dtype):
        fa, fb = table_fields(ma.dtype), table_fields(mb.dtype)
        if [n for n, _ in fa] != [n for n, _ in fb]:
            out.append(
                Difference(
                    key,
                    "dtype_differs",
                    f"{key!r}: fields {describe_table(ma.dtype)} vs {describe_table(mb.dtype)}",
                    describe_table(ma.dtype),
                    describe_table(mb.dtype),
                )
            )
            return
        tables.append((path, ma, mb))
        return
    if ma.unreadable or mb.unreadable:
        what = ma.unsupported if ma.unreadable else mb.unsupported
        reason = f"its metadata cannot be read ({what})"
    else:
        what = ma.unsupported or f"the dtype {ma.dtype}"
        reason = f"it holds {what}, whose values ptd cannot read"
    not_compared.append({"key": key, "reason": reason})


def _non_tensors(bea: Backend, beb: Backend, sa: Scan, sb: Scan, out: list[Difference]) -> None:
    nb = _nodes(sb)
    for p, kind, ma in sa.nodes:
        key = "/".join(p)
        if kind is not NodeKind.ARRAY or ma is None or ma.kind is not ValueKind.NON_TENSOR:
            continue
        other = nb.get(key)
        if other is None or other[2] is None or other[2].kind is not ValueKind.NON_TENSOR:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                va = bea.read_non_tensor(p, allow_pickle=False).value
                vb = beb.read_non_tensor(p, allow_pickle=False).value
        except PickleRefusedError:
            continue  # pickles are code: not decoded for a comparison
        ja, jb = jsonable(va), jsonable(vb)
        if ja != jb:
            out.append(
                Difference(
                    key,
                    "non_tensor_differs",
                    f"{key!r}: the non-tensor values differ",
                    *_shown(ja, jb),
                )
            )


#: how many characters of a long non-tensor value a difference keeps, around where they differ
SHOWN_CHARS = 200


def _shown(a: Any, b: Any) -> tuple[Any, Any]:
    """Two differing non-tensor values as a difference holds them: whole when both are short,
    else their texts cut together around the first place they differ (never two equal-looking
    cuts)."""
    ra, rb = repr(a), repr(b)
    if len(ra) <= SHOWN_CHARS and len(rb) <= SHOWN_CHARS:
        return a, b
    return excerpts(ra, rb, SHOWN_CHARS)


def _numbers(raw: np.ndarray, torch_dtype: str | None) -> np.ndarray:
    if torch_dtype == "bfloat16":
        return (raw.astype(np.uint32) << 16).view(np.float32)
    return raw


def _slab_rows(shape: tuple[int, ...], itemsize: int, align: int) -> int:
    row = itemsize * math.prod(shape[1:]) or 1
    rows = max(1, SLAB_BYTES // row)
    if align > 1 and rows > align:
        rows -= rows % align
    return min(rows, shape[0]) if shape else 1


def _differ(
    a: np.ndarray, b: np.ndarray, rtol: float, atol: float, equal_nan: bool, exact_bits: bool
) -> np.ndarray:
    """Element-wise: which elements differ."""
    if exact_bits or (rtol == 0 and atol == 0):
        neq = a != b
        if equal_nan and a.dtype.kind in "fc" and b.dtype.kind in "fc":
            neq &= ~(np.isnan(a) & np.isnan(b))
        return np.asarray(neq)
    return ~np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def _both_nan(a: np.ndarray, b: np.ndarray, equal_nan: bool) -> int:
    """How many elements are NaN on both sides (0 with ``equal_nan``: those are equal)."""
    if equal_nan or a.dtype.kind not in "fc" or b.dtype.kind not in "fc":
        return 0
    return int(np.count_nonzero(np.isnan(a) & np.isnan(b)))


def _slabs(
    shape: tuple[int, ...], rows: int, spans: list[tuple[int, int]] | None = None
) -> Iterator[tuple[slice, ...]]:
    """Row slabs of ``rows`` rows covering ``spans`` (row ranges; default: every row)."""
    if not shape:
        yield ()
        return
    for lo, hi in spans if spans is not None else [(0, shape[0])]:
        for s in range(lo, hi, rows):
            cancel.check()
            yield (slice(s, min(s + rows, hi)),)


def _stored_spans(be: Backend, path: Path, shape: tuple[int, ...]) -> list[tuple[int, int]] | None:
    """The row ranges of a leaf that hold stored chunks (merged, in order), or None when the
    store cannot say. Rows outside them read as the fill value. The work follows the chunks
    stored, not the number the metadata declares."""
    try:
        info = be.chunk_info(path)
    except (PtdError, AttributeError):
        return None
    if info.contiguous:
        return [] if info.stored_bytes == 0 else None
    if info.stored is None or not info.chunks:
        return None
    c0 = max(1, int(info.chunks[0]))
    firsts = sorted({idx[0] for idx in info.stored if idx and 0 <= idx[0] < info.grid[0]})
    return _merge([(i * c0, min((i + 1) * c0, shape[0])) for i in firsts])


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, merged row ranges.

    >>> _merge([(4, 6), (0, 2), (2, 3), (8, 9)])
    [(0, 3), (4, 6), (8, 9)]
    """
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _first_outside(spans: list[tuple[int, int]]) -> int:
    """The first row no span covers."""
    row = 0
    for lo, hi in spans:
        if lo > row:
            break
        row = max(row, hi)
    return row


@cancellable  # Ctrl-C / SIGTERM stop it at its next read (ptd.storage.cancel)
def _can_follow(loc: StoreLocation, follow_virtual: bool) -> bool:
    assert loc.format is not None
    return follow_virtual and policy(loc.format).virtual_data


def diff(
    a: Any,
    b: Any,
    *,
    rtol: float = 0.0,
    atol: float = 0.0,
    equal_nan: bool = False,
    metadata_only: bool = False,
    storage_options: dict[str, Any] | None = None,
    storage_options_b: dict[str, Any] | None = None,
    workers: int = 2,
    progress: Callable[..., None] | None = None,
    follow_virtual: bool = False,
) -> DiffReport:
    """Compare the stores ``a`` and ``b`` (see the module doc; ``storage_options`` for URLs,
    ``storage_options_b`` for ``b`` when it differs). ``progress(total=N)`` once, then
    ``progress(nbytes)`` as slabs complete. ``follow_virtual``: read HDF5 virtual datasets
    whose sources lie beside their file (others are listed as not compared, with their
    sources). Only an unreadable store raises."""
    if rtol < 0 or atol < 0:
        raise PtdValueError(f"rtol and atol must be >= 0, got rtol={rtol}, atol={atol}")
    t0 = time.perf_counter()
    pa, pb = as_path_str(a), as_path_str(b)
    cancel.phase("reading", f"{pa} {pb}")
    la = parse_source(pa, storage_options)
    lb = parse_source(pb, storage_options_b if storage_options_b is not None else storage_options)
    # each side that can hold virtual data follows it (a zarr side has none to follow)
    la, lb = detect(la), detect(lb)
    bea, _stale_a = open_checked(la, follow_virtual=_can_follow(la, follow_virtual))
    try:
        beb, _stale_b = open_checked(lb, follow_virtual=_can_follow(lb, follow_virtual))
    except BaseException:
        bea.close()
        raise
    with closing(bea), closing(beb):
        sa, sb = scan(bea, bea.name), scan(beb, beb.name)
        out: list[Difference] = []
        tables: list[tuple[Path, ArrayMeta, ArrayMeta]] = []
        not_compared: list[dict[str, str]] = []
        pairs = _structure(sa, sb, out, tables, not_compared, codecs=metadata_only)
        _non_tensors(bea, beb, sa, sb, out)
        report = DiffReport(
            a=remote.display(pa),
            b=remote.display(pb),
            format_a=bea.name,
            format_b=beb.name,
            same=False,
            metadata_only=metadata_only,
            rtol=float(rtol),
            atol=float(atol),
            equal_nan=bool(equal_nan),
            not_compared=not_compared,
        )
        if not metadata_only:
            _values(bea, beb, pairs, out, report, workers, progress)
            _tables(bea, beb, tables, out, report, progress)
    order = {"/".join(p): i for i, (p, _k, _m) in enumerate(sa.nodes)}
    out.sort(key=lambda d: (order.get(d.key, len(order)), DIFF_KINDS.index(d.kind)))
    report.differences = out
    report.same = not out
    report.seconds = round(time.perf_counter() - t0, 6)
    return report


_Item = tuple[tuple[slice, ...], "Future[np.ndarray]", "Future[np.ndarray]"]


def _tables(
    bea: Backend,
    beb: Backend,
    tables: list[tuple[Path, ArrayMeta, ArrayMeta]],
    out: list[Difference],
    report: DiffReport,
    progress: Callable[..., None] | None,
) -> None:
    """Compare table leaves field by field, slab by slab (bounded memory like the tensors):
    one difference per differing field. A table whose records cannot be read is listed as
    not compared."""
    for path, ma, mb in tables:
        key = "/".join(path)
        shape = tuple(ma.shape)
        rows = _slab_rows(shape, max(ma.dtype.itemsize, mb.dtype.itemsize), 1)
        names = [n for n, _ in table_fields(ma.dtype)]
        found = {n: _Mismatch() for n in names}
        try:
            for region in _slabs(shape, rows) if 0 not in shape else ():
                xa, xb = bea.read(path, region), beb.read(path, region)
                start = region[0].start if region else 0
                for name in names:
                    neq = _field_differ(xa[name], xb[name], report)
                    if found[name].add(xa[name], xb[name], neq, start) and xa[name].ndim == 1:
                        # counted per record, as the differing records are
                        found[name].both_nan += _both_nan(xa[name], xb[name], report.equal_nan)
                report.nbytes_compared += xa.nbytes
                if progress is not None:
                    progress(int(xa.nbytes))
        except PtdError as err:
            report.not_compared.append({"key": key, "reason": f"its records cannot be read: {err}"})
            continue
        report.leaves_compared += 1
        total = math.prod(shape) if shape else 1
        for name in names:
            if found[name].count:
                out.append(found[name].difference(key, total, name))


class _Mismatch:
    """What a value difference reports, gathered slab by slab in bounded memory: the count,
    the first differing rows and elements (with both values), max |a-b| and max relative."""

    def __init__(self) -> None:
        self.count = 0
        self.both_nan = 0
        self.rows: list[int] = []
        self.first: list[dict[str, Any]] = []
        self.max_abs: float | None = None
        self.max_rel: float | None = None

    def add(self, xa: np.ndarray, xb: np.ndarray, neq: np.ndarray, start: int) -> int:
        """Record the differing elements ``neq`` of a slab whose first row is ``start``
        (``neq`` of ``xa``'s shape, or per record for a table field); returns their count."""
        n = int(np.count_nonzero(neq))
        if not n:
            return 0
        self.count += n
        scalar = neq.ndim == 0
        if scalar:
            flat = np.zeros(1, dtype=np.intp)
            xa, xb = xa.reshape(1, *xa.shape), xb.reshape(1, *xb.shape)
            neq = neq.reshape(1)
        else:
            flat = np.flatnonzero(neq)
        if len(self.rows) < _FIRST_ROWS:
            bad = neq.reshape(neq.shape[0], -1).any(axis=1)
            self.rows.extend(int(i) + start for i in np.flatnonzero(bad)[:_FIRST_ROWS])
            del self.rows[_FIRST_ROWS:]
        if len(self.first) < _FIRST_ROWS:
            for i in flat[: _FIRST_ROWS - len(self.first)]:
                index = [int(j) for j in np.unravel_index(int(i), neq.shape)]
                at = tuple(index)
                index = [] if scalar else [index[0] + start, *index[1:]]
                self.first.append({"index": index, "a": jsonable(xa[at]), "b": jsonable(xb[at])})
        if xa.dtype.kind in "biufc" and xb.dtype.kind in "iufc" and xa.shape == neq.shape:
            da = xa.reshape(-1)[flat].astype(np.complex128 if xa.dtype.kind == "c" else np.float64)
            db = xb.reshape(-1)[flat].astype(np.complex128 if xb.dtype.kind == "c" else np.float64)
            with np.errstate(divide="ignore", invalid="ignore"):
                gap = np.abs(da - db)
                rel = gap / np.abs(db)
            gap, rel = gap[~np.isnan(gap)], rel[~np.isnan(rel)]
            if gap.size:
                top = float(gap.max())
                self.max_abs = top if self.max_abs is None else max(self.max_abs, top)
            if rel.size:
                top = float(rel.max())
                self.max_rel = top if self.max_rel is None else max(self.max_rel, top)
        return n

    def summary(self) -> str:
        """``max |a-b| 0.5, max rel 0.25; first at [3, 1]: a=1.5 b=2.0`` (what is known)."""
        parts = []
        if self.max_abs is not None:
            parts.append(f"max |a-b| {self.max_abs:.6g}")
        if self.max_rel is not None:
            parts.append(f"max rel {self.max_rel:.6g}")
        head = ", ".join(parts)
        if self.first:
            f = self.first[0]
            head += ("; " if head else "") + f"first at {f['index']}: a={f['a']!r} b={f['b']!r}"
        return head

    def difference(self, key: str, total: int, field: str | None = None) -> Difference:
        what = f"{key!r} field {field!r}" if field else repr(key)
        return Difference(
            key,
            "values_differ",
            f"{what}: {self.count} of {total} values differ ({self.summary()})",
            count=self.count,
            first_rows=self.rows,
            field=field,
            both_nan=self.both_nan,
            first=self.first,
            max_abs_diff=self.max_abs,
            max_rel_diff=self.max_rel,
            total=total,
        )


def _field_differ(a: np.ndarray, b: np.ndarray, report: DiffReport) -> np.ndarray:
    """Which records differ in one field (a sub-array field: any of its elements)."""
    if a.dtype.kind in "fc" and b.dtype.kind in "fc":
        neq = _differ(a, b, report.rtol, report.atol, report.equal_nan, False)
    elif a.dtype.kind == "V" or b.dtype.kind == "V":  # a nested record: its bytes
        neq = (
            np.asarray(a.tobytes() != b.tobytes())
            if a.shape == ()
            else np.array([x.tobytes() != y.tobytes() for x, y in zip(a, b, strict=True)])
        )
    else:
        neq = np.asarray(a != b)
    if neq.ndim > 1:
        return np.asarray(neq.reshape(neq.shape[0], -1).any(axis=1))
    return neq


class _LeafCompare:
    """The running comparison of one tensor leaf, slab by slab."""

    def __init__(self, ma: ArrayMeta, mb: ArrayMeta, report: DiffReport) -> None:
        self.ma, self.mb, self.report = ma, mb, report
        # integers, bools and float8 bits compare exactly; bfloat16 bits are widened first
        self.exact = ma.torch_dtype != "bfloat16" and (
            ma.dtype.kind not in "fc"
            or bool(ma.torch_dtype and ma.torch_dtype.startswith("float8"))
        )
        self.found = _Mismatch()

    def settle(self, item: _Item) -> int:
        """Compare one slab read on the pool; returns its bytes (side A)."""
        region, fa, fb = item
        return self.compare(region, fa.result(), fb.result())

    def fill(
        self,
        at: tuple[slice, ...],
        ra: np.ndarray,
        rb: np.ndarray,
        rows: int,
        shape: tuple[int, ...],
    ) -> None:
        """``rows`` rows that hold the fill value on both sides (one element of each read at
        ``at``): all of their elements differ, or none."""
        xa = _numbers(ra, self.ma.torch_dtype)
        xb = _numbers(rb, self.mb.torch_dtype)
        r = self.report
        neq = _differ(xa, xb, r.rtol, r.atol, r.equal_nan, self.exact)
        per_row = math.prod(shape[1:])
        r.nbytes_compared += rows * per_row * ra.dtype.itemsize
        if not bool(np.asarray(neq).reshape(-1)[0]):
            return
        found = self.found
        start = at[0].start
        found.add(xa, xb, neq, start)
        found.count += rows * per_row - 1
        if _both_nan(xa, xb, r.equal_nan):
            found.both_nan += rows * per_row

    def compare(self, region: tuple[slice, ...], ra: np.ndarray, rb: np.ndarray) -> int:
        """Compare one slab; returns its bytes (side A)."""
        xa = _numbers(ra, self.ma.torch_dtype)
        xb = _numbers(rb, self.mb.torch_dtype)
        r = self.report
        neq = _differ(xa, xb, r.rtol, r.atol, r.equal_nan, self.exact)
        if self.found.add(xa, xb, neq, region[0].start if region else 0):
            self.found.both_nan += _both_nan(xa, xb, r.equal_nan)
        r.nbytes_compared += ra.nbytes
        return int(ra.nbytes)


def _compare_fill(
    bea: Backend, beb: Backend, path: Path, shape: tuple[int, ...], leaf: _LeafCompare
) -> list[tuple[int, int]] | None:
    """Where both stores list their stored chunks: the rows neither side stores hold the fill
    value on both sides, compared once (one element a side) and counted; returns the row
    ranges left to compare slab by slab (None: every row). A leaf declaring 10**15 elements
    and storing none costs two one-element reads. Where a side cannot list its chunks, every
    row is compared, unless the leaf declares more than ``PTD_MAX_ARRAY_BYTES`` (refused)."""
    key = "/".join(path)
    sa, sb = _stored_spans(bea, path, shape), _stored_spans(beb, path, shape)
    if sa is None or sb is None:
        check_declared(shape, leaf.ma.dtype.itemsize, f"key {key!r} of {bea.location}")
        return None
    spans = _merge(sa + sb)
    covered = sum(hi - lo for lo, hi in spans)
    if covered < shape[0]:
        row = _first_outside(spans)
        at: tuple[slice, ...] = (slice(row, row + 1),) + tuple(slice(0, 1) for _ in shape[1:])
        leaf.fill(at, bea.read(path, at), beb.read(path, at), shape[0] - covered, shape)
    return spans


def _values(
    bea: Backend,
    beb: Backend,
    pairs: list[tuple[Path, ArrayMeta, ArrayMeta]],
    out: list[Difference],
    report: DiffReport,
    workers: int,
    progress: Callable[..., None] | None,
) -> None:
    if progress is not None:
        progress(total=sum(math.prod(ma.shape) * ma.dtype.itemsize for _p, ma, _mb in pairs))
    n_workers = max(2, int(workers))
    with runtime.job_pool(n_workers, "diff") as pool:
        for path, ma, mb in pairs:
            key = "/".join(path)
            shape = tuple(ma.shape)
            nbytes = math.prod(shape) * max(ma.dtype.itemsize, mb.dtype.itemsize)
            small = nbytes <= SMALL_LEAF
            try:
                align = (
                    int(bea.chunk_info(path, list_stored=False).chunks[0])
                    if shape and not small
                    else 1
                )
            except (PtdError, AttributeError, IndexError):
                align = 1
            rows = _slab_rows(shape, max(ma.dtype.itemsize, mb.dtype.itemsize), align)
            leaf = _LeafCompare(ma, mb, report)
            pending: list[_Item] = []
            try:
                if small and 0 not in shape:
                    # one small read a side: here, as a pool round trip costs more than it
                    whole: tuple[slice, ...] = ()  # the whole leaf
                    done = leaf.compare(whole, bea.read(path, whole), beb.read(path, whole))
                    if progress is not None:
                        progress(done)
                elif 0 not in shape:
                    spans = _compare_fill(bea, beb, path, shape, leaf)
                    for region in _slabs(shape, rows, spans):
                        pending.append(
                            (
                                region,
                                pool.submit(bea.read, path, region),
                                pool.submit(beb.read, path, region),
                            )
                        )
                        while len(pending) > max(1, n_workers // 2):
                            done = leaf.settle(pending.pop(0))
                            if progress is not None:
                                progress(done)
                while pending:
                    done = leaf.settle(pending.pop(0))
                    if progress is not None:
                        progress(done)
            except PtdError as err:  # a chunk that cannot be read or decoded
                for _region, fa, fb in pending:
                    fa.cancel(), fb.cancel()
                report.not_compared.append(
                    {"key": key, "reason": f"its data cannot be read: {err}"}
                )
                continue
            report.leaves_compared += 1
            if leaf.found.count:
                out.append(leaf.found.difference(key, math.prod(shape) if shape else 1))
