"""Creating many small zarr arrays and groups at once (``ZarrBackend.create_arrays`` and
``create_groups``): a store of 10,000 small datasets converts in seconds, not minutes.

zarr-python creates nodes one at a time, each a round trip to its event loop (metadata checks,
the parsed metadata object, its JSON document, then the data: several ms each), and listing a
group reads every child's metadata. Here:

* the names already in a parent group are listed once from the store (no metadata read);
* arrays sharing a layout (shape, dtype, chunks, codecs) share one metadata document: the first
  is created by zarr, the others are that document (as zarr serialised it) with their own
  attributes, written as JSON;
* on a local directory store, arrays whose only codec is ``bytes`` (ptd's default: no
  compression, no sharding) held in a single chunk are written as zarr lays them out: their
  ``zarr.json`` and their one chunk file (its key from the metadata's own chunk key encoding,
  its bytes the array's in the codec's byte order), on a thread pool;
* every other array (compressed, several chunks, other stores) gets its document written and
  its data through zarr's asynchronous API, all of them concurrently (``AsyncArray.setitem``);
* groups are their ``zarr.json`` documents, written concurrently.

Either way the result is what zarr itself writes (``tests/cli/test_foreign.py`` and
``tests/storage/backends/test_zarr_backend.py`` read it back with zarr).
"""

from __future__ import annotations

import asyncio
import json
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import zarr
from zarr.storage import StorePath

from ptd.errors import PtdTypeError
from ptd.format.names import ZARR_JSON
from ptd.storage import runtime
from ptd.storage.api import Backend, Path, check_path
from ptd.storage.meta import NewArray
from ptd.storage.paths import StoreRoot
from ptd.storage.zarr import codec as zarr_codec
from ptd.storage.zarr import names as zarr_names
from ptd.storage.zarr.confined import store_root
from ptd.storage.zarr.private import AsyncArray, default_buffer_prototype, sync
from ptd.storage.zarr.read import batches, in_byte_order, single_raw_chunk

__all__ = ["CONCURRENCY", "child_names", "create", "create_groups", "create_many"]

#: files written at a time (threads for local files, tasks for zarr's asynchronous API x 4)
CONCURRENCY = 4


def _dumps(doc: Any) -> bytes:
    """A metadata document as zarr writes it (NaN and infinities as JSON's extension)."""
    return json.dumps(doc, allow_nan=True).encode()


def _prefix(be: Any) -> str:
    """The backend's root group's path in its store, as a key prefix (``""`` at the root)."""
    path = be._root.path
    return f"{path}/" if path else ""


def child_names(be: Any, path: Path) -> set[str]:
    """The names under the group at ``path`` as the store lists them (no metadata is read,
    unlike ``zarr.Group.keys``, which opens every child)."""
    prefix = (_prefix(be) + "/".join(path)).rstrip("/")

    async def listing() -> set[str]:
        return {name async for name in be._store.list_dir(prefix)}

    names = sync(listing())
    names.discard(ZARR_JSON)
    return names


@dataclass
class _Layout:
    """What arrays of one layout share: zarr's metadata object of the first (for the data
    writes), its JSON document, and whether they are written as plain files."""

    md: Any
    doc: dict[str, Any]
    #: local store, one chunk, the bytes codec alone
    raw: bool
    #: the chunk file's path inside the array's directory, and the byte order it holds
    chunk_key: tuple[str, ...]
    endian: str | None

    @classmethod
    def of(cls, md: Any, local: bool) -> _Layout:
        doc = json.loads(md.to_buffer_dict(default_buffer_prototype())[ZARR_JSON].to_bytes())
        found = single_raw_chunk(md) if local else None
        if found is None:
            return cls(md, doc, False, (), None)
        return cls(md, doc, True, *found)

    def document(self, attrs: Mapping[str, Any]) -> bytes:
        doc = dict(self.doc)
        doc["attributes"] = attrs
        return _dumps(doc)

    def chunk_bytes(self, data: np.ndarray) -> bytes:
        return np.ascontiguousarray(data, dtype=in_byte_order(data.dtype, self.endian)).tobytes()


def _layout_key(kwargs: dict[str, Any], shape: tuple[int, ...], dtype: np.dtype) -> str:
    return repr((shape, dtype.str, sorted((k, repr(v)) for k, v in kwargs.items())))


def create(be: Any, specs: Sequence[NewArray]) -> None:
    """``ZarrBackend.create_arrays``: the checks each creation makes, the parent groups, then
    :func:`create_many` (an array replacing a node goes through ``create_array``; arrays with
    escaped names, or names that look escaped, one by one)."""
    if not all(zarr_names.plain_path(spec.path) for spec in specs):
        Backend.create_arrays(be, specs)
        return
    fresh: list[NewArray] = []
    names: dict[Path, set[str]] = {}  # each parent's children, listed once
    for spec in specs:
        be._check_create(spec.path)
        be._check_name(spec.path)
        parent = spec.path[:-1]
        if parent not in names:
            be._require_group(parent)
            names[parent] = child_names(be, parent)
        if spec.path[-1] in names[parent]:
            Backend.create_arrays(be, [spec])
        else:
            names[parent].add(spec.path[-1])
            fresh.append(spec)
    if not fresh:
        return
    be._changed()

    def kwargs_of(spec: NewArray) -> dict[str, Any]:
        kwargs: dict[str, Any] = be._create_kwargs(spec.shape, spec.options, spec.chunks)
        if spec.attrs:
            kwargs["attributes"] = {
                **kwargs.get("attributes", {}),
                **zarr_codec.attrs_json(dict(spec.attrs)),
            }
        return kwargs

    try:
        create_many(be._root, fresh, kwargs_of, lambda s: be._group(s.path[:-1]))
    except (TypeError, ValueError) as err:
        spec = fresh[0]
        raise be._create_error(spec.path, spec.shape, spec.dtype, spec.options, err) from None


