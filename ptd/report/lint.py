"""Layout lint: chunk layouts, codecs and metadata that make a store slow or unreadable.

Each finding has a stable code, a severity (``error``, ``warning``, ``info``) and a one-line
fix. From metadata only (no chunk is read):

====  ====================  ========  ==========================================================
code  name                  severity  finding
====  ====================  ========  ==========================================================
L001  single-chunk          warning   one chunk covers an array over 64 MiB (a random row
                                      decodes all of it)
L002  small-chunks          warning   chunks under 64 KiB (one read per tiny chunk)
L003  large-chunks          warning   chunks over 64 MiB
L004  row-cost              warning   a random row decodes more than 4 MiB (chunks compressed
                                      or read whole)
L005  filter-missing        error     a filter/codec that is not installed here (names the
                                      package)
L006  no-batch-size         warning   no stored ``__tensordict__`` batch size at the root
L007  unconsolidated        warning   a zarr store of many nodes without consolidated metadata
L008  torch-dtype           error     a dtype torch cannot represent
L009  limited-dtype         info      uint16/32/64: torch has few operations for them
L010  table                 info      a table (records of named fields): copied and compared,
                                      not read as a tensor
L011  pickled               warning   a pickled non-tensor (or an array whose codecs unpickle):
                                      never decoded, read only with ``allow_pickle=True``
L012  reference             info      a column of object or region references (an NWB table's
                                      ``group``; in zarr, hdmf-zarr's ``zarr_dtype: object``):
                                      a kind of its own, listed and copied where the
                                      destination holds references; no cast fixes it
====  ====================  ========  ==========================================================

The chunk rules (L001-L004) judge what one read decodes: the chunk, or for a sharded zarr
array its inner chunk (a read looks the inner chunk up in the shard's small index and decodes
that alone). L004's cost is :func:`ptd.storage.api.random_row_cost`, the figure ``ptd
inspect`` shows as "per row".

>>> import os, tempfile, numpy as np
>>> from ptd.storage.registry import get_backend
>>> from ptd.report.scan import scan
>>> with tempfile.TemporaryDirectory() as d:
...     be = get_backend("h5").open(os.path.join(d, "x.h5"), "w")
...     be.create_array(("x",), shape=(100000,), dtype=np.dtype("f4"), chunks=(100,))
...     found = lint(scan(be, "h5"))
...     be.close()
>>> [(f.code, f.name, f.severity, f.key) for f in found]
[('L002', 'small-chunks', 'warning', 'x'), ('L006', 'no-batch-size', 'warning', '')]
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass

from ptd.errors import PtdError
from ptd.format.names import ENCODING_PICKLE
from ptd.format.tables import describe_table, is_table
from ptd.format.tdmeta import parse_td_meta
from ptd.report.consolidated import has_consolidated
from ptd.report.scan import Scan
from ptd.storage.api import ArrayMeta, NodeKind, ValueKind, random_row_cost
from ptd.storage.remote import is_remote

__all__ = ["LINT_CODES", "SEVERITIES", "LintFinding", "lint", "severity_at_least"]

KIB, MIB = 2**10, 2**20
#: thresholds (bytes, nodes)
SMALL_CHUNK = 64 * KIB
LARGE_CHUNK = 64 * MIB
SINGLE_CHUNK_ARRAY = 64 * MIB
ROW_COST = 4 * MIB
MANY_NODES = 100

#: code -> (name, severity, fix)
LINT_CODES: dict[str, tuple[str, str, str]] = {
    "L001": (
        "single-chunk",
        "warning",
        "rechunk along the batch dim: ptd convert SRC DST --chunks ROWS",
    ),
    "L002": (
        "small-chunks",
        "warning",
        "use chunks of 1-16 MiB: ptd convert SRC DST --chunks ROWS",
    ),
    "L003": (
        "large-chunks",
        "warning",
        "use chunks of 1-16 MiB: ptd convert SRC DST --chunks ROWS",
    ),
    "L004": (
        "row-cost",
        "warning",
        "smaller chunks along the batch dim (ptd convert --chunks ROWS), or no compression",
    ),
    "L005": ("filter-missing", "error", "install the package named, then read again"),
    "L006": (
        "no-batch-size",
        "warning",
        "record it: ptd convert SRC DST --batch-size N (or --batch-dims 1: each group's length)",
    ),
    "L007": (
        "unconsolidated",
        "warning",
        "consolidate once writing is done: zarr.consolidate_metadata(PATH)",
    ),
    "L008": ("torch-dtype", "error", "store it as a dtype torch has (cast before writing)"),
    "L009": (
        "limited-dtype",
        "info",
        "store as int64/int32 if you need arithmetic in torch",
    ),
    "L010": (
        "table",
        "info",
        "to read its fields as tensors, store one dataset per field",
    ),
    "L011": (
        "pickled",
        "warning",
        "read it with --allow-pickle (allow_pickle=True) only if you trust the file; store "
        "values as JSON, strings or tensors instead",
    ),
    "L012": (
        "reference",
        "info",
        "nothing to fix: references are not tensors (convert copies object references as "
        "the paths they name, to HDF5 and zarr; region references are listed as not copied)",
    ),
}

SEVERITIES = ("info", "warning", "error")


def severity_at_least(severity: str, threshold: str) -> bool:
    """Whether ``severity`` is ``threshold`` or worse (``error`` > ``warning`` > ``info``)."""
    return SEVERITIES.index(severity) >= SEVERITIES.index(threshold)


@dataclass
class LintFinding:
    """One finding: a code from :data:`LINT_CODES`, its name and severity, the key (``""``
    for the store), a message and the one-line fix."""

    code: str
    name: str
    severity: str
    key: str
    message: str
    fix: str


def _finding(code: str, key: str, message: str, fix: str | None = None) -> LintFinding:
    name, severity, default_fix = LINT_CODES[code]
    return LintFinding(code, name, severity, key, message, fix or default_fix)


def _fix_for(meta: ArrayMeta) -> str | None:
    """The fix for an L008 dtype that no cast turns into a number: opaque bytes and ragged
    sequences; None (the table's "cast before writing") for the rest."""
    dt = meta.dtype
    if dt.kind == "V" and dt.fields is None:
        return (
            f"opaque bytes have no element type: store them as uint8 with a trailing axis of "
            f"{dt.itemsize} (each element's bytes), or keep them out of the tensor data"
        )
    if dt.kind == "O":  # references are L012; strings are not tensors: ragged sequences
        return (
            "store ragged sequences as one flat array of the values and an array of offsets "
            "(as hdmf's VectorData/VectorIndex pair does)"
        )
    return None


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


def lint(s: Scan, ignore: Iterable[str] = ()) -> list[LintFinding]:
    """Lint the scanned store (see the module doc); ``ignore``: codes or names left out."""
    skip = set(ignore)
    out: list[LintFinding] = []
    be = s.backend
    on_disk = not is_remote(s.location)
    for path, kind, meta in s.nodes:
        if kind is not NodeKind.ARRAY or meta is None:
            continue
        key = "/".join(path)
        if meta.unreadable:
            continue  # its dtype is unknown: validate reports it as unreadable
        if meta.kind is ValueKind.UNSUPPORTED and is_table(meta.dtype):
            out.append(
                _finding(
                    "L010",
                    key,
                    f"{key!r} is a {describe_table(meta.dtype)}: records, not a tensor; ptd "
                    "lists, converts and compares it but does not read it into a tensordict",
                )
            )
            continue
        if meta.reference is not None:
            out.append(
                _finding(
                    "L012",
                    key,
                    f"{key!r} is a column of {meta.reference} references: a kind of its "
                    "own, listed but not read as a tensor",
                )
            )
            continue
        if meta.kind is ValueKind.UNSUPPORTED:
            # the format's own words for the type when the backend has them (H5T_OPAQUE...)
            held = meta.unsupported or f"dtype {meta.dtype}"
            out.append(
                _finding(
                    "L008", key, f"{key!r} holds {held}, which torch cannot hold", _fix_for(meta)
                )
            )
            continue
        if meta.kind is ValueKind.NON_TENSOR and meta.non_tensor_kind == ENCODING_PICKLE:
            out.append(
                _finding(
                    "L011",
                    key,
                    f"{key!r} is pickled: reading it would run code the file holds, so ptd "
                    "never decodes it here (its content is not checked) and reads it only "
                    "when allowed to unpickle",
                )
            )
            continue
        if meta.kind is not ValueKind.NUMERIC:
            continue
        if meta.torch_dtype in ("uint16", "uint32", "uint64"):
            out.append(
                _finding(
                    "L009",
                    key,
                    f"{key!r} is {meta.torch_dtype}: torch stores it but has few operations for it",
                )
            )
        try:
            info = be.chunk_info(path, list_stored=False)
        except (PtdError, OSError, ValueError, TypeError, KeyError, AttributeError):
            continue
        for f in info.filters:
            if not f.available:
                out.append(
                    _finding(
                        "L005",
                        key,
                        f"{key!r} is compressed with {f.name}"
                        + (f" (HDF5 filter {f.filter_id})" if f.filter_id is not None else "")
                        + ", which is not installed here",
                        f"pip install {f.package}" if f.package else None,
                    )
                )
        nbytes = math.prod(meta.shape) * meta.dtype.itemsize
        if info.contiguous or not meta.shape:
            continue
        unit = info.read_chunks  # the inner chunk of a sharded array
        chunk_bytes = math.prod(unit) * meta.dtype.itemsize
        n_units = math.prod(-(-s // max(1, c)) for s, c in zip(meta.shape, unit, strict=False))
        layout = f"chunks of {list(unit)}" + (
            f" in shards of {list(info.chunks)}" if info.inner is not None else ""
        )
        if n_units == 1 and nbytes > SINGLE_CHUNK_ARRAY:
            out.append(
                _finding(
                    "L001",
                    key,
                    f"{key!r} ({_bytes(nbytes)}) is one chunk: any read decodes all of it",
                )
            )
        elif chunk_bytes < SMALL_CHUNK and nbytes > SMALL_CHUNK:
            out.append(
                _finding(
                    "L002",
                    key,
                    f"{key!r} has {'inner ' if info.inner else ''}chunks of "
                    f"{_bytes(chunk_bytes)} ({n_units} of them): one read per tiny chunk",
                )
            )
        elif chunk_bytes > LARGE_CHUNK and n_units > 1:
            out.append(_finding("L003", key, f"{key!r} has {layout} ({_bytes(chunk_bytes)})"))
        # a random row decodes the chunks holding it, as `ptd inspect`'s "per row" says
        row_cost = random_row_cost(meta, be.policy, local=on_disk)
        cost = row_cost.nbytes if row_cost is not None else 0
        if cost > ROW_COST and n_units > 1:
            out.append(
                _finding(
                    "L004",
                    key,
                    f"a random row of {key!r} decodes {_bytes(cost)} ({layout}"
                    + (f", {meta.compression}" if meta.compression else "")
                    + ")",
                )
            )
    root_meta, _problem = parse_td_meta(s.group_attrs.get((), {}))
    if root_meta is None and s.nodes:
        out.append(
            _finding(
                "L006",
                "",
                "no batch size is stored (__tensordict__): readers infer it from the shapes",
            )
        )
    if be.policy.object_per_node and be.policy.consolidated_metadata and len(s.nodes) > MANY_NODES:
        local = s.location if os.path.isdir(s.location) else None
        if local is not None and has_consolidated(local) is False:
            out.append(
                _finding(
                    "L007",
                    "",
                    f"{len(s.nodes)} nodes and no consolidated metadata: opening lists "
                    "every node, one read each",
                )
            )
    return [f for f in out if f.code not in skip and f.name not in skip]
