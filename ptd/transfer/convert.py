"""``ptd.convert(src, dst)``: HDF5 to Zarr v3, Zarr to HDF5, or a re-chunk within one format.

The copy is streamed: each tensor leaf is read and written a slab of rows at a time (about
16 MB, aligned to the chunks), so memory stays bounded whatever the store's size (by the slab,
or by one source chunk when the source has larger ones: a zarr array stored as a single chunk,
tensordict's default, is decoded whole once).
Everything is kept: every leaf's dtype (bfloat16/float8 bits and their ``__ptd_dtype__`` marker
too), every group's ``__tensordict__`` batch-size attribute, non-tensor entries, string columns
and user attributes.

The destination is written to a temporary sibling (``.ptd-tmp-*``) and renamed into place only
when the copy succeeded, so ``dst`` is never half-written: a failure or an interrupt leaves
nothing behind, and an existing ``dst`` is refused unless ``overwrite=True`` (then it is
replaced only after the new one is complete). A URL destination (``s3://bucket/x.zarr``: zarr
only) cannot be renamed into place: it is written directly and removed again on failure.

``workers=N`` copies N chunk regions at a time on a thread pool (each thread reads through its
own source handle; memory stays about N slabs); ``scheduler=`` runs one task per chunk region
on a Dask cluster (:mod:`ptd.distributed`). Both give the store a plain conversion gives.

>>> import os, tempfile, torch
>>> import ptd
>>> with tempfile.TemporaryDirectory() as d:
...     src = os.path.join(d, "x.h5")
...     ptd.PersistentTensorDict.from_dict({"obs": torch.ones(4, 3)}, src).close()
...     result = ptd.convert(src)                      # -> x.zarr
...     print(os.path.basename(result.dst), result.dst_format, result.tensors, result.nbytes)
x.zarr zarr 1 48

Conversion notes
----------------
* Chunks: ``chunks=ROWS`` chunks every tensor by ``ROWS`` rows along its first dim. Otherwise a
  chunked source keeps its chunk shape, except chunks over 64 MB; a contiguous (h5) source, or
  such large chunks, get chunks of about 8 MB when the destination is zarr (or compressed),
  and stay contiguous on h5.
* Compression: ``compression=None`` keeps each leaf's codec when the destination has it (gzip
  on h5; gzip, zstd, blosc, lz4 on zarr), else stores it uncompressed. zstd, blosc and lz4 on
  h5 need the HDF5 filter plugins (``HDF5_PLUGIN_PATH``).
* String columns that are not marked as a stack (a plain h5py/zarr string array) become marked
  stacks (``__tensordict_stack__``) when their leading dims are their group's batch size, so
  they read as a ``NonTensorStack`` of their rows; others are kept as one value (a list).
  Strings that h5 hands back as bytes are decoded, so a str stays a str.
* Pickled zarr entries are decoded and re-encoded only with ``allow_pickle=True``.
"""

from __future__ import annotations

import math
import os
import re
import secrets
import shutil
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ptd.core.batch import fits
from ptd.errors import (
    ConvertError,
    PtdError,
    PtdValueError,
    ReadOnlyError,
    StoreExistsError,
    StoreNotFoundError,
)
from ptd.format.names import (
    PTD_JSON_ATTR,
    RESERVED_ATTRS,
    TD_NON_TENSOR_ATTR,
    TD_STR_ATTR,
)
from ptd.report.info import jsonable
from ptd.report.scan import Scan, fspath, open_backend, path_nbytes, scan
from ptd.storage.backends import BACKENDS, get_backend
from ptd.storage.backends.base import ArrayMeta, Backend, NodeKind, Path, ValueKind
from ptd.storage.limits import check_free_space
from ptd.storage.remote import check_bucket, filesystem, is_remote, normalize, probe

__all__ = [
    "convert",
    "ConvertResult",
    "LeafPlan",
    "ConvertError",
    "COMPRESSIONS",
    "default_destination",
    "resolve_destination",
    "format_of_suffix",
]

#: the ``compression=`` names
COMPRESSIONS = ("none", "gzip", "zstd", "blosc", "lz4")
_DEFAULT_LEVEL = {"gzip": 4, "zstd": 3, "blosc": 5, "lz4": 5}
_LEVELS = {"gzip": (0, 9), "zstd": (0, 22), "blosc": (0, 9), "lz4": (0, 9)}
#: registered HDF5 filter ids of the plugin codecs
_H5_FILTER = {"zstd": 32015, "blosc": 32001, "lz4": 32004}
_H5_FILTER_NAMES = {f"filter{v}": k for k, v in _H5_FILTER.items()}
#: bytes of a leaf read and written at a time (a slab of rows, aligned to the chunks); with
#: zarr's per-chunk buffers a copy holds about twice this, on top of what torch etc. take
SLAB_BYTES = 16 << 20
#: target size of an automatic chunk, and the largest source chunk that is kept as is
CHUNK_TARGET = 8 << 20
CHUNK_MAX = 64 << 20

