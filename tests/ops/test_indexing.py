"""ptd._indexing: lazy index arithmetic (compose / plan_read / plan_write), checked against numpy.

The oracle: a stored array of ids ``np.arange(N).reshape(shape)`` indexed by numpy with the same
chain of indices gives, for every element of the view, the stored element it stands for. A
simulated backend applies the planned *selection* with orthogonal semantics (ints, positive
slices, at most one sorted unique array, the contract of ``ptd.storage.api``), and the plan's
in-memory step must then give exactly what numpy gives.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptd.errors import PtdError, PtdIndexError
from ptd.ops import indexing as ix

SETTINGS = settings(
    max_examples=200,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# --------------------------------------------------------------------------------------------
# the simulated backend (orthogonal selection semantics) and the selection contract
# --------------------------------------------------------------------------------------------


def check_selection(selection, stored_shape) -> None:
    """The contract of Backend.read/write: ints in bounds, slices with step > 0 inside the
    dim, at most one 1-D int array, sorted, unique, in bounds."""
    assert isinstance(selection, tuple)
    assert len(selection) <= len(stored_shape)
    n_arrays = 0
    for item, n in zip(selection, stored_shape, strict=False):
        if isinstance(item, slice):
            assert item.step is None or item.step > 0, selection
            assert item.start is None or 0 <= item.start <= n, selection
            assert item.stop is None or item.stop <= n, selection
        elif isinstance(item, np.ndarray):
            n_arrays += 1
            assert item.ndim == 1, selection
            assert item.dtype.kind == "i", selection
            assert len(item) > 0
            assert np.all(np.diff(item) > 0), f"array not sorted/unique: {item}"
            assert item.min() >= 0, selection
            assert item.max() < n, selection
        else:
            assert isinstance(item, (int, np.integer)), selection
            assert not isinstance(item, bool), selection
            assert 0 <= item < n, selection
    assert n_arrays <= 1, selection


def _mesh(selection, shape):
    """An all-advanced index equivalent to an orthogonal selection."""
    idx = []
    lens = []
    for item, n in zip(selection, shape, strict=False):
        if isinstance(item, slice):
            idx.append(np.arange(*item.indices(n)))
        elif isinstance(item, np.ndarray):
            idx.append(item)
        else:
            idx.append(int(item))
            continue
        lens.append(len(idx[-1]))
    out = []
    k = 0
    m = len(lens)
    for a in idx:
        if isinstance(a, int):
            out.append(a)
            continue
        bshape = [1] * m
        bshape[k] = len(a)
        out.append(a.reshape(bshape))
        k += 1
    return tuple(out)


def orth_read(data: np.ndarray, selection) -> np.ndarray:
    out = data
    axis = 0
    for item in selection:
        if isinstance(item, slice):
            out = out[(slice(None),) * axis + (item,)]
            axis += 1
        elif isinstance(item, np.ndarray):
            out = np.take(out, item, axis=axis)
            axis += 1
        else:
            out = np.take(out, int(item), axis=axis)
    return out.copy()


def orth_write(data: np.ndarray, selection, value: np.ndarray) -> None:
    target = orth_read(data, selection).shape
    assert value.shape == target, (value.shape, target)
    if 0 in target:
        return
    data[_mesh(selection, data.shape)] = value


# --------------------------------------------------------------------------------------------
# strategies: shapes and chains of indices numpy and ptd agree on
# --------------------------------------------------------------------------------------------


def to_numpy_index(idx):
    def conv(i):
        if isinstance(i, torch.Tensor):
            return i.numpy()
        if isinstance(i, list):
            return np.asarray(i, dtype=np.bool_ if i and isinstance(i[0], bool) else np.int64)
        return i

    return tuple(conv(i) for i in idx) if isinstance(idx, tuple) else conv(idx)


@st.composite
def arrays_for(draw, n: int, length: int | None = None):
    """A 1-D int index into a dim of size ``n``: unsorted, repeated and negative allowed."""
    if length is None:
        length = draw(st.integers(0, 8))
    if n == 0:
        length = 0
    vals = draw(st.lists(st.integers(-n, n - 1), min_size=length, max_size=length)) if n else []
    form = draw(st.sampled_from(["list", "numpy", "torch"]))
    if form == "list":
        return list(vals)
    if form == "numpy":
        return np.asarray(vals, dtype=draw(st.sampled_from([np.int64, np.int32])))
    return torch.tensor(vals, dtype=torch.int64)


@st.composite
def slices_for(draw, n: int):
    start = draw(st.none() | st.integers(-n - 2, n + 2))
    stop = draw(st.none() | st.integers(-n - 2, n + 2))
    step = draw(st.none() | st.sampled_from([1, 2, 3, -1, -2]))
    return slice(start, stop, step)


@st.composite
def index_for(draw, shape: tuple[int, ...]):
    """An index for a view of batch shape ``shape`` (numpy's rules give ptd's lazy results)."""
    nd = len(shape)
    kind = draw(st.sampled_from(["int", "slice", "array", "tuple", "mask", "joint", "ellipsis"]))
    if kind == "int" and shape[0] > 0:
        return draw(st.integers(-shape[0], shape[0] - 1))
    if kind == "slice":
        return draw(slices_for(shape[0]))
    if kind == "array":
        return draw(arrays_for(shape[0]))
    if kind == "mask":
        lead = draw(st.integers(0, nd - 1))  # full slices in front of the mask
        k = draw(st.integers(1, nd - lead))
        mshape = shape[lead : lead + k]
        size = int(np.prod(mshape))
        mask = np.asarray(
            draw(st.lists(st.booleans(), min_size=size, max_size=size)), dtype=np.bool_
        ).reshape(mshape)
        form = draw(
            st.sampled_from(["numpy", "torch", "list"] if k == 1 and size else ["numpy", "torch"])
        )
        m = (
            torch.from_numpy(mask.copy())
            if form == "torch"
            else mask.tolist()
            if form == "list"
            else mask
        )
        return tuple([slice(None)] * lead) + (m,) if lead else m
    if kind == "joint" and nd >= 2:
        # adjacent arrays of equal length index several dims pointwise
        start = draw(st.integers(0, nd - 2))
        length = draw(st.integers(0, 6)) if all(shape[start : start + 2]) else 0
        a = draw(arrays_for(shape[start], length))
        b = draw(arrays_for(shape[start + 1], length))
        return tuple([slice(None)] * start) + (a, b)
    if kind == "ellipsis":
        k = draw(st.integers(0, nd))
        items = [
            draw(slices_for(n)) if draw(st.booleans()) or n == 0 else draw(st.integers(-n, n - 1))
            for n in shape[nd - k :]
        ]
        return (Ellipsis, *items)
    return draw(mixed_index_for(shape))


@st.composite
def mixed_index_for(draw, shape: tuple[int, ...]):
    """A tuple mixing ints, slices, 1-D int arrays (of a common length, or length 1) and 1-D
    masks, with an optional Ellipsis: numpy's advanced-indexing rules apply."""
    nd = len(shape)
    k = draw(st.integers(1, nd))
    ell = draw(st.none() | st.integers(0, k)) if k < nd else None
    dims = list(range(k)) if ell is None else list(range(ell)) + list(range(nd - (k - ell), nd))
    length = draw(st.integers(0, 5))
    items: list = []
    for d in dims:
        n = shape[d]
        kind = draw(st.sampled_from(["int", "slice", "array", "mask"]))
        if kind == "int" and n > 0:
            items.append(draw(st.integers(-n, n - 1)))
        elif kind == "array":
            items.append(draw(arrays_for(n, draw(st.sampled_from([length, 1])))))
        elif kind == "mask":
            mask = draw(st.lists(st.booleans(), min_size=n, max_size=n))
            items.append(
                np.asarray(mask, dtype=np.bool_)
                if draw(st.booleans()) or not n
                else torch.tensor(mask)
            )
        else:
            items.append(draw(slices_for(n)))
    if ell is not None:
        items.insert(ell, Ellipsis)
    return tuple(items)


