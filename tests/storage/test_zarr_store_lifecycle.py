"""zarr store life cycle: a ZipStore handed over by the user holds everything written after
``close()``; consolidated metadata never goes stale for readers opened while a session writes."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
import torch

from ptd import PersistentTensorDict, TensorDict

zarr = pytest.importorskip("zarr")
from zarr.storage import ZipStore  # noqa: E402


def _has_consolidated(path: Path) -> bool:
    return "consolidated_metadata" in json.loads((path / "zarr.json").read_text())


def test_user_zipstore_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "data.zip"
    store = ZipStore(str(path), mode="w")
    p = PersistentTensorDict(filename=store, batch_size=[3], mode="w", backend="zarr")
    p["a"] = torch.arange(3.0)
    p["n", "b"] = torch.ones(3, 2)
    p["s"] = "text"
    p.close()
    assert zipfile.is_zipfile(path)
    q = PersistentTensorDict.from_zarr(str(path))
    assert torch.equal(q["a"], torch.arange(3.0))
    assert q["n", "b"].shape == (3, 2)
    assert q["s"] == "text"
    assert q.batch_size == (3,)
    q.close()
    reader = ZipStore(str(path), mode="r")
    q = PersistentTensorDict(filename=reader, batch_size=[3], backend="zarr")
    assert torch.equal(q["a"], torch.arange(3.0))
    q.close()
    # a read-only store handed over is left usable
    assert "a" in zarr.open_group(reader, mode="r").keys()
    reader.close()


def test_user_zipstore_through_a_group(tmp_path: Path) -> None:
    path = tmp_path / "g.zip"
    group = zarr.open_group(ZipStore(str(path), mode="w"), mode="w")
    p = PersistentTensorDict(group=group, batch_size=[2], backend="zarr")
    p["x"] = torch.zeros(2, 5)
    p.close()
    q = PersistentTensorDict.from_zarr(str(path))
    assert q["x"].shape == (2, 5)
    q.close()


def test_from_dict_into_a_zip_path(tmp_path: Path) -> None:
    path = tmp_path / "d.zip"
    PersistentTensorDict.from_dict({"a": torch.ones(4)}, str(path), backend="zarr").close()
    q = PersistentTensorDict.from_zarr(str(path))
    assert torch.equal(q["a"], torch.ones(4))
    q.close()


def test_two_readers_see_structural_changes(tmp_path: Path) -> None:
    path = tmp_path / "s.zarr"
    src = TensorDict({"a": torch.zeros(3), "b": torch.ones(3)}, batch_size=[3])
    PersistentTensorDict.from_dict(src, str(path), backend="zarr").close()
    assert _has_consolidated(path)
    writer = PersistentTensorDict.from_zarr(str(path), mode="r+")
    writer["c"] = torch.arange(3.0)
    first = PersistentTensorDict.from_zarr(str(path))
    assert sorted(first.keys()) == ["a", "b", "c"]
    assert not _has_consolidated(path)  # dropped while the session writes
    del writer["a"]
    writer.rename_key_("b", "bb")
    writer["n", "x"] = torch.zeros(3)
    second = PersistentTensorDict.from_zarr(str(path))
    assert sorted(map(str, second.keys(True))) == ["('n', 'x')", "bb", "c", "n"]
    assert torch.equal(second["c"], torch.arange(3.0))
    writer.close()
    assert _has_consolidated(path)  # written again at close
    third = PersistentTensorDict.from_zarr(str(path))
    assert sorted(map(str, third.keys(True))) == ["('n', 'x')", "bb", "c", "n"]
    for r in (first, second, third):
        r.close()
    # zarr itself, trusting the consolidated metadata, sees the final tree
    g = zarr.open_group(str(path), mode="r")
    assert sorted(g.keys()) == ["bb", "c", "n"]


def test_attribute_change_does_not_leave_stale_consolidated(tmp_path: Path) -> None:
    path = tmp_path / "t.zarr"
    PersistentTensorDict.from_dict({"a": torch.zeros(3)}, str(path), backend="zarr").close()
    writer = PersistentTensorDict.from_zarr(str(path), mode="r+")
    writer.names = ["time"]
    reader = PersistentTensorDict.from_zarr(str(path))
    assert reader.names == ["time"]
    reader.close()
    writer.close()
    g = zarr.open_group(str(path), mode="r")
    assert g.attrs["__tensordict__"]["names"] == ["time"]
