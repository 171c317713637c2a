"""Telling HDF5 from Zarr (and from ptd's memmap directories): by content (the HDF5
signature, ``zarr.json``, a tensordict ``meta.json``) and by suffix.

Content decides for an existing store; the suffix only names the format of a store yet to be
written (``convert data.h5 data.zarr``).

>>> format_of_suffix("runs/data.HDF5"), format_of_suffix("s3://b/x.zarr/"), format_of_suffix("x.npz")
('h5', 'zarr', None)
>>> has_hdf5_signature(b"\\x89HDF\\r\\n\\x1a\\n" + bytes(8))
True
"""

from __future__ import annotations

import os
import posixpath

from ptd.format.memmap_dir import is_memmap_dir, node_kind, read_meta_json
from ptd.format.names import HDF5_SIGNATURE, ZARR_JSON, ZARR_V2_GROUP

__all__ = [
    "DEFAULT_SUFFIX",
    "FORMATS",
    "HEAD_BYTES",
    "MEMMAP_FORMAT",
    "READ_FORMATS",
    "ROOT_ARRAY_HINT",
    "SUFFIXES",
    "file_has_hdf5_signature",
    "format_of_suffix",
    "has_hdf5_signature",
    "store_dir_format",
]

#: what a store whose root is an array is told (ptd's keys are the names of a group's arrays)
ROOT_ARRAY_HINT = (
    "ptd reads groups of named arrays (read it with zarr.open_array, or save it in a group)"
)

#: the format names ptd writes (also the backend names)
FORMATS: tuple[str, ...] = ("h5", "zarr")
#: the format of ptd's (and tensordict's) memmap directories, which the stores' readers
#: (inspect, validate, diff, convert's source) read through a read-only backend
MEMMAP_FORMAT = "memmap"
#: every format a store can be read in
READ_FORMATS: tuple[str, ...] = FORMATS + (MEMMAP_FORMAT,)
#: path suffix (lower case) -> format
SUFFIXES: dict[str, str] = {
    ".h5": "h5",
    ".hdf5": "h5",
    ".hdf": "h5",
    ".he5": "h5",
    ".zarr": "zarr",
    ".zip": "zarr",
}
#: the suffix a new store of each format is given
DEFAULT_SUFFIX: dict[str, str] = {"h5": ".h5", "zarr": ".zarr"}
#: how much of a file's head holds every signature offset checked for a remote file
HEAD_BYTES = 64 << 10


def format_of_suffix(path: str) -> str | None:
    """``"h5"``/``"zarr"`` from a path's (or URL's) suffix, or None."""
    stripped = path.rstrip("/\\")
    ext = posixpath.splitext(stripped)[1] if "://" in stripped else os.path.splitext(stripped)[1]
    return SUFFIXES.get(ext.lower())


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


def store_dir_format(path: str, *, arrays: bool = False) -> str | None:
    """The format of the store (or the node of one) that the local directory ``path`` is, by
    its content: ``"zarr"`` for a directory holding ``zarr.json`` or a v2 ``.zgroup``,
    ``"memmap"`` for a memmap tensordict (a ``meta.json`` describing a TensorDict), None
    otherwise. ``arrays``: a node that is not a group counts too (a v2 ``.zarray``, a memmap
    NonTensorData directory)."""
    markers = (ZARR_JSON, ZARR_V2_GROUP, ".zarray") if arrays else (ZARR_JSON, ZARR_V2_GROUP)
    if any(os.path.isfile(os.path.join(path, m)) for m in markers):
        return "zarr"
    if not arrays:
        return MEMMAP_FORMAT if is_memmap_dir(path) else None
    meta = read_meta_json(path)
    return MEMMAP_FORMAT if meta is not None and node_kind(meta) is not None else None