_SUFFIXES = {
    ".h5": "h5",
    ".hdf5": "h5",
    ".hdf": "h5",
    ".he5": "h5",
    ".zarr": "zarr",
    ".zip": "zarr",
}
_DEFAULT_SUFFIX = {"h5": ".h5", "zarr": ".zarr"}
_TMP_TAG = ".ptd-tmp-"


@dataclass
class LeafPlan:
    """What happens to one entry."""

    key: str
    kind: str  #: "group", "tensor", "non_tensor" or "unsupported"
    shape: list[int] | None = None
    dtype: str | None = None
    nbytes: int = 0
    src_chunks: list[int] | None = None
    dst_chunks: list[int] | None = None
    src_compression: str | None = None
    dst_compression: str | None = None


@dataclass
class ConvertResult:
    src: str
    dst: str
    src_format: str
    dst_format: str
    groups: int = 0
    tensors: int = 0
    non_tensors: int = 0
    #: logical bytes of every tensor copied
    nbytes: int = 0
    #: what the source and the destination occupy on disk (dst: None for a dry run)
    src_bytes: int | None = None
    dst_bytes: int | None = None
    #: bytes the destination's tensors occupy (None for a dry run, or when unknown)
    stored_nbytes: int | None = None
    seconds: float = 0.0
    dry_run: bool = False
    overwritten: bool = False
    #: threads that copied chunk regions (``workers=``); 0 for a distributed conversion
    workers: int = 1
    #: the Dask scheduler's address for a distributed conversion, else None
    scheduler: str | None = None
    #: chunk regions copied (one task each when distributed)
    regions: int = 0
    plan: list[LeafPlan] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def leaves(self) -> int:
        return self.tensors + self.non_tensors

    @property
    def ratio(self) -> float | None:
        """Logical tensor bytes per stored tensor byte in the destination (compression)."""
        if not self.stored_nbytes:
            return None
        return self.nbytes / self.stored_nbytes

    @property
    def throughput(self) -> float | None:
        """Logical bytes per second."""
        return self.nbytes / self.seconds if self.seconds > 0 else None

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        d = asdict(self)
        d["leaves"] = self.leaves
        d["ratio"] = self.ratio
        return d


# ----------------------------------------------------------------------------- paths
def format_of_suffix(path: str) -> str | None:
    """``"h5"``/``"zarr"`` from a path's suffix, or None."""
    return _SUFFIXES.get(os.path.splitext(path.rstrip("/\\"))[1].lower())


def default_destination(src: str, to: str) -> str:
    """``src`` with its suffix swapped for ``to``'s (``data.h5`` -> ``data.zarr``)."""
    src = src.rstrip("/\\") or src
    root, ext = os.path.splitext(src)
    if ext.lower() not in _SUFFIXES:
        root = src
    return root + _DEFAULT_SUFFIX[to]


def resolve_destination(
    src: Any,
    dst: Any = None,
    to: str | None = None,
    *,
    storage_options: dict[str, Any] | None = None,
) -> tuple[str, str]:
    """``(dst path, dst format)`` as :func:`convert` chooses them (reads ``src``'s format;
    a URL ``src`` with ``storage_options``)."""
    from ptd.storage.backends import detect_backend

    src_p = normalize(fspath(src))
    if to is None:
        to = (format_of_suffix(fspath(dst)) if dst is not None else None) or (
            "zarr" if detect_backend(src_p, storage_options) == "h5" else "h5"
        )
    if to not in BACKENDS:
        raise PtdValueError(f"unknown format {to!r}; choose one of {', '.join(BACKENDS)}")
    dst_p = normalize(fspath(dst)) if dst is not None else default_destination(src_p, to)
    return dst_p.rstrip("/\\") or dst_p, to


def _tmp_sibling(dst: str) -> str:
    parent, name = os.path.split(dst)
    return os.path.join(parent, f"{_TMP_TAG}{os.getpid()}-{secrets.token_hex(4)}.{name}")


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _install(tmp: str, dst: str) -> None:
    """Move the finished ``tmp`` to ``dst``, replacing what is there only now."""
    if not os.path.lexists(dst):
        os.rename(tmp, dst)
        return
    if os.path.isfile(dst) and os.path.isfile(tmp):
        os.replace(tmp, dst)  # atomic
        return
    old = _tmp_sibling(dst) + ".old"
    os.rename(dst, old)
    try:
        os.rename(tmp, dst)
    except BaseException:
        os.rename(old, dst)
        raise
    _remove(old)


