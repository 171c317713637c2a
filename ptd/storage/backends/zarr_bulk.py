"""Creating many small zarr arrays at once (``ZarrBackend.create_arrays``): a store of 10,000
small datasets converts in seconds, not minutes.

zarr-python creates arrays one at a time, each a round trip to its event loop (metadata
checks, the metadata document, then the data: about 5 ms each). Here:

* arrays sharing a layout (shape, dtype, chunks, codecs) share one metadata object: the first
  is created by zarr, the others are that metadata with their own attributes
  (``dataclasses.replace``), serialised by zarr (``to_buffer_dict``);
* on a local directory store, arrays whose only codec is ``bytes`` (ptd's default: no
  compression, no sharding) held in a single chunk are written as zarr lays them out: their
  ``zarr.json`` and their one chunk file (its key from the metadata's own chunk key encoding,
  its bytes the array's in the codec's byte order), on a thread pool;
* every other array (compressed, several chunks, other stores) is written through zarr's
  asynchronous API, all of them concurrently (``AsyncArray.setitem``).

Either way the result is what zarr itself writes (``tests/test_foreign.py`` reads it back with
zarr).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import zarr
from zarr.codecs import BytesCodec
from zarr.core.array import AsyncArray
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync
from zarr.storage import LocalStore, StorePath

from ptd.storage.backends import zarr_codec
from ptd.storage.backends.base import Backend
from ptd.storage.backends.meta import NewArray

__all__ = ["create", "create_many", "CONCURRENCY"]

#: arrays written at a time (threads for local files, tasks for zarr's asynchronous API)
CONCURRENCY = 4


def _layout_key(kwargs: dict[str, Any], shape: tuple[int, ...], dtype: np.dtype) -> str:
    return repr((shape, dtype.str, sorted((k, repr(v)) for k, v in kwargs.items())))


def _raw_writable(md: Any) -> bool:
    """One chunk holding the whole array, stored by the ``bytes`` codec alone."""
    codecs = tuple(md.codecs)
    if len(codecs) != 1 or type(codecs[0]) is not BytesCodec:
        return False
    chunks = tuple(getattr(md.chunk_grid, "chunk_shape", ()) or ())
    return tuple(md.shape) == chunks


def _chunk_bytes(md: Any, data: np.ndarray) -> bytes:
    endian = getattr(md.codecs[0].endian, "value", md.codecs[0].endian)
    dt = data.dtype
    if dt.itemsize > 1 and endian in ("big", "little"):
        dt = dt.newbyteorder(">" if endian == "big" else "<")
    return np.ascontiguousarray(data, dtype=dt).tobytes()


def create(be: Any, specs: Sequence[NewArray]) -> None:
    """``ZarrBackend.create_arrays``: the checks each creation makes, the parent groups, then
    :func:`create_many` (an array replacing a node goes through ``create_array``)."""
    fresh: list[NewArray] = []
    names: dict[tuple[str, ...], set[str]] = {}  # each parent's children, listed once
    for spec in specs:
        be._check_create(spec.path)
        be._check_name(spec.path)
        parent = spec.path[:-1]
        if parent not in names:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                names[parent] = set(be._require_group(parent).keys())
        if spec.path[-1] in names[parent]:
            Backend.create_arrays(be, [spec])
        else:
            fresh.append(spec)
    if not fresh:
        return
    be._changed()

    def kwargs_of(spec: NewArray) -> dict[str, Any]:
        kwargs: dict[str, Any] = be._create_kwargs(spec.shape, spec.options, spec.chunks)
        if spec.attrs:
            kwargs["attributes"] = {
                **kwargs.get("attributes", {}),
                **zarr_codec.jsonable(dict(spec.attrs)),
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
    attributes); ``parent_of(spec)``: its parent group."""
    proto = default_buffer_prototype()
    templates: dict[str, Any] = {}
    raw: list[tuple[Any, NewArray]] = []
    zarr_path: list[tuple[Any, NewArray]] = []
    for spec in specs:
        kwargs = kwargs_of(spec)
        attrs = kwargs.pop("attributes", None) or {}
        key = _layout_key(kwargs, spec.shape, spec.dtype)
        md = templates.get(key)
        if md is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", category=UserWarning)
                arr = parent_of(spec).create_array(
                    spec.path[-1], shape=spec.shape, dtype=spec.dtype, attributes=attrs, **kwargs
                )
            md = arr.metadata
            templates[key] = md
            if spec.data is not None and arr.size:
                arr[...] = spec.data
            continue
        md = dataclasses.replace(md, attributes=dict(attrs))
        raw_ok = isinstance(root.store, LocalStore) and _raw_writable(md)
        (raw if raw_ok else zarr_path).append((md, spec))
    prefix = f"{root.path}/" if root.path else ""
    if raw:
        store_root = str(root.store.root)  # type: ignore[attr-defined]

        def write(item: tuple[Any, NewArray]) -> None:
            md, spec = item
            directory = os.path.join(store_root, *(prefix + "/".join(spec.path)).split("/"))
            os.makedirs(directory, exist_ok=True)
            docs = md.to_buffer_dict(proto)
            for name, buf in docs.items():
                with open(os.path.join(directory, name), "wb") as f:
                    f.write(buf.to_bytes())
            if spec.data is not None and spec.data.size:
                chunk = os.path.join(
                    directory, *md.encode_chunk_key((0,) * len(spec.shape)).split("/")
                )
                os.makedirs(os.path.dirname(chunk), exist_ok=True)
                with open(chunk, "wb") as f:
                    f.write(_chunk_bytes(md, spec.data))

        with ThreadPoolExecutor(CONCURRENCY, thread_name_prefix="ptd-zarr-bulk") as pool:
            for _ in pool.map(write, raw):
                pass
    if zarr_path:
        sync(_write_async(root.store, prefix, zarr_path))


async def _write_async(store: Any, prefix: str, items: list[tuple[Any, NewArray]]) -> None:
    proto = default_buffer_prototype()
    sem = asyncio.Semaphore(CONCURRENCY * 4)

    async def one(md: Any, spec: NewArray) -> None:
        async with sem:
            sp = StorePath(store, prefix + "/".join(spec.path))
            docs = md.to_buffer_dict(proto)
            await asyncio.gather(*((sp / k).set(v) for k, v in docs.items()))
            if spec.data is not None and spec.data.size:
                await AsyncArray(metadata=md, store_path=sp).setitem(Ellipsis, spec.data)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=UserWarning)
        await asyncio.gather(*(one(md, spec) for md, spec in items))
