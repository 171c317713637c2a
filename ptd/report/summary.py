"""Summarized listings: alike sibling groups shown once, findings grouped by code.

A store of episodes (``data/demo_0`` ... ``data/demo_199``, each with the same keys) lists
the same subtree two hundred times, and the lint finds the same small chunks in every one.
This module decides what a text listing may fold together; the renderers (``ptd inspect``,
``ptd validate``, ``ptd convert --dry-run``) only draw it, and JSON documents always list
every node and every finding.

**Alike sibling groups.** Two groups under the same parent are *alike* when their subtrees
hold the same relative keys, each of the same kind, dtype and *trailing shape* (the dims
after the batch dims of a leaf that fits its group's batch size; after the first dim of one
that does not), with the same number of batch dims: lengths may differ, nothing else. At
least :data:`MIN_ALIKE` alike siblings are folded into one :class:`ListingRow` whose name
is a pattern (``demo_{0..6,8..19}``; names without a shared numbered stem are all listed,
``{left,right,top}``), followed once by their shared subtree; each row below it stands for
the same key in every folded group (its :attr:`ListingRow.members`). A group that differs
in one key, dtype or trailing dim (or whose leaf does not fit its length where its siblings'
do) is not alike, and is listed on its own. A listing cut at a depth (``inspect --depth``)
does not show what its deepest groups hold: the lister gives each such group the signature of
its whole subtree (:func:`subtree_signatures`, as its ``subtree`` attribute), and only groups
whose whole trees are alike are folded, never groups that merely look empty at the cut.

>>> from types import SimpleNamespace as E
>>> entries = [E(key="data", kind="group", shape=None, depth=1)]
>>> for i, n in enumerate([5, 7, 6]):
...     entries += [E(key=f"data/demo_{i}", kind="group", shape=None, depth=2),
...                 E(key=f"data/demo_{i}/obs", kind="tensor", shape=[n, 3], dtype="float32", depth=3)]
>>> [(r.key, r.count, r.lengths) for r in summarize_entries(entries)]
[('data', 1, None), ('data/demo_{0..2}', 3, (5, 7)), ('data/demo_{0..2}/obs', 1, None)]

**Findings by code.** :func:`group_findings` gathers problems or lint findings with the same
code (in the order each code first appears); a code found more than :data:`SHOWN_KEYS` times
is shown as one line with its count and its first :data:`SHOWN_KEYS` keys.

This module imports no torch, h5py nor zarr: it works on the entries of :func:`ptd.info`
(:class:`ptd.report.info.EntryInfo`), a conversion plan's :class:`LeafPlan`, or anything with
``key``, ``kind`` and ``shape`` attributes (and optionally ``dtype``, ``storage_dtype``,
``non_tensor_kind``, ``stack``, ``batch_dims``, ``batch_size``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

__all__ = [
    "MIN_ALIKE",
    "SHOWN_KEYS",
    "FindingGroup",
    "ListingRow",
    "dim_ranges",
    "group_findings",
    "name_pattern",
    "subtree_signatures",
    "summarize_entries",
]

#: alike sibling groups are folded from this many on
MIN_ALIKE = 3
#: a code found more often than this is shown as one line with this many keys
SHOWN_KEYS = 3

E = TypeVar("E")
F = TypeVar("F")


@dataclass
class ListingRow(Generic[E]):
    """One row of a summarized listing.

    ``key`` is what to show (``"data/demo_{0..19}/obs"``), ``name`` its last part, ``depth``
    1 for the root's children. ``members`` holds the entry this row stands for in every
    folded group (one entry when nothing above it is folded); ``names`` the sibling names a
    folded row stands for (``[name]`` otherwise); ``lengths`` the shortest and longest
    length of a folded group row's members (``None`` when unknown or not folded).
    """

    key: str
    name: str
    depth: int
    kind: str
    members: list[E]
    names: list[str] = field(default_factory=list)
    lengths: tuple[int, int] | None = None

    @property
    def count(self) -> int:
        """How many sibling names this row stands for (1 unless folded)."""
        return max(1, len(self.names))

    @property
    def folded(self) -> bool:
        return len(self.names) > 1

    @property
    def first(self) -> E:
        return self.members[0]


@dataclass
class FindingGroup(Generic[F]):
    """The findings of one code, in their order."""

    code: str
    items: list[F]
    key_of: Callable[[F], str] = field(default=lambda f: str(getattr(f, "key", "")), repr=False)

    @property
    def count(self) -> int:
        return len(self.items)

    @property
    def keys(self) -> list[str]:
        return [self.key_of(f) for f in self.items]

    @property
    def folded(self) -> bool:
        """Whether the group is shown as one line (found more than :data:`SHOWN_KEYS` times)."""
        return self.count > SHOWN_KEYS

    @property
    def shown_keys(self) -> list[str]:
        return self.keys[:SHOWN_KEYS]

    @property
    def more(self) -> int:
        """How many keys the one line leaves out."""
        return max(0, self.count - SHOWN_KEYS)


def group_findings(
    findings: Iterable[F],
    *,
    code: Callable[[F], str] = lambda f: str(getattr(f, "code", "")),
    key: Callable[[F], str] = lambda f: str(getattr(f, "key", "")),
) -> list[FindingGroup[F]]:
    """``findings`` gathered by code, the codes in the order they first appear."""
    groups: dict[str, FindingGroup[F]] = {}
    for f in findings:
        c = code(f)
        if c not in groups:
            groups[c] = FindingGroup(c, [], key)
        groups[c].items.append(f)
    return list(groups.values())


# ------------------------------------------------------------------------------ siblings
_NUMBERED = re.compile(r"(.*?)(\d+)(\D*)", re.DOTALL)


def name_pattern(names: Sequence[str]) -> str:
    """One name for ``names``: ``demo_{0..6,8..19}`` when they share a stem around a number,
    else every name, ``{a,b,c}``: a folded row hides none of the groups it stands for."""
    if len(names) == 1:
        return names[0]
    found = [_NUMBERED.fullmatch(n) for n in names]
    parts = [(m.group(1), m.group(2), m.group(3)) for m in found if m is not None]
    if len(parts) == len(names) and len({(a, c) for a, _, c in parts}) == 1:
        stem, _, tail = parts[0]
        numbers = sorted({(int(d), d) for _, d, _ in parts})
        runs: list[str] = []
        i = 0
        while i < len(numbers):
            j = i
            while j + 1 < len(numbers) and numbers[j + 1][0] == numbers[j][0] + 1:
                j += 1
            runs.append(numbers[i][1] if i == j else f"{numbers[i][1]}..{numbers[j][1]}")
            i = j + 1
        return f"{stem}{{{','.join(runs)}}}{tail}"
    return "{" + ",".join(names) + "}"


def dim_ranges(shapes: Sequence[Sequence[int] | None]) -> list[tuple[int, int]] | None:
    """Per dim, the smallest and largest size among ``shapes`` (``None`` when they differ in
    their number of dims, or one is ``None``)."""
    if not shapes or any(s is None for s in shapes):
        return None
    ndims = {len(s) for s in shapes if s is not None}
    if len(ndims) != 1:
        return None
    cols = list(zip(*[list(s) for s in shapes if s is not None], strict=True))
    return [(min(c), max(c)) for c in cols]


def _parent(key: str) -> str:
    return key.rpartition("/")[0]


def _name(key: str) -> str:
    return key.rpartition("/")[2]


def _leaf_signature(e: Any) -> tuple[Any, ...]:
    shape = list(getattr(e, "shape", None) or [])
    batch_dims = int(getattr(e, "batch_dims", 0) or 0)
    trailing = shape[batch_dims:] if batch_dims else shape[1:]
    return (
        str(getattr(e, "kind", "")),
        getattr(e, "dtype", None),
        getattr(e, "storage_dtype", None) if getattr(e, "dtype", None) is None else None,
        getattr(e, "non_tensor_kind", None),
        bool(getattr(e, "stack", False)),
        len(shape),
        batch_dims,
        tuple(trailing),
    )


class _Tree(Generic[E]):
    """The entries of a depth-first listing by key, with each group's children."""

    def __init__(self, entries: Sequence[E]) -> None:
        self.by_key: dict[str, E] = {}
        self.children: dict[str, list[str]] = {"": []}
        for e in entries:
            key = str(getattr(e, "key"))  # noqa: B009 - any entry type with a key
            self.by_key[key] = e
            self.children.setdefault(_parent(key), []).append(_name(key))
            if getattr(e, "kind", None) == "group":
                self.children.setdefault(key, [])
        self._sig: dict[str, tuple[Any, ...]] = {}

    @staticmethod
    def join(parent: str, name: str) -> str:
        return f"{parent}/{name}" if parent else name

    def signature(self, key: str) -> tuple[Any, ...]:
        """What two alike groups share (see the module doc). Worked out children first with a
        stack, not recursion (a store may nest hundreds of groups)."""
        todo = [(key, False)]
        while todo:
            k, ready = todo.pop()
            if k in self._sig:
                continue
            e = self.by_key[k]
            if getattr(e, "kind", None) != "group":
                self._sig[k] = _leaf_signature(e)
                continue
            whole = getattr(e, "subtree", None)
            if whole is not None:  # a group whose children are not listed: its whole tree's
                self._sig[k] = whole
                continue
            kids = [self.join(k, n) for n in sorted(self.children.get(k, []))]
            if not ready:
                todo.append((k, True))
                todo.extend((c, False) for c in kids if c not in self._sig)
                continue
            batch = getattr(e, "batch_size", None)
            self._sig[k] = (
                "group",
                None if batch is None else len(batch),
                tuple((_name(c), self._sig[c]) for c in kids),
            )
        return self._sig[key]

    def length(self, key: str) -> int | None:
        """A group's length: its first batch dim, else the commonest first dim of its leaves."""
        e = self.by_key[key]
        batch = getattr(e, "batch_size", None)
        if batch:
            return int(batch[0])
        firsts: Counter[int] = Counter()
        stack = [key]
        while stack:
            k = stack.pop()
            for n in self.children.get(k, []):
                child = self.join(k, n)
                c = self.by_key[child]
                if getattr(c, "kind", None) == "group":
                    stack.append(child)
                elif getattr(c, "shape", None):
                    firsts[int(c.shape[0])] += 1  # type: ignore[attr-defined]
        if not firsts:
            return None
        return max(firsts.items(), key=lambda kv: (kv[1], kv[0]))[0]


