"""Batch-shape operations of ptd.TensorDict and ptd.PersistentTensorDict against tensordict
0.15.3: results (values, dtypes, batch sizes) or the builtin error type must agree."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch

import ptd
from oracle import KINDS, check, pair, persistent_pair, run_both
from ptd.errors import UnsupportedOperationError


def _grid(t: Any) -> torch.Tensor:
    return torch.arange(math.prod(t.batch_size)).reshape(t.batch_size)


# name -> call; each is run on every sample kind (1-d, 2-d, 3-d batch and an empty batch)
SHAPE_OPS: dict[str, Callable[[Any], Any]] = {
    "movedim": lambda t: t.movedim(0, -1),
    "movedim_seq": lambda t: t.movedim((0, 1), (1, 0)),
    "moveaxis": lambda t: t.moveaxis(-1, 0),
    "movedim_bad": lambda t: t.movedim(0, 5),
    "swapaxes": lambda t: t.swapaxes(0, -1),
    "swapdims": lambda t: t.swapdims(0, -1),
    "flip": lambda t: t.flip(0),
    "flip_seq": lambda t: t.flip((0, -1)),
    "flip_bad": lambda t: t.flip(7),
    "fliplr": lambda t: t.fliplr(),
    "flipud": lambda t: t.flipud(),
    "roll": lambda t: t.roll(1, 0),
    "roll_seq": lambda t: t.roll((1, 2), (0, -1)),
    "roll_flat": lambda t: t.roll(2),
    "rot90": lambda t: t.rot90(),
    "rot90_k2": lambda t: t.rot90(2, (0, -1)),
    "narrow": lambda t: t.narrow(0, 1, 1),
    "narrow_last": lambda t: t.narrow(-1, 0, 2),
    "narrow_bad": lambda t: t.narrow(0, 2, 50),
    "tile": lambda t: t.tile((2,)),
    "tile_more": lambda t: t.tile((2, 1, 1, 1)),
    "repeat": lambda t: t.repeat(*([2] + [1] * (t.ndim - 1))),
    "repeat_size": lambda t: t.repeat(torch.Size([1] * t.ndim)),
    "repeat_bad": lambda t: t.repeat(2, 2, 2, 2, 2),
    "repeat_interleave": lambda t: t.repeat_interleave(2, dim=0),
    "repeat_interleave_last": lambda t: t.repeat_interleave(3, dim=-1),
    "repeat_interleave_flat": lambda t: t.repeat_interleave(2),
    "expand": lambda t: t.expand(2, *t.batch_size),
    "expand_m1": lambda t: t.expand(2, *([-1] * t.ndim)),
    "expand_as_tensor": lambda t: t.expand_as(torch.zeros(3, *t.batch_size)),
    "broadcast_to": lambda t: t.broadcast_to((2, *t.batch_size)),
    "atleast_1d": lambda t: t.atleast_1d(),
    "atleast_2d": lambda t: t.atleast_2d(),
    "atleast_3d": lambda t: t.atleast_3d(),
    "flatten": lambda t: t.flatten(0, -1),
    "flatten_bad": lambda t: t.flatten(-1, 0),
    "unflatten": lambda t: t.unflatten(0, (1, t.batch_size[0])),
    "squeeze": lambda t: t.unsqueeze(0).squeeze(0),
    "squeeze_none": lambda t: t.unsqueeze(1).squeeze(),
    "unsqueeze": lambda t: t.unsqueeze(-1),
    "unsqueeze_bad": lambda t: t.unsqueeze(9),
    "view_dtype_float": lambda t: t.select("f", ("n", "x")).view(torch.int32),
    "view": lambda t: t.view(-1),
    "view_size": lambda t: t.view(size=(-1,)),
    "view_same": lambda t: t.view(t.batch_size),
    "view_bad": lambda t: t.view(t.numel() + 1),
    "view_dtype_kw": lambda t: t.view(dtype=torch.int32),
    "view_dtype_bs": lambda t: t.select("f", ("n", "x")).view(torch.int32, batch_size=[]),
    "view_dtype_bs_bad": lambda t: t.select("f").view(torch.int32, batch_size=[7]),
    "reshape": lambda t: t.reshape(-1),
    "reshape_seq": lambda t: t.reshape([1, -1]),
    "reshape_size": lambda t: t.reshape(size=(-1,)),
    "reshape_same": lambda t: t.reshape(*t.batch_size),
    "reshape_bad": lambda t: t.reshape(t.numel() + 1),
    "reshape_two_free": lambda t: t.reshape(-1, -1),
    "reshape_negative": lambda t: t.reshape(-2),
    "reshape_float": lambda t: t.reshape(2.0),
    "reshape_kw_bad": lambda t: t.reshape(shape=(-1,)),
    "reshape_both": lambda t: t.reshape(-1, size=(-1,)),
    "permute": lambda t: t.permute(*reversed(range(t.ndim))),
    "transpose": lambda t: t.transpose(0, -1),
    "tensor_split_n": lambda t: t.tensor_split(2),
    "tensor_split_idx": lambda t: t.tensor_split([1, -1], dim=0),
    "tensor_split_tensor": lambda t: t.tensor_split(torch.tensor([1]), dim=-1),
    "split": lambda t: t.split(2, 0),
    "split_sizes_bad": lambda t: t.split([1, 1], 0),
    "chunk": lambda t: t.chunk(2, -1),
    "unbind": lambda t: t.unbind(-1),
    "gather": lambda t: t.gather(0, torch.zeros(2, *t.batch_size[1:], dtype=torch.long)),
    "gather_bad": lambda t: t.gather(t.ndim, torch.zeros(t.batch_size, dtype=torch.long)),
    "masked_select": lambda t: t.masked_select(_grid(t) % 2 == 0),
    "pad": lambda t: t.pad([1, 2]),
    "pad_value": lambda t: t.pad([0, 1] * t.ndim, value=1),
    "pad_odd": lambda t: t.pad([1]),
    "pad_too_long": lambda t: t.pad([1] * 10),
    "where_scalar": lambda t: t.where(_grid(t) % 2 == 0, 0),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", sorted(SHAPE_OPS))
def test_shape_op_matches_tensordict(name: str, kind: str) -> None:
    mine, theirs = pair(kind)
    check(SHAPE_OPS[name], mine, theirs, f"{name}({kind})")


#: what tensordict's PersistentTensorDict refuses (RuntimeError) and ptd refuses too
REFUSED_ON_FILE = {
    "movedim",
    "movedim_seq",
    "moveaxis",
    "swapaxes",
    "swapdims",
    "permute",
    "transpose",
    "unsqueeze",
    "atleast_3d",
    "view",
    "view_size",
    "view_bad",
}
#: tensordict's PersistentTensorDict fails on these (NotImplementedError from its sub-tensordict,
#: on some calls only); ptd reads the rows asked and is compared with the in-memory result
ORACLE_FAILS_ON_FILE = {"masked_select"}


#: these first call unsqueeze/select, which a file-backed tensordict refuses in both libraries
NEEDS_A_REFUSED_OP = {
    "squeeze",
    "squeeze_none",
    "view_dtype_float",
    "view_dtype_bs",
    "view_dtype_bs_bad",
}


@pytest.mark.parametrize("name", sorted(set(SHAPE_OPS) - NEEDS_A_REFUSED_OP))
def test_shape_op_on_persistent_matches_tensordict(tmp_path, backend, name: str) -> None:
    mine, theirs = persistent_pair("2d", tmp_path, backend)
    try:
        if name in REFUSED_ON_FILE:
            with pytest.raises(RuntimeError):
                SHAPE_OPS[name](theirs)
            with pytest.raises(RuntimeError, match="PersistentTensorDict"):
                SHAPE_OPS[name](mine)
            return
        oracle = theirs.to_tensordict() if name in ORACLE_FAILS_ON_FILE else theirs
        check(SHAPE_OPS[name], mine, oracle, f"{name}(persistent {backend})")
    finally:
        mine.close()
        theirs.close()


def test_shape_ops_keep_non_tensor_entries() -> None:
    mine, theirs = pair("2d", s="hello")
    for name in ("flip", "roll", "repeat", "tile", "narrow", "gather", "movedim", "expand"):
        check(SHAPE_OPS[name], mine, theirs, name)
        assert SHAPE_OPS[name](mine)["s"] == "hello"


def test_roll_inplace_writes_into_the_tensordict(tmp_path, backend) -> None:
    td, _ = pair("2d")
    expected = td["f"].roll(1, 0)
    assert td.roll(1, 0, inplace=True) is td
    assert torch.equal(td["f"], expected)
    p, other = persistent_pair("2d", tmp_path, backend)
    other.close()
    p.roll(1, 0, inplace=True)
    assert torch.equal(p["f"], expected)
    p.close()


def test_view_dtype_on_a_file_returns_an_in_memory_copy(tmp_path, backend) -> None:
    p = ptd.PersistentTensorDict.from_dict(
        {"a": torch.ones(4, 2)},
        tmp_path / f"v{'.h5' if backend == 'h5' else '.zarr'}",
        backend=backend,
        batch_size=[4],
    )
    out = p.view(torch.int32)
    assert type(out) is ptd.TensorDict
    assert torch.equal(out["a"], torch.ones(4, 2).view(torch.int32))
    assert type(p.view(torch.int32, batch_size=[])) is ptd.TensorDict
    assert p.view(torch.int32, batch_size=[]).batch_size == torch.Size([])
    with pytest.raises(RuntimeError, match="batch dimension mismatch"):
        p.view(torch.int32, batch_size=[5])
    assert p.view(4) is p
    assert p.view(size=[4]) is p
    assert p.view(-1) is p
    for bad in ((2, 2), (5,), ()):
        with pytest.raises(UnsupportedOperationError, match="reshape"):
            p.view(*bad)
    p.close()


def test_reshape_on_a_file_returns_an_in_memory_copy(tmp_path, backend) -> None:
    p, theirs = persistent_pair("2d", tmp_path, backend)
    theirs.close()
    assert p.reshape(4, 3) is p
    assert p.reshape(size=(4, -1)) is p
    out = p.reshape(2, -1)
    assert type(out) is ptd.TensorDict
    assert out.batch_size == torch.Size([2, 6])
    assert type(out["n"]) is ptd.TensorDict
    assert out["n", "m", "y"].shape == (2, 6, 2)
    out["f"].zero_()
    assert p["f"].abs().sum() > 0  # the file is not touched
    with pytest.raises(NotImplementedError, match="to_tensordict"):
        p.reshape(-1, inplace=True)
    assert p.reshape(4, 3, inplace=True) is p  # nothing to change
    with pytest.raises(RuntimeError, match="invalid shape"):
        p.reshape(5)
    p.close()


#: shape ops whose result is locked when the tensordict is (tensordict's lock propagation)
LOCK_OPS = [
    "reshape",
    "reshape_same",
    "view",
    "view_same",
    "flatten",
    "unflatten",
    "permute",
    "transpose",
    "unsqueeze",
    "squeeze",
    "expand",
    "flip",
    "narrow",
    "roll",
    "repeat",
    "tile",
    "movedim",
    "rot90",
    "atleast_3d",
    "split",
    "chunk",
    "tensor_split_n",
    "tensor_split_idx",
    "unbind",
    "pad",
    "gather",
    "masked_select",
]


@pytest.mark.parametrize("name", LOCK_OPS)
def test_shape_op_results_are_locked_as_in_tensordict(name: str) -> None:
    mine, theirs = pair("2d")
    mine.lock_()
    theirs.lock_()
    got, expected = run_both(SHAPE_OPS[name], mine, theirs)
    if isinstance(expected, tuple):
        got, expected = got[0], expected[0]
    assert got.is_locked == expected.is_locked, f"{name}: locked {got.is_locked}"
    assert got["n"].is_locked == expected["n"].is_locked, f"{name}: nested locked"


def test_reshape_inplace_keeps_the_object() -> None:
    td, _ = pair("2d")
    nested = td["n"]
    assert td.reshape(-1, inplace=True) is td
    assert td.batch_size == torch.Size([12])
    assert td["n"] is nested
    assert td["n", "m", "y"].shape == (12, 2)
    td.lock_()
    with pytest.raises(RuntimeError, match="locked"):
        td.reshape(3, 4, inplace=True)


def test_shape_op_results_do_not_share_a_file(tmp_path, backend) -> None:
    mine, theirs = persistent_pair("1d", tmp_path, backend)
    theirs.close()
    flipped = mine.flip(0)
    assert type(flipped) is ptd.TensorDict
    flipped["f"].zero_()
    assert mine["f"].abs().sum() > 0  # the file was not touched
    mine.close()


INPLACE_OPS: dict[str, Callable[[Any], Any]] = {
    "repeat": lambda t: t.repeat(*([2] + [1] * (t.ndim - 1)), inplace=True),
    "repeat_interleave": lambda t: t.repeat_interleave(2, dim=0, inplace=True),
    "gather": lambda t: t.gather(
        0, torch.zeros(2, *t.batch_size[1:], dtype=torch.long), inplace=True
    ),
    "masked_select": lambda t: t.masked_select(_grid(t) % 2 == 0, inplace=True),
    "pad": lambda t: t.pad([1, 0], inplace=True),
}


@pytest.mark.parametrize("name", sorted(INPLACE_OPS))
def test_inplace_shape_ops_keep_the_object_and_its_nested_tensordicts(name: str) -> None:
    mine, theirs = pair("2d", s="text")
    nested = mine.get("n")
    out = INPLACE_OPS[name](mine)
    assert out is mine
    assert mine.get("n") is nested
    assert mine["s"] == "text"
    check(lambda t: t, mine, INPLACE_OPS[name](theirs), name)
    locked, _ = pair("2d")
    locked.lock_()
    with pytest.raises(RuntimeError):
        INPLACE_OPS[name](locked)


@pytest.mark.parametrize("name", sorted(INPLACE_OPS))
def test_inplace_shape_ops_are_refused_on_a_file(tmp_path, backend, name: str) -> None:
    mine, theirs = persistent_pair("2d", tmp_path, backend)
    with pytest.raises(NotImplementedError):
        INPLACE_OPS[name](theirs)
    with pytest.raises(NotImplementedError, match="to_tensordict"):
        INPLACE_OPS[name](mine)
    assert list(mine.batch_size) == [4, 3]
    mine.close()
    theirs.close()
