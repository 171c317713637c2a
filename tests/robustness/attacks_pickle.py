"""Hostile stores that ask ptd to unpickle (run code) or to decode a non-tensor entry far larger
than what the file holds.

Every store is written the way an attacker would: JSON documents and chunk files written by
hand, ``h5py`` for HDF5, never through ptd. The pickles' payload is an object whose
``__reduce__`` calls ``os.system("touch MARKER")``: the marker file beside the store exists
only if some code unpickled it. ``HARMLESS`` lists stores of the same shapes whose pickles are
plain values, for the opt-in (``allow_pickle=True`` / ``--allow-pickle``) to decode.

``ATTACKS`` (the hostile ones) is what ``benchmarks/bench_attacks.py`` runs; the tests are in
``test_attacks_pickle.py``.
"""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path
from typing import Any

import h5py
import numcodecs
import numpy as np

from .attack_kit import MARKER, Attack

__all__ = ["ATTACKS", "HARMLESS", "HUGE", "LIBRARY_KEYS", "by_name"]

#: the size the "huge" entries declare: 4 GiB of bytes, 32 GiB of string references
HUGE = 2**32


class _RunsCode:
    """Unpickling this runs ``touch <marker>``."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def _evil(directory: Path) -> bytes:
    return pickle.dumps(_RunsCode(directory / MARKER))


def _write_json(path: Path, doc: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


# --- Zarr v2: numcodecs' pickle codec in a filter or compressor position --------------------


def _v2_array(
    directory: Path,
    name: str,
    *,
    dtype: str,
    filters: list[dict[str, Any]] | None,
    compressor: dict[str, Any] | None,
    chunk: bytes,
) -> Path:
    store = directory / f"{name}.zarr"
    _write_json(store / ".zgroup", {"zarr_format": 2})
    _write_json(
        store / "x" / ".zarray",
        {
            "zarr_format": 2,
            "shape": [2],
            "chunks": [2],
            "dtype": dtype,
            "compressor": compressor,
            "fill_value": None,
            "order": "C",
            "filters": filters,
        },
    )
    (store / "x" / "0").write_bytes(chunk)
    return store


def v2_vlen_pickle_filter(d: Path) -> Path:
    """``|O`` strings whose filters are vlen-utf8 then pickle (decoded in reverse: pickle
    first)."""
    return _v2_array(
        d,
        "v2_vlen_pickle",
        dtype="|O",
        filters=[{"id": "vlen-utf8"}, {"id": "pickle"}],
        compressor=None,
        chunk=_evil(d),
    )


def v2_object_pickle_only(d: Path) -> Path:
    """``|O`` with the pickle codec alone as its object codec (zarr 3.1 cannot parse it: an
    unreadable node, never decoded)."""
    return _v2_array(
        d, "v2_object_pickle", dtype="|O", filters=[{"id": "pickle"}], compressor=None,
        chunk=_evil(d),
    )  # fmt: skip


def v2_numeric_pickle_filter(d: Path) -> Path:
    """A float64 array whose one filter is pickle: looks like a tensor."""
    return _v2_array(
        d, "v2_f8_pickle", dtype="<f8", filters=[{"id": "pickle", "protocol": 5}],
        compressor=None, chunk=_evil(d),
    )  # fmt: skip


def v2_pickle_compressor(d: Path) -> Path:
    """A float64 array whose compressor is pickle."""
    return _v2_array(
        d, "v2_f8_pickle_compressor", dtype="<f8", filters=None,
        compressor={"id": "pickle"}, chunk=_evil(d),
    )  # fmt: skip


# --- Zarr v3: numcodecs.pickle in the pipeline, tensordict's pickled payloads ---------------


def _v3_group(store: Path, attributes: dict[str, Any] | None = None) -> None:
    _write_json(
        store / "zarr.json",
        {"zarr_format": 3, "node_type": "group", "attributes": attributes or {}},
    )


def _v3_array_doc(
    shape: list[int],
    chunks: list[int],
    dtype: str,
    codecs: list[dict[str, Any]],
    attributes: dict[str, Any] | None = None,
    fill_value: Any = 0,
) -> dict[str, Any]:
    return {
        "zarr_format": 3,
        "node_type": "array",
        "shape": shape,
        "data_type": dtype,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": chunks}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill_value,
        "codecs": codecs,
        "attributes": attributes or {},
    }


def _v3_pickle_codec_store(d: Path, name: str, codecs: list[dict[str, Any]]) -> Path:
    store = d / f"{name}.zarr"
    _v3_group(store)
    _write_json(store / "x" / "zarr.json", _v3_array_doc([4], [4], "uint8", codecs))
    chunk = store / "x" / "c" / "0"
    chunk.parent.mkdir(parents=True)
    chunk.write_bytes(_evil(d))
    return store


def v3_pickle_codec(d: Path) -> Path:
    """A uint8 array serialised by ``numcodecs.pickle``: looks like a tensor."""
    return _v3_pickle_codec_store(
        d, "v3_pickle_codec", [{"name": "numcodecs.pickle", "configuration": {"protocol": 5}}]
    )


def v3_sharded_pickle_codec(d: Path) -> Path:
    """``numcodecs.pickle`` inside a sharding codec's inner pipeline."""
    inner = {
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": [4],
            "codecs": [{"name": "numcodecs.pickle", "configuration": {"protocol": 5}}],
            "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
            "index_location": "end",
        },
    }
    return _v3_pickle_codec_store(d, "v3_sharded_pickle", [inner])


