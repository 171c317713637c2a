"""``None`` (a new dim) in an index of a file-backed tensordict: a lazy view on the same store.

Reads go through the stored entries only (the rows asked, nothing else) and then put the new
dims in; writes through such a view broadcast the value to the view's shape and drop the new
dims (the last copy along a new dim of several copies, numpy's rule) before writing the stored
rows. Views compose: a view of a view (with None again) never touches the file. The oracle
for values is the in-memory ``ptd.TensorDict`` (and numpy, for the index arithmetic), which
tests/containers/test_differential.py compares with tensordict 0.15.3.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptd import NonTensorStack, TensorDict
from ptd.errors import (
    BatchSizeError,
    PtdError,
    PtdIndexError,
    PtdValueError,
    UnsupportedOperationError,
)
from ptd.ops import indexing as ix
from tests.ops.test_indexing import check_selection, index_for, orth_read, to_numpy_index

# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def grid_data() -> TensorDict:
    """Batch [6, 3], a nested group with an extra batch dim ([6, 3, 2])."""
    return TensorDict(
        {
            "a": torch.arange(6 * 3 * 4, dtype=torch.float32).reshape(6, 3, 4),
            "b": torch.arange(18).reshape(6, 3),
            "n": TensorDict(
                {"c": torch.arange(36, dtype=torch.int32).reshape(6, 3, 2)}, batch_size=[6, 3, 2]
            ),
        },
        batch_size=[6, 3],
    )


@pytest.fixture
def grid(make_ptd) -> Any:
    return make_ptd(grid_data(), name="grid")


def leaves(td: Any) -> dict[Any, torch.Tensor]:
    return {k: td.get(k) for k in td.keys(True, True)}


def assert_same(got: Any, expected: Any) -> None:
    assert got.batch_size == expected.batch_size
    g, e = leaves(got), leaves(expected)
    assert sorted(map(str, g)) == sorted(map(str, e))
    for k in e:
        assert g[k].dtype == e[k].dtype, k
        assert g[k].shape == e[k].shape, k
        assert torch.equal(g[k], e[k]), k


# tensordict's own test list (test_index_none) and a few more mixes
READ_INDICES = [
    None,
    (None,),
    (..., None),
    (None, ...),
    (slice(None), None),
    (0, None),
    (None, slice(None), slice(None)),
    (None, ..., None),
    (None, 1, ..., None),
    (1, ..., None),
    (..., None, 0),
    ([1], ..., None),
    (None, slice(1, 5, 2), None, [2, 0]),
    (slice(1, None, 2), None),
    (None, torch.tensor([4, 1, 4])),
    (None, torch.tensor([True, False, True, False, True, True])),
    (slice(None), None, torch.tensor([True, False, True])),
    (None, [0, 5], [2, 1]),
    (-1, None, -1, None),
]


# --------------------------------------------------------------------------------------------
# reads
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("idx", READ_INDICES, ids=repr)
def test_read_matches_in_memory(grid, idx) -> None:
    expected = grid_data()[idx]
    view = grid[idx]
    assert view.batch_size == expected.batch_size
    assert view.batch_size == torch.zeros(6, 3)[idx].shape
    assert_same(view.to_tensordict(), expected)
    assert view["n"].batch_size == expected["n"].batch_size


def test_empty_batch_store(make_ptd) -> None:
    p = make_ptd({"a": torch.tensor([1.0, 2.0]), "n": {"x": torch.tensor(3)}}, name="e")
    assert p.batch_size == torch.Size([])
    view = p[None]
    assert view.batch_size == torch.Size([1])
    assert torch.equal(view["a"], torch.tensor([[1.0, 2.0]]))
    assert torch.equal(view["n", "x"], torch.tensor([3]))
    assert p[None, None][0].batch_size == torch.Size([1])


def test_view_creation_reads_nothing_and_reads_only_the_rows_asked(
    recorder, make_ptd, monkeypatch
) -> None:
    monkeypatch.setenv("PTD_FAST_PATH", "0")
    n = 1000
    p = make_ptd({"x": torch.arange(n * 2.0).reshape(n, 2)}, name="big", batch_size=[n])
    recorder.clear()
    view = p[None, 200:203]
    view = view[:, :, None]
    assert view.batch_size == torch.Size([1, 3, 1])
    assert recorder.backends
    assert recorder.reads() == []
    assert torch.equal(view["x"], torch.arange(400.0, 406.0).reshape(1, 3, 1, 2))
    (call,) = recorder.reads()
    assert len(np.unique(call.rows)) == 3
    # an unsorted index with repeats: the same backend reads as without the new dim
    idx = torch.tensor([900, 7, 900, 31])
    expected = p.to_tensordict()["x"][idx][:, None]
    recorder.clear()
    assert torch.equal(p[:, None][idx]["x"], expected)
    assert torch.equal(p[idx][:, None]["x"], expected)
    with_none, after_none = recorder.reads()
    recorder.clear()
    p[idx]["x"]
    (without,) = recorder.reads()
    assert repr(with_none.selection) == repr(after_none.selection) == repr(without.selection)
    # rows of 4 KiB: the unique rows asked are read, not the span between them
    q = make_ptd({"y": torch.zeros(n, 1024)}, name="wide", batch_size=[n])
    recorder.clear()
    assert q[None][:, [900, 7, 900], None]["y"].shape == (1, 3, 1, 1024)
    (call,) = recorder.reads()
    assert len(np.unique(call.rows)) == 2


def test_composition_with_none_again(grid) -> None:
    td = grid_data()
    chain = [
        (None,),
        (slice(None), slice(1, 5)),
        (0, None),
        (..., None),
        (slice(None), [2, 0, 2]),
        (None, -1),
    ]
    view, expected = grid, td
    for idx in chain:
        view, expected = view[idx], expected[idx]
        assert view.batch_size == expected.batch_size
        assert_same(view.to_tensordict(), expected)


def test_new_dim_of_several_copies_and_of_none(grid) -> None:
    td = grid_data()
    rep = grid[None][[0, 0, 0]]  # three copies of the same rows
    assert rep.batch_size == torch.Size([3, 6, 3])
    assert_same(rep.to_tensordict(), td[None][[0, 0, 0]])
    joint = grid[None][[0, 0], [5, 1]]  # a joint index through a new dim
    assert_same(joint.to_tensordict(), td[None][[0, 0], [5, 1]])
    empty = grid[:, None][:, 1:]  # zero copies
    assert empty.batch_size == torch.Size([6, 0, 3])
    assert empty["a"].shape == (6, 0, 3, 4)
    empty["a"] = torch.ones(6, 0, 3, 4)  # writes nothing
    assert torch.equal(grid["a"], td["a"])


def test_names_of_a_new_dim(grid) -> None:
    grid.names = ["t", "x"]
    assert grid[:, None].names == ["t", None, "x"]
    assert grid[None, 0].names == [None, "x"]


def test_pickled_view_keeps_its_new_dims(grid) -> None:
    view = grid[None, 1:3, None]
    back = pickle.loads(pickle.dumps(view))
    try:
        assert_same(back.to_tensordict(), grid_data()[None, 1:3, None])
    finally:
        back.close()


# --------------------------------------------------------------------------------------------
# writes through a view with new dims
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("idx", "make_value"),
    [
        ((None, slice(1, 3)), lambda v: v.apply(lambda t: -t - 1)),
        ((slice(None), None), lambda v: v.apply(lambda t: t * 2)),
        ((None, 4, ..., None), lambda v: v.apply(lambda t: t + 100)),
        ((None, [5, 0]), lambda v: v.apply(lambda t: -t)),
        ((None, slice(0, 2), None), lambda v: v[:, :1].apply(lambda t: t + 7)),  # broadcast
    ],
    # a lambda's repr holds its address: names that differ between runs (and xdist workers)
    ids=lambda v: "value" if callable(v) else repr(v),
)
def test_setitem_through_new_dims(grid, idx, make_value) -> None:
    td = grid_data()
    value = make_value(td[idx].clone())
    grid[idx] = value  # a store expands the value (as tensordict's PersistentTensorDict)
    td[idx] = value.expand(td[idx].batch_size)
    assert_same(grid.to_tensordict(), td)


def test_set_update_and_inplace_ops_through_new_dims(grid) -> None:
    td = grid_data()
    view, tview = grid[:, None], td[:, None]
    view.set_("a", torch.zeros(6, 1, 3, 4))
    tview.set_("a", torch.zeros(6, 1, 3, 4))
    assert_same(grid.to_tensordict(), td)
    value = TensorDict({"b": torch.full((1, 2, 3), 9)}, [1, 2, 3])
    grid[None, 2:4].update_(value)
    td[None, 2:4].update_(value)
    assert_same(grid.to_tensordict(), td)
    out = grid[None, 1:3, None].add_(1)
    td[None, 1:3, None].add_(1)
    assert out.batch_size == torch.Size([1, 2, 1, 3])
    assert_same(grid.to_tensordict(), td)
    grid[None, 0].set_("a", torch.ones(1, 3, 4))  # a leaf of the view
    td["a"][0] = 1
    assert_same(grid.to_tensordict(), td)
    grid[..., None] = 3  # a number
    assert torch.equal(grid["b"], torch.full((6, 3), 3))


def test_write_keeps_the_last_copy_of_a_new_dim(grid) -> None:
    view = grid[None][[0, 0]]
    assert view.batch_size == torch.Size([2, 6, 3])
    value = torch.stack([torch.zeros(6, 3, 4), torch.ones(6, 3, 4)])
    view["a"] = value
    assert torch.equal(grid["a"], torch.ones(6, 3, 4))


def test_write_touches_only_the_selected_rows(recorder, make_ptd) -> None:
    n = 1000
    p = make_ptd({"x": torch.zeros(n, 2)}, name="big", batch_size=[n])
    recorder.clear()
    p[None, 500:502, None] = TensorDict({"x": torch.ones(1, 2, 1, 2)}, [1, 2, 1])
    (call,) = recorder.writes()
    assert call.rows.tolist() == [500, 501]
    assert call.shape == (2, 2)
    assert p["x"].sum() == 4
    assert torch.equal(p["x"][500:502], torch.ones(2, 2))


def test_non_tensor_stack_through_new_dims(make_ptd) -> None:
    td = TensorDict({"a": torch.arange(4.0)}, [4])
    td["s"] = NonTensorStack("r0", "r1", "r2", "r3")
    p = make_ptd(td, name="stack")
    view = p[None, 1:3]
    assert view.batch_size == torch.Size([1, 2])
    assert view["s"] == [["r1", "r2"]]
    assert p[:, None]["s"] == [["r0"], ["r1"], ["r2"], ["r3"]]
    assert p[None][[0, 0], 1:3]["s"] == [["r1", "r2"], ["r1", "r2"]]
    one = p[None][[0, 0], 3]  # one stored row for every row of the view (as p[3, None])
    assert one.batch_size == torch.Size([2])
    assert one["s"] == "r3"
    view["s"] = NonTensorStack.from_list([["x", "y"]])
    assert p["s"] == ["r0", "x", "y", "r3"]


# --------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("idx", "match"),
    [
        ((None, 6), "out of bounds"),
        ((None, slice(None), 3), "out of bounds"),
        ((None, 0, 0, 0), "too many indices"),
        ((None, ..., None, 0, 0, 0), "too many indices"),
        (([0, 1], None, [0, 1]), "to_tensordict"),
        ((None, ..., ...), "single ellipsis"),
    ],
    ids=repr,
)
def test_bad_index_with_none_raises_index_error(grid, idx, match) -> None:
    with pytest.raises(IndexError, match=match) as info:
        grid[idx]
    assert isinstance(info.value, PtdIndexError)


def test_out_of_range_on_a_new_dim(grid) -> None:
    view = grid[None]
    with pytest.raises(PtdIndexError, match="out of bounds"):
        view[1]
    with pytest.raises(PtdIndexError, match="out of bounds"):
        view[[0, 1]]
    assert view[-1].batch_size == grid.batch_size


def test_bad_writes_through_new_dims(grid) -> None:
    with pytest.raises(RuntimeError, match="Cannot broadcast") as info:
        grid[1:3, None] = grid_data()[1:3]  # [2, 3] does not expand to [2, 1, 3]
    assert isinstance(info.value, BatchSizeError)
    with pytest.raises(PtdValueError, match="cannot write a value of shape"):
        grid[None, 0:2].set_("a", torch.ones(1, 2, 3, 5))
    with pytest.raises(UnsupportedOperationError):
        grid[None]["new"] = torch.zeros(1, 6, 3)
    assert_same(grid.to_tensordict(), grid_data())


def test_assignment_refuses_a_value_that_broadcasts_only_the_other_way(sample_ptd) -> None:
    """tensordict's test_setitem: a batch of 2 into a selection of 1 is refused (before, both
    shapes broadcasting to [2, ...] let it through to the leaf write)."""
    value = sample_ptd[:1].to_tensordict().zero_()
    with pytest.raises(RuntimeError, match="Cannot broadcast the tensordict") as info:
        sample_ptd[:1] = torch.cat([value, value], 0)
    assert isinstance(info.value, PtdError)
    sample_ptd[0:2] = value  # [1] expands to [2]
    assert (sample_ptd[0:2]["a"] == 0).all()
    assert (sample_ptd[2:]["a"] != 0).any()


# --------------------------------------------------------------------------------------------
# the index arithmetic, against numpy
# --------------------------------------------------------------------------------------------


@st.composite
def none_chains(draw):
    """A stored shape and a chain of indices with None inserted at random places."""
    stored = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    ids = np.arange(int(np.prod(stored))).reshape(stored)
    steps = []
    for _ in range(draw(st.integers(1, 3))):
        if ids.ndim == 0:
            break
        idx = draw(index_for(ids.shape))
        items = list(idx) if isinstance(idx, tuple) else [idx]
        for _ in range(draw(st.integers(0, 2))):
            items.insert(draw(st.integers(0, len(items))), None)
        steps.append((ids.shape, tuple(items)))
        try:
            ids = ids[to_numpy_index(tuple(items))]
        except IndexError:
            steps[-1] = (ids.shape, tuple(items), None)
            break
    return stored, steps


@settings(
    max_examples=300,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(none_chains())
def test_compose_with_none_matches_numpy(chain) -> None:
    stored, steps = chain
    data = np.arange(int(np.prod(stored))).reshape(stored)
    entries = ix.full_entries(stored)
    ids = data
    for step in steps:
        shape, idx = step[0], step[1]
        assert ix.view_shape(entries) == tuple(shape)
        numpy_ok = len(step) == 2
        try:
            entries = ix.compose(entries, shape, idx)
        except PtdIndexError as err:
            # numpy refuses too, or moves separated advanced indices first (refused lazily)
            assert not numpy_ok or "to_tensordict" in str(err), (idx, err)
            return
        assert numpy_ok, f"numpy refuses {idx!r}, ptd accepted it"
        ids = ids[to_numpy_index(idx)]
        assert ix.view_shape(entries) == ids.shape
    core = ix.stored_entries(entries)
    assert ix.stored_ndim(core) == len(stored)
    if 0 in ids.shape:
        return
    plan = ix.plan_read(core, 8)
    check_selection(plan.selection, stored)
    got = ix.expand_new_dims(
        torch.as_tensor(np.asarray(ix.apply_post(orth_read(data, plan.selection), plan.post))),
        entries,
    )
    np.testing.assert_array_equal(got.numpy(), ids)


def test_new_dim_entries() -> None:
    e = ix.compose(ix.full_entries((4, 3)), (4, 3), (slice(None), None, 1))
    assert e == (slice(0, 4, 1), ix.NewDim(1), 1)
    assert ix.view_shape(e) == (4, 1)
    assert ix.stored_ndim(e) == 2
    assert ix.has_new_dims(e)
    assert not ix.has_new_dims(ix.stored_entries(e))
    assert ix.drop_index(e) == (slice(None), -1)
    assert ix.compose(e, (4, 1), (0, slice(None, 0))) == (0, ix.NewDim(0), 1)
    assert ix.compose(e, (4, 1), (slice(None), [0, 0, -1])) == (
        slice(0, 4, 1),
        ix.NewDim(3),
        1,
    )


def test_in_memory_assignment_follows_tensordicts_batch_rules() -> None:
    """tensordict's TensorDict: the selection's batch size, its trailing dims (expanded on the
    left), or leaves that start with the selection's shape; anything else is a RuntimeError."""
    td = grid_data()
    one = td[:1].clone().zero_()
    with pytest.raises(RuntimeError, match="differs from the source batch size") as info:
        td[0:2] = one  # [1, 3] into [2, 3]
    assert isinstance(info.value, BatchSizeError)
    with pytest.raises(RuntimeError, match="differs from the source batch size"):
        td[:1] = torch.cat([one, one], 0)  # [2, 3] into [1, 3]
    assert_same(td, grid_data())
    td[0:2] = one[0]  # [3]: expanded on the left
    assert (td[0:2]["a"] == 0).all()
    assert (td[2:]["a"] != 0).any()
    prefix = TensorDict({"b": torch.full((2, 3), 7)}, [2])  # leaves start with [2, 3]
    td[2:4] = prefix
    assert (td["b"][2:4] == 7).all()
    td[None, 4:6] = td[4:6][None].clone().apply(lambda t: t * 0 + 1)  # with a new dim
    assert (td["a"][4:6] == 1).all()
