"""The valid stores every mutant starts from, and the files outside them a hostile link points at.

Everything here is written with plain h5py, zarr-python and numcodecs (never ptd), the way
another tool (or an attacker) would: the attributes ptd reads (``__tensordict__``,
``__tensordict_str__``, ``__ptd_json__``, ``__tensordict_stack__``,
``__tensordict_non_tensor__``) are set by hand.

Bases (``BASES``): ``h5-earliest`` (superblock v0, symbol tables: ``SNOD``/``TREE``/``HEAP``
regions, v1 chunk B-trees), ``h5-latest`` (superblock v3, ``OHDR`` object headers, fractal heaps,
fixed/extensible array and v2 B-tree chunk indexes), ``zarr-v3`` (zstd, gzip, blosc, raw and
sharded arrays, JSON payloads, a string column, consolidated metadata) and ``zarr-v2`` (blosc,
zlib and raw arrays, ``.zmetadata``).

The "outside" stores hold the same names with every number set to :data:`SECRET_INT` or
:data:`SECRET_FLOAT`: a value read through a link that leaves the store is recognised wherever
it surfaces (a returned tensor, a converted output).
"""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np

ROWS = 8
#: what every integer of an "outside" store holds (fits int16)
SECRET_INT = 31337
#: what every float of an "outside" store holds (exact in float32 and float64)
SECRET_FLOAT = 31337.25

BASES = ("h5-earliest", "h5-latest", "zarr-v3", "zarr-v2")
SUFFIX = {"h5-earliest": ".h5", "h5-latest": ".h5", "zarr-v3": ".zarr", "zarr-v2": ".zarr"}


def fmt_of(base: str) -> str:
    """``"h5"`` or ``"zarr"``."""
    return "h5" if base.startswith("h5") else "zarr"


def _td(batch: list[int]) -> str:
    return json.dumps({"batch_size": batch, "version": 1})


def _values(secret: bool) -> dict[str, np.ndarray]:
    n = ROWS

    def num(a: np.ndarray) -> np.ndarray:
        if not secret:
            return a
        return np.full_like(a, SECRET_FLOAT if a.dtype.kind == "f" else SECRET_INT)

    return {
        "x": num(np.arange(n * 4, dtype=np.float32).reshape(n, 4) / 4),
        "y": num(np.arange(n, dtype=np.int64) - 3),
        "n/z": num(np.arange(n * 2, dtype=np.int16).reshape(n, 2)),
        "c": num(np.arange(n * 3, dtype=np.float64).reshape(n, 3) * 1.5),
        "k": num(np.arange(n, dtype=np.int32) * 7),
        "e": num(np.arange(n * 4, dtype=np.int32).reshape(n, 4)),
    }


def write_h5(path: Path, libver: str, secret: bool = False) -> Path:
    """An HDF5 file laid out as ptd writes one (plus a compact and a resizable leaf)."""
    v = _values(secret)
    with h5py.File(path, "w", libver=libver) as f:
        f.attrs["__tensordict__"] = _td([ROWS])
        f.create_dataset("x", data=v["x"], chunks=(2, 4), compression="gzip", shuffle=True)
        f.create_dataset("y", data=v["y"], chunks=(2,), compression="gzip", fletcher32=True)
        g = f.create_group("n")
        g.attrs["__tensordict__"] = _td([ROWS, 2])
        g.create_dataset("z", data=v["n/z"], chunks=(2, 2), compression="gzip")
        f.create_dataset("c", data=v["c"])  # contiguous
        # compact: the data lives inside the object header
        space = h5py.h5s.create_simple((ROWS,))
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_layout(h5py.h5d.COMPACT)
        dsid = h5py.h5d.create(f.id, b"k", h5py.h5t.STD_I32LE, space, dcpl=dcpl)
        dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, v["k"])
        # two unlimited dims: a v2 B-tree chunk index with libver latest
        f.create_dataset("e", data=v["e"], chunks=(2, 4), maxshape=(None, None), compression="gzip")
        s = f.create_dataset("s", data="hello", dtype=h5py.string_dtype())
        s.attrs["__tensordict_str__"] = True
        j = f.create_dataset("j", data=json.dumps({"k": [1, 2]}), dtype=h5py.string_dtype())
        j.attrs["__ptd_json__"] = True
        st = f.create_dataset(
            "st",
            data=[f"r{i}" for i in range(ROWS)],
            dtype=h5py.string_dtype(),
            chunks=(2,),
            compression="gzip",
        )
        st.attrs["__tensordict_stack__"] = np.array([ROWS], dtype=np.int64)
    return path


