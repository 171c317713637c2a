"""ptd: persistent tensor dicts on HDF5 files and Zarr v3 stores.

>>> import torch, tempfile, os
>>> from ptd import PersistentTensorDict
>>> with tempfile.TemporaryDirectory() as d:
...     p = PersistentTensorDict.from_dict({"obs": torch.arange(6.).reshape(3, 2)}, os.path.join(d, "x.h5"))
...     print(p[torch.tensor([2, 0])]["obs"])
...     p.close()
tensor([[4., 5.],
        [0., 1.]])
"""

from __future__ import annotations

from . import errors
from .base import EntryMeta, TensorDictBase, is_leaf_nontensor

# Imported eagerly (about 20 ms, no h5py/zarr): ``ptd.convert`` etc. are functions that share
# their submodule's name, and a lazy import would let ``import ptd.convert`` shadow the function.
from .convert import ConvertResult, convert  # noqa: E402
from .errors import PtdError
from .info import StoreInfo, info  # noqa: E402
from .nontensor import NonTensorData, NonTensorStack
from .tensordict import TensorDict
from .validate import ValidationReport, validate  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "TensorDict",
    "TensorDictBase",
    "PersistentTensorDict",
    "NonTensorData",
    "NonTensorStack",
    "EntryMeta",
    "PtdError",
    "errors",
    "is_leaf_nontensor",
    "convert",
    "info",
    "validate",
    "ConvertResult",
    "StoreInfo",
    "ValidationReport",
    "__version__",
]


def __getattr__(name: str):  # lazy: the persistent layer pulls in the backends registry
    if name == "PersistentTensorDict":
        from .persistent import PersistentTensorDict

        return PersistentTensorDict
    raise AttributeError(f"module 'ptd' has no attribute {name!r}")
