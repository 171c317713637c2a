"""The container classes: :class:`~ptd.containers.base.TensorDictBase` (the primitives, key
walking, get/set, the repr, and one table binding the method families of :mod:`ptd.ops`),
the in-memory :class:`~ptd.containers.tensordict.TensorDict`, the store-backed
:class:`~ptd.containers.persistent.persistent_tensordict.PersistentTensorDict` and the
memory-mapped directory format (:mod:`ptd.containers.memmap`).

Importing this package imports every container module, so each has registered what the method
families need of it (:mod:`ptd.ops.registry`) before any container exists.
"""

from __future__ import annotations

from ptd.containers import base, memmap, tensordict
from ptd.containers.persistent import persistent_tensordict

__all__ = ["base", "memmap", "persistent_tensordict", "tensordict"]
