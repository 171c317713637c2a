"""Memory-mapped directories in tensordict 0.15's layout: :func:`export_memmap` writes one
(from a TensorDict or a store, streamed), :func:`load_memmap` maps one back.

See :mod:`ptd.containers.memmap.writer` for the layout and the guarantees.
"""

from ptd.containers.memmap.archive import is_archive
from ptd.containers.memmap.loader import decode_key, encode_key
from ptd.containers.memmap.make import make_memmap
from ptd.containers.memmap.methods import (
    MemmapFuture,
    load_into,
    load_memmap,
    memmap_inplace,
    memmap_tensordict,
)
from ptd.containers.memmap.writer import MemmapSummary, export_memmap, tensor_nbytes
from ptd.transfer.slabs import SLAB_BYTES

__all__ = [
    "SLAB_BYTES",
    "MemmapFuture",
    "MemmapSummary",
    "decode_key",
    "encode_key",
    "export_memmap",
    "is_archive",
    "load_into",
    "load_memmap",
    "make_memmap",
    "memmap_inplace",
    "memmap_tensordict",
    "tensor_nbytes",
]
