"""The container classes: :class:`~ptd.containers.base.TensorDictBase` (the primitives, key
walking, get/set, the repr, and one table binding the method families of :mod:`ptd.ops`),
the in-memory :class:`~ptd.containers.tensordict.TensorDict`, the store-backed
:class:`~ptd.containers.persistent.persistent_tensordict.PersistentTensorDict` and the
memory-mapped directory format (:mod:`ptd.containers.memmap`).

The method families of :mod:`ptd.ops` build their results with a container's
``_new_tensordict`` and reach a store or a memmap directory through its ``_io``
(:class:`ptd.ops.interface.ContainerIO`). ``_io`` is set here, on the base class, because the
module that implements it (:mod:`ptd.containers.io`) imports the classes; importing any
container module runs this package first, so it is set before any container exists.
"""

from __future__ import annotations

from ptd.containers import base, io, memmap, tensordict
from ptd.containers.persistent import persistent_tensordict

__all__ = ["base", "io", "memmap", "persistent_tensordict", "tensordict"]

base.TensorDictBase._io = io.CONTAINER_IO
