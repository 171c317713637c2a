"""The ``from_*`` constructors of tensordict 0.15 (``from_dict``, ``from_any``, ``from_tuple``,
``from_namedtuple``, ``from_struct_array``, ``from_pytree``, ``fromkeys``). They always build an
in-memory :class:`ptd.TensorDict`; ``PersistentTensorDict.from_dict`` (which takes a filename)
is the file-backed one.

>>> import collections, torch
>>> from ptd import TensorDict
>>> Point = collections.namedtuple("Point", "x y")
>>> TensorDict.from_namedtuple(Point(torch.zeros(3), torch.ones(3, 2)), auto_batch_size=True)
TensorDict(batch_size=[3], fields={x: f32[], y: f32[2]})
>>> TensorDict.from_pytree({"a": [torch.zeros(2), torch.ones(2)]}).to_pytree()["a"][1]
tensor([1., 1.])
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from ptd.errors import ArgumentError, PtdTypeError, PtdValueError, UnknownBackendError
from ptd.ops.joining import stack
from ptd.ops.keys import NestedKey
from ptd.ops.nontensor import NonTensorData
from ptd.ops.root import is_tensordict

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase

__all__: list[str] = []


def _finish_batch(
    td: TensorDictBase,
    name: str,
    auto_batch_size: bool | None,
    batch_dims: int | None,
    batch_size: Any,
) -> TensorDictBase:
    if auto_batch_size or (auto_batch_size is None and batch_dims is not None):
        if batch_size is not None:
            raise PtdTypeError(f"Cannot pass both batch_size and auto_batch_size=True to {name}.")
        td.auto_batch_size_(batch_dims=batch_dims)
    return td


def from_h5(
    cls: type[TensorDictBase], /, filename: Any, *, mode: str = "r", **kwargs: Any
) -> TensorDictBase:
    """Open an HDF5 file as a :class:`ptd.PersistentTensorDict` (its ``from_h5``)."""
    return cls._io.from_h5(filename, mode=mode, **kwargs)


def from_zarr(
    cls: type[TensorDictBase], /, filename: Any, *, mode: str = "r", **kwargs: Any
) -> TensorDictBase:
    """Open a zarr store as a :class:`ptd.PersistentTensorDict` (its ``from_zarr``)."""
    return cls._io.from_zarr(filename, mode=mode, **kwargs)


def from_schema(
    cls: type[TensorDictBase],
    /,
    schema: Mapping[str, tuple[Sequence[int], torch.dtype]],
    *,
    batch_size: Sequence[int] | None = None,
    storage: str | None = None,
    device: Any = None,
    **kwargs: Any,
) -> TensorDictBase:
    """A zero-filled tensordict from ``{key: (element_shape, dtype)}``: each entry gets
    the shape ``[*batch_size, *element_shape]``.

    ``storage`` says where the zeros live: ``None`` (in memory), ``"shared"`` (in memory,
    after :meth:`share_memory_`), ``"memmap"`` (the directory ``prefix=``, as
    :meth:`memmap_like`), ``"h5"`` or ``"zarr"`` (a :class:`ptd.PersistentTensorDict` at
    ``filename=``, the zeros written slab by slab from a broadcast scalar, so nothing of
    the batch's size is built in memory). tensordict's ``"redis"``/``"dragonfly"``
    servers are not ptd's: they raise :class:`~ptd.errors.ArgumentError`, as any other
    value does.

    >>> import torch
    >>> from ptd import TensorDict
    >>> td = TensorDict.from_schema({"obs": ([2, 3], torch.uint8)}, batch_size=[4])
    >>> td["obs"].shape, td["obs"].dtype, int(td["obs"].sum())
    (torch.Size([4, 2, 3]), torch.uint8, 0)
    """
    batch = torch.Size(batch_size if batch_size is not None else ())

    def zeros(lazy: bool) -> dict[str, torch.Tensor]:
        out = {}
        for key, (shape, dtype) in schema.items():
            full = [*batch, *shape]
            out[key] = (
                torch.zeros((), dtype=dtype).expand(full)
                if lazy
                else torch.zeros(full, dtype=dtype, device=device)
            )
        return out

    def in_memory() -> TensorDictBase:
        return cls._new_tensordict(zeros(False), batch_size=batch, device=device)

    def memmapped() -> TensorDictBase:
        prefix = kwargs.pop("prefix", None)
        lazy = cls._new_tensordict(zeros(True), batch_size=batch)
        return cast("TensorDictBase", lazy.memmap_like(prefix, **kwargs))

    # tensordict's storages made here; any other names a format the store-backed class writes
    made_here = {
        None: in_memory,
        "shared": lambda: in_memory().share_memory_(),
        "memmap": memmapped,
    }
    if storage in made_here:
        return made_here[storage]()
    try:
        return cls._io.write_store(
            zeros(True),
            kwargs.pop("filename", None),
            batch_size=batch,
            device=device,
            backend=storage,
            **kwargs,
        )
    except UnknownBackendError as err:
        raise ArgumentError(
            f"from_schema: unknown storage {storage!r}; expected None, 'shared', 'memmap' or "
            f"a format ptd writes ({err}; tensordict's 'redis'/'dragonfly' servers are not "
            "ptd's)"
        ) from None


def from_dataclass(
    cls: type[TensorDictBase],
    /,
    dataclass: Any,
    *,
    dest_cls: type | None = None,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    as_tensorclass: bool = False,
    device: Any = None,
    batch_size: Sequence[int] | None = None,
) -> TensorDictBase:
    """One entry per field of a dataclass instance (nested dataclasses and dicts become
    nested tensordicts)."""
    if as_tensorclass:
        raise ArgumentError("ptd has no tensorclasses: from_dataclass(as_tensorclass=True)")
    if not dataclasses.is_dataclass(dataclass) or isinstance(dataclass, type):
        raise PtdTypeError(f"Expected a dataclass input, got a {type(dataclass)} input instead.")
    source = {}
    for field in dataclasses.fields(dataclass):
        value = getattr(dataclass, field.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            value = cls.from_dataclass(value, device=device, batch_size=batch_size)
        elif isinstance(value, (int, float, bool)) and not isinstance(value, torch.Tensor):
            value = torch.as_tensor(value)
        else:
            value = cls.from_any(value, device=device, batch_size=batch_size)
        source[field.name] = value
    td = cls._new_tensordict(source, batch_size=batch_size, device=device)
    return _finish_batch(td, "from_dataclass", auto_batch_size, batch_dims, batch_size)


def from_list(
    cls: type[TensorDictBase],
    /,
    input: Sequence[Any],
    *,
    auto_batch_size: bool | None = None,
    batch_size: Sequence[int] | None = None,
    device: Any = None,
    batch_dims: int | None = None,
    names: Sequence[str | None] | None = None,
    lazy: bool | None = None,
) -> TensorDictBase:
    """Stack a list of dicts (or tensordicts) along a new leading dim."""
    if lazy:
        raise ArgumentError("ptd has no lazy stacks: from_list(lazy=True)")
    inner = None
    if batch_size is not None:
        bs = [batch_size] if isinstance(batch_size, int) else list(batch_size)
        if bs[0] != len(input):
            raise PtdValueError(
                f"The provided batch size ({bs}) does not match the length of the list "
                f"({len(input)})."
            )
        inner = bs[1:]
    members = [
        m
        if is_tensordict(m)
        else _from_dict(
            cls,
            m,
            auto_batch_size if inner is None else False,
            inner,
            device,
            None if batch_dims is None else batch_dims - 1,
            None,
        )
        for m in input
    ]
    td = stack(members, 0)
    if names is not None:
        td = cls._new_tensordict(td, batch_size=td.batch_size, device=device, names=names)
    return td


def fromkeys(
    cls: type[TensorDictBase], /, keys: Sequence[NestedKey], value: Any = 0
) -> TensorDictBase:
    """A 0-d tensordict with ``value`` at every key."""
    return cls._new_tensordict(dict.fromkeys(keys, value), batch_size=[])


def from_dict(
    cls: type[TensorDictBase],
    /,
    input_dict: Any,
    *others: Any,
    auto_batch_size: bool | None = None,
    batch_size: Sequence[int] | None = None,
    device: Any = None,
    batch_dims: int | None = None,
    names: Sequence[str | None] | None = None,
) -> TensorDictBase:
    """An in-memory tensordict from a (nested) dict; the batch size is ``batch_size``,
    else inferred when ``auto_batch_size`` or ``batch_dims``, else ``[]``."""
    if others:
        raise PtdTypeError("from_dict takes one input dict (others are not supported)")
    return _from_dict(cls, input_dict, auto_batch_size, batch_size, device, batch_dims, names)


def from_dict_instance(
    td: TensorDictBase,
    input_dict: Any,
    *,
    auto_batch_size: bool | None = None,
    batch_size: Sequence[int] | None = None,
    device: Any = None,
    batch_dims: int | None = None,
    names: Sequence[str | None] | None = None,
) -> TensorDictBase:
    """:meth:`from_dict`, called on an instance."""
    return _from_dict(type(td), input_dict, auto_batch_size, batch_size, device, batch_dims, names)


def from_any(
    cls: type[TensorDictBase],
    /,
    obj: Any,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Sequence[int] | None = None,
) -> Any:
    """A tensordict from a dict, namedtuple, tuple or numpy structured array (a tensor or
    a tensordict is returned as it is; other values too)."""
    kw = {
        "auto_batch_size": auto_batch_size,
        "batch_dims": batch_dims,
        "device": device,
        "batch_size": batch_size,
    }
    if isinstance(obj, torch.Tensor) or is_tensordict(obj):
        return obj
    if isinstance(obj, Mapping):
        return _from_dict(cls, dict(obj), auto_batch_size, batch_size, device, batch_dims, None)
    if _is_struct_array(obj):
        return cls.from_struct_array(obj, **kw)
    if isinstance(obj, tuple):
        if hasattr(obj, "_asdict"):
            return cls.from_namedtuple(obj, **kw)
        return cls.from_tuple(obj, **kw)
    return obj


def from_tuple(
    cls: type[TensorDictBase],
    /,
    obj: tuple[Any, ...],
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Sequence[int] | None = None,
) -> TensorDictBase:
    """A tensordict with keys ``"0"``, ``"1"``... (nested for nested tuples)."""
    td = cls._new_tensordict(
        {str(i): cls.from_any(v, batch_size=batch_size, device=device) for i, v in enumerate(obj)},
        batch_size=batch_size,
        device=device,
    )
    return _finish_batch(td, "from_tuple", auto_batch_size, batch_dims, batch_size)


def from_namedtuple(
    cls: type[TensorDictBase],
    /,
    named_tuple: Any,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Sequence[int] | None = None,
) -> TensorDictBase:
    """A tensordict with one key per field (nested for nested namedtuples)."""
    fields = (
        named_tuple._asdict()
        if hasattr(named_tuple, "_asdict")
        else {n: getattr(named_tuple, n) for n in type(named_tuple).__match_args__}
    )
    td = cls._new_tensordict(
        {k: cls.from_any(v, batch_size=batch_size, device=device) for k, v in fields.items()},
        batch_size=batch_size,
        device=device,
    )
    return _finish_batch(td, "from_namedtuple", auto_batch_size, batch_dims, batch_size)


def from_struct_array(
    cls: type[TensorDictBase],
    /,
    struct_array: np.ndarray,
    *,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
    device: Any = None,
    batch_size: Sequence[int] | None = None,
) -> TensorDictBase:
    """A tensordict with one key per field of a numpy structured array; the batch size is
    the array's shape unless ``batch_size``."""
    names = struct_array.dtype.names or ()
    bs = struct_array.shape if batch_size is None else batch_size
    source: dict[str, Any] = {}
    for name in names:
        field = struct_array[name]
        if field.dtype.names is not None:
            source[name] = cls.from_struct_array(field, device=device, batch_size=bs)
        elif field.dtype.kind in "USO":
            source[name] = NonTensorData(field.tolist(), bs)
        else:
            source[name] = torch.from_numpy(np.ascontiguousarray(field))
    td = cls._new_tensordict(source, batch_size=bs, device=device)
    if auto_batch_size and batch_size is not None:
        raise PtdTypeError(
            "Cannot pass both batch_size and auto_batch_size=True to from_struct_array."
        )
    return _finish_batch(td, "from_struct_array", auto_batch_size, batch_dims, None)


def from_pytree(
    cls: type[TensorDictBase],
    /,
    pytree: Any,
    *,
    batch_size: Sequence[int] | None = None,
    auto_batch_size: bool = False,
    batch_dims: int | None = None,
) -> Any:
    """A tensordict from nested dicts, lists, tuples and namedtuples of tensors; the
    container types are kept in a ``"_pytree_type"`` entry so that :meth:`to_pytree`
    rebuilds the original structure."""
    if is_tensordict(pytree) or isinstance(pytree, torch.Tensor):
        return pytree
    if isinstance(pytree, tuple) and hasattr(pytree, "_asdict"):
        items = dict(pytree._asdict())
    elif isinstance(pytree, (list, tuple)):
        items = {str(i): v for i, v in enumerate(pytree)}
    elif isinstance(pytree, dict):
        if not all(isinstance(k, str) for k in pytree):
            raise ArgumentError("from_pytree supports dicts with string keys only")
        items = dict(pytree)
    else:
        return pytree
    source = {
        k: cls.from_pytree(v) if isinstance(v, (dict, list, tuple)) else v for k, v in items.items()
    }
    source["_pytree_type"] = NonTensorData(type(pytree))
    td = cls._new_tensordict(source, batch_size=batch_size)
    return _finish_batch(td, "from_pytree", auto_batch_size, batch_dims, batch_size)


def _from_dict(
    cls: type[TensorDictBase],
    /,
    input_dict: Mapping[Any, Any],
    auto_batch_size: bool | None,
    batch_size: Sequence[int] | None,
    device: Any,
    batch_dims: int | None,
    names: Sequence[str | None] | None,
) -> TensorDictBase:
    if batch_dims is not None and batch_size is not None:
        raise PtdValueError("Cannot pass both batch_size and batch_dims to `from_dict`.")
    source = {
        k: from_any(cls, v, device=device) if isinstance(v, tuple) or _is_struct_array(v) else v
        for k, v in input_dict.items()
    }
    td = cls._new_tensordict(source, batch_size=batch_size or [], device=device)
    if batch_size is None:
        td = _finish_batch(td, "from_dict", auto_batch_size, batch_dims, None)
    if names is not None:
        td = cls._new_tensordict(td, batch_size=td.batch_size, device=device, names=names)
    return td


def _is_struct_array(obj: Any) -> bool:
    return isinstance(obj, np.ndarray) and obj.dtype.names is not None
