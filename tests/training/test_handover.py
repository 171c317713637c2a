"""Hand-overs: several batches read in one go, sent from a DataLoader worker as one message
and yielded one by one (ptd.data.ChunkShuffleSampler's ``handover``, StoreDataset's
``BatchList``/``HandOver``, the transport's split on arrival, ptd.data.StoreLoader)."""

from __future__ import annotations

import multiprocessing as mp
import pickle
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import torch
import zarr

import ptd
import ptd.data.dataset as dsmod
import ptd.data.transport as tr
from ptd.data import (
    BatchList,
    ChunkShuffleSampler,
    StoreDataset,
    StoreLoader,
    collate,
    handover_for,
    loader,
)
from ptd.data.sampler import BatchIndices
from ptd.errors import PtdValueError

N = 1000


def _arrays(n: int = N) -> dict[str, np.ndarray]:
    return {
        "obs": np.arange(n * 4, dtype="f4").reshape(n, 4),
        "action": np.arange(n, dtype=np.int64),
        "flat": np.arange(n, dtype="f8") * 0.5,
    }


def _store(tmp_path: Path, fmt: str) -> str:
    """A store as other tools write it: ``obs`` and ``action`` chunked and compressed (read in
    chunk groups), ``flat`` uncompressed (h5 contiguous, zarr one chunk: read directly)."""
    data = _arrays()
    if fmt == "h5":
        path = str(tmp_path / "s.h5")
        with h5py.File(path, "w") as f:
            for k in ("obs", "action"):
                f.create_dataset(k, data=data[k], chunks=(50, *data[k].shape[1:]),
                                 compression="gzip", shuffle=True)  # fmt: skip
            f.create_dataset("flat", data=data["flat"])
    else:
        path = str(tmp_path / "s.zarr")
        root = zarr.open_group(path, mode="w")
        for k in ("obs", "action"):
            root.create_array(k, data=data[k], chunks=(50, *data[k].shape[1:]))
        root.create_array("flat", data=data["flat"], chunks=(N,), compressors=None)
    return path


def _check(batch: Any, rows: list[int]) -> None:
    data = _arrays()
    assert isinstance(batch, ptd.TensorDict)
    assert batch.batch_size == torch.Size([len(rows)])
    assert batch["action"].tolist() == rows
    assert np.array_equal(batch["obs"].numpy(), data["obs"][rows])
    assert np.array_equal(batch["flat"].numpy(), data["flat"][rows])


def _owns(batches: list[Any]) -> None:
    """No two batches share memory, and each tensor's storage is the tensor's own size or
    the batch's one buffer (nothing larger is kept alive by a batch)."""
    arrays = [(i, b[k].numpy()) for i, b in enumerate(batches) for k in ("obs", "action", "flat")]
    for i, a in arrays:
        for j, c in arrays:
            if i != j:
                assert not np.shares_memory(a, c), (i, j)
    for b in batches:
        total = sum(b[k].nbytes for k in ("obs", "action", "flat"))
        for k in ("obs", "action", "flat"):
            assert b[k].untyped_storage().nbytes() <= max(64, total + 3 * 64)


