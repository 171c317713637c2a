"""HDF5 filter plugins: blosc, blosc2, bzip2, lz4, zstd... (written by PyTables and by
``hdf5plugin`` users) made available to h5py, named in descriptions and in errors.

``hdf5plugin`` (a ptd dependency) registers these filters with the HDF5 library h5py uses when
it is imported; :func:`load` does that once, before ptd opens an HDF5 file. Without it (or for a
filter no installed package provides) a read fails inside HDF5 with a message about a plugin
directory: :func:`missing_filter_message` names the filter and the package that provides it.

>>> FILTERS[32015].name, FILTERS[32015].package
('zstd', 'hdf5plugin')
"""

from __future__ import annotations

from typing import Any, NamedTuple

import h5py

__all__ = [
    "FILTERS",
    "describe_filter",
    "describe_pipeline",
    "load",
    "loaded",
    "missing_filters",
]


class Filter(NamedTuple):
    name: str
    package: str


#: registered HDF5 filter ids -> their name and the Python package that provides them
FILTERS: dict[int, Filter] = {
    32000: Filter("lzf", "h5py"),
    32001: Filter("blosc", "hdf5plugin"),
    32004: Filter("lz4", "hdf5plugin"),
    32008: Filter("bitshuffle", "hdf5plugin"),
    32013: Filter("zfp", "hdf5plugin"),
    32015: Filter("zstd", "hdf5plugin"),
    32017: Filter("sz", "hdf5plugin"),
    32018: Filter("fcidecomp", "hdf5plugin"),
    32024: Filter("sz3", "hdf5plugin"),
    32026: Filter("blosc2", "hdf5plugin"),
    32028: Filter("sperr", "hdf5plugin"),
    32033: Filter("htj2k", "hdf5plugin"),
    307: Filter("bzip2", "hdf5plugin"),
}
#: blosc's compressor codes (the 7th filter value)
_BLOSC_CNAMES = {0: "blosclz", 1: "lz4", 2: "lz4hc", 3: "snappy", 4: "zlib", 5: "zstd"}

_state: dict[str, bool] = {}


def load() -> bool:
    """Register ``hdf5plugin``'s filters with HDF5 (once); whether it is installed."""
    if "loaded" not in _state:
        try:
            import hdf5plugin  # noqa: F401 - importing it registers the filters
        except ImportError:
            _state["loaded"] = False
        else:
            _state["loaded"] = True
    return _state["loaded"]


def loaded() -> bool:
    """Whether ``hdf5plugin``'s filters are registered (after :func:`load`)."""
    return _state.get("loaded", False)


def describe_filter(code: int, values: tuple[int, ...]) -> str | None:
    """A plugin filter's description (``"zstd(3)"``, ``"blosc(lz4,5)"``, ``"bzip2"``), or None
    for a filter this table does not know."""
    known = FILTERS.get(code)
    if known is None:
        return None
    name = known.name
    if name == "blosc" and len(values) >= 7:
        return f"blosc({_BLOSC_CNAMES.get(values[6], values[6])},{values[4]})"
    if name == "zstd" and values:
        return f"zstd({values[0]})"
    if name == "bzip2" and values:
        return f"bzip2({values[0]})"
    return name


def missing_filters(dcpl: Any) -> list[str]:
    """The filters of a dataset creation property list that HDF5 cannot apply here, each as
    ``"blosc (HDF5 filter 32001, from the hdf5plugin package)"``."""
    out = []
    for i in range(dcpl.get_nfilters()):
        code = dcpl.get_filter(i)[0]
        if h5py.h5z.filter_avail(code):
            continue
        known = FILTERS.get(code)
        if known is None:
            out.append(f"HDF5 filter {code} (an unknown plugin: set HDF5_PLUGIN_PATH)")
        else:
            out.append(f"{known.name} (HDF5 filter {code}, from the {known.package} package)")
    return out


_BUILTIN = {
    h5py.h5z.FILTER_DEFLATE: "gzip",
    h5py.h5z.FILTER_SHUFFLE: "shuffle",
    h5py.h5z.FILTER_FLETCHER32: "fletcher32",
    h5py.h5z.FILTER_SZIP: "szip",
    h5py.h5z.FILTER_NBIT: "nbit",
    h5py.h5z.FILTER_SCALEOFFSET: "scaleoffset",
}


def describe_pipeline(dcpl: Any) -> str | None:
    """The filters of a chunked dataset's creation property list, e.g. ``"shuffle+gzip(4)"``,
    ``"blosc(lz4,5)"``; None without filters."""
    names = []
    for i in range(dcpl.get_nfilters()):
        code, _flags, values, _name = dcpl.get_filter(i)
        if code == h5py.h5z.FILTER_DEFLATE and values:
            names.append(f"gzip({values[0]})")
        else:
            names.append(
                _BUILTIN.get(code) or describe_filter(code, tuple(values)) or f"filter{code}"
            )
    return "+".join(names) or None
