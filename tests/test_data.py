"""ptd.data: the chunk-aware shuffling sampler (every row once per epoch and rank, seeds,
epochs, drop_last, streams per worker), StoreDataset (equal to direct reads, blocked and direct
leaves, pickling), and a DataLoader under fork and spawn workers."""

from __future__ import annotations

import multiprocessing as mp
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import ptd
from ptd import PersistentTensorDict
from ptd.data import ChunkShuffleSampler, StoreDataset, collate, loader, store_leaves
from ptd.errors import PtdIndexError, PtdTypeError, PtdValueError

N = 1000


def _data(n: int = N) -> dict[str, Any]:
    return {
        "obs": torch.arange(n * 4, dtype=torch.float32).reshape(n, 4),
        "done": torch.arange(n) % 7 == 0,
        "next": {"obs": -torch.arange(n * 4, dtype=torch.float32).reshape(n, 4)},
        "action": torch.arange(n, dtype=torch.int64),
    }


def _store(tmp_path: Path, backend: str, compressed: bool = True, chunks: int = 50) -> str:
    """A store of ``_data()``: compressed with ``chunks``-row chunks, or as from_dict writes it
    (h5 contiguous / zarr one uncompressed chunk: the fast path)."""
    plain = str(tmp_path / f"plain.{backend}")
    PersistentTensorDict.from_dict(_data(), plain, backend=backend).close()
    if not compressed:
        return plain
    out = str(tmp_path / f"packed.{backend}")
    ptd.convert(plain, out, to=backend, chunks=chunks, compression="gzip")
    return out


# ----------------------------------------------------------------------------- sampler
def _rows(batches: list[list[int]]) -> list[int]:
    return [i for b in batches for i in b]


@pytest.mark.parametrize("n", [0, 1, 999, 1000, 1003])
@pytest.mark.parametrize("group_rows", [None, 1, 64, 100, 5000])
@pytest.mark.parametrize("workers", [0, 3])
def test_every_row_once_per_epoch(n: int, group_rows: int | None, workers: int) -> None:
    s = ChunkShuffleSampler(n, 32, group_rows=group_rows, window=3, num_workers=workers, seed=5)
    for epoch in range(2):
        s.set_epoch(epoch)
        batches = list(s)
        assert sorted(_rows(batches)) == list(range(n))
        assert len(batches) == len(s)
        assert all(1 <= len(b) <= 32 for b in batches)
        # partial batches only at the end of a stream: at most one per stream
        assert sum(len(b) < 32 for b in batches) <= max(1, workers)