def create_many(
    root: zarr.Group,
    specs: Sequence[NewArray],
    kwargs_of: Callable[[NewArray], dict[str, Any]],
    parent_of: Callable[[NewArray], zarr.Group],
) -> None:
    """Create the arrays ``specs`` (their parents exist, they do not) under ``root`` and fill
    them. ``kwargs_of(spec)``: zarr's ``create_array`` arguments for one (chunks, codecs,
    attributes); ``parent_of(spec)``: its parent group. Every document is made before anything
    but each layout's first array is written (a value JSON cannot hold fails early)."""
    local = store_root(root.store) is not None
    layouts: dict[str, _Layout] = {}
    items: list[tuple[_Layout, NewArray, bytes]] = []
    for spec in specs:
        kwargs = kwargs_of(spec)
        attrs = kwargs.pop("attributes", None) or {}
        key = _layout_key(kwargs, spec.shape, spec.dtype)
        layout = layouts.get(key)
        if layout is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", category=UserWarning)
                arr = parent_of(spec).create_array(
                    spec.path[-1], shape=spec.shape, dtype=spec.dtype, attributes=attrs, **kwargs
                )
            layouts[key] = _Layout.of(arr.metadata, local)
            if spec.data is not None and arr.size:
                arr[...] = spec.data
            continue
        items.append((layout, spec, layout.document(attrs)))
    prefix = f"{root.path}/" if root.path else ""
    raw = [item for item in items if item[0].raw]
    if raw:
        paths = store_root(root.store)
        assert paths is not None  # (raw layouts are made for local stores only)
        _write_files(paths, prefix, raw)
    other = [item for item in items if not item[0].raw]
    if other:
        sync(_write_async(root.store, prefix, other))


def _write_files(
    paths: StoreRoot, prefix: str, items: list[tuple[_Layout, NewArray, bytes]]
) -> None:
    """Each array's ``zarr.json`` and chunk file, on a thread pool (the bytes are made here,
    the threads only do the file system calls)."""
    jobs: list[tuple[str, bytes, str | None, bytes | None]] = []
    for layout, spec, doc in items:
        directory = os.path.join(paths.root, *(prefix + "/".join(spec.path)).split("/"))
        chunk = data = None
        if spec.data is not None and spec.data.size:
            chunk = os.path.join(directory, *layout.chunk_key)
            data = layout.chunk_bytes(spec.data)
        jobs.append((directory, doc, chunk, data))

    def write(batch: list[tuple[str, bytes, str | None, bytes | None]]) -> None:
        for directory, doc, chunk, data in batch:
            # (never through a link out of the store: ptd.storage.paths)
            paths.write(os.path.join(directory, ZARR_JSON), doc)
            if chunk is not None and data is not None:
                paths.write(chunk, data)

    runtime.io_map(write, batches(jobs, CONCURRENCY))


async def _write_async(
    store: Any, prefix: str, items: list[tuple[_Layout, NewArray, bytes]]
) -> None:
    proto = default_buffer_prototype()
    sem = asyncio.Semaphore(CONCURRENCY * 4)

    async def one(layout: _Layout, spec: NewArray, doc: bytes) -> None:
        async with sem:
            sp = StorePath(store, prefix + "/".join(spec.path))
            await (sp / ZARR_JSON).set(proto.buffer.from_bytes(doc))
            if spec.data is not None and spec.data.size:
                # the layout's first metadata: the same chunks and codecs (attributes differ)
                await AsyncArray(metadata=layout.md, store_path=sp).setitem(Ellipsis, spec.data)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        await asyncio.gather(*(one(*item) for item in items))


def create_groups(be: Any, specs: Sequence[tuple[Path, Mapping[str, Any] | None]]) -> None:
    """``ZarrBackend.create_groups``: each new group's ``zarr.json`` written concurrently (a
    group that exists already gets its attributes set, as ``create_group`` does; groups with
    escaped names one by one)."""
    if not all(zarr_names.plain_path(path) for path, _ in specs):
        Backend.create_groups(be, specs)
        return
    docs: list[tuple[Path, bytes]] = []
    names: dict[Path, set[str]] = {}  # the children of each parent: listed, or new here
    for path, attrs in specs:
        key = be.key_str(path)
        be.check_writable(key)
        check_path(path, be.location)
        parent = path[:-1]
        if not path:
            be.create_group(path, attrs)
            continue
        if parent not in names:
            be._require_group(parent)
            names[parent] = child_names(be, parent)
        if path[-1] in names[parent]:
            be.create_group(path, attrs)  # exists: attributes set, an array refused
            continue
        be._check_name(path)
        doc = {
            "attributes": zarr_codec.attrs_json(dict(attrs or {})),
            "zarr_format": 3,
            "node_type": "group",
        }
        try:
            docs.append((path, _dumps(doc)))
        except (TypeError, ValueError) as err:
            raise PtdTypeError(
                f"cannot create group {key!r} in {be.location}: its attributes are not JSON ({err})"
            ) from None
        names[parent].add(path[-1])
        names[path] = set()
    if not docs:
        return
    be._changed()
    proto = default_buffer_prototype()
    sem = asyncio.Semaphore(CONCURRENCY * 4)
    store, prefix = be._store, _prefix(be)

    async def one(path: Path, doc: bytes) -> None:
        async with sem:
            await store.set(prefix + "/".join(path + (ZARR_JSON,)), proto.buffer.from_bytes(doc))

    async def all_of() -> None:
        await asyncio.gather(*(one(p, d) for p, d in docs))

    sync(all_of())
