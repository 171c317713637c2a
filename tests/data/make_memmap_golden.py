"""Write ``tests/data/memmap_td015/``: a memmap directory saved by tensordict 0.15.3.

Run from the repository root, in an environment with ``tensordict==0.15.3`` installed::

    python tests/data/make_memmap_golden.py

It replaces the directory. ``expected()`` (torch only) is what the directory holds; the tests
import it to check ptd's loader without tensordict.
"""

from __future__ import annotations

import os
import shutil
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "memmap_td015")

#: every dtype the golden directory holds, by key
DTYPES = {
    "bool": torch.bool,
    "u8": torch.uint8,
    "u16": torch.uint16,
    "u32": torch.uint32,
    "u64": torch.uint64,
    "i8": torch.int8,
    "i16": torch.int16,
    "i32": torch.int32,
    "i64": torch.int64,
    "f16": torch.float16,
    "f32": torch.float32,
    "f64": torch.float64,
    "bf16": torch.bfloat16,
    "c64": torch.complex64,
    "c128": torch.complex128,
    "f8": torch.float8_e4m3fn,
}


def _values(dtype: torch.dtype) -> torch.Tensor:
    """A [2, 3] tensor of ``dtype`` with distinct small values."""
    base = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    if dtype == torch.bool:
        return base.remainder(2) == 1
    if dtype.is_complex:
        return torch.complex(base, -base).to(dtype)
    if dtype.is_floating_point:
        return (base / 4 - 0.5).to(dtype)
    if dtype in (torch.int8, torch.int16, torch.int32, torch.int64):
        return (base - 3).to(torch.int64).to(dtype)
    return (base * 7).to(torch.int64).to(dtype)


def expected() -> dict:
    """The content of the golden directory as a nested dict (batch size [2], names ["row"])."""
    leaves = {key: _values(dt) for key, dt in DTYPES.items()}
    return {
        **leaves,
        "empty": torch.zeros(2, 0),
        "scalar": torch.tensor([1.5, -2.5]),
        "sp ace/x": torch.tensor([10, 20]),
        "nested": {
            "deep": {"v": torch.tensor([[1, 2], [3, 4]], dtype=torch.int32)},
            "w": torch.tensor([0.25, 0.75]),
        },
        "text": "hello memmap",
        "number": 42,
        "mapping": {"k": [1, 2], "s": "v"},
        "stack": ["first", "second"],
        "raw": b"\x00bytes",
    }


def main() -> None:
    import tensordict
    from tensordict import NonTensorData, NonTensorStack, TensorDict  # the oracle

    if tensordict.__version__ != "0.15.3":
        sys.exit(f"tensordict 0.15.3 is required, found {tensordict.__version__}")
    exp = expected()
    td = TensorDict({}, batch_size=[2], names=["row"])
    for key, value in exp.items():
        if key in ("text", "number", "mapping", "raw"):
            td[key] = NonTensorData(value, batch_size=[2])
        elif key == "stack":
            td[key] = NonTensorStack(*value)
        elif key == "nested":
            td[key] = TensorDict(value, batch_size=[2])
        else:
            td[key] = value
    shutil.rmtree(OUT, ignore_errors=True)
    td.memmap(OUT)
    print(f"wrote {OUT} with tensordict {tensordict.__version__}, torch {torch.__version__}")


if __name__ == "__main__":
    main()
