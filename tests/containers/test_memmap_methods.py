"""The memmap methods with tensordict 0.15's signatures (ptd/ops/memmap_api.py,
ptd/containers/memmap/methods.py, ptd/containers/memmap/archive.py) and the state-dict family
(ptd/ops/statedict.py), on stores of both backends and on TensorDict: round trips that
tensordict reads, streaming leaf by leaf, threads, archives, and the error paths."""

from __future__ import annotations

import os
import struct
import warnings
import zipfile
from typing import Any

import pytest
import torch

import ptd.transfer.slabs
from ptd import PersistentTensorDict, TensorDict
from ptd.containers.memmap import MemmapFuture, is_archive
from ptd.errors import PrefixExistsError, StoreExistsError


def _same(a: Any, b: Any) -> None:
    assert sorted(a.keys(True, True), key=str) == sorted(b.keys(True, True), key=str)
    assert a.batch_size == b.batch_size
    for key in a.keys(True, True):
        assert torch.equal(torch.as_tensor(a[key]), torch.as_tensor(b[key])), key


# --------------------------------------------------------------------------------------------
# memmap / save of a store
# --------------------------------------------------------------------------------------------


def test_store_memmap_round_trip_opens_in_tensordict(sample_ptd, sample_td, tmp_path):
    tensordict = pytest.importorskip("tensordict")
    mm = sample_ptd.memmap(tmp_path / "mm")
    assert type(mm) is TensorDict
    assert mm.is_memmap()
    assert mm.is_locked
    assert mm.saved_path == tmp_path / "mm"
    _same(mm, sample_td)
    theirs = tensordict.TensorDict.load_memmap(tmp_path / "mm")
    assert theirs.batch_size == torch.Size([6])
    for key in sample_td.keys(True, True):
        assert torch.equal(theirs[key], sample_td[key]), key
    # ours loads it back, not memory-mapped in tensordict's sense (a new entry would not be)
    back = PersistentTensorDict.load_memmap(tmp_path / "mm")
    assert type(back) is TensorDict
    assert not back.is_memmap()
    _same(back, sample_td)
    _same(TensorDict.load(tmp_path / "mm"), sample_td)
    assert not sample_ptd.is_memmap()
    with pytest.raises(AttributeError, match="no saved path"):
        _ = sample_ptd.saved_path


def test_store_memmap_streams_leaf_by_leaf(recorder, make_ptd, tmp_path, monkeypatch):
    """With a tiny slab budget and one-row chunks, each leaf is read in row slabs, never
    whole."""
    sample_ptd = make_ptd(chunks=(1,))
    monkeypatch.setattr(ptd.transfer.slabs, "SLAB_BYTES", 16)
    recorder.clear()
    progress: list[int] = []
    mm = sample_ptd.memmap(tmp_path / "mm", progress=progress.append)
    rows_read = [c.shape[0] if c.shape else 1 for c in recorder.reads("read")]
    assert len(rows_read) > 4
    assert max(rows_read) < 6
    assert max(progress) <= 16 * 4  # a slab is a row or a few, whatever the leaf
    assert sum(progress) == sum(v.numel() * v.element_size() for v in mm.values(True, True))


def test_save_with_threads_and_future(sample_ptd, sample_td, tmp_path):
    _same(sample_ptd.save(tmp_path / "t", num_threads=3), sample_td)
    fut = sample_ptd.memmap(tmp_path / "f", num_threads=2, return_early=True)
    assert isinstance(fut, MemmapFuture)
    out = fut.result(timeout=60)
    assert fut.done()
    assert out.is_memmap()
    _same(out, sample_td)
    # a single thread returns the tensordict itself, as tensordict does
    assert isinstance(sample_ptd.memmap(tmp_path / "g", return_early=True), TensorDict)
    assert sample_ptd.dumps(tmp_path / "d").is_memmap()


