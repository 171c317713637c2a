"""Memory-mapped directories in tensordict 0.15's layout: :func:`export_memmap` writes one
(from a TensorDict or a store, streamed), :func:`load_memmap` maps one back.

See :mod:`ptd.memmap.writer` for the layout and the guarantees.
"""

from ptd.memmap.loader import decode_key, encode_key
from ptd.memmap.writer import (
    MemmapSummary,
    export_memmap,
    load_memmap,
    memmap_inplace,
    memmap_tensordict,
    tensor_nbytes,
)
from ptd.transfer.slabs import SLAB_BYTES

__all__ = [
    "MemmapSummary",
    "export_memmap",
    "memmap_tensordict",
    "memmap_inplace",
    "load_memmap",
    "tensor_nbytes",
    "encode_key",
    "decode_key",
    "SLAB_BYTES",
]
