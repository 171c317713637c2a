"""The on-disk format (issue 3): non-tensor entries, strings, the pickle policy, every dtype,
batch-size metadata, and files that tensordict 0.15 opens both ways.

Tests marked ``interop`` write with one library and read with the other (tensordict 0.15.3 is
the oracle; they are skipped without it). The goldens under ``tests/data/`` (written by
tensordict 0.15.3 and by plain h5py / zarr, see ``tests/data/make_store_goldens.py``) are read
without tensordict.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pickle
import subprocess
import sys
import textwrap
import warnings
from typing import Any

import h5py
import numpy as np
import pytest
import torch
import zarr

import ptd
from ptd import NonTensorData, NonTensorStack, PersistentTensorDict, TensorDict
from ptd.errors import PickleRefusedError, PtdError, PtdValueError, UnsupportedDtypeError

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUFFIX = {"h5": ".h5", "zarr": ".zarr"}
STR_WARNING = "reads the string"


def _goldens_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "make_store_goldens", os.path.join(HERE, "data", "make_store_goldens.py")
    )
    assert spec is not None
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GOLDENS = _goldens_module()


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def opener(backend: str) -> Any:
    return PersistentTensorDict.from_h5 if backend == "h5" else PersistentTensorDict.from_zarr


def reopen(path: Any, backend: str, **kwargs: Any) -> PersistentTensorDict:
    return opener(backend)(str(path), **kwargs)


def bits(t: torch.Tensor) -> torch.Tensor:
    """The bytes of ``t`` (for bit-exact comparisons: NaN payloads, -0.0...)."""
    t = t.detach().contiguous()
    if t.dtype == torch.bool:
        return t.to(torch.uint8).reshape(-1)
    if t.is_complex():
        t = torch.view_as_real(t).contiguous()
    return t.reshape(-1).view(torch.uint8)


def assert_bits(got: torch.Tensor, expected: torch.Tensor) -> None:
    assert isinstance(got, torch.Tensor)
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    assert torch.equal(bits(got), bits(expected))


def random_bits(dtype: torch.dtype, shape: tuple[int, ...], seed: int = 0) -> torch.Tensor:
    """A tensor of ``dtype`` whose bytes are random: every bit pattern (NaNs with payloads,
    infinities, subnormals, -0.0) can show up."""
    g = torch.Generator().manual_seed(seed)
    n = int(np.prod(shape))
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    itemsize = torch.empty((), dtype=dtype).element_size()
    raw = torch.randint(0, 256, (n * itemsize,), dtype=torch.uint8, generator=g)
    if dtype.is_complex:
        real = {torch.complex64: torch.float32, torch.complex128: torch.float64}[dtype]
        return torch.view_as_complex(raw.view(real).reshape(*shape, 2))
    return raw.view(dtype).reshape(shape)


def as_py(value: Any) -> Any:
    """A read non-tensor value as plain python (numpy scalars/arrays to python)."""
    if isinstance(value, (NonTensorData, NonTensorStack)):
        value = value.tolist() if isinstance(value, NonTensorStack) else value.data
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def decoded(value: Any) -> Any:
    """h5 strings read as bytes: decode them (nested lists too)."""
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list):
        return [decoded(v) for v in value]
    return value


ALL_DTYPES = [
    torch.bool,
    torch.uint8,
    torch.uint16,
    torch.uint32,
    torch.uint64,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.float32,
    torch.float64,
    torch.bfloat16,
    torch.complex64,
    torch.complex128,
]
#: the dtypes tensordict 0.15 stores too (it cannot store bfloat16)
SHARED_DTYPES = [d for d in ALL_DTYPES if d != torch.bfloat16]

INDICES = [
    slice(1, 4),
    slice(None, None, 2),
    2,
    -1,
    [4, 0, 4, 2],
    torch.tensor([3, 1]),
    torch.tensor([True, False, True, False, True, False, True]),
    (slice(None), 1),
    (slice(2, 6), [2, 0]),
]
INDEX_IDS = ["slice", "step", "int", "neg", "list_repeats", "tensor", "mask", "col", "slice_list"]


# --------------------------------------------------------------------------------------------
# 1. non-tensor entries on TensorDict and PersistentTensorDict
# --------------------------------------------------------------------------------------------

#: values stored as one NonTensorData (JSON on zarr; h5: strings, opaque bytes/numbers, or
#: ptd's JSON text for None, lists and dicts)
SINGLE_VALUES = {
    "s": "hello",
    "uni": "héllo wörld ✓",
    "empty_s": "",
    "by": b"\x00\x01raw",
    "i": 5,
    "big": -(2**62),
    "f": 2.5,
    "t": True,
    "none": None,
    "lst": [1, "a", None],
    "nums": [1, 2, 3],
    "d": {"k": [1, 2], "s": "v", "n": None},
}
#: one value per row (batch size [4])
STACKS = {
    "names": ["ann", "bob", "cy", "dé"],
    "ints": [1, 2, 3, 4],
    "floats": [0.5, 1.5, -2.0, 3.25],
    "flags": [True, False, True, True],
    "blobs": [b"a", b"bb", b"", b"d"],
}


def _expected_single(backend: str, key: str, value: Any) -> Any:
    if backend == "h5" and isinstance(value, str):
        return value.encode()  # h5 reads strings as bytes (tensordict's behaviour)
    return value


def _non_tensor_source() -> TensorDict:
    td = TensorDict({"a": torch.arange(4.0)}, batch_size=[4])
    for key, value in SINGLE_VALUES.items():
        td[key] = NonTensorData(value)
    for key, values in STACKS.items():
        td[key] = NonTensorStack(*values)
    td["n", "label"] = "inner"
    return td


def test_non_tensor_entries_on_tensordict() -> None:
    td = _non_tensor_source()
    assert td["s"] == "hello"
    assert isinstance(td.get("s"), NonTensorData)
    assert td.get("s").batch_size == torch.Size([4])
    assert td[1:3].get("s").batch_size == torch.Size([2])
    assert td[1:3]["s"] == "hello"
    assert td["names"] == STACKS["names"]
    assert isinstance(td.get("names"), NonTensorStack)
    assert td[1:3]["names"] == ["bob", "cy"]
    assert td[[3, 0, 3]]["names"] == ["dé", "ann", "dé"]
    assert td[2]["names"] == "cy"
    assert td[torch.tensor([True, False, False, True])]["ints"] == [1, 4]
    td[1:3] = {"names": NonTensorStack("B", "C")}
    assert td["names"] == ["ann", "B", "C", "dé"]
    assert td["n", "label"] == "inner"


def test_non_tensor_round_trip(tmp_path, backend) -> None:
    path = tmp_path / f"nt{SUFFIX[backend]}"
    p = PersistentTensorDict.from_dict(_non_tensor_source(), path, backend=backend)
    p.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # h5 strings, zarr pickled bytes (below)
        # zarr pickles what JSON cannot hold (bytes, tuples): reading it back needs the opt-in
        q = reopen(path, backend, **({"allow_pickle": True} if backend == "zarr" else {}))
        assert q.batch_size == torch.Size([4])
        for key, value in SINGLE_VALUES.items():
            got = q.get(key)
            assert isinstance(got, NonTensorData), key
            assert got.batch_size == torch.Size([4])
            exp = _expected_single(backend, key, value)
            assert as_py(got) == exp, key
            assert type(as_py(got)) is type(exp), key
            # one value for every row of every view
            assert as_py(q[1:3][key]) == exp, key
            assert as_py(q[[3, 0]][key]) == exp, key
            assert q[[3, 0]].get(key).batch_size == torch.Size([2])
        for key, values in STACKS.items():
            got = q.get(key)
            assert isinstance(got, NonTensorStack), key
            assert got.batch_size == torch.Size([4]), key
            assert got.tolist() == values, key
            assert q[1:3][key] == values[1:3], key
            assert q[[3, 0, 3]][key] == [values[3], values[0], values[3]], key
            assert q[2][key] == values[2], key
        assert decoded(q["n", "label"]) == "inner"
        assert decoded(q["n"][1:2]["label"]) == "inner"
        out = q.to_tensordict()
        assert out["names"] == STACKS["names"]
        assert as_py(out.get("d")) == SINGLE_VALUES["d"]
        q.close()


def test_non_tensor_set_and_replace(tmp_path, backend) -> None:
    p = PersistentTensorDict(
        filename=str(tmp_path / f"w{SUFFIX[backend]}"), batch_size=[4], mode="w", backend=backend
    )
    p["a"] = torch.zeros(4)
    p["s"] = "first"
    p["s"] = "a longer second value"  # an existing key (tensordict's zarr fails here, §6.3)
    p["d"] = NonTensorData({"k": 1})
    p["d"] = NonTensorData([1, 2])
    p["names"] = NonTensorStack("a", "b", "c", "d")
    p[1:3] = {"names": NonTensorStack("B", "C")}
    p[[3]]["names"] = NonTensorStack("D")
    p.apply_(lambda t: t + 1)  # non-tensors are left alone
    p[1:3].apply_(lambda t: t + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        assert decoded(p["s"]) == "a longer second value"
    assert as_py(p["d"]) == [1, 2]  # h5: an opaque int64 array, as tensordict stores it
    assert p["names"] == ["a", "B", "C", "D"]
    assert torch.equal(p["a"], torch.tensor([1.0, 2.0, 2.0, 1.0]))
    p.close()


@pytest.mark.parametrize(
    ("stack", "shape"),
    [
        (["a", "b", "c"], [3]),
        ([[1, 2], [3, 4], [5, 6]], [3, 2]),
        ([["p", "q"], ["r", "s"], ["t", "u"]], [3, 2]),
    ],
    ids=["str_1d", "int_2d", "str_2d"],
)
def test_stack_views_match_in_memory(tmp_path, backend, stack, shape) -> None:
    src = TensorDict({"a": torch.zeros(3, 2)}, batch_size=[3, 2] if len(shape) == 2 else [3])
    src["st"] = NonTensorStack.from_list(stack, shape)
    p = PersistentTensorDict.from_dict(src, tmp_path / f"v{SUFFIX[backend]}", backend=backend)
    indices = [slice(0, 2), [2, 0, 2], 1, -1, torch.tensor([False, True, True])]
    if len(shape) == 2:
        indices += [(slice(None), 1), (1, slice(None)), (slice(1, 3), [1, 0]), ([2, 0], 1)]
    for idx in indices:
        expected = src[idx]["st"]
        assert p[idx]["st"] == expected, idx
        if src[idx].batch_size:
            assert p[idx][0:1]["st"] == src[idx][0:1]["st"], idx  # a view of a view
    p.close()


@pytest.mark.parametrize("foreign", [False, True], ids=["marked", "foreign"])
def test_stack_view_reads_only_the_selected_rows(recorder, tmp_path, backend, foreign) -> None:
    n = 1000
    names = [f"row{i}" for i in range(n)]
    path = tmp_path / f"rows{SUFFIX[backend]}"
    if foreign:
        _write_foreign_column(path, backend, names)
        p = reopen(path, backend, non_tensor_as_stack=True)
    else:
        src = TensorDict({"x": torch.arange(n)}, batch_size=[n])
        src["names"] = NonTensorStack(*names)
        p = PersistentTensorDict.from_dict(src, path, backend=backend)
    to_py = decoded if foreign and backend == "h5" else (lambda v: v)
    cases = [
        (slice(1, 3), [1, 2]),
        ([900, 5, 900], [900, 5, 900]),
        (torch.tensor([998, 10]), [998, 10]),
        (7, 7),
    ]
    for idx, rows in cases:
        recorder.clear()
        got = p[idx]["names"]
        expected = names[rows] if isinstance(rows, int) else [names[r] for r in rows]
        assert to_py(got) == expected, idx
        (call,) = recorder.reads()
        assert call.op == "read_non_tensor"
        assert call.path == ("names",)
        assert 0 < len(call.rows) <= 3, call.selection
        assert set(call.rows.tolist()) == set(np.atleast_1d(rows).tolist())
    p.close()


def _write_foreign_column(path: Any, backend: str, values: list[str], key: str = "names") -> None:
    if backend == "h5":
        with h5py.File(path, "w") as f:
            f[key] = np.array(values, dtype=h5py.string_dtype())
            f["x"] = np.arange(len(values))
    else:
        g = zarr.open_group(str(path), mode="w")
        arr = g.create_array(key, shape=(len(values),), dtype=str)
        arr[...] = np.array(values)
        g.create_array("x", data=np.arange(len(values)))


def test_stack_view_selection_at_the_library(tmp_path, monkeypatch) -> None:
    """h5py is asked for the rows (not the whole dataset) when a view reads a string stack."""
    n = 500
    src = TensorDict({"x": torch.arange(n)}, batch_size=[n])
    src["names"] = NonTensorStack(*[f"r{i}" for i in range(n)])
    p = PersistentTensorDict.from_dict(src, tmp_path / "l.h5", backend="h5")
    log: list = []
    orig = h5py.Dataset.__getitem__

    def getitem(self, args, new_dtype=None):
        log.append((self.name, args))
        return orig(self, args, new_dtype)

    monkeypatch.setattr(h5py.Dataset, "__getitem__", getitem)
    assert p[[400, 3]]["names"] == ["r400", "r3"]
    (sel,) = [args for name, args in log if name == "/names"]
    rows = sel[0] if isinstance(sel, tuple) else sel
    assert isinstance(rows, np.ndarray), sel
    assert rows.tolist() == [3, 400], sel
    p.close()


def test_empty_stack_view(tmp_path, backend) -> None:
    src = TensorDict({"x": torch.arange(3)}, batch_size=[3])
    src["names"] = NonTensorStack("a", "b", "c")
    p = PersistentTensorDict.from_dict(src, tmp_path / f"e{SUFFIX[backend]}", backend=backend)
    assert p[torch.tensor([False, False, False])]["names"] == []
    assert p[2:2]["names"] == []
    p.close()


# --------------------------------------------------------------------------------------------
# 2. strings
# --------------------------------------------------------------------------------------------


def test_h5_strings_written_by_ptd_are_marked_and_warn(tmp_path) -> None:
    path = tmp_path / "s.h5"
    p = PersistentTensorDict.from_dict(
        {"a": torch.zeros(3), "s": "hé", "n": {"t": "deep"}}, path, backend="h5"
    )
    p.close()
    with h5py.File(path, "r") as f:
        for name in ("s", "n/t"):
            ds = f[name]
            assert h5py.check_string_dtype(ds.dtype).encoding == "utf-8"
            assert ds.shape == ()
            assert ds.attrs["__tensordict_str__"] == np.True_
            # h5py's bool: an HDF5 ENUM {FALSE=0, TRUE=1} on int8, as tensordict writes it
            tid = ds.attrs.get_id("__tensordict_str__").get_type()
            assert tid.get_class() == h5py.h5t.ENUM
            assert tid.get_size() == 1
            assert {tid.get_member_name(i): tid.get_member_value(i) for i in range(2)} == {
                b"FALSE": 0,
                b"TRUE": 1,
            }
    q = PersistentTensorDict.from_h5(path)
    with pytest.warns(FutureWarning, match=STR_WARNING + " '/s'"):
        assert q["s"] == "hé".encode()
    with pytest.warns(FutureWarning, match=STR_WARNING + " '/n/t'"):
        assert q["n", "t"] == b"deep"
    with pytest.warns(FutureWarning, match=STR_WARNING):
        assert q[1:2]["s"] == "hé".encode()
    with pytest.warns(FutureWarning, match=STR_WARNING):
        assert q.to_tensordict()["s"] == "hé".encode()
    q.close()


def test_h5_foreign_strings_read_as_bytes_silently() -> None:
    """The plain h5py golden: vlen and fixed-length strings without the marker (no warning:
    ``filterwarnings = error``)."""
    q = PersistentTensorDict.from_h5(GOLDENS.PLAIN["h5"])
    exp = GOLDENS.expected_plain()
    assert q["title"] == exp["title"].encode()
    assert type(q["title"]) is bytes
    assert as_py(q["labels"]) == [s.encode() for s in exp["labels"]]
    assert as_py(q["codes"]) == [s.encode() for s in exp["codes"]]
    assert isinstance(q.get("labels"), NonTensorData)  # a column reads as one value...
    assert as_py(q[1:3]["labels"]) == [s.encode() for s in exp["labels"]]  # ...in every view
    q.close()


def test_zarr_strings_are_str(tmp_path) -> None:
    p = PersistentTensorDict.from_dict(
        {"a": torch.zeros(3), "s": "hé"}, tmp_path / "s.zarr", backend="zarr"
    )
    p.close()
    raw = (tmp_path / "s.zarr" / "s" / "c" / "0").read_bytes()
    assert raw == b'"h\\u00e9"'  # stdlib json.dumps, as tensordict writes it
    q = PersistentTensorDict.from_zarr(tmp_path / "s.zarr")
    assert q["s"] == "hé"
    assert q[0]["s"] == "hé"
    q.close()


@pytest.mark.parametrize("golden", [True, False], ids=["golden", "tmp"])
def test_non_tensor_as_stack_foreign_columns(tmp_path, backend, golden) -> None:
    if golden:
        path = GOLDENS.PLAIN[backend]
    else:
        path = tmp_path / f"f{SUFFIX[backend]}"
        _write_foreign_column(path, backend, ["alpha", "βeta", "gamma", "delta"], key="labels")
    exp = GOLDENS.expected_plain()["labels"]
    to_py = decoded if backend == "h5" else (lambda v: v)
    q = reopen(path, backend, non_tensor_as_stack=True)
    assert q.batch_size == torch.Size([4])
    st = q.get("labels")
    assert isinstance(st, NonTensorStack)
    assert st.batch_size == torch.Size([4])
    assert to_py(st.tolist()) == exp
    assert to_py(q[1:3]["labels"]) == exp[1:3]
    assert to_py(q[[3, 0]]["labels"]) == [exp[3], exp[0]]
    assert to_py(q[2]["labels"]) == exp[2]
    assert "labels: NonTensorStack" in repr(q)
    if golden:
        # a scalar string is one value whatever the option
        assert isinstance(q.get("title"), NonTensorData)
        if backend == "h5":
            assert to_py(q[1:3]["codes"]) == GOLDENS.expected_plain()["codes"][1:3]
    q.close()


def test_non_tensor_as_stack_2d_column(tmp_path, backend) -> None:
    """A 2-D foreign column under a [4] batch: a [4, 2] stack (as a marked 2-D stack reads),
    whose views select rows."""
    path = tmp_path / f"c2{SUFFIX[backend]}"
    grid = [["a", "b"], ["c", "d"], ["e", "f"], ["g", "h"]]
    if backend == "h5":
        with h5py.File(path, "w") as f:
            f["g"] = np.array(grid, dtype=h5py.string_dtype())
            f["x"] = np.arange(4)
    else:
        g = zarr.open_group(str(path), mode="w")
        arr = g.create_array("g", shape=(4, 2), dtype=str)
        arr[...] = np.array(grid)
        g.create_array("x", data=np.arange(4))
    to_py = decoded if backend == "h5" else (lambda v: v)
    q = reopen(path, backend, non_tensor_as_stack=True)
    st = q.get("g")
    assert isinstance(st, NonTensorStack)
    assert st.batch_size == torch.Size([4, 2])
    assert to_py(st.tolist()) == grid
    assert to_py(q[1:3]["g"]) == grid[1:3]
    assert to_py(q[[3, 0]]["g"]) == [grid[3], grid[0]]
    assert to_py(q[1]["g"]) == grid[1]
    q.close()


def test_column_whose_dims_are_not_the_batch_is_one_value(tmp_path, backend) -> None:
    path = tmp_path / f"c3{SUFFIX[backend]}"
    _write_foreign_column(path, backend, ["a", "b", "c"])
    to_py = decoded if backend == "h5" else (lambda v: v)
    # batch [] (not [3]): the column is one value even with non_tensor_as_stack
    q = opener(backend)(str(path), batch_size=[], non_tensor_as_stack=True)
    assert isinstance(q.get("names"), NonTensorData)
    assert to_py(as_py(q["names"])) == ["a", "b", "c"]
    q.close()


# --------------------------------------------------------------------------------------------
# 3. allow_pickle
# --------------------------------------------------------------------------------------------


class _Sentinel:
    """Unpickling it writes a file: proof that a pickle was decoded."""

    path = ""

    def __reduce__(self):
        return (_touch, (self.path,))


def _touch(path: str) -> str:
    with open(path, "w") as f:
        f.write("unpickled")
    return "touched"


def _zarr_with_pickle(tmp_path) -> tuple[Any, Any]:
    marker = tmp_path / "unpickled.txt"
    _Sentinel.path = str(marker)
    path = tmp_path / "pk.zarr"
    p = PersistentTensorDict.from_dict(
        {"a": torch.arange(3), "j": NonTensorData({"k": 1}), "o": NonTensorData(_Sentinel())},
        path,
        backend="zarr",
    )
    p.close()
    assert json.loads((path / "o" / "zarr.json").read_text())["attributes"] == {
        "__tensordict_non_tensor__": {"encoding": "pickle"}
    }
    return path, marker


def test_allow_pickle_false_refuses_before_decoding(tmp_path) -> None:
    path, marker = _zarr_with_pickle(tmp_path)
    for q in (
        PersistentTensorDict.from_zarr(path, allow_pickle=False),
        PersistentTensorDict(
            filename=str(path), batch_size=[3], backend="zarr", allow_pickle=False
        ),
    ):
        with pytest.raises(
            PickleRefusedError, match=r"'o'.*asks to unpickle.*allow_pickle=True"
        ) as info:
            q["o"]
        assert isinstance(info.value, RuntimeError)
        assert isinstance(info.value, PtdError)
        with pytest.raises(PickleRefusedError):
            q[1:2]["o"]
        with pytest.raises(PickleRefusedError):
            q.to_tensordict()
        assert q["j"] == {"k": 1}
        assert torch.equal(q["a"], torch.arange(3))
        assert "o: NonTensorData" in repr(q)  # listing reads no payload
        q.close()
    assert not marker.exists()


def test_allow_pickle_none_refuses_and_true_is_silent(tmp_path) -> None:
    # ptd's documented break from tensordict 0.15 (which decodes with a FutureWarning): the
    # default refuses, before anything is unpickled
    path, marker = _zarr_with_pickle(tmp_path)
    q = PersistentTensorDict.from_zarr(path)
    with pytest.raises(PickleRefusedError, match=r"unlike tensordict 0\.15"):
        q["o"]
    q.close()
    assert not marker.exists()
    q = PersistentTensorDict.from_zarr(path, allow_pickle=True)
    assert q["o"] == "touched"  # no warning (filterwarnings = error)
    q.close()
    with pytest.raises(TypeError, match="allow_pickle must be a bool or None"):
        PersistentTensorDict.from_zarr(path, allow_pickle=1)


def test_from_dict_allow_pickle_policy(tmp_path) -> None:
    value = NonTensorData((1, 2))  # a tuple is not JSON: pickled
    # None: the returned object reads what it wrote, silently
    p = PersistentTensorDict.from_dict({"o": value}, tmp_path / "a.zarr", backend="zarr")
    assert p["o"] == (1, 2)
    p.close()
    p = PersistentTensorDict.from_dict(
        {"o": value}, tmp_path / "b.zarr", backend="zarr", allow_pickle=False
    )
    with pytest.raises(PickleRefusedError):
        p["o"]
    p.close()
    p = PersistentTensorDict.from_dict(
        {"o": value}, tmp_path / "c.zarr", backend="zarr", allow_pickle=True
    )
    assert p["o"] == (1, 2)
    p.close()
    with pytest.raises(TypeError, match="allow_pickle must be a bool or None"):
        PersistentTensorDict.from_dict(
            {"o": value}, tmp_path / "d.zarr", backend="zarr", allow_pickle="yes"
        )
    assert not (tmp_path / "d.zarr").exists()


def test_h5_never_unpickles(tmp_path, monkeypatch) -> None:
    path = tmp_path / "p.h5"
    payload = pickle.dumps({"a": 1})
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(3)
        f["op"] = np.array(payload).astype(h5py.opaque_dtype(np.dtype(f"S{len(payload)}")))
        ds = f.create_dataset("marked", data=np.frombuffer(payload, np.uint8))
        ds.attrs["__tensordict_non_tensor__"] = json.dumps({"encoding": "pickle"})

    def refuse(*args, **kwargs):
        raise AssertionError("pickle was used")

    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "Unpickler", refuse)
    q = PersistentTensorDict.from_h5(path, allow_pickle=True)
    assert q["op"] == payload
    assert torch.equal(q["marked"], torch.from_numpy(np.frombuffer(payload, np.uint8).copy()))
    q.to_tensordict()
    q.close()
    p = PersistentTensorDict(filename=str(tmp_path / "w.h5"), mode="w", batch_size=[])
    with pytest.raises(TypeError, match="h5 never pickles"):
        p["o"] = NonTensorData({1, 2})  # a set: not JSON, and h5 never pickles
    assert "o" not in p.keys()
    p.close()


# --------------------------------------------------------------------------------------------
# 4. every dtype
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: str(d).removeprefix("torch."))
def test_dtype_round_trip_bit_exact(tmp_path, backend, dtype) -> None:
    t = random_bits(dtype, (7, 3), seed=1)
    u = random_bits(dtype, (7, 3, 2), seed=2)
    path = tmp_path / f"d{SUFFIX[backend]}"
    p = PersistentTensorDict.from_dict(
        {"x": t, "n": {"y": u}}, path, backend=backend, batch_size=[7, 3]
    )
    p.close()
    q = reopen(path, backend)
    assert q.batch_size == torch.Size([7, 3])
    assert_bits(q["x"], t)
    assert_bits(q["n", "y"], u)
    for idx in INDICES:
        assert_bits(q[idx]["x"], t[idx])
        assert_bits(q[idx]["n", "y"], u[idx])
        assert_bits(q["n"][idx]["y"], u[idx])
    assert_bits(q.to_tensordict()["x"], t)
    q.close()


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: str(d).removeprefix("torch."))
def test_dtype_scalar_empty_and_inplace(tmp_path, backend, dtype) -> None:
    path = tmp_path / f"s{SUFFIX[backend]}"
    scalar = random_bits(dtype, (1,), seed=3)[0]
    empty = torch.zeros(0, 4, dtype=dtype)
    p = PersistentTensorDict(filename=str(path), batch_size=[], mode="w", backend=backend)
    p["scalar"] = scalar
    p["empty"] = empty
    p.close()
    q = reopen(path, backend)
    assert_bits(q["scalar"], scalar)
    assert_bits(q["empty"], empty)
    q.close()
    # writes into existing entries keep every bit too
    w = random_bits(dtype, (5, 2), seed=4)
    new = random_bits(dtype, (2, 2), seed=5)
    p = PersistentTensorDict.from_dict(
        {"w": w}, tmp_path / f"w{SUFFIX[backend]}", backend=backend, batch_size=[5]
    )
    p[[4, 1]] = TensorDict({"w": new}, batch_size=[2])
    p[0]["w"] = new[0]
    rows = list(w.unbind(0))  # (torch has no index_put for uint16/32/64)
    rows[4], rows[1], rows[0] = new[0], new[1], new[0]
    assert_bits(p["w"], torch.stack(rows))
    assert_bits(p[[1, 4, 0]]["w"], torch.stack([rows[1], rows[4], rows[0]]))
    p.close()


def _unsupported_dtypes() -> list[torch.dtype]:
    names = [
        "complex32",
        "float8_e8m0fnu",
        "float4_e2m1fn_x2",
        "uint1",
        "uint4",
        "int3",
        "bits8",
        "bits16",
        "quint8",
        "qint32",
    ]
    return [getattr(torch, n) for n in names if hasattr(torch, n)]


def _make(dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "ComplexHalf support is experimental", quantized...
        try:
            return torch.empty(shape, dtype=dtype)
        except Exception as err:  # noqa: BLE001 - a dtype torch cannot allocate here
            pytest.skip(f"torch cannot make a {dtype} tensor: {err}")


@pytest.mark.parametrize("dtype", _unsupported_dtypes(), ids=str)
def test_unsupported_dtype_is_a_clear_error(tmp_path, backend, dtype) -> None:
    t = _make(dtype, (3, 2))
    path = tmp_path / f"u{SUFFIX[backend]}"
    with pytest.raises(UnsupportedDtypeError) as info:
        PersistentTensorDict.from_dict(
            {"ok": torch.zeros(3), "n": {"bad": t}}, path, backend=backend
        )
    msg = str(info.value)
    assert "'n/bad'" in msg
    assert str(dtype) in msg
    assert isinstance(info.value, TypeError)
    assert isinstance(info.value, PtdError)
    assert not path.exists()  # nothing written, no partial file (tensordict's §6.1)
    p = PersistentTensorDict(filename=str(path), batch_size=[3], mode="w", backend=backend)
    with pytest.raises(UnsupportedDtypeError, match=f"'bad'.*{dtype}"):
        p["bad"] = t
    assert "bad" not in p.keys()
    p.close()


# --------------------------------------------------------------------------------------------
# 5. batch-size metadata
# --------------------------------------------------------------------------------------------


def _meta_of(path: Any, backend: str, group: str = "") -> Any:
    if backend == "zarr":
        node = json.loads((path / group / "zarr.json" if group else path / "zarr.json").read_text())
        return node["attributes"].get("__tensordict__")
    with h5py.File(path, "r") as f:
        raw = f[group or "/"].attrs.get("__tensordict__")
        return None if raw is None else json.loads(raw)


def test_batch_size_metadata_recovers_the_batch_exactly(tmp_path, backend) -> None:
    """Every leaf is [4, 3, ...]: inference alone would give [4, 3]; the recorded [4] wins."""
    path = tmp_path / f"m{SUFFIX[backend]}"
    src = TensorDict(
        {"a": torch.zeros(4, 3), "n": TensorDict({"b": torch.zeros(4, 3, 2)}, batch_size=[4, 3])},
        batch_size=[4],
        names=["row"],
    )
    PersistentTensorDict.from_dict(src, path, backend=backend).close()
    assert _meta_of(path, backend) == {"batch_size": [4], "version": 1, "names": ["row"]}
    # the nested tensordict inherits the parent's names (as tensordict 0.15 writes them)
    assert _meta_of(path, backend, "n") == {
        "batch_size": [4, 3],
        "version": 1,
        "names": ["row", None],
    }
    q = reopen(path, backend)
    assert q.batch_size == torch.Size([4])
    assert q.names == ["row"]
    assert q["n"].batch_size == torch.Size([4, 3])
    q.close()
    q = reopen(path, backend, auto_batch_size=True)  # inference, the metadata ignored
    assert q.batch_size == torch.Size([4, 3])
    q.close()


def test_batch_size_metadata_dict_input_and_later_groups(tmp_path, backend) -> None:
    path = tmp_path / f"m{SUFFIX[backend]}"
    p = PersistentTensorDict.from_dict(
        {
            "a": torch.zeros(4, 3),
            "n": {"b": torch.zeros(4, 3, 5), "m": {"c": torch.zeros(4, 3, 5, 6)}},
        },
        path,
        backend=backend,
    )
    p["late", "x"] = torch.zeros(4, 3, 7)  # a group made after from_dict (tensordict's §6.8)
    p.close()
    assert _meta_of(path, backend)["batch_size"] == [4, 3]
    assert _meta_of(path, backend, "n")["batch_size"] == [4, 3, 5]
    assert _meta_of(path, backend, "n/m")["batch_size"] == [4, 3, 5, 6]
    assert _meta_of(path, backend, "late")["batch_size"] == [4, 3]
    q = reopen(path, backend)
    assert q.batch_size == torch.Size([4, 3])
    assert q["n"].batch_size == torch.Size([4, 3, 5])
    assert q["n", "m"].batch_size == torch.Size([4, 3, 5, 6])
    assert q["late"].batch_size == torch.Size([4, 3])
    q.close()


def test_batch_size_setter_and_constructor_write_metadata(tmp_path, backend) -> None:
    path = tmp_path / f"c{SUFFIX[backend]}"
    p = PersistentTensorDict(filename=str(path), batch_size=[4], mode="w", backend=backend)
    p["a"] = torch.zeros(4, 3)
    p.batch_size = [4, 3]
    p.close()
    assert _meta_of(path, backend)["batch_size"] == [4, 3]
    q = reopen(path, backend)
    assert q.batch_size == torch.Size([4, 3])
    q.close()


def test_metadata_that_does_not_fit_is_ignored(tmp_path, backend) -> None:
    path = tmp_path / f"x{SUFFIX[backend]}"
    bad = {"batch_size": [5], "version": 1}
    if backend == "h5":
        with h5py.File(path, "w") as f:
            f["a"] = np.zeros((4, 2))
            f.attrs["__tensordict__"] = json.dumps(bad)
            f.create_group("g").attrs["__tensordict__"] = "not json {"
            f["g/b"] = np.zeros((4, 2, 3))
    else:
        g = zarr.open_group(str(path), mode="w", attributes={"__tensordict__": bad})
        g.create_array("a", data=np.zeros((4, 2)))
        sub = g.create_group("g", attributes={"__tensordict__": {"batch_size": "nope"}})
        sub.create_array("b", data=np.zeros((4, 2, 3)))
    q = reopen(path, backend)
    assert q.batch_size == torch.Size([4, 2])  # inferred
    assert q["g"].batch_size == torch.Size([4, 2, 3])
    q.close()


def test_foreign_stores_infer_the_batch_size(backend) -> None:
    exp = GOLDENS.expected_plain()
    q = reopen(GOLDENS.PLAIN[backend], backend)
    assert q.batch_size == torch.Size([4])
    assert q["sensors"].batch_size == torch.Size([4, 2])
    assert q["sensors", "sub"].batch_size == torch.Size([4, 2, 5])
    assert torch.equal(q["x"], torch.from_numpy(exp["x"]))
    assert torch.equal(q["ids"], torch.from_numpy(exp["ids"]))
    assert torch.equal(q["sensors", "temp"], torch.from_numpy(exp["sensors"]["temp"]))
    assert torch.equal(q["sensors", "sub", "flag"], torch.from_numpy(exp["sensors"]["sub"]["flag"]))
    assert torch.equal(q[[3, 1]]["ids"], torch.from_numpy(exp["ids"][[3, 1]]))
    assert torch.equal(q[1:3]["sensors", "temp"], torch.from_numpy(exp["sensors"]["temp"][1:3]))
    assert torch.equal(
        q["sensors"][2]["sub", "flag"], torch.from_numpy(exp["sensors"]["sub"]["flag"][2])
    )
    title = q["title"]
    assert (decoded(title) if backend == "h5" else title) == exp["title"]
    if backend == "h5":
        assert torch.equal(q["big_endian"], torch.from_numpy(exp["big_endian"]))
        assert q["big_endian"].dtype == torch.float64
    q.close()


# --------------------------------------------------------------------------------------------
# bad payloads: a ptd error naming the key, never a crash or code execution
# --------------------------------------------------------------------------------------------

NT = "__tensordict_non_tensor__"
STACK = "__tensordict_stack__"


def _zarr_raw(path: Any, payload: bytes, attrs: dict, dtype: str = "uint8") -> None:
    g = zarr.open_group(str(path), mode="w")
    g.create_array("x", data=np.arange(3.0))
    data = np.frombuffer(payload, dtype=np.uint8).astype(dtype)
    arr = g.create_array("bad", shape=data.shape, dtype=dtype, compressors=None, attributes=attrs)
    if data.size:
        arr[...] = data


ZARR_BAD = {
    "invalid_json": (b'{"a": ', {NT: {"encoding": "json"}}, "Corrupt JSON"),
    "unknown_encoding": (
        b'"x"',
        {NT: {"encoding": "yaml"}},
        "Unknown zarr non-tensor encoding: 'yaml'",
    ),
    "marker_not_a_dict": (b'"x"', {NT: "json"}, "Unknown zarr non-tensor encoding: None"),
    "truncated_json": (b'"abc', {NT: {"encoding": "json"}}, "Corrupt JSON"),
    "empty_payload": (b"", {NT: {"encoding": "json"}}, "Corrupt JSON"),
    "invalid_utf8": (b'"\xff\xfe"', {NT: {"encoding": "json"}}, "UTF-8"),
    "truncated_pickle": (
        pickle.dumps({"a": list(range(50))})[:-20],
        {NT: {"encoding": "pickle"}},
        "Corrupt pickle",
    ),
    "stack_attr_not_a_shape": (
        b'["a"]',
        {NT: {"encoding": "json"}, STACK: "abc"},
        "Corrupt non-tensor stack",
    ),
    "stack_attr_negative": (
        b'["a"]',
        {NT: {"encoding": "json"}, STACK: [-1]},
        "Corrupt non-tensor stack",
    ),
    "stack_too_short": (
        b'["a", "b"]',
        {NT: {"encoding": "json"}, STACK: [3]},
        "Corrupt non-tensor stack",
    ),
    "stack_not_a_list": (b"5", {NT: {"encoding": "json"}, STACK: [3]}, "Corrupt non-tensor stack"),
}


@pytest.mark.parametrize("case", list(ZARR_BAD), ids=list(ZARR_BAD))
def test_bad_zarr_payloads(tmp_path, case) -> None:
    payload, attrs, match = ZARR_BAD[case]
    path = tmp_path / "bad.zarr"
    _zarr_raw(path, payload, attrs)
    q = PersistentTensorDict.from_zarr(path, allow_pickle=True)
    assert q.batch_size == torch.Size([3])
    for read in (
        lambda: q["bad"],
        lambda: q[1:3]["bad"],
        lambda: q[[2, 0]]["bad"],
        lambda: q.to_tensordict(),
    ):
        with pytest.raises(PtdValueError, match=match) as info:
            read()
        assert "'bad'" in str(info.value)
        assert "bad.zarr" in str(info.value)
    assert torch.equal(q["x"], torch.arange(3.0))  # the other keys still read
    q.close()


def test_bad_zarr_payload_dtype(tmp_path) -> None:
    _zarr_raw(tmp_path / "bad.zarr", b'"x"', {NT: {"encoding": "json"}}, dtype="float32")
    q = PersistentTensorDict.from_zarr(tmp_path / "bad.zarr")
    with pytest.raises(PtdValueError, match=r"'bad'.*uint8"):
        q["bad"]
    q.close()


def _h5_vlen_bytes(f: h5py.File, name: str, data: Any, shape: tuple = ()) -> h5py.Dataset:
    ds = f.create_dataset(name, shape=shape, dtype=h5py.string_dtype())
    ds[()] = data
    return ds


def _h5_invalid_json(f):
    f.create_dataset("bad", data='{"a": ', dtype=h5py.string_dtype()).attrs["__ptd_json__"] = True


def _h5_json_invalid_utf8(f):
    _h5_vlen_bytes(f, "bad", b'"\xff\xfe"').attrs["__ptd_json__"] = True


def _h5_stack_invalid_utf8(f):
    ds = _h5_vlen_bytes(f, "bad", np.array([b"a", b"\xff", b"c"], dtype=object), (3,))
    ds.attrs[STACK] = np.array([3])


def _h5_stack_attr_not_a_shape(f):
    ds = f.create_dataset("bad", data=np.array(["a", "b", "c"], dtype=h5py.string_dtype()))
    ds.attrs[STACK] = "abc"


def _h5_stack_attr_mismatch(f):
    ds = f.create_dataset("bad", data=np.array(["a", "b", "c"], dtype=h5py.string_dtype()))
    ds.attrs[STACK] = np.array([5])


def _h5_truncated_opaque(f):
    tid = h5py.h5t.create(h5py.h5t.OPAQUE, 4)  # 4 bytes tagged as an 8-byte int
    tid.set_tag(b"NUMPY:<i8")
    h5py.h5d.create(f.id, b"bad", tid, h5py.h5s.create(h5py.h5s.SCALAR))


def _h5_unknown_opaque_tag(f):
    tid = h5py.h5t.create(h5py.h5t.OPAQUE, 8)
    tid.set_tag(b"NUMPY:not-a-dtype")
    h5py.h5d.create(f.id, b"bad", tid, h5py.h5s.create_simple((3,)))


H5_BAD = {
    "invalid_json": (_h5_invalid_json, PtdValueError, "Corrupt JSON"),
    "json_invalid_utf8": (_h5_json_invalid_utf8, PtdValueError, "utf-8"),
    "stack_invalid_utf8": (_h5_stack_invalid_utf8, PtdValueError, "utf-8"),
    "stack_attr_not_a_shape": (
        _h5_stack_attr_not_a_shape,
        PtdValueError,
        "Corrupt non-tensor stack",
    ),
    "stack_attr_mismatch": (_h5_stack_attr_mismatch, PtdValueError, "Corrupt non-tensor stack"),
    "truncated_opaque": (_h5_truncated_opaque, PtdValueError, "cannot read"),
    "unknown_opaque_tag": (_h5_unknown_opaque_tag, UnsupportedDtypeError, "no torch equivalent"),
}


@pytest.mark.parametrize("case", list(H5_BAD), ids=list(H5_BAD))
def test_bad_h5_payloads(tmp_path, case) -> None:
    make, error, match = H5_BAD[case]
    path = tmp_path / "bad.h5"
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(3.0)
        make(f)
    q = PersistentTensorDict.from_h5(path)
    assert q.batch_size == torch.Size([3])
    for read in (lambda: q["bad"], lambda: q[1:3]["bad"], lambda: q.to_tensordict()):
        with pytest.raises(error, match=match) as info:
            read()
        assert "'bad'" in str(info.value)
        assert "bad.h5" in str(info.value)
        assert isinstance(info.value, PtdError)
    assert torch.equal(q["x"], torch.arange(3.0))
    q.close()


_CRASH_SCRIPT = textwrap.dedent(
    """
    import sys, h5py, numpy as np
    from ptd import PersistentTensorDict
    from ptd.errors import PtdError
    path, where = sys.argv[1], sys.argv[2]
    with h5py.File(path, "w") as f:
        f["x"] = np.zeros(3)
        tid = h5py.h5t.create(h5py.h5t.OPAQUE, 8)
        tid.set_tag(b"NUMPY:|O")  # opaque bytes that h5py would turn into object pointers
        data = np.array([0x4142434445464748] * 3, dtype=np.uint64)
        if where == "dataset":
            ds = h5py.h5d.create(f.id, b"bad", tid, h5py.h5s.create_simple((3,)))
            ds.write(h5py.h5s.ALL, h5py.h5s.ALL, data, mtype=tid)
        elif where == "vlen":
            h5py.h5d.create(f.id, b"bad", h5py.h5t.vlen_create(tid), h5py.h5s.create_simple((3,)))
        else:
            a = h5py.h5a.create(f["x"].id, b"bad", tid, h5py.h5s.create(h5py.h5s.SCALAR))
            a.write(data[:1].reshape(()), mtype=tid)
    q = PersistentTensorDict.from_h5(path)
    print(repr(q))
    try:
        q.to_tensordict()
    except PtdError as err:
        assert "'bad'" in str(err), err
        print("PtdError", err)
    q.close()
    print("ok")
    """
)


@pytest.mark.parametrize("where", ["dataset", "vlen", "attribute"])
def test_h5_opaque_object_type_does_not_crash(tmp_path, where) -> None:
    """A crafted opaque type tagged as numpy objects makes h5py dereference stored bytes as
    pointers (a segfault). ptd refuses it; run in a subprocess so a regression cannot take the
    test session down."""
    script = tmp_path / "crash.py"
    script.write_text(_CRASH_SCRIPT)
    res = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "o.h5"), where],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, (res.returncode, res.stderr[-2000:])
    assert res.stdout.strip().endswith("ok")
    if where != "attribute":
        assert "PtdError" in res.stdout


# --------------------------------------------------------------------------------------------
# 7. goldens written by tensordict 0.15.3 (read without tensordict)
# --------------------------------------------------------------------------------------------


def _check_td015(q: PersistentTensorDict, backend: str) -> None:
    exp = GOLDENS.expected_td015(backend)
    assert q.batch_size == torch.Size([3])
    assert q["nested"].batch_size == torch.Size([3, 2])
    assert q["nested", "deep"].batch_size == torch.Size([3, 2])
    for key in GOLDENS.DTYPES:
        assert_bits(q[key], exp[key])
        assert_bits(q[[2, 0]][key], exp[key][[2, 0]])
        assert_bits(q[1][key], exp[key][1])
    assert torch.equal(q["nested", "v"], exp["nested"]["v"])
    assert torch.equal(q[1:3]["nested", "deep", "w"], exp["nested"]["deep"]["w"][1:3])
    assert torch.equal(q["nested"][:, 1]["v"], exp["nested"]["v"][:, 1])
    assert q["names"] == exp["names"]
    assert q[1:3]["names"] == exp["names"][1:3]
    assert q[[2, 0, 2]]["counts"] == [30, 10, 30]
    assert q[1]["names"] == "bob"
    assert as_py(q["num"]) == exp["num"]
    if backend == "h5":  # zarr: a pickle (tested with the allow_pickle policy)
        assert bytes(q["raw"]) == exp["raw"]


def test_golden_td015_h5() -> None:
    q = PersistentTensorDict.from_h5(GOLDENS.TD015["h5"])
    _check_td015(q, "h5")
    with pytest.warns(FutureWarning, match=STR_WARNING):
        assert q["text"] == "héllo wörld".encode()
    assert q.names == [None]  # h5 stores no names
    assert "names: NonTensorStack" in repr(q)
    assert "num: NonTensorData" in repr(q)
    q.close()


def test_golden_td015_zarr() -> None:
    q = PersistentTensorDict.from_zarr(GOLDENS.TD015["zarr"], allow_pickle=False)
    _check_td015(q, "zarr")
    exp = GOLDENS.expected_td015("zarr")
    assert q.names == ["row"]
    assert q["text"] == exp["text"]
    assert q["meta"] == exp["meta"]
    assert q["none"] is None
    assert q["mixed"] == exp["mixed"]
    assert q[[2, 0]]["mixed"] == ["x", {"a": 1}]
    with pytest.raises(PickleRefusedError, match="'raw'"):
        q["raw"]  # tensordict pickles bytes on zarr
    q.close()
    q = PersistentTensorDict.from_zarr(GOLDENS.TD015["zarr"])  # the default refuses too
    with pytest.raises(PickleRefusedError, match="'raw'"):
        q["raw"]
    q.close()
    q = PersistentTensorDict.from_zarr(GOLDENS.TD015["zarr"], allow_pickle=True)
    assert q["raw"] == exp["raw"]
    q.close()


def test_goldens_are_small_and_documented() -> None:
    with open(os.path.join(HERE, "data", "README.md")) as f:
        readme = f.read()
    for path in list(GOLDENS.TD015.values()) + list(GOLDENS.PLAIN.values()):
        name = os.path.basename(path)
        assert name in readme
        if os.path.isdir(path):
            size = sum(
                os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs
            )
        else:
            size = os.path.getsize(path)
        assert size < 40_000, (name, size)


def test_plain_zarr_golden_has_no_attributes() -> None:
    path = GOLDENS.PLAIN["zarr"]
    for d, _, files in os.walk(path):
        if "zarr.json" in files:
            with open(os.path.join(d, "zarr.json")) as f:
                node = json.load(f)
            assert node.get("attributes", {}) == {}, d
    with h5py.File(GOLDENS.PLAIN["h5"], "r") as f:
        seen: list = []
        f.visititems(lambda name, obj: seen.append((name, dict(obj.attrs))))
        assert all(attrs == {} for _, attrs in seen)
        assert not dict(f.attrs)


# --------------------------------------------------------------------------------------------
# 6. interop with tensordict 0.15 (the oracle), both directions
# --------------------------------------------------------------------------------------------


def _content(lib: Any, backend: str, *, names: bool = True) -> Any:
    """The same tensordict built with ``lib`` (tensordict or ptd): every shared dtype, nested
    groups with extra batch dims, strings, JSON non-tensors and stacks (batch size [4])."""
    td = lib.TensorDict({}, batch_size=[4], names=["row"] if names and backend == "zarr" else None)
    for i, dt in enumerate(SHARED_DTYPES):
        td[str(dt).removeprefix("torch.")] = random_bits(dt, (4, 2), seed=10 + i)
    deep = lib.TensorDict({"w": torch.arange(24.0).reshape(4, 3, 2)}, batch_size=[4, 3])
    td["nested"] = lib.TensorDict(
        {"v": torch.arange(12, dtype=torch.int16).reshape(4, 3), "deep": deep}, batch_size=[4, 3]
    )
    td["nested", "label"] = lib.NonTensorData("inner")
    td["text"] = lib.NonTensorData("héllo")
    td["names"] = lib.NonTensorStack("a", "bb", "ccc", "dddd")
    td["counts"] = lib.NonTensorStack(1, 2, 3, 4)
    if backend == "h5":
        td["num"] = lib.NonTensorData(5)
        td["ratio"] = lib.NonTensorData(0.5)
        td["raw"] = lib.NonTensorData(b"raw")
    else:
        td["meta"] = lib.NonTensorData({"k": [1, 2], "s": "v"})
        td["none"] = lib.NonTensorData(None)
        td["lst"] = lib.NonTensorData([1, "a", None])
        td["num"] = lib.NonTensorData(5)
        td["mixed"] = lib.NonTensorStack({"a": 1}, [2], "x", None)
    return td


def _td_open(tdmod: Any, path: Any, backend: str, **kwargs: Any) -> Any:
    cls = tdmod.PersistentTensorDict
    return (cls.from_h5 if backend == "h5" else cls.from_zarr)(str(path), **kwargs)


READ_INDICES = [slice(1, 3), [3, 0, 3], 2, torch.tensor([True, False, True, True])]


@pytest.mark.interop
def test_interop_tensordict_writes_ptd_reads(tmp_path, backend) -> None:
    tdmod = pytest.importorskip("tensordict")
    src = _content(tdmod, backend)
    path = tmp_path / f"td{SUFFIX[backend]}"
    tdmod.PersistentTensorDict.from_dict(src, filename=str(path), backend=backend).close()
    q = reopen(path, backend, allow_pickle=False) if backend == "zarr" else reopen(path, backend)
    # batch sizes: zarr from the __tensordict__ attributes, h5 inferred (as tensordict does)
    assert q.batch_size == torch.Size([4])
    assert q["nested"].batch_size == torch.Size([4, 3])
    assert q["nested", "deep"].batch_size == torch.Size([4, 3] if backend == "zarr" else [4, 3, 2])
    assert q.names == (["row"] if backend == "zarr" else [None])
    for dt in SHARED_DTYPES:
        key = str(dt).removeprefix("torch.")
        assert_bits(q[key], src[key])
        for idx in READ_INDICES:
            assert_bits(q[idx][key], src[idx][key])
    assert torch.equal(q["nested", "deep", "w"], src["nested", "deep", "w"])
    assert torch.equal(q[1:3]["nested", "v"], src["nested", "v"][1:3])
    assert torch.equal(q["nested"][[2, 0], 1]["v"], src["nested", "v"][[2, 0], 1])
    for key in ("names", "counts"):
        assert q[key] == list(src[key])
        assert q[1:3][key] == list(src[1:3][key])
        assert q[[3, 0, 3]][key] == list(src[[3, 0, 3]][key])
        assert q[2][key] == src[2][key]
    if backend == "h5":
        with pytest.warns(FutureWarning, match=STR_WARNING):
            assert q["text"] == "héllo".encode()
        with pytest.warns(FutureWarning, match=STR_WARNING):
            assert q["nested", "label"] == b"inner"
        assert as_py(q["num"]) == 5
        assert as_py(q["ratio"]) == 0.5
        assert bytes(q["raw"]) == b"raw"
    else:
        assert q["text"] == "héllo"
        assert q["nested", "label"] == "inner"
        assert q["meta"] == {"k": [1, 2], "s": "v"}
        assert q["none"] is None
        assert q["lst"] == [1, "a", None]
        assert q["num"] == 5
        assert q["mixed"] == [{"a": 1}, [2], "x", None]
        assert q[[3, 1]]["mixed"] == [None, [2]]
    q.close()


@pytest.mark.interop
def test_interop_ptd_writes_tensordict_reads(tmp_path, backend) -> None:
    tdmod = pytest.importorskip("tensordict")
    src = _content(ptd, backend)
    bf16 = random_bits(torch.bfloat16, (4, 2), seed=99)
    src["bf16"] = bf16
    path = tmp_path / f"ptd{SUFFIX[backend]}"
    PersistentTensorDict.from_dict(src, path, backend=backend).close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # h5: tensordict counts its own opaque numbers (num, ratio) as 0-d tensors and would
        # infer [] (its §6.11), on its own files too: give it the batch size
        ref = _td_open(tdmod, path, backend, **({"batch_size": [4]} if backend == "h5" else {}))
        try:
            assert ref.batch_size == torch.Size([4])
            # h5 with a given batch size: tensordict gives nested groups the root's
            assert ref["nested"].batch_size == torch.Size([4, 3] if backend == "zarr" else [4])
            if backend == "zarr":
                assert ref.names == ["row"]
                assert ref["nested"]["deep"].batch_size == torch.Size([4, 3])
            for dt in SHARED_DTYPES:
                key = str(dt).removeprefix("torch.")
                assert_bits(ref[key], src[key])
                for idx in READ_INDICES:
                    assert_bits(ref[idx][key], src[key][idx])
            # bfloat16: tensordict sees the uint16 bits (its dtype is in ptd's attribute)
            assert torch.equal(ref["bf16"], bf16.view(torch.uint16))
            assert torch.equal(ref["nested", "deep", "w"], src["nested", "deep", "w"])
            assert torch.equal(ref[1:3]["nested", "v"], src["nested", "v"][1:3])
            for key in ("names", "counts"):
                assert list(ref[key]) == src[key]
                assert list(ref[1:3][key]) == src[key][1:3]
                assert ref[2][key] == src[key][2]
            text = ref["text"]
            if backend == "h5":
                assert text == "héllo".encode()
                assert as_py(ref["num"]) == 5
                assert as_py(ref["ratio"]) == 0.5
                assert bytes(ref["raw"]) == b"raw"
            else:
                assert text == "héllo"
                assert ref["nested", "label"] == "inner"
                assert ref["meta"] == {"k": [1, 2], "s": "v"}
                assert ref["none"] is None
                assert ref["lst"] == [1, "a", None]
                assert ref["num"] == 5
                assert list(ref["mixed"]) == [{"a": 1}, [2], "x", None]
        finally:
            ref.close()
    # tensordict's own warning for strings that carry the marker (h5), and no pickle (zarr)
    messages = [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]
    if backend == "h5":
        assert any("reads the string '/text', which tensordict wrote" in m for m in messages)
    assert not any("pickle" in m for m in messages)


@pytest.mark.interop
def test_interop_zarr_group_metadata_matches_tensordict(tmp_path) -> None:
    tdmod = pytest.importorskip("tensordict")
    ref, mine = tmp_path / "ref.zarr", tmp_path / "mine.zarr"
    tdmod.PersistentTensorDict.from_dict(
        _content(tdmod, "zarr", names=False), filename=str(ref), backend="zarr"
    ).close()
    PersistentTensorDict.from_dict(_content(ptd, "zarr", names=False), mine, backend="zarr").close()
    for group in ("", "nested", "nested/deep"):
        want = json.loads((ref / group / "zarr.json").read_text())
        got = json.loads((mine / group / "zarr.json").read_text())
        assert got["attributes"] == want["attributes"], group
    # the payloads and stacks are byte-identical
    for key in ("text", "meta", "none", "lst", "num", "mixed", "nested/label"):
        assert (mine / key / "c" / "0").read_bytes() == (ref / key / "c" / "0").read_bytes(), key
        assert (
            json.loads((mine / key / "zarr.json").read_text())["attributes"]
            == json.loads((ref / key / "zarr.json").read_text())["attributes"]
        ), key
    # both consolidate: the root lists the same nodes
    want = json.loads((ref / "zarr.json").read_text())["consolidated_metadata"]["metadata"]
    got = json.loads((mine / "zarr.json").read_text())["consolidated_metadata"]["metadata"]
    assert sorted(got) == sorted(want)
    # names on the root, as tensordict writes them
    PersistentTensorDict.from_dict(
        _content(ptd, "zarr"), tmp_path / "n.zarr", backend="zarr"
    ).close()
    meta = json.loads((tmp_path / "n.zarr" / "zarr.json").read_text())["attributes"]
    assert meta == {"__tensordict__": {"batch_size": [4], "version": 1, "names": ["row"]}}


@pytest.mark.interop
def test_interop_constructor_store_recovered_by_tensordict(tmp_path, backend) -> None:
    """A store built key by key (not with from_dict) opens in tensordict with the batch size."""
    tdmod = pytest.importorskip("tensordict")
    path = tmp_path / f"c{SUFFIX[backend]}"
    p = PersistentTensorDict(filename=str(path), batch_size=[4], mode="w", backend=backend)
    p["a"] = torch.zeros(4, 3)  # inference alone would give [4, 3]
    p["n", "b"] = torch.ones(4, 3, dtype=torch.int64)
    p["s"] = "hello"
    p["names"] = NonTensorStack("w", "x", "y", "z")
    p.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        ref = _td_open(tdmod, path, backend)
        try:
            # zarr: tensordict reads the recorded [4]; h5: it infers [4] (the stack is [4])
            assert ref.batch_size == torch.Size([4])
            assert ref["n"].batch_size == torch.Size([4] if backend == "zarr" else [4, 3])
            assert list(ref["names"]) == ["w", "x", "y", "z"]
            assert decoded(ref["s"]) == "hello"
            assert torch.equal(ref["n", "b"], torch.ones(4, 3, dtype=torch.int64))
        finally:
            ref.close()
    q = reopen(path, backend)
    assert q.batch_size == torch.Size([4])
    assert q["n"].batch_size == torch.Size([4])
    q.close()


@pytest.mark.interop
def test_interop_modify_each_others_files(tmp_path, backend) -> None:
    """ptd opens a tensordict file in r+ and changes it; tensordict reads the changes, and the
    other way round."""
    tdmod = pytest.importorskip("tensordict")
    path = tmp_path / f"m{SUFFIX[backend]}"
    src = _content(tdmod, backend)
    tdmod.PersistentTensorDict.from_dict(src, filename=str(path), backend=backend).close()
    q = reopen(path, backend, mode="r+")
    q[1:3] = {"float32": torch.full((2, 2), 7.0)}
    q["names"] = NonTensorStack("p", "q", "r", "s")
    q[[0]] = {"names": NonTensorStack("P")}
    q["nested", "extra"] = torch.arange(12).reshape(4, 3)
    q["added"] = "new"
    q.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        ref = _td_open(
            tdmod, path, backend, mode="r+", **({"batch_size": [4]} if backend == "h5" else {})
        )  # see above
        try:
            assert torch.equal(ref["float32"][1:3], torch.full((2, 2), 7.0))
            assert torch.equal(ref["float32"][[0, 3]], src["float32"][[0, 3]])
            assert list(ref["names"]) == ["P", "q", "r", "s"]
            assert torch.equal(ref["nested", "extra"], torch.arange(12).reshape(4, 3))
            assert decoded(ref["added"]) == "new"
            ref["int64"][:] = 0  # a read copy: nothing written
            ref[0] = {"int32": torch.zeros(2, dtype=torch.int32)}  # written
        finally:
            ref.close()
    q = reopen(path, backend)
    assert torch.equal(q["int32"][0], torch.zeros(2, dtype=torch.int32))
    assert torch.equal(q["int32"][1:], src["int32"][1:])
    assert q["nested"].batch_size == torch.Size([4, 3])
    q.close()


@pytest.mark.interop
def test_interop_pickled_payloads_both_ways(tmp_path) -> None:
    tdmod = pytest.importorskip("tensordict")
    path = tmp_path / "td.zarr"
    td = tdmod.TensorDict({"a": torch.arange(3)}, batch_size=[3])
    td["b"] = tdmod.NonTensorData(b"bytes")
    td["t"] = tdmod.NonTensorData((1, 2))
    tdmod.PersistentTensorDict.from_dict(td, filename=str(path), backend="zarr").close()
    q = PersistentTensorDict.from_zarr(path, allow_pickle=False)
    with pytest.raises(PickleRefusedError, match="'b'"):
        q["b"]
    assert torch.equal(q["a"], torch.arange(3))
    q.close()
    q = PersistentTensorDict.from_zarr(path)
    with pytest.raises(PickleRefusedError, match="'t'"):
        q["t"]
    q.close()
    q = PersistentTensorDict.from_zarr(path, allow_pickle=True)
    assert q["b"] == b"bytes"
    assert q["t"] == (1, 2)
    q.close()
    mine = tmp_path / "mine.zarr"
    PersistentTensorDict.from_dict(
        {"a": torch.arange(3), "b": NonTensorData(b"bytes"), "t": NonTensorData((1, 2))},
        mine,
        backend="zarr",
    ).close()
    ref = tdmod.PersistentTensorDict.from_zarr(str(mine), allow_pickle=True)
    try:
        assert ref["b"] == b"bytes"
        assert ref["t"] == (1, 2)
    finally:
        ref.close()
    ref = tdmod.PersistentTensorDict.from_zarr(str(mine), allow_pickle=False)
    try:
        with pytest.raises(RuntimeError, match="Refusing to load pickled"):
            ref["b"]
    finally:
        ref.close()


@pytest.mark.interop
@pytest.mark.parametrize("backend", ["h5", "zarr"])
def test_interop_tensordict_reads_the_goldens_too(backend) -> None:
    """The committed goldens are what tensordict 0.15.3 reads (the plain ones included)."""
    tdmod = pytest.importorskip("tensordict")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        ref = (
            _td_open(tdmod, GOLDENS.TD015[backend], backend, allow_pickle=True)
            if backend == "zarr"
            else _td_open(tdmod, GOLDENS.TD015[backend], backend, batch_size=[3])
        )  # its own opaque "num": §6.11
        q = (
            reopen(GOLDENS.TD015[backend], backend, allow_pickle=True)
            if backend == "zarr"
            else reopen(GOLDENS.TD015[backend], backend)
        )
        try:
            assert q.batch_size == ref.batch_size
            for key in GOLDENS.DTYPES:
                assert_bits(q[key], ref[key])
            assert list(ref["names"]) == q["names"]
            assert decoded(ref["text"]) == decoded(q["text"])
        finally:
            ref.close()
            q.close()
        ref = _td_open(tdmod, GOLDENS.PLAIN[backend], backend, non_tensor_as_stack=True)
        q = reopen(GOLDENS.PLAIN[backend], backend, non_tensor_as_stack=True)
        try:
            assert q.batch_size == ref.batch_size
            assert q["sensors"].batch_size == ref["sensors"].batch_size
            assert list(ref["labels"]) == q["labels"]
            assert list(ref[1:3]["labels"]) == q[1:3]["labels"]
        finally:
            ref.close()
            q.close()
