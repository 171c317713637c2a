"""``ptd.validate(path)``: check a store against its batch size (and optionally a schema).

Checks, from metadata alone (no array data is read):

* every node's metadata can be read, and every ``__tensordict__`` attribute is well formed and
  fits the entries (``bad_metadata`` otherwise: the attribute is then ignored and the batch size
  inferred, as a ``PersistentTensorDict`` opened on the store does);
* every tensor leaf's (and every marked non-tensor stack's) leading dims are its group's batch
  size: the ``batch_size`` given, else the one a ``PersistentTensorDict`` opened on the store
  gets (the stored ``__tensordict__`` one, else inferred; ``batch_dims=K``: the K leading dims
  most leaves share);
* with a ``batch_size`` or ``batch_dims``, a nested group's stored batch size extends its
  parent's;
* the layouts that state their lengths (:mod:`ptd.report.layouts`): named dimensions
  (``dimension_mismatch``), AnnData and hdmf/NWB encodings (``encoding_mismatch``); the
  nodes they cover are left out of the length rule (:mod:`ptd.report.lengths`);
* every leaf has a torch dtype (a column of HDF5 references is a kind of its own);
* with ``schema`` (the JSON document of ``ptd inspect --json``, as a dict or a file path): the
  same keys, kinds and dtypes, and the same shapes apart from the batch dims; an entry may add
  ``"constraints"`` (``min``, ``max``, ``allowed``, ``allow_nan``, ``allow_missing_chunks``),
  checked with ``data=True``;
* a local zarr store's consolidated metadata against the nodes really in it
  (:mod:`ptd.report.consolidated`): each node missing from it, extra in it or different is a
  problem, and the checks above then run on the real nodes;
* the layout lint (:mod:`ptd.report.lint`; ``lint=False`` leaves it out, ``ignore`` silences
  codes), whose findings carry their own severity;
* with ``data=True``, every chunk of every leaf (:mod:`ptd.report.datacheck`): undecodable
  chunks, checksum failures, missing chunks, NaN/Inf, value constraints, and per-leaf
  statistics in :attr:`ValidationReport.stats`.

A report is ``valid`` when no problem has severity ``error`` (NaN/Inf counts are warnings and
missing chunks information, unless a schema constraint makes them errors). Lint findings are
kept apart in :attr:`ValidationReport.lint` and never make a report invalid;
:meth:`ValidationReport.fails` applies a threshold to both.

>>> import os, tempfile, torch
>>> import ptd
>>> with tempfile.TemporaryDirectory() as d:
...     path = os.path.join(d, "x.h5")
...     ptd.PersistentTensorDict.from_dict({"obs": torch.zeros(4, 3)}, path, batch_size=[4]).close()
...     ok = ptd.validate(path)
...     bad = ptd.validate(path, batch_size=[5])
>>> ok.valid, bad.valid
(True, False)
>>> p = bad.problems[0]
>>> p.key, p.code, p.shape, p.expected, p.severity, p.check
('obs', 'batch_mismatch', [4, 3], [5], 'error', 'batch_size')
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ptd.errors import ArgumentError, BatchSizeError, PtdMemoryError, PtdValueError
from ptd.format.shapes import fits
from ptd.format.tables import is_table
from ptd.report.batches import (
    expected_given,
    group_entry,
    leading_shape,
    leaf_batch_shape,
    length_problem,
)
from ptd.report.consolidated import CONSOLIDATED_CODES, open_checked
from ptd.report.datacheck import Constraint, DataResult, check_data
from ptd.report.info import StoreInfo, attrs_not_read, leaf_shape
from ptd.report.layouts import check_layouts, is_reference
from ptd.report.lengths import GroupLength, group_lengths
from ptd.report.lint import LINT_CODES, severity_at_least
from ptd.report.lint import lint as run_lint
from ptd.report.problems import CHECKS, Problem, from_consolidated, from_data, from_lint
from ptd.report.scan import scan
from ptd.storage import remote
from ptd.storage.api import ArrayMeta, NodeKind, Path, ValueKind
from ptd.storage.cancel import cancellable
from ptd.storage.limits import check_declared
from ptd.storage.location import as_path_str
from ptd.storage.stores import parse_source

__all__ = [
    "PROBLEM_CODES",
    "Problem",
    "ValidationReport",
    "known_codes",
    "load_schema",
    "validate",
]

#: every ``Problem.code`` apart from the lint's (``L001``...: :data:`ptd.report.lint.LINT_CODES`)
PROBLEM_CODES = (
    "unreadable",  # a node's metadata cannot be read
    "bad_metadata",  # a malformed __tensordict__ attribute, or one that does not fit the entries
    "batch_mismatch",  # a leaf's leading dims are not its group's batch size
    "group_batch_mismatch",  # a nested group's stored batch size does not extend its parent's
    "length_mismatch",  # no batch size stored: a leaf a few rows off its group's length
    "dimension_mismatch",  # an array not of the length of a dimension it names
    "encoding_mismatch",  # a known encoding's rule broken (AnnData, hdmf/NWB: report.layouts)
    "unsupported_dtype",  # a leaf with no torch dtype (tables apart: lint L010)
    "skipped_key",  # a key ptd does not read: an HDF5 external or dangling link, a link cycle
    "data_elsewhere",  # a note: data in other files (HDF5 virtual/external), not read
    "too_large",  # an array declaring more bytes than PTD_MAX_ARRAY_BYTES
    "too_many_attrs",  # a node with more attributes than PTD_MAX_ATTRS: the rest not read
    "missing_key",  # schema: a key the store lacks
    "unexpected_key",  # schema: a key the schema lacks
    "kind_mismatch",  # schema: group / tensor / non_tensor differ
    "dtype_mismatch",  # schema: torch dtypes differ
    "shape_mismatch",  # schema: non-batch dims differ
    "no_batch_size",  # schema: batch dims in the schema, no batch size stored nor inferable
    *CONSOLIDATED_CODES,
    *CHECKS["data"],
)


@dataclass
class ValidationReport:
    path: str
    format: str | None
    valid: bool
    batch_size: list[int] | None = None
    #: "given", "stored", "inferred", "batch_dims"
    batch_size_source: str | None = None
    groups: int = 0
    leaves: int = 0
    problems: list[Problem] = field(default_factory=list)
    schema: str | None = None
    #: whether every chunk was read (``data=True``), the bytes decoded and the seconds taken
    data_checked: bool = False
    data_nbytes: int = 0
    data_seconds: float = 0.0
    #: the seconds the whole validation took (the data pass included)
    seconds: float = 0.0
    #: per numeric leaf (``data=True``): count, min, max, mean, std, nan, inf, chunks,
    #: stored_chunks, nbytes, histogram
    stats: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: whether the consolidated metadata was found stale (the real nodes were checked)
    consolidated_stale: bool = False
    #: the layout lint's findings (:mod:`ptd.report.lint`), each with its own severity; they
    #: do not make the report invalid (``ptd validate --fail-on`` decides)
    lint: list[Problem] = field(default_factory=list)
    #: every group (the root first, ``key`` ``""``): ``batch_size`` and ``batch_size_source``
    #: (``stored``, ``inferred``, ``parent``, ``given``, ``batch_dims``), and the length rule's
    #: ``length`` and ``length_source`` (``"3 of 4 voters"``; null where the group was not
    #: checked: a batch size stored or given, no voters, under 10 rows)
    group_batches: list[dict[str, Any]] = field(default_factory=list)
    #: the groups that follow a known encoding (:data:`ptd.report.layouts.LAYOUTS`): key
    #: (``""`` for the root) -> the layout's name; their lengths are checked by its rule
    layouts: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["problems"] = [p.to_dict() for p in self.problems]
        d["lint"] = [p.to_dict() for p in self.lint]
        return d

    def findings(self) -> list[Problem]:
        """The problems, then the lint findings."""
        return list(self.problems) + list(self.lint)

    def fails(self, fail_on: str = "error") -> bool:
        """Whether a problem or lint finding has severity ``fail_on`` or worse."""
        return not self.valid or any(
            severity_at_least(p.severity, fail_on) for p in self.findings()
        )


def load_schema(schema: Any) -> dict[str, Any]:
    """A schema (an inspect JSON document) from a dict, a :class:`StoreInfo` or a JSON file."""
    if isinstance(schema, StoreInfo):
        return schema.to_dict()
    if isinstance(schema, Mapping):
        doc: Any = dict(schema)
        where = "the schema"
    else:
        where = as_path_str(schema)
        try:
            with open(where, encoding="utf-8") as f:
                doc = json.load(f)
        except FileNotFoundError:
            raise PtdValueError(f"schema file {where} does not exist") from None
        except (OSError, UnicodeDecodeError, ValueError) as err:
            raise PtdValueError(f"cannot read the schema file {where}: {err}") from None
    entries = doc.get("entries") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and isinstance(e.get("key"), str) and isinstance(e.get("kind"), str)
        for e in entries
    ):
        raise PtdValueError(
            f"{where} is not a schema saved by `ptd inspect --json` (no valid 'entries' list)"
        )
    return doc


def _as_batch_size(batch_size: Sequence[int] | int) -> tuple[int, ...]:
    """A user batch size as a tuple: an int -> ``(n,)``, a sequence of ints -> a tuple."""
    if isinstance(batch_size, int):
        return (int(batch_size),)
    try:
        return tuple(int(n) for n in batch_size)
    except (TypeError, ValueError):
        raise BatchSizeError(f"batch_size must be a sequence of ints, got {batch_size!r}") from None


def known_codes() -> list[str]:
    """Every code ``ignore`` takes: the problem codes, the lint's codes and names."""
    lint_names = [name for name, _severity, _fix in LINT_CODES.values()]
    return [*PROBLEM_CODES, *LINT_CODES, *lint_names]


