"""Distributed conversion on a Dask cluster: ``ptd convert SRC DST --scheduler tcp://HOST:PORT``.

The client plans exactly what :func:`ptd.convert` would: it scans the source, creates the
destination's groups, attributes, non-tensor entries and (empty) arrays with the same chunks
and codecs, then submits **one task per chunk region** (a slab of rows aligned to the source's
and the destination's chunks). Each task runs on a worker, which opens the source and the
destination itself (once per worker process and conversion) and copies its rows; no array data
passes through the client, which only reports progress. When every task is done the client
writes the consolidated metadata once and, for a local destination, renames the finished store
into place. The result is the store a local ``ptd.convert`` writes, byte for byte.

Requirements:

* ``pip install "ptd[distributed]"`` (dask and distributed are imported only here, lazily);
* the destination is zarr (HDF5 files cannot be written by several processes at once);
* the workers see the source and the destination under the same names as the client: a
  shared filesystem (local paths are made absolute) or an object store (``s3://``, with the
  same ``storage_options``, which travel with the tasks).
"""

from __future__ import annotations

import contextlib
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Unpack

from ptd.errors import (
    ConvertError,
    Option,
    PtdError,
    PtdValueError,
    RemoteAccessError,
    UnsupportedOperationError,
)
from ptd.storage import cancel
from ptd.storage.api import Backend, Path
from ptd.storage.location import ReopenSpec
from ptd.storage.registry import format_of_suffix, policy
from ptd.storage.stores import reopen
from ptd.transfer.copy import CANCEL_POLL_S, Region, copy_region
from ptd.transfer.job import failed, finish, planned
from ptd.transfer.options import ConvertArgs, ConvertOptions, ConvertResult

__all__ = ["connect", "convert_distributed", "run_distributed"]

#: how long to wait for a scheduler given by address
CONNECT_TIMEOUT = "10s"

# --- worker side ------------------------------------------------------------------------------
#: (conversion token, "src"/"dst", thread) -> the backend a worker thread opened for it (the
#: backends' read caches are not shared between threads)
_OPEN: dict[tuple[str, str, int], Backend] = {}
_OPEN_LOCK = threading.Lock()


def _backend(token: str, role: str, spec: ReopenSpec) -> Backend:
    key = (token, role, threading.get_ident())
    with _OPEN_LOCK:
        be = _OPEN.get(key)
        if be is None or be.closed:
            be = _OPEN[key] = reopen(spec.streaming())
        return be


def _copy_task(
    token: str,
    src_spec: ReopenSpec,
    dst_spec: ReopenSpec,
    path: Path,
    start: int,
    stop: int,
) -> int:
    """One chunk region, on a worker: rows ``start:stop`` of ``path``. Returns the bytes."""
    src = _backend(token, "src", src_spec)
    dst = _backend(token, "dst", dst_spec)
    return copy_region(src, dst, path, start, stop)


def _release(token: str) -> int:
    """Close what this worker process opened for conversion ``token`` (run on every worker)."""
    closed = 0
    with _OPEN_LOCK:
        for key in [k for k in _OPEN if k[0] == token]:
            with contextlib.suppress(Exception):  # a handle that failed to close is dropped
                _OPEN.pop(key).close()
            closed += 1
    return closed


# --- client side ------------------------------------------------------------------------------
def _import_distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise UnsupportedOperationError(
            "distributed conversion needs dask: pip install 'ptd[distributed]' (or convert "
            "locally with ",
            Option("workers", "N"),
            ")",
        ) from None
    return distributed


def connect(scheduler: Any) -> tuple[Any, bool]:
    """``(distributed.Client, whether we made it)`` for an address, a client or a cluster."""
    distributed = _import_distributed()
    if isinstance(scheduler, distributed.Client):
        return scheduler, False
    address = getattr(scheduler, "scheduler_address", scheduler)
    if not isinstance(address, str):
        raise PtdValueError(
            f"scheduler must be an address like 'tcp://host:8786', a distributed.Client or a "
            f"cluster, not {scheduler!r}"
        )
    try:
        client = distributed.Client(address, timeout=CONNECT_TIMEOUT, set_as_default=False)
    except (OSError, TimeoutError) as err:
        raise RemoteAccessError(
            f"cannot connect to the Dask scheduler at {address}: {' '.join(str(err).split())}"
        ) from None
    return client, True


@cancel.cancellable  # Ctrl-C / SIGTERM cancel the queued tasks; the destination is removed
def convert_distributed(
    src: Any,
    dst: Any = None,
    *,
    scheduler: Any,
    progress: Callable[[int, int], None] | None = None,
    **options: Unpack[ConvertArgs],
) -> ConvertResult:
    """:func:`ptd.convert` on a Dask cluster: one task per chunk region (see the module doc).

    ``scheduler`` is the scheduler's address (``"tcp://10.0.0.5:8786"``), a
    ``distributed.Client`` or a cluster object (``LocalCluster``...). The other arguments are
    :func:`ptd.convert`'s, the same set (:class:`~ptd.transfer.options.ConvertArgs`:
    ``skip_unsupported``, ``layout``, ``batch_size``... included). Raises
    UnsupportedOperationError when dask is not installed, PtdValueError for an HDF5 or
    ``memory://`` destination, RemoteAccessError when the scheduler cannot be reached,
    ConvertError when a task fails (the destination is removed again).
    """
    return run_distributed(ConvertOptions.parse(src, dst, scheduler=scheduler, **options), progress)


