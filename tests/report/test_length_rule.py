"""The length rule of ``ptd.validate`` (:mod:`ptd.report.lengths`) on stores written by plain
h5py and zarr-python (no batch size stored): episode files, flat files, side arrays, metadata
groups, and generated trees (hypothesis)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ptd
from ptd.report.lengths import MIN_LENGTH, tolerance

#: a tree: a dict of name -> numpy array or sub-tree
Tree = dict[str, Any]


def write_plain(path: Path, fmt: str, tree: Tree, attrs: dict[Path, dict] | None = None) -> Path:
    """Write ``tree`` with plain h5py or zarr-python (nothing of ptd's)."""
    if fmt == "h5":
        import h5py

        with h5py.File(path, "w") as f:
            _write_h5(f, tree)
        return path
    import zarr

    _write_zarr(zarr.open_group(str(path), mode="w"), tree)
    return path


def _write_h5(g: Any, tree: Tree) -> None:
    for name, value in tree.items():
        if isinstance(value, dict):
            _write_h5(g.create_group(name), value)
        else:
            g.create_dataset(name, data=value)


def _write_zarr(g: Any, tree: Tree) -> None:
    for name, value in tree.items():
        if isinstance(value, dict):
            _write_zarr(g.create_group(name), value)
        else:
            a = g.create_array(name, shape=value.shape, dtype=value.dtype)
            a[...] = value


def robomimic(lengths: list[int], short: int | None = None) -> Tree:
    """``data/demo_i/{obs/{agentview_image, eef_pos}, actions, rewards, dones}``, ``mask/*``
    (fixed-length bytes demo names); ``short``: that demo's actions lack one row."""
    data: Tree = {}
    for i, n in enumerate(lengths):
        data[f"demo_{i}"] = {
            "obs": {
                "agentview_image": np.zeros((n, 4, 4, 3), np.uint8),
                "eef_pos": np.zeros((n, 3), np.float32),
            },
            "actions": np.zeros((n - (i == short), 7), np.float32),
            "rewards": np.zeros(n, np.float32),
            "dones": np.zeros(n, np.uint8),
        }
    names = [f"demo_{i}".encode() for i in range(len(lengths))]
    return {
        "data": data,
        "mask": {"train": np.array(names[:-2]), "valid": np.array(names[-2:])},
    }


def codes(report: ptd.ValidationReport) -> list[tuple[str, str]]:
    return [(p.key, p.code) for p in report.problems]


@pytest.fixture(params=["h5", "zarr"])
def fmt(request: pytest.FixtureRequest) -> str:
    return request.param


def test_episode_file_healthy_and_one_short_leaf(tmp_path: Path, fmt: str) -> None:
    lengths = [142, 150, 139, 151, 147, 140, 150, 149]
    ok = ptd.validate(write_plain(tmp_path / f"ok.{fmt}", fmt, robomimic(lengths)))
    assert ok.valid, ok.problems
    assert ok.problems == [], ok.problems
    by_key = {g["key"]: g for g in ok.group_batches}
    # each demo has its own length, its source the rule's; data/ and mask/ have none
    assert [by_key[f"data/demo_{i}"]["length"] for i in range(len(lengths))] == lengths
    assert by_key["data/demo_3"]["length_source"] == "4 of 4 voters"
    assert by_key["data"]["length"] is None
    assert by_key["mask"]["length"] is None
    bad = ptd.validate(write_plain(tmp_path / f"bad.{fmt}", fmt, robomimic(lengths, short=3)))
    assert codes(bad) == [("data/demo_3/actions", "length_mismatch")]
    (p,) = bad.problems
    assert p.severity == "error"
    assert p.shape == [150]
    assert p.expected == [151]
    assert "'data/demo_3'" in p.message
    assert "3 of 4 voters" in p.message
    assert not bad.valid


def test_batch_dims_is_per_group(tmp_path: Path, fmt: str) -> None:
    """--batch-dims 1 gives each demo its own length, not the first demo's to all."""
    lengths = [142, 150, 139, 151]
    path = write_plain(tmp_path / f"ok.{fmt}", fmt, robomimic(lengths))
    rep = ptd.validate(path, batch_dims=1)
    assert rep.valid, rep.problems
    assert rep.problems == [], rep.problems
    by_key = {g["key"]: g for g in rep.group_batches}
    assert [by_key[f"data/demo_{i}"]["batch_size"] for i in range(4)] == [[n] for n in lengths]
    assert by_key["data/demo_1/obs"]["batch_size"] == [150]
    assert by_key["data"]["batch_size"] == []
    assert by_key["data"]["batch_size_source"] == "batch_dims"
    bad = ptd.validate(
        write_plain(tmp_path / f"bad.{fmt}", fmt, robomimic(lengths, short=2)), batch_dims=1
    )
    assert codes(bad) == [("data/demo_2/actions", "batch_mismatch")]


def test_flat_file_one_short_leaf(tmp_path: Path, fmt: str) -> None:
    tree = {k: np.zeros((5000, 2), np.float32) for k in ("obs", "action", "done")}
    tree["reward"] = np.zeros(4999, np.float32)
    rep = ptd.validate(write_plain(tmp_path / f"f.{fmt}", fmt, tree))
    assert codes(rep) == [("reward", "length_mismatch")]
    assert rep.problems[0].shape == [4999]
    assert rep.problems[0].expected == [5000]


def test_side_arrays_and_metadata_groups_pass(tmp_path: Path, fmt: str) -> None:
    """episode_ends (LeRobot/diffusion policy), D4RL's metadata/ and infos/ groups."""
    n = 5000
    tree: Tree = {
        "observations": np.zeros((n, 11), np.float32),
        "actions": np.zeros((n, 3), np.float32),
        "rewards": np.zeros(n, np.float32),
        "terminals": np.zeros(n, bool),
        "episode_ends": np.arange(1, 21) * 250,
        "infos": {"qpos": np.zeros((n, 6)), "qvel": np.zeros((n, 6))},
        "metadata": {
            "algorithm": np.array(b"SAC"),
            "iteration": np.array(3),
            "policy": {
                "fc0": {"weight": np.zeros((256, 11)), "bias": np.zeros(256)},
                "last_fc": {"weight": np.zeros((3, 256)), "bias": np.zeros(3)},
            },
            "origin": np.zeros(3),
            "size": np.zeros(2),
        },
    }
    rep = ptd.validate(write_plain(tmp_path / f"d4rl.{fmt}", fmt, tree))
    assert rep.valid, rep.problems
    assert rep.problems == [], rep.problems
    assert {g["key"]: g["length"] for g in rep.group_batches}[""] == n


def test_minari_offset_shared_by_every_episode_passes(tmp_path: Path, fmt: str) -> None:
    """observations hold one row more than actions in every episode (Minari): a convention;
    one episode where actions are off as well is still reported."""

    def episode(t: int, extra: int = 0) -> Tree:
        return {
            "observations": np.zeros((t + 1, 4), np.float32),
            "actions": np.zeros((t + extra, 2), np.float32),
            "rewards": np.zeros(t),
            "terminations": np.zeros(t, bool),
            "truncations": np.zeros(t, bool),
        }

    tree = {f"episode_{i}": episode(t) for i, t in enumerate([100, 120, 90])}
    assert ptd.validate(write_plain(tmp_path / f"m.{fmt}", fmt, tree)).problems == []
    tree["episode_1"] = episode(120, extra=-1)
    rep = ptd.validate(write_plain(tmp_path / f"m2.{fmt}", fmt, tree))
    assert codes(rep) == [("episode_1/actions", "length_mismatch")]


def test_two_voters_a_row_apart_report_the_shorter(tmp_path: Path, fmt: str) -> None:
    rep = ptd.validate(
        write_plain(tmp_path / f"t.{fmt}", fmt, {"a": np.zeros(50), "b": np.zeros(49)})
    )
    assert codes(rep) == [("b", "length_mismatch")]
    assert "a tie" in rep.problems[0].message


def test_a_subgroup_off_by_one_is_named(tmp_path: Path, fmt: str) -> None:
    n = 300
    tree = {
        "obs": np.zeros((n, 3)),
        "reward": np.zeros(n),
        "next": {"obs": np.zeros((n - 1, 3)), "reward": np.zeros(n - 1)},
    }
    rep = ptd.validate(write_plain(tmp_path / f"n.{fmt}", fmt, tree))
    assert codes(rep) == [("next", "length_mismatch")]
    assert "group 'next' has length 299" in rep.problems[0].message


def test_stored_batch_size_is_not_second_guessed(tmp_path: Path, fmt: str) -> None:
    """Where a batch size is stored the stored one is checked (batch_mismatch), not the rule."""
    import torch

    path = tmp_path / f"s.{fmt}"
    ptd.PersistentTensorDict.from_dict(
        {"a": torch.zeros(50), "b": torch.zeros(50), "c": torch.zeros(49)},
        str(path),
        backend=fmt,
        batch_size=[],
    ).close()
    rep = ptd.validate(path)
    assert rep.valid, rep.problems
    assert rep.batch_size_source == "stored", rep.problems
    assert rep.group_batches[0]["length"] is None


def test_schema_names_a_missing_batch_size(tmp_path: Path, fmt: str) -> None:
    lengths = [142, 150, 139, 151]
    schema = ptd.info(write_plain(tmp_path / f"ok.{fmt}", fmt, robomimic(lengths)))
    bad = write_plain(tmp_path / f"bad.{fmt}", fmt, robomimic(lengths, short=1))
    rep = ptd.validate(bad, schema=schema)
    assert codes(rep) == [("", "no_batch_size"), ("data/demo_1/actions", "length_mismatch")]
    assert "'data/demo_1'" in rep.problems[0].message
    assert "--batch-size" in rep.problems[0].message


# ---------------------------------------------------------------- generated trees


@st.composite
def trees(draw: Any) -> tuple[Tree, list[tuple[tuple[str, ...], int]]]:
    """A tree of groups, each with a common length (far apart from one another) held by at
    least four leaves (more than its sub-groups), optional side arrays of very different lengths, string arrays and
    scalars; returns it and the candidate leaves to perturb (key, group length)."""
    lengths = [20, 60, 150, 400, 1000]
    counter = itertools.count()
    candidates: list[tuple[tuple[str, ...], int]] = []

    def group(path: tuple[str, ...], depth: int) -> Tree:
        n = draw(st.sampled_from(lengths))
        out: Tree = {}
        for _ in range(draw(st.integers(4, 6))):
            name = f"x{next(counter)}"
            trailing = draw(st.sampled_from([(), (2,), (3, 2)]))
            out[name] = np.zeros((n, *trailing), np.float32)
            candidates.append((path + (name,), n))
        for _ in range(draw(st.integers(0, 2))):
            # a side array: off by more than the tolerance, each length its own
            far = n * 3 + next(counter) if draw(st.booleans()) else n // 3 - next(counter) % 3
            out[f"side{next(counter)}"] = np.zeros(max(far, 0), np.int64)
        if draw(st.booleans()):
            out[f"names{next(counter)}"] = np.array([b"a", b"bc"] * draw(st.integers(1, 9)))
        if draw(st.booleans()):
            out[f"scalar{next(counter)}"] = np.array(7)
        if depth < 2:
            for _ in range(draw(st.integers(0, 2))):
                name = f"g{next(counter)}"
                sub = group(path + (name,), depth + 1)
                out[name] = sub
        return out

    return group((), 0), candidates


def _get(tree: Tree, key: tuple[str, ...]) -> Any:
    for k in key[:-1]:
        tree = tree[k]
    return tree


@pytest.mark.parametrize("fmt_", ["h5", "zarr"])
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=trees(), pick=st.integers(0, 10_000), delta=st.sampled_from([-1, 0, 1]))
def test_generated_trees_flag_exactly_the_perturbed_leaf(
    tmp_path_factory: pytest.TempPathFactory,
    fmt_: str,
    data: tuple[Tree, list[tuple[tuple[str, ...], int]]],
    pick: int,
    delta: int,
) -> None:
    tree, candidates = data
    key, n = candidates[pick % len(candidates)]
    assert n >= MIN_LENGTH
    assert tolerance(n) >= 1
    if delta:
        parent = _get(tree, key)
        old = parent[key[-1]]
        parent[key[-1]] = np.zeros((n + delta, *old.shape[1:]), old.dtype)
    path = write_plain(tmp_path_factory.mktemp("gen") / f"t.{fmt_}", fmt_, tree)
    rep = ptd.validate(path, lint=False)
    found = [(p.key, p.code) for p in rep.problems]
    assert found == ([("/".join(key), "length_mismatch")] if delta else []), found