def _check_ignore(ignore: Sequence[str]) -> None:
    known = set(known_codes())
    unknown = [c for c in ignore if c not in known]
    if unknown:
        raise ArgumentError(
            f"unknown code{'s' if len(unknown) > 1 else ''} to ignore: {', '.join(unknown)}; "
            f"known: {', '.join(dict.fromkeys(known_codes()))}"
        )


@cancellable  # Ctrl-C / SIGTERM stop it at its next read (ptd.storage.cancel)
def validate(
    path: Any,
    *,
    batch_size: Sequence[int] | int | None = None,
    batch_dims: int | None = None,
    schema: Any = None,
    storage_options: dict[str, Any] | None = None,
    data: bool = False,
    lint: bool = True,
    ignore: Sequence[str] = (),
    workers: int | None = None,
    progress: Any = None,
    use_consolidated: bool | None = None,
    histogram_bins: int = 0,
    follow_virtual: bool = False,
) -> ValidationReport:
    """Check the store at ``path`` (see the module doc; a URL is read with
    ``storage_options``). Returns a report; only an unreadable store (missing, corrupt, not
    h5/zarr) or a bad schema raises.

    ``data``: read every chunk (``workers`` threads; ``progress(nbytes)`` called as blocks
    complete, after ``progress(total=...)`` once). ``ignore``: problem or lint codes (or lint
    names) left out. ``use_consolidated=False``: never trust a zarr store's consolidated
    metadata (it is not trusted anyway once found stale). ``histogram_bins``: ``data`` also
    draws a histogram of each float leaf (from a strided sample) into its statistics.
    ``follow_virtual``: read HDF5 virtual datasets whose sources lie beside the file (see
    :mod:`ptd.storage.h5.elsewhere`); other data in other files is named, not read."""
    if batch_size is not None and batch_dims is not None:
        raise ArgumentError("pass batch_size or batch_dims, not both")
    if batch_dims is not None and (isinstance(batch_dims, bool) or int(batch_dims) < 0):
        raise PtdValueError(f"batch_dims must be >= 0, got {batch_dims!r}")
    _check_ignore(ignore)
    t0 = time.perf_counter()
    given = _as_batch_size(batch_size) if batch_size is not None else None
    doc = load_schema(schema) if schema is not None else None
    p = as_path_str(path)
    be, stale = open_checked(
        parse_source(p, storage_options),
        use_consolidated=use_consolidated,
        follow_virtual=follow_virtual,
    )
    try:
        s = scan(
            be,
            be.name,
            tolerant=True,
            batch_size=given,
            batch_dims=int(batch_dims) if batch_dims is not None else None,
        )
        problems: list[Problem] = [
            Problem("/".join(q), "unreadable", f"cannot read the metadata: {msg}")
            for q, msg in s.errors.items()
        ]
        problems += from_consolidated(stale)
        problems += [
            Problem(
                "/".join(q),
                "skipped_key",
                f"{'/'.join(q)!r} is not read: {reason}",
                severity="warning",
            )
            for q, reason in s.skipped.items()
        ]
        problems += [
            Problem("/".join(g), "too_many_attrs", note, severity="warning")
            for g in s.groups
            if (note := attrs_not_read(be, g)) is not None
        ]
        metas: dict[Path, ArrayMeta] = {
            q: m for q, k, m in s.nodes if k is NodeKind.ARRAY and m is not None
        }
        groups = s.groups

        # the batch size each group's entries must start with, and where it came from
        expected: dict[Path, tuple[int, ...]] = {}
        sources: dict[Path, str] = {}
        if given is None and batch_dims is None:
            # as a PersistentTensorDict opened on the store: the stored batch sizes where they
            # fit the entries, else inferred (the scan's StoreTree works them out); a stored
            # one that is malformed or does not fit is a problem
            for g in groups:
                gb = s.batches[g]
                expected[g] = gb.batch
                sources[g] = gb.source
                if gb.problem:
                    problems.append(Problem("/".join(g), "bad_metadata", gb.problem))
        else:
            expected_given(s, given, batch_dims, expected, sources, problems)
        source = "inferred" if sources[()] == "batch_dims" else sources[()]

        # the layouts that state their lengths (named dimensions, known encodings:
        # ptd.report.layouts), then the length rule (ptd.report.lengths) for the other nodes
        # where no batch size is stored nor given
        known = check_layouts(s, metas, data=data)
        problems += known.problems
        lengths: dict[Path, GroupLength] = {}
        if batch_dims != 0:
            fixed = {g: expected[g] for g in groups if sources[g] in ("stored", "given")}
            voting = leading_shape(s)
            lengths = group_lengths(
                s.tree.children,
                lambda q: None if q in known.claimed else voting(q),
                lambda q: s.tree.kind(q) is NodeKind.GROUP,
                fixed=fixed,
            )

        for q, meta in metas.items():
            key = "/".join(q)
            bs = expected[q[:-1]]
            if meta.unreadable:
                problems.append(Problem(key, "unreadable", f"{key!r} holds {meta.unsupported}"))
                continue
            if meta.kind is ValueKind.UNSUPPORTED and is_table(meta.dtype):
                continue  # a valid array of records: the lint notes it once (L010)
            if is_reference(meta):
                continue  # a reference column: a kind of its own, the lint lists it (L012)
            if meta.kind is ValueKind.UNSUPPORTED:
                problems.append(
                    Problem(
                        key,
                        "unsupported_dtype",
                        f"{key!r} holds {meta.unsupported}, which ptd cannot represent"
                        if meta.unsupported
                        else f"{key!r} has dtype {meta.dtype}, which has no torch equivalent",
                        shape=list(meta.shape),
                        expected="a torch dtype",
                    )
                )
                continue
            if meta.kind is ValueKind.NUMERIC:
                try:
                    check_declared(meta.shape, meta.dtype.itemsize, f"{key!r}")
                except PtdMemoryError as err:
                    problems.append(Problem(key, "too_large", str(err), shape=list(meta.shape)))
            shape = leaf_batch_shape(meta)
            if shape is not None and not fits(shape, bs):
                what = "stack shape" if meta.kind is ValueKind.NON_TENSOR else "shape"
                problems.append(
                    Problem(
                        key,
                        "batch_mismatch",
                        f"{key!r} has {what} {list(shape)}, which does not start with the batch size "
                        f"{list(bs)}",
                        shape=list(shape),
                        expected=list(bs),
                    )
                )

        off = {pr.key for pr in problems if pr.code == "batch_mismatch"}
        problems += [
            length_problem(m, lengths[m.group])
            for gl in lengths.values()
            for m in gl.mismatches
            if "/".join(m.key) not in off
        ]
        if doc is not None:
            problems.extend(_check_schema(doc, s.nodes, metas, expected, sources))
        lint_found = from_lint(run_lint(s)) if lint else []
        result: DataResult | None = None
        if data:
            numeric = [q for q, m in metas.items() if m.kind is not ValueKind.UNSUPPORTED]
            if progress is not None:
                progress(
                    total=sum(math.prod(metas[q].shape) * metas[q].dtype.itemsize for q in numeric)
                )
            result = check_data(
                be,
                numeric,
                constraints=schema_constraints(doc) if doc is not None else None,
                workers=workers,
                progress=progress,
                histogram_bins=histogram_bins,
                metas=metas,
            )
            problems.extend(from_data(result))
        read_or_named = set(result.not_checked) if result is not None else set()
        problems += [
            Problem(
                "/".join(q),
                "data_elsewhere",
                f"{'/'.join(q)!r} keeps its data in other files (sources: "
                f"{', '.join(sources) or 'none listed'}), which ptd does not read: "
                "--follow-virtual reads a virtual dataset whose sources lie beside the file",
                severity="info",
                sources=list(sources),
            )
            for q, sources in be.data_elsewhere.items()
            if "/".join(q) not in read_or_named
        ]
        skip = set(ignore)
        problems = [pr for pr in problems if pr.code not in skip]
        lint_found = [pr for pr in lint_found if pr.code not in skip and pr.name not in skip]

        order = {"/".join(q): i for i, (q, _k, _m) in enumerate(s.nodes)}
        problems.sort(key=lambda pr: order.get(pr.key, -1))
        report = ValidationReport(
            path=remote.display(p),
            format=be.name,
            valid=not any(pr.severity == "error" for pr in problems),
            batch_size=list(expected[()]),
            batch_size_source=source,
            groups=len(groups) - 1,
            leaves=len(metas),
            problems=problems,
            schema=None
            if schema is None or isinstance(schema, (Mapping, StoreInfo))
            else as_path_str(schema),
            consolidated_stale=bool(stale),
            lint=lint_found,
            group_batches=[group_entry(g, expected, sources, lengths) for g in groups],
            layouts=known.layouts,
        )
        if result is not None:
            report.data_checked = True
            report.data_nbytes = result.nbytes
            report.data_seconds = round(result.seconds, 6)
            report.stats = {k: v.to_dict() for k, v in result.stats.items()}
        report.seconds = round(time.perf_counter() - t0, 6)
        return report
    finally:
        be.close()


