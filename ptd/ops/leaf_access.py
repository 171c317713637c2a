"""How a container reaches its tensor leaves for the work that touches every element.

A container composes one :class:`LeafAccess` (its ``_leaves``): the in-memory one here, whose
leaves are the container's own tensors, or a store's (``ptd.containers.persistent.streaming``), which reads
and writes them in row slabs so that memory stays bounded. The method families of
:mod:`ptd.ops` ask it instead of asking what kind of container they were given:

========================  ===================================================================
``reads_copy``            every read gives a new tensor (results never share memory with it)
``writes_into_entries``   ``td[key] = value`` writes into an existing entry, not replaces it
``collapse_foreign_stacks``  a foreign NonTensorStack of equal elements is stored as one value
``reduce``                one reduction (:class:`~ptd.ops.leafop.LeafOp`) of one tensor leaf
``reduce_together``       ``reduce=True`` without ``dim``: every leaf reduced as one
``check_writable``        raise before an in-place op when the leaves cannot be written
``map_inplace``           replace every tensor leaf ``t`` by ``fn(t, operand)``
``data_ptr``              a leaf's ``data_ptr()`` (0 for a leaf that lives in a file)
========================  ===================================================================

>>> import torch
>>> from ptd import TensorDict
>>> td = TensorDict(a=torch.ones(3), batch_size=[3])
>>> td._leaves.reads_copy
False
>>> td._leaves.map_inplace(td, lambda t, o: t * 2)["a"]
tensor([2., 2., 2.])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from ptd.ops import apply as apply_ops
from ptd.ops import reductions as reductions_ops
from ptd.ops.apply import pick_operand

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase
    from ptd.ops.leafop import LeafOp

__all__ = ["IN_MEMORY", "LeafAccess"]

#: ``fn(leaf, operand)`` of :meth:`LeafAccess.map_inplace`: the new leaf, or None when it
#: wrote into ``leaf`` itself
LeafMap = Callable[[torch.Tensor, Any], "torch.Tensor | None"]


class LeafAccess:
    """The leaves of an in-memory container: its own tensors."""

    reads_copy: bool = False
    writes_into_entries: bool = False
    collapse_foreign_stacks: bool = False

    def reduce(self, td: TensorDictBase, key: str, op: LeafOp) -> Any:
        """``op`` applied to the tensor leaf ``key``."""
        return op(td._get_str(key))

    def reduce_together(
        self, td: TensorDictBase, name: str, dim: Any, keepdim: Any, **kwargs: Any
    ) -> Any:
        """``td.<name>(reduce=True)``: the leaves flattened, concatenated and reduced."""
        return reductions_ops.reduce_concatenated(td, name, dim, keepdim, **kwargs)

    def check_writable(self, td: TensorDictBase) -> None:
        """Raise when an in-place op cannot write the leaves (memory always can)."""

    def map_inplace(self, td: TensorDictBase, fn: LeafMap, other: Any = None) -> TensorDictBase:
        """Replace every tensor leaf ``t`` by ``fn(t, o)`` in place (same dtype and shape),
        where ``o`` is ``other``'s matching leaf (``other`` may be a tensordict, a tensor, a
        number, None, or a tuple of those)."""
        for parts, tensor in apply_ops._tensor_leaves(
            td,
        ):
            result = fn(tensor, pick_operand(other, parts, None))
            if result is not None:
                td.set_(parts, result)
        return td

    def data_ptr(self, td: TensorDictBase, key: str, storage: bool) -> int:
        """``data_ptr()`` of the tensor leaf ``key`` (of its storage when ``storage``)."""
        value = td._get_str(key)
        return int(value.untyped_storage().data_ptr() if storage else value.data_ptr())


#: the one in-memory instance every in-memory container shares (it holds no state)
IN_MEMORY = LeafAccess()
