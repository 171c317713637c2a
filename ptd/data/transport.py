"""Handing batches from DataLoader workers to the main process through reused shared memory.

Torch sends every shared tensor a worker returns with a file descriptor of its own, passed
through a socket that a thread of the worker serves: a round trip between the two processes
per tensor and per batch, and a new shared-memory segment made, faulted in and dropped per
batch. On a busy machine that trip cost more than reading the batch (3 ms a batch on the
2-core test machine, against 0.5 ms to read it).

Here each worker keeps a small *ring* of shared-memory slots. A batch is copied into a free
slot and travels as the slot's number and the batch's layout; the slot's memory itself (its
descriptor) travels only the first time the slot is used. The receiving process keeps the
slots it has seen, copies the batch out of the slot into new tensors (one allocation and one
copy; the batch it hands on owns its memory, as with torch's own transfer), and marks the slot
free again (a flag in the slot's first bytes, which the worker checks before reusing it). A
worker whose slots are all in flight makes a new one; one that has many in flight (a consumer
that stopped reading) falls back to torch's own transfer.

A *hand-over* (:class:`HandOver`: several batches read in one go, see
:class:`~ptd.data.sampler.ChunkShuffleSampler`'s ``handover``) travels in one slot as one
message, and the receiving process copies each batch out into memory of its own: a
:class:`BatchList`, which :class:`~ptd.data.StoreLoader` yields batch by batch. The
message's cost (about 100 µs in the main process, mostly torch's) is then paid once per
hand-over instead of once per batch.

>>> import torch
>>> from ptd import TensorDict
>>> td = TensorDict({"a": torch.arange(6.0).reshape(3, 2), "b": {"c": torch.ones(3)}},
...                     batch_size=[3])
>>> ring = Ring()
>>> ref = ring.pack(td)
>>> back = receive(*ref.__reduce__()[1])
>>> back["a"].tolist(), back["b", "c"].tolist(), ring.free_slots()
([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]], [1.0, 1.0, 1.0], 1)
"""

from __future__ import annotations

import math
import threading
import uuid
from collections import OrderedDict
from typing import Any

import numpy as np
import torch

from ptd.containers.base import TensorDictBase, is_leaf_nontensor
from ptd.containers.tensordict import TensorDict
from ptd.errors import PtdValueError
from ptd.storage import runtime

__all__ = [
    "BatchList",
    "HandOver",
    "Ring",
    "as_numpy",
    "assemble",
    "leaves",
    "put",
    "receive",
    "split",
    "worker_ring",
]

#: bytes before a slot's data: the in-use flag (byte 0), padded for alignment
_HEADER = 64
#: slots in flight beyond which a worker stops growing its ring (torch's transfer instead)
_MAX_SLOTS = 32
#: rings the receiving process remembers (a ring per worker; workers of finished loaders age out)
_MAX_RINGS = 64

LeafLayout = tuple[tuple[str, ...], torch.dtype, tuple[int, ...], int]