def _payload_store(d: Path, name: str, payload: bytes, attributes: dict[str, Any]) -> Path:
    store = d / f"{name}.zarr"
    _v3_group(store)
    doc = _v3_array_doc([len(payload)], [len(payload)], "uint8", [{"name": "bytes"}], attributes)
    _write_json(store / "obj" / "zarr.json", doc)
    chunk = store / "obj" / "c" / "0"
    chunk.parent.mkdir(parents=True)
    chunk.write_bytes(payload)
    return store


def v3_pickled_payload(d: Path) -> Path:
    """tensordict's convention: a uint8 payload marked ``{"encoding": "pickle"}``."""
    return _payload_store(
        d, "v3_pickled", _evil(d), {"__tensordict_non_tensor__": {"encoding": "pickle"}}
    )


def v3_pickled_stack(d: Path) -> Path:
    """The same, marked as a stack of 2 (a NonTensorStack)."""
    return _payload_store(
        d,
        "v3_pickled_stack",
        _evil(d),
        {"__tensordict_non_tensor__": {"encoding": "pickle"}, "__tensordict_stack__": [2]},
    )


def v3_consolidated_pickle(d: Path) -> Path:
    """The array's own ``zarr.json`` says ``bytes``; the root's consolidated metadata (what
    zarr uses when it opens the store) says ``numcodecs.pickle``."""
    store = d / "v3_consolidated.zarr"
    codecs = [{"name": "numcodecs.pickle", "configuration": {"protocol": 5}}]
    honest = _v3_array_doc([4], [4], "uint8", [{"name": "bytes"}])
    lying = _v3_array_doc([4], [4], "uint8", codecs)
    _write_json(
        store / "zarr.json",
        {
            "zarr_format": 3,
            "node_type": "group",
            "attributes": {},
            "consolidated_metadata": {
                "kind": "inline",
                "must_understand": False,
                "metadata": {"x": lying},
            },
        },
    )
    _write_json(store / "x" / "zarr.json", honest)
    chunk = store / "x" / "c" / "0"
    chunk.parent.mkdir(parents=True)
    chunk.write_bytes(_evil(d))
    return store


# --- HDF5 and memmap directories --------------------------------------------------------


def h5_pickle_marker(d: Path) -> Path:
    """An HDF5 dataset carrying zarr's pickle marker: h5 has no pickled entries (ptd reads
    HDF5 values with h5py's types alone), so it is bytes, never unpickled."""
    path = d / "h5_pickle_marker.h5"
    raw = np.frombuffer(_evil(d), dtype=np.uint8)
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("obj", data=raw)
        ds.attrs["__tensordict_non_tensor__"] = json.dumps({"encoding": "pickle"})
        ds.attrs["encoding"] = "pickle"
    return path


