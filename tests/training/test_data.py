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


@pytest.mark.parametrize("window", [1, 3, 8])
@pytest.mark.parametrize("workers", [0, 2])
def test_sliding_window_keeps_few_groups_live(window: int, workers: int) -> None:
    """One group joins a stream per step: at any batch, the groups with rows both at or before
    it and after it (what a worker must hold decoded) are at most window + 1, and a group's
    rows are spread over about window steps, not the whole epoch."""
    g, b = 100, 25
    s = ChunkShuffleSampler(20_000, b, group_rows=g, window=window, seed=1, num_workers=workers)
    batches = list(s)
    for stream in range(max(1, workers)):
        mine = batches[stream :: max(1, workers)]
        first: dict[int, int] = {}
        last: dict[int, int] = {}
        for i, batch in enumerate(mine):
            for row in batch:
                first.setdefault(row // g, i)
                last[row // g] = i
        live = np.zeros(len(mine) + 1, dtype=np.int64)
        for grp in first:
            live[first[grp]] += 1
            live[last[grp] + 1] -= 1
        assert np.cumsum(live).max() <= window + 1
        spans = [last[grp] - first[grp] + 1 for grp in first]
        assert max(spans) <= (window + 1) * g // b + 2
        if window > 1:
            assert np.median(spans) > (window - 1) * g // b  # spread out, not a group at once


@pytest.mark.parametrize("workers", [0, 3])
def test_hints_name_the_next_group_of_the_stream(workers: int) -> None:
    """Each stream hints every group it will visit, except its first, before the group's
    first row, and only its own groups."""
    g = 64
    s = ChunkShuffleSampler(5000, 32, group_rows=g, window=4, seed=2, num_workers=workers)
    batches = list(s)
    k = max(1, workers)
    owner = {int(x): i for i, st in enumerate(s._streams(s._group_order()[0])) for x in st}
    for stream in range(k):
        mine = [b for b in batches if owner[b[0] // g] == stream]  # streams own their groups
        hinted: list[int] = []
        seen: set[int] = set()
        for batch in mine:
            for start, stop in getattr(batch, "ahead", ()):
                assert start % g == 0
                assert stop == min(5000, start + g)
                assert start // g not in seen  # hinted before it is drawn
                hinted.append(start // g)
            seen |= {r // g for r in batch}
        order = list(dict.fromkeys(r // g for batch in mine for r in batch))
        assert len(hinted) == len(set(hinted)) == max(0, len(order) - 1)
        assert set(hinted) == set(order) - {order[0]}  # all but the stream's first group
        assert isinstance(mine[0], list)
        assert not isinstance(mine[0], np.ndarray)


def test_batch_indices_pickle_with_hints() -> None:
    s = ChunkShuffleSampler(1000, 50, group_rows=100, window=2, seed=0)
    batches = list(s)
    hinted = [b for b in batches if b.ahead]
    assert hinted
    assert all(pickle.loads(pickle.dumps(b)).ahead == b.ahead for b in hinted)
    assert pickle.loads(pickle.dumps(batches[0])) == batches[0]


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
    assert isinstance(got, ptd.TensorDict)
    assert got.batch_size == torch.Size([len(idx)])
    t = torch.tensor(idx)
    for key in [("obs",), ("done",), ("next", "obs"), ("action",)]:
        ref = want[key[0]] if len(key) == 1 else want[key[0]][key[1]]
        assert torch.equal(got.get(key), ref[t]), key
        assert got.get(key).dtype == ref.dtype
    one = ds[7]
    assert one.batch_size == torch.Size([])
    assert torch.equal(one["obs"], want["obs"][7])
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


@pytest.mark.parametrize("consumer_waits", [False, True])
def test_dataset_reads_ahead_exactly(tmp_path: Path, backend: str, consumer_waits: bool) -> None:
    """The sampler's hints make the dataset read the next group on its reader thread: every
    batch stays exact, each group is still read once per leaf, and every group but the first
    comes from a read ahead (taken when done, or waited for)."""
    import time

    path = _store(tmp_path, backend, chunks=50)
    ds = StoreDataset(path, group_bytes=1)  # groups of one chunk (50 rows)
    want = _data()
    s = ChunkShuffleSampler(ds, 32, window=3, seed=4)
    for epoch in range(2):
        s.set_epoch(epoch)
        ds.close()
        ds.blocks_read = ds.blocks_read_ahead = 0
        for b in s:
            batch = ds.__getitems__(b)
            t = torch.tensor(list(b))
            assert torch.equal(batch["action"], t)
            assert torch.equal(batch["obs"], want["obs"][t])
            assert torch.equal(batch["next", "obs"], want["next"]["obs"][t])
            if consumer_waits:
                time.sleep(0.002)  # a training step: the read ahead finishes meanwhile
        blocked = sum(g.blocked for g in ds.leaves)
        assert ds.blocks_read == blocked * (N // 50)
        assert ds.blocks_read_ahead == blocked * (N // 50 - 1)
    ds.close()
    assert ds._reader is None
    assert ds._ahead == {}


def test_dataset_read_ahead_off(tmp_path: Path, backend: str) -> None:
    path = _store(tmp_path, backend, chunks=50)
    ds = StoreDataset(path, group_bytes=1, read_ahead=False)
    s = ChunkShuffleSampler(ds, 32, window=3, seed=4)
    rows = [r for b in s for r in ds.__getitems__(b)["action"].tolist()]
    assert sorted(rows) == list(range(N))
    assert ds.blocks_read == sum(g.blocked for g in ds.leaves) * (N // 50)
    assert ds.blocks_read_ahead == 0
    assert ds._reader is None
    ds.close()
    dl = loader(path, 32, read_ahead=False)
    assert dl.dataset.read_ahead is False  # type: ignore[attr-defined]
    dl.dataset.close()  # type: ignore[attr-defined]


def test_loader_prefetch_and_order(tmp_path: Path, backend: str) -> None:
    """With workers, loader() deepens the DataLoader's prefetch (unless given) and refuses
    in_order=False, which would send batches to workers that do not hold their groups."""
    import ptd.data

    path = _store(tmp_path, backend, chunks=50)
    dl = loader(path, 32, num_workers=2, handover=1)
    assert dl.prefetch_factor == ptd.data.PREFETCH_BATCHES
    assert loader(path, 32, num_workers=2, handover=4).prefetch_factor == 4
    assert loader(path, 32, num_workers=2, handover=16).prefetch_factor == 2  # never below 2
    assert loader(path, 32, num_workers=2, prefetch_factor=3).prefetch_factor == 3
    assert loader(path, 32).prefetch_factor is None  # no workers: torch's rule
    with pytest.raises(PtdValueError, match="in_order"):
        loader(path, 32, num_workers=2, in_order=False)
    loader(path, 32, in_order=False)  # in process: one stream, nothing to mix up
    dl.dataset.close()  # type: ignore[attr-defined]


def test_dataset_read_ahead_errors_reach_the_batch(tmp_path: Path, backend: str) -> None:
    """A read ahead that fails raises in the batch that needs its rows, as a direct read would."""
    from ptd.data.sampler import BatchIndices

    path = _store(tmp_path, backend, chunks=50)
    ds = StoreDataset(path, group_bytes=1)
    calls = []

    def broken(*args: Any) -> Any:
        calls.append(args[-1])
        raise PtdValueError("the chunk is corrupt")

    ds._read_block = broken  # type: ignore[method-assign]
    first = BatchIndices([0, 1])
    first.ahead = ((100, 150),)
    with pytest.raises(PtdValueError, match="corrupt"):
        ds.__getitems__(first)  # block 0, read directly
    with pytest.raises(PtdValueError, match="corrupt"):
        ds.__getitems__([120])  # block 2: the read ahead's error
    assert calls.count(2) == 1  # not read a second time
    ds.close()


def test_dataset_opens_paths_without_a_chunk_cache(tmp_path: Path, backend: str) -> None:
    """The blocks hold the decoded rows, so a path is opened without a second copy of them in
    a chunk cache, unless chunk_cache is given."""
    path = _store(tmp_path, backend, chunks=50)
    ds = StoreDataset(path)
    ds.__getitems__([0, 999])
    assert ds.td._store.backend._chunked.cache is None
    ds.close()
    ds = StoreDataset(path, chunk_cache="1MB")
    ds.__getitems__([0, 999])
    assert ds.td._store.backend._chunked.cache is not None
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
        assert (table.slot_of[held] >= 0).all()
        assert len(set(held.tolist())) == len(held)
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
    assert back._blocks == {}
    assert back._td is None
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
    assert leaves["obs",].chunk_rows == 50
    assert leaves["obs",].row_bytes == 16
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
    sampler_batches = list(dl.batch_sampler.batches())  # type: ignore[union-attr]
    got = _epoch(dl, 1)
    assert [b.tolist() for b in got] == list(dl.batch_sampler.batches())  # type: ignore[union-attr]
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
    assert isinstance(out, ptd.TensorDict)
    assert torch.equal(out["n", "b"], torch.full((3,), 2.0))


def test_sharded_zarr_uses_inner_chunks(tmp_path: Path) -> None:
    import zarr

    path = str(tmp_path / "sharded.zarr")
    g = zarr.open_group(path, mode="w")
    ref = np.arange(N * 4, dtype=np.float32).reshape(N, 4)
    arr = g.create_array("obs", shape=ref.shape, dtype=ref.dtype, chunks=(50, 4), shards=(200, 4))
    arr[...] = ref
    ds = StoreDataset(path, group_bytes=1)
    (leaf,) = ds.leaves
    assert leaf.chunk_rows == 50
    assert leaf.blocked
    assert ds.group_rows == 50
    got = ds.__getitems__([999, 0, 420])
    assert np.array_equal(got["obs"].numpy(), ref[[999, 0, 420]])
    ds.close()
