"""The bytes each array of a zarr store occupies: zarr states no stored size, so they are
the sizes of its chunk files (``ZarrBackend.stored_sizes``), from one listing of a directory,
a zip file or a URL prefix.
"""

from __future__ import annotations

import os
import zipfile
from typing import Any

from ptd.format.names import ZARR_JSON
from ptd.storage.api import Path
from ptd.storage.remote import filesystem, is_remote

__all__ = ["chunk_file_sizes"]


def chunk_file_sizes(
    store_path: str, arrays: list[Path], storage_options: dict[str, Any] | None = None
) -> dict[Path, int]:
    """Chunk bytes of each array of a zarr store (directory, zip or URL), from file sizes.

    zarr reports no stored size; this sums the sizes of the files under each array's prefix,
    except its ``zarr.json``. Stores that cannot be listed give an empty dict.
    """
    if not arrays:
        return {}
    wanted = {"/".join(p): p for p in arrays}
    sizes: dict[Path, int] = {p: 0 for p in arrays}

    def account(rel: str, size: int) -> None:
        parts = rel.split("/")
        if parts[-1] in (ZARR_JSON, ".zarray", ".zattrs", ".zgroup", ".zmetadata"):
            return  # metadata (v3 and v2), not chunks
        for i in range(1, len(parts)):
            hit = wanted.get("/".join(parts[:i]))
            if hit is not None:
                sizes[hit] += size
                return

    if os.path.isdir(store_path):
        root_len = len(store_path.rstrip(os.sep)) + 1
        for root, _dirs, files in os.walk(store_path):
            rel_root = root[root_len:].replace(os.sep, "/")
            for f in files:
                try:
                    size = os.lstat(os.path.join(root, f)).st_size  # (a link: not followed)
                except OSError:
                    continue
                account(f"{rel_root}/{f}" if rel_root else f, size)
        return sizes
    if os.path.isfile(store_path) and zipfile.is_zipfile(store_path):
        with zipfile.ZipFile(store_path) as z:
            for info in z.infolist():
                account(info.filename, info.compress_size)
        return sizes
    if is_remote(store_path):
        try:
            fs, root = filesystem(store_path, storage_options)
            root = root.rstrip("/")
            if hasattr(fs, "invalidate_cache"):
                fs.invalidate_cache(root)
            for name, detail in fs.find(root, detail=True).items():
                if name.startswith(root + "/"):
                    account(name[len(root) + 1 :], int(detail.get("size") or 0))
        except Exception:  # noqa: BLE001 - sizes are informative only
            return {}
        return sizes
    return {}
