"""How many times each decoded byte is copied on its way into a DataLoader batch: at most
twice. The decoder's output (the inflated chunk, still in shuffle order for gzip + shuffle
HDF5; zarr's decoded chunk) is copied once, straight into the dataset's block buffer (the
shuffle undone in that copy), and once more, straight into the batch: the slot of the
worker's shared-memory ring that the batch travels in (or, without workers, the batch's own
tensor). Shown by buffer identity: what each copy writes into is the next step's memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import torch
import zarr

from ptd.data import ChunkShuffleSampler, StoreDataset, collate
from ptd.data import dataset as dataset_module
from ptd.data.transport import BatchList, HandOver, worker_ring
from ptd.storage.read import decoded
from ptd.storage.read.shuffled import ShuffledChunk
from ptd.storage.zarr.private import decode_sync

N, CHUNK = 2048, 128
#: zarr < 3.1.6 has no synchronous codec decode: zarr reads its own chunks there
ZARR_SERVED = decode_sync(zarr.codecs.BytesCodec()) is not None


def _walk(n: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    return np.round(np.cumsum(rng.standard_normal((n, 8)) * 0.01, axis=0), 3).astype("f4")


def _store(tmp_path: Path, fmt: str) -> tuple[str, dict[str, np.ndarray]]:
    """A store made with the format's own library, as other tools write them."""
    data = {"obs": _walk(N), "action": np.arange(N, dtype=np.int64)}
    if fmt == "h5":
        path = str(tmp_path / "s.h5")
        with h5py.File(path, "w") as f:
            for k, v in data.items():
                f.create_dataset(k, data=v, chunks=(CHUNK, *v.shape[1:]), compression="gzip",
                                 shuffle=True)  # fmt: skip
    else:
        path = str(tmp_path / "s.zarr")
        root = zarr.open_group(path, mode="w")
        for k, v in data.items():
            root.create_array(k, data=v, chunks=(CHUNK, *v.shape[1:]))
    return path, data


