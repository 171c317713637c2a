"""One metadata pass over a store, shared by :func:`ptd.info`, :func:`ptd.validate` and
:func:`ptd.convert`: the nodes, their array metadata and every group's batch size.

Nothing here reads array data: only the store's structure, attributes and array metadata (and,
for local zarr stores, file sizes, since zarr does not report the bytes an array occupies).
Batch sizes are plain tuples: torch is never imported (``ptd inspect``/``ptd validate`` run
without it). Every group's batch size is worked out by :class:`~ptd.storage.tree.StoreTree`,
exactly as when the store is opened as a PersistentTensorDict, and the ``__tensordict__``
attribute is read by :func:`~ptd.format.tdmeta.parse_td_meta` only, so a malformed attribute
gets the same answer here as there: it is ignored (the batch size is inferred) and reported.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ptd.errors import CorruptStoreError, PtdError, SkippedKeyWarning, StoreLimitError
from ptd.format.shapes import fits
from ptd.format.tdmeta import parse_td_meta
from ptd.storage import cancel, stores
from ptd.storage.api import ArrayMeta, Backend, NodeKind, Path
from ptd.storage.limits import check_depth
from ptd.storage.location import StoreLocation
from ptd.storage.tree import StoreTree

__all__ = [
    "GroupBatch",
    "Scan",
    "scan",
    "streamed",
]

#: how a group's batch size was found
STORED, INFERRED, PARENT, GIVEN = "stored", "inferred", "parent", "given"


@dataclass
class GroupBatch:
    batch: tuple[int, ...]
    #: "stored" (the ``__tensordict__`` attribute), "inferred" (from the entries), "parent"
    #: (a nested group that does not constrain its parent's) or "given" (by the caller)
    source: str
    #: the ``__tensordict__`` batch size as stored (None when absent or malformed)
    stored: list[int] | None = None
    #: why the stored metadata could not be used, or not all of it ("" when it could, or
    #: there is none)
    problem: str = ""


@dataclass
class Scan:
    """What one walk over a store found."""

    location: str
    format: str
    backend: Backend
    tree: StoreTree
    #: every node below the root, depth first, parents before children
    nodes: list[tuple[Path, NodeKind, ArrayMeta | None]]
    #: the root's and every group's attributes (all of them, reserved ones included)
    group_attrs: dict[Path, dict[str, Any]] = field(default_factory=dict)
    batches: dict[Path, GroupBatch] = field(default_factory=dict)
    #: nodes whose metadata could not be read: path -> message
    errors: dict[Path, str] = field(default_factory=dict)
    #: keys that link to other keys (h5 soft and extra hard links): path -> what they link to
    links: dict[Path, str] = field(default_factory=dict)
    #: keys the store holds that are not listed (dangling or external links): path -> reason
    skipped: dict[Path, str] = field(default_factory=dict)

    @property
    def groups(self) -> list[Path]:
        """The root and every group below it, parents first."""
        return [()] + [p for p, k, _ in self.nodes if k is NodeKind.GROUP]


@contextmanager
def streamed(location: StoreLocation) -> Iterator[Backend]:
    """Open an existing store read-only for a metadata pass (format detected from its content
    unless the location has one), closed on exit. See :func:`ptd.storage.stores.open_stream`."""
    be = stores.open_stream(location)
    try:
        yield be
    finally:
        be.close()


def _walk_tolerant(
    be: Backend, path: Path, errors: dict[Path, str]
) -> list[tuple[Path, NodeKind, ArrayMeta | None]]:
    """Like ``Backend.walk`` but node by node, recording unreadable nodes in ``errors``
    (with a stack, not recursion; groups deeper than ``PTD_MAX_DEPTH`` raise)."""
    _errors = (PtdError, OSError, ValueError, TypeError, KeyError)
    out: list[tuple[Path, NodeKind, ArrayMeta | None]] = []
    stack: list[tuple[Path, Iterator[tuple[str, NodeKind]]]] = []

    def enter(group: Path) -> None:
        try:
            kids = be.children(group)
        except _errors as err:
            if not group:
                raise  # the root itself: the store is unreadable
            errors[group] = str(err) or type(err).__name__
            return
        stack.append((group, iter(kids)))

    enter(path)
    while stack:
        group, kids = stack[-1]
        item = next(kids, None)
        if item is None:
            stack.pop()
            continue
        name, kind = item
        p = group + (name,)
        if kind is NodeKind.ARRAY:
            try:
                out.append((p, kind, be.array_meta(p)))
            except _errors as err:
                errors[p] = str(err) or type(err).__name__
        else:
            check_depth(p, be.location)
            out.append((p, kind, None))
            enter(p)
    return out


def scan(
    be: Backend,
    fmt: str,
    *,
    tolerant: bool = False,
    batch_size: Sequence[int] | None = None,
    batch_dims: int | None = None,
) -> Scan:
    """Walk the whole store once and work out every group's batch size (see :func:`_scan`);
    keys the store holds but ptd skips are reported in :attr:`Scan.skipped`, not warned."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SkippedKeyWarning)
        return _scan(be, fmt, tolerant=tolerant, batch_size=batch_size, batch_dims=batch_dims)


