"""A map-style dataset over a store, for ``torch.utils.data.DataLoader``.

:class:`StoreDataset` reads a whole batch at once (``__getitems__``: a DataLoader batch is one
read per leaf, not ``batch_size`` reads) and returns a :class:`ptd.TensorDict` of the batch. Leaves
where a random row costs a chunk decode (compressed or chunked, see
:mod:`ptd.data.geometry`) are read a whole chunk group at a time and kept decoded in a small
per-process buffer (sized by the sampler to hold its window; one block table for all such
leaves, so a batch finds its rows with one vectorized lookup), so that with
:class:`~ptd.data.sampler.ChunkShuffleSampler` each chunk is decoded about once per epoch; other
leaves (the fast path) are read row by row.

Workers: the dataset pickles to what reopens the store (a path is opened lazily in each
process; a PersistentTensorDict reopens itself), never with its decoded blocks, and a forked
worker drops the blocks it inherited; so it works under fork and spawn. The batch is already
a TensorDict: use ``collate_fn=ptd.data.collate`` (the default collate would index it). In a
worker, :func:`collate` copies the batch into one of the worker's reused shared-memory slots
(:mod:`ptd.data.transport`): handing it to the main process costs a small message and one copy
there, instead of a new shared segment and a file-descriptor round trip per leaf.
``pin_memory=True`` works (``TensorDict.pin_memory``).

>>> import os, tempfile, torch
>>> from torch.utils.data import DataLoader
>>> from ptd import PersistentTensorDict
>>> from ptd.data import StoreDataset, ChunkShuffleSampler, collate
>>> with tempfile.TemporaryDirectory() as d:
...     path = os.path.join(d, "x.h5")
...     PersistentTensorDict.from_dict(
...         {"obs": torch.arange(4000.).reshape(1000, 4), "done": torch.zeros(1000, dtype=torch.bool)},
...         path, chunks=True, compression="gzip").close()
...     ds = StoreDataset(path)
...     sampler = ChunkShuffleSampler(ds, batch_size=64, seed=0)
...     loader = DataLoader(ds, batch_sampler=sampler, collate_fn=collate)
...     batch = next(iter(loader))
...     print(batch.batch_size, batch["obs"].shape, sum(len(b) for b in loader))
...     ds.close()
torch.Size([64]) torch.Size([64, 4]) 1000
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, get_worker_info

from ptd.containers.base import TensorDictBase
from ptd.containers.persistent.opening import open_existing
from ptd.containers.persistent.persistent_tensordict import PersistentTensorDict
from ptd.data.geometry import GROUP_BYTES, LeafGeometry, group_rows, store_leaves
from ptd.data.rows import select_rows, where_of
from ptd.data.transport import BatchList, HandOver, as_numpy, assemble, put, split, worker_ring
from ptd.errors import PtdIndexError, PtdTypeError, PtdValueError
from ptd.ops.dtypes import dtype_from_str
from ptd.storage import runtime
from ptd.storage.location import StoreLocation
from ptd.storage.read.cache import parse_budget
from ptd.storage.stores import detect

__all__ = ["MEMORY_BUDGET", "LeftOutWarning", "StoreDataset", "collate"]

#: default bytes of decoded rows a :class:`StoreDataset` holds per process (its block buffers:
#: the sampler's window, the leftovers, the reads ahead); see ``memory_budget``
MEMORY_BUDGET = 96 << 20
#: the window :class:`StoreDataset` sizes its groups for before a sampler tells it its own
#: (:class:`~ptd.data.sampler.ChunkShuffleSampler`'s default window, the leftovers and the
#: two groups read ahead)
_DEFAULT_GROUPS = 8 + 1 + 2


class LeftOutWarning(UserWarning):
    """A :class:`StoreDataset` built without ``keys`` leaves out leaves of the store that do not
    have its rows (side groups of another length, leaves without dims); it names them."""


def _key_name(key: tuple[str, ...]) -> str:
    return "/".join(key)


def _under(key: tuple[str, ...], groups: Sequence[tuple[str, ...]]) -> bool:
    return any(key[: len(g)] == g for g in groups)


def collate(batch: Any) -> Any:
    """The DataLoader ``collate_fn`` for :class:`StoreDataset`: a batch read by ``__getitems__``
    is already a TensorDict and is returned as is (a hand-over's batches as a
    :class:`~ptd.data.transport.BatchList`); a list of single rows (a DataLoader without
    ``__getitems__`` support) is stacked."""
    in_worker = get_worker_info() is not None
    if isinstance(batch, TensorDictBase):
        if in_worker and batch.batch_dims:
            return worker_ring().pack(batch)  # arrives in the main process as a TensorDict
        return batch
    if isinstance(batch, HandOver):  # one message for all its batches (a BatchList there)
        return (
            worker_ring().pack(batch.td, batch.sizes) if in_worker else split(batch.td, batch.sizes)
        )
    if isinstance(batch, BatchList):
        if in_worker:
            return BatchList(worker_ring().pack(b) if b.batch_dims else b for b in batch)
        return batch
    if isinstance(batch, Sequence) and batch and isinstance(batch[0], TensorDictBase):
        return torch.stack(list(batch))  # type: ignore[call-overload]
    raise PtdTypeError(
        f"ptd.data.collate expects a TensorDict batch from StoreDataset, got {type(batch).__name__}"
    )


class StoreDataset(Dataset[Any]):
    """Rows of a store (along its first batch dim) as TensorDicts; see the module doc.

    Args:
        source: a path or URL of an HDF5 file or Zarr store (opened read-only, lazily in each
            process), or an open :class:`~ptd.PersistentTensorDict` (a whole store or group,
            not an indexed view; it reopens itself in worker processes).
        keys: the leaves to read: ``"obs"``, nested as ``"infos/qpos"`` or
            ``("infos", "qpos")``; a group reads every leaf below it. Default: the leaves
            that hold the store's rows (side groups of another length are left out, with a
            :class:`LeftOutWarning`; see :mod:`ptd.data.rows`).
        batch_size: the rows' batch size (``N``, ``[N]`` or more dims); default: the first dim
            the leaves read share (the store's batch size when it has one and no ``keys``).
        validate_batch_size: check the leaves read against ``batch_size``; False: asked-for
            ``keys`` are read as they are, and without ``keys`` the leaves that do not fit are
            left out.
        group_bytes: the size of a chunk group (bytes of all leaves), see
            :func:`ptd.data.geometry.group_rows`.
        cache_rows: rows of each blocked leaf to keep decoded (the sampler raises it to its
            window); 0 turns the blocks off (every batch reads its rows directly).
        memory_budget: the most bytes of decoded rows this dataset holds in one process
            (bytes, or a size like ``"64MB"``, ``"1GiB"``; ``0`` turns the blocks off): its
            block buffers, which hold the sampler's window, the leftover rows and the groups
            read ahead. The chunk groups are sized to fit it whatever the store's chunks: a
            chunk of more rows than fit is read in parts (the group's rows only; its decode is
            then repeated for each part). Paid once per process (each DataLoader worker holds
            its own); a ``chunk_cache`` given in ``open_kwargs`` comes on top of it.
        read_ahead: read the groups the sampler names next (:class:`~ptd.data.sampler.BatchIndices`)
            on a thread of this dataset, while the batches before them are served and used;
            False: read each group when a batch first needs it.
        open_kwargs: passed to ``from_h5``/``from_zarr`` for a path (``storage_options``,
            ``fast_path``, ``chunk_cache``...). Without ``chunk_cache``, a store with blocked
            leaves is opened without a chunk cache: the blocks already hold what it would.
    """

    def __init__(
        self,
        source: Any,
        *,
        keys: Sequence[Any] | None = None,
        batch_size: int | Sequence[int] | None = None,
        validate_batch_size: bool = True,
        group_bytes: int = GROUP_BYTES,
        cache_rows: int | None = None,
        read_ahead: bool = True,
        memory_budget: int | str = MEMORY_BUDGET,
        **open_kwargs: Any,
    ) -> None:
        #: the most bytes of decoded rows this dataset holds per process (``memory_budget``)
        self.memory_budget = parse_budget(memory_budget, "memory_budget")
        if isinstance(source, PersistentTensorDict):
            if source.store_node.selected:
                raise PtdValueError(
                    f"StoreDataset needs a whole store or group, not an indexed view of "
                    f"{source.store_node.location}: pass the store (and select rows with the "
                    f"sampler)"
                )
            self._source: Any = None
            self._td: PersistentTensorDict | None = source
            if open_kwargs:
                raise PtdTypeError(
                    f"StoreDataset: {sorted(open_kwargs)} apply to a path source only (they "
                    f"open the store); {source.store_node.location} is open already"
                )
        elif isinstance(source, (str, os.PathLike)):
            self._source = os.fspath(source)
            self._td = None
        else:
            raise PtdTypeError(
                f"StoreDataset needs a path or a PersistentTensorDict, got {type(source).__name__}"
            )
        self._open_kwargs = dict(open_kwargs)
        self.read_ahead = bool(read_ahead)
        self._no_chunk_cache = False  # set below, once the leaves are known
        self._pid = runtime.pid()
        self._rows_td: PersistentTensorDict | None = None
        store = self._store_td()
        chosen = select_rows(
            store,
            keys,
            [batch_size] if isinstance(batch_size, int) else batch_size,
            validate=validate_batch_size,
        )
        #: the batch size of the rows: ``[N]`` (the first dim of the leaves read), or the
        #: one given; a batch holds rows along its first dim
        self.batch_size: torch.Size = chosen.batch_size
        #: leaves of the store that are not read (side groups, leaves without dims), with
        #: their shapes (None: no shape that counts, e.g. a string)
        self.left_out = dict(chosen.left_out)
        if chosen.side_groups or chosen.left_out:
            groups = [_key_name(g) for g in chosen.side_groups]
            alone = [_key_name(k) for k in chosen.left_out if not _under(k, chosen.side_groups)]
            warnings.warn(
                f"StoreDataset over {where_of(store)}: reading the {len(chosen.keys)} leaves "
                f"of {self.batch_size[0]} rows; left out "
                + "; ".join(
                    part
                    for part in (
                        f"the side groups {groups}" if groups else "",
                        f"the leaves {alone[:8]}" if alone else "",
                    )
                    if part
                )
                + " (another length or no dims). Pass keys=[...] to choose the leaves.",
                LeftOutWarning,
                stacklevel=2,
            )
        self._len = int(self.batch_size[0])
        leaves = store_leaves(self.td, chosen.keys)
        self.leaves: list[LeafGeometry] = leaves
        self._group_bytes = int(group_bytes)
        #: rows per chunk group (None: no blocked leaf, or a budget of 0): sized for the
        #: default window, then for the sampler's (:meth:`fit_window`)
        self.group_rows: int | None = None
        self._blocks: dict[int, _Blocks] = {}
        #: the most bytes the block buffers have held at once (see :attr:`held_bytes`)
        self.held_bytes_max = 0
        #: blocks being read ahead: (block rows, block) -> the read
        self._ahead: dict[tuple[int, int], tuple[int, Future[None]]] = {}
        self._reader: ThreadPoolExecutor | None = None
        self.fit_window(_DEFAULT_GROUPS, 0)
        self._cache_rows = int(cache_rows) if cache_rows is not None else 2 * (self.group_rows or 0)
        #: chunk-group blocks put in the buffers so far in this process, per leaf (a measure of
        #: decode work), read when a batch needed them or taken from a read ahead
        self.blocks_read = 0
        #: of those, the ones read ahead (on the reader thread, from the sampler's hints)
        self.blocks_read_ahead = 0
        if self._source is not None and self._cache_rows > 0 and self.group_rows:
            # the blocks hold the decoded rows: a chunk cache would keep a second copy
            self._no_chunk_cache = True
            if "chunk_cache" not in self._open_kwargs:
                self.close()  # reopened without one on first use

    # ------------------------------------------------------------------ store
    def _store_td(self) -> PersistentTensorDict:
        """The store or group as opened (its own batch size), opened in this process on first
        use."""
        if runtime.pid() != self._pid:  # a forked worker: the parent's blocks are not ours
            self._pid = runtime.pid()
            self._drop_blocks()
            self.blocks_read = self.blocks_read_ahead = 0
        if self._td is None:
            kwargs = dict(self._open_kwargs)
            kwargs.setdefault("mode", "r")
            if self._no_chunk_cache:
                kwargs.setdefault("chunk_cache", 0)
            loc = StoreLocation.parse(self._source, kwargs.get("storage_options"))
            fmt = detect(loc).format
            assert fmt is not None
            self._td = open_existing(PersistentTensorDict, self._source, fmt, **kwargs)
        return self._td

    @property
    def td(self) -> PersistentTensorDict:
        """The open store (opened in this process on first use), as a tensordict whose batch
        size starts with the rows' (a view of the store when its own batch size does not,
        because of side groups of another length)."""
        store = self._store_td()
        if self._rows_td is None or not self._rows_td.store_node.same_store(store.store_node):
            n = self.batch_size[:1]
            if store.batch_size[:1] == n:
                self._rows_td = store
            else:
                # (the leaves read start with the rows; rows.py left out those that do not)
                self._rows_td = store.store_node.with_batch_size(n, validate=False)
        return self._rows_td

    def _drop_blocks(self) -> None:
        """Forget the decoded blocks and the reads ahead (after a fork: they are the parent's)."""
        self._blocks = {}
        self._ahead = {}
        self._reader = None
        self._rows_td = None

    def close(self) -> None:
        """Drop the decoded blocks (waiting for a read ahead under way), and close the store if
        this dataset opened it."""
        if self._reader is not None and self._pid == runtime.pid():
            self._reader.shutdown(wait=True, cancel_futures=True)
        self._drop_blocks()
        if self._td is not None and self._source is not None:
            self._td.close()
            self._td = None

    def _slots(self, rows: int, cache_rows: int) -> int:
        """Blocks of ``rows`` rows a table holds to keep ``cache_rows`` rows decoded (and a
        slot for each read ahead that may be under way)."""
        need = max(2, -(-cache_rows // rows) + 1)
        return need + (_MAX_PENDING if self.read_ahead else 0)

    def fit_window(self, groups: int, items: int) -> int | None:
        """Size the chunk groups so that ``groups`` of them and ``items`` rows more (the
        sampler's window, leftovers and reads ahead, and a hand-over's rows) fit in
        :attr:`memory_budget`; returns the rows of a group (None: no blocks). The sampler
        calls it with its own window; the blocks held so far are dropped if it changes."""
        blocked = sum(g.row_bytes for g in self.leaves if g.blocked)
        rows = group_rows(self.leaves, self._len, self._group_bytes)
        while rows:
            # (the rows the sampler reserves for this window: ChunkShuffleSampler.__init__)
            cache = (groups + -(-items // rows)) * rows + items
            slots = min(-(-self._len // rows), self._slots(rows, cache))
            if slots * rows * blocked <= self.memory_budget:
                break
            cap = min(rows - 1, self.memory_budget // max(1, slots * blocked))
            rows = group_rows(self.leaves, self._len, self._group_bytes, max_rows=cap)
        if rows != self.group_rows:
            for key in list(self._ahead):
                self._drop_ahead(key)
            self._blocks = {}
            self.group_rows = rows
        return rows

    @property
    def held_bytes(self) -> int:
        """Bytes of the block buffers this dataset holds now (at most :attr:`memory_budget`)."""
        return sum(t.nbytes for t in self._blocks.values())

    def reserve_rows(self, rows: int) -> None:
        """Keep at least ``rows`` rows of each blocked leaf decoded (the sampler's window)."""
        self._cache_rows = max(self._cache_rows, int(rows))

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.update(
            _blocks={}, _ahead={}, _reader=None, _rows_td=None, blocks_read=0, blocks_read_ahead=0
        )
        if self._source is not None:
            state["_td"] = None  # reopened by path in the other process
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._pid = runtime.pid()

    def __len__(self) -> int:
        return self._len

    def __repr__(self) -> str:
        where = self._source if self._source is not None else self._store_td().store_node.location
        blocked = sum(1 for g in self.leaves if g.blocked)
        return (
            f"StoreDataset({where!r}, rows={self._len}, leaves={len(self.leaves)} "
            f"({blocked} read in chunk groups), group_rows={self.group_rows}, "
            f"memory_budget={_mib(self.memory_budget)} per process, "
            f"held={_mib(self.held_bytes)})"
        )

    # ------------------------------------------------------------------ reads
    def __getitem__(self, index: int) -> TensorDictBase:
        out = self.__getitems__([index])
        assert isinstance(out, TensorDictBase)  # a plain list of indices: one batch
        return out[0]  # type: ignore[no-any-return]

    def __getitems__(self, indices: Sequence[int]) -> TensorDictBase | BatchList | HandOver:
        """The rows ``indices`` (in that order, repeats allowed) as one TensorDict; a
        hand-over (``indices.sizes``, see :class:`~ptd.data.sampler.BatchIndices`) as a
        :class:`~ptd.data.transport.BatchList` of its batches, each owning its memory (in a
        DataLoader worker: a :class:`~ptd.data.transport.HandOver` built in a shared slot,
        which :func:`collate` sends as one message)."""
        sizes = tuple(int(n) for n in getattr(indices, "sizes", ()))
        if sizes and sum(sizes) != len(indices):
            raise PtdValueError(
                f"a hand-over of {len(indices)} rows cannot hold batches of {list(sizes)}"
            )
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if idx.size and (idx.min() < -self._len or idx.max() >= self._len):
            bad = idx[(idx < -self._len) | (idx >= self._len)][0]
            raise PtdIndexError(f"row {int(bad)} is out of range for {self._len} rows")
        if idx.size and idx.min() < 0:
            idx = np.where(idx < 0, idx + self._len, idx)
        td = self.td
        direct: Any = None
        where: dict[int, np.ndarray | None] = {}  # block rows -> the rows' buffer positions
        use_blocks = self._cache_rows > 0 and bool(self.group_rows) and len(idx) > 0
        ahead = getattr(indices, "ahead", ())
        if ahead and use_blocks and self.read_ahead:
            self._read_ahead(td, ahead)
        # each leaf's rows: taken from the blocks (a buffer and the rows' positions in it) or
        # read directly (a tensor)
        taken: list[tuple[LeafGeometry, np.ndarray, np.ndarray, torch.dtype]] = []
        values: dict[tuple[str, ...], Any] = {}
        for leaf in self.leaves:
            if leaf.blocked and use_blocks:
                rows = self._block_rows(leaf)
                if rows not in where:
                    where[rows] = self._positions(td, rows, idx)
                pos = where[rows]
                if pos is not None:
                    table = self._blocks[rows]
                    taken.append((leaf, table.bufs[leaf.key], pos, table.dtypes[leaf.key]))
                    continue
            if direct is None:
                direct = td[torch.from_numpy(idx)]
            values[leaf.key] = direct.get(leaf.key)
        plain = not sizes or all(isinstance(v, torch.Tensor) for v in values.values())
        out = self._into_slot(taken, values, len(idx)) if plain else None
        if out is not None:
            batch = self._assemble(out, len(idx))
            return HandOver(batch, sizes) if sizes else batch
        if not sizes:  # the batch in new memory: each taken leaf in one take
            out = {leaf.key: _as_tensor(buf.take(pos, axis=0), dt) for leaf, buf, pos, dt in taken}
            out.update(values)
            return self._assemble(out, len(idx))
        # a hand-over in new memory: each batch's rows taken apart, into memory of its own
        batches = BatchList()
        start = 0
        for n in sizes:
            cut = slice(start, start + n)
            part = {
                leaf.key: _as_tensor(buf.take(pos[cut], axis=0), dt) for leaf, buf, pos, dt in taken
            }
            for key, value in values.items():  # read directly: each batch's rows copied apart
                part[key] = value[cut].clone() if isinstance(value, torch.Tensor) else value[cut]
            batches.append(self._assemble(part, n))
            start += n
        return batches

    def _assemble(self, leaves: dict[tuple[str, ...], Any], n: int) -> TensorDictBase:
        data: dict[str, Any] = {}
        for leaf in self.leaves:
            put(data, leaf.key, leaves[leaf.key])
        return assemble(data, torch.Size([n]))

    def _into_slot(
        self,
        taken: list[tuple[LeafGeometry, np.ndarray, np.ndarray, torch.dtype]],
        values: dict[tuple[str, ...], Any],
        n: int,
    ) -> dict[tuple[str, ...], Any] | None:
        """In a DataLoader worker: the batch built in a slot of the worker's ring
        (:mod:`ptd.data.transport`), the taken leaves gathered straight into it
        (``np.take(..., out=)``), so that :func:`collate` sends it without copying it again;
        None elsewhere (or when the ring has no slot for it)."""
        if not taken or get_worker_info() is None:
            return None
        ring = worker_ring()
        specs: list[tuple[tuple[str, ...], tuple[int, ...], np.dtype]] = [
            (leaf.key, (n, *buf.shape[1:]), buf.dtype) for leaf, buf, _pos, _dt in taken
        ]
        tensors = {
            k: t
            for k, t in values.items()
            if isinstance(t, torch.Tensor) and t.device.type == "cpu"
        }
        for key, t in tensors.items():
            specs.append((key, tuple(t.shape), as_numpy(t).dtype))
        arrays = ring.lease(specs)
        if arrays is None:
            return None
        out: dict[tuple[str, ...], Any] = dict(values)  # non-tensor entries travel as they are
        for leaf, buf, pos, dt in taken:
            dst = arrays[leaf.key]
            np.take(buf, pos, axis=0, out=dst, mode="clip")  # (positions are in range)
            out[leaf.key] = _as_tensor(dst, dt)
        for key, t in tensors.items():
            dst = arrays[key]
            np.copyto(dst, as_numpy(t))
            out[key] = _as_tensor(dst, t.dtype)
        return out

    def _block_rows(self, leaf: LeafGeometry) -> int:
        # (every blocked leaf in blocks of a group's rows: a larger chunk is read in parts)
        return self.group_rows or 1

    def _table(self, rows: int) -> _Blocks:
        """The block table of the blocked leaves read ``rows`` rows at a time (made, or made
        larger, to hold the sampler's window and the reads ahead)."""
        table = self._blocks.get(rows)
        nblocks = -(-self._len // rows)
        slots = min(nblocks, self._slots(rows, self._cache_rows))
        leaves = [g for g in self.leaves if g.blocked and self._block_rows(g) == rows]
        # the budget bounds the buffers, whatever the rows asked for (reserve_rows, cache_rows)
        row_bytes = sum(g.row_bytes for g in leaves)
        slots = max(1, min(slots, self.memory_budget // max(1, rows * row_bytes)))
        if table is None or table.slots < slots:
            self._settle_ahead(rows)  # reads into the old table's slots: done before it goes
            self._blocks.pop(rows, None)  # (freed before the new one is made)
            table = self._blocks[rows] = _Blocks(
                slots, rows, nblocks, leaves, self._leaf_specs(leaves)
            )
            self.held_bytes_max = max(self.held_bytes_max, self.held_bytes)
        return table

    def _leaf_specs(
        self, leaves: list[LeafGeometry]
    ) -> dict[tuple[str, ...], tuple[tuple[int, ...], np.dtype, torch.dtype, bool]]:
        """Per leaf: the rows' trailing shape, the buffer's numpy dtype, the torch dtype, and
        whether the store's bytes are the buffer's (then a block is decoded straight into
        the buffer; else it is read as a tensor and copied in)."""
        td = self.td
        out = {}
        for g in leaves:
            meta = td.store_node.meta(g.key)
            assert meta.torch_dtype is not None  # (blocked leaves are numeric: geometry.py)
            tdtype = dtype_from_str(meta.torch_dtype)
            npdt = as_numpy(torch.empty(0, dtype=tdtype)).dtype
            out[g.key] = (tuple(meta.shape[1:]), npdt, tdtype, npdt == meta.dtype)
        return out

    def _positions(self, td: PersistentTensorDict, rows: int, idx: np.ndarray) -> np.ndarray | None:
        """Where the rows ``idx`` sit in the buffers of the blocked leaves read in blocks of
        ``rows`` rows (one table for all of them: they are read block by block together),
        reading the blocks that are not there into the least recently used slots (a block
        read ahead is there once its read ends). None when the batch spans more blocks than
        the buffers hold."""
        table = self._table(rows)
        blocks = idx // rows
        slot = table.slot_of[blocks]
        missing = slot < 0
        if missing.any():
            new = np.unique(blocks[missing])
            if len(np.unique(blocks)) > table.slots - int(table.busy.sum()):
                return None
            table.touch(slot[~missing])
            for b in new.tolist():
                pending = self._ahead.pop((rows, int(b)), None)
                if pending is not None:
                    into, read = pending
                    try:
                        read.result()
                    except BaseException:
                        table.release(into)
                        raise
                    self.blocks_read_ahead += len(table.leaves)
                else:
                    claimed = table.claim()
                    if claimed is None:  # every slot busy or in this batch: read directly
                        return None
                    into = claimed
                    self._read_block(td, table, into, int(b))
                self.blocks_read += len(table.leaves)
                table.ready(int(b), into)
            slot = table.slot_of[blocks]
        else:
            table.touch(slot)
        return slot * rows + (idx - blocks * rows)

    def _read_ahead(self, td: PersistentTensorDict, ahead: Sequence[tuple[int, int]]) -> None:
        """Start reading, on this dataset's reader thread, the blocks that hold the rows
        ``[start, stop)`` of each range in ``ahead`` and are neither held nor being read (see
        :class:`~ptd.data.sampler.BatchIndices`), each into a slot of its own."""
        for rows in {self._block_rows(g) for g in self.leaves if g.blocked}:
            table = self._table(rows)
            for start, stop in ahead:
                lo, hi = max(0, int(start)) // rows, (min(self._len, int(stop)) - 1) // rows
                for b in range(lo, hi + 1):
                    if table.slot_of[b] >= 0 or (rows, b) in self._ahead:
                        continue
                    while len(self._ahead) >= _MAX_PENDING:  # a consumer that skips its hints
                        key = next(iter(self._ahead))
                        self._drop_ahead(key)  # unused: dropped (read or not)
                    into = table.claim()
                    if into is None:  # no slot to spare: the batch that needs it reads it
                        return
                    if self._reader is None:
                        self._reader = runtime.serial_worker("read-ahead")
                    self._ahead[rows, b] = (
                        into,
                        self._reader.submit(self._read_block, td, table, into, b),
                    )

    def _drop_ahead(self, key: tuple[int, int]) -> None:
        """Forget a read ahead; its slot is free again once the read has ended."""
        into, read = self._ahead.pop(key)
        if not read.cancel():
            with contextlib.suppress(Exception):  # an unused block's error is nobody's
                read.result()
        self._blocks[key[0]].release(into)

    def _settle_ahead(self, rows: int) -> None:
        for key in [k for k in self._ahead if k[0] == rows]:
            self._drop_ahead(key)

    def _read_block(self, td: PersistentTensorDict, table: _Blocks, into: int, b: int) -> None:
        """Read block ``b`` of every leaf of ``table`` into the slot ``into``: decoded straight
        into the buffer where the store's bytes are the buffer's (one copy of each decoded
        byte), else read as a tensor and copied in."""
        lo, hi = b * table.rows, min(self._len, (b + 1) * table.rows)
        sub = None
        node = td.store_node
        for g in table.leaves:
            region = table.bufs[g.key][into * table.rows : into * table.rows + (hi - lo)]
            if table.direct[g.key]:
                node.read(g.key, (slice(lo, hi),), out=region)
                continue
            if sub is None:
                sub = td[lo:hi]
            region[...] = as_numpy(sub.get(g.key))


#: reads ahead under way at most (per dataset): a consumer that skips its hints drops the oldest
_MAX_PENDING = 4


class _Blocks:
    """The decoded blocks of the leaves read ``rows`` rows at a time: ``slots`` blocks of each
    leaf in one buffer per leaf, the same slot for a block in every leaf's buffer; a block is
    read into a slot claimed for it (the least recently used one that is not being read into
    nor used by the current batch)."""

    def __init__(
        self,
        slots: int,
        rows: int,
        nblocks: int,
        leaves: list[LeafGeometry],
        specs: dict[tuple[str, ...], tuple[tuple[int, ...], np.dtype, torch.dtype, bool]],
    ) -> None:
        self.slots, self.rows, self.leaves = slots, rows, leaves
        self.slot_of = np.full(nblocks, -1, dtype=np.int64)  # block -> slot, -1: not held
        self.block_in = np.full(slots, -1, dtype=np.int64)  # slot -> block
        self.stamp = np.full(slots, -1, dtype=np.int64)  # slot -> last use (-1: free)
        self.busy = np.zeros(slots, dtype=bool)  # slot -> a read into it is under way
        self.tick = 0
        self.bufs = {
            key: np.empty((slots * rows, *shape), dtype=npdt)
            for key, (shape, npdt, _t, _d) in specs.items()
        }
        self.dtypes = {key: tdt for key, (_s, _n, tdt, _d) in specs.items()}
        self.nbytes = sum(b.nbytes for b in self.bufs.values())
        self.direct = {key: direct for key, (_s, _n, _t, direct) in specs.items()}

    def touch(self, slots: np.ndarray) -> None:
        self.tick += 1
        self.stamp[slots] = self.tick

    def claim(self) -> int | None:
        """A slot to read a block into: free, or the least recently used one that no read is
        under way into and the current batch has not touched (its old block is forgotten);
        None when every slot is taken."""
        taken = self.busy | (self.stamp >= self.tick)
        if taken.all():
            return None
        slot = int(np.argmin(np.where(taken, np.iinfo(np.int64).max, self.stamp)))
        old = int(self.block_in[slot])
        if old >= 0:
            self.slot_of[old] = -1
        self.block_in[slot] = -1
        self.busy[slot] = True
        return slot

    def ready(self, block: int, slot: int) -> None:
        """The read of ``block`` into ``slot`` has ended: serve it from there."""
        self.busy[slot] = False
        self.slot_of[block] = slot
        self.block_in[slot] = block
        self.stamp[slot] = self.tick

    def release(self, slot: int) -> None:
        """A claimed slot that will not be used (a dropped read ahead)."""
        self.busy[slot] = False
        self.stamp[slot] = -1


def _mib(nbytes: int) -> str:
    return f"{nbytes / (1 << 20):.4g} MiB"


def _as_tensor(a: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    t = torch.from_numpy(a)
    return t if t.dtype == dtype else t.view(dtype)
