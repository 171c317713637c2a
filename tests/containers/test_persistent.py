"""PersistentTensorDict on both backends (issue items 3, 4 and 6, and the "Also" list).

Every test that takes the ``backend`` fixture runs on h5 and on zarr.
"""

from __future__ import annotations

import os
import pickle
import tempfile
import warnings

import h5py
import numpy as np
import pytest
import torch
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ptd
from ptd import PersistentTensorDict, TensorDict
from ptd.errors import (
    BatchSizeError,
    PickleRefusedError,
    PtdError,
    PtdKeyError,
    PtdValueError,
    ReadOnlyError,
    StoreExistsError,
    StoreNotFoundError,
)

SUFFIX = {"h5": ".h5", "zarr": ".zarr"}


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def leaves(td) -> dict:
    return {".".join(k) if isinstance(k, tuple) else k: td.get(k) for k in td.keys(True, True)}


def assert_same_leaves(got, expected) -> None:
    g, e = leaves(got), leaves(expected)
    assert sorted(g) == sorted(e)
    for k in e:
        assert g[k].dtype == e[k].dtype, k
        assert g[k].shape == e[k].shape, k
        assert torch.equal(g[k], e[k]), k


def opener(backend):
    return PersistentTensorDict.from_h5 if backend == "h5" else PersistentTensorDict.from_zarr


def reopen(path, backend, **kwargs):
    return opener(backend)(str(path), **kwargs)


def rows_of(selection, n: int) -> int:
    """How many distinct rows of dim 0 a selection asks for (storage reads each once: its
    indexer folds repeats into the output)."""
    if not isinstance(selection, tuple):
        selection = (selection,)
    if not selection or selection[0] is Ellipsis:
        return n
    first = selection[0]
    if isinstance(first, slice):
        return len(range(*first.indices(n)))
    if isinstance(first, (int, np.integer)):
        return 1
    return len(np.unique(first))


@pytest.fixture
def library_read_log(monkeypatch):
    """The selections ptd hands to h5py / zarr themselves (below the Backend interface)."""
    log: list = []
    orig_h5 = h5py.Dataset.__getitem__

    def h5_getitem(self, args, new_dtype=None):
        log.append(("h5py", self.name, args))
        return orig_h5(self, args, new_dtype)

    monkeypatch.setattr(h5py.Dataset, "__getitem__", h5_getitem)
    for meth in (
        "get_orthogonal_selection",
        "get_basic_selection",
        "get_coordinate_selection",
        "get_mask_selection",
    ):
        orig = getattr(zarr.Array, meth)

        def zarr_get(self, selection=Ellipsis, *args, _orig=orig, **kwargs):
            log.append(("zarr", self.path, selection))
            return _orig(self, selection, *args, **kwargs)

        monkeypatch.setattr(zarr.Array, meth, zarr_get)
    return log


# --------------------------------------------------------------------------------------------
# the reference page's two examples, printed exactly
# --------------------------------------------------------------------------------------------


def _example_constructor(backend: str) -> None:
    with tempfile.TemporaryDirectory() as tmpdir:
        path = os.path.join(tmpdir, "data" + SUFFIX[backend])
        kwargs = {} if backend == "h5" else {"backend": "zarr"}
        data = PersistentTensorDict(filename=path, batch_size=[3], mode="w", **kwargs)
        data["a", "b"] = torch.zeros(3, 4)
        data["a", "b"] += 1
        print(type(data["a"]).__name__, data["a", "b"][0])
        data.close()


def _example_from_dict(backend: str) -> None:
    with tempfile.TemporaryDirectory() as tmpdir:
        kwargs = {} if backend == "h5" else {"backend": "zarr"}
        ptd_ = PersistentTensorDict.from_dict(
            {"a": torch.zeros(3, 4), "b": {"c": torch.ones(3)}},
            os.path.join(tmpdir, "data" + SUFFIX[backend]),
            **kwargs,
        )
        print(ptd_.batch_size, ptd_["b", "c"])
        ptd_.close()


def test_doc_example_constructor(backend, capsys) -> None:
    _example_constructor(backend)
    assert capsys.readouterr().out == "PersistentTensorDict tensor([1., 1., 1., 1.])\n"


def test_doc_example_from_dict(backend, capsys) -> None:
    _example_from_dict(backend)
    assert capsys.readouterr().out == "torch.Size([3]) tensor([1., 1., 1.])\n"


def test_doc_example_constructor_verbatim_doctest() -> None:
    """The page's first example, run by doctest with only the import changed."""
    import doctest

    text = """
>>> import os
>>> import tempfile
>>> import torch
>>> from ptd import PersistentTensorDict
>>> with tempfile.TemporaryDirectory() as tmpdir:
...     path = os.path.join(tmpdir, "data.h5")
...     data = PersistentTensorDict(filename=path, batch_size=[3], mode="w")
...     data["a", "b"] = torch.zeros(3, 4)
...     data["a", "b"] += 1
...     print(type(data["a"]).__name__, data["a", "b"][0])
...     data.close()
PersistentTensorDict tensor([1., 1., 1., 1.])
>>> with tempfile.TemporaryDirectory() as tmpdir:
...     ptd = PersistentTensorDict.from_dict(
...         {"a": torch.zeros(3, 4), "b": {"c": torch.ones(3)}},
...         os.path.join(tmpdir, "data.h5"),
...     )
...     print(ptd.batch_size, ptd["b", "c"])
...     ptd.close()
torch.Size([3]) tensor([1., 1., 1.])
"""
    test = doctest.DocTestParser().get_doctest(text, {}, "reference", None, 0)
    runner = doctest.DocTestRunner(optionflags=0)
    runner.run(test, out=lambda s: None)
    assert runner.failures == 0
    assert runner.tries == 6


# --------------------------------------------------------------------------------------------
# constructor arguments and their errors
# --------------------------------------------------------------------------------------------


def test_positional_argument_is_a_type_error(store_path) -> None:
    with pytest.raises(TypeError, match="positional"):
        PersistentTensorDict(str(store_path))  # type: ignore[misc]


def test_neither_filename_nor_group(backend) -> None:
    with pytest.raises(RuntimeError, match="filename") as info:
        PersistentTensorDict(batch_size=[3], backend=backend)
    assert isinstance(info.value, PtdError)
    assert "group" in str(info.value)


def test_filename_and_group_are_exclusive(backend, store_path, make_ptd) -> None:
    p = make_ptd()
    group = (
        h5py.File(p.filename, "r")
        if backend == "h5"
        else zarr.open_group(str(p.filename), mode="r")
    )
    try:
        with pytest.raises((ValueError, RuntimeError), match="group") as info:
            PersistentTensorDict(filename=str(store_path), group=group, backend=backend)
        assert isinstance(info.value, PtdError)
        assert not store_path.exists()  # nothing created
    finally:
        if backend == "h5":
            group.close()


@pytest.mark.parametrize("mode", ["q", "rb", "R", "", "w+"])
def test_invalid_mode(store_path, backend, mode) -> None:
    with pytest.raises(ValueError, match="r, r\\+, w, w-, x, a"):
        PersistentTensorDict(filename=str(store_path), mode=mode, backend=backend)
    assert not store_path.exists()


@pytest.mark.parametrize("name", ["hdf5", "zip", "H5", None])
def test_unknown_backend(tmp_path, name) -> None:
    with pytest.raises(
        NotImplementedError, match=r"Supported backends are \['h5', 'zarr'\]"
    ) as info:
        PersistentTensorDict(filename=str(tmp_path / "x"), mode="w", backend=name)
    assert f"Unknown backend {name!r}." in str(info.value)
    assert isinstance(info.value, PtdError)
    with pytest.raises(NotImplementedError, match="Unknown backend"):
        PersistentTensorDict.from_dict({"a": torch.zeros(2)}, tmp_path / "y", backend=name)


def test_batch_size_mismatch_is_a_value_error(make_ptd, backend) -> None:
    p = make_ptd()
    path = p.filename
    p.close()
    with pytest.raises(BatchSizeError) as info:
        PersistentTensorDict(filename=path, batch_size=[5], backend=backend)
    err = info.value
    assert isinstance(err, BatchSizeError)
    assert isinstance(err, PtdError)
    msg = str(err)
    assert os.path.basename(str(path)) in msg  # names the file
    assert "[5]" in msg  # names what was expected


def test_batch_size_variants(make_ptd, backend) -> None:
    path = make_ptd().filename
    for bs in (None, [], [6], (6,), torch.Size([6])):
        q = PersistentTensorDict(filename=path, batch_size=bs, backend=backend)
        assert isinstance(q.batch_size, torch.Size)
        assert q.batch_size == torch.Size([] if bs is None else list(bs))
        q.close()
    with pytest.raises(TypeError):
        PersistentTensorDict(filename=path, batch_size=6, backend=backend)


def test_validate_batch_size_false_accepts_a_wrong_size(make_ptd, backend) -> None:
    path = make_ptd({"a": torch.arange(12.0).reshape(3, 4)}).filename
    q = PersistentTensorDict(
        filename=path, batch_size=[4], backend=backend, validate_batch_size=False
    )
    assert q.batch_size == torch.Size([4])
    assert torch.equal(q[0]["a"], torch.arange(4.0))
    q.close()
    with pytest.raises(BatchSizeError):
        PersistentTensorDict(
            filename=path, batch_size=[4], backend=backend, validate_batch_size=True
        )


