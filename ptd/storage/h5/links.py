"""HDF5 links: what a key is when it is not a plain (first) hard link to its object.

HDF5 names objects by links. ptd lists every link that leads to an object *inside the file*:

* a second (third...) **hard link** to a dataset or group (``f["alias"] = f["obs"]``) is listed
  as the object it reaches, noted as a link to the first key reaching it (in name order);
* a **soft link** (``h5py.SoftLink("/obs")``) is listed as the object it points to, noted as a
  link to that path;
* a soft link that **dangles**, an **external link** (into another file, which a hostile file
  could point anywhere: never followed), a user-defined link, and a link to one of its own
  ancestor groups (a cycle) are *skipped*: not listed, and recorded with the reason;
* a soft link whose target path passes through an external (or user-defined) link at any
  component (``leak -> /ext/token`` where ``/ext`` is an external link), or through a chain
  of more than :data:`MAX_SOFT_LINKS` soft links, is skipped too.

Soft links are resolved here, one component at a time against the file's own links
(:func:`resolve`), never by HDF5's path traversal, which would open the other file of an
external link on the way. Every key ptd opens by path goes through :func:`resolve`.

A dataset that is netCDF-4's scale of a dimension that is no variable (its ``NAME`` says
"This is a netCDF dimension but not a netCDF variable.": see :mod:`ptd.storage.spelled`) is
no key either, as netCDF and xarray see it: it states a dimension and its length. The
listing leaves it out and hands it to ``dimension(name, length)`` instead (the backend keeps
them in :attr:`~ptd.storage.api.Backend.hidden_dimensions`). This listing is the one place
the HDF5 backend enumerates a group, so keys, batch sizes, ``inspect``, ``convert``, ``diff``
and ``validate`` all agree.

``memmap`` therefore copies linked data once per key; ``convert`` makes a soft link again in
an HDF5 copy and lists it by name and target in a zarr copy (:func:`ptd.transfer.plan.soft_links`),
and copies a second hard link's data once more.

:func:`walk` is one pass over a group's links; :func:`child_links` sorts one group's children.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import h5py

from ptd.storage.h5.properties import dimension_only_length

__all__ = [
    "MAX_SOFT_LINKS",
    "SKIP_EXTERNAL",
    "Link",
    "Outside",
    "address",
    "ancestors",
    "child_links",
    "resolve",
    "walk",
    "wrap",
]

#: the reason an external link is skipped
SKIP_EXTERNAL = "external link to {target}: not followed (it could read any file on this machine)"

#: ``(name, object or None, link note or None, skip reason or None)``
Link = tuple[str, Any, str | None, str | None]
#: told of each dimension-only scale the listing leaves out: ``(name, length)``
Dimension = Callable[[str, int], None]


#: soft links followed while resolving one path (HDF5's own default limit, H5L_NUM_LINKS)
MAX_SOFT_LINKS = 16


class Outside(Exception):
    """A path that leads out of the file (or into a soft-link loop): ``reason`` says how."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _open_parts(
    file_root: Any, start: Any, parts: list[str], shown: list[str], budget: list[int]
) -> Any:
    """The object ID reached from the group ID ``start`` along ``parts``; ``shown``: the path
    walked so far (for messages); ``budget``: soft links still allowed. KeyError for a missing
    link, :class:`Outside` for a link out of the file."""
    cur = start
    for part in parts:
        if part in ("", "."):  # (HDF5 skips empty components; '.' is the group itself)
            continue
        if not isinstance(cur, h5py.h5g.GroupID):
            raise KeyError(part)
        name = part.encode("utf-8", errors="surrogateescape")
        links = cur.links
        try:
            info = links.get_info(name)
        except (KeyError, ValueError, RuntimeError) as err:
            raise KeyError(part) from err
        shown.append(part)
        if info.type == h5py.h5l.TYPE_HARD:
            cur = h5py.h5o.open(cur, name)
        elif info.type == h5py.h5l.TYPE_SOFT:
            budget[0] -= 1
            if budget[0] < 0:
                raise Outside(f"more than {MAX_SOFT_LINKS} soft links in a row (a loop?)")
            target = links.get_val(name).decode("utf-8", errors="surrogateescape")
            base = file_root() if target.startswith("/") else cur
            cur = _open_parts(file_root, base, target.split("/"), [], budget)
        elif info.type == h5py.h5l.TYPE_EXTERNAL:
            raise Outside(
                f"it passes through {'/'.join(shown)!r}, an external link: {_NOT_FOLLOWED}"
            )
        else:
            raise Outside(f"it passes through {'/'.join(shown)!r}, a user-defined HDF5 link")
    return cur


_NOT_FOLLOWED = "not followed (it could read any file on this machine)"


def resolve(group: h5py.Group, path: Any, *, soft_target: str | None = None) -> Any:
    """The object ID at ``path`` (a tuple of names, or a ``/``-separated str) below
    ``group``, each component resolved against this file's links: hard links are entered,
    soft links resolved the same way (absolute ones from the file's root group), and an
    external or user-defined link on the way raises :class:`Outside` (its file is never
    opened). ``soft_target``: resolve that soft link target, relative to ``group``, instead.
    KeyError when a link is missing."""
    parts = list(path) if not isinstance(path, str) else path.split("/")
    fid = group.file.id

    def file_root() -> Any:
        return h5py.h5o.open(fid, b"/")

    budget = [MAX_SOFT_LINKS]
    if soft_target is not None:
        base = file_root() if soft_target.startswith("/") else group.id
        return _open_parts(file_root, base, soft_target.split("/"), [], budget)
    return _open_parts(file_root, group.id, parts, [], budget)


