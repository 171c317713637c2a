"""The copy itself: the destination's structure first (groups, attributes, non-tensor entries,
empty arrays with their chunks and codecs), then the tensor data one *chunk region* at a time
(a slab of rows aligned to the source's and the destination's chunks, see
:mod:`ptd.transfer.slabs`), in this thread, on a thread pool, or as Dask tasks
(:func:`copy_region` is what each task runs).
"""

from __future__ import annotations

import contextlib
import math
import threading
import warnings
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ptd.errors import ConvertError, PtdError, PtdValueError
from ptd.format.names import TD_STACK_ATTR, TD_STR_ATTR
from ptd.format.shapes import fits
from ptd.format.tdmeta import parse_td_meta, td_meta_attrs
from ptd.storage import cancel, remote, runtime, spelled
from ptd.storage.api import ArrayMeta, Backend, NewArray, NodeKind, Path, ValueKind
from ptd.storage.stores import reopen
from ptd.storage.strings import StringType
from ptd.transfer.attrs import decode_str, is_column, user_attrs
from ptd.transfer.layouts import LeafLayout
from ptd.transfer.options import ConvertOptions, ConvertResult
from ptd.transfer.plan import carried_references, leaf_target
from ptd.transfer.slabs import slab_rows

if TYPE_CHECKING:
    from ptd.report.scan import Scan

__all__ = ["Copier", "Region", "copy_region"]

#: ``(path, start row, stop row)``: one chunk region of an array
Region = tuple[Path, int, int]
#: arrays of at most this many bytes are read whole and created in batches (concurrently on
#: zarr), of at most BATCH_BYTES / BATCH_COUNT arrays each
SMALL_BYTES = 64 << 10
BATCH_BYTES = 32 << 20
BATCH_COUNT = 10_000
#: references are read as paths (a python str each): a slab holds at most this many bytes of
#: references (8 each)
REF_SLAB_BYTES = 1 << 20


#: how often (seconds) a thread-pool copy looks for a cancellation while it waits
CANCEL_POLL_S = 0.2


def copy_region(src: Backend, dst: Backend, path: Path, start: int, stop: int) -> int:
    """Copy rows ``start:stop`` of the array at ``path``; returns the bytes copied."""
    sl = (slice(start, stop),)
    block = src.read(path, sl)
    dst.write(path, sl, block)
    return int(block.nbytes)


