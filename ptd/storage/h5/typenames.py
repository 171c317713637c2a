"""HDF5 datatypes named in HDF5's words (``H5T_TIME``, ``H5T_OPAQUE``, ``H5T_REFERENCE``...).

Messages about a type ptd cannot read name the type as HDF5's documentation and ``h5dump`` do,
instead of repeating the exception h5py raised while mapping it to numpy ("No NumPy equivalent
for TypeTimeID exists"), which says what failed inside h5py, not what the file holds.

>>> import h5py
>>> hdf5_type_words(h5py.h5t.UNIX_D32LE)
'H5T_TIME (an HDF5 time type, 4 bytes)'
>>> hdf5_type_words(h5py.h5t.STD_REF_OBJ)
'H5T_REFERENCE (HDF5 object references)'
>>> hdf5_type_words(h5py.h5t.NATIVE_INT32)
'H5T_INTEGER (4 bytes)'
"""

from __future__ import annotations

import h5py

__all__ = ["hdf5_type_words"]

#: HDF5's type class -> its name in HDF5's documentation, and what it holds in a few words
_CLASSES: dict[int, tuple[str, str]] = {
    h5py.h5t.INTEGER: ("H5T_INTEGER", ""),
    h5py.h5t.FLOAT: ("H5T_FLOAT", ""),
    h5py.h5t.TIME: ("H5T_TIME", "an HDF5 time type"),
    h5py.h5t.STRING: ("H5T_STRING", "strings"),
    h5py.h5t.BITFIELD: ("H5T_BITFIELD", "bit fields"),
    h5py.h5t.OPAQUE: ("H5T_OPAQUE", "opaque bytes"),
    h5py.h5t.COMPOUND: ("H5T_COMPOUND", "a compound type"),
    h5py.h5t.REFERENCE: ("H5T_REFERENCE", "HDF5 references"),
    h5py.h5t.ENUM: ("H5T_ENUM", "an enumeration"),
    h5py.h5t.VLEN: ("H5T_VLEN", "variable-length sequences"),
    h5py.h5t.ARRAY: ("H5T_ARRAY", "an HDF5 array type"),
}


def hdf5_type_words(tid: h5py.h5t.TypeID) -> str:
    """The HDF5 type ``tid`` in HDF5's words: its class name (``H5T_TIME``) and, in
    parentheses, what it holds and its size (an opaque type's tag too)."""
    try:
        cls = tid.get_class()
    except (ValueError, TypeError, RuntimeError):  # a closed or invalid type id
        return "an HDF5 datatype"
    name, what = _CLASSES.get(cls, (f"HDF5 type class {cls}", ""))
    if cls == h5py.h5t.REFERENCE:
        region = tid.equal(h5py.h5t.STD_REF_DSETREG)
        return f"{name} (HDF5 {'region' if region else 'object'} references)"
    parts = [what] if what else []
    try:
        size = tid.get_size()
    except (ValueError, TypeError, RuntimeError):
        size = None
    if size is not None and cls not in (h5py.h5t.VLEN, h5py.h5t.COMPOUND):
        parts.append(f"{size} byte{'s' if size != 1 else ''}")
    if cls == h5py.h5t.OPAQUE:
        try:
            tag = tid.get_tag()
        except (ValueError, TypeError, RuntimeError):
            tag = b""
        if tag:
            parts.append(f"tag {tag.decode('utf-8', 'replace')!r}")
    return f"{name} ({', '.join(parts)})" if parts else name
