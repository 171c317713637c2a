"""Non-tensor payloads: the JSON-or-pickle encoding and the ``allow_pickle`` policy.

Pure python (no h5py/zarr import), shared by the zarr backend and the memmap format.

A value is stored as JSON when ``json.dumps`` (stdlib defaults) gives text that ``json.loads``
turns back into an equal value, and as a pickle otherwise (tensordict 0.15's rule)::

    >>> encode_payload({"k": [1, 2]})
    (b'{"k": [1, 2]}', 'json')
    >>> encode_payload((1, 2))[1]
    'pickle'
    >>> decode_payload(b'"hi"', "json", allow_pickle=False, key="s", location="x.zarr")
    'hi'

Decoding a pickle follows the ``allow_pickle`` policy: ``True`` decodes; ``False`` and ``None``
(the default, where tensordict 0.15 decodes with a ``FutureWarning``) raise
:class:`~ptd.errors.PickleRefusedError` before a single byte is unpickled. Unpickling runs
whatever code the file holds, so a file never decides it: :func:`refuse_pickle` is the one
check, and :func:`decode_payload` the one place in ptd that calls ``pickle.loads``.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ptd.errors import Option, PickleRefusedError, PtdTypeError, PtdValueError
from ptd.format.names import ENCODING_JSON, ENCODING_PICKLE

__all__ = [
    "all_of_type",
    "check_allow_pickle",
    "decode_payload",
    "encode_json",
    "encode_payload",
    "has_nested_shape",
    "nested_to_array",
    "parse_stack_shape",
    "refuse_pickle",
    "select_nested",
    "string_stack_shape",
]

#: what a refused pickle is, per source format
_WHAT = {
    "zarr": "a pickled non-tensor entry",
    "memmap": "a pickled non-tensor field of a memory-mapped TensorDict",
    "codec": "its codecs include numcodecs' pickle codec",
}


def encode_json(value: Any) -> str | None:
    """``json.dumps(value)`` when it round-trips to an equal value, else None."""
    try:
        text = json.dumps(value)
        if json.loads(text) == value:
            return text
    except (TypeError, ValueError, RecursionError):
        pass
    return None


def encode_payload(value: Any) -> tuple[bytes, str]:
    """``(payload, encoding)``: JSON bytes when the value round-trips through JSON, else a pickle."""
    text = encode_json(value)
    if text is not None:
        return text.encode("utf-8"), ENCODING_JSON
    return pickle.dumps(value), ENCODING_PICKLE


def check_allow_pickle(allow_pickle: Any) -> None:
    """Raise PtdTypeError unless ``allow_pickle`` is a bool or None (the reference's check)."""
    if allow_pickle is not None and not isinstance(allow_pickle, bool):
        raise PtdTypeError("allow_pickle must be a bool or None.")


def refuse_pickle(allow_pickle: Any, *, key: str, location: str, source: str = "zarr") -> None:
    """Raise :class:`~ptd.errors.PickleRefusedError` unless ``allow_pickle`` is True: the one
    opt-in to unpickling what a file holds. ``None`` (the default of every ptd function, where
    tensordict 0.15 unpickles with a FutureWarning) refuses as ``False`` does. ``source`` says
    what asks to unpickle (``"zarr"``, ``"memmap"``, ``"codec"``: an array whose codecs
    unpickle). A value that is not a bool or None raises PtdTypeError.

    >>> refuse_pickle(True, key="k", location="x.zarr")
    >>> refuse_pickle(None, key="k", location="x.zarr")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ptd.errors.PickleRefusedError: cannot read key 'k' of x.zarr: the file asks to unpickle it ...
    """
    check_allow_pickle(allow_pickle)
    if allow_pickle is True:
        return
    raise PickleRefusedError(
        f"cannot read key {key!r} of {location}: the file asks to unpickle it "
        f"({_WHAT.get(source, _WHAT['zarr'])}), and unpickling runs any code the file holds. "
        "ptd refuses pickles unless ",
        Option("allow_pickle"),
        " is passed (unlike tensordict 0.15, which unpickles by default with a FutureWarning): "
        "pass it only for files you trust.",
        path=str(location),
        key=key,
    )


def decode_payload(
    data: bytes,
    encoding: Any,
    *,
    allow_pickle: bool | None,
    key: str,
    location: str,
    source: str = "zarr",
) -> Any:
    """Decode a payload written by :func:`encode_payload` (or by tensordict).

    Every failure raises an error naming ``key`` and ``location``: an unknown encoding or a
    corrupt payload gives PtdValueError, a pickle without ``allow_pickle=True``
    PickleRefusedError (raised by :func:`refuse_pickle` before anything is unpickled).
    ``source`` says which format's convention holds the payload ("zarr" or "memmap").
    """
    where = f"(key {key!r} in {location})"
    if encoding == ENCODING_JSON:
        try:
            return json.loads(bytes(data).decode("utf-8"))
        except UnicodeDecodeError as err:
            raise PtdValueError(f"Corrupt JSON payload {where}: not valid UTF-8 ({err}).") from None
        except ValueError as err:
            raise PtdValueError(f"Corrupt JSON payload {where}: {err}.") from None
        except RecursionError:
            raise PtdValueError(f"Corrupt JSON payload {where}: nested too deeply.") from None
    if encoding != ENCODING_PICKLE:
        raise PtdValueError(f"Unknown zarr non-tensor encoding: {encoding!r}. {where}")
    refuse_pickle(allow_pickle, key=key, location=location, source=source)
    try:
        return pickle.loads(bytes(data))  # the one opt-in place (allow_pickle=True)
    except Exception as err:  # noqa: BLE001 - any unpickling failure is a corrupt payload
        raise PtdValueError(
            f"Corrupt pickle payload {where}: {type(err).__name__}: {err}"
        ) from None


# --- nested lists (NonTensorStack values) ----------------------------------------------------


def all_of_type(values: Any, ndim: int, cls: type) -> bool:
    """Whether every element of the ``ndim``-deep nested list is exactly of type ``cls``."""
    if ndim == 0:
        return type(values) is cls
    return all(all_of_type(v, ndim - 1, cls) for v in values)


def nested_to_array(
    values: Any, shape: Sequence[int], *, key: str, location: str, dtype: Any = object
) -> np.ndarray:
    """An array of ``shape`` whose elements are those of the nested list ``values``.

    Elements stay python objects (``dtype=object``) unless ``dtype`` says otherwise; a nested
    list that is not of ``shape`` raises PtdValueError.
    """
    shape = tuple(int(s) for s in shape)
    flat: list[Any] = []

    def walk(v: Any, depth: int) -> None:
        if depth == len(shape):
            flat.append(v)
            return
        if not isinstance(v, (list, tuple)) or len(v) != shape[depth]:
            raise PtdValueError(
                f"cannot write key {key!r} to {location}: the stack value is not a nested list "
                f"of shape {list(shape)}"
            )
        for item in v:
            walk(item, depth + 1)

    walk(values, 0)
    out = np.empty(shape, dtype=object)
    out_flat = out.reshape(-1)
    for i, v in enumerate(flat):  # item by item: elements may be lists themselves
        out_flat[i] = v
    if dtype is not object:
        out = out.astype(dtype) if out.size else np.empty(shape, dtype=dtype)
    return out


def select_nested(value: Any, selection: Sequence[Any]) -> Any:
    """Apply a backend selection (ints, slices, one sorted int array) to a nested list."""
    if not selection:
        return value
    head, rest = selection[0], tuple(selection[1:])
    if isinstance(head, (int, np.integer)):
        return select_nested(value[int(head)], rest)
    if isinstance(head, slice):
        return [select_nested(v, rest) for v in value[head]]
    return [select_nested(value[int(i)], rest) for i in np.asarray(head).reshape(-1)]


def parse_stack_shape(value: Any) -> tuple[int, ...] | None:
    """The stack shape a ``__tensordict_stack__`` attribute holds, or None when it is not a
    list of non-negative ints (a corrupt or foreign attribute: it is then not trusted).

    >>> parse_stack_shape([3, 2]), parse_stack_shape("abc"), parse_stack_shape([-1])
    ((3, 2), None, None)
    """
    if isinstance(value, (str, bytes, Mapping)):
        return None
    try:
        items = list(np.ravel(np.asarray(value, dtype=object)))
    except (TypeError, ValueError):
        return None
    out = []
    for item in items:
        if isinstance(item, (bool, np.bool_)) or not isinstance(item, (int, np.integer)):
            return None
        if item < 0:
            return None
        out.append(int(item))
    return tuple(out)


def has_nested_shape(value: Any, shape: Sequence[int]) -> bool:
    """Whether ``value`` is a nested list (or tuple) of exactly ``shape``."""
    if not shape:
        return True
    if not isinstance(value, (list, tuple)) or len(value) != shape[0]:
        return False
    return all(has_nested_shape(v, shape[1:]) for v in value)


def string_stack_shape(value: Any, ndim: int) -> tuple[int, ...]:
    """The shape of a stack held as the nested list ``value`` in a parent of ``ndim`` batch
    dims: its leading ``ndim`` equal-length levels, or every level when ``value`` is a
    rectangular nest of str (a string array, whose shape may extend its parent's batch size,
    as tensordict reads it; ``[]`` is a stack of 0)."""
    shape: list[int] = []
    level: list[Any] = [value]
    while level and all(isinstance(v, list) for v in level):
        n = len(level[0])
        if any(len(v) != n for v in level):
            break
        shape.append(n)
        level = [x for v in level for x in v]
    if all(isinstance(v, str) for v in level) and (level or shape[-1:] == [0]):
        return tuple(shape)
    return tuple(shape[:ndim])
