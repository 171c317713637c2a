"""Non-tensor values exchanged with tensordict 0.15.3 (the test-only oracle), on both backends.

ptd takes tensordict's own ``NonTensorData``/``NonTensorStack``/``TensorDict`` objects as its
own (recognised by tensordict's class markers: ptd never imports tensordict), writes them as
tensordict writes them, and reads back what tensordict reads. Tests marked ``interop`` use
tensordict and are skipped without it; the others check ptd's side alone. The deliberate
differences (README, docs/format.md) each have a test here that fails if either side changes.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import torch

import ptd
from ptd import NonTensorData, NonTensorStack, PersistentTensorDict, TensorDict
from ptd.errors import (
    BatchSizeError,
    LockedError,
    NotSupportedError,
    PickleRefusedError,
    PtdTypeError,
)

SUFFIX = {"h5": ".h5", "zarr": ".zarr"}
LOCK_ERROR = (
    "Cannot modify locked TensorDict. For in-place modification, consider using the `set_()` "
    "method and make sure the key is present."
)
SET_NON_TENSOR = "set_non_tensor is not compatible with the tensordict type PersistentTensorDict"


@pytest.fixture
def tdmod() -> Any:
    """tensordict 0.15.3, or a skip."""
    return pytest.importorskip("tensordict")


class Custom:
    """An object no format but pickle stores."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Custom)

    __hash__ = object.__hash__


def _open(lib: Any, path: Path, backend: str, **kwargs: Any) -> Any:
    cls = lib.PersistentTensorDict
    return (cls.from_h5 if backend == "h5" else cls.from_zarr)(str(path), **kwargs)


