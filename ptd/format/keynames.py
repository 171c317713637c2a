"""Which key names a store format cannot hold under that name, and why.

HDF5 takes any name but ``"."`` and names holding ``/`` (which ptd never lists). Zarr stores
are key-value stores whose keys are ``/``-separated paths, so some names that are legal in HDF5
cannot be a zarr node's name: ptd refuses them by name (``convert`` stops, or with
``skip_unsupported`` leaves them out and lists them as not copied) rather than renaming them.

>>> refused_name("zarr", "back\\\\slash")
"it holds a backslash, which zarr's stores read as a path separator ('back' / 'slash')"
>>> refused_name("zarr", "zarr.json")
'it is the name of a zarr metadata document'
>>> refused_name("zarr", "obs") is None, refused_name("h5", "__x") is None
(True, True)
"""

from __future__ import annotations

from ptd.errors import PtdKeyError

__all__ = ["refused_name", "check_key_names", "ZARR_METADATA_NAMES"]

#: names of zarr's own metadata documents (v3 and v2)
ZARR_METADATA_NAMES = frozenset({"zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"})


def refused_name(fmt: str, name: str) -> str | None:
    """Why a node named ``name`` cannot be written to a ``fmt`` store, or None when it can."""
    if fmt != "zarr":
        return None
    if "\\" in name:
        parts = " / ".join(repr(p) for p in name.split("\\"))
        return f"it holds a backslash, which zarr's stores read as a path separator ({parts})"
    if name in ZARR_METADATA_NAMES:
        return "it is the name of a zarr metadata document"
    if name in (".", ".."):
        return f"{name!r} is not a node name in a zarr store"
    if name.startswith("__"):
        return "names starting with '__' are reserved by the Zarr v3 specification"
    return None


def check_key_names(fmt: str, path: tuple[str, ...], location: str) -> None:
    """Raise PtdKeyError naming the key when a ``fmt`` store cannot hold one of its names."""
    for part in path:
        why = refused_name(fmt, part)
        if why is not None:
            raise PtdKeyError(f"cannot create key {'/'.join(path)!r} in {location}: {why}")
