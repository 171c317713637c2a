"""Hostile stores that point outside themselves: symbolic links in directory stores (zarr v3
and v2 chunk files, chunk directories, array directories, ``zarr.json``; memmap files and
directories) and HDF5 soft links whose path passes through an external link.

Each store is written with plain h5py, zarr-python, json and file-system calls, next to an
``outside/`` directory holding what the attack reaches for: :data:`SECRET` (64 bytes), which
must never appear in any output, and which must never change. ``OUTCOME[name]`` says what ptd
must do with each attack: ``("refused", needle)`` (one error line naming ``needle``),
``("skipped", needle)`` (HDF5: the key is listed as skipped and not copied), or
``("works", "")`` (a link that stays inside the store).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import h5py
import numpy as np
import zarr

from .attack_kit import MARKER, Attack

#: what the outside files hold (one uint8 row of 64 values)
SECRET = b"OUTSIDE-SECRET-0123456789abcdef" * 2 + b"!!"
assert len(SECRET) == 64
#: what a store's own (inside) linked file holds
INSIDE = bytes(range(64))


def _outside(d: Path) -> Path:
    out = d.absolute() / "outside"
    out.mkdir(exist_ok=True)
    return out


def _secret_file(d: Path) -> Path:
    path = _outside(d) / "secret.bin"
    path.write_bytes(SECRET)
    return path


def watched(d: Path) -> tuple[Path, ...]:
    """The marker and every file under ``outside/``: none may be created or changed."""
    out = d / "outside"
    files = tuple(sorted(p for p in out.rglob("*") if p.is_file())) if out.is_dir() else ()
    return (d / MARKER, *files)


# --- HDF5: soft links through an external link ------------------------------------------------
def _h5_with_external(d: Path, target: str | None = None) -> Path:
    other = _outside(d) / "other.h5"
    with h5py.File(other, "w") as f:
        f["token"] = np.frombuffer(SECRET, dtype=np.uint8)
        f.create_group("grp")["x"] = np.frombuffer(SECRET, dtype=np.uint8)
    store = d / "store.h5"
    with h5py.File(store, "w") as f:
        f["obs"] = np.arange(64, dtype=np.uint8)
        f["ext"] = h5py.ExternalLink(target or str(other), "/")
    return store


def h5_soft_through_external(d: Path) -> Path:
    """``leak -> /ext/token``, ``/ext`` an external link to another file."""
    store = _h5_with_external(d)
    with h5py.File(store, "a") as f:
        f["leak"] = h5py.SoftLink("/ext/token")
    return store


def h5_soft_group_through_external(d: Path) -> Path:
    """``leakgrp -> /ext/grp``: a group of another file, listed and copied whole."""
    store = _h5_with_external(d)
    with h5py.File(store, "a") as f:
        f["leakgrp"] = h5py.SoftLink("/ext/grp")
    return store


def h5_soft_chain_through_external(d: Path) -> Path:
    """A chain of soft links (``a -> b``, ``b -> ext``) and a relative one (``g/up ->
    ../ext`` is not HDF5; ``g/rel -> sub`` where ``g/sub`` is external) ending outside."""
    store = _h5_with_external(d)
    other = d / "outside" / "other.h5"
    with h5py.File(store, "a") as f:
        f["b"] = h5py.SoftLink("/ext")
        f["a"] = h5py.SoftLink("/b/token")
        g = f.create_group("g")
        g["sub"] = h5py.ExternalLink(str(other), "/grp")
        g["rel"] = h5py.SoftLink("sub/x")
    return store


def h5_soft_through_external_fifo(d: Path) -> Path:
    """The external link names a FIFO: opening it (reading the other file) would block."""
    fifo = _outside(d) / "pipe.h5"
    os.mkfifo(fifo)
    store = _h5_with_external(d, target=str(fifo))
    with h5py.File(store, "a") as f:
        f["leak"] = h5py.SoftLink("/ext/token")
    return store


# --- zarr: links in a directory store ---------------------------------------------------------
def _zarr_array(
    d: Path, fmt: int = 3, codec: str = "raw", data: bytes = SECRET
) -> tuple[Path, Path]:
    """A store with ``obs`` (64 uint8 values, one chunk) holding ``data``, and the path of
    its chunk file (the attacker then moves it out and links it back)."""
    store = d / "store.zarr"
    root = zarr.open_group(store, mode="w", zarr_format=fmt)
    kwargs: dict[str, object] = {}
    if fmt == 2 or codec == "raw":
        kwargs["compressors"] = None
    elif codec == "zstd":
        kwargs["compressors"] = zarr.codecs.ZstdCodec()
    elif codec == "sharded":
        kwargs["compressors"] = zarr.codecs.ZstdCodec()
        kwargs["shards"] = (64,)
    chunks = (32,) if codec == "sharded" else (64,)
    arr = root.create_array("obs", shape=(64,), dtype="uint8", chunks=chunks, **kwargs)  # type: ignore[arg-type]
    arr[:] = np.frombuffer(data, dtype=np.uint8)
    chunk = store / "obs" / ("0" if fmt == 2 else os.path.join("c", "0"))
    return store, chunk


def _link_out(chunk: Path, d: Path, name: str) -> None:
    target = _outside(d) / name
    shutil.move(chunk, target)
    os.symlink(target, chunk)


def _zarr_chunk_link(fmt: int, codec: str):  # type: ignore[no-untyped-def]
    def make(d: Path) -> Path:
        store, chunk = _zarr_array(d, fmt, codec)
        _link_out(chunk, d, "chunk.bin")
        return store

    make.__doc__ = f"zarr v{fmt} ({codec}): the chunk file of 'obs' links to a file outside"
    return make


def zarr_chunk_dir_link(d: Path) -> Path:
    """The chunk directory ``obs/c`` is a link to a directory outside (holding ``0``)."""
    store, chunk = _zarr_array(d)
    cdir = chunk.parent
    shutil.move(cdir, _outside(d) / "cdir")
    os.symlink(_outside(d) / "cdir", cdir)
    return store


def zarr_array_dir_link(d: Path) -> Path:
    """The array directory ``obs`` is a link to another store's array outside."""
    store, _ = _zarr_array(d)
    shutil.move(store / "obs", _outside(d) / "obs")
    os.symlink(_outside(d) / "obs", store / "obs")
    return store


