"""The ``with`` form of tensordict methods: ``with td.lock_():``, ``with td.permute(1, 0) as t:``.

tensordict 0.15 lets a few methods be used as context managers that undo themselves on exit:
``lock_``/``unlock_`` restore the lock state, and the shape and key ops (``permute``,
``transpose``, ``view``, ``flatten_keys``...) write what the block did to their result back into
the tensordict they were called on. ptd does the same. A method marked with :func:`last_op`
records, on the object it returns, which method made it, with what arguments and from which
object (a weak reference); ``__enter__`` remembers that record, and ``__exit__`` runs the
method's inverse (:data:`REVERSE`, one function per method name).

>>> import torch


>>> from ptd import TensorDict
>>> td = TensorDict({"a": torch.zeros(2, 3)}, batch_size=[2, 3])
>>> with td.permute(1, 0) as t:
...     t["a"] = torch.ones(3, 2)
>>> td["a"].sum().item()
6.0
>>> with td.lock_():
...     td.is_locked
True
>>> td.is_locked
False

A file-backed tensordict also closes its store on ``with p:``. It tells ``with p.unlock_():``
(undo the unlock, keep the store open) from ``with p:`` (close) by where ``__enter__`` is called:
right after the call of the recorded method in the same frame, with only the ``with``
statement's own instructions in between (:func:`entered_from_call`).
"""

from __future__ import annotations

import dis
import functools
import os
import sys
import weakref
from collections.abc import Callable
from types import CodeType, FrameType
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import torch

from ptd.ops.root import is_tensordict

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase

__all__ = [
    "REVERSE",
    "caller_site",
    "entered_from_call",
    "last_op",
    "user_stacklevel",
]

F = TypeVar("F", bound=Callable[..., Any])

#: ops that change the object they are called on when they are entered: undone on error too
_UNDO_ON_ERROR = frozenset({"lock_", "unlock_"})
_PTD_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
#: instructions a ``with`` statement runs between evaluating its expression and ``__enter__``
_WITH_SETUP = frozenset(
    {"BEFORE_WITH", "COPY", "SWAP", "LOAD_SPECIAL", "NOP", "EXTENDED_ARG", "CACHE"}
)

Site = tuple[int, CodeType, int]


def caller_site() -> Site | None:
    """``(id(frame), code, offset)`` of the first frame outside the ptd package: the user's
    call site (None when frames cannot be inspected)."""
    try:
        frame: FrameType | None = sys._getframe(1)
    except (AttributeError, ValueError):  # pragma: no cover - other interpreters
        return None
    while frame is not None and frame.f_code.co_filename.startswith(_PTD_DIR):
        frame = frame.f_back
    if frame is None:
        return None
    return id(frame), frame.f_code, frame.f_lasti


def user_stacklevel() -> int:
    """The ``stacklevel`` of ``warnings.warn`` that points at the first frame outside ptd,
    when called from the function that warns."""
    level, frame = 1, sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PTD_DIR):
        frame = frame.f_back
        level += 1
    return level


@functools.lru_cache(maxsize=256)
def _offsets(code: CodeType) -> tuple[tuple[int, str], ...]:
    return tuple((ins.offset, ins.opname) for ins in dis.get_instructions(code))


def entered_from_call(call: Site | None, enter: Site | None) -> bool:
    """True when ``enter`` (where ``__enter__`` was called from) is the ``with`` statement whose
    expression was the call at ``call``: same frame, and only with-setup instructions between."""
    if call is None or enter is None:
        return False
    if call[0] != enter[0] or call[1] is not enter[1] or enter[2] <= call[2]:
        return False
    for offset, name in _offsets(enter[1]):
        if call[2] < offset < enter[2] and name not in _WITH_SETUP:
            return False
    return True


def last_op(track: str | None = None) -> Callable[[F], F]:
    """Mark a method as usable in a ``with`` statement that undoes it on exit.

    ``track``: an attribute of the object (``"is_locked"``) the method changes; when it did not
    change, nothing is undone (``with td.lock_():`` on a locked tensordict leaves it locked).
    """

    def wrap(func: F) -> F:
        name = func.__name__

        @functools.wraps(func)
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            before = getattr(self, track) if track is not None else None
            out = func(self, *args, **kwargs)
            if out is None or not is_tensordict(out):
                return out
            changed = track is None or getattr(self, track) != before
            out._last_op = (name, args, kwargs, weakref.ref(self)) if changed else None
            out._last_call = caller_site()
            return out

        return method  # type: ignore[return-value]

    return wrap


