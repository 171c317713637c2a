"""What the local and the distributed conversion share around the copy: open and plan
(:func:`planned`), clean up after a failure (:func:`failed`), publish and measure the result
(:func:`finish`).

A local destination is written to a hidden temporary sibling and renamed into place by
:func:`ptd.storage.publish.publish` once the copy succeeded; a URL destination cannot be
renamed, so it is written in place and removed again on failure (:class:`Target`).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from ptd.errors import BatchSizeError, ConvertError, Interrupted, Option, PtdError
from ptd.report.batches import expected_batches
from ptd.report.scan import Scan, scan
from ptd.storage import cancel, publish, remote
from ptd.storage.api import Backend, Path
from ptd.storage.limits import check_free_space
from ptd.storage.location import StoreLocation
from ptd.storage.properties import copy_userblock
from ptd.storage.registry import get_backend, policy
from ptd.storage.stores import detect, open_store, open_stream
from ptd.transfer.codecs import chosen_steps
from ptd.transfer.copy import Copier
from ptd.transfer.layouts import LeafLayout
from ptd.transfer.options import ConvertOptions, ConvertResult
from ptd.transfer.plan import (
    check_destination,
    destination,
    pickle_refusal,
    pickled_keys,
    plan_leaves,
    raw_nbytes,
    refusal_error,
    refusals,
    soft_links,
)

__all__ = ["Job", "Target", "batches_to_record", "failed", "finish", "planned"]


@dataclass(frozen=True)
class Target:
    """Where the copy is written: a local temporary sibling of the destination (published at
    the end) or, for a URL, the destination itself (removed again if the copy fails)."""

    dst: StoreLocation
    #: where the store is written
    work: StoreLocation

    @classmethod
    def for_destination(cls, dst: StoreLocation) -> Target:
        if dst.is_remote:
            return cls(dst, dst)
        return cls(dst, replace(dst, path=publish.temp_sibling(dst.path)))

    @property
    def remote(self) -> bool:
        return self.dst.is_remote

    def open(self, mode: str, **options: Any) -> Backend:
        return open_store(self.work, mode, **options)

    def discard(self) -> tuple[str, ...]:
        """Remove the partial output; returns what is still there after (checked), if any."""
        if not self.remote:
            return publish.remove(self.work.path)
        try:
            fs, root = remote.filesystem(self.work.path, self.work.options)
            fs.rm(root, recursive=True)
            return (self.work.path,) if fs.exists(root) else ()
        except Exception:  # noqa: BLE001 - best effort: the original error matters
            return ()

    def publish(self) -> None:
        """Move a finished local copy into place (a URL was written in place already)."""
        if self.remote:
            return
        try:
            cancel.check()  # the last moment a stop leaves nothing: then the rename commits
            publish.publish(self.work.path, self.dst.path)
        except BaseException as err:
            left = self.discard()
            if isinstance(err, Interrupted):
                err.left_behind = left
            if isinstance(err, OSError):
                raise ConvertError(
                    f"cannot move the converted store into place at {self.dst.path}: {err}"
                ) from err
            raise


@dataclass
class Job:
    """A planned conversion, its source open (see :func:`planned`)."""

    options: ConvertOptions
    scan: Scan
    result: ConvertResult
    target: Target
    t0: float
    #: the batch size to record on each group (``batch_size``/``batch_dims``), else empty
    record: dict[Path, tuple[int, ...]] = field(default_factory=dict)
    #: each tensor leaf's chunks, shards and encoding in the destination (the plan's)
    targets: dict[Path, LeafLayout] = field(default_factory=dict)
    #: the source's HDF5 user block: its size and the file it is read from, when the
    #: destination keeps it (an HDF5 file), else ``(0, None)``
    userblock: tuple[int, str | None] = (0, None)

    def copier(self, dst: Backend, progress: Callable[[int, int], None] | None) -> Copier:
        skip = refusals(self.scan, self.result.dst_format, allow_pickle=self.options.allow_pickle)
        links, lost = soft_links(self.scan, self.result.dst_format, skip)
        return Copier(
            self.scan,
            dst,
            self.options,
            self.result,
            progress=progress,
            skip=skip | lost,
            links=links,
            record=self.record,
            targets=self.targets,
        )

    def open_destination(self) -> Backend:
        """The destination, created empty (with the source's user block reserved)."""
        target = self.target
        # a URL destination is written in place: "w" replaces what is there (overwrite)
        mode = "w" if target.remote else "w-"
        size = self.userblock[0]
        return target.open(mode, userblock_size=size) if size else target.open(mode)

    def copy_userblock(self) -> None:
        """Copy the source's user block into the closed destination file."""
        size, src = self.userblock
        if size and src is not None:
            copy_userblock(src, self.target.work.path, size)


def batches_to_record(s: Scan, opts: ConvertOptions) -> dict[Path, tuple[int, ...]]:
    """Every group's batch size to write for ``batch_size``/``batch_dims`` (empty without);
    raises :class:`BatchSizeError` naming the first entries that do not fit."""
    if opts.batch_size is None and opts.batch_dims is None:
        return {}
    expected, problems = expected_batches(s, opts.batch_size, opts.batch_dims)
    bad = [p for p in problems if p.code in ("batch_mismatch", "group_batch_mismatch")]
    if bad:
        how = (
            Option("batch_size", list(opts.batch_size))
            if opts.batch_size is not None
            else Option("batch_dims", opts.batch_dims)
        )
        more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
        raise BatchSizeError(
            f"cannot record the batch size of {s.location} (",
            how,
            "): " + "; ".join(p.message for p in bad[:3]) + more,
            path=str(s.location),
        )
    return expected


@contextmanager
def planned(opts: ConvertOptions) -> Iterator[Job]:
    """Open the source, check the destination and plan the copy (shared by the local and the
    distributed conversion); the source stays open while the context is."""
    t0 = time.perf_counter()
    cancel.phase("planning", opts.src.path)
    src = detect(opts.src)
    be = open_stream(src, follow_virtual=opts.follow_virtual)
    try:
        dst = destination(opts, src.format)
        exists = check_destination(src, dst, opts)
        assert src.format is not None
        assert dst.format is not None
        s = scan(be, src.format)
        result = ConvertResult(
            src=src.described,  # with the key inside the store, when the path leads into it
            dst=dst.path,
            src_format=src.format,
            dst_format=dst.format,
            dry_run=opts.dry_run,
            overwritten=exists,
            # (a key inside a store: the store's size on disk would say nothing about it)
            src_bytes=None if src.inner else src.nbytes(),
        )
        record = batches_to_record(s, opts)
        check_chosen_codec(opts, dst)
        targets = plan_leaves(s, opts, result)
        userblock = _userblock(be, src, dst, result)
        pickled = {} if opts.allow_pickle else pickled_keys(s)
        if pickled and not opts.skip_unsupported:
            raise pickle_refusal(result, pickled)
        refused = refusals(s, dst.format, allow_pickle=opts.allow_pickle)
        if refused and not opts.skip_unsupported:
            raise refusal_error(result, refused)
        if not dst.is_remote and not opts.dry_run:  # uncompressed leaves need their bytes
            parent = os.path.dirname(os.path.abspath(dst.path))
            check_free_space(parent, raw_nbytes(result), dst.path)
        yield Job(opts, s, result, Target.for_destination(dst), t0, record, targets, userblock)
    finally:
        be.close()


def check_chosen_codec(opts: ConvertOptions, dst: StoreLocation) -> None:
    """Refuse, before anything is written, a ``compression=`` this process cannot write to
    the destination (an HDF5 filter plugin that is not installed)."""
    assert dst.format is not None
    backend = get_backend(dst.format)
    for step in chosen_steps(backend.policy, opts.compression, opts.level):
        if not backend.codec_available(step):
            raise ConvertError(
                f"cannot write {dst.path} with {step.name} compression: the HDF5 {step.name} "
                "filter plugin is not available here (pip install hdf5plugin), or use "
                "--compression gzip"
            )


def _userblock(
    be: Backend, src: StoreLocation, dst: StoreLocation, result: ConvertResult
) -> tuple[int, str | None]:
    """The source's user block to keep: ``(size, source file)``, or ``(0, None)`` (with the
    user block named in ``result.not_copied`` when the destination cannot hold it)."""
    size = be.store_properties().userblock_size
    if not size:
        return 0, None
    assert dst.format is not None
    keeps = policy(dst.format).keeps_userblock
    if keeps and not src.is_remote and not src.inner and not dst.is_remote:
        return size, src.path
    where = "a key inside the file" if src.inner else f"a {dst.format} store"
    result.not_copied.append(
        {
            "key": "/",
            "property": "userblock",
            "reason": f"the {size}-byte HDF5 user block: {where} has none",
        }
    )
    return 0, None


def failed(err: BaseException, target: Target, out: Backend | None) -> BaseException:
    """Clean up after a failed copy; the error to raise."""
    if out is not None:
        with contextlib.suppress(BaseException):  # the original error matters
            out.close()
    left = target.discard()
    if isinstance(err, Interrupted):
        err.left_behind = left
    if isinstance(err, OSError) and not isinstance(err, PtdError):
        return ConvertError(f"cannot write {target.dst.path}: {_named(str(err), target)}")
    if isinstance(err, PtdError):
        return err.retold(lambda text: _named(text, target))
    return err


def _named(msg: str, target: Target) -> str:
    """``msg`` naming the destination, never its hidden temporary sibling (which is gone)."""
    if not target.remote and target.work.path != target.dst.path:
        msg = msg.replace(target.work.path, target.dst.path)
    return msg


def finish(job: Job) -> ConvertResult:
    """Publish a local destination (the source is closed by now: it may be replaced) and fill
    in the sizes."""
    result, target = job.result, job.target
    target.publish()
    result.seconds = time.perf_counter() - job.t0
    result.dst_bytes = target.dst.nbytes()
    with contextlib.suppress(PtdError):  # pragma: no cover - the store we just wrote is readable
        result.stored_nbytes = _stored_nbytes(target.dst, result)
    return result


def _stored_nbytes(dst: StoreLocation, result: ConvertResult) -> int | None:
    """Bytes the tensors of the plan occupy in the written store (without listing it again:
    zarr chunk files' sizes; h5 datasets' storage sizes)."""
    paths = [tuple(lp.key.split("/")) for lp in result.plan if lp.kind == "tensor"]
    if not paths:
        return 0
    be = open_stream(dst)
    try:
        sizes = be.stored_sizes(paths)  # none told: unknown
        return sum(sizes.values()) if sizes else None
    finally:
        be.close()
