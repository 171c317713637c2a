"""The versions of ptd and of everything that reads and writes its data: what a bug report
needs (``ptd --version``, ``ptd version --json``, :func:`ptd.versions`).

Package versions come from the installed distributions' metadata (nothing is imported for
them); a backend adds the C libraries it links (``FormatPolicy.library_versions``: HDF5's is h5py's,
since h5py may bundle its own).

>>> v = versions()
>>> sorted(v)[:4], v["hdf5"].count(".") == 2
(['h5py', 'hdf5', 'hdf5plugin', 'numcodecs'], True)
"""

from __future__ import annotations

import platform
from importlib import metadata

__all__ = ["PACKAGES", "__version__", "versions"]

#: the distributions reported, in the order shown
PACKAGES = ("ptd", "h5py", "zarr", "numcodecs", "hdf5plugin", "numpy", "torch", "typer", "rich")


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


#: ptd's version: the installed package's metadata, the one place it is written
#: (``pyproject.toml``); ``0+unknown`` when ptd runs from a checkout that is not installed
__version__: str = _version("ptd") or "0+unknown"


def versions() -> dict[str, str | None]:
    """``{"ptd": "0.3.0", "python": "3.11.7", "h5py": ..., "hdf5": "1.14.6", ...}``; None
    for a package that is not installed."""
    from ptd.storage.registry import policy, writable_formats

    out: dict[str, str | None] = {"ptd": __version__, "python": platform.python_version()}
    for name in PACKAGES[1:]:
        out[name] = _version(name)
        if name == "h5py":  # the libraries a backend links (h5py's HDF5), after its package
            for backend in writable_formats():
                out.update(policy(backend).library_versions())
    return out
