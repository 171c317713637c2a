"""Support for tests/containers/test_differential.py: the generated tensordicts, one builder per library
and container, and a comparison of results that looks at values, dtypes, batch sizes, keys
and exception types (not at classes: a ptd result is compared with tensordict's as data).

The same plain data builds both sides: ``tensordict.TensorDict`` / ``tensordict.
PersistentTensorDict.from_dict(...)`` (the 0.15.3 oracle) and ``ptd.TensorDict`` /
``ptd.PersistentTensorDict.from_dict(...)``, in memory, in an h5 file or in a zarr store.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

CONTAINERS = ("memory", "h5", "zarr")
SUFFIX = {"h5": ".h5", "zarr": ".zarr"}


# ------------------------------------------------------------------------------ data kinds
def _data_nested() -> tuple[dict[str, Any], list[int]]:
    g = torch.Generator().manual_seed(0)
    return {
        "a": torch.randn(4, 3, 2, generator=g),
        "b": torch.randint(-5, 6, (4, 3), generator=g),
        "n": {
            "x": torch.rand(4, 3, generator=g) + 0.5,
            "m": {"z": torch.randint(0, 2, (4, 3, 1), generator=g).bool()},
        },
    }, [4, 3]


def _data_dtypes() -> tuple[dict[str, Any], list[int]]:
    g = torch.Generator().manual_seed(1)
    base = torch.rand(4, 2, generator=g) + 0.25
    return {
        "f32": base,
        "f64": base.double() * 2,
        "f16": (base * 3).half(),
        "bf16": (base * 4).bfloat16(),
        "i32": torch.arange(8, dtype=torch.int32).reshape(4, 2),
        "i64": torch.arange(8).reshape(4, 2) - 3,
        "u8": torch.arange(8, dtype=torch.uint8).reshape(4, 2),
        "bool": torch.tensor([[True, False]] * 4),
    }, [4]


def _data_no_bf16() -> tuple[dict[str, Any], list[int]]:
    data, batch = _data_dtypes()
    del data["bf16"]
    return data, batch


def _data_float() -> tuple[dict[str, Any], list[int]]:
    g = torch.Generator().manual_seed(2)
    return {
        "a": torch.rand(4, 3, 2, generator=g) + 0.1,
        "n": {
            "x": torch.rand(4, 3, generator=g) + 0.1,
            "m": {"z": torch.rand(4, 3, 1, generator=g)},
        },
    }, [4, 3]


def _data_empty_batch() -> tuple[dict[str, Any], list[int]]:
    return {"a": torch.tensor([1.5, -2.0, 3.0]), "b": {"c": torch.arange(4).reshape(2, 2)}}, []


def _data_nontensor() -> tuple[dict[str, Any], list[int]]:
    return {"a": torch.arange(8.0).reshape(4, 2), "s": "hello", "n": {"t": "x"}}, [4]


#: data kind -> () -> (plain nested dict, batch size)
KINDS: dict[str, Callable[[], tuple[dict[str, Any], list[int]]]] = {
    "nested": _data_nested,
    "float": _data_float,
    "dtypes": _data_dtypes,
    "numeric": _data_no_bf16,
    "empty_batch": _data_empty_batch,
    "nontensor": _data_nontensor,
}


# ------------------------------------------------------------------------------ builders
@dataclass
class Lib:
    """One side of the comparison."""

    name: str  # "tensordict" or "ptd"
    TensorDict: Any
    PersistentTensorDict: Any
    TensorDictBase: Any
    NonTensorData: Any

    def is_td(self, x: Any) -> bool:
        return isinstance(x, self.TensorDictBase)

    def is_persistent(self, x: Any) -> bool:
        return isinstance(x, self.PersistentTensorDict)

    def is_non_tensor(self, x: Any) -> bool:
        return type(x).__name__ in ("NonTensorData", "NonTensorStack")


def libs() -> tuple[Lib, Lib]:
    import tensordict

    import ptd

    return (
        Lib(
            "tensordict",
            tensordict.TensorDict,
            tensordict.PersistentTensorDict,
            tensordict.TensorDictBase,
            tensordict.NonTensorData,
        ),
        Lib("ptd", ptd.TensorDict, ptd.PersistentTensorDict, ptd.TensorDictBase, ptd.NonTensorData),
    )


def _clone_plain(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _clone_plain(v) for k, v in data.items()}
    if isinstance(data, torch.Tensor):
        return data.clone()
    return data


def build(lib: Lib, kind: str, container: str, path: Path) -> Any:
    """The tensordict of ``kind`` in ``container`` (``path``: where a store goes)."""
    data, batch = KINDS[kind]()
    td = lib.TensorDict(_clone_plain(data), batch_size=batch)
    if container == "memory":
        return td
    target = str(path) + SUFFIX[container]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return lib.PersistentTensorDict.from_dict(td, target, backend=container)


# ------------------------------------------------------------------------------ arguments
@dataclass
class Ctx:
    """What an argument builder sees: the object called, its library, the plain data."""

    obj: Any
    lib: Lib
    kind: str
    tmp: Path
    data: dict[str, Any] = field(default_factory=dict)
    batch: list[int] = field(default_factory=list)

    def fresh(self, fill: float | None = None) -> Any:
        """An in-memory tensordict of the same data (``fill``: every leaf set to it)."""
        data, batch = KINDS[self.kind]()
        td = self.lib.TensorDict(_clone_plain(data), batch_size=batch)
        if fill is not None:
            td = td.apply(lambda t: torch.full_like(t, fill))
        return td


class A:
    """An argument computed per side: ``A(lambda ctx: ...)``."""

    def __init__(self, fn: Callable[[Ctx], Any], label: str = "") -> None:
        self.fn, self.label = fn, label

    def __repr__(self) -> str:
        return self.label or "A(...)"


def mask(ctx: Ctx) -> torch.Tensor:
    n = max(1, math.prod(ctx.batch))
    return (torch.arange(n) % 3 != 1).reshape(ctx.batch) if ctx.batch else torch.tensor(True)


MASK = A(mask, "MASK")
OTHER = A(lambda c: c.fresh(), "OTHER")
ONES = A(lambda c: c.fresh(1.0), "ONES")
SELF = A(lambda c: c.obj, "SELF")
TMPFILE = A(lambda c: str(c.tmp / f"out-{c.lib.name}.h5"), "TMPFILE")
TMPZARR = A(lambda c: str(c.tmp / f"out-{c.lib.name}.zarr"), "TMPZARR")
BATCH = A(lambda c: list(c.batch), "BATCH")


def resolve(value: Any, ctx: Ctx) -> Any:
    if isinstance(value, A):
        return value.fn(ctx)
    if isinstance(value, tuple):
        return tuple(resolve(v, ctx) for v in value)
    if isinstance(value, list):
        return [resolve(v, ctx) for v in value]
    if isinstance(value, dict):
        return {k: resolve(v, ctx) for k, v in value.items()}
    return value


# ------------------------------------------------------------------------------ normalising
_BUILTIN_ERRORS = (
    KeyError,
    IndexError,
    NotImplementedError,
    RuntimeError,
    TypeError,
    ValueError,
    AttributeError,
    PermissionError,
    FileNotFoundError,
    OSError,
)


def builtin_error(exc: BaseException) -> type[BaseException]:
    """The builtin exception class a caller would catch ``exc`` as (its first builtin base)."""
    for k in type(exc).__mro__:
        if k in _BUILTIN_ERRORS:
            return k
    return type(exc)


@dataclass
class Raised:
    exc: BaseException

    def __repr__(self) -> str:
        return f"raises {type(self.exc).__name__}: {str(self.exc)[:160]}"


@dataclass
class Outcome:
    result: Any  # normalised result, or Raised
    is_self: bool = False
    after: Any = None  # normalised object after the call (mutating cases)
    warnings: tuple[str, ...] = ()


def normalize(x: Any, lib: Lib, depth: int = 0) -> Any:
    """A comparable, library-free picture of ``x``."""
    if lib.is_non_tensor(x):
        data = x.tolist() if hasattr(x, "tolist") else x.data
        return ("nontensor", _plain(data))
    if lib.is_td(x):
        entries = {}
        for key in sorted(x.keys(), key=str):
            entries[key] = normalize(x.get(key), lib, depth + 1)
        return ("td", tuple(x.batch_size), entries)
    if isinstance(x, torch.Tensor):
        return ("tensor", x.dtype, tuple(x.shape), x.detach().cpu())
    if isinstance(x, np.ndarray):
        return ("ndarray", str(x.dtype), x.shape, x)
    if isinstance(x, type):  # entry_class and the like: compared by name
        return ("class", x.__name__)
    if isinstance(x, torch.Size):
        return ("size", tuple(x))
    if isinstance(x, (list, tuple)):
        tag = type(x).__name__ if type(x) in (list, tuple) else "namedtuple"
        if tag == "namedtuple":
            return (tag, tuple(getattr(x, "_fields", ())), [normalize(v, lib) for v in x])
        return (tag, [normalize(v, lib, depth) for v in x])
    if isinstance(x, dict):
        return ("dict", {k: normalize(v, lib, depth) for k, v in x.items()})
    if isinstance(x, (bool, int, float, str, bytes, type(None), torch.dtype, torch.device)):
        return _plain(x)
    if "Keys" in type(x).__name__:  # a keys view: the keys, in any order
        return ("keys", sorted(map(str, x)))
    if hasattr(x, "__iter__") and hasattr(x, "__next__"):  # a generator or iterator
        return ("list", [normalize(v, lib, depth) for v in x])
    return ("object", type(x).__name__)


def _plain(x: Any) -> Any:
    if isinstance(x, bytes):
        return ("bytes", x)
    if isinstance(x, torch.device):
        return ("device", x.type)
    return x


def call(case: Any, lib: Lib, ctx: Ctx, mutating: bool) -> Outcome:
    obj = ctx.obj
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            args = resolve(case.args, ctx)
            kwargs = resolve(case.kwargs, ctx)
            result = case.invoke(ctx, args, kwargs)
        except Exception as exc:  # noqa: BLE001 - the exception is the result compared
            out = Outcome(Raised(exc))
        else:
            try:
                out = Outcome(normalize(result, lib), is_self=result is obj)
            except Exception as exc:  # noqa: BLE001 - reading the result failed
                out = Outcome(Raised(exc))
        if mutating:
            try:
                out.after = normalize(obj, lib)
            except Exception as exc:  # noqa: BLE001
                out.after = Raised(exc)
    out.warnings = tuple(sorted({w.category.__name__ for w in caught}))
    return out


# ------------------------------------------------------------------------------ comparing
def assert_same(expected: Any, actual: Any, where: str = "result") -> None:
    """``actual`` (ptd) matches ``expected`` (tensordict), or AssertionError says where not."""
    if isinstance(expected, Raised) or isinstance(actual, Raised):
        if not (isinstance(expected, Raised) and isinstance(actual, Raised)):
            raise AssertionError(f"{where}: tensordict {expected!r}, ptd {actual!r}")
        want = builtin_error(expected.exc)
        if not isinstance(actual.exc, want):
            raise AssertionError(
                f"{where}: tensordict raises {type(expected.exc).__name__} ({want.__name__}), "
                f"ptd raises {type(actual.exc).__name__}: {actual.exc}"
            )
        return
    if isinstance(expected, tuple) and expected and expected[0] == "tensor":
        if not (isinstance(actual, tuple) and actual and actual[0] == "tensor"):
            raise AssertionError(f"{where}: tensordict gives a tensor, ptd {_short(actual)}")
        _, dt, shape, t = expected
        _, dt2, shape2, t2 = actual
        if (dt, shape) != (dt2, shape2):
            raise AssertionError(f"{where}: tensordict {dt}{list(shape)}, ptd {dt2}{list(shape2)}")
        torch.testing.assert_close(t2, t, equal_nan=True, rtol=1e-3, atol=1e-5, msg=where)
        return
    if isinstance(expected, tuple) and expected and expected[0] == "td":
        if not (isinstance(actual, tuple) and actual and actual[0] == "td"):
            raise AssertionError(f"{where}: tensordict gives a tensordict, ptd {_short(actual)}")
        if expected[1] != actual[1]:
            raise AssertionError(f"{where}: batch size {list(expected[1])} vs {list(actual[1])}")
        if set(expected[2]) != set(actual[2]):
            raise AssertionError(f"{where}: keys {sorted(expected[2])} vs ptd {sorted(actual[2])}")
        for k in expected[2]:
            assert_same(expected[2][k], actual[2][k], f"{where}[{k!r}]")
        return
    if isinstance(expected, tuple) and expected and expected[0] in ("tuple", "list", "namedtuple"):
        if not (isinstance(actual, tuple) and actual and actual[0] == expected[0]):
            raise AssertionError(f"{where}: tensordict {expected[0]}, ptd {_short(actual)}")
        e_items, a_items = expected[-1], actual[-1]
        if len(e_items) != len(a_items):
            raise AssertionError(f"{where}: {len(e_items)} items vs ptd {len(a_items)}")
        for i, (e, a) in enumerate(zip(e_items, a_items, strict=True)):
            assert_same(e, a, f"{where}[{i}]")
        return
    if isinstance(expected, tuple) and expected and expected[0] == "dict":
        if not (isinstance(actual, tuple) and actual and actual[0] == "dict"):
            raise AssertionError(f"{where}: tensordict dict, ptd {_short(actual)}")
        if set(expected[1]) != set(actual[1]):
            raise AssertionError(f"{where}: keys {sorted(expected[1])} vs {sorted(actual[1])}")
        for k in expected[1]:
            assert_same(expected[1][k], actual[1][k], f"{where}[{k!r}]")
        return
    if isinstance(expected, tuple) and expected and expected[0] == "ndarray":
        if not (isinstance(actual, tuple) and actual and actual[0] == "ndarray"):
            raise AssertionError(f"{where}: tensordict ndarray, ptd {_short(actual)}")
        if expected[1:3] != actual[1:3]:
            raise AssertionError(f"{where}: {expected[1:3]} vs {actual[1:3]}")
        e_arr, a_arr = expected[3], actual[3]
        if e_arr.dtype.names:  # a structured array: field by field
            for name in e_arr.dtype.names:
                np.testing.assert_allclose(a_arr[name], e_arr[name], rtol=1e-3, err_msg=where)
            return
        np.testing.assert_allclose(a_arr, e_arr, rtol=1e-3, err_msg=where)
        return
    if isinstance(expected, float) and isinstance(actual, float):
        if not (math.isclose(expected, actual, rel_tol=1e-4) or expected == actual):
            raise AssertionError(f"{where}: {expected} vs ptd {actual}")
        return
    if expected != actual:
        raise AssertionError(f"{where}: tensordict {_short(expected)}, ptd {_short(actual)}")


def _short(x: Any) -> str:
    return repr(x)[:200]


def assert_outcomes(expected: Outcome, actual: Outcome) -> None:
    assert_same(expected.result, actual.result, "result")
    if not isinstance(expected.result, Raised) and expected.is_self != actual.is_self:
        raise AssertionError(f"result is self: tensordict {expected.is_self}, ptd {actual.is_self}")
    if expected.after is not None:
        assert_same(expected.after, actual.after, "tensordict after the call")