# ----------------------------------------------------------------------------- codecs
def _check_compression(compression: str | None, level: int | None) -> tuple[str | None, int | None]:
    if compression is None:
        if level is not None:
            raise PtdValueError("a compression level needs a compression (gzip, zstd, blosc, lz4)")
        return None, None
    name = str(compression).lower()
    if name not in COMPRESSIONS:
        raise PtdValueError(
            f"unknown compression {compression!r}; choose one of {', '.join(COMPRESSIONS)}"
        )
    if name == "none":
        if level is not None:
            raise PtdValueError("--level does not apply to compression 'none'")
        return name, None
    lo, hi = _LEVELS[name]
    if level is None:
        level = _DEFAULT_LEVEL[name]
    elif not lo <= int(level) <= hi:
        raise PtdValueError(f"{name} level must be between {lo} and {hi}, got {level}")
    return name, int(level)


_CODEC_RE = re.compile(r"^(?P<name>[a-z0-9_]+)(?:\((?P<args>[^)]*)\))?$")


def _parse_codec(desc: str | None) -> tuple[str, int | None] | None:
    """A backend's compression description (``"shuffle+gzip(4)"``, ``"blosc(lz4,5)"``,
    ``"zstd(3)"``) as ``(name, level)`` in :data:`COMPRESSIONS` terms, or None."""
    if not desc:
        return None
    for part in desc.split("+"):
        m = _CODEC_RE.match(part.strip().lower())
        if not m:
            continue
        name, args = m["name"], [a.strip() for a in (m["args"] or "").split(",") if a.strip()]
        name = _H5_FILTER_NAMES.get(name, name)
        nums = [int(a) for a in args if a.lstrip("-").isdigit()]
        if name == "blosc":
            if args and args[0] == "lz4":
                return "lz4", nums[-1] if nums else None
            return "blosc", nums[-1] if nums else None
        if name in ("gzip", "zlib", "zstd", "lz4"):
            return ("gzip" if name == "zlib" else name), (nums[0] if nums else None)
    return None


def _codec_options(fmt: str, name: str | None, level: int | None) -> dict[str, Any]:
    """The backend creation options for a codec (``None``/``"none"``: uncompressed)."""
    if name in (None, "none"):
        return {} if fmt == "h5" else {"compressors": None}
    level = _DEFAULT_LEVEL[name] if level is None else level
    if fmt == "h5":
        if name == "gzip":
            return {"compression": "gzip", "compression_opts": level}
        if name == "zstd":
            return {"compression": _H5_FILTER["zstd"], "compression_opts": (level,)}
        if name == "blosc":  # cd_values: reserved x4, clevel, shuffle, compressor (5: zstd)
            return {
                "compression": _H5_FILTER["blosc"],
                "compression_opts": (0, 0, 0, 0, level, 1, 5),
            }
        return {"compression": _H5_FILTER["lz4"], "compression_opts": (0,)}
    if name == "gzip":
        codec: dict[str, Any] = {"name": "gzip", "configuration": {"level": level}}
    elif name == "zstd":
        codec = {"name": "zstd", "configuration": {"level": level, "checksum": False}}
    else:
        cname = "lz4" if name == "lz4" else "zstd"
        codec = {
            "name": "blosc",
            "configuration": {"cname": cname, "clevel": level, "shuffle": "shuffle"},
        }
    return {"compressors": [codec]}


def _describe(name: str | None, level: int | None) -> str | None:
    if name in (None, "none"):
        return None
    return f"{name}({level if level is not None else _DEFAULT_LEVEL[name]})"