def advanced_separated(idx, ndim: int) -> bool:
    """True when numpy's advanced indices (arrays, masks, and ints when there is an array or a
    mask) are separated by a slice: numpy then moves their dim to the front."""
    items = list(idx) if isinstance(idx, tuple) else [idx]
    np_items = [to_numpy_index(i) for i in items]
    consumed = sum(
        i.ndim if isinstance(i, np.ndarray) and i.dtype == np.bool_ else 1
        for i in np_items
        if i is not Ellipsis
    )
    flat: list = []
    for i in np_items:
        if i is Ellipsis:
            flat.extend([slice(None)] * (ndim - consumed))
        else:
            flat.append(i)
    is_arr = [isinstance(i, np.ndarray) for i in flat]
    if not any(is_arr):
        return False
    adv = [j for j, i in enumerate(flat) if is_arr[j] or isinstance(i, (int, np.integer))]
    return adv != list(range(adv[0], adv[-1] + 1))


@st.composite
def chains(draw):
    stored = tuple(draw(st.lists(st.integers(0, 6), min_size=1, max_size=3)))
    n_steps = draw(st.integers(1, 3))
    ids = np.arange(int(np.prod(stored))).reshape(stored)
    steps = []
    shape = stored
    for _ in range(n_steps):
        if len(shape) == 0:
            break
        idx = draw(index_for(shape))
        try:
            ids_next = ids[to_numpy_index(idx)]
        except IndexError:
            continue  # numpy refuses (e.g. a bool index of the wrong length)
        if advanced_separated(idx, len(shape)):
            continue  # ptd may refuse these lazily (checked in test_compose_agrees_with_numpy)
        steps.append((shape, idx))
        ids = ids_next
        shape = ids.shape
    return stored, steps, ids


