"""ptd.data.transport: batches from DataLoader workers through reused shared-memory slots."""

from __future__ import annotations

import pickle
from multiprocessing.reduction import ForkingPickler
from typing import Any

import pytest
import torch
import torch.multiprocessing

import ptd
import ptd.data.dataset as dsmod
import ptd.data.transport as tr
from ptd.data import collate
from ptd.errors import PtdValueError


def _batch(n: int = 5, seed: int = 0) -> ptd.TensorDict:
    g = torch.Generator().manual_seed(seed)
    return ptd.TensorDict(
        {
            "obs": torch.randn(n, 3, generator=g),
            "n": {
                "b": torch.randint(-9, 9, (n,), dtype=torch.int16, generator=g),
                "f": torch.rand(n, generator=g) > 0.5,
            },
            "bf": torch.randn(n, 2, generator=g).to(torch.bfloat16),
            "names": ptd.NonTensorStack.from_list([str(i) for i in range(n)], [n]),
        },
        batch_size=[n],
    )


def _same(a: Any, b: Any) -> None:
    assert isinstance(a, ptd.TensorDict)
    assert a.batch_size == b.batch_size
    for key in b.keys(True, True):
        assert torch.equal(a[key], b[key]), key
        assert a[key].dtype == b[key].dtype, key
    assert a["names"] == b["names"]


def test_collate_in_a_worker_packs_into_a_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dsmod, "get_worker_info", lambda: object())
    monkeypatch.setattr(tr, "_ring", None)
    td = _batch()
    packed = collate(td)
    assert isinstance(packed, tr._SlotRef)
    back = ForkingPickler.loads(bytes(ForkingPickler.dumps(packed)))
    _same(back, td)
    slot = tr.worker_ring().slots[0]
    slot.bytes[:] = 0  # the batch owns its memory: the slot may be reused at once
    _same(back, td)
    assert tr.worker_ring().free_slots() == 1  # released on arrival


def test_slots_are_reused_and_sent_once() -> None:
    ring = tr.Ring()
    first = ring.pack(_batch(seed=1))
    once = ForkingPickler.dumps(first)
    got1 = ForkingPickler.loads(bytes(once))
    second = ring.pack(_batch(seed=2))
    assert second.slot is first.slot  # the released slot again
    again = pickle.dumps(second)  # no memory in it: plain pickle works, and it is small
    assert len(again) < len(pickle.dumps(_batch(seed=2)))
    assert len(ring.slots) == 1
    got2 = pickle.loads(again)
    _same(got2, _batch(seed=2))
    _same(got1, _batch(seed=1))  # the first batch owns its memory: not overwritten


def test_slots_in_flight_are_never_overwritten() -> None:
    ring = tr.Ring()
    refs = [ring.pack(_batch(seed=i)) for i in range(3)]  # none received yet
    assert len({id(r.slot) for r in refs}) == 3
    assert ring.free_slots() == 0
    wire = [ForkingPickler.dumps(r) for r in refs]
    for i, w in enumerate(wire):
        _same(ForkingPickler.loads(bytes(w)), _batch(seed=i))
    assert ring.free_slots() == 3


def test_a_larger_batch_gets_a_larger_slot() -> None:
    ring = tr.Ring()
    ForkingPickler.loads(bytes(ForkingPickler.dumps(ring.pack(_batch(4)))))
    big = ring.pack(_batch(400, seed=3))
    assert big.slot is not ring.slots[0]
    assert len(ring.slots) == 2
    _same(ForkingPickler.loads(bytes(ForkingPickler.dumps(big))), _batch(400, seed=3))
    small = ring.pack(_batch(4, seed=4))  # fits a free slot again
    assert small.slot in ring.slots
    assert len(ring.slots) == 2
    _same(ForkingPickler.loads(bytes(ForkingPickler.dumps(small))), _batch(4, seed=4))


def test_too_many_in_flight_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tr, "_MAX_SLOTS", 2)
    ring = tr.Ring()
    a, b = ring.pack(_batch(seed=0)), ring.pack(_batch(seed=1))
    td = _batch(seed=2)
    assert ring.pack(td) is td  # torch's own transfer
    ForkingPickler.loads(bytes(ForkingPickler.dumps(a)))
    c = ring.pack(_batch(seed=3))
    assert c.slot is a.slot
    del b


def test_unknown_slot_is_an_error() -> None:
    ring = tr.Ring()
    ref = ring.pack(_batch())
    ref.slot.sent = True  # as if its memory had gone to another process
    with pytest.raises(PtdValueError, match="never received"):
        pickle.loads(pickle.dumps(ref))


def test_empty_and_zero_size_leaves() -> None:
    ring = tr.Ring()
    td = ptd.TensorDict({"a": torch.zeros(0, 3), "b": torch.ones(0)}, batch_size=[0])
    back = ForkingPickler.loads(bytes(ForkingPickler.dumps(ring.pack(td))))
    assert back.batch_size == torch.Size([0])
    assert back["a"].shape == (0, 3)


def test_a_slot_pickled_by_value_is_never_kept() -> None:
    """Plain pickle copies the slot's memory: that copy serves its batch once and is not kept
    (a later batch in the slot would read stale bytes from it)."""
    ring = tr.Ring()
    ref = ring.pack(_batch(seed=5))
    token = ring.token
    _same(pickle.loads(pickle.dumps(ref)), _batch(seed=5))
    assert ref.slot.number not in tr._seen.get(token, {})
    assert ring.free_slots() == 0  # the copy's flag was released, not the slot's
    nxt = ring.pack(_batch(seed=6))  # a new slot, sent with its memory
    assert nxt.slot is not ref.slot
    _same(ForkingPickler.loads(bytes(ForkingPickler.dumps(nxt))), _batch(seed=6))
