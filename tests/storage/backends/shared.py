"""What the h5 and zarr backend test modules share beyond the contract: tests that need torch
(which ``ptd.testing.backend_contract`` never imports) and the tensordict oracle's source."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from ptd.ops.dtypes import from_storage, to_storage
from ptd.storage.api import Backend, ValueKind


def arr(shape: tuple[int, ...] = (4, 3), dtype: str = "float32") -> np.ndarray:
    return np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape).astype(dtype)


class TorchDtypes:
    """Mixed into a ``BackendContract`` subclass: torch dtypes numpy has no twin of."""

    def test_bfloat16_via_to_storage(self, be: Backend) -> None:
        t = torch.tensor([[1.5, -2.0], [3.25, 0.0]], dtype=torch.bfloat16)
        data, attrs = to_storage(t)
        be.create_array(("bf",), shape=data.shape, dtype=data.dtype, data=data, attrs=attrs)
        meta = be.array_meta(("bf",))
        assert meta.torch_dtype == "bfloat16"
        assert meta.kind is ValueKind.NUMERIC
        back = from_storage(be.read(("bf",)), meta.attrs)
        assert back.dtype == torch.bfloat16
        assert torch.equal(back, t)
        row = from_storage(be.read(("bf",), (1,)), meta.attrs)
        assert torch.equal(row, t[1])


def td_source() -> tuple[Any, Any]:
    """tensordict (skipped when absent) and a TensorDict of tensors, nested tensors and
    non-tensors, as the interop tests write it."""
    td = pytest.importorskip("tensordict")
    from tensordict import NonTensorData, NonTensorStack, TensorDict

    return td, TensorDict(
        {
            "a": torch.arange(6.0).reshape(3, 2),
            "n": {"b": torch.ones(3, dtype=torch.int64)},
            "s": NonTensorData("hello"),
            "st": NonTensorStack("x", "y", "z"),
            "si": NonTensorStack(1, 2, 3),
        },
        batch_size=[3],
    )
