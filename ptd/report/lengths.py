"""The length rule of ``ptd validate``: each group's length when no batch size is stored, and
the leaves (or sub-groups) that are a few rows off it.

Files written by plain h5py or zarr-python store no batch size, and tensordict's rule (the
longest leading shape every entry shares) turns a leaf one row short into a batch size of
``[]``: nothing is checked. This rule gives every group a length of its own (episode groups
``data/demo_0``, ``data/demo_1``... each theirs) and reports near misses. It is a check of the
reports only; a ``PersistentTensorDict`` keeps tensordict's rule. The rule, for one group ``G``:

* **voters**: ``G``'s direct numeric leaves with at least one dim (and marked non-tensor
  stacks), each with its leading dim ``n``; and its sub-groups with a length of their own
  (a stored batch size counts as one), except *episode-like* sub-groups: sub-groups of one
  layout (the same voter names) whose lengths differ do not vote. String arrays, other
  non-tensors and 0-d leaves do not vote.
* **length** ``L``: the leading dim most voters have; a tie goes to the largest of the tied
  lengths (the report says so). No voters: no length.
* **mismatch**: a voter with ``0 < |n - L| <= tol(L)``, ``tol(L) = max(1, ceil(L / 100))``,
  when ``L >= MIN_LENGTH`` (10). Voters further off are side arrays (``episode_ends``, a split
  of demo names, a metadata table) and pass.
* **convention**: a mismatch of ``n - L = d`` by the voter named ``k`` is excused when, over
  ``G`` and its sibling groups holding a voter ``k``, ``d`` is the strictly most common offset
  of ``k`` and at least two groups have it (Minari's ``observations`` hold one row more than
  ``actions`` in every episode).

>>> shapes = {("x",): (50, 3), ("y",): (50,), ("r",): (49,), ("ends",): (4,)}
>>> found = group_lengths(lambda p: [k[0] for k in shapes] if p == () else [],
...                       lambda p: shapes.get(p), lambda p: p == ())
>>> found[()].length, [(m.key, m.length) for m in found[()].mismatches]
(50, [(('r',), 49)])
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from ptd.storage.api import Path

__all__ = [
    "MIN_LENGTH",
    "TOLERANCE",
    "GroupLength",
    "LengthMismatch",
    "group_lengths",
    "group_prefixes",
    "tolerance",
]

#: groups shorter than this are not checked (a few rows are metadata more often than data)
MIN_LENGTH = 10
#: the relative tolerance of a near miss (besides one row)
TOLERANCE = 0.01


#: a value voters can share: a length, or (``group_prefixes``) a batch size
_V = TypeVar("_V", int, tuple[int, ...])


def tolerance(length: int) -> int:
    """How far off ``length`` a voter may be and still be a mismatch (not a side array)."""
    return max(1, math.ceil(length * TOLERANCE))


@dataclass
class LengthMismatch:
    """A voter a few rows off its group's length."""

    key: Path
    length: int
    group: Path
    group_length: int
    #: a sub-group (its length) rather than a leaf (its leading dim)
    is_group: bool = False


@dataclass
class GroupLength:
    """One group's length under the rule, and where it came from."""

    path: Path
    length: int | None
    #: voters having the length, of all voters
    agreeing: int = 0
    voters: int = 0
    #: the length won a tie (the largest of the tied lengths)
    tie: bool = False
    #: the group was not checked: ``"stored"`` (its batch size is known: stored or given),
    #: ``"short"`` (under MIN_LENGTH), ``""`` (checked, or nothing to check)
    unchecked: str = ""
    mismatches: list[LengthMismatch] = field(default_factory=list)

    def source(self) -> str:
        """``'3 of 4 voters'`` (``', a tie'`` appended when the length won one)."""
        if self.length is None:
            return "no voters"
        return f"{self.agreeing} of {self.voters} voters" + (", a tie" if self.tie else "")


def _mode(values: list[_V]) -> tuple[_V, int, bool]:
    """(the most common value, its count, whether it won a tie: the largest wins)."""
    counts = Counter(values)
    top = max(counts.values())
    tied = [v for v, c in counts.items() if c == top]
    return max(tied), top, len(tied) > 1