def _scan(
    be: Backend,
    fmt: str,
    *,
    tolerant: bool = False,
    batch_size: Sequence[int] | None = None,
    batch_dims: int | None = None,
) -> Scan:
    """Walk the whole store once and work out every group's batch size.

    ``batch_size`` (the root's, given by the user) and ``batch_dims`` (infer the root's batch
    size with at most that many dims, ignoring the stored one) override the stored metadata.
    ``tolerant``: record unreadable nodes in :attr:`Scan.errors` instead of raising.
    """
    errors: dict[Path, str] = {}
    try:
        try:
            nodes = be.walk(())
        except StoreLimitError:
            raise  # a walk node by node would only meet it again, later
        except (PtdError, OSError, ValueError, TypeError, KeyError):
            if not tolerant:
                raise
            nodes = _walk_tolerant(be, (), errors)
    except PtdError:
        raise
    except (OSError, ValueError, TypeError, KeyError) as err:
        raise CorruptStoreError(
            f"cannot read the metadata of {be.location}: {type(err).__name__}: {err}"
        ) from None
    cancel.check()  # a walk of many nodes takes a while: a stop asked meanwhile ends here
    tree = StoreTree(be)
    tree.fill(nodes)  # the tree's cache, from our walk (what StoreTree.load_all would do)
    out = Scan(
        location=be.location,
        format=fmt,
        backend=be,
        tree=tree,
        nodes=nodes,
        errors=errors,
        links=dict(be.walk_links),
        skipped=dict(be.walk_skipped),
    )
    for g in out.groups:
        try:
            out.group_attrs[g] = be.get_attrs(g)
        except (PtdError, OSError, ValueError, TypeError) as err:
            if not tolerant:
                raise
            errors[g] = f"cannot read the attributes: {err}"
            out.group_attrs[g] = {}
    _batches(out, tuple(int(n) for n in batch_size) if batch_size is not None else None, batch_dims)
    return out


def _join(*problems: str) -> str:
    return "; ".join(p for p in problems if p)


def _misfits(s: Scan, path: Path, stored: Sequence[int], limit: int = 3) -> str:
    """``'odd' has shape [5, 2]``: the entries of a group whose shapes do not start with
    ``stored`` (at most ``limit`` of them named)."""
    found: list[str] = []
    for name in s.tree.children(path):
        p = path + (name,)
        if s.tree.kind(p) is NodeKind.GROUP:
            gb = s.tree.group_batches.get(p)
            if gb is not None and not fits(gb, stored):
                found.append(f"group {'/'.join(p)!r} has batch size {list(gb)}")
            continue
        try:
            shape = s.tree.shape_for_batch(p)
        except (PtdError, OSError, ValueError, TypeError, KeyError):
            continue
        if shape is not None and not fits(shape, stored):
            found.append(f"{'/'.join(p)!r} has shape {list(shape)}")
    if len(found) > limit:
        found = found[:limit] + [f"{len(found) - limit} more"]
    return ", ".join(found)


def _batches(s: Scan, given: tuple[int, ...] | None, batch_dims: int | None) -> None:
    """Every group's batch size, as :class:`StoreTree` (hence a PersistentTensorDict opened
    on the store) works it out; the stored attribute's problems are recorded."""
    tree = s.tree
    # the tree reads the attributes again through the backend: hand it ours (no extra I/O)
    parsed = {g: parse_td_meta(s.group_attrs.get(g, {})) for g in s.groups}

    def recorded(path: Path) -> tuple[int, ...] | None:
        p = parsed.get(path)
        if p is None:
            p = parse_td_meta(s.group_attrs.get(path, {}))
        return p.meta.batch_size if p.meta is not None else None

    tree.stored_batch_attr = recorded  # type: ignore[method-assign]
    with contextlib.suppress(Exception):  # inference never blocks a scan; fall back to []
        tree.infer((), batch_dims, use_attrs=batch_dims is None)
    inferred = tree.group_batches
    for path in s.groups:
        meta, problem = parsed[path]
        st = list(meta.batch_size) if meta is not None else None
        if path == ():
            if given is not None:
                gb = GroupBatch(given, GIVEN, st, problem)
            else:
                found = inferred.get((), ())
                src = (
                    STORED
                    if st is not None and list(found) == st and batch_dims is None
                    else INFERRED
                )
                if st is not None and src != STORED and batch_dims is None:
                    misfit = _misfits(s, path, st)
                    problem = _join(
                        problem,
                        f"the stored batch_size {st} does not fit the entries"
                        + (f": {misfit}" if misfit else ""),
                    )
                gb = GroupBatch(found, src, st, problem)
            s.batches[path] = gb
            continue
        parent = s.batches[path[:-1]].batch
        found_g = inferred.get(path)
        if st is not None and fits(st, parent) and (given is not None or batch_dims is not None):
            # an explicit root batch size: nested groups keep their stored size if it extends it
            found_g = tuple(st)
        if found_g is None or not fits(found_g, parent):
            if st is not None and not fits(st, parent):
                problem = _join(
                    problem,
                    f"the stored batch_size {st} does not extend the parent's {list(parent)}",
                )
            s.batches[path] = GroupBatch(parent, PARENT, st, problem)
            continue
        src = STORED if st is not None and list(found_g) == st else INFERRED
        if st is not None and src != STORED:
            misfit = _misfits(s, path, st)
            problem = _join(
                problem,
                f"the stored batch_size {st} does not fit the entries"
                + (f": {misfit}" if misfit else ""),
            )
        s.batches[path] = GroupBatch(found_g, src, st, problem)
