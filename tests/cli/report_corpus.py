"""A corpus of faulty stores for ``ptd validate``/``inspect``/``diff``: each lint finding and
each data fault, written small with plain h5py/zarr (so each fault is exactly the one meant).

``python tests/cli/report_corpus.py OUT`` writes every case under OUT.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import zarr
from zarr.codecs import BytesCodec, Crc32cCodec, ZstdCodec

ROWS = 64
TD_ATTR = "__tensordict__"


def _td(batch: list[int]) -> str:
    return json.dumps({"batch_size": batch})


def _flip(path: Path | str, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0xFF]))


def _zgroup(path: Path) -> zarr.Group:
    warnings.simplefilter("ignore")
    g = zarr.open_group(path, mode="w")
    g.attrs[TD_ATTR] = {"batch_size": [ROWS]}
    return g


def _zarr_ok(path: Path, *, consolidate: bool = True) -> Path:
    g = _zgroup(path)
    a = g.create_array("a", shape=(ROWS, 4), chunks=(16, 4), dtype="f4", compressors=None)
    a[:] = np.arange(ROWS * 4, dtype="f4").reshape(ROWS, 4)
    b = g.create_array("b", shape=(ROWS,), chunks=(16,), dtype="i8", compressors=None)
    b[:] = np.arange(ROWS)
    if consolidate:
        zarr.consolidate_metadata(path)
    return path


def h5_ok(tmp: Path) -> Path:
    p = tmp / "ok.h5"
    with h5py.File(p, "w") as f:
        f.attrs[TD_ATTR] = _td([ROWS])
        f.create_dataset("a", data=np.arange(ROWS * 4, dtype="f4").reshape(ROWS, 4), chunks=(16, 4))
        f.create_dataset("b", data=np.arange(ROWS), chunks=(16,))
    return p


def zarr_ok(tmp: Path) -> Path:
    return _zarr_ok(tmp / "ok.zarr")


# --- consolidated metadata ------------------------------------------------------------------
def stale_added(tmp: Path) -> Path:
    """An array added by zarr after consolidation, whose length disagrees with the batch."""
    p = _zarr_ok(tmp / "stale_added.zarr")
    g = zarr.open_group(p, mode="r+", use_consolidated=False)
    g.create_array("late", shape=(7,), dtype="i4")[:] = 1
    return p


def stale_removed(tmp: Path) -> Path:
    p = _zarr_ok(tmp / "stale_removed.zarr")
    shutil.rmtree(p / "b")
    return p


def stale_changed(tmp: Path) -> Path:
    p = _zarr_ok(tmp / "stale_changed.zarr")
    zarr.open_array(p / "a", mode="r+").resize((ROWS + 3, 4))
    return p


# --- data faults ----------------------------------------------------------------------------
def h5_checksum(tmp: Path) -> Path:
    """fletcher32, uncompressed: a bit flipped in chunk [2, 0]."""
    p = tmp / "checksum.h5"
    with h5py.File(p, "w") as f:
        f.attrs[TD_ATTR] = _td([ROWS])
        ds = f.create_dataset(
            "a",
            data=np.arange(ROWS * 4, dtype="f4").reshape(ROWS, 4),
            chunks=(16, 4),
            fletcher32=True,
        )
        off = ds.id.get_chunk_info_by_coord((32, 0)).byte_offset
    _flip(p, off + 5)
    return p


def h5_undecodable(tmp: Path) -> Path:
    """gzip, no checksum: a bit flipped in chunk [1]."""
    p = tmp / "undecodable.h5"
    with h5py.File(p, "w") as f:
        f.attrs[TD_ATTR] = _td([ROWS])
        ds = f.create_dataset(
            "a", data=np.arange(ROWS, dtype="f8"), chunks=(16,), compression="gzip"
        )
        info = ds.id.get_chunk_info_by_coord((16,))
    _flip(p, info.byte_offset + info.size // 2)
    return p


def zarr_checksum(tmp: Path) -> Path:
    """crc32c codec, uncompressed: a bit flipped in chunk [3, 0]."""
    p = tmp / "checksum.zarr"
    g = _zgroup(p)
    a = g.create_array(
        "a",
        shape=(ROWS, 4),
        chunks=(16, 4),
        dtype="f4",
        serializer=BytesCodec(),
        compressors=[Crc32cCodec()],
    )
    a[:] = np.arange(ROWS * 4, dtype="f4").reshape(ROWS, 4) + 1
    zarr.consolidate_metadata(p)
    _flip(p / "a" / "c" / "3" / "0", 7)
    return p


def zarr_undecodable(tmp: Path) -> Path:
    """zstd, no checksum: chunk [1] truncated."""
    p = tmp / "undecodable.zarr"
    g = _zgroup(p)
    a = g.create_array("a", shape=(ROWS,), chunks=(16,), dtype="f8", compressors=[ZstdCodec()])
    a[:] = np.arange(ROWS, dtype="f8") + 1
    zarr.consolidate_metadata(p)
    chunk = p / "a" / "c" / "1"
    data = chunk.read_bytes()
    chunk.write_bytes(data[: len(data) // 2])
    return p


def zarr_missing_chunk(tmp: Path) -> Path:
    """Chunk [2] of 'b' deleted: it reads as the fill value."""
    p = _zarr_ok(tmp / "missing.zarr")
    os.remove(p / "b" / "c" / "2")
    return p


def h5_missing_chunk(tmp: Path) -> Path:
    """Chunk [3] never written."""
    p = tmp / "missing.h5"
    with h5py.File(p, "w") as f:
        f.attrs[TD_ATTR] = _td([ROWS])
        ds = f.create_dataset("b", shape=(ROWS,), dtype="i8", chunks=(16,))
        ds[:48] = np.arange(48) + 1
    return p


def nan_store(tmp: Path, fmt: str = "h5") -> Path:
    """NaN at rows 3 and 40, +inf at row 9 of 'x'."""
    x = np.linspace(0, 1, ROWS, dtype="f4")
    x[[3, 40]] = np.nan
    x[9] = np.inf
    if fmt == "h5":
        p = tmp / "nan.h5"
        with h5py.File(p, "w") as f:
            f.attrs[TD_ATTR] = _td([ROWS])
            f.create_dataset("x", data=x, chunks=(16,))
        return p
    p = tmp / "nan.zarr"
    g = _zgroup(p)
    g.create_array("x", shape=(ROWS,), chunks=(16,), dtype="f4", compressors=None)[:] = x
    zarr.consolidate_metadata(p)
    return p


# --- lint -----------------------------------------------------------------------------------
def lint_single_chunk(tmp: Path) -> Path:
    p = tmp / "single.h5"
    with h5py.File(p, "w") as f:
        f.attrs[TD_ATTR] = _td([20_000_000])
        f.create_dataset("big", shape=(20_000_000,), dtype="f4", chunks=(20_000_000,))
    return p


def lint_small_chunks(tmp: Path) -> Path:
    p = tmp / "small.h5"
    with h5py.File(p, "w") as f:
        f.attrs[TD_ATTR] = _td([100_000])
        f.create_dataset("tiny", shape=(100_000,), dtype="f4", chunks=(100,))
    return p


def lint_large_chunks(tmp: Path) -> Path:
    p = tmp / "large.zarr"
    g = _zgroup(p)
    g.attrs[TD_ATTR] = {"batch_size": [40_000_000]}
    g.create_array("huge", shape=(40_000_000,), chunks=(20_000_000,), dtype="f4")
    zarr.consolidate_metadata(p)
    return p


def lint_row_cost(tmp: Path) -> Path:
    p = tmp / "rowcost.h5"
    with h5py.File(p, "w") as f:
        f.attrs[TD_ATTR] = _td([100])
        f.create_dataset(
            "wide", shape=(100, 1_000_000), dtype="f4", chunks=(10, 1_000_000), compression="gzip"
        )
    return p


def lint_filter_missing(tmp: Path) -> Path:
    """An HDF5 dataset compressed with a filter id no library provides (32099)."""
    p = tmp / "filter.h5"
    with h5py.File(p, "w") as f:
        f.attrs[TD_ATTR] = _td([ROWS])
        f.create_dataset(
            "z",
            shape=(ROWS,),
            dtype="f4",
            chunks=(16,),
            compression=32099,
            allow_unknown_filter=True,
        )
    return p


def lint_no_batch_size(tmp: Path) -> Path:
    p = tmp / "nobatch.h5"
    with h5py.File(p, "w") as f:
        f.create_dataset("a", data=np.zeros((ROWS, 2), "f4"))
    return p


def lint_unconsolidated(tmp: Path) -> Path:
    p = tmp / "many.zarr"
    g = _zgroup(p)
    for i in range(101):
        g.create_array(f"a{i:03d}", shape=(ROWS,), dtype="i1")
    return p


def lint_dtypes(tmp: Path) -> Path:
    """A table (compound dtype: L010), variable-length sequences (no torch dtype: L008) and
    a uint32 leaf (few torch operations: L009)."""
    p = tmp / "dtypes.h5"
    with h5py.File(p, "w") as f:
        f.attrs[TD_ATTR] = _td([ROWS])
        f.create_dataset("pair", data=np.zeros(ROWS, dtype=[("x", "f4"), ("y", "i4")]))
        seq = f.create_dataset("seq", (ROWS,), dtype=h5py.vlen_dtype(np.dtype("i4")))
        seq[0] = np.arange(3, dtype="i4")
        f.create_dataset("u", data=np.arange(ROWS, dtype="u4"))
    return p


#: name -> builder (every case of the corpus)
CASES: dict[str, Callable[[Path], Path]] = {
    "h5_ok": h5_ok,
    "zarr_ok": zarr_ok,
    "stale_added": stale_added,
    "stale_removed": stale_removed,
    "stale_changed": stale_changed,
    "h5_checksum": h5_checksum,
    "h5_undecodable": h5_undecodable,
    "zarr_checksum": zarr_checksum,
    "zarr_undecodable": zarr_undecodable,
    "zarr_missing_chunk": zarr_missing_chunk,
    "h5_missing_chunk": h5_missing_chunk,
    "nan_h5": nan_store,
    "lint_single_chunk": lint_single_chunk,
    "lint_small_chunks": lint_small_chunks,
    "lint_large_chunks": lint_large_chunks,
    "lint_row_cost": lint_row_cost,
    "lint_filter_missing": lint_filter_missing,
    "lint_no_batch_size": lint_no_batch_size,
    "lint_unconsolidated": lint_unconsolidated,
    "lint_dtypes": lint_dtypes,
}


if __name__ == "__main__":  # pragma: no cover
    out = Path(sys.argv[1])
    for name, build in CASES.items():
        d = out / name
        d.mkdir(parents=True, exist_ok=True)
        print(name, build(d))
