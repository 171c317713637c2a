"""Hostile stores that declare more than they hold: absurd shapes and chunk counts, group trees
hundreds of levels deep, metadata JSON nested thousands of levels, hundreds of thousands of
attributes. Each is a few bytes to a few MB on disk; each is written with plain h5py,
``json`` and file writes (never through ptd), the way an attacker would.

What each must get (``test_attacks_bounds.py``): one ``ptd: error:`` line naming the key or
path, or a report that names the problem (``validate``), or a correct answer, quickly and in
bounded memory; never a hang, an OOM kill or a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np

from .attack_kit import Attack

__all__ = [
    "ATTACKS",
    "DEEP_JSON_LEVELS",
    "DEEP_LEVELS",
    "MANY_ATTRS",
    "MANY_ATTRS_H5",
    "deep_h5",
    "deep_json_zarr",
    "deep_zarr",
    "h5_huge",
    "many_attrs_h5",
    "many_attrs_zarr",
    "zarr_huge",
]

#: the nesting depths testers used (700 and 1,000+ levels of groups)
DEEP_LEVELS = (700, 1200)
#: JSON nested this deep in a ``zarr.json``
DEEP_JSON_LEVELS = 2000
#: attributes on one node
MANY_ATTRS = 200_000
#: on an HDF5 node: creating 200,000 HDF5 attributes takes h5py 30-80 s (one B-tree insert
#: each), so the fixture holds fewer, still 30 times ptd's PTD_MAX_ATTRS (what is tested)
MANY_ATTRS_H5 = 30_000


def _write_json(path: Path, doc: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def _group_doc(attributes: dict | None = None) -> dict:
    return {"zarr_format": 3, "node_type": "group", "attributes": attributes or {}}


def _array_doc(shape: list[int], chunks: list[int], dtype: str = "uint8", fill: object = 0) -> dict:
    return {
        "zarr_format": 3,
        "node_type": "array",
        "shape": shape,
        "data_type": dtype,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill,
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {},
    }


def zarr_huge(
    directory: Path, shape: list[int], chunks: list[int], name: str = "huge.zarr", fill: int = 0
) -> Path:
    """A zarr store whose one array ``x`` declares ``shape`` cut in ``chunks``, with no chunk
    stored (a few hundred bytes of JSON)."""
    store = directory / name
    _write_json(store / "zarr.json", _group_doc())
    _write_json(store / "x" / "zarr.json", _array_doc(shape, chunks, fill=fill))
    return store


def h5_huge(directory: Path, n: int = 10**15, name: str = "huge.h5") -> Path:
    """An HDF5 file whose chunked dataset ``x`` declares ``n`` uint8 elements, none stored."""
    path = directory / name
    with h5py.File(path, "w") as f:
        f.create_dataset("x", shape=(n,), chunks=(1 << 20,), dtype="u1")
    return path


def _deep_names(levels: int) -> list[str]:
    return ["g"] * levels


def deep_zarr(directory: Path, levels: int) -> Path:
    """A zarr store of ``levels`` nested groups ``g/g/g/...`` with a small array at the bottom."""
    store = directory / f"deep{levels}.zarr"
    node = store
    _write_json(node / "zarr.json", _group_doc())
    for name in _deep_names(levels):
        node = node / name
        _write_json(node / "zarr.json", _group_doc())
    _write_json(node / "x" / "zarr.json", _array_doc([2], [2]))
    return store


def deep_h5(directory: Path, levels: int) -> Path:
    """An HDF5 file of ``levels`` nested groups ``g/g/g/...`` with a small dataset at the bottom."""
    path = directory / f"deep{levels}.h5"
    with h5py.File(path, "w") as f:
        g = f
        for name in _deep_names(levels):
            g = g.create_group(name)
        g.create_dataset("x", data=np.zeros(2, "u1"))
    return path


def deep_json_zarr(directory: Path, levels: int = DEEP_JSON_LEVELS, where: str = "root") -> Path:
    """A zarr store whose ``zarr.json`` (the root's, or an array's with ``where="array"``)
    holds an attribute value nested ``levels`` deep (``[[[[...]]]]``), written as text."""
    store = directory / f"deepjson-{where}.zarr"
    deep = "[" * levels + "]" * levels
    group = json.dumps(_group_doc())
    array = json.dumps(_array_doc([2], [2]))
    if where == "root":
        group = group.replace('"attributes": {}', f'"attributes": {{"deep": {deep}}}')
    else:
        array = array.replace('"attributes": {}', f'"attributes": {{"deep": {deep}}}')
    (store / "x").mkdir(parents=True)
    (store / "zarr.json").write_text(group)
    (store / "x" / "zarr.json").write_text(array)
    return store


def many_attrs_zarr(directory: Path, n: int = MANY_ATTRS) -> Path:
    """A zarr store whose root group holds ``n`` attributes (a few MB of JSON)."""
    store = directory / "attrs.zarr"
    _write_json(store / "zarr.json", _group_doc({f"a{i}": i for i in range(n)}))
    _write_json(store / "x" / "zarr.json", _array_doc([2], [2]))
    return store


def many_attrs_h5(directory: Path, n: int = MANY_ATTRS_H5) -> Path:
    """An HDF5 file whose root group holds ``n`` attributes (dense attribute storage)."""
    path = directory / "attrs.h5"
    with h5py.File(path, "w", libver="latest") as f:
        f.create_dataset("x", data=np.zeros(2, "u1"))
        attrs = f.attrs
        for i in range(n):
            attrs.create(f"a{i}", i)
    return path


def _maker(fn, *args, **kwargs):  # type: ignore[no-untyped-def]
    def make(directory: Path) -> Path:
        return fn(directory, *args, **kwargs)

    return make


#: a store with a 2**62-element array, no chunk stored (372 bytes)
HUGE_62 = (2**62,)
#: an 8M-element array of 1-byte chunks (300 bytes of metadata)
MANY_CHUNKS = 8_000_000

_DATA = ("validate", "--data", "{store}")
_STATS = ("inspect", "--stats", "{store}")
_DIFF = ("diff", "{store}", "{store}")

ATTACKS: list[Attack] = [
    Attack("zarr_2pow62_validate_data", _maker(zarr_huge, [2**62], [1]), (_DATA,)),
    Attack("zarr_2pow62_inspect_stats", _maker(zarr_huge, [2**62], [1]), (_STATS,)),
    Attack("zarr_2pow62_diff", _maker(zarr_huge, [2**62], [1]), (_DIFF,)),
    Attack(
        "zarr_2pow62_convert",
        _maker(zarr_huge, [2**62], [1]),
        (("convert", "{store}", "{out_h5}"), ("convert", "{store}", "{out_zarr}")),
    ),
    Attack("zarr_8M_1byte_chunks", _maker(zarr_huge, [MANY_CHUNKS], [1]), (_DATA, _STATS, _DIFF)),
    Attack("h5_1e15_diff", _maker(h5_huge), (_DIFF, _DATA)),
    *(
        Attack(
            f"deep_{fmt}_{n}",
            _maker(maker, n),
            (
                ("inspect", "{store}"),
                ("validate", "{store}"),
                _DIFF,
                ("convert", "{store}", "{out}"),
            ),
        )
        for n in DEEP_LEVELS
        for fmt, maker in (("zarr", deep_zarr), ("h5", deep_h5))
    ),
    Attack(
        "deep_json_root",
        _maker(deep_json_zarr, where="root"),
        (("inspect", "{store}"), ("validate", "{store}")),
    ),
    Attack(
        "deep_json_array",
        _maker(deep_json_zarr, where="array"),
        (("inspect", "{store}"), ("validate", "{store}")),
    ),
    Attack("many_attrs_zarr", many_attrs_zarr, (("inspect", "{store}"), ("validate", "{store}"))),
    Attack("many_attrs_h5", many_attrs_h5, (("inspect", "{store}"), ("validate", "{store}"))),
]
