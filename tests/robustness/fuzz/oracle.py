"""What plain h5py and zarr-python read from a store: the values ptd must match.

The oracle reads one key at a time, on demand (only the leaves ptd returned are looked up).
It never decodes a pickle (an array whose metadata names one is :data:`UNKNOWN`), never reads
through a link or a file that is not a regular file inside the store, and never reads an array
larger than :data:`MAX_BYTES` (those are :data:`UNKNOWN` too: nothing is compared).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .bases import SECRET_FLOAT, SECRET_INT

MAX_BYTES = 64 << 20


class Unknown:
    """The oracle cannot tell (too big, would unpickle, would follow a link)."""

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = Unknown()


class OracleError(Exception):
    """The reference library raised: ptd must raise too."""


def holds_secret(a: np.ndarray) -> bool:
    """Whether an array holds a value only the "outside" stores hold."""
    if a.dtype.kind in "iu":
        return bool(np.any(a == SECRET_INT))
    if a.dtype.kind == "f":
        return bool(np.any(a == SECRET_FLOAT))
    return False


def same_values(ours: np.ndarray, theirs: np.ndarray) -> str | None:
    """None when equal (bitwise for the same dtype or item size, NaN equal to NaN), else what
    differs."""
    if ours.shape != theirs.shape:
        return f"shape {list(ours.shape)} != {list(theirs.shape)}"
    if ours.dtype.itemsize == theirs.dtype.itemsize and ours.dtype.kind in "biuf":
        if np.ascontiguousarray(ours).tobytes() == np.ascontiguousarray(theirs).tobytes():
            return None
        return f"values differ ({ours.dtype} vs {theirs.dtype})"
    try:
        if np.array_equal(ours.astype(np.float64), theirs.astype(np.float64), equal_nan=True):
            return None
    except (TypeError, ValueError):
        pass
    return f"values differ ({ours.dtype} vs {theirs.dtype})"


# ------------------------------------------------------------------------------ HDF5
class H5Oracle:
    """``h5py.File(path)[key][()]``, with external links, external raw storage and virtual
    datasets left unread (UNKNOWN)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: Any = None
        self._open_error: str | None = None

    def __enter__(self) -> H5Oracle:
        import h5py

        try:
            self._file = h5py.File(self.path, "r")
        except Exception as err:  # noqa: BLE001 - whatever h5py raises is the answer
            self._open_error = f"{type(err).__name__}: {err}"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._file is not None:
            with contextlib.suppress(Exception):
                self._file.close()

    def read(self, key: str) -> np.ndarray | Unknown:
        """The values, or UNKNOWN; raises :class:`OracleError` when h5py raises."""
        import h5py

        if self._open_error is not None:
            raise OracleError(self._open_error)
        try:
            parts = key.split("/")
            node: Any = self._file
            for part in parts:
                link = node.get(part, getlink=True)
                if isinstance(link, h5py.ExternalLink):
                    return UNKNOWN
                node = node[part]
            if not isinstance(node, h5py.Dataset):
                raise OracleError(f"{key} is not a dataset")
            plist = node.id.get_create_plist()
            if plist.get_external_count() or plist.get_layout() == h5py.h5d.VIRTUAL:
                return UNKNOWN
            if node.dtype.itemsize * max(1, node.size) > MAX_BYTES:
                return UNKNOWN
            if node.dtype.kind not in "biuf":
                return UNKNOWN
            return np.asarray(node[()])
        except OracleError:
            raise
        except Exception as err:  # noqa: BLE001
            raise OracleError(f"{type(err).__name__}: {err}") from None


# ------------------------------------------------------------------------------ Zarr
def _plain_files(path: Path) -> bool:
    """Every entry under ``path`` is a regular file or a directory, none a link."""
    for root, dirs, files in os.walk(path, followlinks=False):
        for name in dirs + files:
            mode = os.lstat(os.path.join(root, name)).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                return False
    return True


class ZarrOracle:
    """``zarr.open_group(path, mode="r")[key][...]``, without pickles or links."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._root: Any = None
        self._open_error: str | None = None

    def __enter__(self) -> ZarrOracle:
        import zarr

        if not _plain_files(self.path):
            self._open_error = "links"
            return self
        try:
            try:
                self._root = zarr.open_group(str(self.path), mode="r")
            except Exception:  # noqa: BLE001
                # ptd's documented policy: consolidated metadata zarr cannot parse is not
                # used; the nodes' own documents are the reference then
                self._root = zarr.open_group(str(self.path), mode="r", use_consolidated=False)
        except Exception as err:  # noqa: BLE001
            self._open_error = f"{type(err).__name__}: {err}"
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def read(self, key: str) -> np.ndarray | Unknown:
        if self._open_error == "links":
            return UNKNOWN
        if self._open_error is not None:
            raise OracleError(self._open_error)
        try:
            arr = self._root[key]
            meta = arr.metadata.to_dict()
            if "pickle" in json.dumps(meta, default=str).lower():
                return UNKNOWN
            dtype = np.dtype(arr.dtype)
            if dtype.kind not in "biuf":
                return UNKNOWN
            if dtype.itemsize * max(1, int(np.prod(arr.shape, dtype=object))) > MAX_BYTES:
                return UNKNOWN
            return np.asarray(arr[...])
        except Exception as err:  # noqa: BLE001
            raise OracleError(f"{type(err).__name__}: {err}") from None


def oracle_for(fmt: str, path: Path) -> H5Oracle | ZarrOracle:
    return H5Oracle(path) if fmt == "h5" else ZarrOracle(path)


def output_arrays(fmt: str, path: Path) -> Iterator[tuple[str, np.ndarray]]:
    """Every numeric array of a store ptd wrote (a convert's output: trusted), by key."""
    if fmt == "h5":
        import h5py

        with h5py.File(path, "r") as f:
            found: list[str] = []
            f.visititems(lambda n, o: found.append(n) if isinstance(o, h5py.Dataset) else None)
            for name in found:
                ds = f[name]
                if ds.dtype.kind in "biuf" and ds.size * ds.dtype.itemsize <= MAX_BYTES:
                    yield name, np.asarray(ds[()])
    else:
        import zarr

        root = zarr.open_group(str(path), mode="r")
        for name, arr in root.members(max_depth=None):
            if not isinstance(arr, zarr.Array):
                continue
            dtype = np.dtype(arr.dtype)
            if dtype.kind in "biuf" and dtype.itemsize * arr.size <= MAX_BYTES:
                yield name, np.asarray(arr[...])