def _quiet(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` without the FutureWarnings both libraries give for h5 strings."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return fn(*args)


def _layout(path: Path, backend: str, key: str) -> Any:
    """What the store holds for the non-tensor ``key``: h5 dtype, shape and attribute names;
    zarr node attributes and chunk bytes."""
    if backend == "h5":
        with h5py.File(path, "r") as f:
            ds = f[key]
            return str(ds.dtype), ds.shape, sorted(ds.attrs), h5py.check_string_dtype(ds.dtype)
    node = json.loads((path / key / "zarr.json").read_text())
    return node["attributes"], node["shape"], (path / key / "c" / "0").read_bytes()


# --- ptd's non-tensor classes as tensordict sees them ------------------------------------------
@pytest.mark.interop
def test_tensordict_recognises_ptd_non_tensors(tdmod, tmp_path, backend) -> None:
    assert tdmod.is_non_tensor(NonTensorData("x", batch_size=[2]))
    assert tdmod.is_non_tensor(NonTensorStack("x", "y"))
    assert not tdmod.is_non_tensor(TensorDict({}, batch_size=[2]))
    mem = TensorDict({"a": torch.zeros(2), "s": "text", "n": {"b": torch.ones(2)}}, [2])
    p = PersistentTensorDict.from_dict(mem, tmp_path / f"s{SUFFIX[backend]}", backend=backend)
    for td in (mem, p):
        # tensordict's own is_leaf functions, as its tests pass them
        keys = td.keys(True, True, is_leaf=tdmod.is_leaf_nontensor)
        assert sorted(map(str, keys)) == sorted(map(str, ["a", "s", ("n", "b")]))
        assert "s" not in td.keys(True, True)  # non-tensors are no leaves by default
        assert "s" in td.keys(True, True, is_leaf=ptd.is_leaf_nontensor)
        assert tdmod.is_non_tensor(_quiet(td.get, "s"))
        assert tdmod.is_non_tensor(_quiet(td.to_tensordict).get("s"))
    p.close()


# --- tensordict values written by ptd ----------------------------------------------------------
@pytest.mark.interop
def test_expanded_strings_written_as_tensordict_writes_them(tdmod, tmp_path, backend) -> None:
    """``td.expand(10)`` turns each string into a stack of ten equal strings: tensordict stores
    it as one value, so does ptd, and both read it back as one value of batch size [10]."""
    src = tdmod.TensorDict(
        {"a": 0, "c": "a string!", ("d", "e"): "another string!"}, batch_size=[]
    ).expand(10)
    assert isinstance(src.get("c"), tdmod.NonTensorStack)
    ref, mine = tmp_path / f"ref{SUFFIX[backend]}", tmp_path / f"mine{SUFFIX[backend]}"
    tdmod.PersistentTensorDict.from_dict(src, filename=str(ref), backend=backend).close()
    PersistentTensorDict.from_dict(src, mine, backend=backend).close()
    for key in ("c", "d/e"):
        assert _layout(mine, backend, key) == _layout(ref, backend, key), key
    text = {"c": "a string!", ("d", "e"): "another string!"}
    for path in (ref, mine):
        for lib in (ptd, tdmod):
            p = _open(lib, path, backend, **({"batch_size": [10]} if backend == "h5" else {}))
            for key, value in text.items():
                got = _quiet(p.__getitem__, key)
                assert got == (value.encode() if backend == "h5" else value), (lib, key)
                assert type(got) is (bytes if backend == "h5" else str)
                entry = _quiet(p.get, key)
                assert entry.batch_size == (10,), (lib, key)
                assert tdmod.is_non_tensor(entry), (lib, key)
            p.close()
    q = _open(ptd, mine, backend)
    if backend == "h5":
        with pytest.warns(FutureWarning, match="reads the string '/c'"):
            q["c"]
    assert q.batch_size == (10,)
    assert torch.equal(q["a"], torch.zeros(10, dtype=torch.long))
    q.close()


@pytest.mark.interop
def test_tensordict_stack_of_distinct_values(tdmod, tmp_path, backend) -> None:
    p = PersistentTensorDict(
        filename=str(tmp_path / f"s{SUFFIX[backend]}"), batch_size=[3], mode="w", backend=backend
    )
    p.set("names", tdmod.NonTensorStack("a", "bb", "c"))
    p.set("one", tdmod.NonTensorData(1, batch_size=[3]))
    p["same"] = tdmod.NonTensorStack("x", "x", "x")
    assert isinstance(p.get("names"), NonTensorStack)
    assert p["names"] == ["a", "bb", "c"]
    assert p[1:]["names"] == ["bb", "c"]
    assert p[0]["names"] == "a"
    p[1:3] = tdmod.TensorDict({"names": tdmod.NonTensorStack("B", "C")}, batch_size=[2])
    assert p["names"] == ["a", "B", "C"]
    assert isinstance(p.get("one"), NonTensorData)
    assert p["one"] == 1
    # written as tensordict writes it: one value
    same = _quiet(p.get, "same")
    assert isinstance(same, NonTensorData)
    assert same.batch_size == (3,)
    p.close()
    ref = _open(
        tdmod, Path(p.filename), backend, **({"batch_size": [3]} if backend == "h5" else {})
    )
    try:
        assert list(ref["names"]) == ["a", "B", "C"]
        assert ref["one"] == 1
        assert _quiet(ref.__getitem__, "same") == (b"x" if backend == "h5" else "x")
    finally:
        ref.close()


@pytest.mark.interop
def test_tensordict_values_in_memory(tdmod) -> None:
    """In memory a tensordict stack stays a stack (tensordict's ``td[key]`` is its list);
    nested tensordicts keep their batch size and a mismatch is refused."""
    src = tdmod.TensorDict(
        {
            "same": tdmod.NonTensorStack("x", "x"),
            "one": tdmod.NonTensorData({"k": 1}),
            "n": tdmod.TensorDict({"b": torch.zeros(2, 3)}, batch_size=[2, 3]),
        },
        batch_size=[2],
    )
    td = TensorDict(dict(src.items()), batch_size=[2])
    assert isinstance(td.get("same"), NonTensorStack)
    assert td["same"] == list(src["same"])
    assert isinstance(td.get("one"), NonTensorData)
    assert td["one"] == {"k": 1}
    assert td.get("one").batch_size == (2,)
    assert td["n"].batch_size == (2, 3)
    assert isinstance(td["n"], TensorDict)
    td.update({"u": tdmod.NonTensorStack("p", "q")})
    assert td["u"] == ["p", "q"]
    # a shorter batch size takes ours, as tensordict sets it (its test_nested_td_emptyshape)
    td["short"] = tdmod.TensorDict({"b": torch.zeros(2, 5)}, batch_size=[])
    assert td["short"].batch_size == (2,)
    with pytest.raises(BatchSizeError, match="batch"):
        td["bad"] = tdmod.TensorDict({"b": torch.zeros(3)}, batch_size=[3])
    assert "bad" not in td.keys()


@pytest.mark.interop
def test_from_dict_keeps_tensordict_batch_sizes_and_names(tdmod, tmp_path, backend) -> None:
    path = tmp_path / f"s{SUFFIX[backend]}"
    empty = tdmod.TensorDict({"a": torch.randn(3)}, batch_size=[])
    PersistentTensorDict.from_dict(empty, path, backend=backend).close()
    q = _open(ptd, path, backend)
    assert q.batch_size == ()
    assert torch.equal(q["a"], empty["a"])
    q.close()
    if backend == "zarr":  # tensordict reads the recorded batch size on zarr only
        ref = _open(tdmod, path, backend)
        assert ref.batch_size == ()
        ref.close()
    src = tdmod.TensorDict(
        {
            "a": torch.arange(12).view(3, 4),
            "b": tdmod.TensorDict(
                {"c": torch.arange(60).view(3, 4, 5), "d": "text"}, batch_size=[3, 4, 5]
            ),
        },
        batch_size=[3, 4],
        names=["x", "y"],
    )
    PersistentTensorDict.from_dict(src, path, backend=backend).close()
    q = _open(ptd, path, backend)
    assert q.batch_size == (3, 4)
    assert q.names == ["x", "y"]
    assert q["b"].batch_size == (3, 4, 5)
    assert _quiet(q["b"].__getitem__, "d") == (b"text" if backend == "h5" else "text")
    q.close()


# --- values only one side can store ------------------------------------------------------------
@pytest.mark.interop
def test_complex_values_both_ways(tdmod, tmp_path, backend) -> None:
    """h5: an opaque complex128 scalar on both sides; zarr: pickled on both sides."""
    ref, mine = tmp_path / f"ref{SUFFIX[backend]}", tmp_path / f"mine{SUFFIX[backend]}"
    src = tdmod.TensorDict({"a": torch.zeros(2)}, batch_size=[2])
    src["z"] = tdmod.NonTensorData(1 + 2j)
    tdmod.PersistentTensorDict.from_dict(src, filename=str(ref), backend=backend).close()
    PersistentTensorDict.from_dict(
        {"a": torch.zeros(2), "z": NonTensorData(1 + 2j)}, mine, backend=backend
    ).close()
    if backend == "h5":
        assert _layout(mine, backend, "z") == _layout(ref, backend, "z")
    for path in (ref, mine):
        for lib in (ptd, tdmod):
            p = (
                _open(lib, path, backend, allow_pickle=True)
                if backend == "zarr"
                else _open(lib, path, backend, batch_size=[2])
            )
            got = p["z"]
            assert got == 1 + 2j
            assert type(got) is (np.complex128 if backend == "h5" else complex)
            p.close()


@pytest.mark.interop
def test_h5_refuses_objects_it_would_have_to_pickle(tdmod, tmp_path) -> None:
    """h5 never pickles: an arbitrary object is refused before anything is written, by ptd as
    by tensordict (both a TypeError); zarr pickles it."""

    p = PersistentTensorDict(filename=str(tmp_path / "s.h5"), batch_size=[2], mode="w")
    with pytest.raises(PtdTypeError, match=r"Cannot write 'o' to h5: .*never pickles.*Use zarr"):
        p["o"] = NonTensorData(Custom())
    with pytest.raises(TypeError):
        p.set("o", tdmod.NonTensorData(Custom()))
    assert "o" not in p.keys()
    p.close()
    td = tdmod.PersistentTensorDict(filename=str(tmp_path / "t.h5"), batch_size=[2], mode="w")
    with pytest.raises(TypeError):
        td["o"] = tdmod.NonTensorData(Custom())
    td.close()
    z = PersistentTensorDict(
        filename=str(tmp_path / "s.zarr"), batch_size=[2], mode="w", backend="zarr"
    )
    z.set("o", tdmod.NonTensorData(Custom(), batch_size=[2]))
    with pytest.raises(PickleRefusedError, match="'o'"):  # allow_pickle=None refuses
        z["o"]
    z.close()
    z = PersistentTensorDict(filename=str(tmp_path / "s.zarr"), backend="zarr", allow_pickle=True)
    assert z["o"] == Custom()
    z.close()


@pytest.mark.interop
def test_h5_json_values_are_json_text_for_tensordict(tdmod, tmp_path) -> None:
    """ptd's extension: values h5 has no type for (None, dicts, mixed lists, ints beyond
    int64) are JSON text marked ``__ptd_json__``; ptd reads the value, tensordict (which
    refuses to write them) the bytes of the text."""
    values = {"none": None, "d": {"k": [1, None]}, "mixed": [1, "a"], "big": 2**70}
    path = tmp_path / "j.h5"
    PersistentTensorDict.from_dict(
        {"a": torch.zeros(2), **{k: NonTensorData(v) for k, v in values.items()}}, path
    ).close()
    q = _open(ptd, path, "h5")
    assert {k: q[k] for k in values} == values
    q.close()
    ref = _open(tdmod, path, "h5", batch_size=[2])
    try:
        for key, value in values.items():
            assert json.loads(ref[key]) == value, key
    finally:
        ref.close()


@pytest.mark.interop
def test_stack_of_equal_values_reads_as_a_list(tdmod, tmp_path, backend) -> None:
    """Deliberate difference: ptd's own NonTensorStack of equal values stays a stack, and
    ``p[key]`` is always its list; tensordict's ``p[key]`` gives the one value when all are
    equal (its in-memory TensorDict gives the list, as ptd does)."""
    path = tmp_path / f"s{SUFFIX[backend]}"
    PersistentTensorDict.from_dict(
        {"a": torch.zeros(3), "s": NonTensorStack("x", "x", "x")}, path, backend=backend
    ).close()
    q = _open(ptd, path, backend)
    assert q["s"] == ["x", "x", "x"]
    assert isinstance(q.get("s"), NonTensorStack)
    q.close()
    ref = _open(tdmod, path, backend, **({"batch_size": [3]} if backend == "h5" else {}))
    try:
        assert ref["s"] == "x"
        assert isinstance(ref.get("s"), tdmod.NonTensorStack)
    finally:
        ref.close()
    mem = tdmod.TensorDict({"s": tdmod.NonTensorStack("x", "x", "x")}, batch_size=[3])
    assert list(mem["s"]) == ["x", "x", "x"]


# --- set_non_tensor: refused as tensordict refuses it ----------------------------------------
def test_set_non_tensor_refused(tmp_path, backend) -> None:
    p = PersistentTensorDict(
        filename=str(tmp_path / f"s{SUFFIX[backend]}"), batch_size=[2], mode="w", backend=backend
    )
    with pytest.raises(NotImplementedError, match=SET_NON_TENSOR) as info:
        p.set_non_tensor(("this", "will"), "fail")
    assert isinstance(info.value, (NotSupportedError, RuntimeError))
    assert "this" not in p.keys()
    p.lock_()
    with pytest.raises(LockedError, match=re.escape(LOCK_ERROR)):
        p.set_non_tensor("k", "v")
    p.unlock_()
    p.set("k", NonTensorData("v"))  # the way to write one
    assert _quiet(p.__getitem__, "k") == (b"v" if backend == "h5" else "v")
    p.close()


@pytest.mark.interop
def test_set_non_tensor_messages_match_tensordict(tdmod, tmp_path, backend) -> None:
    td = tdmod.PersistentTensorDict(
        filename=str(tmp_path / f"t{SUFFIX[backend]}"), batch_size=[2], mode="w", backend=backend
    )
    try:
        with pytest.raises(RuntimeError, match=SET_NON_TENSOR):
            td.set_non_tensor("k", "v")
        td.lock_()
        with pytest.raises(RuntimeError, match=re.escape(LOCK_ERROR)):
            td.set_non_tensor("k", "v")
        td.unlock_()
    finally:
        td.close()
