"""0.1.0's ``ptd.memmap.writer``: writing and mapping memmap directories, now in
:mod:`ptd.containers.memmap` (``writer`` and ``methods``), re-exported here so that old imports
keep working.

>>> from ptd.memmap.writer import export_memmap, load_memmap
>>> callable(export_memmap) and callable(load_memmap)
True
"""

from ptd.containers.memmap.methods import load_memmap, memmap_inplace, memmap_tensordict
from ptd.containers.memmap.writer import MemmapSummary, export_memmap, tensor_nbytes

__all__ = [
    "MemmapSummary",
    "export_memmap",
    "load_memmap",
    "memmap_inplace",
    "memmap_tensordict",
    "tensor_nbytes",
]
