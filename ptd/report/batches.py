"""The batch size each group's entries must start with, as :func:`ptd.validate` checks them
and ``ptd convert --batch-size/--batch-dims`` records them: a root batch size given by the
caller, or each group's own ``batch_dims`` leading dims (:mod:`ptd.report.lengths`); and the
report entries of the length rule."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ptd.errors import PtdError
from ptd.format.shapes import fits
from ptd.format.tdmeta import parse_td_meta
from ptd.report.lengths import GroupLength, LengthMismatch, group_prefixes
from ptd.report.problems import Problem
from ptd.report.scan import Scan
from ptd.storage.api import ArrayMeta, NodeKind, Path, ValueKind

__all__ = [
    "expected_batches",
    "expected_given",
    "group_entry",
    "leading_shape",
    "leaf_batch_shape",
    "length_problem",
]


def expected_batches(
    s: Scan, given: Sequence[int] | None, batch_dims: int | None
) -> tuple[dict[Path, tuple[int, ...]], list[Problem]]:
    """Every group's batch size for a root batch size ``given`` or ``batch_dims`` per group (as
    :func:`validate` checks them; ``ptd convert --batch-size/--batch-dims`` records them), and
    the problems: the entries that do not fit them (``batch_mismatch``), stored batch sizes
    that are malformed or do not extend their parent's."""
    expected: dict[Path, tuple[int, ...]] = {}
    problems: list[Problem] = []
    expected_given(
        s,
        tuple(int(n) for n in given) if given is not None else None,
        batch_dims,
        expected,
        {},
        problems,
    )
    for q, _k, meta in s.nodes:
        if meta is None:
            continue
        shape = leaf_batch_shape(meta)
        bs = expected[q[:-1]]
        if shape is not None and not fits(shape, bs):
            key = "/".join(q)
            problems.append(
                Problem(
                    key,
                    "batch_mismatch",
                    f"{key!r} has shape {list(shape)}, which does not start with the batch size "
                    f"{list(bs)}",
                    shape=list(shape),
                    expected=list(bs),
                )
            )
    return expected, problems


def expected_given(
    s: Scan,
    given: tuple[int, ...] | None,
    batch_dims: int | None,
    expected: dict[Path, tuple[int, ...]],
    sources: dict[Path, str],
    problems: list[Problem],
) -> None:
    """The batch size each group's entries must start with, for a root batch size given by the
    caller, or with ``batch_dims``: each group's own ``batch_dims`` leading dims
    (:func:`~ptd.report.lengths.group_prefixes`: an episode group gets its own, not the first
    one's). Nested groups keep their stored batch size where it extends their parent's
    (``group_batch_mismatch`` where it does not)."""
    stored: dict[Path, tuple[int, ...]] = {}
    for g in s.groups:
        meta, prob = parse_td_meta(s.group_attrs.get(g, {}))
        if prob:
            problems.append(Problem("/".join(g), "bad_metadata", prob))
        if meta is not None and g != ():
            stored[g] = meta.batch_size
    per_group: dict[Path, tuple[int, ...]] = {}
    if given is None:
        per_group = group_prefixes(
            s.tree.children,
            leading_shape(s),
            lambda q: s.tree.kind(q) is NodeKind.GROUP,
            int(batch_dims or 0),
        )
    for g in s.groups:
        key = "/".join(g)
        if g == ():
            expected[g] = given if given is not None else per_group[g]
            sources[g] = "given" if given is not None else "batch_dims"
            continue
        parent = expected[g[:-1]]
        st = stored.get(g)
        if st is not None:
            if fits(st, parent):
                expected[g], sources[g] = st, "stored"
                continue
            problems.append(
                Problem(
                    key,
                    "group_batch_mismatch",
                    f"group {key!r} records batch_size {list(st)}, which does not start with its "
                    f"parent's batch size {list(parent)}",
                    shape=list(st),
                    expected=list(parent),
                )
            )
        if given is None:
            expected[g], sources[g] = per_group[g], "batch_dims"
            continue
        found = s.batches[g].batch
        if fits(found, parent):
            expected[g], sources[g] = found, "inferred"
        else:
            expected[g], sources[g] = parent, "parent"


def leading_shape(s: Scan) -> Callable[[Path], tuple[int, ...] | None]:
    """A leaf's shape that votes in the length rule (a tensor's, a marked stack's), or None."""

    def leading(q: Path) -> tuple[int, ...] | None:
        try:
            return s.tree.shape_for_batch(q)
        except (PtdError, OSError, ValueError, TypeError, KeyError):
            return None

    return leading


def length_problem(m: LengthMismatch, gl: GroupLength) -> Problem:
    key, group = "/".join(m.key), "/".join(m.group) or "/"
    what = f"group {key!r} has length" if m.is_group else f"{key!r} has"
    return Problem(
        key,
        "length_mismatch",
        f"{what} {m.length} rows; its group {group!r} has {m.group_length} (the leading dim "
        f"{gl.source()} share; no batch size is stored)",
        shape=[m.length],
        expected=[m.group_length],
    )


def group_entry(
    g: Path,
    expected: dict[Path, tuple[int, ...]],
    sources: dict[Path, str],
    lengths: dict[Path, GroupLength],
) -> dict[str, Any]:
    """One group of :attr:`ValidationReport.group_batches`."""
    gl = lengths.get(g)
    checked = gl is not None and gl.length is not None and not gl.unchecked
    return {
        "key": "/".join(g),
        "batch_size": list(expected[g]),
        "batch_size_source": sources[g],
        "length": gl.length if checked and gl is not None else None,
        "length_source": gl.source() if checked and gl is not None else None,
    }


def leaf_batch_shape(meta: ArrayMeta) -> tuple[int, ...] | None:
    """The shape checked against the batch size: a tensor's, a marked stack's; else None."""
    if meta.kind is ValueKind.NUMERIC:
        return tuple(meta.shape)
    if meta.kind is ValueKind.NON_TENSOR and meta.stack_shape is not None:
        return tuple(meta.stack_shape)
    return None