def compose_chain(stored, steps):
    entries = ix.full_entries(stored)
    for shape, idx in steps:
        assert ix.view_shape(entries) == tuple(shape)
        entries = ix.compose(entries, shape, idx)
    return entries


# --------------------------------------------------------------------------------------------
# properties
# --------------------------------------------------------------------------------------------


@SETTINGS
@given(chains(), st.sampled_from([(), (2,)]), st.sampled_from([1, 64, 1 << 20]))
def test_compose_and_plan_read_match_numpy(chain, feat, row_nbytes) -> None:
    stored, steps, expected_ids = chain
    entries = compose_chain(stored, steps)
    assert ix.view_shape(entries) == expected_ids.shape
    n = int(np.prod(stored))
    data = np.arange(n * int(np.prod(feat))).reshape(stored + feat) * 10 + 3
    expected = data.reshape((n,) + feat)[expected_ids.reshape(-1)].reshape(
        expected_ids.shape + feat
    )
    if 0 in expected_ids.shape:
        return  # PTD short-circuits empty views before planning
    plan = ix.plan_read(entries, row_nbytes)
    check_selection(plan.selection, stored)
    got = ix.apply_post(orth_read(data, plan.selection), plan.post)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


@SETTINGS
@given(chains(), st.sampled_from([(), (3,)]), st.sampled_from([1, 1 << 20]), st.integers(0, 2**31))
def test_plan_write_matches_numpy(chain, feat, row_nbytes, seed) -> None:
    stored, steps, expected_ids = chain
    entries = compose_chain(stored, steps)
    if 0 in expected_ids.shape:
        return
    n = int(np.prod(stored))
    data = np.zeros(stored + feat, dtype=np.int64) - 1
    value = np.random.default_rng(seed).integers(0, 1000, size=expected_ids.shape + feat)
    expected = data.reshape((n,) + feat).copy()
    # numpy assignment: with repeated targets the last value wins
    expected[expected_ids.reshape(-1)] = value.reshape((-1,) + feat)
    expected = expected.reshape(stored + feat)

    plan = ix.plan_write(entries, row_nbytes)
    check_selection(plan.selection, stored)
    if not plan.box:
        arr = value
        if plan.take is not None:
            arr = np.take(arr, plan.take[1], axis=plan.take[0])
        orth_write(data, plan.selection, arr)
    else:
        box = orth_read(data, plan.selection)
        orth_write(data, plan.selection, ix.box_assign(box, plan.post, value))
    np.testing.assert_array_equal(data, expected)


@st.composite
def one_index(draw):
    stored = tuple(draw(st.lists(st.integers(0, 5), min_size=1, max_size=3)))
    view = draw(st.booleans())
    entries = ix.full_entries(stored)
    ids = np.arange(int(np.prod(stored))).reshape(stored)
    if view and stored[0] > 1:  # start from a view of every other row, reversed
        entries = ix.compose(entries, stored, slice(None, None, -2))
        ids = ids[::-2]
    idx = draw(index_for(ids.shape) if draw(st.booleans()) else mixed_index_for(ids.shape))
    return stored, entries, ids, idx


