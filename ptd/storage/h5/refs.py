"""HDF5 object references and soft links, carried by a copy as the paths they name.

A reference is an address inside its own file, so a copy cannot take its bytes: ptd reads
each object reference as the path of the object it points to (``"/general/devices/probe"``,
``""`` for a null reference) and an HDF5 destination makes a new reference to the object at
that path in the copy (which exists by then: references are written after every node). The
same holds for reference-valued attributes (NWB's ``.specloc``, hdmf's ``target``). Region
references (a selection inside a dataset) are not carried: convert lists them as not copied.

A soft link is a name and a target path; an HDF5 destination makes the same link.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import h5py
import numpy as np

__all__ = [
    "make_soft_link",
    "read_paths",
    "reference_attr_paths",
    "write_attr_refs",
    "write_paths",
]


def _path_of(file: h5py.File, ref: Any) -> str:
    """The path of the object ``ref`` points to ("" for a null reference, or an object
    without a name in the file)."""
    if not ref:
        return ""
    try:
        return file[ref].name or ""
    except (KeyError, ValueError, RuntimeError, OSError):
        return ""


def read_paths(file: h5py.File, values: np.ndarray) -> np.ndarray:
    """The object paths (an array of str) of an array of object references."""
    flat = [_path_of(file, r) for r in np.asarray(values, dtype=object).ravel()]
    return np.asarray(flat, dtype=object).reshape(np.shape(values))


def _ref_of(file: h5py.File, path: str, missing: list[str]) -> Any:
    """A reference to the object at ``path``; a null one (``path`` added to ``missing``) when
    the file holds none there."""
    if path:
        try:
            return file[path].ref
        except (KeyError, ValueError):
            if path not in missing:
                missing.append(path)
    return h5py.Reference()


def write_paths(file: h5py.File, paths: np.ndarray, missing: list[str]) -> np.ndarray:
    """An array of object references (h5py's ``ref_dtype``) to the objects at ``paths`` in
    ``file`` (``""``: a null reference; a path the file does not hold gives a null reference
    and is added to ``missing``)."""
    arr = np.asarray(paths, dtype=object)
    out = np.empty(arr.shape, dtype=h5py.ref_dtype)
    for i, p in np.ndenumerate(arr):
        out[i] = _ref_of(file, str(p), missing)
    return out


def reference_attr_paths(obj: h5py.Group | h5py.Dataset) -> dict[str, Any]:
    """The object-reference attributes of ``obj``: name -> the referenced path (a str), or
    a list (nested as the attribute's shape) of paths."""
    out: dict[str, Any] = {}
    for name in obj.attrs:
        try:
            dt = obj.attrs.get_id(name).dtype
        except (TypeError, ValueError, KeyError):
            continue
        if h5py.check_ref_dtype(dt) is not h5py.Reference:
            continue
        value = obj.attrs[name]
        if isinstance(value, np.ndarray):
            out[name] = read_paths(obj.file, value).tolist()
        else:
            out[name] = _path_of(obj.file, value)
    return out


def write_attr_refs(
    obj: h5py.Group | h5py.Dataset, refs: Mapping[str, Any], missing: list[str]
) -> None:
    """Set each attribute of ``refs`` (name -> path or nested list of paths) on ``obj`` as
    object references to those paths in ``obj``'s file (see :func:`write_paths`)."""
    for name, paths in refs.items():
        if isinstance(paths, str):
            obj.attrs.create(name, _ref_of(obj.file, paths, missing), dtype=h5py.ref_dtype)
        else:
            arr = write_paths(obj.file, np.asarray(paths, dtype=object), missing)
            obj.attrs.create(name, arr, dtype=h5py.ref_dtype)


def make_soft_link(group: h5py.Group, name: str, target: str) -> None:
    """Make the soft link ``name`` in ``group`` to ``target`` (a path in the file)."""
    group[name] = h5py.SoftLink(target)