def zarr_metadata_link(d: Path) -> Path:
    """``obs/zarr.json`` links to a file outside (here: the attacker's copy of it)."""
    store, _ = _zarr_array(d)
    meta = store / "obs" / "zarr.json"
    _link_out(meta, d, "zarr.json")
    (store / "obs" / "c" / "0").unlink()
    return store


def zarr_chunk_link_inside(d: Path) -> Path:
    """Not an attack: ``obs/c/0`` links to a file inside the store (followed)."""
    store, chunk = _zarr_array(d, data=INSIDE)
    shutil.move(chunk, store / "data.bin")
    os.symlink(os.path.join("..", "..", "data.bin"), chunk)
    _outside(d)
    return store


# --- memmap directories -----------------------------------------------------------------------
def _memmap(d: Path, link: str | None = None) -> Path:
    """A memmap directory (what ``TensorDict.memmap`` writes) with ``obs`` (64 uint8) and
    ``sub/x``; ``link``: ``"file"``: ``obs.memmap`` links outside, ``"dir"``: ``sub`` links
    to a directory outside, ``"inside"``: ``obs.memmap`` links to a file inside."""
    store = d / "store.mm"
    store.mkdir()
    node = {"shape": [64], "device": "cpu", "_type": "<class 'tensordict._td.TensorDict'>"}
    node |= {"_format_version": 1, "_class": "tensordict:TensorDict"}
    leaf = {"device": "cpu", "shape": [64], "dtype": "torch.uint8", "is_nested": False}
    (store / "meta.json").write_text(
        json.dumps({"obs": leaf, "sub": {"type": "TensorDict"}, **node})
    )
    sub = store / "sub"
    sub.mkdir()
    (sub / "meta.json").write_text(json.dumps({"x": leaf, **node}))
    (sub / "x.memmap").write_bytes(bytes(64))
    secret = _secret_file(d)
    if link == "file":
        os.symlink(secret, store / "obs.memmap")
    elif link == "inside":
        (store / "data.bin").write_bytes(INSIDE)
        os.symlink("data.bin", store / "obs.memmap")
    else:
        (store / "obs.memmap").write_bytes(bytes(64))
    if link == "dir":
        shutil.move(sub, _outside(d) / "sub")
        os.symlink(_outside(d) / "sub", sub)
        shutil.copyfile(secret, _outside(d) / "sub" / "x.memmap")
    return store


