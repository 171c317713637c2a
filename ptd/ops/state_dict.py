"""State dicts and storage facts, written once for every tensordict (bound as methods of :class:`~ptd.containers.base.TensorDictBase`): ``state_dict``, ``load_state_dict``, ``data_ptr``.

``state_dict()`` returns the tensor leaves in an ``OrderedDict`` as
:meth:`torch.nn.Module.state_dict` does: flat ``"."``-joined keys by default, nested
``OrderedDict`` instances with ``flatten=False``; the batch size and device of every level (and
the value of every non-tensor entry) are kept in its ``_metadata`` attribute, under the
``"."``-joined key of the level. ``load_state_dict`` reads either form back, in place by
default (``assign=True`` replaces the leaves). On a PersistentTensorDict, ``state_dict`` reads
every leaf (a state dict is a dict of in-memory tensors) and ``load_state_dict`` writes them
into the store, one leaf at a time.

>>> import torch
>>> from ptd import TensorDict
>>> td = TensorDict({"a": torch.ones(2), "n": {"b": torch.arange(2)}}, batch_size=[2])
>>> sd = td.state_dict()
>>> list(sd), sd._metadata["n"]["batch_size"]
(['a', 'n.b'], torch.Size([2]))
>>> zero = td.clone().zero_().load_state_dict(sd)
>>> zero["n", "b"]
tensor([0, 1])
>>> td.data_ptr()["a"].item() == td["a"].data_ptr()
True
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any

import torch

from ptd.errors import ArgumentError, PtdKeyError, PtdTypeError, UnsupportedOperationError
from ptd.ops.nontensor import NonTensorData, NonTensorStack

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase


__all__: list[str] = []

_NON_TENSOR = "_non_tensor"


def _metadata_of(sd: Any) -> Any:
    meta = getattr(sd, "_metadata", None)
    if meta is None:
        meta = collections.OrderedDict()
        try:
            sd._metadata = meta
        except AttributeError:
            raise PtdTypeError(
                "state_dict(destination=...) needs an object that takes a `_metadata` "
                f"attribute (an OrderedDict), got a {type(sd).__name__}"
            ) from None
    return meta


def _non_tensor_meta(value: NonTensorData | NonTensorStack, level: dict[str, Any]) -> None:
    if isinstance(value, NonTensorStack):
        level["_type"] = "NonTensorStack"
        level[_NON_TENSOR] = {"data": value.tolist(), "_is_non_tensor": True}
    else:
        level["_type"] = "NonTensorData"
        level[_NON_TENSOR] = {"data": value.data, "_metadata": None, "_is_non_tensor": True}


def _unflatten(flat: Any) -> collections.OrderedDict[str, Any]:
    """A flat state dict (``"."``-joined keys, ``_metadata``) as nested OrderedDicts, each with
    its own ``_metadata[""]``."""

    def node() -> collections.OrderedDict[str, Any]:
        out: collections.OrderedDict[str, Any] = collections.OrderedDict()
        out._metadata = collections.OrderedDict()  # type: ignore[attr-defined]
        return out

    root = node()

    def walk(parts: list[str]) -> collections.OrderedDict[str, Any]:
        cur = root
        for part in parts:
            if part not in cur or not isinstance(cur[part], dict):
                cur[part] = node()
            cur = cur[part]
        return cur

    for key, value in flat.items():
        parts = key.split(".")
        walk(parts[:-1])[parts[-1]] = value
    for key, level in (getattr(flat, "_metadata", None) or {}).items():
        target = root if key == "" else walk(key.split("."))
        target._metadata[""] = level  # type: ignore[attr-defined]
    return root


def _is_empty_level(item: Any) -> bool:
    return isinstance(item, dict) and all(_is_empty_level(v) for v in item.values())


def state_dict(
    td: TensorDictBase,
    destination: Any = None,
    prefix: str = "",
    keep_vars: bool = False,
    flatten: bool = True,
) -> collections.OrderedDict[str, Any]:
    """The tensor leaves in an ``OrderedDict`` (``"."``-joined keys unless
    ``flatten=False``), detached unless ``keep_vars``; batch size and device of each level
    in its ``_metadata``. Two entries whose flat keys collide raise a KeyError (use
    ``flatten=False``)."""
    if destination is None:
        destination = collections.OrderedDict()
    meta = _metadata_of(destination)
    level_key = prefix[:-1] if prefix.endswith(".") else prefix
    meta[level_key] = {"batch_size": td.batch_size, "device": td.device}
    for key in td._keys_str():
        kind = td._meta_str(key).kind
        full = prefix + key
        if kind == "tensor":
            value = td._get_str(key)
            if full in destination:
                raise PtdKeyError(
                    f"state_dict: the key {full!r} of {td._location()} collides with "
                    "another entry in the flat state dict; use state_dict(flatten=False)"
                )
            destination[full] = value if keep_vars else value.detach()
        elif kind == "nested":
            sub = td._get_str(key)
            if flatten:
                if full in meta:
                    raise PtdKeyError(
                        f"state_dict: the nested key {full!r} of {td._location()} collides "
                        "with another level in the flat state dict; use "
                        "state_dict(flatten=False)"
                    )
                sub.state_dict(destination, full + ".", keep_vars, True)
            else:
                destination[full] = sub.state_dict(keep_vars=keep_vars, flatten=False)
        else:
            level = {"batch_size": td.batch_size, "device": td.device}
            _non_tensor_meta(td._get_str(key), level)
            if flatten:
                meta[full] = level
            else:
                child: collections.OrderedDict[str, Any] = collections.OrderedDict()
                child._metadata = collections.OrderedDict({"": level})  # type: ignore[attr-defined]
                destination[full] = child
    return destination  # type: ignore[no-any-return]


def load_state_dict(
    td: TensorDictBase,
    state_dict: Any,
    strict: bool = True,
    assign: bool = False,
    from_flatten: bool | None = None,
) -> Any:
    """Read a state dict (flat, nested, or tensordict's legacy ``__batch_size`` form) into
    this tensordict and return it: values are written in place (``assign=False``) or replace
    the leaves (``assign=True``). With ``strict``, key sets that differ (empty levels aside)
    raise a RuntimeError."""
    meta = getattr(state_dict, "_metadata", None)
    if from_flatten is None:
        from_flatten = meta is not None and set(state_dict) != set(td._keys_str())
    if from_flatten:
        state_dict = _unflatten(state_dict)
        meta = state_dict._metadata
    entries = dict(state_dict)
    level = (meta or {}).get("", None)
    if level is not None:
        batch_size, device = level.get("batch_size", td.batch_size), level.get("device")
    elif "__batch_size" in entries:
        batch_size, device = entries.pop("__batch_size"), entries.pop("__device", None)
    else:
        batch_size, device = td.batch_size, None
    mine = set(td._keys_str())
    if strict and set(entries) != mine:
        extra_td = {k for k in mine - set(entries) if not _is_empty_nested(td, k)}
        extra_sd = {k for k in set(entries) - mine if not _is_empty_level(entries[k])}
        if extra_td or extra_sd:
            raise ArgumentError(
                "Cannot load state-dict because the key sets don't match: got state_dict "
                f"extra keys \n{set(entries) - mine}\n and tensordict extra keys\n"
                f"{mine - set(entries)}\n"
            )
    if device is not None and td.device is not None and torch.device(device) != td.device:
        raise UnsupportedOperationError("Loading data from another device is not yet supported.")
    if torch.Size(batch_size) != td.batch_size:
        td.batch_size = batch_size
    for key, item in entries.items():
        if isinstance(item, dict):
            _load_level(td, key, item, strict, assign)
        else:
            td.set(key, item, inplace=not assign)
    return td


def _is_empty_nested(td: TensorDictBase, key: str) -> bool:
    return bool(td._meta_str(key).kind == "nested" and td._get_str(key).is_empty())


def _load_level(td: TensorDictBase, key: str, item: Any, strict: bool, assign: bool) -> None:
    level = (getattr(item, "_metadata", None) or {}).get("", {})
    payload = level.get(_NON_TENSOR)
    if payload is not None:
        data = payload.get("data")
        value: Any
        if level.get("_type") == "NonTensorStack":
            value = NonTensorStack.from_list(data, td.batch_size)
        else:
            value = NonTensorData(data, td.batch_size)
        td.set(key, value)
        return
    exists = key in td._keys_str() and td._meta_str(key).kind == "nested"
    if not exists:
        td.set(key, td.empty())
    td._get_str(key).load_state_dict(item, strict=strict, assign=assign, from_flatten=False)


def data_ptr(td: TensorDictBase, *, storage: bool = False) -> Any:
    """A TensorDict (batch size ``[]``) of the ``data_ptr()`` of each tensor leaf (of its
    untyped storage with ``storage=True``), nested as this one. Leaves of a
    PersistentTensorDict have no memory address until read: their entries are 0 (no data
    is read)."""
    out = td._new_tensordict({}, batch_size=[], device="cpu")
    for key in td._keys_str():
        kind = td._meta_str(key).kind
        if kind == "nested":
            sub = td._get_str(key).data_ptr(storage=storage)
            if not sub.is_empty():  # a level without tensors has no pointer to give
                out._set_str(key, sub, inplace=False)
        elif kind == "tensor":
            ptr = td._leaves.data_ptr(td, key, storage)
            out._set_str(key, torch.tensor(ptr, dtype=torch.int64), inplace=False)
    return out


def _has_non_tensor(td: TensorDictBase) -> bool:
    """Compatibility with tensordict's private helper of the same name, which its own tests
    call: whether a non-tensor entry is held at any depth (read from metadata only)."""
    return any(meta.kind == "non_tensor" for _, meta in td._metas(True))