def _aligned(nbytes: int) -> int:
    """``nbytes`` rounded up to the 64 bytes every leaf in a slot or buffer starts at."""
    return -(-nbytes // 64) * 64


class BatchList(list[Any]):
    """The batches of one hand-over, in order: what a DataLoader yields for an item of a
    sampler with ``handover > 1`` (:class:`~ptd.data.StoreLoader` yields them one by
    one). Each batch owns its memory."""


class HandOver:
    """A hand-over read in one go: ``td`` holds the rows of all its batches, one batch after
    another (in a DataLoader worker, built in a ring slot); ``sizes``: the batches' lengths.
    :func:`~ptd.data.dataset.collate` sends it as one message (:meth:`Ring.pack`)."""

    __slots__ = ("sizes", "td")

    def __init__(self, td: TensorDictBase, sizes: tuple[int, ...]) -> None:
        self.td, self.sizes = td, tuple(sizes)


class _Slot:
    __slots__ = ("bytes", "flag", "flat", "number", "sent")

    def __init__(self, number: int, nbytes: int) -> None:
        self.number = number
        storage = torch.UntypedStorage._new_shared(_HEADER + nbytes)
        self.flat = torch.empty(0, dtype=torch.uint8).set_(storage)
        self.bytes = self.flat.numpy()
        self.flag = self.bytes[:8]  # byte 0: 1 while the receiver has not copied it
        self.flag[0] = 0
        self.sent = False


class Ring:
    """One process's slots (see the module doc)."""

    def __init__(self) -> None:
        self.token = uuid.uuid4().hex
        self.slots: list[_Slot] = []
        self.pid = runtime.pid()
        #: the slot a batch is being built in (:meth:`lease`) and each leaf's place in it,
        #: until :meth:`pack` sends it
        self._leased: tuple[_Slot, dict[tuple[str, ...], tuple[int, int]]] | None = None
        #: False once a leased batch left without :meth:`pack` (a collate_fn of the user's):
        #: its slot may be in use in another process, so batches are built in new memory
        self.leases = True

    def lease(
        self, specs: list[tuple[tuple[str, ...], tuple[int, ...], np.dtype]]
    ) -> dict[tuple[str, ...], np.ndarray] | None:
        """Arrays in a free slot, one per ``(key, shape, dtype)``, for a batch to be built in
        place (the dataset gathers its rows straight into them) and sent by :meth:`pack`
        without another copy; None when no slot is free (or leases are off, see
        :attr:`leases`)."""
        if self._leased is not None:
            # the last leased batch was never packed: it left through torch's own transfer,
            # which shares the slot's memory itself; never reuse that slot, nor lease again
            slot, _ = self._leased
            self._leased = None
            self.slots = [s for s in self.slots if s is not slot]
            self.leases = False
        if not self.leases:
            return None
        sizes = [_aligned(math.prod(shape) * np.dtype(dt).itemsize) for _, shape, dt in specs]
        free = self._free(max(64, sum(sizes)))
        if free is None:
            return None
        free.flag[0] = 1  # taken until the receiver has copied the batch out
        arrays: dict[tuple[str, ...], np.ndarray] = {}
        places: dict[tuple[str, ...], tuple[int, int]] = {}
        off = _HEADER
        for (key, shape, dt), size in zip(specs, sizes, strict=True):
            n = math.prod(shape) * np.dtype(dt).itemsize
            arrays[key] = free.bytes[off : off + n].view(dt).reshape(shape)
            places[key] = (off, n)
            off += size
        self._leased = (free, places)
        return arrays

    def free_slots(self) -> int:
        """Slots the receiver has released (or never got)."""
        return sum(1 for s in self.slots if s.flag[0] == 0)

    def pack(self, td: TensorDictBase, sizes: tuple[int, ...] = ()) -> Any:
        """A picklable stand-in for ``td`` that :func:`receive` turns back into a TensorDict
        (with ``sizes``, the lengths of the batches ``td``'s rows hold one after another: into
        a :class:`BatchList` of them): ``td``'s tensors copied into a free slot (none copied
        when ``td`` was built in the slot :meth:`lease` gave); or, when too many slots are in
        flight, ``td`` itself (with ``sizes``: a :class:`BatchList` of its batches)."""
        tensors: list[tuple[tuple[str, ...], torch.Tensor]] = []
        others: list[tuple[tuple[str, ...], Any]] = []
        for key, value in leaves(td):
            (tensors if isinstance(value, torch.Tensor) else others).append((key, value))
        if sizes and others:  # non-tensor entries are not cut in the receiver: each batch apart
            return BatchList(self.pack(b) for b in split(td, sizes))
        if self._leased is not None:
            built = self._built_in_place(tensors, others, td, sizes)
            if built is not None:
                return built
        padded = [_aligned(t.nbytes) for _, t in tensors]
        need = max(64, sum(padded))
        slot = self._free(need)
        if slot is None:
            return split(td, sizes) if sizes else td
        layout: list[LeafLayout] = []
        off = _HEADER
        for (key, t), size in zip(tensors, padded, strict=True):
            if t.nbytes:
                src = as_numpy(t)
                dst = slot.bytes[off : off + t.nbytes].view(src.dtype).reshape(src.shape)
                np.copyto(dst, src)
            layout.append((key, t.dtype, tuple(t.shape), off))
            off += size
        slot.flag[0] = 1
        return _SlotRef(self, slot, layout, others, list(td.batch_size), off, sizes)

    def _built_in_place(
        self,
        tensors: list[tuple[tuple[str, ...], torch.Tensor]],
        others: list[tuple[tuple[str, ...], Any]],
        td: TensorDictBase,
        sizes: tuple[int, ...],
    ) -> _SlotRef | None:
        """The leased slot sent as it is, when every tensor of the batch is the one built in
        it (else the lease is given back and the batch is copied into a slot as usual)."""
        assert self._leased is not None
        slot, places = self._leased
        self._leased = None
        base = slot.bytes.ctypes.data
        layout: list[LeafLayout] = []
        end = _HEADER
        for key, t in tensors:
            place = places.get(key)
            if (
                place is None
                or t.nbytes != place[1]
                or (t.nbytes and t.data_ptr() != base + place[0])
            ):
                slot.flag[0] = 0
                return None
            layout.append((key, t.dtype, tuple(t.shape), place[0]))
            end = max(end, place[0] + place[1])
        if len(layout) != len(places):
            slot.flag[0] = 0
            return None
        end = _aligned(end)
        return _SlotRef(self, slot, layout, others, list(td.batch_size), end, sizes)

    def _free(self, need: int) -> _Slot | None:
        for s in self.slots:
            if s.flag[0] == 0 and s.flat.numel() - _HEADER >= need:
                return s
        if len(self.slots) >= _MAX_SLOTS:
            small = [s for s in self.slots if s.flag[0] == 0]
            if not small:
                return None
            self.slots.remove(small[0])  # too small for this batch: replace it
        slot = _Slot(max((s.number for s in self.slots), default=-1) + 1, need)
        self.slots.append(slot)
        return slot


class _SlotRef:
    """A packed batch on its way: pickles as the slot's number (plus the slot's memory the
    first time) and the layout."""

    def __init__(
        self,
        ring: Ring,
        slot: _Slot,
        layout: list[LeafLayout],
        others: list[tuple[tuple[str, ...], Any]],
        batch_size: list[int],
        end: int,
        sizes: tuple[int, ...] = (),
    ) -> None:
        self.ring, self.slot = ring, slot
        self.layout, self.others, self.batch_size, self.end = layout, others, batch_size, end
        self.sizes = sizes

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        slot = self.slot
        memory = None if slot.sent else slot.flat
        slot.sent = True
        return receive, (
            self.ring.token,
            slot.number,
            memory,
            self.layout,
            self.others,
            self.batch_size,
            self.end,
            self.sizes,
        )


_seen_lock = threading.Lock()
#: ring token -> slot number -> the slot's memory, in the receiving process
_seen: OrderedDict[str, dict[int, torch.Tensor]] = OrderedDict()


def receive(
    token: str,
    number: int,
    memory: torch.Tensor | None,
    layout: list[LeafLayout],
    others: list[tuple[tuple[str, ...], Any]],
    batch_size: list[int],
    end: int,
    sizes: tuple[int, ...] = (),
) -> TensorDictBase | BatchList:
    """Rebuild a packed batch: copy it out of its slot into new memory and free the slot; a
    hand-over (``sizes``, its batches' lengths) into a :class:`BatchList`, each batch copied
    into memory of its own."""
    with _seen_lock:
        ring = _seen.get(token)
        if ring is None:
            ring = _seen[token] = {}
            while len(_seen) > _MAX_RINGS:
                _seen.popitem(last=False)
        else:
            _seen.move_to_end(token)
        if memory is not None and memory.is_shared():
            ring[number] = memory  # the slot itself: later batches in it come without it
        # (a slot pickled by value -- plain pickle, not the DataLoader's queue -- is a copy:
        # read once, never kept, so a later batch in that slot cannot read stale bytes)
        flat = memory if memory is not None else ring.get(number)
    if flat is None:
        raise PtdValueError(
            f"a DataLoader batch refers to shared slot {number} of worker ring {token}, "
            "which this process never received (more than "
            f"{_MAX_RINGS} workers sending at once?)"
        )
    src = flat.numpy()
    if sizes:
        if others:  # (pack sends a hand-over with non-tensor entries batch by batch)
            src[0] = 0
            raise PtdValueError(
                "a hand-over in a shared slot cannot carry non-tensor entries "
                f"({sorted('/'.join(k) for k, _ in others)})"
            )
        try:
            return _receive_batches(src, layout, batch_size, sizes)
        finally:
            src[0] = 0  # the worker may reuse the slot
    own = np.empty(max(0, end - _HEADER), dtype=np.uint8)
    # numpy's copy: one thread (torch's copy_ may wake its thread pool, slow on a busy machine)
    own[:] = src[_HEADER:end]
    src[0] = 0  # the worker may reuse the slot
    whole = torch.from_numpy(own)
    data: dict[str, Any] = {}
    for key, dtype, shape, off in layout:
        n = math.prod(shape) * _itemsize(dtype)
        put(data, key, _leaf(own, whole, off - _HEADER, n, dtype, shape))
    for key, value in others:
        put(data, key, value)
    return assemble(data, torch.Size(batch_size))


def _leaf(
    own: np.ndarray,
    whole: torch.Tensor,
    at: int,
    nbytes: int,
    dtype: torch.dtype,
    shape: tuple[int, ...],
) -> torch.Tensor:
    """The leaf of ``dtype`` and ``shape`` at bytes ``[at, at + nbytes)`` of a received
    buffer (``own``, and ``whole``: the same memory as a torch byte tensor)."""
    npdt = _NUMPY.get(dtype)
    if npdt is not None:
        return torch.from_numpy(own[at : at + nbytes].view(npdt).reshape(shape))
    return whole[at : at + nbytes].view(dtype).view(shape)  # (dtypes numpy lacks: bfloat16...)


def _receive_batches(
    src: np.ndarray, layout: list[LeafLayout], batch_size: list[int], sizes: tuple[int, ...]
) -> BatchList:
    """The batches of a hand-over in a slot (``src``), each copied into one buffer of its
    own (its leaves one after another, 64-byte aligned)."""
    rows = batch_size[0]
    if sum(sizes) != rows:
        raise PtdValueError(f"a hand-over of {rows} rows cannot hold batches of {list(sizes)}")
    row_bytes = [math.prod(shape[1:]) * _itemsize(dtype) for _, dtype, shape, _ in layout]
    out = BatchList()
    start = 0
    for n in sizes:
        nbytes = [n * rb for rb in row_bytes]
        own = np.empty(max(64, sum(_aligned(b) for b in nbytes)), dtype=np.uint8)
        whole = torch.from_numpy(own)
        data: dict[str, Any] = {}
        at = 0
        for (key, dtype, shape, off), rb, nb in zip(layout, row_bytes, nbytes, strict=True):
            a = off + start * rb
            own[at : at + nb] = src[a : a + nb]
            put(data, key, _leaf(own, whole, at, nb, dtype, (n, *shape[1:])))
            at += _aligned(nb)
        out.append(assemble(data, torch.Size([n, *batch_size[1:]])))
        start += n
    return out


def split(td: TensorDictBase, sizes: tuple[int, ...]) -> BatchList:
    """``td``'s rows cut into batches of ``sizes`` rows, each owning its memory (a copy of
    its rows: a batch shares no storage with the others).

    >>> from ptd.containers.tensordict import TensorDict
    >>> parts = split(TensorDict({"a": torch.arange(5)}, batch_size=[5]), (2, 3))
    >>> [p["a"].tolist() for p in parts]
    [[0, 1], [2, 3, 4]]
    """
    out = BatchList()
    start = 0
    for n in sizes:
        out.append(td[start : start + n].clone())
        start += n
    return out


#: torch dtype -> the numpy dtype torch.from_numpy maps back to it
_NUMPY: dict[torch.dtype, np.dtype] = {
    getattr(torch, name): np.dtype(name)
    for name in (
        [
            "bool",
            "float16",
            "float32",
            "float64",
            "int8",
            "int16",
            "int32",
            "int64",
            "uint8",
            "complex64",
            "complex128",
        ]
    )
}


_ITEMSIZE: dict[torch.dtype, int] = {}


def _itemsize(dtype: torch.dtype) -> int:
    size = _ITEMSIZE.get(dtype)
    if size is None:
        size = _ITEMSIZE[dtype] = torch.empty(0, dtype=dtype).element_size()
    return size


_ring: Ring | None = None


def worker_ring() -> Ring:
    """This process's ring (a new one after a fork: the parent's slots are not ours)."""
    global _ring
    if _ring is None or _ring.pid != runtime.pid():
        _ring = Ring()
    return _ring


def put(data: dict[str, Any], key: tuple[str, ...], value: Any) -> None:
    """Set ``data[key[0]][key[1]]...`` = ``value``, making the levels as needed."""
    node = data
    for part in key[:-1]:
        node = node.setdefault(part, {})
    node[key[-1]] = value


def as_numpy(t: torch.Tensor) -> np.ndarray:
    """A tensor's memory as numpy (bfloat16 and the float8 types as their bits)."""
    try:
        return t.numpy()
    except TypeError:  # no numpy twin: view the bits
        bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
        return t.view(bits).numpy()


def leaves(td: TensorDictBase) -> list[tuple[tuple[str, ...], Any]]:
    """Every leaf of ``td`` (tensors and non-tensor entries) with its key as a tuple."""
    cls = TensorDict
    if type(td) is cls and not td.device:
        out: list[tuple[tuple[str, ...], Any]] = []

        def walk(node: Any, prefix: tuple[str, ...]) -> None:
            for k in node._keys_str():  # the container primitives: no checks per entry
                v = node._get_str(k)
                if type(v) is cls:
                    walk(v, prefix + (k,))
                else:
                    out.append((prefix + (k,), v))

        walk(td, ())
        return out
    return [
        (k if isinstance(k, tuple) else (k,), td.get(k))
        for k in td.keys(True, True, is_leaf=is_leaf_nontensor)
    ]


def assemble(data: dict[str, Any], batch_size: torch.Size) -> TensorDictBase:
    """A TensorDict of ``data`` (nested dicts become nested TensorDicts), whose tensors already
    have ``batch_size`` as their leading dims: built without checking each entry again (a
    batch of a few leaves is read every millisecond or so)."""
    return TensorDict._unchecked(data, batch_size)
