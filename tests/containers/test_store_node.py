"""``PersistentTensorDict.store_node``: the public read interface that ``ptd.data`` and the
memmap writer plan their reads with, on stores written by h5py and zarr-python."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
import zarr

import ptd
from ptd import PersistentTensorDict, StoreNode
from ptd.errors import ClosedStoreError, PtdError, UnsupportedOperationError

OBS = np.arange(40, dtype=np.float32).reshape(10, 4)


def _store(tmp_path: Path, backend: str) -> PersistentTensorDict:
    """A store as other tools write them: ``obs`` [10, 4] and ``side/x`` [3] (a side group of
    another length, so the store's batch size is ``[]``), attributes on the root, a group and
    an array."""
    if backend == "h5":
        path = tmp_path / "s.h5"
        with h5py.File(path, "w") as f:
            f.attrs["origin"] = "lab"
            f.create_dataset("obs", data=OBS, chunks=(5, 4), compression="gzip")
            f["obs"].attrs["unit"] = "m"
            g = f.create_group("side")
            g.attrs["kind"] = "meta"
            g.create_dataset("x", data=np.arange(3))
        return PersistentTensorDict.from_h5(path)
    path = tmp_path / "s.zarr"
    root = zarr.open_group(path, mode="w")
    root.attrs["origin"] = "lab"
    root.create_array("obs", data=OBS, chunks=(5, 4)).attrs["unit"] = "m"
    g = root.create_group("side")
    g.attrs["kind"] = "meta"
    g.create_array("x", data=np.arange(3))
    return PersistentTensorDict.from_zarr(path)


def test_store_node_reads_in_stored_coordinates(tmp_path: Path, backend: str) -> None:
    td = _store(tmp_path, backend)
    node = td.store_node
    assert isinstance(node, StoreNode)
    assert ptd.StoreNode is StoreNode
    assert node.path == ()
    assert not node.selected
    assert not node.remote
    assert node.location.endswith(("s.h5", "s.zarr"))
    meta = node.meta(("obs",))
    assert tuple(meta.shape) == (10, 4)
    assert meta.dtype == np.float32
    assert meta.chunks[0] == 5
    out = np.full((3, 4), -1, dtype=np.float32)
    got = node.read(("obs",), (slice(6, 9),), out=out)
    assert got is out
    assert np.array_equal(out, OBS[6:9])
    assert np.array_equal(node.read(("obs",)), OBS)
    assert node.key_path(("side", "x")) == ("side", "x")
    assert node.backend.policy is not None
    td.close()


def test_store_node_of_a_group_and_of_a_view(tmp_path: Path, backend: str) -> None:
    td = _store(tmp_path, backend)
    side = td["side"].store_node
    assert side.path == ("side",)
    assert side.key_path(("x",)) == ("side", "x")
    assert np.array_equal(side.read(("x",)), np.arange(3))
    with pytest.raises(PtdError, match=r"side/x.*\[3\]"):  # side/x has 3 rows, not 10
        td.store_node.with_batch_size([10])
    rows = td.store_node.with_batch_size([10], validate=False)  # the rows' view; size was []
    assert rows.batch_size == (10,)
    view = rows[2:5].store_node
    assert view.selected
    assert view.same_store(td.store_node)
    # read() stays in stored coordinates; read_leaf() reads the rows the view selects
    assert view.read(("obs",)).shape == (10, 4)
    assert torch.equal(view.read_leaf(("obs",)), torch.from_numpy(OBS[2:5]))
    with pytest.raises(UnsupportedOperationError, match="indexed view"):
        view.with_batch_size([3])
    td.close()


def test_store_node_attributes(tmp_path: Path, backend: str) -> None:
    td = _store(tmp_path, backend)
    node = td.store_node
    assert node.attrs()["origin"] == "lab"
    assert node.attrs(("obs",))["unit"] == "m"
    assert node.attrs(("side",))["kind"] == "meta"
    assert td["side"].store_node.attrs()["kind"] == "meta"
    td.close()


def test_store_node_errors(tmp_path: Path, backend: str) -> None:
    td = _store(tmp_path, backend)
    node = td.store_node
    with pytest.raises(PtdError, match="nope"):
        node.meta(("nope",))
    with pytest.raises(PtdError, match=r"side/x.*\[3\].*\[10\]"):
        td["side"].store_node.with_batch_size([10])
    (tmp_path / "again").mkdir()
    other = _store(tmp_path / "again", backend)  # the same layout, another store
    assert not other.store_node.same_store(node)
    other.close()
    td.close()
    with pytest.raises(ClosedStoreError, match="closed"):
        node.read(("obs",))
    assert node.location.endswith(("s.h5", "s.zarr"))  # still named in messages