def memmap_other_pickle(d: Path) -> Path:
    """A memmap directory (tensordict's ``memmap()`` layout) whose NonTensorData is kept in
    ``other.pickle``."""
    root = d / "memmap_pickle"
    _write_json(
        root / "meta.json",
        {
            "obj": {"type": "NonTensorData"},
            "shape": [],
            "device": "cpu",
            "_type": "<class 'tensordict._td.TensorDict'>",
            "_format_version": 1,
            "_class": "tensordict:TensorDict",
        },
    )
    _write_json(
        root / "obj" / "meta.json",
        {
            "_type": "<class 'tensordict.tensorclass.NonTensorData'>",
            "_metadata": None,
            "_is_non_tensor": True,
        },
    )
    (root / "obj" / "other.pickle").write_bytes(_evil(d))
    return root


# --- non-tensor entries declaring far more than they hold -------------------------------


def v3_payload_declares_4gib(d: Path) -> Path:
    """A JSON payload declaring ``[2**32]`` bytes (one chunk), with 8 bytes stored."""
    store = d / "v3_payload_huge.zarr"
    _v3_group(store)
    attrs = {"__tensordict_non_tensor__": {"encoding": "json"}}
    _write_json(
        store / "obj" / "zarr.json",
        _v3_array_doc([HUGE], [HUGE], "uint8", [{"name": "bytes"}], attrs),
    )
    (store / "obj" / "c").mkdir(parents=True)
    (store / "obj" / "c" / "0").write_bytes(b'"small"\n')
    return store


def v3_compressed_payload_declares_4gib(d: Path) -> Path:
    """A zstd-compressed JSON payload declaring ``[2**32]`` bytes, one small chunk stored
    (compressed: its stored size says nothing, the limit bounds it)."""
    store = d / "v3_payload_zstd_huge.zarr"
    _v3_group(store)
    attrs = {"__tensordict_non_tensor__": {"encoding": "json"}}
    codecs = [{"name": "bytes"}, {"name": "zstd", "configuration": {"level": 0, "checksum": False}}]
    _write_json(store / "obj" / "zarr.json", _v3_array_doc([HUGE], [2**20], "uint8", codecs, attrs))
    (store / "obj" / "c").mkdir(parents=True)
    chunk = numcodecs.Zstd(level=1).encode(np.zeros(2**20, dtype=np.uint8).tobytes())
    (store / "obj" / "c" / "0").write_bytes(chunk)
    return store


def v3_strings_declare_2_32(d: Path) -> Path:
    """A string stack (zarr ``string`` array marked ``__tensordict_stack__``) of ``[2**32]``
    strings with no chunk stored: all fill value, 32 GiB of references once read."""
    store = d / "v3_strings_huge.zarr"
    _v3_group(store)
    _write_json(
        store / "s" / "zarr.json",
        _v3_array_doc(
            [HUGE],
            [2**16],
            "string",
            [{"name": "vlen-utf8"}],
            {"__tensordict_stack__": [HUGE]},
            fill_value="",
        ),
    )
    return store


def h5_strings_declare_2_32(d: Path) -> Path:
    """An HDF5 variable-length string dataset of ``[2**32]``, nothing written."""
    path = d / "h5_strings_huge.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("s", shape=(HUGE,), chunks=(2**16,), dtype=h5py.string_dtype())
    return path


# --- the attacks ----------------------------------------------------------------------------

_READS = (
    ("inspect", "{store}"),
    ("validate", "{store}"),
    ("validate", "--data", "{store}"),
    ("convert", "{store}", "{out_h5}"),
    ("convert", "{store}", "{out_zarr}"),
)

