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
  h5 are HDF5 filter plugins, registered by ``hdf5plugin`` (a dependency of ptd).
* String arrays keep their kind (fixed-length bytes, variable-length UTF-8 or bytes...) and
  shape: each format's nearest type, the kind recorded where the destination lacks it (see
  ``docs/format.md``). One that is not marked as a stack (a plain h5py/zarr string array)
  also becomes a marked stack (``__tensordict_stack__``) when its leading dims are its
  group's batch size, so tensordict reads it as a ``NonTensorStack`` of its rows.
* Pickled zarr entries are decoded and re-encoded only with ``allow_pickle=True``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Unpack

from ptd.storage.api import Backend
from ptd.storage.cancel import cancellable
from ptd.transfer.job import failed, finish, planned
from ptd.transfer.options import ConvertArgs, ConvertOptions, ConvertResult

__all__ = ["ConvertArgs", "ConvertOptions", "ConvertResult", "convert", "run", "run_local"]


def convert(
    src: Any,
    dst: Any = None,
    *,
    progress: Callable[[int, int], None] | None = None,
    scheduler: Any = None,
    **options: Unpack[ConvertArgs],
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
        skip_unsupported: keys the destination cannot hold (HDF5 object/region references,
            vlen sequences, compound types that zarr cannot store, names zarr reserves) are
            left out and listed in ``result.not_copied``; by default the conversion is
            refused, naming the first of them. Skipped links (HDF5 external and dangling soft
            links) are always left out and listed there.
        progress: called as ``progress(bytes_done, bytes_total)`` after every slab.
        workers: copy this many chunk regions at a time on a thread pool (memory: about
            ``workers`` slabs of 16 MB, or of one source chunk when those are larger).
        scheduler: a Dask scheduler address (``"tcp://host:8786"``), ``distributed.Client``
            or cluster: run the copy there, one task per chunk region (see
            :func:`ptd.distributed.convert_distributed`; needs ``ptd[distributed]``).
        storage_options: fsspec options for URLs (``endpoint_url``, ``key``, ``secret``,
            ``anon``...): they go to whichever of ``src`` and ``dst`` is a URL (an error when
            neither is).
        dst_storage_options: options for a URL ``dst`` when they differ from ``src``'s.
        layout: ``"random-access"`` (alias ``"training"``): write the layout that serves
            random minibatches best in the destination (h5: contiguous and uncompressed, the
            fast path; local zarr: uncompressed 8 MB chunks, also mapped; zarr at a URL:
            sharded, 64 KB zstd inner chunks); see :mod:`ptd.transfer.layouts`. Excludes
            ``chunks`` and ``compression``. Default ``"keep"``.
        batch_size: record this root batch size (``__tensordict__``) in ``dst``, and each
            nested group's (its stored one where it extends the root's, else inferred); every
            entry must fit it (else ``BatchSizeError`` naming the key, nothing written).
        batch_dims: record each group's batch size of this many leading dims, each group on
            its own (an episode group gets its own length; stored ones kept where they fit),
            as ``ptd validate --batch-dims`` works them out; every entry must fit.
        follow_virtual: read and copy the HDF5 source's virtual datasets whose source files
            all lie inside its directory (others, and external storage, stay refused, naming
            the source; see :mod:`ptd.storage.h5.elsewhere`). A zarr source refuses it.

    Raises:
        StoreNotFoundError, CorruptStoreError: ``src`` is missing or unreadable.
        StoreExistsError: ``dst`` exists and ``overwrite`` is False.
        BatchSizeError: ``batch_size``/``batch_dims`` do not fit the entries.
        RemoteAccessError: a URL cannot be reached (credentials, endpoint).
        PtdValueError: bad arguments. ConvertError: the copy failed (``dst`` untouched).
    """
    return run(ConvertOptions.parse(src, dst, scheduler=scheduler, **options), progress)


@cancellable  # Ctrl-C / SIGTERM stop it between reads; the temporary is removed
def run(opts: ConvertOptions, progress: Callable[[int, int], None] | None = None) -> ConvertResult:
    """The conversion ``opts`` describes (parsed once, by :meth:`ConvertOptions.parse`): on
    the Dask cluster ``opts.scheduler`` when it names one, else here. A cancellable section:
    Ctrl-C / SIGTERM stop it between reads, and the temporary is removed."""
    if opts.scheduler is not None:
        from ptd.transfer.distributed import run_distributed

        return run_distributed(opts, progress)
    return run_local(opts, progress)


def run_local(
    opts: ConvertOptions, progress: Callable[[int, int], None] | None = None
) -> ConvertResult:
    """The conversion ``opts`` describes, in this process (``opts.workers`` threads)."""
    with planned(opts) as job:
        result = job.result
        result.workers = opts.workers
        if opts.dry_run:
            result.seconds = time.perf_counter() - job.t0
            return result
        target = job.target
        out: Backend | None = None
        try:
            out = job.open_destination()
            copier = job.copier(out, progress)
            if progress is not None:
                progress(0, result.nbytes)
            copier.run(opts.workers)
            out.close()
            out = None
            job.copy_userblock()
        except BaseException as err:
            exc = failed(err, target, out)
            if exc is err:
                raise
            raise exc from err
    # the source is closed: now the destination may replace it (same-format re-chunk in place)
    return finish(job)