def test_memmap_like_reads_nothing(recorder, sample_ptd, tmp_path):
    def boom(call: Any) -> None:
        if call.op.startswith("read"):
            raise AssertionError(f"memmap_like read data: {call}")

    recorder.fault = boom
    recorder.clear()
    for threads in (0, 2):
        like = sample_ptd.memmap_like(tmp_path / f"like{threads}", num_threads=threads)
        assert like.is_memmap()
        assert like.is_locked
        assert sorted(like.keys(True, True), key=str) == sorted(
            sample_ptd.keys(True, True), key=str
        )
        for key in like.keys(True, True):
            meta = sample_ptd.leaf_meta(key)
            assert like[key].shape == meta.shape
            assert like[key].dtype == meta.dtype
            assert not like[key].any()
    anon = sample_ptd.memmap_like()
    assert anon.is_memmap()
    assert not anon["a"].any()
    anon["a"][0] = 1.0  # writable buffer
    assert anon["a"][0].sum() == 4
    assert recorder.backends
    assert recorder.reads() == []


def test_memmap_in_place_is_refused_on_a_store(sample_ptd, tmp_path):
    with pytest.raises(RuntimeError, match="in-place"):
        sample_ptd.memmap_(tmp_path / "x")


# --------------------------------------------------------------------------------------------
# existing prefixes and bad arguments
# --------------------------------------------------------------------------------------------


def test_existing_prefix_rules(sample_ptd, sample_td, tmp_path):
    sample_ptd.memmap(tmp_path / "p")
    with pytest.raises(PrefixExistsError, match="existsok"):
        sample_ptd.memmap(tmp_path / "p", existsok=False)
    with pytest.raises(RuntimeError):  # tensordict's error type too
        sample_td.memmap_like(tmp_path / "p", existsok=False)
    sample_td.memmap(tmp_path / "p")  # a saved tensordict is replaced as a whole
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    with pytest.raises(StoreExistsError, match="no saved tensordict"):
        sample_ptd.memmap(foreign)
    assert os.listdir(foreign) == ["notes.txt"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError, match="file"):
        sample_ptd.save(tmp_path / "file")


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda td, tmp: td.memmap(tmp / "x", num_threads=-1), ValueError, "num_threads"),
        (lambda td, tmp: td.memmap(tmp / "x", num_threads=1.5), ValueError, "num_threads"),
        (lambda td, tmp: td.memmap(tmp / "x", compression="deflate"), ValueError, "archive"),
        (lambda td, tmp: td.save(archive=True), ValueError, "path is required"),
        (
            lambda td, tmp: td.memmap(tmp / "x.tdz", num_threads=2, return_early=True),
            NotImplementedError,
            "return_early",
        ),
        (lambda td, tmp: td.save(tmp / "x.tdz", compression="zstd9"), ValueError, "compression"),
        (lambda td, tmp: td.memmap(tmp / "x", robust_key=False), ValueError, "robust_key"),
    ],
)
def test_bad_arguments(sample_ptd, tmp_path, call, error, match):
    with pytest.raises(error, match=match):
        call(sample_ptd, tmp_path)
    assert not (tmp_path / "x").exists()
    assert not (tmp_path / "x.tdz").exists()


def test_load_errors(sample_td, tmp_path):
    (tmp_path / "plain.txt").write_text("x")
    with pytest.raises(ValueError, match="not a memory-mapped tensordict archive"):
        TensorDict.load_memmap(tmp_path / "plain.txt")
    sample_td.save(tmp_path / "d")
    with pytest.raises(ValueError, match="subpath"):
        TensorDict.load_memmap(tmp_path / "d", subpath="nope")
    with pytest.raises(ValueError, match="mode"):
        TensorDict.load_memmap(tmp_path / "d", mode="w")
    sample_td.save(tmp_path / "a.tdz")
    with pytest.raises(RuntimeError, match="copy-on-write"):
        TensorDict.load_memmap(tmp_path / "a.tdz", mode="r+")
    with pytest.raises(RuntimeError, match="not memory mapped"):
        TensorDict.load_memmap(tmp_path / "d").memmap_refresh_()


# --------------------------------------------------------------------------------------------
# load variants, in-place load, refresh, lock semantics
# --------------------------------------------------------------------------------------------


def test_load_subpath_out_and_mode(sample_td, tmp_path):
    sample_td.save(tmp_path / "d")
    sub = TensorDict.load_memmap(tmp_path / "d", subpath=("n", "m"))
    assert torch.equal(sub["d"], sample_td["n", "m", "d"])
    assert torch.equal(TensorDict.load_memmap(tmp_path / "d", subpath="n/m")["d"], sub["d"])
    out = TensorDict({"stale": torch.zeros(6)}, batch_size=[6])
    assert TensorDict.load_memmap(tmp_path / "d", out=out) is out
    assert "stale" not in out.keys()
    _same(out, sample_td)
    ro = TensorDict.load_memmap(tmp_path / "d", mode="r")
    ro["a"] += 1  # copy-on-write: the file does not change
    assert torch.equal(TensorDict.load_memmap(tmp_path / "d")["a"], sample_td["a"])