@SETTINGS
@given(one_index())
def test_compose_agrees_with_numpy(case) -> None:
    """numpy raises IndexError -> ptd raises IndexError; otherwise ptd gives numpy's elements,
    or refuses (IndexError naming to_tensordict) a layout where numpy moves the advanced dims."""
    stored, entries, ids, idx = case
    try:
        expected = ids[to_numpy_index(idx)]
    except IndexError:
        expected = None
    try:
        new = ix.compose(entries, ids.shape, idx)
    except IndexError as err:
        assert isinstance(err, PtdIndexError)
        if expected is not None:
            assert advanced_separated(idx, ids.ndim), (
                f"refused an index numpy applies: {idx!r}: {err}"
            )
            assert "to_tensordict" in str(err)
        return
    assert expected is not None, f"numpy refuses {idx!r} but ptd accepted it"
    assert ix.view_shape(new) == expected.shape
    if expected.size:
        plan = ix.plan_read(new, 8)
        check_selection(plan.selection, stored)
        np.testing.assert_array_equal(
            ix.apply_post(
                orth_read(np.arange(int(np.prod(stored))).reshape(stored), plan.selection),
                plan.post,
            ),
            expected,
        )


@SETTINGS
@given(chains())
def test_views_of_views_equal_one_step_index(chain) -> None:
    """Composing a chain gives the same elements as indexing the ids with the chain at once."""
    stored, steps, expected_ids = chain
    entries = compose_chain(stored, steps)
    ids = np.arange(int(np.prod(stored))).reshape(stored)
    if 0 in expected_ids.shape:
        assert ix.view_shape(entries) == expected_ids.shape
        return
    plan = ix.plan_read(entries, 8)
    np.testing.assert_array_equal(
        ix.apply_post(orth_read(ids, plan.selection), plan.post), expected_ids
    )


# --------------------------------------------------------------------------------------------
# examples
# --------------------------------------------------------------------------------------------


def read_via_plan(data, entries, row_nbytes=8):
    plan = ix.plan_read(entries, row_nbytes)
    check_selection(plan.selection, data.shape)
    return ix.apply_post(orth_read(data, plan.selection), plan.post)


def test_docstring_example() -> None:
    entries = ix.full_entries((10,))
    entries = ix.compose(entries, (10,), slice(2, 9))
    entries = ix.compose(entries, (7,), [4, 0, 4])
    assert len(entries) == 1
    assert isinstance(entries[0], ix.Points)
    np.testing.assert_array_equal(entries[0].arrays[0], [6, 2, 6])
    plan = ix.plan_read(entries, row_nbytes=1 << 20)
    assert len(plan.selection) == 1
    np.testing.assert_array_equal(plan.selection[0], [2, 6])
    np.testing.assert_array_equal(plan.post[0], [1, 0, 1])


def test_full_entries_and_view_shape() -> None:
    assert ix.full_entries((3, 4)) == (slice(0, 3, 1), slice(0, 4, 1))
    assert ix.view_shape(ix.full_entries((3, 4))) == (3, 4)
    assert ix.view_shape((2, slice(0, 4, 2), ix.Points((np.array([1, 1, 0]),)))) == (2, 3)


@pytest.mark.parametrize(
    "idx",
    [
        [5, 1, 5, 0],
        np.array([9, -1, -10, 3]),
        torch.tensor([7, 7, 7]),
        slice(None, None, -1),
        slice(8, 1, -3),
        np.array([True, False] * 5),
        torch.tensor([False] * 9 + [True]),
        [],
        np.array([], dtype=np.int64),
    ],
    ids=repr,
)
def test_unsorted_repeated_negative_1d(idx) -> None:
    data = np.arange(10) * 7
    entries = ix.compose(ix.full_entries((10,)), (10,), idx)
    expected = data[to_numpy_index(idx)]
    assert ix.view_shape(entries) == expected.shape
    if expected.size:
        np.testing.assert_array_equal(read_via_plan(data, entries), expected)


def test_view_of_view_of_view() -> None:
    data = np.arange(1000).reshape(100, 10)
    e = ix.full_entries((100, 10))
    e = ix.compose(e, (100, 10), slice(10, 90, 2))  # 40 rows
    e = ix.compose(e, (40, 10), ([39, 0, 5, 5, -1], slice(1, None, 3)))
    e = ix.compose(e, (5, 3), (slice(None, None, -1), 2))
    expected = data[10:90:2][[39, 0, 5, 5, -1], 1::3][::-1, 2]
    assert ix.view_shape(e) == expected.shape
    np.testing.assert_array_equal(read_via_plan(data, e), expected)