def push_last_op(td: TensorDictBase, value: Any) -> None:
    if td._last_op_queue is None:
        td._last_op_queue = []
    td._last_op_queue.append(value)


def enter(td: TensorDictBase) -> Any:
    push_last_op(td, td._last_op)
    return td


def exit_operator(td: TensorDictBase, exc_type: Any, exc: Any, tb: Any) -> bool:
    assert td._last_op_queue is not None
    op = td._last_op_queue.pop()
    return undo(td, op, exc_type)


def undo(td: TensorDictBase, op: Any, exc_type: Any) -> bool:
    if op is None:
        return False
    name, args, kwargs, ref = op
    origin = ref()
    if exc_type is not None and issubclass(exc_type, Exception):
        if name in _UNDO_ON_ERROR and origin is not None:
            REVERSE[name](td, args, kwargs, origin)
        return False
    if origin is None and name not in _UNDO_ON_ERROR:
        return False
    REVERSE[name](td, args, kwargs, origin)
    return False


# ------------------------------------------------------------------------------ inverses
def _write_back(out: TensorDictBase, value: TensorDictBase) -> Any:
    """Write the undone result into the original: replace entries, or write into them when
    the original is locked. A file-backed original is written in place (new keys are added):
    replacing every stored array would rewrite the whole store."""
    if out.is_locked:
        return out.update_(value)
    return out.update(value, inplace=out._leaves.writes_into_entries)


def _rev_lock(res: Any, args: Any, kwargs: Any, out: Any) -> Any:
    return res.unlock_()


def _rev_unlock(res: Any, args: Any, kwargs: Any, out: Any) -> Any:
    return res.lock_()


def _rev_transpose(res: Any, args: Any, kwargs: Any, out: Any) -> Any:
    dims = [*args, *kwargs.values()]
    return _write_back(out, res.transpose(dims[0], dims[1]))


def _sep(args: Any, kwargs: Any) -> str:
    return str(args[0]) if args else str(kwargs.get("separator", "."))


def _rev_flatten_keys(res: Any, args: Any, kwargs: Any, out: Any) -> Any:
    if res is out:
        return out
    return _write_back(out, res.unflatten_keys(_sep(args, kwargs)))


def _rev_unflatten_keys(res: Any, args: Any, kwargs: Any, out: Any) -> Any:
    if res is out:
        return out
    return _write_back(out, res.flatten_keys(_sep(args, kwargs)))


def _rev_flatten(res: Any, args: Any, kwargs: Any, out: Any) -> Any:
    dim0 = args[0] if args else kwargs.get("start_dim", 0)
    dim1 = args[1] if len(args) > 1 else kwargs.get("end_dim", -1)
    if not out.ndim:
        return _write_back(out, res.squeeze(0))
    dim0 = dim0 + out.ndim if dim0 < 0 else dim0
    dim1 = dim1 + out.ndim if dim1 < 0 else dim1
    return _write_back(out, res.unflatten(dim0, out.shape[dim0 : dim1 + 1]))


def _rev_unflatten(res: Any, args: Any, kwargs: Any, out: Any) -> Any:
    dim0 = args[0] if args else kwargs.get("dim")
    sizes = args[1] if len(args) > 1 else kwargs.get("unflattened_size", kwargs.get("sizes"))
    dim0 = dim0 + out.ndim if dim0 < 0 else dim0
    return _write_back(out, res.flatten(dim0, dim0 + len(sizes) - 1))


def _rev_permute(res: Any, args: Any, kwargs: Any, out: Any) -> Any:
    if args:
        dims = list(args[0]) if len(args) == 1 and not isinstance(args[0], int) else list(args)
    else:
        dims = list(kwargs["dims"])
    dims = [d + res.ndim if d < 0 else d for d in dims]
    return _write_back(out, res.permute([int(i) for i in np.argsort(dims)]))


