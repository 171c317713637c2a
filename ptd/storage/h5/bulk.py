"""Many small HDF5 datasets at once (``H5Backend.create_arrays`` and ``read_many``): a file of
10,000 small datasets converts in seconds.

h5py's ``create_dataset`` parses its options into a new creation property list, a new type and
a new dataspace for every dataset, looks the name up, then writes through its selection
machinery; ``ds[()]`` does much the same on reading. Here:

* datasets sharing a layout (shape, dtype, chunks, filters) share the creation property list,
  type and dataspace of the first one, which h5py creates (so its options are checked and
  applied exactly as for one dataset); the others are ``H5Dcreate`` with those, and one
  ``H5Dwrite`` of their data;
* each parent group's names are listed once (a name already there goes through
  ``create_array``, which replaces the node);
* a whole numeric dataset is read by one ``H5Dread`` into a new array.

Anything that fails is done again through ``create_array``/``read``, whose errors name the key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import h5py
import numpy as np

from ptd.storage.api import Path
from ptd.storage.h5 import codec as h5_codec
from ptd.storage.meta import NewArray

__all__ = ["create", "read_many"]


@dataclass
class _Layout:
    """What datasets of one layout share (taken from the first, which h5py made)."""

    tid: Any
    space: Any
    dcpl: Any


def _layout_key(spec: NewArray) -> str:
    options = sorted((k, repr(v)) for k, v in (spec.options or {}).items())
    return repr((spec.shape, spec.dtype.str, spec.chunks, options))


def create(be: Any, specs: Sequence[NewArray]) -> None:
    """``H5Backend.create_arrays``: see the module doc."""
    names: dict[Path, tuple[h5py.Group, set[str]]] = {}
    layouts: dict[str, _Layout] = {}
    for spec in specs:
        parent = spec.path[:-1]
        if parent not in names:
            # the checks, the parent groups (an existing node at the path is replaced)
            group, name = be._parent_for_create(spec.path)
            names[parent] = (group, set(group.keys()))
            _first(be, group, spec, layouts)
            continue
        group, listed = names[parent]
        name = spec.path[-1]
        key = _layout_key(spec)
        layout = layouts.get(key)
        if name in listed or layout is None or not _create_one(be, group, spec, layout):
            be._check_create(spec.path)
            if name in listed:
                group, _ = be._parent_for_create(spec.path)
            _first(be, group, spec, layouts)
        listed.add(name)


def _first(be: Any, group: h5py.Group, spec: NewArray, layouts: dict[str, _Layout]) -> None:
    """Create ``spec`` through h5py (``create_array``'s path) and keep its layout."""
    opts = dict(spec.options or {})
    if spec.chunks is not None:
        opts["chunks"] = tuple(spec.chunks)
    ds = be._create_dataset(
        group, spec.path[-1], spec.path, spec.shape, spec.dtype, spec.data, opts, spec.attrs
    )
    key = _layout_key(spec)
    if key not in layouts:
        dsid = ds.id
        layouts[key] = _Layout(dsid.get_type(), dsid.get_space(), dsid.get_create_plist())


def _create_one(be: Any, group: h5py.Group, spec: NewArray, layout: _Layout) -> bool:
    """``spec`` created with ``layout`` and filled; False when that failed (nothing is left)."""
    be._check_create(spec.path)
    try:
        name = spec.path[-1].encode("utf-8")
    except UnicodeEncodeError:
        return False
    try:
        dsid = h5py.h5d.create(group.id, name, layout.tid, layout.space, dcpl=layout.dcpl)
    except (ValueError, KeyError, RuntimeError, OSError):
        return False
    be._ds_cache.pop(spec.path, None)
    try:
        if spec.data is not None and spec.data.size:
            data = np.ascontiguousarray(spec.data, dtype=spec.dtype)
            dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, data)
        ds = h5py.Dataset(dsid)
        # what h5py's create_dataset does not set (the layout's options say it per dataset)
        be._set_properties(spec.path, ds, spec.options or {})
        if spec.attrs:
            h5_codec.write_attrs(ds, spec.attrs, be.key_str(spec.path), be.location)
    except (ValueError, TypeError, KeyError, RuntimeError, OSError):
        group.id.links.delete(name)  # done again by create_array, for its error
        return False
    return True


def read_many(be: Any, paths: Sequence[Path]) -> list[np.ndarray]:
    """``H5Backend.read_many``: a whole numeric dataset (with dims, not empty) by one
    ``H5Dread`` into a new array; the others (and any failure) through ``read``."""
    out: list[np.ndarray] = []
    chunked = be._chunked
    for path in paths:
        entry = be._entry(path)
        ds, shape, dtype = entry.ds, entry.shape, entry.dtype
        if chunked is not None and chunked.serves(entry):
            # decoded by ptd, its chunks' headers checked: never HDF5's filters
            out.append(be.read(path, ()))
            continue
        if shape and 0 not in shape and dtype.kind in "biufc" and dtype.fields is None:
            arr = np.empty(shape, dtype)
            try:
                ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, arr)
                out.append(arr)
                continue
            except (OSError, ValueError, TypeError, KeyError, RuntimeError):
                pass  # read again, for the error naming the key
        out.append(be.read(path, ()))
    return out