def test_int_then_view_keeps_remaining_dims() -> None:
    data = np.arange(60).reshape(3, 4, 5)
    e = ix.compose(ix.full_entries((3, 4, 5)), (3, 4, 5), 1)
    assert ix.view_shape(e) == (4, 5)
    e = ix.compose(e, (4, 5), (slice(None), [4, 0]))
    np.testing.assert_array_equal(read_via_plan(data, e), data[1][:, [4, 0]])


def test_joint_arrays_across_an_int_entry() -> None:
    data = np.arange(120).reshape(4, 5, 6)
    e = ix.compose(ix.full_entries((4, 5, 6)), (4, 5, 6), (slice(None), 2, slice(None)))
    e = ix.compose(e, (4, 6), ([3, 0, 3], [5, 5, 1]))
    np.testing.assert_array_equal(read_via_plan(data, e), data[:, 2][[3, 0, 3], [5, 5, 1]])


def test_mask_over_two_dims() -> None:
    data = np.arange(24).reshape(4, 6)
    mask = (data % 5) == 0
    e = ix.compose(ix.full_entries((4, 6)), (4, 6), mask)
    np.testing.assert_array_equal(read_via_plan(data, e), data[mask])
    e = ix.compose(ix.full_entries((4, 6)), (4, 6), torch.from_numpy(mask))
    np.testing.assert_array_equal(read_via_plan(data, e), data[mask])


def test_sparse_index_reads_only_its_rows() -> None:
    """256 random rows out of 100k: the plan asks for those rows, not a bounding range."""
    rng = np.random.default_rng(0)
    idx = rng.choice(100_000, 256, replace=False)
    e = ix.compose(ix.full_entries((100_000,)), (100_000,), torch.from_numpy(idx))
    plan = ix.plan_read(e, row_nbytes=4 * 8)
    (sel,) = plan.selection
    assert isinstance(sel, np.ndarray)
    assert len(sel) == 256
    np.testing.assert_array_equal(sel, np.sort(idx))
    data = np.arange(100_000)
    np.testing.assert_array_equal(ix.apply_post(data[sel], plan.post), idx)


def test_dense_sorted_index_reads_a_slice() -> None:
    e = ix.compose(ix.full_entries((1000,)), (1000,), np.arange(100, 200))
    plan = ix.plan_read(e, row_nbytes=8)
    assert plan.selection == (slice(100, 200, 1),)
    assert plan.post is None


def test_plan_write_keeps_last_of_repeats() -> None:
    e = ix.compose(ix.full_entries((5,)), (5,), [3, 1, 3])
    plan = ix.plan_write(e, row_nbytes=8)
    data = np.zeros(5, dtype=np.int64)
    arr = np.array([10, 20, 30])
    if plan.take is not None:
        arr = np.take(arr, plan.take[1], axis=plan.take[0])
    assert not plan.box
    orth_write(data, plan.selection, arr)
    np.testing.assert_array_equal(data, [0, 20, 0, 30, 0])


def test_plan_write_without_arrays_is_direct() -> None:
    e = ix.compose(ix.full_entries((5, 4)), (5, 4), (slice(1, 4), 2))
    plan = ix.plan_write(e, row_nbytes=8)
    assert not plan.box
    assert plan.take is None
    assert plan.selection == (slice(1, 4, 1), 2)


def test_is_key_index() -> None:
    assert ix.is_key_index("a")
    assert ix.is_key_index(("a", "b"))
    assert not ix.is_key_index(())
    assert not ix.is_key_index(0)
    assert not ix.is_key_index(("a", 0))
    assert not ix.is_key_index(slice(None))


# --------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "idx"),
    [
        ((5,), 5),
        ((5,), -6),
        ((5,), [0, 5]),
        ((5,), [-6]),
        ((5,), torch.tensor([1, 7])),
        ((3, 4), (0, 4)),
        ((3, 4), (slice(None), [4])),
        ((5,), np.array([2, 99])),
    ],
    ids=repr,
)
def test_out_of_bounds(shape, idx) -> None:
    with pytest.raises(IndexError, match="out of bounds") as info:
        ix.compose(ix.full_entries(shape), shape, idx)
    assert isinstance(info.value, PtdError)


