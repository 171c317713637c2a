"""The attributes through which a format spells a property: one table per format.

A property of an array (its dimension names, the value that marks a missing element) is one
thing; each format, and each tool writing it, spells it its own way. HDF5 names dimensions
with dimension scales (``DIMENSION_LIST`` on the array, ``CLASS``/``NAME``/``REFERENCE_LIST``
on the scale) or labels (``DIMENSION_LABELS``); xarray names a Zarr v2 array's dimensions in
``_ARRAY_DIMENSIONS``; netCDF-4 adds its own bookkeeping (``_Netcdf4Dimid``...) and states the
fill value in ``_FillValue``. Those attributes are not the user's: ``diff``, ``--verify`` and
``--metadata-only`` compare the property (:class:`~ptd.storage.properties.ArrayProperties`),
never its spelling; ``convert`` writes the property in the destination's own spelling and
never copies the source's; ``inspect`` shows the property once.

The table is one module for both formats (not one per format package) because code above the
storage layer asks it by format name without importing h5py or zarr, and because the same
spelling (netCDF's ``_FillValue``, xarray's) crosses formats: the entries for one format sit
together in :data:`SPELLINGS` under its name.

>>> user_attrs("h5", {"units": "K", "DIMENSION_LABELS": ["t"], "_Netcdf4Dimid": 0})
{'units': 'K'}
>>> user_attrs("h5", {"CLASS": "mine", "NAME": "x"})  # not a dimension scale: the user's
{'CLASS': 'mine', 'NAME': 'x'}
>>> user_attrs("zarr", {"_ARRAY_DIMENSIONS": ["t"], "_FillValue": "AAAAAAAA+H8=", "a": 1})
{'a': 1}
>>> spelling("h5", "REFERENCE_LIST").prop
'dimension_names'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ptd.format.names import PTD_MAXSHAPE_ATTR

__all__ = [
    "DIMENSION_ONLY",
    "DIMENSION_SCALE",
    "FILL_ATTR",
    "SPELLINGS",
    "Spelling",
    "dimension_only_name",
    "is_dimension_only_name",
    "is_spelling",
    "spelling",
    "user_attrs",
]

#: the ``CLASS`` of an HDF5 dimension scale
DIMENSION_SCALE = "DIMENSION_SCALE"
#: netCDF's (and CF's, and xarray's) name for the value that marks a missing element
FILL_ATTR = "_FillValue"
#: how netCDF-4 begins the ``NAME`` of the dimension scale it writes for a dimension that is
#: no variable (no coordinate array): a float32 dataset of the dimension's length with no
#: data, named like the dimension. It states a dimension and its length, and is no key
#: (netCDF-C ``nc4hdf.c``, ``DIM_WITHOUT_VARIABLE``; h5netcdf writes the same)
DIMENSION_ONLY = "This is a netCDF dimension but not a netCDF variable."


@dataclass(frozen=True)
class Spelling:
    """One attribute through which a format states a property."""

    #: the attribute's name
    attr: str
    #: the property it states: ``dimension_names``, ``fill_value``, ``maxshape``,
    #: ``references`` (an array of object references, read as their paths), ``links`` (a
    #: group's soft links, listed as links), or ``netcdf`` (the netCDF library's own
    #: bookkeeping, rebuilt by it from the properties)
    prop: str
    #: who writes it, and where that is specified
    source: str
    #: only a spelling on a dimension scale (HDF5's ``CLASS``/``NAME`` elsewhere are the user's)
    on_scales_only: bool = False


#: the table, by format name (:attr:`FormatPolicy.name`)
SPELLINGS: dict[str, tuple[Spelling, ...]] = {
    "h5": (
        Spelling("DIMENSION_LABELS", "dimension_names", "HDF5 dimension scales (H5DS labels)"),
        Spelling("DIMENSION_LIST", "dimension_names", "HDF5 dimension scales (attached scales)"),
        Spelling("REFERENCE_LIST", "dimension_names", "HDF5 dimension scales (back references)"),
        Spelling("CLASS", "dimension_names", "HDF5 dimension scales (the scale marker)", True),
        Spelling("NAME", "dimension_names", "HDF5 dimension scales (the scale's name)", True),
        Spelling("_Netcdf4Dimid", "netcdf", "netCDF-4: a dimension's id"),
        Spelling("_Netcdf4Coordinates", "netcdf", "netCDF-4: a variable's dimension ids"),
        Spelling("_nc3_strict", "netcdf", "netCDF-4: the file is netCDF-3 classic"),
        Spelling("_NCProperties", "netcdf", "netCDF-4: the library that wrote the file"),
        Spelling("_SuperblockVersion", "netcdf", "netCDF-4: the HDF5 superblock version"),
        Spelling("_IsNetcdf4", "netcdf", "netCDF-4: written by the netCDF-4 library"),
        Spelling(FILL_ATTR, "fill_value", "netCDF / CF: the fill value (h5netcdf, netCDF4)"),
    ),
    "zarr": (
        Spelling("_ARRAY_DIMENSIONS", "dimension_names", "xarray: a Zarr v2 array's dimensions"),
        Spelling(FILL_ATTR, "fill_value", "xarray: the CF fill value of a Zarr v3 array"),
        Spelling(PTD_MAXSHAPE_ATTR, "maxshape", "ptd: an HDF5 maxshape kept in zarr"),
        Spelling("zarr_dtype", "references", "hdmf-zarr: an array of object references"),
        Spelling("zarr_link", "links", "hdmf-zarr: a group's soft links"),
    ),
}
_BY_NAME = {fmt: {s.attr: s for s in table} for fmt, table in SPELLINGS.items()}


def dimension_only_name(length: int) -> str:
    """The ``NAME`` netCDF-4 gives the scale of a dimension of ``length`` that is no variable:
    :data:`DIMENSION_ONLY`, then the length right-aligned in ten characters.

    >>> dimension_only_name(3)[-11:]
    '.         3'
    """
    return f"{DIMENSION_ONLY}{int(length):10d}"


def is_dimension_only_name(name: Any) -> bool:
    """Whether a dimension scale's ``NAME`` (text or bytes) is netCDF-4's marker of a
    dimension that is no variable.

    >>> is_dimension_only_name(dimension_only_name(12).encode())
    True
    >>> is_dimension_only_name("time")
    False
    """
    return name is not None and _text(name).startswith(DIMENSION_ONLY)


def spelling(fmt: str, attr: str) -> Spelling | None:
    """The table's entry for the attribute ``attr`` of format ``fmt``, None when it has none."""
    return _BY_NAME.get(fmt, {}).get(attr)


def _text(value: Any) -> str:
    if isinstance(value, np.ndarray) and value.size == 1:
        value = value.reshape(-1)[0]
    if isinstance(value, (bytes, np.bytes_)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def is_scale(attrs: Mapping[str, Any]) -> bool:
    """Whether ``attrs`` are those of an HDF5 dimension scale (``CLASS`` is
    ``DIMENSION_SCALE``)."""
    value = attrs.get("CLASS")
    return value is not None and _text(value) == DIMENSION_SCALE


def is_spelling(fmt: str, attr: str, attrs: Mapping[str, Any]) -> bool:
    """Whether ``attr``, among a node's ``attrs``, spells a property in format ``fmt``."""
    entry = spelling(fmt, attr)
    if entry is None:
        return False
    return not entry.on_scales_only or is_scale(attrs)


def user_attrs(fmt: str, attrs: Mapping[str, Any]) -> dict[str, Any]:
    """``attrs`` without those that spell a property in format ``fmt``."""
    table = _BY_NAME.get(fmt)
    if not table:
        return dict(attrs)
    return {k: v for k, v in attrs.items() if not is_spelling(fmt, k, attrs)}
