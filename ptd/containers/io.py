"""What the method families of :mod:`ptd.ops` reach above them through a container's ``_io``:
the store-backed class's openers and the memmap directory format.

:mod:`ptd.ops` sits below the container classes and never imports them; ``TensorDict.from_h5``,
``td.to_zarr(...)``, ``td.memmap()`` and ``TensorDict.load(...)`` are functions of
:mod:`ptd.ops` that call ``td._io`` (or ``cls._io``), an object satisfying
:class:`ptd.ops.interface.ContainerIO`. This is that object; ``ptd/containers/__init__.py``
sets it on :class:`~ptd.containers.base.TensorDictBase`.

>>> import ptd.containers
>>> from ptd import TensorDict
>>> TensorDict._io is CONTAINER_IO
True
"""

from __future__ import annotations

from typing import Any

import torch

from ptd.containers.base import TensorDictBase
from ptd.containers.memmap import make as memmap_make
from ptd.containers.memmap import methods as memmap_methods
from ptd.containers.persistent.persistent_tensordict import PersistentTensorDict

__all__ = ["CONTAINER_IO", "ContainerIOImpl"]


class ContainerIOImpl:
    """The store openers of :class:`PersistentTensorDict` and the functions of
    :mod:`ptd.containers.memmap`, as :class:`ptd.ops.interface.ContainerIO` names them."""

    __slots__ = ()

    def from_h5(self, filename: Any, *, mode: str = "r", **kwargs: Any) -> TensorDictBase:
        return PersistentTensorDict.from_h5(filename, mode=mode, **kwargs)

    def from_zarr(self, filename: Any, *, mode: str = "r", **kwargs: Any) -> TensorDictBase:
        return PersistentTensorDict.from_zarr(filename, mode=mode, **kwargs)

    def write_store(self, source: Any, filename: Any, **kwargs: Any) -> TensorDictBase:
        return PersistentTensorDict.from_dict(source, filename, **kwargs)

    def memmap_tensordict(self, src: Any, prefix: Any = None, **kwargs: Any) -> Any:
        return memmap_methods.memmap_tensordict(src, prefix, **kwargs)

    def memmap_inplace(self, td: Any, prefix: Any = None, **kwargs: Any) -> Any:
        return memmap_methods.memmap_inplace(td, prefix, **kwargs)

    def load_memmap(self, prefix: Any, **kwargs: Any) -> TensorDictBase:
        return memmap_methods.load_memmap(prefix, **kwargs)

    def make_memmap(self, td: Any, key: Any, **kwargs: Any) -> torch.Tensor:
        return memmap_make.make_memmap(td, key, **kwargs)


#: the one instance every container class reaches as ``_io``
CONTAINER_IO = ContainerIOImpl()