def schema_constraints(doc: dict[str, Any]) -> dict[str, Constraint]:
    """The value constraints of a schema's entries (``"constraints"`` of an entry)."""
    out: dict[str, Constraint] = {}
    for e in doc.get("entries", []):
        c = e.get("constraints")
        if isinstance(c, dict):
            try:
                out[e["key"]] = Constraint.from_dict(c)
            except (TypeError, ValueError) as err:
                raise PtdValueError(
                    f"bad constraints for {e['key']!r} in the schema: {err}"
                ) from None
    return out


def _kind(meta: ArrayMeta | None) -> str:
    if meta is None:
        return "group"
    return {ValueKind.NUMERIC: "tensor", ValueKind.NON_TENSOR: "non_tensor"}.get(
        meta.kind, "unsupported"
    )


def _check_schema(
    doc: dict[str, Any],
    nodes: list[Any],
    metas: dict[Path, ArrayMeta],
    expected: dict[Path, tuple[int, ...]],
    sources: dict[Path, str],
) -> list[Problem]:
    out: list[Problem] = []
    depth = doc.get("depth") if isinstance(doc.get("depth"), int) else None
    want = {e["key"]: e for e in doc["entries"]}
    have: dict[str, tuple[Path, ArrayMeta | None]] = {}
    for q, _, meta in nodes:
        if depth is None or len(q) <= depth:
            have["/".join(q)] = (q, meta)
    #: groups with no batch size (none stored, none inferable) whose leaves the schema gives
    #: batch dims: one problem names that cause, and their other dims are compared
    unbatched: list[str] = []
    for key, e in want.items():
        if key not in have:
            exp: Any = e["kind"]
            if e["kind"] == "tensor":
                exp = f"{e.get('dtype')} {e.get('shape')}"
            out.append(
                Problem(
                    key,
                    "missing_key",
                    f"{key!r} is in the schema but not in the store",
                    expected=exp,
                )
            )
            continue
        q, meta = have[key]
        kind = _kind(meta)
        if kind != e["kind"]:
            out.append(
                Problem(
                    key,
                    "kind_mismatch",
                    f"{key!r} is a {kind}, the schema has a {e['kind']}",
                    expected=e["kind"],
                )
            )
            continue
        if meta is None or kind != "tensor":
            continue
        shape = list(meta.shape)
        if e.get("dtype") is not None and meta.torch_dtype != e["dtype"]:
            out.append(
                Problem(
                    key,
                    "dtype_mismatch",
                    f"{key!r} has dtype {meta.torch_dtype}, the schema has {e['dtype']}",
                    shape=shape,
                    expected=e["dtype"],
                )
            )
        s_shape = e.get("shape")
        if isinstance(s_shape, list):
            s_bd = int(e.get("batch_dims") or 0)
            group = expected[q[:-1]]
            bd = len(group) if fits(shape, group) else 0
            if (
                not group
                and s_bd
                and sources.get(q[:-1]) in ("inferred", "parent", "batch_dims")
                and len(shape) >= s_bd
            ):
                # no batch size here: compare the dims after the schema's batch dims
                gkey = "/".join(q[:-1]) or "/"
                if gkey not in unbatched:
                    unbatched.append(gkey)
                bd = s_bd
            if shape[bd:] != s_shape[s_bd:]:
                want_shape = ["*"] * s_bd + list(s_shape[s_bd:])
                out.append(
                    Problem(
                        key,
                        "shape_mismatch",
                        f"{key!r} has shape {shape}; the schema has {s_shape} ({s_bd} batch dims, "
                        f"which may differ)",
                        shape=shape,
                        expected=want_shape,
                    )
                )
    if unbatched:
        named = ", ".join(repr(g) for g in unbatched[:3]) + (
            f" and {len(unbatched) - 3} more" if len(unbatched) > 3 else ""
        )
        out.insert(
            0,
            Problem(
                "",
                "no_batch_size",
                f"the schema gives leaves of {named} batch dims, but no batch size is stored "
                "there nor inferable (the leaves do not share their leading dims): their other "
                "dims were compared; give one (ptd validate --batch-size N or --batch-dims K) "
                "or record one (ptd convert SRC DST --batch-size N)",
                expected="a batch size",
            ),
        )
    for key, (_, meta) in have.items():
        if key not in want:
            out.append(
                Problem(
                    key,
                    "unexpected_key",
                    f"{key!r} ({_kind(meta)}) is in the store but not in the schema",
                    shape=leaf_shape(meta) if meta is not None else None,
                )
            )
    return out