def test_load_memmap_into_a_store(sample_ptd, sample_td, tmp_path):
    saved = (sample_td * 0 + 1).save(tmp_path / "ones")
    assert sample_ptd.load_memmap_(tmp_path / "ones") is sample_ptd
    for key in saved.keys(True, True):
        assert torch.equal(sample_ptd[key], saved[key]), key
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sample_ptd.load_(tmp_path / "ones")
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)


def test_memmap_inplace_refresh_and_unlock(sample_td, tmp_path):
    td = sample_td.clone()
    assert td.memmap_(tmp_path / "ip") is td
    assert td.is_memmap()
    other = sample_td.clone()
    other["extra"] = torch.ones(6)
    other.save(tmp_path / "ip")  # another writer changes the files
    assert "extra" in td.memmap_refresh_().keys()
    assert td.is_memmap()
    td.unlock_()
    assert not td.is_memmap()  # unlocked, a memmap tensordict no longer is one
    with pytest.raises(AttributeError):
        _ = td.saved_path


# --------------------------------------------------------------------------------------------
# archives (.tdz)
# --------------------------------------------------------------------------------------------


def _aligned_payloads(path: Any) -> list[bool]:
    out = []
    with zipfile.ZipFile(path) as zf, open(path, "rb") as f:
        for info in zf.infolist():
            if not info.filename.endswith(".memmap"):
                continue
            f.seek(info.header_offset)
            head = f.read(30)
            name_len, extra_len = struct.unpack("<HH", head[26:30])
            out.append((info.header_offset + 30 + name_len + extra_len) % 64 == 0)
    return out


def test_archive_round_trip_both_ways(sample_ptd, sample_td, tmp_path):
    tensordict = pytest.importorskip("tensordict")
    res = sample_ptd.save(tmp_path / "s.tdz")
    assert not res.is_memmap()
    assert not res.is_locked
    assert is_archive(tmp_path / "s.tdz")
    assert tensordict.is_memmap_archive(tmp_path / "s.tdz")
    assert _aligned_payloads(tmp_path / "s.tdz")
    assert all(_aligned_payloads(tmp_path / "s.tdz"))
    theirs = tensordict.TensorDict.load_memmap(tmp_path / "s.tdz")
    for key in sample_td.keys(True, True):
        assert torch.equal(theirs[key], sample_td[key]), key
    tensordict.unpack_memmap(tmp_path / "s.tdz", tmp_path / "unpacked")
    _same(TensorDict.load_memmap(tmp_path / "unpacked"), sample_td)
    theirs.save(tmp_path / "theirs.tdz")
    _same(TensorDict.load_memmap(tmp_path / "theirs.tdz"), sample_td)
    res["a"] += 1  # copy-on-write: the archive does not change
    _same(TensorDict.load_memmap(tmp_path / "s.tdz"), sample_td)
    deflated = sample_ptd.save(tmp_path / "z.bin", archive=True, compression="deflate")
    _same(deflated, sample_td)
    _same(tensordict.TensorDict.load_memmap(tmp_path / "z.bin"), sample_td)
    like = sample_ptd.memmap_like(tmp_path / "l.tdz")
    assert not like["a"].any()
    assert is_archive(tmp_path / "l.tdz")
    with pytest.raises(FileExistsError):
        sample_ptd.memmap(tmp_path / "s.tdz", existsok=False)


# --------------------------------------------------------------------------------------------
# state dicts and data_ptr
# --------------------------------------------------------------------------------------------