def test_device_argument(make_ptd, backend) -> None:
    path = make_ptd().filename
    q = PersistentTensorDict(filename=path, batch_size=[6], backend=backend)
    assert q.device is None
    assert q["a"].device == torch.device("cpu")
    assert "device" not in repr(q)
    q.close()
    q = PersistentTensorDict(filename=path, batch_size=[6], backend=backend, device="cpu")
    assert q.device == torch.device("cpu")
    assert q["a"].device == torch.device("cpu")
    assert q[1:3]["n", "c"].device == torch.device("cpu")
    assert repr(q).startswith("PersistentTensorDict(batch_size=[6], device=cpu, fields={")
    q.close()


def test_mode_and_backend_attributes(store_path, backend) -> None:
    p = PersistentTensorDict(filename=str(store_path), batch_size=[2], mode="w", backend=backend)
    assert p.mode == "w"
    assert p.backend == backend
    assert p.filename == str(store_path)
    p.close()
    p = PersistentTensorDict(filename=store_path, batch_size=[], backend=backend)  # a Path works
    assert p.mode == "r"
    p.close()


def test_file_attribute(make_ptd, backend) -> None:
    """The reference's ``file`` attribute: the h5py File/Group or zarr Group."""
    p = make_ptd()
    f = p.file
    assert isinstance(f, h5py.Group if backend == "h5" else zarr.Group)
    assert isinstance(p["n"].file, h5py.Group if backend == "h5" else zarr.Group)


def test_kwargs_go_to_dataset_creation(store_path, backend) -> None:
    kw = {"compression": "gzip"} if backend == "h5" else {"chunks": (2,)}
    p = PersistentTensorDict.from_dict(
        {"a": torch.zeros(6, 4), "n": {"b": torch.zeros(6)}}, store_path, backend=backend, **kw
    )
    p.close()
    q = PersistentTensorDict(
        filename=str(store_path), mode="r+", batch_size=[6], backend=backend, **kw
    )
    q["c"] = torch.zeros(6, 3)
    q["n", "d"] = torch.zeros(6, 5)
    q.close()
    if backend == "h5":
        with h5py.File(store_path, "r") as f:
            assert [f[k].compression for k in ("a", "n/b", "c", "n/d")] == ["gzip"] * 4
    else:
        g = zarr.open_group(str(store_path), mode="r")
        assert g["a"].chunks == (2, 4)
        assert g["n/b"].chunks == (2,)
        assert g["c"].chunks == (2, 3)
        assert g["n/d"].chunks == (2, 5)


def test_kwargs_property_is_deprecated(store_path, backend) -> None:
    kw = {"compression": "gzip"} if backend == "h5" else {"chunks": (2,)}
    p = PersistentTensorDict(filename=str(store_path), mode="w", backend=backend, **kw)
    with pytest.warns(DeprecationWarning, match="kwargs is deprecated"):
        value = p.kwargs
    assert value == kw
    p.close()


def test_allow_pickle_must_be_bool_or_none(store_path, backend) -> None:
    with pytest.raises(TypeError, match="allow_pickle must be a bool or None"):
        PersistentTensorDict(
            filename=str(store_path), mode="w", backend=backend, allow_pickle="yes"
        )


def test_allow_pickle_zarr(tmp_path) -> None:
    path = tmp_path / "p.zarr"
    p = PersistentTensorDict.from_dict({"a": torch.zeros(3)}, path, backend="zarr")
    p["o"] = {1, 2}  # not JSON: pickled
    assert p["o"] == {1, 2}  # from_dict's result reads what it wrote
    p.close()
    q = PersistentTensorDict.from_zarr(str(path))  # the default (None) refuses, unlike tensordict
    with pytest.raises(PickleRefusedError, match="'o'"):
        q["o"]
    q.close()
    q = PersistentTensorDict.from_zarr(str(path), allow_pickle=True)
    assert q["o"] == {1, 2}
    q.close()
    q = PersistentTensorDict(filename=str(path), batch_size=[3], backend="zarr", allow_pickle=False)
    with pytest.raises(RuntimeError, match="allow_pickle=True") as info:
        q["o"]
    assert isinstance(info.value, PtdError)
    assert torch.equal(q["a"], torch.zeros(3))  # tensor keys still work
    q.close()


def _foreign_string_column(path, backend) -> None:
    if backend == "h5":
        with h5py.File(path, "w") as f:
            f["s"] = np.array([b"a", b"b", b"c"])
            f["x"] = np.arange(3.0)
    else:
        g = zarr.open_group(str(path), mode="w")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # zarr: fixed-length strings have no v3 spec yet
            g.create_array("s", data=np.array(["a", "b", "c"]))
        g.create_array("x", data=np.arange(3.0))


def test_non_tensor_as_stack(store_path, backend) -> None:
    _foreign_string_column(store_path, backend)
    to_py = (lambda v: v.decode()) if backend == "h5" else str
    q = PersistentTensorDict(filename=str(store_path), batch_size=[3], backend=backend)
    assert type(q.get("s")).__name__ == "NonTensorData"
    assert [to_py(v) for v in np.asarray(q["s"]).tolist()] == ["a", "b", "c"]
    assert "s: NonTensorData" in repr(q)
    q.close()
    q = PersistentTensorDict(
        filename=str(store_path), batch_size=[3], backend=backend, non_tensor_as_stack=True
    )
    assert type(q.get("s")).__name__ == "NonTensorStack"
    assert [to_py(v) for v in q["s"]] == ["a", "b", "c"]
    assert to_py(q[1]["s"]) == "b"
    assert [to_py(v) for v in q[[2, 0]]["s"]] == ["c", "a"]
    assert "s: NonTensorStack" in repr(q)
    q.close()


# --------------------------------------------------------------------------------------------
# errors module
# --------------------------------------------------------------------------------------------


def test_errors_hierarchy() -> None:
    from ptd import errors

    assert errors.PtdError is ptd.PtdError
    assert issubclass(errors.PtdError, Exception)
    pairs = [
        (errors.PtdKeyError, KeyError),
        (errors.BatchSizeError, ValueError),
        (errors.StoreNotFoundError, FileNotFoundError),
        (errors.ReadOnlyError, PermissionError),
        (errors.StoreExistsError, FileExistsError),
        (errors.UnknownBackendError, NotImplementedError),
    ]
    for cls, builtin in pairs:
        assert issubclass(cls, errors.PtdError), cls
        assert issubclass(cls, builtin), cls
    for name in errors.__all__:
        cls = getattr(errors, name)
        if name == "Interrupted":  # a stop at Ctrl-C: a KeyboardInterrupt, not an error
            assert issubclass(cls, KeyboardInterrupt)
            assert not issubclass(cls, Exception)
            continue
        if name == "redact":  # what every error applies to its text (credentials hidden)
            assert errors.redact("http://u:pw@host/x.zarr") == "http://***@host/x.zarr"
            continue
        if name == "Option":  # a part of a message (an argument named as the fix)
            assert not issubclass(cls, BaseException)
            assert str(cls("overwrite")) == "overwrite=True"
            assert str(cls("to", "zarr")) == "to='zarr'"
            assert str(cls("chunks", None)) == "chunks"
            continue
        assert issubclass(cls, Warning if name.endswith("Warning") else errors.PtdError), name
    # KeyError quotes its message; ours reads plainly
    assert str(errors.PtdKeyError("key 'a' not found")) == "key 'a' not found"


def test_missing_key_names_key_and_file(sample_ptd) -> None:
    with pytest.raises(KeyError) as info:
        sample_ptd["nonexistent"]
    assert isinstance(info.value, PtdKeyError)
    msg = str(info.value)
    assert "nonexistent" in msg
    assert os.path.basename(str(sample_ptd.filename)) in msg
    with pytest.raises(KeyError, match="zz"):
        sample_ptd["n", "zz"]
    assert sample_ptd.get("nonexistent", 3) == 3


def test_batch_mismatch_on_set_names_key_and_file(sample_ptd) -> None:
    with pytest.raises(BatchSizeError) as info:
        sample_ptd["bad"] = torch.zeros(5)
    assert isinstance(info.value, BatchSizeError)
    msg = str(info.value)
    assert "'bad'" in msg
    assert os.path.basename(str(sample_ptd.filename)) in msg
    assert "[6]" in msg
    assert "bad" not in sample_ptd
    with pytest.raises(BatchSizeError):
        sample_ptd["n", "bad"] = torch.zeros(6 * 2).reshape(2, 6)


# --------------------------------------------------------------------------------------------
# modes
# --------------------------------------------------------------------------------------------


def _read_only_writes(q):
    return {
        "set existing": lambda: q.__setitem__("a", torch.zeros(6, 4)),
        "set new": lambda: q.__setitem__("new", torch.zeros(6)),
        "set nested new": lambda: q.__setitem__(("g", "h"), torch.zeros(6)),
        "index write": lambda: q.__setitem__(0, 1),
        "view write": lambda: q[1:3].__setitem__("a", torch.zeros(2, 4)),
        "zero_": q.zero_,
        "add_": lambda: q.add_(1),
        "mul_": lambda: q.mul_(2),
        "apply_": lambda: q.apply_(lambda t: t + 1),
        "update_": lambda: q.update_({"b": torch.zeros(6, dtype=torch.int64)}),
        "fill_": lambda: q.fill_("a", 1.0),
        "del": lambda: q.__delitem__("a"),
        "rename": lambda: q.rename_key_("a", "q"),
    }