def group_lengths(
    children: Callable[[Path], list[str]],
    leading: Callable[[Path], tuple[int, ...] | None],
    is_group: Callable[[Path], bool],
    *,
    fixed: dict[Path, tuple[int, ...]] | None = None,
) -> dict[Path, GroupLength]:
    """Every group's :class:`GroupLength` below (and including) the root.

    ``children(path)``: the names in a group; ``leading(path)``: a leaf's shape that counts
    (None: it does not vote); ``is_group(path)``. ``fixed``: groups whose batch size is known
    (stored or given): they vote with its first dim and are not checked."""
    fixed = fixed or {}
    out: dict[Path, GroupLength] = {}
    votes: dict[Path, dict[str, tuple[int, bool]]] = {}

    def visit(path: Path) -> int | None:
        leaf_votes: dict[str, int] = {}
        sub_votes: dict[str, int] = {}
        layouts: dict[Path, frozenset[str]] = {}
        for name in children(path):
            p = path + (name,)
            if is_group(p):
                n = visit(p)
                if n is not None:
                    sub_votes[name] = n
                    layouts[p] = frozenset(votes.get(p, {}))
            else:
                shape = leading(p)
                if shape is not None and len(shape) >= 1:
                    leaf_votes[name] = int(shape[0])
        for name in _episode_like(sub_votes, layouts):
            del sub_votes[name]
        mine = {k: (n, False) for k, n in leaf_votes.items()}
        mine.update({k: (n, True) for k, n in sub_votes.items()})
        votes[path] = mine
        if path in fixed:
            bs = fixed[path]
            out[path] = GroupLength(path, bs[0] if bs else None, unchecked="stored")
            return bs[0] if bs else None
        if not mine:
            out[path] = GroupLength(path, None)
            return None
        length, agreeing, tie = _mode([n for n, _ in mine.values()])
        gl = GroupLength(path, length, agreeing, len(mine), tie)
        if length < MIN_LENGTH:
            gl.unchecked = "short"
        out[path] = gl
        return length

    visit(())
    # mismatches, excusing an offset the voter's name has in most of its sibling groups
    for path, gl in out.items():
        if gl.unchecked or gl.length is None:
            continue
        L, tol = gl.length, tolerance(gl.length)
        for name, (n, sub) in votes[path].items():
            d = n - L
            if d == 0 or abs(d) > tol:
                continue
            if path and _convention(path, name, d, out, votes, children(path[:-1])):
                continue
            gl.mismatches.append(LengthMismatch(path + (name,), n, path, L, sub))
    return out


def _convention(
    path: Path,
    name: str,
    d: int,
    out: dict[Path, GroupLength],
    votes: dict[Path, dict[str, tuple[int, bool]]],
    siblings: list[str],
) -> bool:
    """Whether ``d`` is the strictly most common offset of the voter ``name`` over the group
    at ``path`` and its sibling groups, shared by at least two of them."""
    offsets: list[int] = []
    for sib in siblings:
        q = path[:-1] + (sib,)
        gl = out.get(q)
        if gl is None or gl.length is None or name not in votes.get(q, {}):
            continue
        offsets.append(votes[q][name][0] - gl.length)
    counts = Counter(offsets)
    others = [c for v, c in counts.items() if v != d]
    return counts[d] >= 2 and all(counts[d] > c for c in others)


def _episode_like(values: Mapping[str, object], layouts: dict[Path, frozenset[str]]) -> list[str]:
    """The sub-groups that do not vote: those of one layout (the same voter names) whose
    values (lengths, batch sizes) differ."""
    by_layout: dict[frozenset[str], set[object]] = {}
    for p, lay in layouts.items():
        by_layout.setdefault(lay, set()).add(values[p[-1]])
    return [p[-1] for p, lay in layouts.items() if lay and len(by_layout[lay]) > 1]


def group_prefixes(
    children: Callable[[Path], list[str]],
    leading: Callable[[Path], tuple[int, ...] | None],
    is_group: Callable[[Path], bool],
    k: int,
    fixed: dict[Path, tuple[int, ...]] | None = None,
) -> dict[Path, tuple[int, ...]]:
    """Every group's batch size of ``k`` dims, each group on its own (``--batch-dims K``): the
    ``k`` leading dims most of its voters (leaves of at least ``k`` dims, sub-groups whose
    batch size has ``k`` dims) share, ties to the largest; ``()`` without voters. ``fixed``
    groups keep theirs."""
    fixed = fixed or {}
    out: dict[Path, tuple[int, ...]] = {}

    names: dict[Path, frozenset[str]] = {}

    def visit(path: Path) -> tuple[int, ...]:
        found: dict[str, tuple[int, ...]] = {}
        layouts: dict[Path, frozenset[str]] = {}
        for name in children(path):
            p = path + (name,)
            if is_group(p):
                sub = visit(p)
                if len(sub) >= k:
                    found[name] = sub[:k]
                    layouts[p] = names[p]
            else:
                shape = leading(p)
                if shape is not None and len(shape) >= k:
                    found[name] = tuple(shape[:k])
        for name in _episode_like(dict(found), layouts):
            del found[name]
        names[path] = frozenset(found)
        if path in fixed:
            out[path] = fixed[path]
        elif found and k > 0:
            out[path] = _mode(list(found.values()))[0]
        else:
            out[path] = ()
        return out[path]

    visit(())
    return out
