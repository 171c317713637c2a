"""Write the HDF5 / Zarr goldens under ``tests/data/``.

Two kinds, each for both formats:

* ``td015.h5`` and ``td015.zarr/``: written by **tensordict 0.15.3** with
  ``PersistentTensorDict.from_dict`` (its own layout and attributes: ``__tensordict_str__``,
  ``__tensordict_stack__``, zarr's ``__tensordict__`` group attribute, JSON/pickle payloads and
  consolidated metadata);
* ``plain_h5py.h5`` and ``plain_zarr.zarr/``: written by **plain h5py / zarr**, with no attribute
  at all, as another tool would write them (vlen and fixed-length string columns, a scalar
  string, nested groups, chunked+gzip datasets, a big-endian array...).

Run from the repository root::

    pip install tensordict==0.15.3      # only for the td015 goldens
    python tests/data/make_store_goldens.py          # all four
    python tests/data/make_store_goldens.py plain    # only the plain ones (no tensordict needed)

It replaces the files. ``expected_td015(backend)`` and ``expected_plain()`` (torch/numpy only)
give what the files hold; ``tests/format/test_format.py`` reads them with ptd, without tensordict.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
TD015 = {"h5": os.path.join(HERE, "td015.h5"), "zarr": os.path.join(HERE, "td015.zarr")}
PLAIN = {"h5": os.path.join(HERE, "plain_h5py.h5"), "zarr": os.path.join(HERE, "plain_zarr.zarr")}

#: every torch dtype that both tensordict 0.15 and ptd store, by key
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
    "c64": torch.complex64,
    "c128": torch.complex128,
}


def dtype_values(dtype: torch.dtype) -> torch.Tensor:
    """A [3] tensor of ``dtype`` whose values use the sign bit, fractions or the top bit."""
    if dtype == torch.bool:
        return torch.tensor([True, False, True])
    if dtype.is_complex:
        return torch.tensor([1.5 - 2j, -0.25 + 0j, 3 + 4.5j], dtype=dtype)
    if dtype.is_floating_point:
        return torch.tensor(
            [-1.5, 0.0078125, 65504.0 if dtype == torch.float16 else 1e30], dtype=dtype
        )
    if dtype == torch.uint64:
        return torch.tensor([0, 1, 2**64 - 1], dtype=torch.uint64)
    if dtype in (torch.uint8, torch.uint16, torch.uint32):
        return torch.tensor([0, 7, torch.iinfo(dtype).max], dtype=dtype)
    info = torch.iinfo(dtype)
    return torch.tensor([info.min, -1, info.max], dtype=dtype)


def expected_td015(backend: str) -> dict[str, Any]:
    """What ``td015.<backend>`` holds (batch size [3]; zarr also records names ``["row"]``).

    Non-tensors are given as the python value that was stored (tensordict's NonTensorData for a
    single value, NonTensorStack for lists under ``"names"``, ``"counts"`` and ``"mixed"``).
    """
    out: dict[str, Any] = {key: dtype_values(dt) for key, dt in DTYPES.items()}
    out["nested"] = {
        "v": torch.arange(6, dtype=torch.int32).reshape(3, 2),
        "deep": {"w": torch.tensor([[0.5, -0.5], [1.0, -1.0], [2.0, -2.0]])},
    }
    out["text"] = "héllo wörld"
    out["names"] = ["ann", "bob", "cy"]
    out["counts"] = [10, 20, 30]
    out["raw"] = b"\x00\x01raw"
    out["num"] = 7
    if backend == "zarr":
        out["meta"] = {"k": [1, 2], "s": "v"}
        out["none"] = None
        out["mixed"] = [{"a": 1}, [2], "x"]
    return out


def expected_plain() -> dict[str, Any]:
    """What the plain h5py / zarr files hold (batch size [4] when inferred). Strings are
    given as ``str``; h5 returns them as ``bytes`` (encoded as UTF-8)."""
    return {
        "x": np.arange(12, dtype=np.float32).reshape(4, 3) / 4,
        "ids": np.array([3, 1, 4, 1], dtype=np.int64),
        "labels": ["alpha", "βeta", "gamma", "delta"],
        "codes": ["AB", "C", "DEF", "G"],  # h5: fixed-length S3; zarr: not present
        "title": "a plain file",
        "big_endian": np.array([1.5, -2.0, 3.25, 0.0]),  # h5 only: stored as >f8
        "sensors": {
            "temp": np.array([[20.5, 21.0], [19.0, 18.5], [22.0, 23.5], [17.0, 16.0]]),
            "sub": {"flag": (np.arange(40).reshape(4, 2, 5) % 3 == 0)},
        },
    }


def write_td015() -> None:
    import tensordict
    from tensordict import NonTensorData, NonTensorStack, PersistentTensorDict, TensorDict

    if tensordict.__version__ != "0.15.3":
        sys.exit(f"tensordict 0.15.3 is required, found {tensordict.__version__}")
    for backend, path in TD015.items():
        exp = expected_td015(backend)
        td = TensorDict({}, batch_size=[3], names=["row"] if backend == "zarr" else None)
        for key, value in exp.items():
            if key in ("names", "counts", "mixed"):
                td[key] = NonTensorStack(*value)
            elif key == "nested":
                deep = TensorDict(value["deep"], batch_size=[3, 2])
                td[key] = TensorDict({"v": value["v"], "deep": deep}, batch_size=[3, 2])
            elif isinstance(value, torch.Tensor):
                td[key] = value
            else:
                td[key] = NonTensorData(value)
        _remove(path)
        PersistentTensorDict.from_dict(td, filename=path, backend=backend).close()
    print(
        f"wrote td015 goldens with tensordict {tensordict.__version__}, torch {torch.__version__}"
    )


def write_plain() -> None:
    import h5py
    import zarr

    exp = expected_plain()
    _remove(PLAIN["h5"])
    with h5py.File(PLAIN["h5"], "w") as f:
        f["x"] = exp["x"]
        f.create_dataset("ids", data=exp["ids"], chunks=(2,), compression="gzip", shuffle=True)
        f.create_dataset("labels", data=np.array(exp["labels"], dtype=h5py.string_dtype()))
        f["codes"] = np.array([s.encode() for s in exp["codes"]], dtype="S3")
        f["title"] = exp["title"]  # a scalar vlen UTF-8 string
        f["big_endian"] = exp["big_endian"].astype(">f8")
        g = f.create_group("sensors")
        g.create_dataset("temp", data=exp["sensors"]["temp"], chunks=(2, 2), compression="gzip")
        g.create_group("sub")["flag"] = exp["sensors"]["sub"]["flag"]
    _remove(PLAIN["zarr"])
    root = zarr.open_group(PLAIN["zarr"], mode="w")
    root.create_array("x", data=exp["x"])
    root.create_array("ids", data=exp["ids"], chunks=(2,))
    labels = root.create_array("labels", shape=(4,), dtype=str)
    labels[...] = np.array(exp["labels"])
    title = root.create_array("title", shape=(), dtype=str)
    title[...] = exp["title"]
    sensors = root.create_group("sensors")
    sensors.create_array("temp", data=exp["sensors"]["temp"], chunks=(2, 2))
    sensors.create_group("sub").create_array("flag", data=exp["sensors"]["sub"]["flag"])
    print(f"wrote plain goldens with h5py {h5py.__version__}, zarr {zarr.__version__}")


def _remove(path: str) -> None:
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)


def main(argv: list[str]) -> None:
    which = argv[1] if len(argv) > 1 else "all"
    if which in ("all", "plain"):
        write_plain()
    if which in ("all", "td015"):
        write_td015()


if __name__ == "__main__":
    main(sys.argv)