def test_mode_r_is_read_only(make_ptd, backend) -> None:
    path = make_ptd().filename
    q = PersistentTensorDict(filename=path, batch_size=[6], backend=backend, mode="r")
    before = q.to_tensordict()
    for what, fn in _read_only_writes(q).items():
        with pytest.raises(PermissionError) as info:
            fn()
        assert isinstance(info.value, ReadOnlyError), what
        assert os.path.basename(str(path)) in str(info.value), what
    assert_same_leaves(q, before)
    assert sorted(q.keys()) == ["a", "b", "n"]
    q.close()


@pytest.mark.parametrize("mode", ["r", "r+"])
def test_missing_store_is_file_not_found(store_path, backend, mode) -> None:
    with pytest.raises(FileNotFoundError) as info:
        PersistentTensorDict(filename=str(store_path), mode=mode, backend=backend)
    assert isinstance(info.value, StoreNotFoundError)
    assert str(store_path) in str(info.value)
    assert not store_path.exists()
    with pytest.raises(FileNotFoundError):
        opener(backend)(str(store_path))


@pytest.mark.parametrize("mode", ["w-", "x"])
def test_exclusive_create(store_path, backend, mode) -> None:
    p = PersistentTensorDict(filename=str(store_path), mode=mode, backend=backend, batch_size=[2])
    p["a"] = torch.ones(2)
    p.close()
    with pytest.raises(FileExistsError) as info:
        PersistentTensorDict(filename=str(store_path), mode=mode, backend=backend)
    assert isinstance(info.value, StoreExistsError)
    assert str(store_path) in str(info.value)
    q = reopen(store_path, backend)
    assert torch.equal(q["a"], torch.ones(2))  # untouched
    q.close()


def test_mode_w_truncates(make_ptd, backend) -> None:
    p = make_ptd()
    path = p.filename
    p.close()
    p = PersistentTensorDict(filename=path, mode="w", backend=backend)
    assert list(p.keys()) == []
    p.close()
    q = reopen(path, backend)
    assert list(q.keys()) == []
    q.close()


def test_mode_a(store_path, backend) -> None:
    p = PersistentTensorDict(filename=str(store_path), mode="a", backend=backend, batch_size=[3])
    assert store_path.exists()
    p["a"] = torch.arange(3)
    p.close()
    p = PersistentTensorDict(filename=str(store_path), mode="a", backend=backend, batch_size=[3])
    assert torch.equal(p["a"], torch.arange(3))
    p["b"] = torch.ones(3)
    p.close()
    q = PersistentTensorDict(filename=str(store_path), mode="r+", backend=backend, batch_size=[3])
    assert sorted(q.keys()) == ["a", "b"]
    q["a"] = torch.zeros(3, dtype=torch.int64)
    q.close()
    q = reopen(store_path, backend)
    assert torch.equal(q["a"], torch.zeros(3, dtype=torch.int64))
    q.close()


# --------------------------------------------------------------------------------------------
# from_h5 / from_zarr: batch-size inference and nested groups
# --------------------------------------------------------------------------------------------


def test_inference_of_nested_batch_sizes(make_ptd, backend) -> None:
    data = {
        "a": torch.zeros(3, 4),
        "n": {"b": torch.zeros(3, 4, 5), "m": {"c": torch.zeros(3, 4, 5, 6)}},
    }
    path = make_ptd(data).filename
    q = reopen(path, backend)
    assert q.batch_size == torch.Size([3, 4])
    assert isinstance(q["n"], PersistentTensorDict)
    assert q["n"].batch_size == torch.Size([3, 4, 5])
    assert q["n", "m"].batch_size == torch.Size([3, 4, 5, 6])
    assert q["n"]["m"].batch_size == q["n", "m"].batch_size  # the same whatever the access path
    assert q.mode == "r"
    q.close()


def test_from_open_with_batch_size(make_ptd, backend) -> None:
    path = make_ptd().filename
    q = reopen(path, backend, batch_size=[6])
    assert q.batch_size == torch.Size([6])
    q.close()
    with pytest.raises(BatchSizeError):
        reopen(path, backend, batch_size=[5])
    q = reopen(path, backend, auto_batch_size=True, batch_dims=1)
    assert q.batch_size == torch.Size([6])
    q.close()


def test_from_open_conflicting_batch_sizes(make_ptd, backend) -> None:
    path = make_ptd().filename
    with pytest.raises(TypeError, match="Conflicting batch sizes"):
        reopen(path, backend, batch_size=[6], auto_batch_size=True)


def test_from_open_batch_dims_without_auto_warns(make_ptd, backend) -> None:
    path = make_ptd().filename
    with pytest.warns(FutureWarning, match="batch_dims"):
        q = reopen(path, backend, batch_dims=0)
    assert q.batch_size == torch.Size([6])
    q.close()


def test_string_only_levels(make_ptd, backend) -> None:
    p = make_ptd({"s": "x"}, name="s")
    assert p.batch_size == torch.Size([])
    path = p.filename
    p.close()
    q = reopen(path, backend)
    assert q.batch_size == torch.Size([])
    assert list(q.keys()) == ["s"]
    q.close()
    p = make_ptd({"n": {"s": "x"}, "a": torch.zeros(2, 3)}, name="s2")
    assert p.batch_size == torch.Size([2, 3])
    path = p.filename
    p.close()
    q = reopen(path, backend)
    assert q.batch_size == torch.Size([2, 3])
    assert q["n"].batch_size == torch.Size([2, 3])
    q.close()


def test_nested_groups_are_persistent_tensordicts(sample_ptd) -> None:
    n = sample_ptd["n"]
    assert isinstance(n, PersistentTensorDict)
    assert n is sample_ptd["n"]  # cached
    assert isinstance(sample_ptd["n", "m"], PersistentTensorDict)
    assert sample_ptd["n", "m"].batch_size == torch.Size([6, 3])
    assert sample_ptd["a"] is not sample_ptd["a"]  # each read is a new tensor
    t = sample_ptd["a"]
    t[0] = 999.0
    assert sample_ptd["a"][0, 0] == 0.0  # in-place changes of a read tensor do not reach the file
    sample_ptd["n", "new"] = torch.ones(6)
    assert torch.equal(sample_ptd["n"]["new"], torch.ones(6))


def test_keys_contains_len_iter(sample_ptd, sample_td) -> None:
    assert set(sample_ptd.keys()) == {"a", "b", "n"}
    assert set(sample_ptd.keys(True, True)) == set(sample_td.keys(True, True))
    assert set(sample_ptd.keys(True)) == set(sample_td.keys(True))
    for k in ("a", ("n",), ("n", "c"), ("n", "m", "d")):
        assert k in sample_ptd
    for k in ("zz", ("n", "zz"), ("a", "b"), "a/b"):
        assert k not in sample_ptd
    assert len(sample_ptd) == 6
    rows = list(sample_ptd)
    assert len(rows) == 6
    for i, r in enumerate(rows):
        assert isinstance(r, TensorDict)
        assert_same_leaves(r, sample_td[i])


def test_del_pop_rename(sample_ptd, backend) -> None:
    del sample_ptd["b"]
    assert "b" not in sample_ptd
    c = sample_ptd.pop(("n", "c"))
    assert torch.equal(c, torch.arange(12, dtype=torch.int32).reshape(6, 2))
    assert ("n", "c") not in sample_ptd
    assert sample_ptd.pop("zz", 5) == 5
    sample_ptd.rename_key_("a", "z")
    assert "a" not in sample_ptd
    assert sample_ptd["z"].shape == (6, 4)
    with pytest.raises(KeyError):
        sample_ptd.rename_key_("z", "n", safe=True)
    path = sample_ptd.filename
    sample_ptd.close()
    q = reopen(path, backend)
    assert set(q.keys(True, True)) == {"z", ("n", "m", "d")}
    q.close()


# --------------------------------------------------------------------------------------------
# from_dict
# --------------------------------------------------------------------------------------------


def test_from_dict_dict_input(make_ptd, sample_td) -> None:
    p = make_ptd()
    assert isinstance(p, PersistentTensorDict)
    assert p.batch_size == torch.Size([6])
    assert p["n", "m"].batch_size == torch.Size([6, 3])
    assert_same_leaves(p, sample_td)
    p["new"] = torch.ones(6)  # open for writing
    assert torch.equal(p["new"], torch.ones(6))


def test_from_dict_tensordict_input_keeps_nested_batch(make_ptd, backend) -> None:
    td = TensorDict(
        {
            "a": torch.arange(12.0).reshape(3, 4),
            "n": TensorDict({"b": torch.zeros(3, 4, 5)}, [3, 4]),
        },
        [3],
    )
    p = make_ptd(td)
    assert p.batch_size == torch.Size([3])
    assert p["n"].batch_size == torch.Size([3, 4])
    assert_same_leaves(p, td)
    path = p.filename
    p.close()
    q = reopen(path, backend)
    assert q.batch_size == torch.Size([3])
    assert q["n"].batch_size == torch.Size([3, 4])
    q.close()


