"""``attrs``: a tensordict that describes each tensor leaf by its device, dtype and shape
(a :class:`TensorAttrs`), and ``to(attrs)``, which casts another tensordict leaf by leaf to
them, as tensordict 0.15.3 has them.

>>> import torch
>>> from ptd import TensorDict
>>> td = TensorDict(a=torch.zeros(3), b=torch.zeros(3, dtype=torch.int32), batch_size=[3])
>>> attrs = td.attrs(fields=("device", "dtype"))
>>> attrs["b"]
TensorAttrs(tgt_device=device(type='cpu'), tgt_dtype=torch.int32, tgt_shape=None)
>>> target = TensorDict(a=torch.ones(3), b=torch.ones(3), batch_size=[3])
>>> target.to(attrs)["b"].dtype
torch.int32
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from ptd.ops.keys import unravel_key

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase

__all__ = ["TensorAttrs", "to_attrs"]


class TensorAttrs:
    """The device, dtype and shape of one tensor (``tgt_device``, ``tgt_dtype``,
    ``tgt_shape``; ``None`` for a field not recorded). A leaf of :meth:`attrs`'s result,
    with an empty batch size. tensordict's is a tensorclass; ptd's is a plain object with
    the same fields."""

    batch_size = torch.Size([])
    device = None

    def __init__(
        self,
        tgt_device: torch.device | None = None,
        tgt_dtype: torch.dtype | None = None,
        tgt_shape: torch.Size | None = None,
    ) -> None:
        self.tgt_device = tgt_device
        self.tgt_dtype = tgt_dtype
        self.tgt_shape = tgt_shape

    @classmethod
    def from_tensor(
        cls, tensor: torch.Tensor, fields: Sequence[str] = ("device", "dtype", "shape")
    ) -> TensorAttrs:
        """The attributes of ``tensor`` named in ``fields`` (others stay ``None``)."""
        return cls(
            tensor.device if "device" in fields else None,
            tensor.dtype if "dtype" in fields else None,
            tensor.shape if "shape" in fields else None,
        )

    def __repr__(self) -> str:
        return (
            f"TensorAttrs(tgt_device={self.tgt_device!r}, tgt_dtype={self.tgt_dtype}, "
            f"tgt_shape={self.tgt_shape!r})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TensorAttrs):
            return NotImplemented
        mine = (self.tgt_device, self.tgt_dtype, self.tgt_shape)
        return mine == (other.tgt_device, other.tgt_dtype, other.tgt_shape)

    def __hash__(self) -> int:
        return hash((self.tgt_device, self.tgt_dtype, self.tgt_shape))


def to_attrs(td: TensorDictBase, attrs: TensorDictBase) -> TensorDictBase:
    """``td`` with each tensor leaf that has a :class:`TensorAttrs` at the same key in
    ``attrs`` cast to its device and dtype (shapes are not checked; other leaves are kept)."""

    def cast(key: Any, value: torch.Tensor) -> torch.Tensor:
        parts = unravel_key(key)
        node: Any = attrs
        for part in parts:
            if not hasattr(node, "_keys_str") or part not in node._keys_str():
                return value
            node = node._get_str(part)
        if not isinstance(node, TensorAttrs):
            return value
        return value.to(device=node.tgt_device, dtype=node.tgt_dtype)

    return td.named_apply(cast, nested_keys=True)  # type: ignore[no-any-return]


def is_attrs(obj: Any) -> bool:
    """Whether ``obj`` is a tensordict with a :class:`TensorAttrs` leaf (``to``'s argument)."""
    if not hasattr(obj, "_keys_str"):
        return False
    for key in obj._keys_str():
        kind = obj._meta_str(key).kind
        if kind == "tensor":  # only the other entries are looked at: no leaf is read
            continue
        value = obj._get_str(key)
        if isinstance(value, TensorAttrs) or (kind == "nested" and is_attrs(value)):
            return True
    return False


def attrs(
    td: TensorDictBase,
    *,
    fields: Sequence[str] = ("device", "dtype", "shape"),
    num_threads: int | None = None,
) -> TensorDictBase:
    """A tensordict of empty batch size and no device, with a :class:`TensorAttrs` in
    place of each tensor leaf (non-tensor entries are kept), recording the ``fields``
    named (any of ``"device"``, ``"dtype"``, ``"shape"``). ``td.to(attrs)`` casts ``td``
    leaf by leaf to their devices and dtypes. ``num_threads`` is accepted and ignored (no
    tensor is read or copied)."""

    def build(src: Any) -> Any:
        out = td._new_tensordict({}, batch_size=[])
        for key in src._keys_str():
            meta = src._meta_str(key)
            if meta.kind == "nested":
                value = build(src._get_str(key))
            elif meta.kind != "tensor":
                value = src._get_str(key)
            elif src._leaves.writes_into_entries:  # a store: from its metadata, reading nothing
                value = TensorAttrs(
                    (src.device or torch.device("cpu")) if "device" in fields else None,
                    meta.dtype if "dtype" in fields else None,
                    torch.Size(meta.shape) if "shape" in fields else None,
                )
            else:
                value = TensorAttrs.from_tensor(src._get_str(key), fields)
            out._set_str(key, value, inplace=False)
        return out

    return build(td)  # type: ignore[no-any-return]