def subtree_signatures(entries: Sequence[Any]) -> dict[str, tuple[Any, ...]]:
    """Each group's signature (what alike groups share, see the module doc) over the whole
    of ``entries``: for a lister that shows fewer entries than it walked, so that its groups are
    folded by what they hold, not by what is shown of them.

    >>> from types import SimpleNamespace as E
    >>> es = [E(key="a", kind="group", shape=None), E(key="b", kind="group", shape=None),
    ...       E(key="a/x", kind="tensor", shape=[3], dtype="float32")]
    >>> sigs = subtree_signatures(es)
    >>> sigs["a"] == sigs["b"]
    False
    """
    tree: _Tree[Any] = _Tree(entries)
    return {
        key: tree.signature(key)
        for key, e in tree.by_key.items()
        if getattr(e, "kind", None) == "group"
    }


def summarize_entries(
    entries: Sequence[E], *, min_alike: int | None = MIN_ALIKE
) -> list[ListingRow[E]]:
    """The rows of a listing of ``entries`` (depth first, parents before children, as
    :func:`ptd.info` lists them), with alike sibling groups folded from ``min_alike`` on
    (``None``: nothing is folded, one row per entry)."""
    tree: _Tree[E] = _Tree(entries)
    rows: list[ListingRow[E]] = []

    def level(parents: list[str]) -> tuple[list[str], dict[str, list[str]], set[str]]:
        names = tree.children.get(parents[0], [])
        classes: dict[tuple[Any, ...], list[str]] = {}
        if min_alike is not None:
            for n in names:
                k = tree.join(parents[0], n)
                if getattr(tree.by_key[k], "kind", None) == "group":
                    classes.setdefault(tree.signature(k), []).append(n)
        folded = {c[0]: c for c in classes.values() if len(c) >= max(2, min_alike or 0)}
        hidden = {n for c in folded.values() for n in c[1:]}
        return names, folded, hidden

    # depth first with a stack of levels (no recursion: a store may nest hundreds of groups)
    stack: list[tuple[list[str], str, int, Iterator[str], dict[str, list[str]], set[str]]] = []
    names, folded, hidden = level([""])
    stack.append(([""], "", 1, iter(names), folded, hidden))
    while stack:
        parents, shown, depth, pending, folded, hidden = stack[-1]
        n = next(pending, None)
        if n is None:
            stack.pop()
            continue
        if n in hidden:
            continue
        together = folded.get(n, [n])
        members_keys = [tree.join(p, m) for p in parents for m in together]
        members = [tree.by_key[k] for k in members_keys]
        name = name_pattern(together)
        row = ListingRow(
            key=tree.join(shown, name),
            name=name,
            depth=depth,
            kind=str(getattr(members[0], "kind", "")),
            members=members,
            names=list(together),
        )
        if row.folded:
            lengths = [x for x in (tree.length(k) for k in members_keys) if x is not None]
            row.lengths = (min(lengths), max(lengths)) if lengths else None
        rows.append(row)
        if row.kind == "group":
            sub_names, sub_folded, sub_hidden = level(members_keys)
            stack.append(
                (members_keys, row.key, depth + 1, iter(sub_names), sub_folded, sub_hidden)
            )
    return rows