def test_from_dict_batch_size_and_batch_dims(make_ptd) -> None:
    data = {"a": torch.zeros(3, 4), "n": {"b": torch.zeros(3, 4, 5)}}
    p = make_ptd(data, name="bs", batch_size=[3])
    assert p.batch_size == torch.Size([3])
    p = make_ptd(data, name="bd", batch_dims=1)
    assert p.batch_size == torch.Size([3])
    p = make_ptd(data, name="bd5", batch_dims=5)
    assert p.batch_size == torch.Size([3, 4])
    p = make_ptd(data, name="inf")
    assert p.batch_size == torch.Size([3, 4])
    assert p["n"].batch_size == torch.Size([3, 4, 5])
    p = make_ptd(TensorDict(data, [3, 4]), name="tdbs", batch_size=[3])
    assert p.batch_size == torch.Size([3])


def test_from_dict_batch_dims_cuts_nested_groups(make_ptd) -> None:
    p = make_ptd({"a": torch.zeros(3, 4), "n": {"b": torch.zeros(3, 4, 5)}}, batch_dims=1)
    assert p["n"].batch_size == torch.Size([3])


def test_from_dict_batch_size_with_batch_dims_is_a_value_error(tmp_path, backend) -> None:
    path = tmp_path / ("x" + SUFFIX[backend])
    with pytest.raises(ValueError, match="batch_dims"):
        PersistentTensorDict.from_dict(
            {"a": torch.zeros(3)}, path, backend=backend, batch_size=[3], batch_dims=1
        )
    with pytest.raises(ValueError, match="batch_dims"):
        PersistentTensorDict.from_dict(
            TensorDict({"a": torch.zeros(3)}, [3]),
            path,
            backend=backend,
            batch_size=[3],
            batch_dims=1,
        )


def test_from_dict_batch_size_that_does_not_fit(tmp_path, backend) -> None:
    path = tmp_path / ("x" + SUFFIX[backend])
    with pytest.raises(BatchSizeError) as info:
        PersistentTensorDict.from_dict(
            {"a": torch.zeros(3, 4)}, path, backend=backend, batch_size=[5]
        )
    assert "'a'" in str(info.value)


def test_from_dict_of_a_persistent_tensordict(make_ptd, tmp_path, backend, sample_td) -> None:
    src = make_ptd()
    p = PersistentTensorDict.from_dict(src, tmp_path / ("copy" + SUFFIX[backend]), backend=backend)
    assert_same_leaves(p, sample_td)
    assert p["n", "m"].batch_size == torch.Size([6, 3])
    p.close()
    other = "zarr" if backend == "h5" else "h5"
    p = PersistentTensorDict.from_dict(src[1:4], tmp_path / ("view" + SUFFIX[other]), backend=other)
    assert_same_leaves(p, sample_td[1:4])
    p.close()


def test_from_dict_device_and_kwargs(tmp_path, backend) -> None:
    kw = {"compression": "gzip"} if backend == "h5" else {"chunks": (1,)}
    p = PersistentTensorDict.from_dict(
        {"a": torch.zeros(2, 3)},
        tmp_path / ("x" + SUFFIX[backend]),
        backend=backend,
        device="cpu",
        **kw,
    )
    assert p.device == torch.device("cpu")
    assert p["a"].device.type == "cpu"
    p.close()
    if backend == "h5":
        with h5py.File(tmp_path / "x.h5") as f:
            assert f["a"].compression == "gzip"
    else:
        assert zarr.open_group(str(tmp_path / "x.zarr"), mode="r")["a"].chunks == (1, 3)


def test_from_dict_auto_batch_size_is_not_used(make_ptd) -> None:
    data = {"a": torch.zeros(3, 2), "n": {"b": torch.zeros(3, 2, 4)}}
    for i, auto in enumerate((True, False)):
        p = make_ptd(data, name=f"auto{i}", auto_batch_size=auto)
        assert p.batch_size == torch.Size([3, 2])
        p = make_ptd(data, name=f"autobs{i}", auto_batch_size=auto, batch_size=[3])
        assert p.batch_size == torch.Size([3])


def test_from_dict_allow_pickle_false(tmp_path) -> None:
    p = PersistentTensorDict.from_dict(
        {"a": torch.zeros(2), "o": {1, 2}}, tmp_path / "x.zarr", backend="zarr", allow_pickle=False
    )
    with pytest.raises(RuntimeError, match="allow_pickle"):
        p["o"]
    assert torch.equal(p["a"], torch.zeros(2))
    p.close()


def test_from_dict_truncates(make_ptd, backend) -> None:
    p = make_ptd()
    path = p.filename
    p.close()
    p = PersistentTensorDict.from_dict({"only": torch.zeros(2)}, path, backend=backend)
    assert list(p.keys()) == ["only"]
    p.close()


# --------------------------------------------------------------------------------------------
# group= with an open h5py.File / zarr.Group
# --------------------------------------------------------------------------------------------


def test_group_argument(make_ptd, backend, sample_td) -> None:
    path = make_ptd().filename
    if backend == "h5":
        handle = h5py.File(path, "r+")
        root, nested = handle, handle["n"]
    else:
        handle = zarr.open_group(str(path), mode="r+")
        root, nested = handle, handle["n"]
    try:
        p = PersistentTensorDict(group=root, batch_size=[6], backend=backend)
        assert_same_leaves(p, sample_td)
        p["z"] = torch.ones(6)
        q = PersistentTensorDict(group=nested, batch_size=[6], backend=backend)
        assert set(q.keys()) == {"c", "m"}
        assert torch.equal(q["c"], sample_td["n", "c"])
        with pytest.raises(BatchSizeError):
            PersistentTensorDict(group=nested, batch_size=[5], backend=backend)
        q.close()
        p.close()
    finally:
        if backend == "h5":
            handle.close()
    q = reopen(path, backend)
    assert torch.equal(q["z"], torch.ones(6))
    q.close()


# --------------------------------------------------------------------------------------------
# lazy indexing: reads
# --------------------------------------------------------------------------------------------

INDICES = [
    0,
    -1,
    5,
    slice(None),
    slice(1, 5),
    slice(None, None, 2),
    slice(4, None, -1),
    slice(3, 3),
    [4, 1],
    [5, 0, 0, 3],
    torch.tensor([2, 2, 2]),
    torch.tensor([5, 1, 3, 0]),
    np.array([3, -1, 0]),
    torch.tensor([True, False, True, True, False, False]),
    [True] * 6,
    [False] * 6,
    ...,
    (...,),
    (slice(1, 4),),
    torch.tensor(2),
    [],
    (..., [0, 5]),
]


def mem_index(idx, n: int = 6):
    """``idx`` for the in-memory oracle: torch has no negative slice steps, and an empty list
    becomes an int64 tensor."""
    if isinstance(idx, slice) and idx.step is not None and idx.step < 0:
        return torch.tensor(list(range(n)[idx]), dtype=torch.int64)
    if isinstance(idx, list) and not idx:
        return torch.tensor([], dtype=torch.int64)
    return idx


@pytest.mark.parametrize("idx", INDICES, ids=repr)
def test_lazy_index_reads_match_in_memory(sample_ptd, sample_td, idx) -> None:
    view = sample_ptd[idx]
    expected = sample_td[mem_index(idx)]
    assert isinstance(view, PersistentTensorDict)  # lazy: still file-backed
    assert view.batch_size == expected.batch_size
    assert view["n"].batch_size == expected.batch_size
    assert view["n", "m"].batch_size == expected.batch_size + torch.Size([3])
    assert_same_leaves(view, expected)
    td = view.to_tensordict()
    assert isinstance(td, TensorDict)
    assert_same_leaves(td, expected)


@pytest.mark.parametrize(
    "idx",
    [
        (1, [0, 4]),
        ([3, 0], [1, 1]),
        (slice(None), [4, 0, 4]),
        ([2, 0], slice(1, 4)),
        (..., 2),
        (2, ...),
        (torch.tensor([[True, False] * 2 + [True]] * 4),),
        (torch.tensor([True, False, False, True]), slice(None, None, 2)),
        (slice(1, 3), torch.tensor([False, True, True, False, True])),
        (-1, -2),
        ([1, 1], [-1, -1]),
    ],
    ids=repr,
)
def test_lazy_index_reads_2d(make_ptd, idx) -> None:
    td = TensorDict(
        {
            "x": torch.arange(4 * 5 * 3).reshape(4, 5, 3),
            "y": torch.randn(4, 5, generator=torch.Generator().manual_seed(0)),
        },
        [4, 5],
    )
    p = make_ptd(td)
    view = p[idx]
    assert view.batch_size == td[idx].batch_size
    assert_same_leaves(view, td[idx])


VIEW_CHAINS = [
    (slice(1, 5), [3, 0, 0]),
    (slice(None, None, 2), -1),
    (torch.tensor([True, False, True, True, False, True]), slice(1, None)),
    ([5, 0, 3], torch.tensor([True, False, True])),
    ([5, 5, 1, 0], [3, 0, 3]),
    (slice(None, None, -1), slice(1, 5, 2)),
    (slice(1, 6), [-1, 0], 1),
]


@pytest.mark.parametrize("chain", VIEW_CHAINS, ids=repr)
def test_views_of_views_read(sample_ptd, sample_td, chain) -> None:
    view, expected = sample_ptd, sample_td
    for idx in chain:
        view, expected = view[idx], expected[mem_index(idx, len(expected))]
        assert isinstance(view, PersistentTensorDict)
        assert view.batch_size == expected.batch_size
    assert_same_leaves(view, expected)