@pytest.fixture
def trace(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """Every decoded chunk ptd's chunk reader handled, and every ``out`` it decoded into."""
    seen: dict[str, list[Any]] = {"chunks": [], "outs": []}
    real = decoded.read_chunked

    def read_chunked(arr: Any, selection: Any, cache: Any, out: Any = None) -> Any:
        fetch = arr.fetch

        def traced(coords: Any) -> Any:
            chunk = fetch(coords)
            seen["chunks"].append(chunk)
            return chunk

        seen["outs"].append(out)
        return real(decoded.ChunkedArray(arr.key, arr.shape, arr.chunks, arr.dtype, traced,
                                         arr.fill), selection, cache, out)  # fmt: skip

    for module in ("ptd.storage.h5.decode", "ptd.storage.zarr.decode"):
        monkeypatch.setattr(f"{module}.read_chunked", read_chunked)
    return seen


@pytest.mark.parametrize("fmt", ["h5", "zarr"])
@pytest.mark.parametrize("workers", [0, 2], ids=["no-workers", "in-a-worker"])
def test_each_decoded_byte_is_copied_at_most_twice(
    tmp_path: Path,
    fmt: str,
    workers: int,
    trace: dict[str, list[Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if fmt == "zarr" and not ZARR_SERVED:
        pytest.skip(f"zarr {zarr.__version__} has no synchronous codec decode for ptd to use")
    path, data = _store(tmp_path, fmt)
    if workers:  # as in a DataLoader worker: the batch is built in the worker's ring
        monkeypatch.setattr(dataset_module, "get_worker_info", lambda: object())
    ds = StoreDataset(path, group_bytes=1)  # one chunk per block
    assert all(g.blocked for g in ds.leaves)
    sampler = ChunkShuffleSampler(ds, 64, window=2, seed=0)
    for rows in sampler:
        n_outs = len(trace["outs"])
        batch = ds.__getitems__(rows)
        want = np.asarray(list(rows))
        assert np.array_equal(batch["action"].numpy(), want)
        assert np.array_equal(batch["obs"].numpy(), data["obs"][want])
        # copy 1: every block was decoded straight into the dataset's block buffer
        bufs = [b for t in ds._blocks.values() for b in t.bufs.values()]
        for out in trace["outs"][n_outs:]:
            assert out is not None
            assert any(np.shares_memory(out, b) for b in bufs)
        # copy 2: the batch's tensors are the memory it travels in
        if workers:
            ring = worker_ring()
            for key in ("obs", "action"):
                assert any(np.shares_memory(batch[key].numpy(), s.bytes) for s in ring.slots)
            ref = collate(batch)  # sent as it is: no copy into a slot
            for key in ("obs", "action"):
                assert np.shares_memory(batch[key].numpy(), ref.slot.bytes)
            ref.slot.flag[0] = 0  # (what the receiving process does once it has the batch)
        else:
            for key in ("obs", "action"):
                assert not any(np.shares_memory(batch[key].numpy(), b) for b in bufs)
    # the decoder's output itself went into copy 1: an HDF5 chunk still in shuffle order
    # (its un-shuffle is that copy), zarr's decoded chunk as zarr's codecs gave it
    assert trace["chunks"]
    if fmt == "h5":
        assert all(isinstance(c, ShuffledChunk) for c in trace["chunks"])
    ds.close()


def test_a_batch_left_through_another_collate_is_never_overwritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch built in a slot that went out without ptd's collate (a user's collate_fn: torch
    shares the slot's memory itself) keeps its slot: the ring retires it, and builds later
    batches in new memory."""
    path, data = _store(tmp_path, "h5")
    monkeypatch.setattr(dataset_module, "get_worker_info", lambda: object())
    ds = StoreDataset(path, group_bytes=1)
    ring = worker_ring()
    ring.leases, ring._leased = True, None
    first = ds.__getitems__(list(range(0, 64)))
    kept = first["obs"].clone()
    second = ds.__getitems__(list(range(64, 128)))  # no collate in between
    assert not ring.leases
    assert torch.equal(first["obs"], kept)  # not overwritten by the second batch
    assert not any(np.shares_memory(second["obs"].numpy(), s.bytes) for s in ring.slots)
    assert np.array_equal(second["obs"].numpy(), data["obs"][64:128])
    ds.close()


@pytest.mark.parametrize("fmt", ["h5", "zarr"])
@pytest.mark.parametrize("workers", [0, 2], ids=["no-workers", "in-a-worker"])
def test_a_handover_copies_each_decoded_byte_at_most_twice(
    tmp_path: Path,
    fmt: str,
    workers: int,
    trace: dict[str, list[Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Several batches read in one go (``handover=4``): in a worker they are gathered
    together straight into one ring slot and sent as they are; without workers each batch
    is gathered straight into its own tensors. Neither adds a copy."""
    if fmt == "zarr" and not ZARR_SERVED:
        pytest.skip(f"zarr {zarr.__version__} has no synchronous codec decode for ptd to use")
    path, data = _store(tmp_path, fmt)
    if workers:
        monkeypatch.setattr(dataset_module, "get_worker_info", lambda: object())
    ds = StoreDataset(path, group_bytes=1)
    sampler = ChunkShuffleSampler(ds, 64, window=2, seed=0, handover=4)
    seen = 0
    for rows in sampler:
        assert len(rows.sizes) > 1 or len(rows) <= 64  # type: ignore[attr-defined]
        n_outs = len(trace["outs"])
        got = ds.__getitems__(rows)
        bufs = [b for t in ds._blocks.values() for b in t.bufs.values()]
        for out in trace["outs"][n_outs:]:
            assert any(np.shares_memory(out, b) for b in bufs)
        want = np.asarray(list(rows))
        if workers:
            assert isinstance(got, HandOver)
            assert got.sizes == rows.sizes  # type: ignore[attr-defined]
            assert np.array_equal(got.td["obs"].numpy(), data["obs"][want])
            ref = collate(got)  # one message for all its batches: no copy into a slot
            for key in ("obs", "action"):
                assert np.shares_memory(got.td[key].numpy(), ref.slot.bytes)
            ref.slot.flag[0] = 0
        else:
            assert isinstance(got, BatchList)
            assert [len(b) for b in got] == list(rows.sizes)  # type: ignore[attr-defined]
            assert np.array_equal(torch.cat([b["obs"] for b in got]).numpy(), data["obs"][want])
            for batch in got:
                for key in ("obs", "action"):
                    assert not any(np.shares_memory(batch[key].numpy(), b) for b in bufs)
        seen += len(rows)
    assert seen == N
    ds.close()