@pytest.mark.parametrize("world", [2, 3])
@pytest.mark.parametrize("drop_last", [False, True])
def test_ranks_partition_the_rows(world: int, drop_last: bool) -> None:
    per_rank = [
        list(
            ChunkShuffleSampler(
                1003, 16, group_rows=40, window=2, seed=1, rank=r, world_size=world,
                drop_last=drop_last,
            )
        )
        for r in range(world)
    ]  # fmt: skip
    seen = [i for batches in per_rank for i in _rows(batches)]
    assert len(seen) == len(set(seen))  # no row twice, over all ranks
    if drop_last:
        assert len({len(b) for b in per_rank}) == 1  # the same number of batches per rank
        assert all(len(b) == 16 for batches in per_rank for b in batches)
        assert len(seen) > 1003 - world * 16 * 2 - 40 * world
    else:
        assert sorted(seen) == list(range(1003))
    # each rank's rows are whole groups (its share of the chunk groups)
    for batches in per_rank:
        groups = {i // 40 for i in _rows(batches)}
        if not drop_last:
            assert sum(min(40, 1003 - g * 40) for g in groups) == len(_rows(batches))


def test_seed_and_epoch_fix_the_order() -> None:
    def run(seed: int, epoch: int) -> list[list[int]]:
        s = ChunkShuffleSampler(1000, 50, group_rows=100, window=2, seed=seed)
        s.set_epoch(epoch)
        return list(s)

    assert run(0, 0) == run(0, 0)
    assert run(0, 0) != run(1, 0)
    assert run(0, 0) != run(0, 1)
    s = ChunkShuffleSampler(1000, 50, group_rows=100, window=2, seed=0)
    assert list(s) == list(s)  # without set_epoch, the same epoch again


def test_drop_last() -> None:
    s = ChunkShuffleSampler(1000, 64, group_rows=100, window=3, drop_last=True)
    batches = list(s)
    assert len(batches) == len(s) == 1000 // 64
    assert all(len(b) == 64 for b in batches)
    assert len(set(_rows(batches))) == 1000 // 64 * 64


def test_window_bounds_where_rows_come_from() -> None:
    """A batch holds rows of at most window groups (+ the leftovers of the window before)."""
    s = ChunkShuffleSampler(10_000, 100, group_rows=100, window=4, seed=3)
    for b in s:
        assert len({i // 100 for i in b}) <= 8
    # unshuffled: in order
    s = ChunkShuffleSampler(1000, 100, group_rows=100, shuffle=False)
    assert _rows(list(s)) == list(range(1000))


def test_windows_mix_rows() -> None:
    s = ChunkShuffleSampler(10_000, 100, group_rows=100, window=8, seed=0)
    distinct = [len({i // 100 for i in b}) for b in s]
    assert np.mean(distinct) > 4  # rows of several groups in each batch
    assert _rows(list(s)) != sorted(_rows(list(s)))


def test_streams_follow_the_workers() -> None:
    """With num_workers=2, batch i goes to worker i % 2: each worker sees its own groups."""
    s = ChunkShuffleSampler(2000, 50, group_rows=100, window=2, num_workers=2, seed=0)
    batches = list(s)
    g0 = {i // 100 for b in batches[0::2] for i in b}
    g1 = {i // 100 for b in batches[1::2] for i in b}
    assert not g0 & g1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"batch_size": 0},
        {"batch_size": True},
        {"window": 0},
        {"group_rows": -1},
        {"rank": 2, "world_size": 2},
        {"world_size": 0},
        {"num_workers": -1},
    ],
)
def test_sampler_bad_arguments(kwargs: dict[str, Any]) -> None:
    args = {"batch_size": 8, **kwargs}
    with pytest.raises(PtdValueError):
        ChunkShuffleSampler(100, **args)


# ----------------------------------------------------------------------------- dataset
@pytest.mark.parametrize("compressed", [True, False])
def test_dataset_equals_direct_reads(tmp_path: Path, backend: str, compressed: bool) -> None:
    path = _store(tmp_path, backend, compressed)
    ds = StoreDataset(path)
    assert len(ds) == N
    assert all(g.blocked for g in ds.leaves) == compressed
    want = _data()
    idx = [5, 999, 0, 5, 123, 51, 50, 49, -1]
    got = ds.__getitems__(idx)
    assert isinstance(got, ptd.TensorDict) and got.batch_size == torch.Size([len(idx)])
    t = torch.tensor(idx)
    for key in [("obs",), ("done",), ("next", "obs"), ("action",)]:
        ref = want[key[0]] if len(key) == 1 else want[key[0]][key[1]]
        assert torch.equal(got.get(key), ref[t]), key
        assert got.get(key).dtype == ref.dtype
    one = ds[7]
    assert one.batch_size == torch.Size([]) and torch.equal(one["obs"], want["obs"][7])
    assert ds.__getitems__([]).batch_size == torch.Size([0])
    with pytest.raises(PtdIndexError):
        ds.__getitems__([N])
    ds.close()


def test_dataset_blocks_decode_each_group_once(tmp_path: Path, backend: str) -> None:
    path = _store(tmp_path, backend, chunks=50)
    ds = StoreDataset(path, group_bytes=1)  # groups of one chunk (50 rows)
    assert ds.group_rows == 50
    s = ChunkShuffleSampler(ds, 32, window=4, seed=0)
    seen = 0
    for b in s:
        batch = ds.__getitems__(b)
        assert torch.equal(batch["action"], torch.tensor(b))
        seen += len(b)
    assert seen == N
    blocked = sum(g.blocked for g in ds.leaves)
    assert ds.blocks_read == blocked * (N // 50)  # each group read once per leaf
    ds.close()


@pytest.mark.parametrize("cache_rows", [1, 120, 400])
def test_dataset_small_buffers_stay_exact(tmp_path: Path, backend: str, cache_rows: int) -> None:
    """Few slots: blocks are evicted least recently used (never one the batch needs), and a
    batch spanning more blocks than the slots is read directly; every value stays exact."""
    path = _store(tmp_path, backend, chunks=50)
    ds = StoreDataset(path, group_bytes=1, cache_rows=cache_rows)  # 50-row blocks
    want = _data()
    rng = np.random.default_rng(cache_rows)
    for k in range(40):
        if k % 3 == 0:  # rows of a few neighbouring blocks
            start = int(rng.integers(0, N - 150))
            idx = rng.permutation(np.arange(start, start + 150))[: int(rng.integers(1, 60))]
        else:  # rows from anywhere
            idx = rng.integers(-N, N, size=int(rng.integers(1, 9)))
        got = ds.__getitems__(idx.tolist())
        t = torch.as_tensor(np.where(idx < 0, idx + N, idx))
        assert torch.equal(got["obs"], want["obs"][t])
        assert torch.equal(got["next", "obs"], want["next"]["obs"][t])
        assert torch.equal(got["done"], want["done"][t])
        assert torch.equal(got["action"], t)
    for table in ds._blocks.values():  # the table agrees with itself
        held = table.block_in[table.block_in >= 0]
        assert (table.slot_of[held] >= 0).all() and len(set(held.tolist())) == len(held)
        assert int((table.slot_of >= 0).sum()) == len(held) <= table.slots
    ds.close()


def test_dataset_keys_and_sources(tmp_path: Path, backend: str) -> None:
    path = _store(tmp_path, backend)
    ds = StoreDataset(path, keys=["obs", ("next", "obs")])
    got = ds.__getitems__([1, 2])
    assert set(got.keys(True, True)) == {"obs", ("next", "obs")}
    with pytest.raises(PtdValueError, match="not leaves"):
        StoreDataset(path, keys=["nope"])
    p = (
        PersistentTensorDict.from_h5(path)
        if backend == "h5"
        else PersistentTensorDict.from_zarr(path)
    )
    ds2 = StoreDataset(p)
    assert torch.equal(ds2.__getitems__([3, 1])["obs"], _data()["obs"][[3, 1]])
    with pytest.raises(PtdValueError, match="indexed view"):
        StoreDataset(p[1:5])
    with pytest.raises(PtdTypeError):
        StoreDataset(42)
    with pytest.raises(PtdTypeError):
        StoreDataset(p, fast_path=False)
    p.close()


def test_dataset_pickles_without_blocks(tmp_path: Path, backend: str) -> None:
    ds = StoreDataset(_store(tmp_path, backend))
    ds.__getitems__([1, 500])
    assert ds._blocks
    back = pickle.loads(pickle.dumps(ds))
    assert back._blocks == {} and back._td is None
    assert torch.equal(back.__getitems__([1, 500])["obs"], ds.__getitems__([1, 500])["obs"])
    back.close()
    ds.close()


def test_collate() -> None:
    td = ptd.TensorDict({"a": torch.zeros(3)}, batch_size=[3])
    assert collate(td) is td
    rows = [ptd.TensorDict({"a": torch.tensor(float(i))}, batch_size=[]) for i in range(3)]
    assert torch.equal(collate(rows)["a"], torch.arange(3.0))
    with pytest.raises(PtdTypeError):
        collate([1, 2])


def test_store_leaves_geometry(tmp_path: Path, backend: str) -> None:
    leaves = {g.key: g for g in StoreDataset(_store(tmp_path, backend, chunks=50)).leaves}
    assert leaves["obs",].chunk_rows == 50 and leaves["obs",].row_bytes == 16
    plain = PersistentTensorDict.from_dict(
        _data(), str(tmp_path / f"p2.{backend}"), backend=backend
    )
    assert not any(g.blocked for g in store_leaves(plain))
    plain.close()


# ----------------------------------------------------------------------------- DataLoader
def _epoch(dl: DataLoader, epoch: int) -> list[torch.Tensor]:
    dl.batch_sampler.set_epoch(epoch)  # type: ignore[union-attr]
    return [b["action"] for b in dl]


@pytest.mark.parametrize("ctx", ["fork", "spawn"])
def test_dataloader_workers_give_the_same_batches(tmp_path: Path, backend: str, ctx: str) -> None:
    if ctx not in mp.get_all_start_methods():
        pytest.skip(f"no {ctx} start method here")
    path = _store(tmp_path, backend)
    ds = StoreDataset(path, group_bytes=1)
    ds.__getitems__([0, 1])  # the parent holds blocks before the workers start (fork: inherited)
    want = _epoch(loader(ds, 64, window=3, seed=2, num_workers=0), 1)
    dl = loader(ds, 64, window=3, seed=2, num_workers=2, multiprocessing_context=ctx)
    sampler_batches = list(dl.batch_sampler)  # type: ignore[arg-type]
    got = _epoch(dl, 1)
    assert [b.tolist() for b in got] == [b for b in list(dl.batch_sampler)]  # type: ignore[arg-type]
    assert sorted(torch.cat(got).tolist()) == list(range(N))
    assert sampler_batches != [b.tolist() for b in got]  # set_epoch(1) changed the order
    # the same batches as in-process, with the same sampler settings
    ref = _epoch(loader(ds, 64, window=3, seed=2, num_workers=2), 1)
    assert [b.tolist() for b in got] == [b.tolist() for b in ref]
    assert sorted(torch.cat(want).tolist()) == list(range(N))
    # every leaf of every batch, over two epochs of persistent workers (the second epoch's
    # batches reuse the workers' shared slots)
    data = _data()
    dl = loader(ds, 64, window=3, seed=2, num_workers=2, multiprocessing_context=ctx,
                persistent_workers=True)  # fmt: skip
    for epoch in (0, 1):
        dl.batch_sampler.set_epoch(epoch)  # type: ignore[union-attr]
        rows = []
        for b in dl:
            a = b["action"]
            rows += a.tolist()
            assert torch.equal(b["obs"], data["obs"][a])
            assert torch.equal(b["next", "obs"], data["next"]["obs"][a])
            assert torch.equal(b["done"], data["done"][a])
        assert sorted(rows) == list(range(N))
    ds.close()


def test_loader_full_rows_and_types(tmp_path: Path, backend: str) -> None:
    path = _store(tmp_path, backend, compressed=False)
    dl = loader(path, 100, seed=0, drop_last=True)
    batches = list(dl)
    assert len(batches) == len(dl) == N // 100
    b = batches[0]
    want = _data()
    idx = b["action"]
    assert torch.equal(b["next", "obs"], want["next"]["obs"][idx])
    assert torch.equal(b["done"], want["done"][idx])


@pytest.mark.skipif(
    not torch.accelerator.is_available(), reason="pinned memory needs an accelerator"
)
@pytest.mark.parametrize("workers", [0, 2])
def test_pin_memory(tmp_path: Path, backend: str, workers: int) -> None:
    dl = loader(_store(tmp_path, backend), 64, num_workers=workers, pin_memory=True)
    batch = next(iter(dl))
    assert isinstance(batch, ptd.TensorDict)
    assert all(t.is_pinned() for t in batch.values(True, True))
    dev = torch.accelerator.current_accelerator()
    on = batch.to(dev)
    assert torch.equal(on["obs"].cpu(), batch["obs"])


def test_pin_memory_is_what_the_dataloader_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch's pin thread calls ``batch.pin_memory()``: ours returns a TensorDict."""
    from torch.utils.data._utils.pin_memory import pin_memory

    td = ptd.TensorDict({"a": torch.zeros(3), "n": {"b": torch.ones(3)}}, batch_size=[3])
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self, *a, **k: self + 1)
    out = pin_memory(td)
    assert isinstance(out, ptd.TensorDict) and torch.equal(out["n", "b"], torch.full((3,), 2.0))


def test_sharded_zarr_uses_inner_chunks(tmp_path: Path) -> None:
    import zarr

    path = str(tmp_path / "sharded.zarr")
    g = zarr.open_group(path, mode="w")
    ref = np.arange(N * 4, dtype=np.float32).reshape(N, 4)
    arr = g.create_array("obs", shape=ref.shape, dtype=ref.dtype, chunks=(50, 4), shards=(200, 4))
    arr[...] = ref
    ds = StoreDataset(path, group_bytes=1)
    (leaf,) = ds.leaves
    assert leaf.chunk_rows == 50 and leaf.blocked  # the inner chunks, not the 200-row shards
    assert ds.group_rows == 50
    got = ds.__getitems__([999, 0, 420])
    assert np.array_equal(got["obs"].numpy(), ref[[999, 0, 420]])
    ds.close()
