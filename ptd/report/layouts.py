"""The layouts ``ptd validate`` knows: files whose own metadata says how long each array is.

The length rule (:mod:`ptd.report.lengths`) guesses a group's length from the leading dims
its leaves share. Many files need no guess: they name their dimensions, or they are written in
an encoding whose specification fixes every length. For those, validate checks the stated
rule exactly and leaves the nodes it covers out of the guessing rule (a CSR matrix's
``indptr`` is one longer than its rows by design, not a row short).

Two kinds of rule, each stated here with its source:

* **named dimensions** (:func:`check_dimensions`): an array names its dimensions through
  its format (zarr v3 ``dimension_names``, zarr v2 / xarray ``_ARRAY_DIMENSIONS``, HDF5
  dimension labels or attached dimension scales, as netCDF-4, h5netcdf and xarray write them:
  :attr:`ptd.storage.properties.ArrayProperties.dimension_names`). Every array naming a
  dimension has that dimension's length. A dimension belongs to the nearest group, the array's
  own or an ancestor, that *defines* it by a coordinate: a 1-d array named as the dimension
  along it, or an HDF5 dimension scale (``CLASS = DIMENSION_SCALE``, its ``NAME``), as the
  netCDF data model scopes dimensions (https://docs.unidata.ucar.edu/netcdf-c/current/groups.html).
  The coordinate's length is the dimension's; so is the length netCDF-4 states for a
  dimension that is no variable (its dimension-only scale, which is no key:
  :attr:`ptd.storage.api.Backend.hidden_dimensions`); without either, the length most arrays
  of the group have (the largest, on a tie). A mismatch is ``dimension_mismatch``.
* **encodings** (:data:`LAYOUTS`): a group whose attributes name an encoding is checked by
  its entry; each entry is a :class:`Layout` (its name, source, the rule in one line, the
  attribute test, the check). A broken rule is ``encoding_mismatch``. Every node at or below
  such a group is left out of the guessing rule. To teach validate the next layout, add one
  entry.

======================  ===================================================================
layout                  rule
======================  ===================================================================
anndata                 ``X``, ``layers/*`` are ``[n_obs, n_vars]``; ``obs``/``var`` have
                        n_obs/n_vars rows; ``obsm/*`` (``varm/*``) n_obs (n_vars) rows;
                        ``obsp/*`` (``varp/*``) ``[n_obs, n_obs]`` (``[n_vars, n_vars]``)
csr_matrix/csc_matrix   ``data`` and ``indices`` of one length; ``indptr`` of ``shape[0] + 1``
                        (csr) or ``shape[1] + 1`` (csc); with ``--data``, ``indptr[-1]`` is
                        ``len(data)``
dataframe               the ``_index`` column exists; every column (those of
                        ``column-order`` must exist) has the index's length (a categorical's
                        ``codes``, a nullable's ``values``)
categorical             ``codes`` and ``categories`` exist; with ``--data``, every code is
                        ``-1`` (missing) or an index into ``categories``
nullable-*              ``values`` and ``mask`` of one length
awkward-array           buffers whose lengths its ``form`` states: not guessed at
hdmf DynamicTable       every column has ``len(id)`` rows, except a ``VectorData`` indexed by
                        ``<name>_index`` (a ragged column: the index has the rows, and with
                        ``--data`` its last value is at most the data's length); ``colnames``
                        exist
hdmf typed groups       (``neurodata_type`` + ``namespace``: NWB) follow their schema: not
                        guessed at; where the group has ``data`` and ``timestamps`` (an NWB
                        ``TimeSeries`` and every type derived from it), ``timestamps`` has
                        ``data``'s leading length (NWB's ``num_times`` dimension)
======================  ===================================================================

>>> [entry.name for entry in LAYOUTS][:3]
['anndata', 'anndata csr_matrix', 'anndata csc_matrix']
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ptd.errors import PtdError
from ptd.report.problems import Problem
from ptd.report.scan import Scan
from ptd.storage import spelled
from ptd.storage.api import ArrayMeta, Path, ValueKind

__all__ = [
    "LAYOUTS",
    "Layout",
    "LayoutCheck",
    "check_dimensions",
    "check_layouts",
    "is_reference",
]

_ERRORS = (PtdError, OSError, ValueError, TypeError, KeyError, IndexError)

ANNDATA_SPEC = "https://anndata.readthedocs.io/en/latest/fileformat-prose.html"
HDMF_SPEC = "https://hdmf-common-schema.readthedocs.io/en/stable/format_description.html"
NWB_TIMESERIES_SPEC = "https://nwb-schema.readthedocs.io/en/latest/format.html#timeseries"
#: rows read at a time where a rule reads a whole array (a categorical's codes)
_BLOCK_ROWS = 1 << 20
DIMSCALE_SPEC = "https://support.hdfgroup.org/documentation/hdf5-docs/hdf5_topics/H5DS_Spec.pdf"


def is_reference(meta: ArrayMeta) -> bool:
    """Whether an array holds HDF5 object or region references (a column kind of its own:
    an NWB table's ``group`` column), as its backend says."""
    return meta.reference is not None


class View:
    """What the rules read of a scanned store: kinds, shapes, attributes, dimension names
    and (with ``data``) an array's last value."""

    def __init__(self, s: Scan, metas: Mapping[Path, ArrayMeta], *, data: bool = False) -> None:
        self.scan = s
        self.metas = metas
        self.data = data
        self._dims: dict[Path, tuple[str | None, ...] | None] = {}

    def children(self, path: Path) -> list[str]:
        try:
            return list(self.scan.tree.children(path))
        except _ERRORS:
            return []

    def is_group(self, path: Path) -> bool:
        return path in self.scan.group_attrs

    def attrs(self, path: Path) -> Mapping[str, Any]:
        if path in self.scan.group_attrs:
            return self.scan.group_attrs[path]
        meta = self.metas.get(path)
        return meta.attrs if meta is not None else {}

    def shape(self, path: Path) -> tuple[int, ...] | None:
        """An array's shape (None for a group or an unreadable node)."""
        meta = self.metas.get(path)
        return tuple(meta.shape) if meta is not None and not meta.unreadable else None

    def rows(self, path: Path) -> int | None:
        """An array's leading dim (None: a group, a 0-d array, an unreadable node)."""
        shape = self.shape(path)
        return int(shape[0]) if shape else None

    def dims(self, path: Path) -> tuple[str | None, ...] | None:
        """The names of an array's dimensions, as its format states them; None if unnamed."""
        if path not in self._dims:
            meta = self.metas.get(path)
            names = None
            if meta is not None and not meta.unreadable and meta.shape:
                try:
                    names = self.scan.backend.dimension_names(path, meta)
                except _ERRORS:
                    names = None
            self._dims[path] = names
        return self._dims[path]

    def last(self, path: Path) -> int | None:
        """The last value of a 1-d integer array, read only with ``data``; else None."""
        meta = self.metas.get(path)
        if not self.data or meta is None or meta.kind is not ValueKind.NUMERIC:
            return None
        if len(meta.shape) != 1 or not meta.shape[0] or meta.dtype.kind not in "iu":
            return None
        n = int(meta.shape[0])
        try:
            return int(self.scan.backend.read(path, (slice(n - 1, n),))[0])
        except _ERRORS:
            return None

    def extremes(self, path: Path) -> tuple[int, int] | None:
        """The smallest and largest value of a 1-d integer array, read ``_BLOCK_ROWS`` rows
        at a time, only with ``data``; else None (also for an empty array)."""
        meta = self.metas.get(path)
        if not self.data or meta is None or meta.kind is not ValueKind.NUMERIC:
            return None
        if len(meta.shape) != 1 or not meta.shape[0] or meta.dtype.kind not in "iu":
            return None
        n = int(meta.shape[0])
        low = high = None
        try:
            for start in range(0, n, _BLOCK_ROWS):
                block = self.scan.backend.read(path, (slice(start, min(n, start + _BLOCK_ROWS)),))
                lo, hi = int(block.min()), int(block.max())
                low = lo if low is None else min(low, lo)
                high = hi if high is None else max(high, hi)
        except _ERRORS:
            return None
        return (low, high) if low is not None and high is not None else None


def _key(path: Path) -> str:
    return "/".join(path) or "/"


@dataclass
class LayoutCheck:
    """What the layouts found: the problems, the nodes the guessing rule leaves alone, and
    which layout each matched group follows (``key -> layout name``)."""

    problems: list[Problem] = field(default_factory=list)
    claimed: set[Path] = field(default_factory=set)
    layouts: dict[str, str] = field(default_factory=dict)


#: a rule's check: (the view, the group's path, the layout's name) -> problems
Check = Callable[[View, Path, str], list[Problem]]


@dataclass(frozen=True)
class Layout:
    """One known encoding: its ``name``, where it is specified (``source``), the ``rule`` in
    one line, ``matches(group attrs)``, and ``check(view, group, name)``."""

    name: str
    source: str
    rule: str
    matches: Callable[[Mapping[str, Any]], bool]
    check: Check


def _mismatch(key: str, message: str, found: Any, expected: Any) -> Problem:
    return Problem(
        key,
        "encoding_mismatch",
        message,
        shape=found if isinstance(found, list) else [found] if found is not None else None,
        expected=expected if isinstance(expected, list) else [expected],
    )


def _missing(view: View, group: Path, name: str, layout: str) -> Problem | None:
    if name in view.children(group):
        return None
    return Problem(
        _key(group + (name,)),
        "encoding_mismatch",
        f"{_key(group)!r} is an {layout} group without its {name!r} member",
        expected=name,
    )


def _int_list(value: Any) -> list[int] | None:
    try:
        out = [int(v) for v in value]
    except (TypeError, ValueError):
        return None
    return out


# --- AnnData (anndata's on-disk format: groups and arrays with an ``encoding-type``) ---------


def _encoding(view: View, path: Path) -> str | None:
    value = view.attrs(path).get("encoding-type")
    return value if isinstance(value, str) else None


def _element_shape(view: View, path: Path) -> tuple[int, ...] | None:
    """An AnnData element's shape: an array's, a sparse matrix's ``shape`` attribute, a
    dataframe's rows, a categorical's codes, a nullable's values."""
    if not view.is_group(path):
        return view.shape(path)
    enc = _encoding(view, path)
    if enc in ("csr_matrix", "csc_matrix"):
        shape = _int_list(view.attrs(path).get("shape"))
        return tuple(shape) if shape is not None and len(shape) == 2 else None
    if enc == "dataframe":
        n = _dataframe_rows(view, path)
        return (n,) if n is not None else None
    if enc == "categorical":
        return view.shape(path + ("codes",))
    if enc is not None and enc.startswith("nullable-"):
        return view.shape(path + ("values",))
    if enc == "awkward-array":
        n = view.attrs(path).get("length")
        return (int(n),) if isinstance(n, int) else None
    return None


def _dataframe_rows(view: View, path: Path) -> int | None:
    index = view.attrs(path).get("_index")
    return view.rows(path + (index,)) if isinstance(index, str) else None


def _check_anndata(view: View, group: Path, layout: str) -> list[Problem]:
    out: list[Problem] = []
    n_obs = _dataframe_rows(view, group + ("obs",))
    n_var = _dataframe_rows(view, group + ("var",))
    if n_obs is None or n_var is None:
        return out

    def expect(path: Path, want: tuple[int | None, ...], what: str) -> None:
        shape = _element_shape(view, path)
        if shape is None or len(shape) < len(want):
            return
        got = shape[: len(want)]
        if any(w is not None and g != w for g, w in zip(got, want, strict=True)):
            out.append(
                _mismatch(
                    _key(path),
                    f"{_key(path)!r} has shape {list(shape)}; in an AnnData file {what} "
                    f"(n_obs={n_obs}, n_vars={n_var})",
                    list(shape),
                    list(want),
                )
            )

    names = view.children(group)
    if "X" in names:
        expect(group + ("X",), (n_obs, n_var), "X is [n_obs, n_vars]")
    for holder, want, what in (
        ("layers", (n_obs, n_var), "a layer is [n_obs, n_vars]"),
        ("obsm", (n_obs,), "an obsm entry has n_obs rows"),
        ("varm", (n_var,), "a varm entry has n_vars rows"),
        ("obsp", (n_obs, n_obs), "an obsp entry is [n_obs, n_obs]"),
        ("varp", (n_var, n_var), "a varp entry is [n_vars, n_vars]"),
    ):
        if holder in names and view.is_group(group + (holder,)):
            for name in view.children(group + (holder,)):
                expect(group + (holder, name), want, what)
    return out


def _check_sparse(view: View, group: Path, layout: str) -> list[Problem]:
    out = [p for m in ("data", "indices", "indptr") if (p := _missing(view, group, m, layout))]
    if out:
        return out
    enc = _encoding(view, group)
    shape = _element_shape(view, group)
    data, indices, indptr = (view.rows(group + (m,)) for m in ("data", "indices", "indptr"))
    if data is not None and indices is not None and data != indices:
        out.append(
            _mismatch(
                _key(group + ("indices",)),
                f"{_key(group + ('indices',))!r} has {indices} entries and "
                f"{_key(group + ('data',))!r} {data}: a {enc} holds one index per value",
                indices,
                data,
            )
        )
    if shape is not None and indptr is not None:
        axis = 0 if enc == "csr_matrix" else 1
        want = shape[axis] + 1
        if indptr != want:
            out.append(
                _mismatch(
                    _key(group + ("indptr",)),
                    f"{_key(group + ('indptr',))!r} has {indptr} entries; a {enc} of shape "
                    f"{list(shape)} needs shape[{axis}] + 1 = {want}",
                    indptr,
                    want,
                )
            )
        elif data is not None:
            end = view.last(group + ("indptr",))
            if end is not None and end != data:
                out.append(
                    _mismatch(
                        _key(group + ("indptr",)),
                        f"{_key(group + ('indptr',))!r} ends at {end}, but "
                        f"{_key(group + ('data',))!r} holds {data} values (indptr[-1] is "
                        "len(data))",
                        end,
                        data,
                    )
                )
    return out


def _check_dataframe(view: View, group: Path, layout: str) -> list[Problem]:
    attrs = view.attrs(group)
    index = attrs.get("_index")
    if not isinstance(index, str):
        return [
            _mismatch(
                _key(group),
                f"{_key(group)!r} is an AnnData dataframe without an '_index' attribute "
                "naming its index column",
                None,
                "_index",
            )
        ]
    out = [p for p in [_missing(view, group, index, layout)] if p]
    order = attrs.get("column-order")
    columns = [c for c in order if isinstance(c, str)] if isinstance(order, list) else []
    out += [p for c in columns if (p := _missing(view, group, c, layout))]
    n = _dataframe_rows(view, group)
    if n is None:
        return out
    for name in view.children(group):
        shape = _element_shape(view, group + (name,))
        if shape and shape[0] != n:
            key = _key(group + (name,))
            out.append(
                _mismatch(
                    key,
                    f"{key!r} has {shape[0]} rows; its dataframe {_key(group)!r} has {n} (the "
                    f"length of its index {index!r})",
                    shape[0],
                    n,
                )
            )
    return out


def _check_categorical(view: View, group: Path, layout: str) -> list[Problem]:
    out = [p for m in ("codes", "categories") if (p := _missing(view, group, m, layout))]
    if out:
        return out
    n = view.rows(group + ("categories",))
    codes = group + ("codes",)
    found = view.extremes(codes) if n is not None else None
    if found is not None and n is not None and (found[0] < -1 or found[1] >= n):
        bad = found[1] if found[1] >= n else found[0]
        out.append(
            _mismatch(
                _key(codes),
                f"{_key(codes)!r} holds the code {bad}, but {_key(group + ('categories',))!r} "
                f"has {n} categories (a code is -1 for a missing value or an index into the "
                "categories)",
                bad,
                [-1, n - 1],
            )
        )
    return out


def _check_nullable(view: View, group: Path, layout: str) -> list[Problem]:
    out = [p for m in ("values", "mask") if (p := _missing(view, group, m, layout))]
    if out:
        return out
    values, mask = view.rows(group + ("values",)), view.rows(group + ("mask",))
    if values is not None and mask is not None and values != mask:
        key = _key(group + ("mask",))
        out.append(
            _mismatch(
                key,
                f"{key!r} has {mask} rows; {_key(group + ('values',))!r} has {values} (a "
                "nullable array's mask has one entry per value)",
                mask,
                values,
            )
        )
    return out


def _nothing(view: View, group: Path, layout: str) -> list[Problem]:
    return []


# --- hdmf (NWB): typed groups; DynamicTable with ragged columns -----------------------------


def _is_hdmf(attrs: Mapping[str, Any]) -> bool:
    return isinstance(attrs.get("neurodata_type"), str) and isinstance(attrs.get("namespace"), str)


def _is_table(attrs: Mapping[str, Any]) -> bool:
    return _is_hdmf(attrs) and "colnames" in attrs


def _check_typed(view: View, group: Path, layout: str) -> list[Problem]:
    """An NWB TimeSeries (any typed group with ``data`` and ``timestamps`` arrays): one
    timestamp per sample, ``len(timestamps) == data.shape[0]``."""
    names = view.children(group)
    if "data" not in names or "timestamps" not in names:
        return []
    data, stamps = view.rows(group + ("data",)), view.rows(group + ("timestamps",))
    if data is None or stamps is None or data == stamps:
        return []
    key = _key(group + ("timestamps",))
    return [
        _mismatch(
            key,
            f"{key!r} has {stamps} timestamps; {_key(group + ('data',))!r} has {data} samples "
            "(a TimeSeries has one timestamp per sample)",
            stamps,
            data,
        )
    ]


def _check_table(view: View, group: Path, layout: str) -> list[Problem]:
    names = view.children(group)
    out = [p for p in [_missing(view, group, "id", layout)] if p]
    colnames = view.attrs(group).get("colnames")
    if isinstance(colnames, str):
        colnames = [colnames]
    if isinstance(colnames, list):
        out += [
            p for c in colnames if isinstance(c, str) and (p := _missing(view, group, c, layout))
        ]
    rows = view.rows(group + ("id",))
    if rows is None:
        return out
    arrays = [n for n in names if not view.is_group(group + (n,))]
    # a ragged column: <name>_index (a VectorIndex) indexes <name>; an index can be indexed
    targets = {n[: -len("_index")] for n in arrays if n.endswith("_index")}
    for name in arrays:
        if name in targets or name == "id":
            continue
        n = view.rows(group + (name,))
        if n is not None and n != rows:
            key = _key(group + (name,))
            what = "the index of a ragged column" if name.endswith("_index") else "a column"
            out.append(
                _mismatch(
                    key,
                    f"{key!r} ({what}) has {n} rows; its table {_key(group)!r} has {rows} "
                    f"(the length of {_key(group + ('id',))!r})",
                    n,
                    rows,
                )
            )
    for name in arrays:
        if not name.endswith("_index") or name[: -len("_index")] not in arrays:
            continue
        target = group + (name[: -len("_index")],)
        end, size = view.last(group + (name,)), view.rows(target)
        if end is not None and size is not None and end > size:
            key = _key(group + (name,))
            out.append(
                _mismatch(
                    key,
                    f"{key!r} ends at {end}, past the end of {_key(target)!r} ({size} "
                    "values): a VectorIndex's last value is at most its data's length",
                    end,
                    size,
                )
            )
    return out


#: every known encoding, in the order they are tried (the first that matches a group)
LAYOUTS: tuple[Layout, ...] = (
    Layout(
        "anndata",
        ANNDATA_SPEC,
        "X and layers are [n_obs, n_vars]; obsm/varm/obsp/varp follow n_obs and n_vars",
        lambda a: a.get("encoding-type") in ("anndata", "raw"),
        _check_anndata,
    ),
    Layout(
        "anndata csr_matrix",
        ANNDATA_SPEC,
        "data and indices of one length, indptr of shape[0] + 1 ending at len(data)",
        lambda a: a.get("encoding-type") == "csr_matrix",
        _check_sparse,
    ),
    Layout(
        "anndata csc_matrix",
        ANNDATA_SPEC,
        "data and indices of one length, indptr of shape[1] + 1 ending at len(data)",
        lambda a: a.get("encoding-type") == "csc_matrix",
        _check_sparse,
    ),
    Layout(
        "anndata dataframe",
        ANNDATA_SPEC,
        "an _index column; every column (column-order's exist) has the index's length",
        lambda a: a.get("encoding-type") == "dataframe",
        _check_dataframe,
    ),
    Layout(
        "anndata categorical",
        ANNDATA_SPEC,
        "codes and categories exist (the codes have the dataframe's length); each code is "
        "-1 or below len(categories)",
        lambda a: a.get("encoding-type") == "categorical",
        _check_categorical,
    ),
    Layout(
        "anndata nullable",
        ANNDATA_SPEC,
        "values and mask of one length",
        lambda a: str(a.get("encoding-type", "")).startswith("nullable-"),
        _check_nullable,
    ),
    Layout(
        "anndata awkward-array",
        ANNDATA_SPEC,
        "buffers whose lengths the form states: not guessed at",
        lambda a: a.get("encoding-type") == "awkward-array",
        _nothing,
    ),
    Layout(
        "anndata element",
        ANNDATA_SPEC,
        "any other encoded group (dict...): its members are independent, not guessed at",
        lambda a: isinstance(a.get("encoding-type"), str),
        _nothing,
    ),
    Layout(
        "hdmf DynamicTable",
        HDMF_SPEC,
        "columns of len(id) rows; a ragged column's <name>_index has the rows and ends "
        "within <name>",
        _is_table,
        _check_table,
    ),
    Layout(
        "hdmf typed group",
        NWB_TIMESERIES_SPEC,
        "a group its schema describes (neurodata_type, namespace): not guessed at; a "
        "TimeSeries' timestamps has data's length",
        _is_hdmf,
        _check_typed,
    ),
)


def check_layouts(s: Scan, metas: Mapping[Path, ArrayMeta], *, data: bool = False) -> LayoutCheck:
    """Check every group that follows a known encoding (:data:`LAYOUTS`) and the named
    dimensions (:func:`check_dimensions`); ``data``: also the rules that read a value."""
    view = View(s, metas, data=data)
    out = LayoutCheck()
    roots: list[Path] = []
    for g in s.groups:
        attrs = s.group_attrs.get(g, {})
        for entry in LAYOUTS:
            if entry.matches(attrs):
                out.layouts[_key(g) if g else ""] = entry.name
                out.problems += entry.check(view, g, entry.name)
                roots.append(g)
                break
    if roots:
        for q, _kind, _meta in s.nodes:
            if any(q[: len(r)] == r for r in roots):
                out.claimed.add(q)
        if () in roots:
            out.claimed.add(())
    dims = check_dimensions(view, skip=out.claimed)
    out.problems += dims.problems
    out.claimed |= dims.claimed
    return out


# --- named dimensions --------------------------------------------------------------------------


def _scale_name(attrs: Mapping[str, Any], own: str) -> str | None:
    """An HDF5 dimension scale's dimension name (its ``NAME``, unless netCDF's placeholder
    text, then its own name); None when the array is not a scale."""
    cls = attrs.get("CLASS")
    if isinstance(cls, bytes):
        cls = cls.decode("ascii", "replace")
    if cls != "DIMENSION_SCALE":
        return None
    name = attrs.get("NAME")
    if isinstance(name, bytes):
        name = name.decode("utf-8", "replace")
    if not isinstance(name, str) or not name or spelled.is_dimension_only_name(name):
        return own
    return name


@dataclass
class _Dim:
    """One dimension of one group: its coordinate (if any) and the arrays along it."""

    coordinate: tuple[Path, int] | None = None
    uses: list[tuple[Path, int, int]] = field(default_factory=list)  # (array, axis, length)


def check_dimensions(view: View, *, skip: set[Path] | None = None) -> LayoutCheck:
    """Every array that names a dimension has the dimension's length (see the module doc):
    ``dimension_mismatch`` where not. ``skip``: arrays left out (an encoding checks them).
    The arrays that name a dimension, and the coordinates, are ``claimed``."""
    skip = skip or set()
    out = LayoutCheck()
    # the coordinates: group -> dimension name -> (array, length)
    defined: dict[Path, dict[str, tuple[Path, int]]] = {}
    named: list[tuple[Path, tuple[str | None, ...]]] = []
    for q, meta in view.metas.items():
        if q in skip or meta.unreadable or not meta.shape:
            continue
        scale = _scale_name(meta.attrs, q[-1])
        dims = view.dims(q)
        if scale is not None and len(meta.shape) == 1:
            defined.setdefault(q[:-1], {})[scale] = (q, int(meta.shape[0]))
            out.claimed.add(q)
        elif dims is not None and len(meta.shape) == 1 and dims[0] == q[-1]:
            defined.setdefault(q[:-1], {})[q[-1]] = (q, int(meta.shape[0]))
        if dims is not None and len(dims) == len(meta.shape):
            named.append((q, dims))
            out.claimed.add(q)
    # dimensions the store states by a node that is no key (netCDF-4's scale of a dimension
    # that is no variable): its length, exactly, as a coordinate's
    stated = dict(view.scan.backend.hidden_dimensions)
    for q, length in stated.items():
        defined.setdefault(q[:-1], {}).setdefault(q[-1], (q, int(length)))
    found: dict[tuple[Path, str], _Dim] = {}
    for q, dims in named:
        for axis, name in enumerate(dims):
            if not name:
                continue
            scope = q[:-1]
            for i in range(len(q) - 1, -1, -1):
                if name in defined.get(q[:i], {}):
                    scope = q[:i]
                    break
            dim = found.setdefault((scope, name), _Dim(defined.get(scope, {}).get(name)))
            dim.uses.append((q, axis, int(view.metas[q].shape[axis])))
    for (scope, name), dim in found.items():
        if dim.coordinate is not None:
            coord, length = dim.coordinate
            source = (
                "the length the file states for it (netCDF's scale of a dimension that is no "
                "variable)"
                if coord in stated
                else f"the length of its coordinate {_key(coord)!r}"
            )
        else:
            counts = Counter(n for _q, _a, n in dim.uses)
            top = max(counts.values())
            length = max(n for n, c in counts.items() if c == top)
            source = f"the length {top} of {len(dim.uses)} arrays naming it have"
        for q, axis, n in dim.uses:
            if n == length:
                continue
            key = _key(q)
            out.problems.append(
                Problem(
                    key,
                    "dimension_mismatch",
                    f"{key!r} has {n} along its dimension {name!r} (axis {axis}); the dimension "
                    f"has {length} in {_key(scope)!r} ({source})",
                    shape=list(view.metas[q].shape),
                    expected={"dimension": name, "axis": axis, "length": length},
                )
            )
    return out