def test_state_dict_round_trip_on_a_store(sample_ptd, sample_td):
    sd = sample_ptd.state_dict()
    assert list(sd) == list(sample_td.state_dict())
    assert sd._metadata["n.m"]["batch_size"] == torch.Size([6, 3])
    sample_ptd.apply_(lambda t: t.zero_())
    assert sample_ptd.load_state_dict(sd) is sample_ptd
    for key in sample_td.keys(True, True):
        assert torch.equal(sample_ptd[key], sample_td[key]), key
    nested = sample_td.state_dict(flatten=False)
    assert isinstance(nested["n"], dict)
    assert nested["n"]._metadata[""]["batch_size"] == (6,)
    assert sample_ptd.load_state_dict(nested) is sample_ptd
    del sd["a"]
    with pytest.raises(RuntimeError, match="key sets don't match"):
        sample_ptd.load_state_dict(sd)
    sample_ptd.load_state_dict(sd, strict=False)  # the others are kept
    assert torch.equal(sample_ptd["a"], sample_td["a"])


def test_state_dict_details():
    td = TensorDict({"a.b": torch.zeros(2), "a": {"b": torch.ones(2)}}, batch_size=[2])
    with pytest.raises(KeyError, match="collides"):
        td.state_dict()
    assert set(td.state_dict(flatten=False)) == {"a.b", "a"}
    td = TensorDict({"x": torch.ones(2, requires_grad=True), "s": "txt"}, batch_size=[2])
    assert not td.state_dict()["x"].requires_grad
    assert td.state_dict(keep_vars=True)["x"] is td["x"]
    sd = td.state_dict()
    assert sd._metadata["s"]["_non_tensor"]["data"] == "txt"
    empty = TensorDict({}, batch_size=[2]).load_state_dict(sd, strict=False)
    assert empty["s"] == "txt"
    with pytest.raises(TypeError, match="_metadata"):
        td.state_dict(destination=object())


def test_data_ptr(sample_ptd, sample_td):
    ptrs = sample_td.data_ptr()
    assert ptrs.batch_size == torch.Size([])
    assert ptrs["a"].item() == sample_td["a"].data_ptr()
    storage = sample_td.data_ptr(storage=True)["a"].item()
    assert storage == sample_td["a"].untyped_storage().data_ptr()
    stored = sample_ptd.data_ptr()
    assert sorted(stored.keys(True, True), key=str) == sorted(sample_td.keys(True, True), key=str)
    assert all(v.item() == 0 for v in stored.values(True, True))  # nothing read
    assert sample_ptd._has_non_tensor is False
    sample_ptd["s"] = "txt"
    assert sample_ptd._has_non_tensor is True


# --------------------------------------------------------------------------------------------
# make_memmap family
# --------------------------------------------------------------------------------------------


def test_make_memmap_adds_files_and_meta(sample_td, tmp_path):
    td = sample_td.clone().memmap_(tmp_path / "mk")
    empty = td.make_memmap(("new", "x"), [6, 2], dtype=torch.int16)
    assert empty.shape == (6, 2)
    assert empty.dtype == torch.int16
    assert td.is_locked
    empty.fill_(3)  # the mapping is shared with the file
    copy = td.make_memmap_from_tensor("t", torch.arange(6.0))
    storage = torch.arange(12, dtype=torch.float32).untyped_storage()
    from_storage = td.make_memmap_from_storage("s", storage, [6, 2], dtype=torch.float32)
    assert torch.equal(from_storage.flatten(), torch.arange(12.0))
    back = TensorDict.load_memmap(tmp_path / "mk")
    assert torch.equal(back["new", "x"], torch.full((6, 2), 3, dtype=torch.int16))
    assert torch.equal(back["t"], copy)
    assert torch.equal(back["s"], from_storage)
    assert not td.make_memmap_from_tensor("u", torch.ones(6), copy_data=False).any()
    tensordict = pytest.importorskip("tensordict")
    assert torch.equal(tensordict.TensorDict.load_memmap(tmp_path / "mk")["t"], copy)


def test_make_memmap_errors(sample_ptd, sample_td, tmp_path):
    with pytest.raises(RuntimeError, match="memory-mapped tensordict"):
        sample_td.make_memmap("x", [6])
    with pytest.raises(RuntimeError, match="memory-mapped tensordict"):
        sample_ptd.make_memmap("x", [6])
    td = sample_td.clone().memmap_(tmp_path / "mk")
    with pytest.raises(RuntimeError, match="already exists"):
        td.make_memmap("a", [6, 4])
    with pytest.raises(RuntimeError, match="batch size"):
        td.make_memmap("x", [5])
    anon = sample_td.memmap()  # no directory: an ordinary tensor
    assert anon.make_memmap_from_tensor("z", torch.ones(6)).sum() == 6
