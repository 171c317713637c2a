"""ptd: persistent tensor dicts on HDF5 files and Zarr v3 stores.

>>> import torch, tempfile, os
>>> from ptd import PersistentTensorDict
>>> with tempfile.TemporaryDirectory() as d:
...     p = PersistentTensorDict.from_dict({"obs": torch.arange(6.).reshape(3, 2)}, os.path.join(d, "x.h5"))
...     print(p[torch.tensor([2, 0])]["obs"])
...     p.close()
tensor([[4., 5.],
        [0., 1.]])

Public names are loaded on first use (PEP 562), so that ``ptd.info`` and ``ptd.validate`` (and
the ``ptd inspect``/``ptd validate`` commands) run in a process that never imports torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ptd import errors
from ptd.errors import PtdError

#: public name -> the module that defines it
_PUBLIC: dict[str, str] = {
    "TensorDict": "ptd.containers.tensordict",
    "TensorDictBase": "ptd.containers.base",
    "EntryMeta": "ptd.containers.base",
    "is_leaf_nontensor": "ptd.containers.base",
    "NonTensorData": "ptd.ops.nontensor",
    "NonTensorStack": "ptd.ops.nontensor",
    "PersistentTensorDict": "ptd.containers.persistent.persistent_tensordict",
    "StoreNode": "ptd.containers.persistent.node",
    "convert": "ptd.transfer.convert",
    "ConvertResult": "ptd.transfer.options",
    "ConvertOptions": "ptd.transfer.options",
    "convert_distributed": "ptd.transfer.distributed",
    "verify_conversion": "ptd.transfer.verify",
    "versions": "ptd.storage.versions",
    "__version__": "ptd.storage.versions",
    "info": "ptd.report.info",
    "StoreInfo": "ptd.report.info",
    "validate": "ptd.report.validate",
    "ValidationReport": "ptd.report.validate",
    "diff": "ptd.report.diff",
    "DiffReport": "ptd.report.diff",
    "StoreLocation": "ptd.storage.location",
    "TdMeta": "ptd.format.tdmeta",
}

#: subpackages reachable as attributes (``ptd.memmap``, ``ptd.data``), imported on first use
_SUBPACKAGES: dict[str, str] = {"memmap": "ptd.memmap", "data": "ptd.data"}

#: the names of ``_PUBLIC`` and the eager ones, written out so that linters and type checkers
#: see the exports of the ``if TYPE_CHECKING:`` block below
__all__ = [
    "ConvertOptions",
    "ConvertResult",
    "DiffReport",
    "EntryMeta",
    "NonTensorData",
    "NonTensorStack",
    "PersistentTensorDict",
    "PtdError",
    "StoreInfo",
    "StoreLocation",
    "StoreNode",
    "TdMeta",
    "TensorDict",
    "TensorDictBase",
    "ValidationReport",
    "__version__",
    "convert",
    "convert_distributed",
    "data",
    "diff",
    "errors",
    "info",
    "is_leaf_nontensor",
    "memmap",
    "validate",
    "verify_conversion",
    "versions",
]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from ptd import data, memmap
    from ptd.containers.base import EntryMeta, TensorDictBase, is_leaf_nontensor
    from ptd.containers.persistent.node import StoreNode
    from ptd.containers.persistent.persistent_tensordict import PersistentTensorDict
    from ptd.containers.tensordict import TensorDict
    from ptd.format.tdmeta import TdMeta
    from ptd.ops.nontensor import NonTensorData, NonTensorStack
    from ptd.report.diff import DiffReport, diff
    from ptd.report.info import StoreInfo, info
    from ptd.report.validate import ValidationReport, validate
    from ptd.storage.location import StoreLocation
    from ptd.storage.versions import __version__, versions
    from ptd.transfer.convert import convert
    from ptd.transfer.distributed import convert_distributed
    from ptd.transfer.options import ConvertOptions, ConvertResult
    from ptd.transfer.verify import verify_conversion


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        if name in _SUBPACKAGES:
            return importlib.import_module(_SUBPACKAGES[name])
        raise AttributeError(f"module 'ptd' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
