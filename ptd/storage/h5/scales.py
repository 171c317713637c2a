"""Dimension names as netCDF-4 spells them in HDF5: coordinates made dimension scales and
attached to the arrays that name their dimension, and a dimension-only scale for each
dimension that has no coordinate.

ptd labels the dimensions of every array it writes with a name (``DIMENSION_LABELS``), which
ptd, h5py and HDF5's tools read. netCDF-4 readers (the netCDF library, h5netcdf, and xarray
through them) do not read labels: they name a dimension by the *dimension scale* attached to it
(``DIMENSION_LIST`` on the array, ``REFERENCE_LIST`` on the scale). A coordinate variable is a
1-D array whose name is the name of its dimension; netCDF makes it the scale of that dimension
and looks a dimension up from an array's group towards the root.

:func:`attach_coordinates` is the finishing step of a write: after the arrays exist, each
labelled array gets the scales of its dimensions' coordinates. It reads no data, only the
arrays' shapes and labels; an array attached drops its labels (the scales name its dimensions
now, and netCDF readers would show the labels as an attribute).

A dimension that no coordinate defines (no node of its name in the array's group or above)
gets what netCDF-4 writes for a dimension that is no variable: a float32 dataset named like
the dimension, of its length, with no data (its storage is never allocated), made a dimension
scale whose ``NAME`` is netCDF's marker text and the length
(:func:`ptd.storage.spelled.dimension_only_name`), with netCDF's ``_Netcdf4Dimid``. It is
written in the common group of the arrays naming that dimension with that length (where
their look-up towards the root finds it); arrays naming it with another length get one in
their own common group, unless that is the same group (the more common length gets it, the
others keep their labels). ptd's readers list no such dataset as a key
(:mod:`ptd.storage.h5.links`), as netCDF and xarray do not.

An array is attached on all of its dimensions or on none (h5netcdf refuses an array with some
dimensions attached and others not): an unnamed dimension, or a name that a node which is no
coordinate holds (a 2-D array called like the dimension, which netCDF-4 itself would rename
``_nc4_non_coord_<name>``), leaves the array labelled only, and netCDF readers name its
dimensions themselves (``phony_dim_0``...). That renaming is not done here: such a name is a
key ptd keeps as it is.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

import h5py
import numpy as np

from ptd.storage import spelled
from ptd.storage.api import Path
from ptd.storage.h5.properties import scale_name

__all__ = ["attach_coordinates", "write_dimensions"]

LABELS = "DIMENSION_LABELS"
#: netCDF-4's attribute numbering a dimension (h5netcdf and netCDF-C write it on every scale)
DIMID = "_Netcdf4Dimid"


def _labels(ds: h5py.Dataset) -> list[str]:
    try:
        return [str(dim.label or "") for dim in ds.dims]
    except (OSError, TypeError, ValueError, KeyError):
        return []


def _coordinate(root: h5py.Group, group: Path, name: str, length: int) -> h5py.Dataset | None:
    """The coordinate of dimension ``name`` (of ``length``) seen from ``group``: the nearest
    dataset called ``name`` in ``group`` or one of its parents, when it is 1-D, of that length,
    and names its own dimension ``name`` (or not at all); else None."""
    for depth in range(len(group), -1, -1):
        here = root["/".join(group[:depth])] if depth else root
        node = here.get(name)
        if node is None:
            continue
        if not isinstance(node, h5py.Dataset) or node.shape != (length,):
            return None
        own = _labels(node)
        if own and own[0] not in ("", name):
            return None
        if node.is_scale and scale_name(node) != name:
            return None
        return node
    return None


def _taken(root: h5py.Group, group: Path, name: str) -> bool:
    """Whether a link called ``name`` is in ``group`` or one of its parents."""
    for depth in range(len(group), -1, -1):
        here = root["/".join(group[:depth])] if depth else root
        if here.id.links.exists(name.encode()):
            return True
    return False


def _common(groups: list[Path]) -> Path:
    """The deepest group that holds (or is) every group of ``groups``."""
    first = groups[0]
    n = len(first)
    for g in groups[1:]:
        n = min(n, len(g))
        n = next((i for i in range(n) if g[i] != first[i]), n)
    return first[:n]


def _next_dimid(root: h5py.Group) -> int:
    """One more than the largest ``_Netcdf4Dimid`` in the file (0 when none)."""
    top = [-1]

    def see(_name: str, obj: object) -> None:
        if isinstance(obj, h5py.Dataset) and DIMID in obj.attrs:
            with contextlib.suppress(TypeError, ValueError, IndexError):
                top[0] = max(top[0], int(np.asarray(obj.attrs[DIMID]).reshape(-1)[0]))

    root.file.visititems(see)
    return top[0] + 1


class _Dimids:
    """netCDF-4's dimension ids handed out: one more than the largest in the file, on."""

    def __init__(self, root: h5py.Group) -> None:
        self.root = root
        self.next: int | None = None

    def give(self, scale: h5py.Dataset) -> None:
        """Number ``scale`` (unless it has a number): netCDF-C numbers the scales without
        one itself, from 0, and two dimensions of one number are read as one."""
        if DIMID in scale.attrs:
            return
        if self.next is None:
            self.next = _next_dimid(self.root)
        scale.attrs[DIMID] = np.int32(self.next)
        self.next += 1