def write_zarr_v3(path: Path, secret: bool = False) -> Path:
    """A Zarr v3 group with zstd, gzip, blosc, raw and sharded arrays, JSON payloads, a string
    column and consolidated metadata."""
    import zarr
    from zarr.codecs import BloscCodec, GzipCodec, ZstdCodec

    v = _values(secret)
    root = zarr.open_group(str(path), mode="w", zarr_format=3)
    root.attrs["__tensordict__"] = {"batch_size": [ROWS], "version": 1}

    def arr(name: str, data: np.ndarray, chunks: tuple, **kw: object) -> None:
        a = root.create_array(name, shape=data.shape, dtype=data.dtype, chunks=chunks, **kw)
        a[...] = data

    arr("x", v["x"], (2, 4), compressors=[ZstdCodec()])
    arr("y", v["y"], (2,), compressors=[GzipCodec()])
    n = root.create_group("n", attributes={"__tensordict__": {"batch_size": [ROWS, 2]}})
    z = n.create_array("z", shape=(ROWS, 2), dtype="i2", chunks=(2, 2), compressors=[BloscCodec()])
    z[...] = v["n/z"]
    arr("c", v["c"], (ROWS, 3), compressors=None)
    sh = root.create_array(
        "e", shape=(ROWS, 4), dtype="i4", chunks=(2, 4), shards=(4, 4), compressors=[ZstdCodec()]
    )
    sh[...] = v["e"]
    for name, payload in (("s", b'"hello"'), ("j", json.dumps({"k": [1, 2]}).encode())):
        p = root.create_array(
            name,
            shape=(len(payload),),
            dtype="uint8",
            chunks=(len(payload),),
            compressors=None,
            attributes={"__tensordict_non_tensor__": {"encoding": "json"}},
        )
        p[...] = np.frombuffer(payload, dtype=np.uint8)
    st = root.create_array(
        "st",
        shape=(ROWS,),
        dtype=str,
        chunks=(2,),
        compressors=[ZstdCodec()],
        attributes={"__tensordict_stack__": [ROWS]},
    )
    st[...] = np.array([f"r{i}" for i in range(ROWS)], dtype=object)
    zarr.consolidate_metadata(str(path))
    return path


def write_zarr_v2(path: Path, secret: bool = False) -> Path:
    """A Zarr v2 group (blosc, zlib and raw arrays) with ``.zmetadata``."""
    import numcodecs
    import zarr

    v = _values(secret)
    root = zarr.open_group(str(path), mode="w", zarr_format=2)
    root.attrs["__tensordict__"] = {"batch_size": [ROWS], "version": 1}

    def arr(grp: zarr.Group, name: str, data: np.ndarray, chunks: tuple, comp: object) -> None:
        a = grp.create_array(
            name, shape=data.shape, dtype=data.dtype, chunks=chunks, compressors=comp
        )
        a[...] = data

    arr(root, "x", v["x"], (2, 4), numcodecs.Blosc(cname="lz4", shuffle=1))
    arr(root, "y", v["y"], (2,), numcodecs.Zlib(level=1))
    n = root.create_group("n")
    n.attrs["__tensordict__"] = {"batch_size": [ROWS, 2], "version": 1}
    arr(n, "z", v["n/z"], (2, 2), None)
    arr(root, "c", v["c"], (ROWS, 3), None)
    zarr.consolidate_metadata(str(path))
    return path


def write_base(base: str, path: Path, secret: bool = False) -> Path:
    if base == "h5-earliest":
        return write_h5(path, "earliest", secret)
    if base == "h5-latest":
        return write_h5(path, "latest", secret)
    if base == "zarr-v3":
        return write_zarr_v3(path, secret)
    if base == "zarr-v2":
        return write_zarr_v2(path, secret)
    raise ValueError(base)


def build(directory: Path) -> Path:
    """Write every base and its "outside" twin under ``directory``:
    ``DIR/<base><suffix>`` and ``DIR/outside-<base><suffix>``, plus ``DIR/outside-secret.bin``
    (raw int64 secrets, for HDF5 external raw storage). Returns ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    for base in BASES:
        write_base(base, directory / f"{base}{SUFFIX[base]}")
        write_base(base, directory / f"outside-{base}{SUFFIX[base]}", secret=True)
    (directory / "outside-secret.bin").write_bytes(np.full(64, SECRET_INT, dtype="<i8").tobytes())
    return directory
