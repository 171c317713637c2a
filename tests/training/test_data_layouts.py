"""ptd.data over the layouts other tools write (made here with plain h5py / zarr-python): D4RL
(rows at the root, ``infos/*`` rows, a ``metadata/`` side group of scalars, strings and policy
weights), LeRobot (``data/*`` rows, ``meta/episodes/*`` one row per episode), NWB (a recording
beside an electrodes table). The dataset's rows come from the leaves it is asked for
(``keys``: leaves, nested keys, groups), side groups are left out and named, an explicit batch
size works with and without validation, and the errors name the file, the keys and the
lengths."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import torch
import zarr

from ptd import PersistentTensorDict
from ptd.data import LeftOutWarning, StoreDataset, loader
from ptd.errors import BatchSizeError, PtdTypeError, PtdValueError

N = 120  # rows of the data
E = 7  # episodes (LeRobot) / electrodes (NWB)


def _write(path: Path, backend: str, tree: dict[str, Any], chunks: int | None = None) -> str:
    """Write ``tree`` ("a/b" -> numpy array or str) with plain h5py / zarr-python; arrays of
    ``N`` rows get ``chunks``-row gzip chunks when given."""
    if backend == "h5":
        with h5py.File(path, "w") as f:
            for key, value in tree.items():
                if isinstance(value, str):
                    f[key] = value
                elif value.dtype.kind == "U":  # variable-length UTF-8, as h5py writes str
                    f.create_dataset(key, data=value.astype(object), dtype=h5py.string_dtype())
                elif chunks and value.ndim and value.shape[0] == N:
                    f.create_dataset(
                        key, data=value, chunks=(chunks,) + value.shape[1:], compression="gzip"
                    )
                else:
                    f[key] = value
    else:
        g = zarr.open_group(str(path), mode="w")
        for key, value in tree.items():
            if isinstance(value, str):
                g.create_array(key, shape=(), dtype=str)[()] = value
            elif value.dtype.kind == "U":
                g.create_array(key, shape=value.shape, dtype=str)[...] = value
            elif chunks and value.ndim and value.shape[0] == N:
                g.create_array(key, data=value, chunks=(chunks,) + value.shape[1:])
            else:
                g.create_array(key, data=value)
    return str(path)


def _rows(n: int = N, width: int = 3) -> np.ndarray:
    """Row i holds i, i + 0.5, ...: a batch says which rows it read."""
    return np.arange(n, dtype=np.float32)[:, None] + np.arange(width, dtype=np.float32) / 2


def _d4rl(tmp_path: Path, backend: str, chunks: int | None = None) -> str:
    return _write(
        tmp_path / f"hopper.{backend}",
        backend,
        {
            "observations": _rows(),
            "actions": _rows(width=2),
            "rewards": np.arange(N, dtype=np.float32),
            "terminals": np.arange(N) % 50 == 49,
            "timeouts": np.zeros(N, dtype=bool),
            "infos/qpos": _rows(width=4) * 10,
            "infos/qvel": _rows(width=4),
            "metadata/algorithm": "SAC",
            "metadata/iteration": np.array(1000),
            "metadata/policy/fc0/weight": np.ones((16, 3), dtype=np.float32),
            "metadata/policy/fc0/bias": np.ones(16, dtype=np.float32),
        },
        chunks,
    )


def _lerobot(tmp_path: Path, backend: str) -> str:
    ends = np.linspace(0, N, E + 1).astype(np.int64)
    return _write(
        tmp_path / f"lerobot.{backend}",
        backend,
        {
            "data/observation.state": _rows(width=6),
            "data/action": _rows(width=6),
            "data/episode_index": np.searchsorted(ends, np.arange(N), side="right") - 1,
            "data/timestamp": np.arange(N, dtype=np.float32) / 30,
            "meta/episodes/episode_index": np.arange(E),
            "meta/episodes/dataset_from_index": ends[:-1],
            "meta/episodes/dataset_to_index": ends[1:],
            "meta/episodes/length": np.diff(ends),
            "meta/episodes/tasks": np.array([f"task {i}" for i in range(E)]),
        },
        chunks=16,
    )


def _nwb(tmp_path: Path, backend: str) -> str:
    """A recording of N samples x E channels beside a table of E electrodes (more leaves than
    the recording: the rows are where the data is, not where most leaves are)."""
    ephys = "general/extracellular_ephys/electrodes"
    return _write(
        tmp_path / f"session.{backend}",
        backend,
        {
            "session_description": "a mouse",
            "acquisition/ElectricalSeries/data": _rows(width=E),
            "acquisition/ElectricalSeries/timestamps": np.arange(N, dtype=np.float64) / 1e3,
            **{f"{ephys}/{c}": np.arange(E, dtype=np.float32) for c in ("x", "y", "z", "imp")},
            f"{ephys}/id": np.arange(E),
            f"{ephys}/location": np.array(["CA1"] * E),
        },
    )


def _epoch(dl: Any, key: Any = "observations") -> list[int]:
    """The row ids of one epoch (column 0 of ``key`` holds the row number)."""
    out: list[int] = []
    for batch in dl:
        col = batch[key]
        out.extend(int(v) for v in (col[:, 0] if col.ndim > 1 else col).round().tolist())
    return out


# ----------------------------------------------------------------------------- D4RL
@pytest.mark.parametrize("chunks", [None, 16])
def test_d4rl_reads_its_rows_and_names_the_side_group(
    tmp_path: Path, backend: str, chunks: int | None
) -> None:
    path = _d4rl(tmp_path, backend, chunks)
    with pytest.warns(LeftOutWarning, match=r"120 rows.*\['metadata'\]"):
        dl = loader(path, batch_size=32, seed=3)
    ds = dl.dataset
    assert isinstance(ds, StoreDataset)
    assert len(ds) == N
    assert ds.batch_size == torch.Size([N])
    assert {k for k in ds.left_out} == {
        ("metadata", "algorithm"),
        ("metadata", "iteration"),
        ("metadata", "policy", "fc0", "weight"),
        ("metadata", "policy", "fc0", "bias"),
    }
    for epoch in range(2):
        dl.batch_sampler.set_epoch(epoch)
        seen: list[int] = []
        for batch in dl:
            ids = batch["observations"][:, 0].long()
            assert torch.equal(batch["infos", "qpos"][:, 0], ids.float() * 10)
            assert torch.equal(batch["rewards"], ids.float())
            assert "metadata" not in batch.keys()
            seen.extend(ids.tolist())
        assert sorted(seen) == list(range(N))  # every row once per epoch


@pytest.mark.parametrize(
    ("keys", "want"),
    [
        (["infos/qpos"], {("infos", "qpos")}),
        ([("infos", "qpos")], {("infos", "qpos")}),
        (["infos"], {("infos", "qpos"), ("infos", "qvel")}),
        (["observations", "infos"], {("observations",), ("infos", "qpos"), ("infos", "qvel")}),
        (["/infos/qvel/", ("infos", "qvel")], {("infos", "qvel")}),
    ],
)
def test_keys_select_leaves_nested_keys_and_groups(
    tmp_path: Path, backend: str, keys: list[Any], want: set[tuple[str, ...]]
) -> None:
    path = _d4rl(tmp_path, backend, chunks=16)
    ds = StoreDataset(path, keys=keys)  # no side group in the way, no warning
    assert {g.key for g in ds.leaves} == want
    assert len(ds) == N
    assert ds.left_out == {}
    got = ds.__getitems__([5, 0, 119])
    assert got.batch_size == torch.Size([3])
    assert {tuple(k) if isinstance(k, tuple) else (k,) for k in got.keys(True, True)} == want
    scale = {("observations",): 1.0, ("infos", "qpos"): 10.0, ("infos", "qvel"): 1.0}
    for key in want:
        assert got.get(key)[:, 0].tolist() == [5 * scale[key], 0.0, 119 * scale[key]]
    ds.close()


def test_group_key_selects_side_table_rows(tmp_path: Path, backend: str) -> None:
    """A group key of another length gives a dataset of that length."""
    path = _d4rl(tmp_path, backend)
    ds = StoreDataset(path, keys=["metadata/policy"])
    assert len(ds) == 16
    assert ds.batch_size == torch.Size([16])
    assert torch.equal(ds.__getitems__([15])["metadata", "policy", "fc0", "bias"], torch.ones(1))


@pytest.mark.parametrize("validate", [True, False])
@pytest.mark.parametrize("given", [N, [N], (N,)])
def test_explicit_batch_size(tmp_path: Path, backend: str, validate: bool, given: Any) -> None:
    path = _d4rl(tmp_path, backend, chunks=16)
    with pytest.warns(LeftOutWarning, match="metadata"):
        ds = StoreDataset(path, batch_size=given, validate_batch_size=validate)
    assert len(ds) == N
    assert ds.batch_size == torch.Size([N])
    assert ("observations",) in {g.key for g in ds.leaves}
    assert ("metadata", "iteration") in ds.left_out
    assert ds.__getitems__([7])["observations"][0, 0] == 7
    with_keys = StoreDataset(path, keys=["infos"], batch_size=[N], validate_batch_size=validate)
    assert len(with_keys) == N
    ds.close()
    with_keys.close()


def test_explicit_batch_size_with_more_dims(tmp_path: Path, backend: str) -> None:
    path = _d4rl(tmp_path, backend)
    ds = StoreDataset(path, keys=["infos"], batch_size=[N, 4])
    assert ds.batch_size == torch.Size([N, 4])
    assert len(ds) == N
    with pytest.raises(BatchSizeError, match=r"\[120, 4\] does not fit 'observations'"):
        StoreDataset(path, keys=["observations"], batch_size=[N, 4])


def test_the_opener_takes_validate_batch_size(tmp_path: Path, backend: str) -> None:
    """``from_h5/from_zarr(..., validate_batch_size=False)`` was an internal TypeError."""
    path = _d4rl(tmp_path, backend)
    opener = PersistentTensorDict.from_h5 if backend == "h5" else PersistentTensorDict.from_zarr
    with opener(path, batch_size=[N], validate_batch_size=False) as td:
        assert td.batch_size == torch.Size([N])
        assert td["observations"].shape == (N, 3)
    with pytest.raises(BatchSizeError, match="metadata/iteration"):
        opener(path, batch_size=[N])


def test_open_store_source_and_pickling(tmp_path: Path, backend: str) -> None:
    path = _d4rl(tmp_path, backend, chunks=16)
    opener = PersistentTensorDict.from_h5 if backend == "h5" else PersistentTensorDict.from_zarr
    td = opener(path)
    assert td.batch_size == torch.Size([])  # the store as tensordict sees it
    ds = StoreDataset(td, keys=["observations", "infos/qpos"])
    assert td.batch_size == torch.Size([])  # left as it was
    again = pickle.loads(pickle.dumps(ds))
    for d in (ds, again):
        got = d.__getitems__([3, 4])
        assert got["observations"][:, 0].tolist() == [3.0, 4.0]
        assert got["infos", "qpos"][:, 0].tolist() == [30.0, 40.0]
    again.close()
    td.close()


def test_two_workers_every_row_once(tmp_path: Path, backend: str) -> None:
    path = _d4rl(tmp_path, backend, chunks=16)
    dl = loader(
        path,
        batch_size=16,
        keys=["observations", "infos"],
        num_workers=2,
        multiprocessing_context="fork",
    )
    for epoch in range(2):
        dl.batch_sampler.set_epoch(epoch)
        assert sorted(_epoch(dl)) == list(range(N))


# ----------------------------------------------------------------------------- LeRobot
def test_lerobot_data_rows_and_episode_table(tmp_path: Path, backend: str) -> None:
    path = _lerobot(tmp_path, backend)
    with pytest.warns(LeftOutWarning, match=r"\['meta'\]"):
        dl = loader(path, batch_size=25, seed=1)
    assert sorted(_epoch(dl, ("data", "observation.state"))) == list(range(N))
    assert set(dl.dataset.left_out) == {
        ("meta", "episodes", c)
        for c in ("episode_index", "dataset_from_index", "dataset_to_index", "length", "tasks")
    }
    # the group key: the same rows, no warning
    dl = loader(path, batch_size=25, keys=["data"], shuffle=False)
    assert _epoch(dl, ("data", "observation.state")) == list(range(N))
    # the episode table is a dataset of its own (E rows), strings read per row
    eps = loader(path, batch_size=3, keys=["meta/episodes"], non_tensor_as_stack=True)
    assert len(eps.dataset) == E
    lengths = torch.cat([b["meta", "episodes", "length"] for b in eps])
    assert int(lengths.sum()) == N
    batch = next(iter(loader(path, batch_size=2, keys=["meta/episodes"], shuffle=False,
                             non_tensor_as_stack=True)))  # fmt: skip
    tasks = batch.get(("meta", "episodes", "tasks")).tolist()  # h5 strings read as bytes
    assert [t.decode() if isinstance(t, bytes) else t for t in tasks] == ["task 0", "task 1"]


# ----------------------------------------------------------------------------- NWB
def test_nwb_rows_are_the_recording_not_the_electrodes(tmp_path: Path, backend: str) -> None:
    path = _nwb(tmp_path, backend)
    with pytest.warns(LeftOutWarning, match="general"):
        ds = StoreDataset(path)
    assert len(ds) == N  # not E, though the electrodes table has more leaves
    assert {g.key[-1] for g in ds.leaves} >= {"data", "timestamps"}
    assert all(k[0] == "general" for k in ds.left_out)
    got = ds.__getitems__([10, 11])
    assert got["acquisition", "ElectricalSeries", "data"][:, 0].tolist() == [10.0, 11.0]
    electrodes = StoreDataset(path, keys=["general/extracellular_ephys/electrodes"])
    assert len(electrodes) == E


# ----------------------------------------------------------------------------- errors
def test_short_column_beside_the_rows_is_refused(tmp_path: Path, backend: str) -> None:
    path = _write(
        tmp_path / f"flat.{backend}",
        backend,
        {"obs": _rows(), "action": _rows(width=2), "reward": np.zeros(N - 1, np.float32)},
    )
    with pytest.raises(BatchSizeError) as err:
        StoreDataset(path)
    msg = str(err.value)
    assert "flat." in msg
    assert "'reward'" in msg
    assert "119 rows" in msg
    assert "120 rows" in msg
    assert "keys=" in msg
    assert len(StoreDataset(path, keys=["obs", "action"])) == N  # the way out it names
    # lenient: what does not fit is left out
    with pytest.warns(LeftOutWarning, match="reward"):
        ds = StoreDataset(path, batch_size=[N], validate_batch_size=False)
    assert {g.key for g in ds.leaves} == {("obs",), ("action",)}


def test_keys_of_different_lengths_name_keys_and_lengths(tmp_path: Path, backend: str) -> None:
    path = _lerobot(tmp_path, backend)
    with pytest.raises(BatchSizeError) as err:
        StoreDataset(path, keys=["data/action", "meta/episodes/length"])
    msg = str(err.value)
    assert "lerobot." in msg
    assert "120 rows: 'data/action'" in msg
    assert "7 rows: 'meta/episodes/length'" in msg


def test_key_errors(tmp_path: Path, backend: str) -> None:
    path = _d4rl(tmp_path, backend)
    with pytest.raises(PtdValueError, match=r"\['infos/nope'\] are not leaves.*hopper"):
        StoreDataset(path, keys=["observations", "infos/nope"])
    with pytest.raises(BatchSizeError, match="metadata/iteration"):
        StoreDataset(path, keys=["metadata/iteration"])  # a scalar has no rows
    with pytest.raises(BatchSizeError, match=r"no dims: 'metadata/iteration'.*16 rows"):
        StoreDataset(path, keys=["metadata"])
    with pytest.raises(BatchSizeError, match=r"batch_size=\[100\] does not fit 'observations'"):
        StoreDataset(path, keys=["observations"], batch_size=[100])
    with pytest.raises(BatchSizeError, match="no leaf has"):
        StoreDataset(path, batch_size=[100], validate_batch_size=False)
    with pytest.raises(PtdTypeError, match="a str"):
        StoreDataset(path, keys=[3])


def test_loader_refuses_dataset_options_with_a_dataset(tmp_path: Path, backend: str) -> None:
    path = _d4rl(tmp_path, backend)
    ds = StoreDataset(path, keys=["infos"])
    with pytest.raises(PtdTypeError, match=r"\['keys'\]"):
        loader(ds, 8, keys=["observations"])
    with pytest.raises(PtdTypeError, match="chunk_cache"):
        loader(ds, 8, chunk_cache=0)
    assert len(loader(ds, 8)) == -(-N // 8)
    # open options of a path pass through the loader to the store
    dl = loader(path, 8, keys=["infos"], chunk_cache="1MB", fast_path=False)
    assert dl.dataset._open_kwargs == {"chunk_cache": "1MB", "fast_path": False}
    assert sorted(_epoch(dl, ("infos", "qvel"))) == list(range(N))


# ----------------------------------------------------------------------------- episodes
def test_episode_file_is_refused_with_the_way_out(tmp_path: Path, backend: str) -> None:
    """robomimic: data/demo_i of one layout and different lengths are episodes, not side
    groups; reading the longest and leaving out the others would be a silent surprise."""
    tree: dict[str, Any] = {"mask/train": np.array(["demo_0", "demo_2"])}
    for i, n in enumerate([30, 42, 35]):
        tree |= {
            f"data/demo_{i}/obs/pos": _rows(n),
            f"data/demo_{i}/actions": _rows(n, 2),
            f"data/demo_{i}/dones": np.arange(n) == n - 1,
        }
    path = _write(tmp_path / f"robo.{backend}", backend, tree)
    with pytest.raises(BatchSizeError) as err:
        StoreDataset(path)
    msg = str(err.value)
    assert "robo." in msg
    assert "data/demo_0, data/demo_1, data/demo_2" in msg
    assert "30 to 42 rows" in msg
    assert "keys=['data/demo_0']" in msg
    ds = StoreDataset(path, keys=["data/demo_1"])
    assert len(ds) == 42
    assert {g.key[-1] for g in ds.leaves} == {"pos", "actions", "dones"}
    with pytest.raises(BatchSizeError, match=r"30 rows: 'data/demo_0/actions'.*42 rows"):
        StoreDataset(path, keys=["data/demo_0", "data/demo_1"])


def test_minari_episode_observations_one_row_longer(tmp_path: Path, backend: str) -> None:
    """Minari: observations hold T+1 rows beside T actions, in each episode."""
    tree: dict[str, Any] = {}
    for i, n in enumerate([20, 24]):
        tree |= {
            f"episode_{i}/observations": _rows(n + 1),
            f"episode_{i}/actions": _rows(n, 2),
            f"episode_{i}/rewards": np.zeros(n, np.float32),
        }
    path = _write(tmp_path / f"minari.{backend}", backend, tree)
    with pytest.raises(BatchSizeError, match="minari"):
        StoreDataset(path)
    ds = StoreDataset(path, keys=["episode_1/actions", "episode_1/rewards"])
    assert len(ds) == 24
    with pytest.raises(BatchSizeError, match="25 rows: 'episode_1/observations'"):
        StoreDataset(path, keys=["episode_1"])


def test_a_group_of_an_open_store_as_source(tmp_path: Path, backend: str) -> None:
    path = _lerobot(tmp_path, backend)
    opener = PersistentTensorDict.from_h5 if backend == "h5" else PersistentTensorDict.from_zarr
    with opener(path) as td:
        ds = StoreDataset(td.get("data"))
        assert len(ds) == N
        assert ds.left_out == {}
        assert ds.__getitems__([9])["observation.state"][0, 0] == 9
        eps = StoreDataset(td.get("meta"), keys=["episodes/length"])
        assert len(eps) == E
        with pytest.raises(PtdValueError, match=r"\(group meta\)"):
            StoreDataset(td.get("meta"), keys=["nope"])
