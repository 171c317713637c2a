"""The HDF5 signature, and what ptd tells a store whose root is an array: the content tests
the format registry (:mod:`ptd.storage.registry`) builds its detection on.

>>> has_hdf5_signature(b"\\x89HDF\\r\\n\\x1a\\n" + bytes(8))
True
"""

from __future__ import annotations

import os

from ptd.format.names import HDF5_SIGNATURE

__all__ = [
    "HEAD_BYTES",
    "ROOT_ARRAY_HINT",
    "file_has_hdf5_signature",
    "has_hdf5_signature",
]

#: what a store whose root is an array is told (ptd's keys are the names of a group's arrays)
ROOT_ARRAY_HINT = (
    "ptd reads groups of named arrays (read it with zarr.open_array, or save it in a group)"
)

#: how much of a file's head holds every signature offset checked for a remote file
HEAD_BYTES = 64 << 10


def _signature_offsets(size: int) -> list[int]:
    """Where an HDF5 signature may sit: 0, then after a userblock of 512, 1024, 2048, ..."""
    out, offset = [], 0
    while offset + len(HDF5_SIGNATURE) <= size:
        out.append(offset)
        offset = 512 if offset == 0 else offset * 2
    return out


def has_hdf5_signature(head: bytes) -> bool:
    """The HDF5 signature at one of its legal offsets within ``head`` (a file's first bytes)."""
    n = len(HDF5_SIGNATURE)
    return any(head[o : o + n] == HDF5_SIGNATURE for o in _signature_offsets(len(head)))


def file_has_hdf5_signature(path: str) -> bool:
    """:func:`has_hdf5_signature` for a local file, reading only the candidate offsets."""
    n = len(HDF5_SIGNATURE)
    with open(path, "rb") as f:
        for offset in _signature_offsets(os.fstat(f.fileno()).st_size):
            f.seek(offset)
            if f.read(n) == HDF5_SIGNATURE:
                return True
    return False
