"""Behaviours where ptd used to differ from tensordict 0.15.3 (the oracle, in memory): a
tensordict of batch size ``[]`` set into a batched one takes its batch size when its leaves
fit, and ``update_at_``/``copy_at_`` write ``NonTensorData``/``NonTensorStack`` values into the
rows asked. On files (where tensordict itself fails) ptd gives what tensordict gives in
memory."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

import ptd

tdl = pytest.importorskip("tensordict")

KINDS = ["memory", "h5", "zarr"]
# h5 reads strings as bytes and says so, as tensordict 0.15's h5 backend does
pytestmark = pytest.mark.filterwarnings("ignore:The h5 backend of PersistentTensorDict reads")


def _make(kind: str, tmp_path: Path, data: ptd.TensorDict) -> Any:
    if kind == "memory":
        return data
    return ptd.PersistentTensorDict.from_dict(data, tmp_path / f"s.{kind}", backend=kind)


def _plain(v: Any) -> Any:
    """A non-tensor's values as str (h5 reads strings as bytes, as tensordict's h5 does)."""
    out = v.tolist() if hasattr(v, "tolist") else v

    def walk(x: Any) -> Any:
        if isinstance(x, list):
            return [walk(y) for y in x]
        return x.decode() if isinstance(x, bytes) else x

    return walk(out)


@pytest.mark.parametrize("kind", KINDS)
def test_set_a_tensordict_of_empty_batch_size(kind: str, tmp_path: Path) -> None:
    ref = tdl.TensorDict({"x": torch.zeros(4)}, [4])
    ref["s"] = tdl.TensorDict(
        {"a": torch.ones(4, 2), "n": tdl.TensorDict({"b": torch.arange(4)}, [])}, []
    )
    p = _make(kind, tmp_path, ptd.TensorDict({"x": torch.zeros(4)}, [4]))
    p["s"] = ptd.TensorDict(
        {"a": torch.ones(4, 2), "n": ptd.TensorDict({"b": torch.arange(4)}, [])}, []
    )
    assert p["s"].batch_size == ref["s"].batch_size == torch.Size([4])
    assert p["s", "n"].batch_size == ref["s", "n"].batch_size
    assert torch.equal(p["s", "a"], ref["s", "a"])
    assert torch.equal(p["s", "n", "b"], ref["s", "n", "b"])
    # leaves that do not start with the batch size: refused, as tensordict refuses them
    with pytest.raises(RuntimeError):
        ref["t"] = tdl.TensorDict({"a": torch.ones(3)}, [])
    with pytest.raises(ptd.errors.BatchSizeError, match="'t'"):
        p["t"] = ptd.TensorDict({"a": torch.ones(3)}, [])
    assert "t" not in p.keys()
    if kind != "memory":
        p.close()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("first", "index", "value"),
    [
        ("data", slice(0, 2), ("data", ["b"], [2])),
        ("data", 1, ("data", ["z"], [])),
        ("stack", torch.tensor([3, 0]), ("stack", ["X", "Y"], [2])),
        ("stack", torch.tensor([True, False, True, False]), ("data", ["m"], [2])),
    ],
    ids=["slice", "int", "unsorted-index", "mask"],
)
def test_update_at_with_non_tensor_values(
    kind: str, tmp_path: Path, first: str, index: Any, value: tuple[str, list[str], list[int]]
) -> None:
    def start(mod: Any) -> Any:
        td = mod.TensorDict({"x": torch.zeros(4)}, [4])
        if first == "data":
            td["lab"] = mod.NonTensorData("a", batch_size=[4])
        else:
            td["lab"] = mod.NonTensorStack(*[mod.NonTensorData(c) for c in "abcd"])
        return td

    def given(mod: Any) -> Any:
        how, items, bs = value
        if how == "data":
            return mod.NonTensorData(items[0], batch_size=bs)
        return mod.NonTensorStack(*[mod.NonTensorData(c) for c in items])

    ref = start(tdl)
    ref.update_at_({"lab": given(tdl), "x": torch.ones(ref["x"][index].shape)}, index)
    p = _make(kind, tmp_path, start(ptd))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        p.update_at_({"lab": given(ptd), "x": torch.ones(p["x"][index].shape)}, index)
        got = p["lab"]
    assert _plain(got) == ref.get("lab").tolist()
    assert torch.equal(p["x"], ref["x"])
    if kind != "memory":
        p.close()


@pytest.mark.parametrize("kind", KINDS)
def test_copy_at_with_non_tensor_values(kind: str, tmp_path: Path) -> None:
    p = _make(
        kind,
        tmp_path,
        ptd.TensorDict({"x": torch.zeros(4), "lab": ptd.NonTensorData("a", batch_size=[4])}, [4]),
    )
    src = ptd.TensorDict({"x": torch.ones(2), "lab": ptd.NonTensorData("c", batch_size=[2])}, [2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        p.copy_at_(src, slice(2, 4))
        assert _plain(p["lab"]) == ["a", "a", "c", "c"]
    assert p["x"].tolist() == [0, 0, 1, 1]
    if kind != "memory":
        p.close()


@pytest.mark.parametrize("kind", ["h5", "zarr"])
def test_a_non_tensor_the_format_cannot_hold_leaves_the_old_entry(
    kind: str, tmp_path: Path
) -> None:
    p = _make(kind, tmp_path, ptd.TensorDict({"x": torch.zeros(2)}, [2]))
    p["lab"] = ptd.NonTensorData("a", batch_size=[2])
    before = _plain(p["lab"])
    bad = ptd.NonTensorStack.from_list(["b", 3 + 4j], [2])  # h5 holds no such mix
    if kind == "h5":
        with pytest.raises(ptd.errors.PtdTypeError, match="'lab'") as info:
            p.set_("lab", bad)
        assert ".ptd-new" not in str(info.value)
        assert _plain(p["lab"]) == before
    else:  # zarr pickles it
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            p.set_("lab", bad)
    assert sorted(p.keys()) == ["lab", "x"]  # no hidden sibling left
    p.close()


def test_update_at_refuses_a_non_tensor_into_a_tensor() -> None:
    td = ptd.TensorDict({"x": torch.zeros(4)}, [4])
    with pytest.raises(ptd.errors.PtdTypeError, match="'x'"):
        td.update_at_({"x": ptd.NonTensorData("a", batch_size=[2])}, slice(0, 2))


@pytest.mark.parametrize("kind", KINDS)
def test_get_through_a_leaf_raises_and_a_missing_key_gives_the_default(
    kind: str, tmp_path: Path
) -> None:
    p = _make(kind, tmp_path, ptd.TensorDict({"x": torch.zeros(4), "n": {"y": torch.ones(4)}}, [4]))
    assert p.get(("n", "missing")) is None
    assert p.get("missing", 3) == 3
    with pytest.raises(ptd.errors.NotNestedError, match=r"'x'.*not a nested tensordict"):
        p.get(("x", "y"), 0)
    with pytest.raises(KeyError):  # a KeyError, as tensordict raises
        p[("x", "y")]
    if kind != "memory":
        p.close()
