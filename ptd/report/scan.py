"""One metadata pass over a store, shared by :func:`ptd.info`, :func:`ptd.validate` and
:func:`ptd.convert`: the nodes, their array metadata and every group's batch size.

Nothing here reads array data: only the store's structure, attributes and array metadata (and,
for local zarr stores, file sizes, since zarr does not report the bytes an array occupies).
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from ptd.core.batch import fits
from ptd.errors import CorruptStoreError, PtdError, StoreNotFoundError
from ptd.format.names import TD_META_ATTR, ZARR_JSON
from ptd.storage.backends import detect_backend, get_backend
from ptd.storage.backends.base import ArrayMeta, Backend, NodeKind, Path
from ptd.storage.remote import filesystem, is_remote, normalize, remote_nbytes
from ptd.storage.tree import StoreTree

__all__ = [
    "Scan",
    "GroupBatch",
    "open_backend",
    "scan",
    "fspath",
    "path_nbytes",
    "zarr_array_nbytes",
]

#: how a group's batch size was found
STORED, INFERRED, PARENT, GIVEN = "stored", "inferred", "parent", "given"


@dataclass
class GroupBatch:
    batch: torch.Size
    #: "stored" (the ``__tensordict__`` attribute), "inferred" (from the entries), "parent"
    #: (a nested group that does not constrain its parent's) or "given" (by the caller)
    source: str
    #: the ``__tensordict__`` batch size as stored (None when absent or malformed)
    stored: list[int] | None = None
    #: why the stored metadata could not be used ("" when it could, or there is none)
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


def fspath(target: Any) -> str:
    """``target`` as a str path (a PathLike is accepted)."""
    try:
        return os.fsdecode(os.fspath(target))
    except TypeError:
        raise CorruptStoreError(f"expected a path, got {target!r}") from None


@contextmanager
def open_backend(
    path: Any,
    fmt: str | None = None,
    mode: str = "r",
    storage_options: dict[str, Any] | None = None,
) -> Iterator[Backend]:
    """Open an existing store read-only (format detected from its content unless ``fmt``).

    ``path`` may be a URL (``s3://...``, read with ``storage_options``; they are ignored for
    local paths, so one set of options serves a local source and a remote destination)."""
    p = normalize(fspath(path))
    if is_remote(p):
        name = fmt or detect_backend(p, storage_options)
        be = get_backend(name).open(p, mode, storage_options=storage_options)
    else:
        if not os.path.exists(p) and "://" not in p:
            raise StoreNotFoundError(f"{p} does not exist")
        name = fmt or detect_backend(p)
        # streamed whole-store reads (convert) gain nothing from memory maps, whose mapped
        # pages would count in resident memory: read through h5py/zarr
        be = get_backend(name).open(p, mode, fast_path=False)
    try:
        yield be
    finally:
        be.close()


def stored_batch(attrs: dict[str, Any]) -> tuple[list[int] | None, str]:
    """The ``__tensordict__`` batch size in ``attrs``, and a problem description if malformed."""
    if TD_META_ATTR not in attrs:
        return None, ""
    meta = attrs[TD_META_ATTR]
    if not isinstance(meta, dict):
        return None, f"the {TD_META_ATTR} attribute is not a JSON object: {meta!r}"
    bs = meta.get("batch_size")
    if not isinstance(bs, list) or not all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in bs
    ):
        return None, f"the {TD_META_ATTR} attribute has no valid batch_size list: {meta!r}"
    return list(bs), ""


def _walk_tolerant(
    be: Backend, path: Path, errors: dict[Path, str]
) -> list[tuple[Path, NodeKind, ArrayMeta | None]]:
    """Like ``Backend.walk`` but node by node, recording unreadable nodes in ``errors``."""
    out: list[tuple[Path, NodeKind, ArrayMeta | None]] = []
    try:
        kids = be.children(path)
    except (PtdError, OSError, ValueError, TypeError, KeyError) as err:
        if not path:
            raise  # the root itself: the store is unreadable
        errors[path] = str(err) or type(err).__name__
        return out
    for name, kind in kids:
        p = path + (name,)
        if kind is NodeKind.ARRAY:
            try:
                out.append((p, kind, be.array_meta(p)))
            except (PtdError, OSError, ValueError, TypeError, KeyError) as err:
                errors[p] = str(err) or type(err).__name__
        else:
            out.append((p, kind, None))
            out.extend(_walk_tolerant(be, p, errors))
    return out


def scan(
    be: Backend,
    fmt: str,
    *,
    tolerant: bool = False,
    batch_size: torch.Size | None = None,
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
    tree = StoreTree(be)
    # fill the tree's cache from our walk (the same thing StoreTree.load_all does)
    children: dict[Path, list[str]] = {(): []}
    for path, kind, meta in nodes:
        children.setdefault(path[:-1], []).append(path[-1])
        tree._kinds[path] = kind
        if kind is NodeKind.GROUP:
            children.setdefault(path, [])
        elif meta is not None:
            tree._metas[path] = meta
    tree._children.update(children)
    out = Scan(location=be.location, format=fmt, backend=be, tree=tree, nodes=nodes, errors=errors)
    groups = [()] + [p for p, k, _ in nodes if k is NodeKind.GROUP]
    for g in groups:
        try:
            out.group_attrs[g] = be.get_attrs(g)
        except (PtdError, OSError, ValueError, TypeError) as err:
            if not tolerant:
                raise
            errors[g] = f"cannot read the attributes: {err}"
            out.group_attrs[g] = {}
    _batches(out, batch_size, batch_dims)
    return out


def _batches(s: Scan, given: torch.Size | None, batch_dims: int | None) -> None:
    tree = s.tree
    # the tree reads the attributes again through the backend: hand it ours (no extra I/O)
    attrs = s.group_attrs

    def recorded(path: Path) -> torch.Size | None:
        bs, _ = stored_batch(attrs.get(path, {}))
        return torch.Size(bs) if bs is not None else None

    tree.stored_batch_attr = recorded  # type: ignore[method-assign]
    try:
        tree.infer((), batch_dims, use_attrs=batch_dims is None)
    except Exception:  # noqa: BLE001 - inference never blocks a scan; fall back to []
        pass
    inferred = tree._group_batch
    for path in [()] + [p for p, k, _ in s.nodes if k is NodeKind.GROUP]:
        st, problem = stored_batch(attrs.get(path, {}))
        if path == ():
            if given is not None:
                gb = GroupBatch(torch.Size(given), GIVEN, st, problem)
            else:
                found = inferred.get((), torch.Size([]))
                src = (
                    STORED
                    if st is not None and list(found) == st and batch_dims is None
                    else INFERRED
                )
                if st is not None and src != STORED and batch_dims is None and not problem:
                    problem = f"the stored batch_size {st} does not fit the entries"
                gb = GroupBatch(found, src, st, problem)
            s.batches[path] = gb
            continue
        parent = s.batches[path[:-1]].batch
        found = inferred.get(path)
        if st is not None and fits(st, parent) and (given is not None or batch_dims is not None):
            # an explicit root batch size: nested groups keep their stored size if it extends it
            found = torch.Size(st)
        if found is None or not fits(found, parent):
            if st is not None and not problem and not fits(st, parent):
                problem = f"the stored batch_size {st} does not extend the parent's {list(parent)}"
            s.batches[path] = GroupBatch(parent, PARENT, st, problem)
            continue
        src = STORED if st is not None and list(found) == st else INFERRED
        if st is not None and src != STORED and not problem:
            problem = f"the stored batch_size {st} does not fit the entries"
        s.batches[path] = GroupBatch(found, src, st, problem)


def path_nbytes(path: str, storage_options: dict[str, Any] | None = None) -> int | None:
    """Bytes a file or directory tree (or everything under a URL) occupies, None when
    unknown."""
    if is_remote(path):
        return remote_nbytes(path, storage_options)
    try:
        if os.path.isfile(path):
            return os.path.getsize(path)
        total = 0
        for root, _dirs, files in os.walk(path):
            for f in files:
                try:
                    total += os.path.getsize(os.path.join(root, f))
                except OSError:
                    pass
        return total
    except OSError:
        return None


def zarr_array_nbytes(
    store_path: str, arrays: list[Path], storage_options: dict[str, Any] | None = None
) -> dict[Path, int]:
    """Chunk bytes of each array of a zarr store (directory, zip or URL), from file sizes.

    zarr reports no stored size; this sums the sizes of the files under each array's prefix,
    except its ``zarr.json``. Stores that cannot be listed give an empty dict.
    """
    if not arrays:
        return {}
    wanted = {"/".join(p): p for p in arrays}
    sizes: dict[Path, int] = {p: 0 for p in arrays}

    def account(rel: str, size: int) -> None:
        parts = rel.split("/")
        if parts[-1] == ZARR_JSON:
            return
        for i in range(1, len(parts)):
            hit = wanted.get("/".join(parts[:i]))
            if hit is not None:
                sizes[hit] += size
                return

    if os.path.isdir(store_path):
        root_len = len(store_path.rstrip(os.sep)) + 1
        for root, _dirs, files in os.walk(store_path):
            rel_root = root[root_len:].replace(os.sep, "/")
            for f in files:
                try:
                    size = os.path.getsize(os.path.join(root, f))
                except OSError:
                    continue
                account(f"{rel_root}/{f}" if rel_root else f, size)
        return sizes
    if os.path.isfile(store_path) and zipfile.is_zipfile(store_path):
        with zipfile.ZipFile(store_path) as z:
            for info in z.infolist():
                account(info.filename, info.compress_size)
        return sizes
    if is_remote(store_path):
        try:
            fs, root = filesystem(store_path, storage_options)
            root = root.rstrip("/")
            if hasattr(fs, "invalidate_cache"):
                fs.invalidate_cache(root)
            for name, detail in fs.find(root, detail=True).items():
                if name.startswith(root + "/"):
                    account(name[len(root) + 1 :], int(detail.get("size") or 0))
        except Exception:  # noqa: BLE001 - sizes are informative only
            return {}
        return sizes
    return {}