def test_out_of_bounds_is_relative_to_the_view() -> None:
    e = ix.compose(ix.full_entries((10,)), (10,), slice(2, 5))  # 3 rows, stored has 10
    with pytest.raises(IndexError, match="out of bounds"):
        ix.compose(e, (3,), 3)
    with pytest.raises(IndexError, match="out of bounds"):
        ix.compose(e, (3,), [0, 4])
    with pytest.raises(IndexError):
        ix.compose(e, (3,), -4)


@pytest.mark.parametrize(
    ("shape", "idx"),
    [
        ((5,), (0, 0)),
        ((3, 4), (0, 1, 2)),
        ((3, 4), (..., ...)),
        ((5,), (None, 5)),
        ((5,), (None, 0, 0)),
        ((5,), (None, [1], None, [2])),
        ((5,), np.array([1.5])),
        ((5,), "a"),
        ((5,), object()),
        ((3, 4), ([0, 1], [0, 1, 2])),
    ],
    # an object's repr holds its address: names that differ between runs (and xdist workers)
    ids=lambda v: "object()" if type(v) is object else repr(v),
)
def test_invalid_indices_raise_index_error(shape, idx) -> None:
    with pytest.raises(IndexError) as info:
        ix.compose(ix.full_entries(shape), shape, idx)
    assert isinstance(info.value, PtdIndexError)


def test_arrays_separated_by_a_slice_name_the_fix() -> None:
    with pytest.raises(IndexError, match="to_tensordict"):
        ix.compose(ix.full_entries((3, 4, 5)), (3, 4, 5), ([0, 1], slice(None), [0, 1]))


def test_two_dim_int_array_names_the_fix() -> None:
    with pytest.raises(IndexError, match="to_tensordict"):
        ix.compose(ix.full_entries((3, 4)), (3, 4), np.array([[0, 1], [1, 2]]))


@pytest.mark.parametrize(
    "mask", [np.array([True, False]), np.array([True, False, True, False, False, False])], ids=repr
)
def test_mask_of_wrong_length_raises(mask) -> None:
    with pytest.raises(IndexError):
        ix.compose(ix.full_entries((4, 5)), (4, 5), mask)


def test_mask_with_array_follows_numpy_or_raises() -> None:
    idx = (np.array([True, False, True, False]), [1, 2])
    expected = np.empty((4, 5, 6))[idx].shape  # (2, 6)
    try:
        e = ix.compose(ix.full_entries((4, 5, 6)), (4, 5, 6), idx)
    except IndexError as err:
        assert "to_tensordict" in str(err)
        return
    assert ix.view_shape(e) == expected


def test_int_slice_array_follows_numpy_or_raises() -> None:
    idx = (2, slice(None), [0, 1])
    expected = np.empty((4, 5, 6))[idx].shape  # (2, 5)
    try:
        e = ix.compose(ix.full_entries((4, 5, 6)), (4, 5, 6), idx)
    except IndexError as err:
        assert "to_tensordict" in str(err)
        return
    assert ix.view_shape(e) == expected


@pytest.mark.parametrize(
    ("n", "idx", "idx2"),
    [
        (5, slice(None, None, 2), slice(None)),
        (1, slice(None, None, 2), ...),
        (10, slice(1, None, 4), slice(1, None)),
        (7, slice(None, None, 3), (Ellipsis,)),
    ],
    ids=repr,
)
def test_slice_selection_is_clipped(n, idx, idx2) -> None:
    """Views of stepped slices keep the selection inside the dim (backend contract)."""
    e = ix.compose(ix.full_entries((n,)), (n,), idx)
    e = ix.compose(e, ix.view_shape(e), idx2)
    (sel,) = ix.plan_read(e, 8).selection
    assert isinstance(sel, slice)
    assert 0 <= sel.start <= sel.stop <= n


@pytest.mark.parametrize("idx", [([1, 2], ...), (0, [1, 2], ...), ([], ...)], ids=repr)
def test_array_before_ellipsis(idx) -> None:
    shape = (4, 5, 6)
    e = ix.compose(ix.full_entries(shape), shape, idx)
    expected = np.arange(120).reshape(shape)[to_numpy_index(idx)]
    assert ix.view_shape(e) == expected.shape
    np.testing.assert_array_equal(read_via_plan(np.arange(120).reshape(shape), e), expected)