def run_distributed(
    opts: ConvertOptions, progress: Callable[[int, int], None] | None = None
) -> ConvertResult:
    """The conversion ``opts`` describes, on the Dask cluster ``opts.scheduler``."""
    named = opts.to or (format_of_suffix(opts.dst.path) if opts.dst is not None else None)
    if named is not None and not policy(named).concurrent_writers:
        raise PtdValueError(
            "distributed conversion writes zarr destinations only (an HDF5 file cannot be "
            "written by several processes at once); convert to zarr, or convert locally with ",
            Option("workers", "N"),
        )
    for where in (opts.src, opts.dst):
        if where is not None and where.scheme == "memory":
            raise PtdValueError(
                f"{where.path}: a memory:// store lives in one process; Dask workers cannot see it"
            )
    _import_distributed()
    with planned(opts) as job:
        result = job.result
        result.workers = 0
        if not policy(result.dst_format).concurrent_writers:
            raise PtdValueError(
                f"distributed conversion writes zarr destinations only, not {result.dst} (an "
                "HDF5 file cannot be written by several processes at once)"
            )
        if opts.dry_run:
            result.seconds = time.perf_counter() - job.t0
            return result
        src_spec = job.scan.backend.reopen_spec
        if src_spec is None:  # pragma: no cover - convert opens paths and URLs only
            raise PtdValueError(f"{result.src} cannot be reopened by the workers")
        client, owned = connect(opts.scheduler)
        result.scheduler = str(getattr(client.scheduler, "address", None) or opts.scheduler)
        target = job.target
        out: Backend | None = None
        token = secrets.token_hex(8)
        try:
            out = job.open_destination()
            copier = job.copier(out, progress)
            regions = copier.regions(copier.create())
            copier.copy_references()  # (every node exists once the structure is written)
            dst_reopen = out.reopen_spec
            if dst_reopen is None:  # pragma: no cover - convert opens paths and URLs only
                raise PtdValueError(f"{result.dst} cannot be reopened by the workers")
            dst_spec = dst_reopen.with_mode("r+").absolute()
            out.close()  # the structure is written; the workers fill in the data
            out = None
            result.regions = len(regions)
            if progress is not None:
                progress(copier.done, result.nbytes)
            if regions:
                _run(client, token, src_spec.absolute(), dst_spec, regions, copier.advance)
            # consolidated metadata, once, by the client
            out = target.open("r+")
            out.finalize()
            out.close()
            out = None
        except BaseException as err:
            exc = failed(err, target, out)
            if exc is err:
                raise
            raise exc from err
        finally:
            with contextlib.suppress(Exception):  # workers that are gone hold nothing
                client.run(_release, token)
            if owned:
                client.close()
    return finish(job)


def _run(
    client: Any,
    token: str,
    src_spec: ReopenSpec,
    dst_spec: ReopenSpec,
    regions: list[Region],
    advance: Callable[[int], None],
) -> None:
    """Submit one task per region and wait for them, reporting progress as they finish."""
    distributed = _import_distributed()
    futures = client.map(
        _copy_task,
        [token] * len(regions),
        [src_spec] * len(regions),
        [dst_spec] * len(regions),
        [r[0] for r in regions],
        [r[1] for r in regions],
        [r[2] for r in regions],
        key=[f"ptd-copy-{token}-{i}" for i in range(len(regions))],
        pure=False,
    )
    index = {f.key: i for i, f in enumerate(futures)}
    try:
        for future in _completed(distributed.as_completed(futures, loop=client.loop)):
            if future.status == "error":
                region = regions[index[future.key]]
                err = future.exception()
                key = "/".join(region[0])
                if isinstance(err, PtdError):
                    raise ConvertError(
                        f"a worker failed to copy rows {region[1]}:{region[2]} of key {key!r}: "
                        f"{err}"
                    )
                raise ConvertError(
                    f"a worker failed to copy rows {region[1]}:{region[2]} of key {key!r}: "
                    f"{type(err).__name__}: {' '.join(str(err).split())}"
                )
            advance(int(future.result()))
            future.release()
    except BaseException:
        client.cancel(futures)
        raise


_IDLE_S = min(0.05, CANCEL_POLL_S)


def _completed(finished: Any) -> Iterator[Any]:
    """The futures of ``finished`` (a ``distributed.as_completed``) as they finish, with the
    cancellation token checked every ``_IDLE_S`` (well within ``CANCEL_POLL_S``) while none does: Ctrl-C or
    SIGTERM on the client stops the job (the caller cancels the futures still queued)."""
    while not finished.is_empty():
        cancel.check()
        if finished.has_ready():
            yield from finished.next_batch(block=False)
        else:
            time.sleep(_IDLE_S)
    cancel.check()