def test_array_then_ellipsis_index(sample_ptd, sample_td) -> None:
    assert_same_leaves(sample_ptd[[4, 1], ...], sample_td[[4, 1], ...])


@st.composite
def _torch_index(draw, shape):
    """ints, positive slices, int lists/tensors (unsorted, repeated, negative) and bool masks."""
    items = []
    for n in shape[: draw(st.integers(1, len(shape)))]:
        kind = draw(st.sampled_from(["int", "slice", "list", "tensor", "mask"]))
        if kind == "int" and n:
            items.append(draw(st.integers(-n, n - 1)))
        elif kind in ("list", "tensor") and n:
            vals = draw(st.lists(st.integers(-n, n - 1), max_size=5))
            items.append(vals if kind == "list" and vals else torch.tensor(vals, dtype=torch.int64))
        elif kind == "mask":
            items.append(
                torch.tensor(
                    draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=torch.bool
                )
            )
        else:
            items.append(
                slice(
                    draw(st.none() | st.integers(-n - 1, n + 1)),
                    draw(st.none() | st.integers(-n - 1, n + 1)),
                    draw(st.none() | st.integers(1, 3)),
                )
            )
    return items[0] if len(items) == 1 and draw(st.booleans()) else tuple(items)


@settings(
    max_examples=60,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_random_view_chains_match_torch(make_ptd, data) -> None:
    """Random chains of indices on a stored [4, 5] batch read what torch gives in memory."""
    td = TensorDict(_grid(), [4, 5])
    p = _random_chain_store(make_ptd)
    view, expected = p, td
    for _ in range(data.draw(st.integers(1, 3))):
        if not expected.batch_size:
            break
        idx = data.draw(_torch_index(tuple(expected.batch_size)))
        try:
            nxt = expected[idx]
        except (IndexError, RuntimeError):  # torch: RuntimeError for unbroadcastable indices
            with pytest.raises(IndexError):
                view[idx]
            return
        try:
            view = view[idx]
        except IndexError as err:  # a layout ptd refuses lazily: it names the fix
            assert "to_tensordict" in str(err)
            return
        expected = nxt
        assert view.batch_size == expected.batch_size
    assert_same_leaves(view, expected)


@settings(
    max_examples=60,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_random_view_chain_writes(make_ptd, data) -> None:
    """Writing a value through a random chain of views changes exactly the stored elements that
    the chain selects (the last write wins for repeated rows), as numpy assignment does."""
    p = _random_chain_store(make_ptd)
    p["y"] = torch.zeros(4, 5, dtype=torch.int64)  # reset (an in-place write)
    ids = torch.arange(20).reshape(4, 5)
    view = p
    for _ in range(data.draw(st.integers(1, 3))):
        if not ids.ndim:
            break
        idx = data.draw(_torch_index(tuple(ids.shape)))
        try:
            nxt = ids[idx]
            view = view[idx]
        except (IndexError, RuntimeError):
            return
        ids = nxt
    value = torch.arange(1, ids.numel() + 1).reshape(ids.shape)
    view["y"] = value
    expected = torch.zeros(20, dtype=torch.int64)
    flat_ids = ids.reshape(-1).numpy()
    flat_val = value.reshape(-1).numpy()
    out = expected.numpy()
    out[flat_ids] = flat_val  # numpy: the last of repeated targets wins
    assert torch.equal(p["y"], torch.from_numpy(out).reshape(4, 5))


def _random_chain_store(make_ptd):
    store = getattr(make_ptd, "_ptd_store", None)
    if store is None:
        store = make_ptd(_grid(), name="grid", batch_size=[4, 5])
        make_ptd._ptd_store = store
    return store


def test_creating_a_view_reads_nothing(recorder, sample_ptd) -> None:
    recorder.clear()
    v = sample_ptd[torch.tensor([4, 1, 4])]
    v = v[1:]
    v = v[torch.tensor([True, False])]
    assert v.batch_size == torch.Size([1])
    assert recorder.backends
    assert recorder.reads() == []
    assert torch.equal(v["a"], torch.arange(4.0, 8.0).reshape(1, 4))
    assert len(recorder.reads()) == 1


def test_view_of_bad_index_raises_at_once(sample_ptd) -> None:
    with pytest.raises(IndexError):
        sample_ptd[6]
    with pytest.raises(IndexError):
        sample_ptd[[0, 6]]
    with pytest.raises(IndexError):
        sample_ptd[1:3][2]
    with pytest.raises(IndexError):
        sample_ptd[0, 0]
    with pytest.raises(IndexError):
        sample_ptd[torch.tensor([True, False])]


def test_leaf_read_reads_only_the_rows_asked(recorder, make_ptd, monkeypatch) -> None:
    # the library path; the memory-map fast path is checked in test_fast_path.py
    monkeypatch.setenv("PTD_FAST_PATH", "0")
    n = 100_000
    p = make_ptd(
        {
            "x": torch.arange(n, dtype=torch.float64),
            "y": torch.arange(2 * n, dtype=torch.int32).reshape(n, 2),
        },
        name="big",
    )
    idx = torch.from_numpy(np.random.default_rng(0).choice(n, 256, replace=False))
    recorder.clear()
    view = p[idx]
    got = view["x"]
    assert torch.equal(got, idx.double())
    assert torch.equal(view["y"][:, 0], 2 * idx.int())
    assert len(recorder.reads()) == 2
    for call in recorder.reads():
        assert call.selection != (), f"full read of {call.key}"
        assert len(np.unique(call.rows)) <= 256, call
    # an unsorted index with repeats: still no more rows than asked
    recorder.clear()
    idx2 = torch.cat([idx[:100], idx[:50]])
    assert torch.equal(p[idx2]["x"], idx2.double())
    (call,) = recorder.reads()
    assert len(np.unique(call.rows)) <= 100


def test_storage_reads_only_the_rows_asked(
    make_ptd, backend, library_read_log, monkeypatch
) -> None:
    """Below the Backend interface too: h5py / zarr are asked for the rows, not a span."""
    monkeypatch.setenv("PTD_FAST_PATH", "0")  # the library path (test_fast_path.py: the maps)
    n = 100_000
    p = make_ptd({"x": torch.arange(n, dtype=torch.float64)}, name="big")
    idx = torch.from_numpy(np.random.default_rng(0).choice(n, 256, replace=False))
    library_read_log.clear()
    assert torch.equal(p[idx]["x"], idx.double())
    assert library_read_log, "no read recorded"
    for _lib, _name, selection in library_read_log:
        assert rows_of(selection, n) <= 2 * 256, selection


# --------------------------------------------------------------------------------------------
# lazy indexing: writes
# --------------------------------------------------------------------------------------------


def _check_written(p, expected, backend) -> None:
    assert_same_leaves(p, expected)
    path = p.filename
    p.close()
    q = reopen(path, backend)
    assert_same_leaves(q, expected)
    q.close()


def _rows_td(n: int, fill: float) -> TensorDict:
    return TensorDict(
        {
            "a": torch.full((n, 4), fill),
            "b": torch.full((n,), int(fill)),
            "n": {"c": torch.full((n, 2), int(fill), dtype=torch.int32)},
        },
        [n],
    )


def test_write_slice_with_tensordict(sample_ptd, sample_td, backend) -> None:
    sample_ptd[2:5] = _rows_td(3, -1)
    sample_td[2:5] = _rows_td(3, -1)
    _check_written(sample_ptd, sample_td, backend)


@pytest.mark.parametrize(
    "idx",
    [
        torch.tensor([True, False, True, False, False, True]),
        [4, 1],
        torch.tensor([5, 0, 3]),
        3,
        -2,
        slice(None, None, 2),
        ...,
    ],
    ids=repr,
)
def test_write_number_through_index(sample_ptd, sample_td, backend, idx) -> None:
    sample_ptd[idx] = 0
    sample_td[idx] = 0
    _check_written(sample_ptd, sample_td, backend)


def test_write_with_repeated_indices_last_wins(sample_ptd, sample_td, backend) -> None:
    idx = [5, 5, 3, 1, 3]
    value = TensorDict(
        {"b": torch.tensor([10, 11, 12, 13, 14]), "a": torch.arange(20.0).reshape(5, 4)}, [5]
    )
    sample_ptd[idx] = value
    expected_b = sample_td["b"].clone()
    expected_a = sample_td["a"].clone()
    for i, row in zip(idx, range(5), strict=True):  # numpy assignment order: the last one wins
        expected_b[i] = value["b"][row]
        expected_a[i] = value["a"][row]
    assert torch.equal(sample_ptd["b"], expected_b)
    assert torch.equal(sample_ptd["a"], expected_a)
    assert sample_ptd["b"][5] == 11
    assert sample_ptd["b"][3] == 14


def test_write_through_int_view_key(sample_ptd, sample_td, backend) -> None:
    sample_ptd[1]["a"] = torch.full((4,), 7.0)
    sample_ptd[2]["n", "c"] = torch.tensor([-5, -6], dtype=torch.int32)
    sample_ptd[3]["n"]["m"]["d"] = torch.ones(3, dtype=torch.bool)
    sample_td["a"][1] = 7.0
    sample_td["n", "c"][2] = torch.tensor([-5, -6], dtype=torch.int32)
    sample_td["n", "m", "d"][3] = True
    _check_written(sample_ptd, sample_td, backend)


def test_write_dict_broadcasts(sample_ptd, sample_td, backend) -> None:
    sample_ptd[[4, 1]] = {
        "a": torch.arange(4.0),
        "n": {"c": torch.tensor([9, 8], dtype=torch.int32)},
    }
    sample_td["a"][[4, 1]] = torch.arange(4.0)
    sample_td["n", "c"][[4, 1]] = torch.tensor([9, 8], dtype=torch.int32)
    _check_written(sample_ptd, sample_td, backend)


def test_write_through_views_of_views(sample_ptd, sample_td, backend) -> None:
    sample_ptd[1:5][[3, 0]] = 0
    sample_ptd[::2][torch.tensor([False, True, True])]["b"] = torch.tensor([40, 50])
    sample_ptd[[5, 4, 3]][1:]["a"] = torch.full((2, 4), 3.0)
    for t in (sample_td["a"], sample_td["b"], sample_td["n", "c"], sample_td["n", "m", "d"]):
        t[[4, 1]] = 0
    sample_td["b"][[2, 4]] = torch.tensor([40, 50])
    sample_td["a"][[4, 3]] = 3.0
    _check_written(sample_ptd, sample_td, backend)


def test_inplace_ops_on_views_write_to_file(sample_ptd, sample_td, backend) -> None:
    # as in torch (and tensordict), adding an int to the bool leaf is refused, before any write
    before = sample_ptd.to_tensordict()
    with pytest.raises(RuntimeError, match="can't be cast"):
        sample_ptd[0].add_(10)
    assert_same_leaves(sample_ptd, before)
    del sample_ptd["n", "m"]
    del sample_td["n", "m"]
    sample_ptd[1:3].zero_()
    sample_ptd[0].add_(10)
    sample_ptd[[5, 4]].mul_(2)
    sample_ptd[torch.tensor([True] + [False] * 5)].update_({"b": torch.tensor([-1])})
    sample_ptd[3].fill_("a", 7)
    for t in leaves(sample_td).values():
        t[1:3] = 0
        t[0] = (t[0] + 10).to(t.dtype)
        t[[5, 4]] = (t[[5, 4]] * 2).to(t.dtype)
    sample_td["b"][0] = -1
    sample_td["a"][3] = 7
    _check_written(sample_ptd, sample_td, backend)


def test_writes_touch_only_the_rows_asked(recorder, make_ptd) -> None:
    n = 10_000
    p = make_ptd({"x": torch.zeros(n)}, name="w")
    idx = torch.from_numpy(np.random.default_rng(1).choice(n, 64, replace=False))
    recorder.clear()
    p[idx] = 1.0
    assert recorder.writes()
    for call in recorder.writes():
        assert call.selection != ()
        assert len(np.unique(call.rows)) <= 64, call.selection
        assert call.shape[0] <= 64
    assert p["x"].sum() == 64
    assert torch.equal(p["x"][idx], torch.ones(64))


def _grid() -> dict:
    return {
        "x": torch.arange(60.0).reshape(4, 5, 3),
        "y": torch.arange(20).reshape(4, 5),
        "n": {"z": torch.arange(40).reshape(4, 5, 2)},
    }


INDICES_2D_WRITE = [
    (1, [0, 4]),
    ([3, 0], [1, 1]),
    ([3, 3], [1, 1]),
    (torch.tensor([[True, False] * 2 + [True]] * 4),),
    (slice(None), [4, 0, 4]),
    (..., 2),
    (torch.tensor([True, False, False, True]), slice(None, None, 2)),
    ([2, 0], slice(1, 4)),
    (slice(1, 3), torch.tensor([False, True, True, False, True])),
    (-1, -2),
    (slice(None, None, -1), 0),
]


@pytest.mark.parametrize("idx", INDICES_2D_WRITE, ids=repr)
def test_write_2d_index(make_ptd, backend, idx) -> None:
    p = make_ptd(_grid(), batch_size=[4, 5])
    td = TensorDict(_grid(), [4, 5])
    tdi = idx
    if isinstance(idx[0], slice) and idx[0].step == -1:
        tdi = (torch.arange(3, -1, -1),) + idx[1:]
    bs = td[tdi].batch_size
    value = TensorDict(
        {"x": torch.full(bs + (3,), -1.0), "n": {"z": torch.full(bs + (2,), -2)}}, bs
    )
    p[idx] = value
    td[tdi] = value
    p[idx] = {"y": torch.tensor(-3)}
    td["y"][tdi] = -3
    _check_written(p, td, backend)


def test_inplace_ops_with_tensordict_operands(make_ptd, backend) -> None:
    p = make_ptd(_grid(), batch_size=[4, 5])
    other = make_ptd(_grid(), name="other", batch_size=[4, 5])
    td = TensorDict(_grid(), [4, 5])
    expected = TensorDict(_grid(), [4, 5])
    p.add_(td)
    expected.add_(td)
    p[1:3].mul_(td[1:3])
    expected[1:3] = expected[1:3] * td[1:3]
    p.apply_(lambda a, b: a - b, other)  # a file-backed operand
    expected = expected.apply(lambda a, b: a - b, td)
    p.sub_(other[0])  # broadcasts over the batch like torch
    expected = expected - td[0]
    _check_written(p, expected, backend)


def test_zarr_store_instances(tmp_path) -> None:
    store = zarr.storage.MemoryStore()
    p = PersistentTensorDict(filename=store, mode="w", backend="zarr", batch_size=[3])
    p["a"] = torch.arange(3)
    p.close()
    q = PersistentTensorDict.from_zarr(store)
    assert torch.equal(q["a"], torch.arange(3))
    q.close()
    local = zarr.storage.LocalStore(str(tmp_path / "l.zarr"))
    p = PersistentTensorDict.from_dict({"a": torch.ones(2)}, local, backend="zarr")
    p.close()
    ro = zarr.storage.LocalStore(str(tmp_path / "l.zarr"), read_only=True)
    q = PersistentTensorDict(filename=ro, batch_size=[2], backend="zarr")
    assert torch.equal(q["a"], torch.ones(2))
    with pytest.raises(PermissionError):
        q["a"] = torch.zeros(2)
    q.close()


def test_slice_write_touches_only_its_rows(recorder, make_ptd) -> None:
    p = make_ptd({"x": torch.zeros(1000, 2)}, name="w")
    recorder.clear()
    p[200:203] = TensorDict({"x": torch.ones(3, 2)}, [3])
    p[500]["x"] = torch.ones(2)
    assert [c.rows.tolist() for c in recorder.writes()] == [[200, 201, 202], [500]]
    assert p["x"].sum() == 8


def test_index_write_of_wrong_batch_raises(sample_ptd, sample_td) -> None:
    with pytest.raises((ValueError, RuntimeError)):
        sample_ptd[1:3] = _rows_td(4, 1)
    assert_same_leaves(sample_ptd, sample_td)


# --------------------------------------------------------------------------------------------
# in-place ops write to the file; out-of-place ops give TensorDict
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "call", "reference"),
    [
        ("add_", lambda p: p.add_(1), lambda t: t + 1),
        ("iadd", lambda p: p.__iadd__(2), lambda t: t + 2),
        ("sub_", lambda p: p.sub_(1), lambda t: t - 1),
        ("mul_", lambda p: p.mul_(3), lambda t: t * 3),
        ("zero_", lambda p: p.zero_(), torch.zeros_like),
        ("clamp_", lambda p: p.clamp_(max=4), lambda t: t.clamp(max=4)),
        ("apply_", lambda p: p.apply_(lambda t: t * 2 + 1), lambda t: t * 2 + 1),
    ],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_inplace_ops_write_to_file(make_ptd, backend, name, call, reference) -> None:
    data = {
        "a": torch.arange(12.0).reshape(6, 2),
        "b": torch.arange(6),
        "n": {"c": torch.arange(6, dtype=torch.int32)},
    }
    p = make_ptd(data)
    assert call(p) is p
    expected = TensorDict({k: v for k, v in data.items()}, [6]).apply(
        lambda t: reference(t).to(t.dtype)
    )
    _check_written(p, expected, backend)


def test_fill_and_update_inplace_write_to_file(sample_ptd, sample_td, backend) -> None:
    sample_ptd.fill_("a", 2.5)
    sample_ptd.fill_("n", 1)
    sample_ptd.update_(
        {"b": torch.arange(6) * 10, "n": {"c": torch.ones(6, 2, dtype=torch.int32) * 3}}
    )
    sample_td["a"].fill_(2.5)
    sample_td["n", "m", "d"].fill_(True)
    sample_td["b"] = torch.arange(6) * 10
    sample_td["n", "c"] = torch.ones(6, 2, dtype=torch.int32) * 3
    with pytest.raises(KeyError):
        sample_ptd.update_({"missing": torch.zeros(6)})
    _check_written(sample_ptd, sample_td, backend)


def test_setitem_on_existing_key_writes_in_place(sample_ptd, backend) -> None:
    sample_ptd["a"] = torch.ones(6, 4, dtype=torch.float64)  # cast to the stored dtype
    sample_ptd["b"] = torch.full((6,), 3.7)
    assert sample_ptd["a"].dtype == torch.float32
    assert torch.equal(sample_ptd["b"], torch.full((6,), 3))
    sample_ptd["a"] = torch.arange(4.0)[None].expand(6, 4)[:, :1]  # (6, 1) broadcasts to (6, 4)
    assert torch.equal(sample_ptd["a"], torch.zeros(6, 4))
    with pytest.warns(UserWarning, match="Replacing an array with another one is inefficient"):
        sample_ptd.set("a", torch.ones(6, 9, dtype=torch.int8), inplace=False)  # replace
    assert sample_ptd["a"].shape == (6, 9)
    assert sample_ptd["a"].dtype == torch.int8


@pytest.mark.parametrize(
    "op",
    [
        lambda p: p + 1,
        lambda p: p - 1,
        lambda p: p * 2,
        lambda p: p / 2,
        lambda p: 1 + p,
        lambda p: p.apply(lambda t: t + 1),
        lambda p: p.to(torch.float64),
        lambda p: p == p,
        lambda p: p.flatten_keys(),
        lambda p: p.to_tensordict(),
        lambda p: p[1:3] + 0,
        lambda p: torch.stack([p, p]),
        lambda p: torch.cat([p, p]),
    ],
    ids=[
        "add",
        "sub",
        "mul",
        "div",
        "radd",
        "apply",
        "to_dtype",
        "eq",
        "flatten_keys",
        "to_tensordict",
        "view_add",
        "stack",
        "cat",
    ],
)
def test_out_of_place_ops_give_tensordict(make_ptd, op) -> None:
    data = {
        "a": torch.arange(1.0, 25.0).reshape(6, 4),
        "b": torch.arange(1, 7),
        "n": {"c": torch.arange(12, dtype=torch.int32).reshape(6, 2)},
    }
    sample_ptd = make_ptd(data, name="nobool")
    sample_td = TensorDict(data, [6])
    before = sample_ptd.to_tensordict()
    out = op(sample_ptd)
    assert type(out) is TensorDict
    expected = op(sample_td)
    assert out.batch_size == expected.batch_size
    assert_same_leaves(out, expected)
    assert_same_leaves(sample_ptd, before)


@pytest.mark.parametrize("name", ["unbind", "split", "chunk"])
def test_unbind_split_chunk_give_tensordicts(sample_ptd, sample_td, name) -> None:
    args = {"unbind": (0,), "split": (4,), "chunk": (2,)}[name]
    parts = getattr(sample_ptd, name)(*args)
    ref = getattr(sample_td, name)(*args)
    assert len(parts) == len(ref)
    for a, b in zip(parts, ref, strict=True):
        assert type(a) is TensorDict
        assert_same_leaves(a, b)


def test_flatten_keys(sample_ptd, backend) -> None:
    out = sample_ptd.flatten_keys()
    assert type(out) is TensorDict
    assert sorted(out.keys()) == ["a", "b", "n.c", "n.m.d"]
    out = sample_ptd.flatten_keys("/")
    assert sorted(out.keys()) == ["a", "b", "n/c", "n/m/d"]
    assert set(sample_ptd.keys(True, True)) == {
        "a",
        "b",
        ("n", "c"),
        ("n", "m", "d"),
    }  # file unchanged
    with pytest.raises(ValueError, match="flatten_keys"):
        sample_ptd.flatten_keys(inplace=True)


def test_to_tensordict(sample_ptd, sample_td) -> None:
    td = sample_ptd.to_tensordict()
    assert type(td) is TensorDict
    assert type(td["n"]) is TensorDict
    assert td.batch_size == torch.Size([6])
    assert_same_leaves(td, sample_td)
    td["a"].zero_()
    assert sample_ptd["a"].any()


# --------------------------------------------------------------------------------------------
# refused operations
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("view", (2, 3)),
        ("view", (-1, 2)),
        ("permute", (0,)),
        ("unsqueeze", (0,)),
        ("transpose", (0, 0)),
    ],
)
def test_shape_ops_are_refused(sample_ptd, name, args) -> None:
    with pytest.raises(RuntimeError, match="to_tensordict\\(\\)") as info:
        getattr(sample_ptd, name)(*args)
    assert isinstance(info.value, PtdError)
    assert name in str(info.value)