def memmap_file_link(d: Path) -> Path:
    """``obs.memmap`` is a link to a file outside: a shared map would rewrite it."""
    return _memmap(d, "file")


def memmap_dir_link(d: Path) -> Path:
    """The sub-directory ``sub`` is a link to a directory outside."""
    return _memmap(d, "dir")


def memmap_file_link_inside(d: Path) -> Path:
    """Not an attack: ``obs.memmap`` links to a file inside the directory (followed)."""
    return _memmap(d, "inside")


_CONVERT = ("convert", "{store}", "{out_h5}")
_INSPECT = ("inspect", "{store}")
_VALIDATE = ("validate", "--data", "{store}")

ATTACKS: list[Attack] = [
    Attack("h5_soft_through_external", h5_soft_through_external, (_INSPECT, _CONVERT), watched),
    Attack(
        "h5_soft_group_through_external",
        h5_soft_group_through_external,
        (_INSPECT, _CONVERT),
        watched,
    ),
    Attack(
        "h5_soft_chain_through_external",
        h5_soft_chain_through_external,
        (_INSPECT, _CONVERT),
        watched,
    ),
    Attack(
        "h5_soft_through_external_fifo",
        h5_soft_through_external_fifo,
        (_INSPECT, _CONVERT),
        watched,
    ),
    Attack("zarr3_raw_chunk_link", _zarr_chunk_link(3, "raw"), (_CONVERT, _VALIDATE), watched),
    Attack("zarr3_zstd_chunk_link", _zarr_chunk_link(3, "zstd"), (_CONVERT, _VALIDATE), watched),
    Attack(
        "zarr3_sharded_chunk_link", _zarr_chunk_link(3, "sharded"), (_CONVERT, _VALIDATE), watched
    ),
    Attack("zarr2_chunk_link", _zarr_chunk_link(2, "raw"), (_CONVERT, _VALIDATE), watched),
    Attack("zarr_chunk_dir_link", zarr_chunk_dir_link, (_CONVERT,), watched),
    Attack("zarr_array_dir_link", zarr_array_dir_link, (_INSPECT, _CONVERT), watched),
    Attack("zarr_metadata_link", zarr_metadata_link, (_INSPECT, _CONVERT), watched),
    Attack("memmap_file_link", memmap_file_link, (_INSPECT, _CONVERT), watched),
    Attack("memmap_dir_link", memmap_dir_link, (_INSPECT, _CONVERT), watched),
    Attack("zarr_chunk_link_inside", zarr_chunk_link_inside, (_CONVERT,), watched),
    Attack("memmap_file_link_inside", memmap_file_link_inside, (_CONVERT,), watched),
]

#: what ptd must do with each attack (see the module doc)
OUTCOME: dict[str, tuple[str, str]] = {
    "h5_soft_through_external": ("skipped", "leak"),
    "h5_soft_group_through_external": ("skipped", "leakgrp"),
    "h5_soft_chain_through_external": ("skipped", "g/rel"),
    "h5_soft_through_external_fifo": ("skipped", "leak"),
    "zarr3_raw_chunk_link": ("refused", "obs/c/0"),
    "zarr3_zstd_chunk_link": ("refused", "obs/c/0"),
    "zarr3_sharded_chunk_link": ("refused", "obs/c/0"),
    "zarr2_chunk_link": ("refused", "obs/0"),
    "zarr_chunk_dir_link": ("refused", "obs/c"),
    "zarr_array_dir_link": ("refused", "obs"),
    "zarr_metadata_link": ("refused", "obs/zarr.json"),
    "memmap_file_link": ("refused", "obs.memmap"),
    "memmap_dir_link": ("refused", "sub"),
    "zarr_chunk_link_inside": ("works", ""),
    "memmap_file_link_inside": ("works", ""),
}
assert set(OUTCOME) == {a.name for a in ATTACKS}