ATTACKS: list[Attack] = [
    Attack("zarr_v2_vlen_then_pickle_filter", v2_vlen_pickle_filter, _READS),
    Attack("zarr_v2_object_pickle_codec_only", v2_object_pickle_only, _READS),
    Attack("zarr_v2_float_pickle_filter", v2_numeric_pickle_filter, _READS),
    Attack("zarr_v2_pickle_compressor", v2_pickle_compressor, _READS),
    Attack("zarr_v3_numcodecs_pickle_codec", v3_pickle_codec, _READS),
    Attack("zarr_v3_sharded_pickle_codec", v3_sharded_pickle_codec, _READS),
    Attack("zarr_v3_consolidated_pickle_codec", v3_consolidated_pickle, _READS),
    Attack("zarr_v3_pickled_payload", v3_pickled_payload, _READS),
    Attack("zarr_v3_pickled_stack", v3_pickled_stack, _READS),
    Attack("h5_pickle_marker", h5_pickle_marker, _READS),
    Attack("memmap_other_pickle", memmap_other_pickle, _READS),
    Attack("zarr_v3_payload_declares_4gib", v3_payload_declares_4gib, _READS),
    Attack("zarr_v3_zstd_payload_declares_4gib", v3_compressed_payload_declares_4gib, _READS),
    Attack("zarr_v3_strings_declare_2_32", v3_strings_declare_2_32, _READS),
    Attack("h5_strings_declare_2_32", h5_strings_declare_2_32, _READS),
]

#: the key a library read of each attack's store targets
LIBRARY_KEYS: dict[str, str] = {
    "zarr_v2_vlen_then_pickle_filter": "x",
    "zarr_v2_object_pickle_codec_only": "x",
    "zarr_v2_float_pickle_filter": "x",
    "zarr_v2_pickle_compressor": "x",
    "zarr_v3_numcodecs_pickle_codec": "x",
    "zarr_v3_sharded_pickle_codec": "x",
    "zarr_v3_consolidated_pickle_codec": "x",
    "zarr_v3_pickled_payload": "obj",
    "zarr_v3_pickled_stack": "obj",
    "h5_pickle_marker": "obj",
    "memmap_other_pickle": "obj",
    "zarr_v3_payload_declares_4gib": "obj",
    "zarr_v3_zstd_payload_declares_4gib": "obj",
    "zarr_v3_strings_declare_2_32": "s",
    "h5_strings_declare_2_32": "s",
}


def by_name(name: str) -> Attack:
    """The attack called ``name``."""
    return next(a for a in ATTACKS if a.name == name)


# --- harmless twins, for the opt-in ---------------------------------------------------------


def harmless_v2_vlen_pickle(d: Path) -> Path:
    """vlen-utf8 then pickle, as zarr-python 2 wrote it: a pickle of the vlen-encoded bytes."""
    encoded = numcodecs.VLenUTF8().encode(np.array(["hello", "world"], dtype=object))
    return _v2_array(
        d,
        "ok_v2_vlen_pickle",
        dtype="|O",
        filters=[{"id": "vlen-utf8"}, {"id": "pickle"}],
        compressor=None,
        chunk=pickle.dumps(encoded),
    )


def harmless_v3_pickled_payload(d: Path) -> Path:
    """A pickled payload of ``{"a": (1, 2)}`` (a tuple: not JSON, so tensordict pickles it)."""
    return _payload_store(
        d,
        "ok_v3_pickled",
        pickle.dumps({"a": (1, 2)}),
        {"__tensordict_non_tensor__": {"encoding": "pickle"}},
    )


#: (maker, key, expected value) of stores whose pickles are plain values
HARMLESS: dict[str, tuple[Any, str, Any]] = {
    "zarr_v2_vlen_then_pickle_filter": (harmless_v2_vlen_pickle, "x", ["hello", "world"]),
    "zarr_v3_pickled_payload": (harmless_v3_pickled_payload, "obj", {"a": (1, 2)}),
}

#: what ptd must do with an attack when it is not a refusal (``benchmarks/bench_attacks.py``):
#: HDF5 has no pickled entries, so a pickle's marker attribute there is a plain value, read
#: and copied as bytes, never unpickled
OUTCOME: dict[str, tuple[str, str]] = {"h5_pickle_marker": ("works", "")}
