"""Dimension names as netCDF-4 spells them in HDF5: coordinates made dimension scales and
attached to the arrays that name their dimension.

ptd labels the dimensions of every array it writes with a name (``DIMENSION_LABELS``), which
ptd, h5py and HDF5's tools read. netCDF-4 readers (the netCDF library, h5netcdf, and xarray
through them) do not read labels: they name a dimension by the *dimension scale* attached to it
(``DIMENSION_LIST`` on the array, ``REFERENCE_LIST`` on the scale). A coordinate variable is a
1-D array whose name is the name of its dimension; netCDF makes it the scale of that dimension
and looks a dimension up from an array's group towards the root.

:func:`attach_coordinates` is the finishing step of a write: after the arrays exist, each
labelled array gets the scales of its dimensions' coordinates. It reads no data, only the
arrays' shapes and labels; an array attached drops its labels (the scales name its dimensions
now, and netCDF readers would show the labels as an attribute). An array is attached on all of its dimensions or on none (h5netcdf
refuses an array with some dimensions attached and others not): a dimension with no
coordinate leaves its array labelled only, and netCDF readers then name that array's
dimensions themselves (``phony_dim_0``...). netCDF-4's dimension-only scale (a dataset whose
``NAME`` says it is "a netCDF dimension but not a netCDF variable") is not written: it would be
a node of its own in the file, which ptd reads as a key.
"""

from __future__ import annotations

from collections.abc import Iterable

import h5py

from ptd.storage.api import Path
from ptd.storage.h5.properties import scale_name

__all__ = ["attach_coordinates"]

LABELS = "DIMENSION_LABELS"


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


def attach_coordinates(root: h5py.Group, paths: Iterable[Path]) -> None:
    """Make the coordinates of the labelled arrays at ``paths`` (under ``root``) dimension
    scales and attach them, netCDF-4's way (see the module's text)."""
    for path in sorted(set(paths)):
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
            if coord.id == ds.id or len(ds.dims[axis]):
                continue  # a coordinate is its own dimension; one scale per dimension
            ds.dims[axis].attach_scale(coord)
        for node in {ds, *coords}:
            # the scales now spell the names; a label would show to netCDF readers as an
            # attribute of the variable
            if LABELS in node.attrs:
                del node.attrs[LABELS]