def _rev_movedim(res: Any, args: Any, kwargs: Any, out: Any) -> Any:
    source = args[0] if args else kwargs.get("source")
    destination = args[1] if len(args) > 1 else kwargs.get("destination")
    return _write_back(out, res.movedim(destination, source))


def _rev_self_inverse(name: str) -> Callable[..., Any]:
    def rev(res: Any, args: Any, kwargs: Any, out: Any) -> Any:
        return _write_back(out, getattr(res, name)(*args, **kwargs))

    return rev


def _rev_roll(res: Any, args: Any, kwargs: Any, out: Any) -> Any:
    shifts = args[0] if args else kwargs.get("shifts")
    dims = args[1] if len(args) > 1 else kwargs.get("dims")
    neg = -shifts if isinstance(shifts, int) else tuple(-s for s in shifts)
    return _write_back(out, res.roll(neg, dims))


def _rev_rot90(res: Any, args: Any, kwargs: Any, out: Any) -> Any:
    k = args[0] if args else kwargs.get("k", 1)
    dims = args[1] if len(args) > 1 else kwargs.get("dims", (0, 1))
    return _write_back(out, res.rot90(-k, dims))


def _rev_atleast(res: Any, args: Any, kwargs: Any, out: Any) -> Any:
    for _ in range(res.ndim - out.ndim):
        res = res.squeeze(0)
    return _write_back(out, res)


def _rev_view(res: Any, args: Any, kwargs: Any, out: Any) -> Any:
    return _write_back(out, res.view(out.shape))


def _implicit_dim(args: Any, kwargs: Any, name: str) -> int:
    if args:
        return int(args[0])
    if "dim" in kwargs:
        return int(kwargs["dim"])
    from ptd.errors import UnsupportedOperationError

    raise UnsupportedOperationError(
        f"Cannot use td.{name}() as a decorator if the dimension is implicit."
    )


def _rev_unsqueeze(res: Any, args: Any, kwargs: Any, out: Any) -> Any:
    return _write_back(out, res.squeeze(_implicit_dim(args, kwargs, "unsqueeze")))


def _rev_squeeze(res: Any, args: Any, kwargs: Any, out: Any) -> Any:
    dim = _implicit_dim(args, kwargs, "squeeze")
    if res.ndim == out.ndim:
        return out
    return _write_back(out, res.unsqueeze(dim))


def _rev_to(res: Any, args: Any, kwargs: Any, out: Any) -> Any:
    if res is out or (type(res) is type(out) and getattr(res, "_store", None) is not None):
        return res  # the same store: the block wrote through already
    restore_dtype = kwargs.get("dtype") is not None or any(
        isinstance(a, (torch.dtype, torch.Tensor)) for a in args
    )
    back = res.to_tensordict() if hasattr(res, "to_tensordict") else res
    for key in list(back.keys(True, True)):
        if key in out.keys(True, True):
            orig = out.get(key)
            value = back.get(key)
            value = value.to(device=orig.device, dtype=orig.dtype if restore_dtype else None)
            back.set(key, value)
    return _write_back(out, back)


REVERSE: dict[str, Callable[[Any, Any, Any, Any], Any]] = {
    "lock_": _rev_lock,
    "unlock_": _rev_unlock,
    "transpose": _rev_transpose,
    "swapaxes": _rev_transpose,
    "swapdims": _rev_transpose,
    "flatten_keys": _rev_flatten_keys,
    "unflatten_keys": _rev_unflatten_keys,
    "flatten": _rev_flatten,
    "unflatten": _rev_unflatten,
    "permute": _rev_permute,
    "movedim": _rev_movedim,
    "moveaxis": _rev_movedim,
    "flip": _rev_self_inverse("flip"),
    "fliplr": _rev_self_inverse("fliplr"),
    "flipud": _rev_self_inverse("flipud"),
    "roll": _rev_roll,
    "rot90": _rev_rot90,
    "atleast_1d": _rev_atleast,
    "atleast_2d": _rev_atleast,
    "atleast_3d": _rev_atleast,
    "view": _rev_view,
    "unsqueeze": _rev_unsqueeze,
    "squeeze": _rev_squeeze,
    "to": _rev_to,
}