# ----------------------------------------------------------------------------- chunks
def _dst_chunks(
    meta: ArrayMeta, rows: int | None, dst_fmt: str, compressed: bool
) -> tuple[int, ...] | None:
    shape = tuple(meta.shape)
    if not shape or 0 in shape:
        return None
    row_bytes = max(1, math.prod(shape[1:]) * meta.dtype.itemsize)
    if rows is not None:
        return (max(1, min(int(rows), shape[0])),) + shape[1:]
    src = tuple(meta.chunks) if meta.chunks is not None else None
    if src is not None and math.prod(src) * meta.dtype.itemsize <= CHUNK_MAX:
        return src
    if dst_fmt == "h5" and not compressed and src is None:
        return None  # contiguous, like the source
    n = max(1, CHUNK_TARGET // row_bytes)
    return (min(n, shape[0]),) + shape[1:]


def _slab_rows(shape: tuple[int, ...], itemsize: int, src_c: int | None, dst_c: int | None) -> int:
    """Rows copied at a time: about SLAB_BYTES, a multiple of the destination's chunk rows (each
    destination chunk written once) and never less than a source chunk (each source chunk
    decoded once: a source chunk larger than the slab sets the memory bound)."""
    row = max(1, math.prod(shape[1:]) * itemsize)
    rows = max(1, SLAB_BYTES // row)
    if src_c and dst_c:
        lcm = math.lcm(src_c, dst_c)
        if lcm * row <= max(2 * SLAB_BYTES, src_c * row):
            align = lcm
        else:
            align = src_c if src_c > rows else dst_c
    else:
        align = src_c or dst_c or 1
    rows = max(align, rows // align * align)
    return min(rows, max(1, shape[0]))


# ----------------------------------------------------------------------------- attributes
def _attrs_for(fmt: str, attrs: dict[str, Any]) -> dict[str, Any]:
    """Attribute values the destination format can store (same values, other python types)."""
    if fmt == "zarr":
        return {k: jsonable(v) for k, v in attrs.items()}
    out: dict[str, Any] = {}
    for k, v in attrs.items():
        if isinstance(v, (list, tuple)) and v and _all_str(v):
            # h5py stores a list of str only as an object array (a vlen string attribute)
            v = np.array(v, dtype=object)
        out[k] = v
    return out


def _all_str(v: Any) -> bool:
    if isinstance(v, (list, tuple)):
        return all(_all_str(x) for x in v)
    return isinstance(v, str)


def _user(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in attrs.items() if k not in RESERVED_ATTRS}


# ----------------------------------------------------------------------------- values
def _decode_str(value: Any) -> Any:
    """h5 hands back variable-length strings as bytes: decode them (nested lists too)."""
    if isinstance(value, (bytes, np.bytes_)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return bytes(value)
    if isinstance(value, list):
        return [_decode_str(v) for v in value]
    if isinstance(value, np.ndarray) and value.dtype.kind in "OS":
        return _decode_str(value.tolist())
    return value


def _is_column(meta: ArrayMeta, src_fmt: str) -> bool:
    """An unmarked string (or zarr bytes) array with dims: one string per element."""
    if meta.kind is not ValueKind.NON_TENSOR or meta.stack_shape is not None or not meta.shape:
        return False
    if TD_NON_TENSOR_ATTR in meta.attrs or meta.attrs.get(PTD_JSON_ATTR):
        return False
    return meta.non_tensor_kind == "str" or (meta.non_tensor_kind == "bytes" and src_fmt == "zarr")


# ----------------------------------------------------------------------------- the copy
def copy_region(src: Backend, dst: Backend, path: Path, start: int, stop: int) -> int:
    """Copy rows ``start:stop`` of the array at ``path``; returns the bytes copied."""
    sl = (slice(start, stop),)
    block = src.read(path, sl)
    dst.write(path, sl, block)
    return int(block.nbytes)


class _Copier:
    def __init__(
        self,
        s: Scan,
        dst: Backend,
        dst_fmt: str,
        *,
        rows: int | None,
        compression: str | None,
        level: int | None,
        allow_pickle: bool,
        progress: Callable[[int, int], None] | None,
        total: int,
        result: ConvertResult,
    ):
        self.s = s
        self.src = s.backend
        self.dst = dst
        self.fmt = dst_fmt
        self.rows = rows
        self.compression = compression
        self.level = level
        self.allow_pickle = allow_pickle
        self.progress = progress
        self.total = total
        self.done = 0
        self.result = result

    def codec(self, meta: ArrayMeta) -> tuple[str | None, int | None]:
        if self.compression is not None:
            return self.compression, self.level
        parsed = _parse_codec(meta.compression)
        if parsed is None:
            return None, None
        name, level = parsed
        if self.fmt == "h5" and name != "gzip":
            note = (
                f"{name} has no built-in HDF5 filter: the leaves compressed with it were "
                "written uncompressed (pass compression='gzip' / --compression gzip to "
                "compress them)"
            )
            if note not in self.result.notes:
                self.result.notes.append(note)
            return None, None
        if level is not None:
            lo, hi = _LEVELS[name]
            level = min(max(level, lo), hi)
        return name, level

    def create(self) -> list[tuple[Path, int, int]]:
        """Write everything but the tensor data: attributes, groups, non-tensor entries,
        scalars and the (empty) arrays. Returns ``(path, rows per region, rows)`` of each array
        whose data is still to copy, region by region (:meth:`regions`)."""
        root_attrs = self.s.group_attrs.get((), {})
        if root_attrs:
            self.dst.set_attrs((), _attrs_for(self.fmt, root_attrs))
        arrays: list[tuple[Path, int, int]] = []
        for path, kind, meta in self.s.nodes:
            if kind is NodeKind.GROUP:
                self.dst.create_group(path, _attrs_for(self.fmt, self.s.group_attrs.get(path, {})))
            elif meta is not None and meta.kind is ValueKind.NON_TENSOR:
                self.copy_non_tensor(path, meta)
            elif meta is not None:
                job = self.create_array(path, meta)
                if job is not None:
                    arrays.append(job)
        return arrays

    @staticmethod
    def regions(arrays: list[tuple[Path, int, int]]) -> list[tuple[Path, int, int]]:
        """``(path, start, stop)`` row ranges: one slab each, aligned to the chunks."""
        return [
            (path, start, min(n, start + rows))
            for path, rows, n in arrays
            for start in range(0, n, rows)
        ]

    def run(self, workers: int = 1) -> None:
        regions = self.regions(self.create())
        self.result.regions = len(regions)
        if workers <= 1 or len(regions) <= 1:
            for path, start, stop in regions:
                self._advance(copy_region(self.src, self.dst, path, start, stop))
        else:
            self._run_threads(regions, workers)
        self.dst.finalize()

    def _run_threads(self, regions: list[tuple[Path, int, int]], workers: int) -> None:
        """Copy the regions on ``workers`` threads, at most ``workers`` regions in flight (so at
        most ``workers`` slabs in memory). Each thread reads through its own source handle
        (the backends' read caches are not shared between threads)."""
        local = threading.local()
        opened: list[Backend] = []
        lock = threading.Lock()
        spec = self.src.reopen_spec

        def reader() -> Backend:
            be = getattr(local, "be", None)
            if be is None:
                if spec is None:
                    return self.src  # reads are serialised below
                be = spec.streaming().open("r")
                with lock:
                    opened.append(be)
                local.be = be
            return be

        def task(path: Path, start: int, stop: int) -> int:
            src = reader()
            if src is self.src:
                with lock:
                    block = src.read(path, (slice(start, stop),))
                self.dst.write(path, (slice(start, stop),), block)
                return int(block.nbytes)
            return copy_region(src, self.dst, path, start, stop)

        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ptd-convert")
        pending: set[Future[int]] = set()
        try:
            for region in regions:
                if len(pending) >= workers:
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for f in done:
                        self._advance(f.result())
                pending.add(pool.submit(task, *region))
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in done:
                    self._advance(f.result())
        finally:
            for f in pending:
                f.cancel()
            pool.shutdown(wait=True, cancel_futures=True)
            for be in opened:
                try:
                    be.close()
                except Exception:  # noqa: BLE001 - read-only handles
                    pass

    def create_array(self, path: Path, meta: ArrayMeta) -> tuple[Path, int, int] | None:
        """Create the array at ``path`` like the source's, with the destination's chunks and
        codec; a scalar is copied at once. Returns ``(path, rows per region, rows)`` when
        there is data left to copy."""
        key = "/".join(path)
        shape = tuple(meta.shape)
        name, level = self.codec(meta)
        compressed = name not in (None, "none")
        chunks = _dst_chunks(meta, self.rows, self.fmt, compressed)
        options = _codec_options(self.fmt, name, level) if shape and 0 not in shape else {}
        try:
            self.dst.create_array(
                path,
                shape=shape,
                dtype=meta.dtype,
                attrs=_attrs_for(self.fmt, dict(meta.attrs)),
                chunks=chunks,
                options=options,
            )
        except PtdValueError as err:
            if self.fmt == "h5" and name in _H5_FILTER:
                raise ConvertError(
                    f"cannot write key {key!r} with {name} compression to HDF5: the {name} filter "
                    "plugin is not available (install it and set HDF5_PLUGIN_PATH), or use "
                    "--compression gzip"
                ) from None
            if meta.kind is ValueKind.UNSUPPORTED:
                raise ConvertError(
                    f"cannot convert key {key!r} of {self.src.location}: its dtype {meta.dtype} "
                    f"has no torch equivalent and the {self.fmt} destination cannot store it ({err})"
                ) from None
            raise
        nbytes = math.prod(shape) * meta.dtype.itemsize
        if nbytes == 0:
            return None
        if not shape:
            self.dst.write(path, (), self.src.read(path, ()))
            self._advance(nbytes)
            return None
        src_c = meta.chunks[0] if meta.chunks else None
        dst_c = chunks[0] if chunks else None
        return path, _slab_rows(shape, meta.dtype.itemsize, src_c, dst_c), shape[0]

    def _advance(self, n: int) -> None:
        self.done += n
        if self.progress is not None:
            self.progress(self.done, self.total)

    def copy_non_tensor(self, path: Path, meta: ArrayMeta) -> None:
        key = "/".join(path)
        with warnings.catch_warnings():
            # h5 strings written by tensordict read as bytes with a FutureWarning: we decode them
            warnings.simplefilter("ignore", FutureWarning)
            if meta.stack_shape is not None:
                payload = self.src.read_non_tensor(path, allow_pickle=self.allow_pickle)
                value = payload.value
                if meta.non_tensor_kind == "str":
                    value = _decode_str(value)
                stack = tuple(payload.stack_shape) if payload.is_stack else tuple(meta.stack_shape)
                self.dst.write_non_tensor(path, value, stack_shape=stack)
            elif _is_column(meta, self.s.format):
                payload = self.src.read_non_tensor(
                    path, allow_pickle=self.allow_pickle, as_stack=True
                )
                value = payload.value
                if meta.non_tensor_kind == "str":
                    value = _decode_str(value)
                batch = self.s.batches[path[:-1]].batch
                if len(batch) and fits(meta.shape, batch):
                    self.dst.write_non_tensor(path, value, stack_shape=tuple(meta.shape))
                else:
                    self.dst.write_non_tensor(path, value, stack_shape=None)
                    note = (
                        f"string column {key!r} {list(meta.shape)} does not fit its group's "
                        "batch size: kept as one value (a list)"
                    )
                    self.result.notes.append(note)
            else:
                payload = self.src.read_non_tensor(path, allow_pickle=self.allow_pickle)
                value = payload.value
                if meta.non_tensor_kind == "str" or meta.attrs.get(TD_STR_ATTR):
                    value = _decode_str(value)
                self.dst.write_non_tensor(path, value, stack_shape=None)
        user = _user(dict(meta.attrs))
        if user:
            self.dst.set_attrs(path, _attrs_for(self.fmt, user))


# ----------------------------------------------------------------------------- entry point
@dataclass
class _Target:
    """Where the copy is written: a local temporary sibling (renamed into place at the end)
    or, for a URL, the destination itself (removed again if the copy fails)."""

    dst: str
    path: str
    remote: bool
    storage_options: dict[str, Any] | None

    def open(self, fmt: str, mode: str) -> Backend:
        if self.remote:
            return get_backend(fmt).open(self.path, mode, storage_options=self.storage_options)
        return get_backend(fmt).open(self.path, mode)

    def discard(self) -> None:
        if not self.remote:
            _remove(self.path)
            return
        try:
            fs, root = filesystem(self.path, self.storage_options)
            fs.rm(root, recursive=True)
        except Exception:  # noqa: BLE001 - best effort: the original error matters
            pass


@dataclass
class _Job:
    """A planned conversion, its source open (see :func:`_planned`)."""

    scan: Scan
    result: ConvertResult
    target: _Target
    copier_args: dict[str, Any]
    t0: float

    def copier(self, dst: Backend, progress: Callable[[int, int], None] | None) -> _Copier:
        return _Copier(
            self.scan,
            dst,
            self.result.dst_format,
            progress=progress,
            total=self.result.nbytes,
            result=self.result,
            **self.copier_args,
        )


def _check_args(chunks: Any, compression: Any, level: Any, to: Any) -> tuple[Any, Any]:
    if chunks is not None and (isinstance(chunks, bool) or int(chunks) < 1):
        raise PtdValueError(f"chunks must be a positive number of rows, got {chunks!r}")
    comp, lvl = _check_compression(compression, level)
    if to is not None and to not in BACKENDS:
        raise PtdValueError(f"unknown format {to!r}; choose one of {', '.join(BACKENDS)}")
    return comp, lvl


@contextmanager
def _planned(
    src: Any,
    dst: Any,
    *,
    to: str | None,
    chunks: int | None,
    compression: str | None,
    level: int | None,
    overwrite: bool,
    dry_run: bool,
    allow_pickle: bool,
    storage_options: dict[str, Any] | None,
    dst_storage_options: dict[str, Any] | None,
) -> Iterator[_Job]:
    """Open ``src``, check the destination and plan the copy (shared by the local and the
    distributed conversion); the source stays open while the context is."""
    t0 = time.perf_counter()
    src_p = normalize(fspath(src))
    if not is_remote(src_p) and not os.path.exists(src_p):
        raise StoreNotFoundError(f"{src_p} does not exist")
    comp, lvl = _check_args(chunks, compression, level, to)
    dst_so = storage_options if dst_storage_options is None else dst_storage_options

    with open_backend(src_p, storage_options=storage_options) as be:
        src_fmt = be.name
        if to is None:
            to = (format_of_suffix(fspath(dst)) if dst is not None else None) or (
                "zarr" if src_fmt == "h5" else "h5"
            )
        dst_p, to = resolve_destination(src_p, dst, to, storage_options=storage_options)
        remote = is_remote(dst_p)
        if remote:
            exists = _check_remote_destination(dst_p, src_p, to, dst_so)
        else:
            exists = os.path.lexists(dst_p)
        if exists and not overwrite:
            raise StoreExistsError(
                f"{dst_p} already exists; pass overwrite=True (ptd convert --overwrite) to replace it"
            )
        if not remote:
            parent = os.path.dirname(os.path.abspath(dst_p))
            if not os.path.isdir(parent):
                raise StoreNotFoundError(
                    f"cannot write {dst_p}: the directory {parent} does not exist"
                )
            if not dry_run and not os.access(parent, os.W_OK | os.X_OK):
                raise ReadOnlyError(
                    f"cannot write {dst_p}: permission denied on the directory {parent}"
                )
        s = scan(be, src_fmt)
        result = ConvertResult(
            src=src_p,
            dst=dst_p,
            src_format=src_fmt,
            dst_format=to,
            dry_run=dry_run,
            overwritten=exists,
            src_bytes=path_nbytes(src_p, storage_options),
        )
        args = dict(rows=chunks, compression=comp, level=lvl, allow_pickle=allow_pickle)
        planner = _Copier(s, be, to, progress=None, total=0, result=result, **args)
        total = 0
        for path, kind, meta in s.nodes:
            key = "/".join(path)
            if kind is NodeKind.GROUP:
                result.groups += 1
                result.plan.append(LeafPlan(key, "group"))
                continue
            assert meta is not None
            if meta.kind is ValueKind.NON_TENSOR:
                result.non_tensors += 1
                result.plan.append(LeafPlan(key, "non_tensor", shape=list(meta.shape)))
                continue
            nbytes = math.prod(meta.shape) * meta.dtype.itemsize
            name, lv = planner.codec(meta)
            dchunks = _dst_chunks(meta, chunks, to, name not in (None, "none"))
            result.plan.append(
                LeafPlan(
                    key,
                    "tensor" if meta.kind is ValueKind.NUMERIC else "unsupported",
                    shape=list(meta.shape),
                    dtype=meta.torch_dtype or str(meta.dtype),
                    nbytes=nbytes,
                    src_chunks=list(meta.chunks) if meta.chunks else None,
                    dst_chunks=list(dchunks) if dchunks else None,
                    src_compression=meta.compression,
                    dst_compression=_describe(name, lv),
                )
            )
            result.tensors += 1
            total += nbytes
        result.nbytes = total
        if not remote and not dry_run:  # uncompressed leaves need their bytes: refuse now
            raw = sum(lp.nbytes for lp in result.plan if lp.kind != "group" and lp.dst_compression is None)
            check_free_space(os.path.dirname(os.path.abspath(dst_p)), raw, dst_p)
        target = _Target(dst_p, dst_p if remote else _tmp_sibling(dst_p), remote, dst_so)
        yield _Job(s, result, target, args, t0)


def _check_remote_destination(
    dst: str, src: str, to: str, storage_options: dict[str, Any] | None
) -> bool:
    """A URL destination: zarr only, not the source itself, its bucket present. Returns
    whether something is there already."""
    if to != "zarr":
        raise PtdValueError(
            f"cannot write {dst}: HDF5 destinations must be local paths (h5py writes local "
            "files); convert to zarr (--to zarr), or write the HDF5 file locally and upload it"
        )
    if dst.rstrip("/") == src.rstrip("/"):
        raise PtdValueError(f"cannot convert {src} onto itself: choose another destination")
    fs, path, kind = probe(dst, storage_options)
    if kind is None:
        check_bucket(fs, path, dst)
    return kind is not None


def _finish(job: _Job, tmp_installed: bool = False) -> ConvertResult:
    """Move a local destination into place (the source is closed by now) and fill in the
    sizes."""
    result, target = job.result, job.target
    if not target.remote and not tmp_installed:
        try:
            _install(target.path, target.dst)
        except BaseException as err:
            _remove(target.path)
            if isinstance(err, OSError):
                raise ConvertError(
                    f"cannot move the converted store into place at {target.dst}: {err}"
                ) from err
            raise
    result.seconds = time.perf_counter() - job.t0
    result.dst_bytes = path_nbytes(target.dst, target.storage_options)
    try:
        from ptd.report.info import info

        result.stored_nbytes = info(
            target.dst, depth=0, storage_options=target.storage_options if target.remote else None
        ).totals.stored_nbytes
    except PtdError:  # pragma: no cover - the store we just wrote is readable
        pass
    return result


def _failed(err: BaseException, target: _Target, out: Backend | None) -> BaseException:
    """Clean up after a failed copy; the error to raise."""
    if out is not None:
        try:
            out.close()
        except BaseException:  # noqa: BLE001 - the original error matters
            pass
    target.discard()
    if isinstance(err, OSError) and not isinstance(err, PtdError):
        return ConvertError(f"cannot write {target.dst}: {err}")
    return err


def convert(
    src: Any,
    dst: Any = None,
    *,
    to: str | None = None,
    chunks: int | None = None,
    compression: str | None = None,
    level: int | None = None,
    overwrite: bool = False,
    dry_run: bool = False,
    allow_pickle: bool = False,
    progress: Callable[[int, int], None] | None = None,
    workers: int = 1,
    scheduler: Any = None,
    storage_options: dict[str, Any] | None = None,
    dst_storage_options: dict[str, Any] | None = None,
) -> ConvertResult:
    """Copy the store ``src`` to ``dst`` in format ``to`` (see the module doc).

    Args:
        src: an HDF5 file or a Zarr v3 store (the format is read from its content); a path or
            a URL (``s3://bucket/data.zarr``, ``s3://bucket/data.h5``, ``gs://``, ``memory://``,
            ``file://``).
        dst: the destination; default ``src`` with its suffix swapped (``x.h5`` -> ``x.zarr``).
            A URL destination must be zarr; it is written in place (removed again if the copy
            fails) since object stores cannot rename.
        to: ``"h5"`` or ``"zarr"``; default: from ``dst``'s suffix, else the other format.
        chunks: rows per chunk along the first dim of every tensor.
        compression: ``"none"``, ``"gzip"``, ``"zstd"``, ``"blosc"`` or ``"lz4"``; default:
            keep each leaf's codec where the destination has it.
        level: the compression level (gzip/blosc/lz4 0-9, zstd 0-22; 0 is zstd's default).
        overwrite: replace an existing ``dst`` (a local one only once the new one is complete).
        dry_run: plan only: nothing is written.
        allow_pickle: decode (and re-encode) pickled zarr entries; refused otherwise.
        progress: called as ``progress(bytes_done, bytes_total)`` after every slab.
        workers: copy this many chunk regions at a time on a thread pool (memory: about
            ``workers`` slabs of 16 MB, or of one source chunk when those are larger).
        scheduler: a Dask scheduler address (``"tcp://host:8786"``), ``distributed.Client``
            or cluster: run the copy there, one task per chunk region (see
            :func:`ptd.distributed.convert_distributed`; needs ``ptd[distributed]``).
        storage_options: fsspec options for URLs (``endpoint_url``, ``key``, ``secret``,
            ``anon``...); ignored for local paths.
        dst_storage_options: options for a URL ``dst`` when they differ from ``src``'s.

    Raises:
        StoreNotFoundError, CorruptStoreError: ``src`` is missing or unreadable.
        StoreExistsError: ``dst`` exists and ``overwrite`` is False.
        RemoteAccessError: a URL cannot be reached (credentials, endpoint).
        PtdValueError: bad arguments. ConvertError: the copy failed (``dst`` untouched).
    """
    if scheduler is not None:
        from ptd.transfer.distributed import convert_distributed

        return convert_distributed(
            src,
            dst,
            scheduler=scheduler,
            to=to,
            chunks=chunks,
            compression=compression,
            level=level,
            overwrite=overwrite,
            dry_run=dry_run,
            allow_pickle=allow_pickle,
            progress=progress,
            storage_options=storage_options,
            dst_storage_options=dst_storage_options,
        )
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise PtdValueError(f"workers must be a positive number of threads, got {workers!r}")
    with _planned(
        src,
        dst,
        to=to,
        chunks=chunks,
        compression=compression,
        level=level,
        overwrite=overwrite,
        dry_run=dry_run,
        allow_pickle=allow_pickle,
        storage_options=storage_options,
        dst_storage_options=dst_storage_options,
    ) as job:
        result = job.result
        result.workers = workers
        if dry_run:
            result.seconds = time.perf_counter() - job.t0
            return result
        target = job.target
        out: Backend | None = None
        try:
            # a URL destination is written in place: "w" replaces what is there (overwrite)
            out = target.open(result.dst_format, "w" if target.remote else "w-")
            copier = job.copier(out, progress)
            if progress is not None:
                progress(0, result.nbytes)
            copier.run(workers)
            out.close()
            out = None
        except BaseException as err:
            exc = _failed(err, target, out)
            if exc is err:
                raise
            raise exc from err
    # the source is closed: now the destination may replace it (same-format re-chunk in place)
    return _finish(job)