def test_reshape_and_view_of_the_same_batch_size(sample_ptd) -> None:
    n = sample_ptd.batch_size[0]
    assert sample_ptd.view(-1) is sample_ptd
    assert sample_ptd.reshape(n) is sample_ptd
    out = sample_ptd.reshape(2, -1)
    assert type(out) is ptd.TensorDict
    assert out.batch_size == torch.Size([2, n // 2])
    with pytest.raises(RuntimeError, match="invalid shape"):
        sample_ptd.reshape(n + 1)


def test_squeeze_is_refused_when_it_would_change(make_ptd) -> None:
    p = make_ptd({"a": torch.zeros(3, 1, 2)}, batch_size=[3, 1])
    with pytest.raises(RuntimeError, match="to_tensordict"):
        p.squeeze()
    with pytest.raises(RuntimeError, match="to_tensordict"):
        p.squeeze(1)
    assert p.squeeze(0) is p  # a dim that is not 1: nothing to do


@pytest.mark.parametrize(
    ("name", "args"), [("select", ("a",)), ("exclude", ("a",)), ("rename_keys", ({"a": "z"},))]
)
def test_select_exclude_rename_keys_are_not_implemented(sample_ptd, name, args) -> None:
    with pytest.raises(NotImplementedError, match="to_tensordict\\(\\)") as info:
        getattr(sample_ptd, name)(*args)
    assert isinstance(info.value, PtdError)
    assert "a" in sample_ptd


# --------------------------------------------------------------------------------------------
# close and the context manager
# --------------------------------------------------------------------------------------------


def test_close_then_key_error(make_ptd) -> None:
    p = make_ptd({"alpha": torch.zeros(3), "n": {"b": torch.zeros(3)}})
    n = p["n"]
    p.close()
    with pytest.raises(KeyError):
        p["alpha"]
    with pytest.raises(KeyError):
        n["b"]
    with pytest.raises(KeyError):
        p["n", "b"]
    assert p.get("alpha", "default") == "default"
    assert p.get(("n", "b"), None) is None
    assert "alpha" not in p
    assert p.batch_size == torch.Size([3])
    p.close()  # a second close is a no-op


def test_write_after_close_raises(make_ptd, backend) -> None:
    p = make_ptd({"a": torch.zeros(3)})
    p.close()
    with pytest.raises(PtdError):
        p["a"] = torch.ones(3)
    with pytest.raises(PtdError):
        p["b"] = torch.ones(3)
    q = reopen(p.filename, backend)
    assert list(q.keys()) == ["a"]
    assert not q["a"].any()
    q.close()


def test_closed_key_error_names_key_and_file(make_ptd) -> None:
    p = make_ptd({"alpha": torch.zeros(3)})
    p.close()
    with pytest.raises(KeyError) as info:
        p["alpha"]
    msg = str(info.value)
    assert "alpha" in msg
    assert os.path.basename(str(p.filename)) in msg
    assert "close" in msg


def test_context_manager_closes(store_path, backend) -> None:
    with PersistentTensorDict(
        filename=str(store_path), batch_size=[2], mode="w", backend=backend
    ) as p:
        assert isinstance(p, PersistentTensorDict)
        p["x"] = torch.ones(2)
    with pytest.raises(KeyError):
        p["x"]
    q = PersistentTensorDict(filename=str(store_path), mode="r+", batch_size=[2], backend=backend)

    def write_then_fail() -> None:
        with q:
            q["y"] = torch.zeros(2)
            1 / 0  # noqa: B018

    with pytest.raises(ZeroDivisionError):
        write_then_fail()
    with pytest.raises(KeyError):
        q["x"]
    with reopen(store_path, backend) as r:
        assert sorted(r.keys()) == ["x", "y"]
    if backend == "h5":  # the file handle is really closed: a writer can open it
        with h5py.File(store_path, "r+") as f:
            assert sorted(f.keys()) == ["x", "y"]


# --------------------------------------------------------------------------------------------
# clone / copy / to(device) / pickling
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["clone_false", "copy", "to_cpu", "to_device_obj"])
def test_mode_w_store_is_never_wiped(store_path, backend, how) -> None:
    p = PersistentTensorDict(filename=str(store_path), batch_size=[3], mode="w", backend=backend)
    p["a"] = torch.arange(3.0)
    p["n", "b"] = torch.ones(3, 2)
    c = {
        "clone_false": lambda: p.clone(False),
        "copy": p.copy,
        "to_cpu": lambda: p.to("cpu"),
        "to_device_obj": lambda: p.to(torch.device("cpu")),
    }[how]()
    assert isinstance(c, PersistentTensorDict)
    assert torch.equal(p["a"], torch.arange(3.0))
    assert torch.equal(c["a"], torch.arange(3.0))
    assert torch.equal(c["n", "b"], torch.ones(3, 2))
    if how.startswith("to"):
        assert c.device == torch.device("cpu")
    c["a"] = torch.zeros(3)  # the same storage
    assert torch.equal(p["a"], torch.zeros(3))
    p.close()
    q = reopen(store_path, backend)
    assert torch.equal(q["a"], torch.zeros(3))
    assert torch.equal(q["n", "b"], torch.ones(3, 2))
    q.close()


def test_clone_to_a_new_file(sample_ptd, sample_td, tmp_path, backend) -> None:
    dest = tmp_path / ("clone" + SUFFIX[backend])
    c = sample_ptd.clone(filename=dest)
    assert isinstance(c, PersistentTensorDict)
    assert_same_leaves(c, sample_td)
    c["a"] = torch.zeros(6, 4)
    assert_same_leaves(sample_ptd, sample_td)  # the original is untouched
    c.close()
    with pytest.warns(UserWarning, match="destination"):
        c = sample_ptd.clone()
    assert_same_leaves(c, sample_td)
    c.close()


@pytest.mark.parametrize("mode", ["r", "r+", "w"])
def test_pickle_round_trip(make_ptd, backend, sample_td, mode) -> None:
    p = make_ptd()
    path = p.filename
    p.close()
    if mode == "w":
        p = PersistentTensorDict(filename=path, mode="w", batch_size=[6], backend=backend)
        p.update(sample_td)
    else:
        p = PersistentTensorDict(filename=path, mode=mode, batch_size=[6], backend=backend)
    q = pickle.loads(pickle.dumps(p))
    assert isinstance(q, PersistentTensorDict)
    assert q.batch_size == p.batch_size
    assert_same_leaves(q, sample_td)
    assert_same_leaves(p, sample_td)  # "w" is not replayed on unpickling
    v = pickle.loads(pickle.dumps(p[[4, 1]]))
    assert v.batch_size == torch.Size([2])
    assert_same_leaves(v, sample_td[[4, 1]])
    nested = pickle.loads(pickle.dumps(p["n"]))
    assert torch.equal(nested["c"], sample_td["n", "c"])
    for x in (q, v, nested, p):
        x.close()


# --------------------------------------------------------------------------------------------
# dtypes, wrong-shape writes, strings
# --------------------------------------------------------------------------------------------


def test_bfloat16_round_trip(store_path, backend) -> None:
    t = torch.randn(5, 3, generator=torch.Generator().manual_seed(0)).bfloat16()
    p = PersistentTensorDict.from_dict({"x": t, "n": {"y": t[:, 0]}}, store_path, backend=backend)
    assert p["x"].dtype == torch.bfloat16
    assert torch.equal(p["x"], t)
    p["z"] = t * 2
    p[[3, 0]] = 1
    expected = t.clone()
    expected[[3, 0]] = 1
    assert torch.equal(p[[4, 3]]["x"], expected[[4, 3]])
    p.add_(1)
    expected_z = t * 2
    expected_z[[3, 0]] = 1
    assert "bf16[3]" in repr(p)
    p.close()
    q = reopen(store_path, backend)
    assert q["x"].dtype == torch.bfloat16
    assert q["z"].dtype == torch.bfloat16
    assert torch.equal(q["x"], expected + 1)
    assert torch.equal(q["z"], expected_z + 1)
    assert torch.equal(q["n", "y"], (t[:, 0].clone().index_fill_(0, torch.tensor([3, 0]), 1)) + 1)
    q.close()


@pytest.mark.parametrize(
    "dtype",
    [
        torch.float16,
        torch.float64,
        torch.complex64,
        torch.bool,
        torch.int8,
        torch.uint8,
        torch.int16,
        torch.uint16,
        torch.int64,
    ],
)
def test_dtype_round_trip(store_path, backend, dtype) -> None:
    t = (torch.arange(12).reshape(4, 3) % 3).to(dtype)
    p = PersistentTensorDict.from_dict({"x": t}, store_path, backend=backend)
    p.close()
    q = reopen(store_path, backend)
    assert q["x"].dtype == dtype
    assert torch.equal(q["x"], t)
    q.close()


@pytest.mark.parametrize(
    "write",
    [
        lambda p: p.__setitem__("a", torch.zeros(6, 5)),
        lambda p: p.__setitem__("a", torch.zeros(6, 4, 2)),
        lambda p: p.set_("a", torch.zeros(6, 7)),
        lambda p: p.update_({"a": torch.zeros(6, 3)}),
        lambda p: p.update({"a": torch.zeros(6, 2)}, inplace=True),
        lambda p: p.__setitem__(slice(1, 3), TensorDict({"a": torch.zeros(2, 7)}, [2])),
        lambda p: p[0].__setitem__("a", torch.zeros(5)),
        lambda p: p[[1, 2]].__setitem__("a", torch.zeros(3, 4)),
    ],
    ids=[
        "setitem",
        "setitem_ndim",
        "set_",
        "update_",
        "update_inplace",
        "index_td",
        "row_key",
        "view_key",
    ],
)
def test_wrong_shape_inplace_write_raises(sample_ptd, sample_td, backend, write) -> None:
    with pytest.raises(PtdValueError) as info:
        write(sample_ptd)
    assert isinstance(info.value, PtdError)
    assert "'a'" in str(info.value)
    assert_same_leaves(sample_ptd, sample_td)  # nothing was written (zarr does not cut silently)


def test_foreign_h5_string_reads_as_bytes_without_warning(tmp_path) -> None:
    with h5py.File(tmp_path / "f.h5", "w") as f:
        f["s"] = "foreign"
        f["x"] = np.zeros(2)
    q = PersistentTensorDict.from_h5(tmp_path / "f.h5")
    assert q["s"] == b"foreign"  # filterwarnings=error: no FutureWarning here
    q.close()


def test_strings(make_ptd, backend) -> None:
    p = make_ptd({"a": torch.zeros(3), "s": "hello"})
    if backend == "h5":
        with pytest.warns(FutureWarning, match="reads the string"):
            value = p["s"]
        assert value == b"hello"
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert p["s"] == "hello"
    assert "s: NonTensorData" in repr(p)


# --------------------------------------------------------------------------------------------
# repr
# --------------------------------------------------------------------------------------------

REPR_CASES = [
    ({}, None, "PersistentTensorDict(batch_size=[], fields={})"),
    (
        {"key1": torch.zeros(3), "key2": torch.zeros(3)},
        None,
        "PersistentTensorDict(batch_size=[3], fields={key1: f32[], key2: f32[]})",
    ),
    (
        {"x": torch.zeros(2, 4, dtype=torch.int8), "y": torch.zeros(2, 4, 3, dtype=torch.bool)},
        [2, 4],
        "PersistentTensorDict(batch_size=[2,4], fields={x: i8[], y: bool[3]})",
    ),
    (
        {"n": {"b": torch.zeros(3, 5, dtype=torch.bfloat16)}},
        [3],
        "PersistentTensorDict(batch_size=[3], fields={\n    n: PersistentTensorDict[5]{b: bf16[]}})",
    ),
    (
        {"n": {"b": torch.zeros(3, dtype=torch.float16)}},
        [3],
        "PersistentTensorDict(batch_size=[3], fields={n: PersistentTensorDict{b: f16[]}})",
    ),
    (
        {"a": torch.zeros(3, 2), "n": {"b": torch.zeros(3, dtype=torch.int64)}},
        None,
        "PersistentTensorDict(batch_size=[3], fields={\n    a: f32[2],\n    n: PersistentTensorDict{b: i64[]}})",
    ),
    (
        {"a": torch.zeros(3, 2), "n": {"b": torch.zeros(3, dtype=torch.int64)}, "s": "x"},
        None,
        "PersistentTensorDict(batch_size=[3], fields={\n    a: f32[2],\n    n: PersistentTensorDict{b: i64[]},\n    s: NonTensorData})",
    ),
]


@pytest.mark.parametrize(("data", "bs", "expected"), REPR_CASES)
def test_repr_exact(make_ptd, data, bs, expected) -> None:
    p = make_ptd(data, batch_size=bs)
    assert repr(p) == expected
    if "\n" in expected:
        assert len(expected.replace("\n    ", " ").replace(",\n", ", ")) > 80
    else:
        assert len(expected) <= 80


def test_repr_nested_extra_batch_dims(sample_ptd) -> None:
    assert repr(sample_ptd) == (
        "PersistentTensorDict(batch_size=[6], fields={\n"
        "    a: f32[4],\n"
        "    b: i64[],\n"
        "    n: PersistentTensorDict{c: i32[2], m: PersistentTensorDict[3]{d: bool[]}}})"
    )
    assert repr(sample_ptd[1:3]).startswith("PersistentTensorDict(batch_size=[2], fields={")


def test_repr_reads_no_data(recorder, sample_ptd) -> None:
    recorder.clear()
    repr(sample_ptd)
    repr(sample_ptd[[1, 0]])
    assert recorder.backends
    assert recorder.reads() == []


@pytest.mark.interop
@pytest.mark.parametrize(
    ("data", "bs"),
    [
        ({"key1": torch.zeros(3), "key2": torch.zeros(3)}, None),
        ({"a": torch.zeros(3, 2), "n": {"b": torch.zeros(3, dtype=torch.int64)}}, None),
        (
            {"x": torch.zeros(2, 4, dtype=torch.int8), "y": torch.zeros(2, 4, 3, dtype=torch.bool)},
            [2, 4],
        ),
    ],
)
def test_repr_matches_tensordict_oracle(tmp_path, backend, data, bs) -> None:
    tensordict = pytest.importorskip("tensordict")
    ours = PersistentTensorDict.from_dict(
        data, tmp_path / ("ours" + SUFFIX[backend]), backend=backend, batch_size=bs
    )
    ref = tensordict.PersistentTensorDict.from_dict(
        data, str(tmp_path / ("ref" + SUFFIX[backend])), backend=backend, batch_size=bs
    )
    try:
        assert repr(ours) == repr(ref)
    finally:
        ours.close()
        ref.close()