class Copier:
    """Copies the scanned source into the open destination ``dst`` as ``options`` say,
    reporting ``progress(bytes_done, bytes_total)`` and its notes into ``result``."""

    def __init__(
        self,
        s: Scan,
        dst: Backend,
        options: ConvertOptions,
        result: ConvertResult,
        *,
        progress: Callable[[int, int], None] | None = None,
        skip: dict[Path, str] | None = None,
        record: dict[Path, tuple[int, ...]] | None = None,
        targets: dict[Path, LeafLayout] | None = None,
        links: dict[Path, str] | None = None,
    ) -> None:
        self.s = s
        #: soft links the destination makes instead of copying what they reach: path -> target
        self.links = dict(links or {})
        #: object-reference leaves and attributes, written once every node exists
        self.ref_leaves: list[tuple[Path, ArrayMeta]] = []
        self.ref_attrs: dict[Path, dict[str, Any]] = {}
        #: the batch size to record on each group (``__tensordict__``), else the source's
        self.record = dict(record or {})
        #: nodes left out (with their subtrees): path -> why (see ``plan.refusals``)
        self.skip = dict(skip or {})
        self.src = s.backend
        self.dst = dst
        self.options = options
        self.fmt = result.dst_format
        self.result = result
        self.progress = progress
        self.total = result.nbytes
        self.done = 0
        #: the destination is a URL (the layouts differ: see :mod:`ptd.transfer.layouts`)
        self.dst_remote = remote.is_remote(result.dst)
        #: each tensor leaf's chunks, shards and encoding in the destination (planned)
        self.targets = dict(targets or {})
        self.dst_cls = type(dst)

    def target(self, path: Path, meta: ArrayMeta) -> LeafLayout:
        """The planned destination layout of the leaf at ``path`` (planned now if it was not)."""
        target = self.targets.get(path)
        if target is None:
            props = self.src.array_properties(path, meta)
            target = leaf_target(
                meta, self.options, self.fmt, [], self.dst_remote, props, type(self.src)
            )
            self.targets[path] = target
        return target

    # ------------------------------------------------------------------ structure
    def attrs_for(self, path: Path, attrs: dict[str, Any]) -> dict[str, Any]:
        """``attrs`` as the destination stores them; those it cannot hold unchanged are left
        out and listed in ``result.not_copied`` (once per node and name)."""
        ok: dict[str, Any] = {}
        refs: dict[str, Any] | None = None
        for name, value in attrs.items():
            problem = self.dst.policy.attr_problem(value)
            if problem is None and not self.src.maybe_reference(value):
                ok[name] = value
                continue
            if self.dst.holds_references and self.src.holds_references:
                if refs is None:
                    refs = self.src.reference_attrs(path)
                if name in refs:  # made again once every node exists (copy_references)
                    self.ref_attrs.setdefault(path, {})[name] = refs[name]
                    continue
            if problem is None:  # not a reference after all: a plain value
                ok[name] = value
                continue
            item = {"key": "/".join(path) or "/", "attr": name, "reason": problem}
            if item not in self.result.not_copied:
                self.result.not_copied.append(item)
        return self.dst.policy.attrs_for(ok)

    def group_attrs(self, path: Path) -> dict[str, Any]:
        """The source group's attributes, with the batch size to record (if any) in place of
        a stored one that differs."""
        attrs = spelled.user_attrs(self.src.name, self.s.group_attrs.get(path, {}))
        bs = self.record.get(path)
        if bs is not None:
            meta = parse_td_meta(attrs).meta
            if meta is None or meta.batch_size != bs:
                attrs.update(td_meta_attrs(bs))
        return attrs

    def skipped(self, path: Path) -> bool:
        """Whether ``path`` is, or lies under, a node left out of the copy."""
        gone = self.skip or self.links
        return bool(gone) and any(
            path[:i] in self.skip or path[:i] in self.links for i in range(1, len(path) + 1)
        )

    def create(self) -> list[tuple[Path, int, int]]:
        """Write everything but the tensor data: attributes, groups (all at once), non-tensor
        entries, scalars and the (empty) arrays; small arrays of one chunk are read in batches
        and created with their data (:meth:`create_small`). Returns ``(path, rows per region,
        rows)`` of each array whose data is still to copy, region by region (:meth:`regions`)."""
        root_attrs = self.group_attrs(())
        if root_attrs:
            self.dst.set_attrs((), self.attrs_for((), root_attrs))
        nodes = [(path, kind, meta) for path, kind, meta in self.s.nodes if not self.skipped(path)]
        groups = [
            (path, self.attrs_for(path, self.group_attrs(path)))
            for path, kind, _ in nodes
            if kind is NodeKind.GROUP
        ]
        if groups:
            self.dst.create_groups(groups)
        arrays: list[tuple[Path, int, int]] = []
        small: list[tuple[NewArray, ArrayMeta]] = []
        small_bytes = 0
        for path, kind, meta in nodes:
            if kind is NodeKind.GROUP or meta is None:
                continue
            cancel.check()  # thousands of small nodes take a while to create
            if meta.kind is ValueKind.NON_TENSOR:
                stype = self.src.string_type(meta)
                if stype is not None:
                    self.copy_strings(path, meta, stype)
                else:
                    self.copy_non_tensor(path, meta)
                continue
            if carried_references(meta, self.fmt):
                self.ref_leaves.append((path, meta))
                continue
            nbytes = math.prod(meta.shape) * meta.dtype.itemsize
            spec = self.new_array(path, meta) if nbytes <= SMALL_BYTES else None
            if (
                spec is not None
                and meta.kind is ValueKind.NUMERIC
                and (not spec.shape or spec.chunks is None or spec.chunks[0] >= spec.shape[0])
            ):
                # small arrays of one chunk are read and created together (concurrently on zarr)
                small.append((spec, meta))
                small_bytes += nbytes
                if small_bytes >= BATCH_BYTES or len(small) >= BATCH_COUNT:
                    self.create_small(small)
                    small, small_bytes = [], 0
                continue
            job = self.create_array(path, meta)
            if job is not None:
                arrays.append(job)
        self.create_small(small)
        # attributes the source could not hand over (unreadable or compound types): named
        for path, names in self.src.attrs_skipped.items():
            if self.skipped(path):
                continue
            for name, reason in names.items():
                if spelled.spelling(self.src.name, name) is not None:
                    continue  # carried as the property it spells (dimension scales...)
                item = {"key": "/".join(path) or "/", "attr": name, "reason": reason}
                if item not in self.result.not_copied:
                    self.result.not_copied.append(item)
        return arrays

    def new_array(self, path: Path, meta: ArrayMeta, data: Any = None) -> NewArray:
        """The destination array of a source leaf: its chunks and codec in the destination."""
        shape = tuple(meta.shape)
        target = self.target(path, meta)
        options: dict[str, Any] = {}
        if shape and target.encoding is not None:
            encoding = target.encoding.encoding
            if 0 in shape:  # no chunk is ever written: the codecs do not matter
                encoding = replace(encoding, pipeline=())
            options = self.dst_cls.creation_options(encoding, meta.dtype)
        if target.shards:
            options["shards"] = target.shards
        return NewArray(
            path,
            shape,
            meta.dtype,
            data=data,
            attrs=self.attrs_for(path, self.user_attrs(meta)),
            chunks=target.chunks,
            options=options,
        )

    def user_attrs(self, meta: ArrayMeta) -> dict[str, Any]:
        """The leaf's attributes without those through which its format states a property
        (carried as that property: HDF5's ``DIMENSION_LABELS``...)."""
        return spelled.user_attrs(self.src.name, meta.attrs)

    def create_small(self, small: list[tuple[NewArray, ArrayMeta]]) -> None:
        """Create small arrays with their data in one :meth:`Backend.create_arrays` call; when
        that fails, one by one (for the error naming the key)."""
        if not small:
            return
        for (spec, _), data in zip(
            small, self.src.read_many([spec.path for spec, _ in small]), strict=True
        ):
            spec.data = data
        try:
            self.dst.create_arrays([spec for spec, _ in small])
        except PtdValueError:
            for spec, meta in small:
                if self.create_array(spec.path, meta) is not None:  # (scalars are copied)
                    self.dst.write(spec.path, (), self.src.read(spec.path, ()))
                    self.advance(math.prod(meta.shape) * meta.dtype.itemsize)
            return
        self.advance(sum(math.prod(m.shape) * m.dtype.itemsize for _, m in small))

    @staticmethod
    def regions(arrays: list[tuple[Path, int, int]]) -> list[Region]:
        """``(path, start, stop)`` row ranges: one slab each, aligned to the chunks."""
        return [
            (path, start, min(n, start + rows))
            for path, rows, n in arrays
            for start in range(0, n, rows)
        ]

    def create_array(self, path: Path, meta: ArrayMeta) -> tuple[Path, int, int] | None:
        """Create the array at ``path`` like the source's, with the destination's chunks and
        codec; a scalar is copied at once. Returns ``(path, rows per region, rows)`` when
        there is data left to copy."""
        key = "/".join(path)
        spec = self.new_array(path, meta)
        shape, chunks = spec.shape, spec.chunks
        try:
            self.dst.create_array(
                path,
                shape=shape,
                dtype=meta.dtype,
                attrs=spec.attrs,
                chunks=chunks,
                options=spec.options,
            )
        except PtdValueError as err:
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
            self.advance(nbytes)
            return None
        rows = slab_rows(
            shape,
            meta.dtype.itemsize,
            src_chunk_rows=meta.chunks[0] if meta.chunks else None,
            dst_chunk_rows=((spec.options or {}).get("shards") or chunks or (None,))[0],
        )
        return path, rows, shape[0]

    def copy_strings(self, path: Path, meta: ArrayMeta, stype: StringType) -> None:
        """Copy a string array as one of the same kind and shape (its values as they are);
        it is marked a stack of strings (``__tensordict_stack__``) when the source's is, or
        when it is a column whose rows are its group's batch (tensordict then reads it as a
        NonTensorStack)."""
        attrs = self.attrs_for(path, user_attrs(spelled.user_attrs(self.src.name, meta.attrs)))
        stacked = meta.stack_shape is not None
        if not stacked and is_column(meta, self.src.policy):
            batch = self.s.batches[path[:-1]].batch
            stacked = bool(len(batch)) and fits(meta.shape, batch)
        if stacked:
            attrs[TD_STACK_ATTR] = list(meta.shape)
        chunks = meta.chunks if meta.chunks and 0 not in meta.shape else None
        names = None
        if self.dst.holds_dimension_names:
            with contextlib.suppress(PtdError):
                names = self.src.array_properties(path, meta).dimension_names
        self.dst.create_strings(
            path,
            stype,
            self.src.read_strings(path),
            attrs=attrs,
            chunks=chunks,
            dimension_names=names,
        )

    def copy_non_tensor(self, path: Path, meta: ArrayMeta) -> None:
        key = "/".join(path)
        allow_pickle = self.options.allow_pickle
        with warnings.catch_warnings():
            # h5 strings written by tensordict read as bytes with a FutureWarning: we decode them
            warnings.simplefilter("ignore", FutureWarning)
            if meta.stack_shape is not None:
                payload = self.src.read_non_tensor(path, allow_pickle=allow_pickle)
                value = payload.value
                if meta.non_tensor_kind == "str":
                    value = decode_str(value)
                stack = tuple(payload.stack_shape) if payload.is_stack else tuple(meta.stack_shape)
                self.dst.write_non_tensor(path, value, stack_shape=stack)
            elif is_column(meta, self.src.policy):
                payload = self.src.read_non_tensor(path, allow_pickle=allow_pickle, as_stack=True)
                value = payload.value
                if meta.non_tensor_kind == "str":
                    value = decode_str(value)
                batch = self.s.batches[path[:-1]].batch
                if (len(batch) and fits(meta.shape, batch)) or (
                    self.dst.policy.bytes_list_as_stack and meta.non_tensor_kind == "bytes"
                ):
                    # (a format may hold a list of bytes only as a stack: a bytes array of its shape)
                    self.dst.write_non_tensor(path, value, stack_shape=tuple(meta.shape))
                else:
                    self.dst.write_non_tensor(path, value, stack_shape=None)
                    note = (
                        f"string column {key!r} {list(meta.shape)} does not fit its group's "
                        "batch size: kept as one value (a list)"
                    )
                    self.result.notes.append(note)
            else:
                payload = self.src.read_non_tensor(path, allow_pickle=allow_pickle)
                value = payload.value
                if meta.non_tensor_kind == "str" or meta.attrs.get(TD_STR_ATTR):
                    value = decode_str(value)
                self.dst.write_non_tensor(path, value, stack_shape=None)
        user = user_attrs(dict(meta.attrs))
        if user:
            self.dst.set_attrs(path, self.attrs_for(path, user))

    def copy_references(self) -> None:
        """What names other nodes, made once every node exists: the soft links, and the
        object references (arrays, read a slab at a time, and attributes) re-made to the
        objects at the same paths in the destination."""
        for path, target in self.links.items():
            self.dst.create_soft_link(path, target)
        for path, meta in self.ref_leaves:
            shape = tuple(meta.shape)
            self.dst.create_reference_array(
                path,
                shape,
                chunks=tuple(meta.chunks) if meta.chunks else None,
                maxshape=self.src.array_properties(path, meta).maxshape,
                attrs=self.attrs_for(path, self.user_attrs(meta)),
            )
            if not shape:
                paths = self.src.read_reference_paths(path, ())
                self._dangling(path, None, self.dst.write_reference_paths(path, (), paths))
                continue
            rows = slab_rows(
                shape,
                8,
                src_chunk_rows=meta.chunks[0] if meta.chunks else None,
                budget=REF_SLAB_BYTES,
            )
            for start in range(0, shape[0], rows):
                sl = (slice(start, min(shape[0], start + rows)),)
                paths = self.src.read_reference_paths(path, sl)
                self._dangling(path, None, self.dst.write_reference_paths(path, sl, paths))
                cancel.check()
        for path, refs in self.ref_attrs.items():
            for name, value in refs.items():
                self._dangling(path, name, self.dst.set_reference_attrs(path, {name: value}))
        if self.ref_attrs and self.dst.references_as_paths:
            named = [
                f"{'/'.join(p) or '/'}: {n}" for p, refs in self.ref_attrs.items() for n in refs
            ]
            shown = ", ".join(repr(k) for k in named[:6]) + (", ..." if len(named) > 6 else "")
            note = (
                f"in the {self.fmt} copy, {len(named)} object-reference attribute"
                f"{'s' if len(named) > 1 else ''} ({shown}) are stored as the paths they name "
                "(hdmf-zarr's spelling: zarr tools see JSON, not references)"
            )
            self.result.notes.append(note)

    def _dangling(self, path: Path, attr: str | None, missing: list[str]) -> None:
        """List (once per key or attribute) references whose object the copy does not hold:
        they were written as null references."""
        if not missing:
            return
        key = "/".join(path) or "/"
        if any(i["key"] == key and i.get("attr") == attr for i in self.result.not_copied):
            return
        shown = ", ".join(missing[:3]) + (", ..." if len(missing) > 3 else "")
        item = {"key": key}
        if attr is not None:
            item["attr"] = attr
        item["reason"] = (
            f"object references to {shown}, which the copy does not hold: written as null "
            "references"
        )
        self.result.not_copied.append(item)

    # ------------------------------------------------------------------ data
    def advance(self, n: int) -> None:
        """Count ``n`` more bytes copied and report the progress."""
        self.done += n
        if self.progress is not None:
            self.progress(self.done, self.total)

    def run(self, workers: int = 1) -> None:
        """Create the structure, copy every region (on ``workers`` threads) and finalize."""
        cancel.phase("copying", f"{self.total} bytes")
        regions = self.regions(self.create())
        self.result.regions = len(regions)
        if workers <= 1 or len(regions) <= 1:
            for path, start, stop in regions:
                self.advance(copy_region(self.src, self.dst, path, start, stop))
        else:
            self._run_threads(regions, workers)
        cancel.check()
        self.copy_references()
        cancel.check()
        cancel.phase("publishing")
        self.dst.finalize()
        cancel.check()

    def _settle(self, pending: set[Future[int]]) -> set[Future[int]]:
        """Wait a moment for some of ``pending``; count the finished; stop on cancellation."""
        done, left = wait(pending, timeout=CANCEL_POLL_S, return_when=FIRST_COMPLETED)
        for f in done:
            self.advance(f.result())
        cancel.check()
        return left

    def _run_threads(self, regions: list[Region], workers: int) -> None:
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
                be = reopen(spec.streaming(), "r")
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

        pending: set[Future[int]] = set()
        try:
            with runtime.job_pool(workers, "convert") as pool:
                try:
                    for region in regions:
                        while len(pending) >= workers:
                            pending = self._settle(pending)
                        pending.add(pool.submit(task, *region))
                    while pending:
                        pending = self._settle(pending)
                finally:
                    for f in pending:
                        f.cancel()
        finally:
            for be in opened:
                with contextlib.suppress(Exception):  # read-only handles
                    be.close()