# ----------------------------------------------------------------------------- sampler
def _stream_of(s: ChunkShuffleSampler, batch: list[int]) -> int:
    """The stream (worker) whose groups hold ``batch``'s rows."""
    g = s.group_rows or 1
    streams = s._streams(s._group_order()[s.rank])
    groups = {int(r) // g for r in batch}
    (owner,) = {i for i, st in enumerate(streams) if groups & set(st.tolist())}
    return owner


@pytest.mark.parametrize("n", [0, 7, 1000, 1003])
@pytest.mark.parametrize("workers", [0, 1, 2, 3])
@pytest.mark.parametrize("handover", [2, 3, 8])
@pytest.mark.parametrize("drop_last", [False, True])
def test_handovers_hold_the_same_batches_per_stream(
    n: int, workers: int, handover: int, drop_last: bool
) -> None:
    kw: dict[str, Any] = dict(group_rows=64, window=3, num_workers=workers, seed=4,
                              drop_last=drop_last)  # fmt: skip
    one = ChunkShuffleSampler(n, 32, **kw)
    many = ChunkShuffleSampler(n, 32, handover=handover, **kw)
    for epoch in (0, 1):
        one.set_epoch(epoch)
        many.set_epoch(epoch)
        singles = [list(b) for b in one]
        items = list(many)
        assert len(items) == len(many)
        assert many.batch_count() == len(singles) == len(one) == one.batch_count()
        flat = list(many.batches())
        assert sum(len(it.sizes) for it in items) == len(flat)
        assert [r for it in items for r in it] == [r for b in flat for r in b]
        for it in items:
            assert 1 <= len(it.sizes) <= handover
            assert sum(it.sizes) == len(it)
        # every stream's batches, in its order, are the same as without hand-overs
        k = max(1, workers)
        for stream in range(k):
            mine = [b for b in singles if _stream_of(one, b) == stream]
            assert [b for b in flat if _stream_of(many, b) == stream] == mine
        # a hand-over's batches are one stream's, and the streams take turns
        owners = [_stream_of(many, list(it)) for it in items]
        full_rounds = min((owners.count(s) for s in range(k)), default=0)
        assert owners[: full_rounds * k] == list(range(k)) * full_rounds
        if drop_last:
            assert all(len(b) == 32 for b in flat)


def test_handovers_with_drop_last_across_ranks() -> None:
    counts = []
    for rank in (0, 1):
        s = ChunkShuffleSampler(1003, 32, group_rows=100, window=2, rank=rank, world_size=2,
                                drop_last=True, num_workers=2, handover=4)  # fmt: skip
        flat = list(s.batches())
        assert all(len(b) == 32 for b in flat)
        assert len(flat) == s.batch_count()
        assert len(list(s)) == len(s)
        counts.append(len(flat))
    assert counts[0] == counts[1]


def test_handover_hints_cover_their_batches() -> None:
    """A hand-over carries the read-ahead hints of all its batches."""
    one = ChunkShuffleSampler(4000, 32, group_rows=100, window=2, seed=1)
    many = ChunkShuffleSampler(4000, 32, group_rows=100, window=2, seed=1, handover=5)
    hints_one = [r for b in one for r in b.ahead]
    hints_many = [r for b in many for r in b.ahead]
    assert hints_one == hints_many
    assert hints_one


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2"])
def test_bad_handover(bad: Any) -> None:
    with pytest.raises(PtdValueError, match="handover"):
        ChunkShuffleSampler(10, 2, handover=bad)


def test_plain_batches_have_no_sizes() -> None:
    s = ChunkShuffleSampler(100, 10, group_rows=10)
    assert all(b.sizes == () for b in s)
    assert [list(b) for b in s.batches()] == [list(b) for b in s]
    assert BatchIndices([1]).sizes == ()


def test_sizes_pickle() -> None:
    b = BatchIndices([3, 1, 2])
    b.sizes = (1, 2)
    b.ahead = ((0, 10),)
    c = pickle.loads(pickle.dumps(b))
    assert (c, c.sizes, c.ahead) == ([3, 1, 2], (1, 2), ((0, 10),))


# ----------------------------------------------------------------------------- dataset
def _handover(rows: list[list[int]]) -> BatchIndices:
    out = BatchIndices([r for b in rows for r in b])
    out.sizes = tuple(len(b) for b in rows)
    return out


@pytest.mark.parametrize("fmt", ["h5", "zarr"])
def test_a_handover_in_the_main_process_is_a_batch_list(tmp_path: Path, fmt: str) -> None:
    ds = StoreDataset(_store(tmp_path, fmt), group_bytes=1)
    assert {g.key: g.blocked for g in ds.leaves} == {
        ("obs",): True,
        ("action",): True,
        ("flat",): False,
    }
    rows = [[5, 990, 3], [7], [], [400, 401, 5]]
    got = ds.__getitems__(_handover(rows))
    assert isinstance(got, BatchList)
    assert len(got) == len(rows)
    for b, r in zip(got, rows, strict=True):
        _check(b, r)
    _owns([b for b in got if b.batch_size[0]])
    bufs = [buf for t in ds._blocks.values() for buf in t.bufs.values()]
    assert not any(np.shares_memory(b["obs"].numpy(), buf) for b in got for buf in bufs)
    ds.close()


def test_a_handover_whose_sizes_do_not_add_up(tmp_path: Path) -> None:
    ds = StoreDataset(_store(tmp_path, "h5"), group_bytes=1)
    bad = BatchIndices([1, 2, 3])
    bad.sizes = (1, 1)
    with pytest.raises(PtdValueError, match=r"hand-over of 3 rows cannot hold batches of \[1, 1\]"):
        ds.__getitems__(bad)
    ds.close()


@pytest.mark.parametrize("fmt", ["h5", "zarr"])
def test_a_handover_in_a_worker_travels_in_one_slot(
    tmp_path: Path, fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dsmod, "get_worker_info", lambda: object())
    monkeypatch.setattr(tr, "_ring", None)
    ds = StoreDataset(_store(tmp_path, fmt), group_bytes=1)
    rows = [[5, 990, 3], [7, 8], [400, 401, 5, 0]]
    got = ds.__getitems__(_handover(rows))
    assert isinstance(got, tr.HandOver)
    ring = tr.worker_ring()
    (slot,) = ring.slots
    for key in ("obs", "action", "flat"):  # gathered straight into the slot
        assert np.shares_memory(got.td[key].numpy(), slot.bytes)
    ref = collate(got)
    assert isinstance(ref, tr._SlotRef)
    assert ref.slot is slot  # sent as it was built: no copy into another slot
    wire = bytes(ForkingPickler.dumps(ref))
    back = ForkingPickler.loads(wire)
    assert isinstance(back, BatchList)
    assert ring.free_slots() == 1  # released once the batches were copied out
    slot.bytes[tr._HEADER :] = 0  # the batches own their memory: the slot may be reused
    for b, r in zip(back, rows, strict=True):
        _check(b, r)
    _owns(list(back))
    ds.close()


def test_a_handover_when_no_slot_is_free(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker whose ring lends no slot builds the batches apart, and each travels alone."""
    monkeypatch.setattr(dsmod, "get_worker_info", lambda: object())
    monkeypatch.setattr(tr, "_ring", None)
    ring = tr.worker_ring()
    ring.leases = False
    ds = StoreDataset(_store(tmp_path, "h5"), group_bytes=1)
    rows = [[1, 2], [3]]
    got = ds.__getitems__(_handover(rows))
    assert isinstance(got, BatchList)
    packed = collate(got)
    assert isinstance(packed, BatchList)
    assert all(isinstance(p, tr._SlotRef) for p in packed)
    back = ForkingPickler.loads(bytes(ForkingPickler.dumps(packed)))
    assert isinstance(back, BatchList)
    for b, r in zip(back, rows, strict=True):
        _check(b, r)
    ds.close()


# ----------------------------------------------------------------------------- transport
def _td(n: int, names: bool = False) -> ptd.TensorDict:
    data: dict[str, Any] = {
        "a": torch.arange(n * 3, dtype=torch.float32).reshape(n, 3),
        "n": {"b": torch.arange(n, dtype=torch.int16), "bf": torch.arange(n).to(torch.bfloat16)},
        "e": torch.zeros(n, 0),
    }
    if names:
        data["s"] = ptd.NonTensorStack.from_list([f"r{i}" for i in range(n)], [n])
    return ptd.TensorDict(data, batch_size=[n])


@pytest.mark.parametrize("sizes", [(6,), (2, 4), (1, 0, 5)])
def test_receive_splits_a_packed_handover(sizes: tuple[int, ...]) -> None:
    ring = tr.Ring()
    td = _td(sum(sizes))
    back = ForkingPickler.loads(bytes(ForkingPickler.dumps(ring.pack(td, sizes))))
    assert isinstance(back, BatchList)
    assert [b.batch_size[0] for b in back] == list(sizes)
    start = 0
    for b, n in zip(back, sizes, strict=True):
        for key in (("a",), ("n", "b"), ("n", "bf"), ("e",)):
            want = td[key][start : start + n]
            assert torch.equal(b[key], want), key
            assert b[key].dtype == want.dtype
        start += n
    assert ring.free_slots() == 1


def test_a_handover_with_non_tensor_entries_goes_batch_by_batch() -> None:
    ring = tr.Ring()
    td = _td(5, names=True)
    packed = ring.pack(td, (2, 3))
    assert isinstance(packed, BatchList)
    assert len(packed) == 2
    back = ForkingPickler.loads(bytes(ForkingPickler.dumps(packed)))
    assert [b["s"] for b in back] == [["r0", "r1"], ["r2", "r3", "r4"]]
    assert torch.equal(back[1]["a"], td["a"][2:])


def test_a_handover_falls_back_to_torch_when_slots_run_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tr, "_MAX_SLOTS", 1)
    ring = tr.Ring()
    first = ring.pack(_td(3))
    assert isinstance(first, tr._SlotRef)
    td = _td(4)
    second = ring.pack(td, (1, 3))  # no slot free: the batches themselves
    assert isinstance(second, BatchList)
    assert [b.batch_size[0] for b in second] == [1, 3]
    assert torch.equal(second[1]["a"], td["a"][1:])
    assert not np.shares_memory(second[1]["a"].numpy(), td["a"].numpy())


def test_receive_refuses_sizes_that_do_not_add_up() -> None:
    ring = tr.Ring()
    ref = ring.pack(_td(4))
    ref.sizes = (1, 2)
    with pytest.raises(PtdValueError, match="hand-over of 4 rows"):
        ForkingPickler.loads(bytes(ForkingPickler.dumps(ref)))
    assert ring.free_slots() == 1  # the slot is released all the same


def test_receive_refuses_a_handover_slot_with_non_tensor_entries() -> None:
    """pack never puts non-tensor entries in a hand-over's slot (it sends those batch by
    batch); a message that does anyway is refused, not received without them."""
    ring = tr.Ring()
    ref = ring.pack(_td(4))
    ref.sizes, ref.others = (2, 2), [(("s",), "x")]
    with pytest.raises(PtdValueError, match=r"non-tensor entries \(\['s'\]\)"):
        ForkingPickler.loads(bytes(ForkingPickler.dumps(ref)))
    assert ring.free_slots() == 1


# ----------------------------------------------------------------------------- loader
def test_handover_for() -> None:
    assert handover_for(1) == ptd.data.MAX_HANDOVER
    assert handover_for(ptd.data.HANDOVER_BYTES) == 1
    assert handover_for(ptd.data.HANDOVER_BYTES // 3) == 3
    assert handover_for(10 * ptd.data.HANDOVER_BYTES) == 1
    assert handover_for(0) == ptd.data.MAX_HANDOVER


@pytest.mark.parametrize("fmt", ["h5", "zarr"])
def test_loader_chooses_handovers_by_batch_bytes(tmp_path: Path, fmt: str) -> None:
    path = _store(tmp_path, fmt)
    row = 4 * 4 + 8 + 8  # obs, action, flat
    dl = loader(path, 64, seed=0)
    assert isinstance(dl, StoreLoader)
    assert dl.batch_sampler.handover == handover_for(64 * row)  # type: ignore[union-attr]
    dl2 = loader(path, 64, seed=0, num_workers=2, handover=3)
    assert dl2.batch_sampler.handover == 3  # type: ignore[union-attr]
    assert dl2.prefetch_factor == -(-ptd.data.PREFETCH_BATCHES // 3)
    dl3 = loader(path, 64, seed=0, num_workers=2, handover=1)
    assert dl3.prefetch_factor == ptd.data.PREFETCH_BATCHES
    dl4 = loader(path, 64, seed=0, num_workers=2, handover=16, prefetch_factor=5)
    assert dl4.prefetch_factor == 5
    for d in (dl, dl2, dl3, dl4):
        d.dataset.close()  # type: ignore[attr-defined]


@pytest.mark.parametrize("bad", [0, -2, True, 2.0])
def test_loader_refuses_a_bad_handover(tmp_path: Path, bad: Any) -> None:
    with pytest.raises(PtdValueError, match="handover must be a positive int"):
        loader(_store(tmp_path, "h5"), 64, handover=bad)


@pytest.mark.parametrize("fmt", ["h5", "zarr"])
@pytest.mark.parametrize("workers", [0, 2])
def test_loader_yields_each_batch_of_its_handovers(tmp_path: Path, fmt: str, workers: int) -> None:
    if workers and "fork" not in mp.get_all_start_methods():
        pytest.skip("no fork start method here")
    path = _store(tmp_path, fmt)
    ctx = {"multiprocessing_context": "fork", "persistent_workers": True} if workers else {}
    dl = loader(path, 48, window=3, seed=3, num_workers=workers, handover=4, **ctx)
    plain = loader(path, 48, window=3, seed=3, num_workers=workers, handover=1)
    sampler = dl.batch_sampler
    assert isinstance(sampler, ChunkShuffleSampler)
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        plain.batch_sampler.set_epoch(epoch)  # type: ignore[union-attr]
        want = [list(b) for b in sampler.batches()]
        got = list(dl)
        assert len(got) == len(dl) == len(want) == sampler.batch_count()
        assert len(dl.batch_sampler) < len(dl)  # type: ignore[arg-type]
        for b, rows in zip(got, want, strict=True):
            _check(b, rows)
        _owns(got[:6])
        assert sorted(r for b in want for r in b) == list(range(N))
        # the same batches as one batch per message (the streams' turns differ)
        singles = sorted(tuple(b["action"].tolist()) for b in plain)
        assert sorted(tuple(b) for b in want) == singles
    for d in (dl, plain):
        d.dataset.close()  # type: ignore[attr-defined]


def test_store_loader_is_a_dataloader_for_plain_samplers(tmp_path: Path) -> None:
    """Without hand-overs a StoreLoader is torch's DataLoader: its len is the sampler's."""
    ds = StoreDataset(_store(tmp_path, "h5"), group_bytes=1)
    batches = [[0, 1], [2, 3], [4]]
    dl = StoreLoader(ds, batch_sampler=batches, collate_fn=collate)  # type: ignore[arg-type]
    assert len(dl) == 3
    assert [b["action"].tolist() for b in dl] == batches
    ds.close()


def test_pinning_keeps_a_handover_a_batch_list(monkeypatch: pytest.MonkeyPatch) -> None:
    """The DataLoader's pin-memory thread pins each batch of a hand-over and keeps it a
    BatchList, which StoreLoader then splits (pinning itself needs an accelerator: faked)."""
    from torch.utils.data._utils.pin_memory import pin_memory

    pinned: list[int] = []

    def fake_pin(td: Any, device: Any = None) -> Any:
        pinned.append(int(td.batch_size[0]))
        return td

    monkeypatch.setattr(ptd.TensorDict, "pin_memory", fake_pin)
    batches = BatchList([_td(2), _td(3)])
    out = pin_memory(batches)
    assert isinstance(out, BatchList)
    assert pinned == [2, 3]
    assert [b.batch_size[0] for b in out] == [2, 3]
