"""The import path of ptd 0.1.0 for memory-mapped directories, kept working.

The package now lives at :mod:`ptd.containers.memmap`; this module re-exports its public names
so that code written against 0.1.0 (``import ptd.memmap``, ``from ptd.memmap import
load_memmap``) keeps running. New code may use either path: they are the same objects.

>>> import ptd.memmap
>>> from ptd.containers import memmap
>>> ptd.memmap.load_memmap is memmap.load_memmap
True
"""

from ptd.containers.memmap import (
    SLAB_BYTES,
    MemmapFuture,
    MemmapSummary,
    decode_key,
    encode_key,
    export_memmap,
    is_archive,
    load_into,
    load_memmap,
    memmap_inplace,
    memmap_tensordict,
    tensor_nbytes,
)

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
    "memmap_inplace",
    "memmap_tensordict",
    "tensor_nbytes",
]