def write_dimensions(
    root: h5py.Group, paths: Iterable[Path], dimids: _Dimids | None = None
) -> list[Path]:
    """Write netCDF-4's dimension-only scale for each dimension that the labelled arrays at
    ``paths`` name and no node defines (see the module's text); the paths written."""
    dimids = dimids if dimids is not None else _Dimids(root)
    wanted: dict[str, dict[int, list[Path]]] = {}  # name -> length -> the arrays' groups
    for path in sorted(set(paths)):
        ds = root.get("/".join(path)) if path else None
        if not isinstance(ds, h5py.Dataset):
            continue
        labels = _labels(ds)
        if not labels or not all(labels):
            continue  # never attached: no scale needed
        for axis, name in enumerate(labels):
            if "/" not in name and name not in (".", "..") and not _taken(root, path[:-1], name):
                wanted.setdefault(name, {}).setdefault(int(ds.shape[axis]), []).append(path[:-1])
    written: list[Path] = []
    for name in sorted(wanted):
        used: set[Path] = set()
        # the length most arrays name first: it gets the scale where lengths share a group
        for length, groups in sorted(wanted[name].items(), key=lambda kv: (-len(kv[1]), kv[0])):
            where = _common(groups)
            if where in used:
                continue
            used.add(where)
            group = root["/".join(where)] if where else root
            scale = group.create_dataset(name, shape=(length,), dtype=">f4")
            scale.make_scale(spelled.dimension_only_name(length))
            dimids.give(scale)
            written.append(where + (name,))
    return written


def attach_coordinates(root: h5py.Group, paths: Iterable[Path]) -> None:
    """Make the coordinates of the labelled arrays at ``paths`` (under ``root``) dimension
    scales and attach them, netCDF-4's way, writing a dimension-only scale for each
    dimension no coordinate defines (see the module's text)."""
    paths = sorted(set(paths))
    dimids = _Dimids(root)
    write_dimensions(root, paths, dimids)
    for path in paths:
        ds = root.get("/".join(path)) if path else None
        if not isinstance(ds, h5py.Dataset):
            continue
        labels = _labels(ds)
        if not labels or not all(labels):
            continue
        coords = [_coordinate(root, path[:-1], n, ds.shape[i]) for i, n in enumerate(labels)]
        if any(c is None for c in coords):
            continue
        for axis, (name, coord) in enumerate(zip(labels, coords, strict=True)):
            assert coord is not None
            if not coord.is_scale:
                coord.make_scale(name)
            dimids.give(coord)
            if coord.id == ds.id or len(ds.dims[axis]):
                continue  # a coordinate is its own dimension; one scale per dimension
            ds.dims[axis].attach_scale(coord)
        for node in {ds, *coords}:
            # the scales now spell the names; a label would show to netCDF readers as an
            # attribute of the variable
            if LABELS in node.attrs:
                del node.attrs[LABELS]