def wrap(oid: Any) -> Any:
    """The h5py object of an object ID: a Dataset, a Group, or None (a named datatype)."""
    if isinstance(oid, h5py.h5d.DatasetID):
        return h5py.Dataset(oid)
    if isinstance(oid, h5py.h5g.GroupID):
        return h5py.Group(oid)
    return None


def address(obj: Any) -> int:
    """What identifies an HDF5 object within its file: its address."""
    return int(h5py.h5o.get_info(obj.id).addr)


def ancestors(root: h5py.Group, path: tuple[str, ...]) -> frozenset[int]:
    """The addresses of ``root`` and of each group on the way to ``path`` (included)."""
    return frozenset(address(root["/".join(path[:i])] if i else root) for i in range(len(path) + 1))


def child_links(
    group: h5py.Group,
    ancestors: frozenset[int],
    first: dict[int, str],
    key_of: Callable[[str], str],
    dimension: Dimension | None = None,
) -> Iterator[Link]:
    """Each link of ``group`` in name order: ``(name, obj, link, skip)``.

    ``obj`` is the dataset or group reached (None when skipped); ``link`` says what the key
    links to (``"soft link to /obs"``, ``"hard link to 'obs'"``) or is None for the first key
    reaching its object; ``skip`` is why the link is not listed (None when it is).
    ``ancestors``: the addresses of the groups above (a link back to one of them is a cycle);
    ``first``: object address -> first key reaching it (updated here); ``key_of(name)``: the
    key of a child, for messages and ``first``; ``dimension(name, length)``: told of each
    netCDF dimension-only scale, which is not yielded (see the module's text).
    """
    links = group.id.links
    found: list[tuple[bytes, int, int]] = []
    links.iterate(lambda bname, info: found.append((bname, info.type, info.u)), info=True)
    for bname, ltype, where in found:
        name = bname.decode("utf-8", errors="surrogateescape")
        note: str | None = None
        if ltype == h5py.h5l.TYPE_EXTERNAL:
            try:
                fname, oname = links.get_val(bname)[:2]
                target = f"{fname.decode(errors='replace')}:{oname.decode(errors='replace')}"
            except Exception:  # noqa: BLE001 - the target is informative only
                target = "another file"
            yield name, None, None, SKIP_EXTERNAL.format(target=target)
            continue
        if ltype == h5py.h5l.TYPE_SOFT:
            target = links.get_val(bname).decode("utf-8", errors="replace")
            note = f"soft link to {target}"
        elif ltype != h5py.h5l.TYPE_HARD:
            yield name, None, None, "user-defined HDF5 link: not followed"
            continue
        try:
            if note is None:
                oid = h5py.h5o.open(group.id, bname)
                addr = int(where)  # a hard link's info holds the object's address
            else:
                # the target resolved link by link: never through an external link
                oid = resolve(group, (), soft_target=target)
                addr = int(h5py.h5o.get_info(oid).addr)
        except Outside as out:
            yield name, None, None, f"{note}, which leads out of the file: {out.reason}"
            continue
        except (KeyError, ValueError, RuntimeError, OSError):
            if note is not None:
                yield name, None, None, f"dangling {note}, which does not exist"
            else:
                yield name, None, None, "its object cannot be opened"
            continue
        if isinstance(oid, h5py.h5d.DatasetID):
            length = dimension_only_length(oid)
            if length is not None:  # a dimension, not a key
                if dimension is not None:
                    dimension(name, length)
                continue
            obj: Any = h5py.Dataset(oid)
        elif isinstance(oid, h5py.h5g.GroupID):
            obj = h5py.Group(oid)
        else:
            yield name, None, None, "a named datatype, not data"
            continue
        if isinstance(obj, h5py.Group) and addr in ancestors:
            what = note or "hard link"
            yield name, None, None, f"{what} to one of its own parent groups (a cycle)"
            continue
        seen = first.get(addr)
        key = key_of(name)
        if seen is None:
            first[addr] = key
        elif note is None and seen != key:
            note = f"hard link to {seen!r}"
        yield name, obj, note, None


def walk(
    group: h5py.Group,
    path: tuple[str, ...],
    visit: Callable[[tuple[str, ...], Any, str | None], None],
    skipped: Callable[[tuple[str, ...], str], None],
    *,
    ancestors: frozenset[int] | None = None,
    first: dict[int, str] | None = None,
    dimension: Callable[[tuple[str, ...], int], None] | None = None,
) -> None:
    """Every link below ``group`` (at key ``path``), depth first in name order, parents first:
    ``visit(path, obj, link)`` for each listed one, ``skipped(path, reason)`` for the others.
    A group reached by several links is walked under each of them; ``dimension(path,
    length)``: told of each netCDF dimension-only scale (not visited)."""
    if ancestors is None:
        ancestors = frozenset({address(group)})
    if first is None:
        first = {}
    told = None if dimension is None else (lambda n, length: dimension(path + (n,), length))
    for name, obj, note, skip in child_links(
        group, ancestors, first, lambda n: "/".join(path + (n,)), told
    ):
        p = path + (name,)
        if skip is not None:
            skipped(p, skip)
            continue
        visit(p, obj, note)
        if isinstance(obj, h5py.Group):
            walk(
                obj,
                p,
                visit,
                skipped,
                ancestors=ancestors | {address(obj)},
                first=first,
                dimension=dimension,
            )
