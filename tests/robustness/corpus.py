"""A corpus of broken and hostile stores, generated from two valid ones.

``python tests/robustness/corpus.py OUT`` writes every case under ``OUT`` (one file or directory
per case) and lists them. The tests build the corpus once per session with :func:`build` and
check that every library entry point and every CLI command ends each case in a ptd error (or a
normal result, when the damage is legal for the format, e.g. a missing zarr chunk reads as the
fill value): no crash, no hang, no traceback, no code executed.

Cases (``Case.name`` prefix):

* ``h5-trunc-*``: the HDF5 file cut at several lengths (0 bytes, inside the signature, inside
  the superblock, in the middle, one byte short).
* ``h5-super-*``: one byte of the superblock flipped (signature, versions, sizes, addresses).
* ``h5-meta-*``: one byte flipped in the metadata region after the superblock.
* ``h5-chunk-*`` / ``h5-contig-*``: bytes flipped in a gzip chunk / a contiguous dataset.
* ``h5-json-*``, ``h5-attr-*``, ``h5-keys-*``: a ``__ptd_json__`` entry that is not JSON,
  malformed ``__tensordict__`` / ``__tensordict_stack__`` / ``__ptd_dtype__`` attributes,
  odd link names (``..``, spaces, very long).
* ``h5-outside``: datasets whose data lives in other files (external raw storage pointing at a
  "secret" file, a virtual dataset, an external link): never read.
* ``zarr-root-*`` / ``zarr-arr-*``: ``zarr.json`` that is not JSON, of the wrong type, with
  fields missing or of the wrong type, absurd shapes, unknown codecs and data types.
* ``zarr-chunk-*``: chunk files missing, truncated, garbage, a directory.
* ``zarr-payload-*``: non-tensor payloads that are not JSON / not UTF-8 / too deep, unknown
  encodings, and a pickle that would create a file (``PWNED``) when loaded.
* ``zarr-keys-*``: consolidated metadata naming children ``..``, ``../outside``, ``a/../..``,
  ``""`` or with a NUL: such keys must never reach outside the store.
* ``memmap-pickle``: a memmap directory whose ``other.pickle`` would create ``PWNED``.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np
import torch

ROWS = 8
#: the file a malicious pickle of the corpus creates when it is (wrongly) loaded
PWNED = "PWNED"


@dataclass(frozen=True)
class Case:
    name: str
    path: Path  #: the store (file or directory)
    fmt: str  #: "h5", "zarr" or "memmap"
    #: True when ptd must refuse the case outright (opening or reading fails); False when
    #: a normal result is also fine (the damage may be legal for the format or only change values)
    must_fail: bool = False


def sample() -> dict:
    from ptd import NonTensorData, NonTensorStack

    n = ROWS
    return {
        "x": torch.arange(n * 4, dtype=torch.float32).reshape(n, 4),
        "y": torch.arange(n),
        "n": {"z": torch.ones(n, 2, dtype=torch.int16)},
        "s": "hello",
        "j": NonTensorData({"k": [1, 2]}),
        "st": NonTensorStack.from_list([f"r{i}" for i in range(n)], (n,)),
    }


def make_base_h5(path: Path) -> Path:
    """gzip-chunked leaves (x, y, n/z, st), strings, a JSON entry, and a contiguous leaf ``c``."""
    from ptd import PersistentTensorDict

    PersistentTensorDict.from_dict(sample(), path, compression="gzip", chunks=(2,)).close()
    with PersistentTensorDict(filename=path, mode="r+", batch_size=[ROWS]) as p:
        p["c"] = torch.arange(ROWS * 3, dtype=torch.float64).reshape(ROWS, 3)
    return path


def make_base_zarr(path: Path) -> Path:
    """zstd-chunked leaves (2 rows a chunk), JSON payloads, a str stack, and an uncompressed
    single-chunk leaf ``c``; consolidated metadata in the root ``zarr.json``."""
    import zarr

    from ptd import PersistentTensorDict

    PersistentTensorDict.from_dict(
        sample(), path, backend="zarr", chunks=2, compressors=[zarr.codecs.ZstdCodec()]
    ).close()
    with PersistentTensorDict(filename=path, mode="r+", batch_size=[ROWS], backend="zarr") as p:
        p["c"] = torch.arange(ROWS * 3, dtype=torch.float64).reshape(ROWS, 3)
    return path


# ------------------------------------------------------------------------------ helpers
def flip(path: Path, offset: int, mask: int = 0xFF) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        if not b:
            return
        f.seek(offset)
        f.write(bytes([b[0] ^ mask]))


def truncate(path: Path, size: int) -> None:
    with open(path, "r+b") as f:
        f.truncate(size)


def h5_chunk_span(path: Path, key: str, index: int = 0) -> tuple[int, int]:
    with h5py.File(path, "r") as f:
        info = f[key].id.get_chunk_info(index)
        return int(info.byte_offset), int(info.size)


def h5_contiguous_offset(path: Path, key: str) -> int:
    with h5py.File(path, "r") as f:
        return int(f[key].id.get_offset())


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


def write_json(path: Path, doc: object) -> None:
    path.write_text(json.dumps(doc))


def drop_consolidated(store: Path) -> None:
    """Remove the consolidated metadata, so that every node's own zarr.json is read."""
    doc = read_json(store / "zarr.json")
    doc.pop("consolidated_metadata", None)
    write_json(store / "zarr.json", doc)


def edit_array_meta(store: Path, key: str, fn: Callable[[dict], object]) -> None:
    """Apply ``fn`` to the array's own zarr.json and (when present) to its consolidated copy."""
    own = store / key / "zarr.json"
    doc = read_json(own)
    out = fn(doc)
    write_json(own, doc if out is None else out)
    root = read_json(store / "zarr.json")
    cons = (root.get("consolidated_metadata") or {}).get("metadata") or {}
    if key in cons:
        out = fn(cons[key])
        if out is not None:
            cons[key] = out
        write_json(store / "zarr.json", root)


def evil_pickle(marker: Path) -> bytes:
    """Protocol-0 pickle calling ``open(marker, "w")``: loading it creates the file."""
    return b"c__builtin__\nopen\n(" + pickle.dumps(str(marker), 0)[:-1] + b"S'w'\ntR."


def zarr_payload(store: Path, key: str, payload: bytes, encoding: object) -> None:
    import zarr

    g = zarr.open_group(str(store), mode="r+", use_consolidated=False)
    arr = g.create_array(
        key,
        shape=(max(1, len(payload)),),
        dtype="uint8",
        chunks=(max(1, len(payload)),),
        compressors=None,
        attributes={"__tensordict_non_tensor__": {"encoding": encoding}},
    )
    arr[...] = np.frombuffer(payload.ljust(1, b" "), dtype=np.uint8)
    drop_consolidated(store)


# ------------------------------------------------------------------------------ the corpus
def build(out: Path) -> list[Case]:
    """Write every case under ``out`` (created) and return them."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    base = out / "_base"
    base.mkdir(exist_ok=True)
    h5 = make_base_h5(base / "base.h5")
    zs = make_base_zarr(base / "base.zarr")
    cases: list[Case] = []
    marker = out / PWNED

    def h5case(name: str, fn: Callable[[Path], None], must_fail: bool = False) -> None:
        p = out / f"{name}.h5"
        shutil.copyfile(h5, p)
        fn(p)
        cases.append(Case(name, p, "h5", must_fail))

    def zcase(name: str, fn: Callable[[Path], None], must_fail: bool = False) -> None:
        p = out / f"{name}.zarr"
        shutil.copytree(zs, p)
        fn(p)
        cases.append(Case(name, p, "zarr", must_fail))

    size = h5.stat().st_size
    # --- h5: truncated
    for n in (0, 4, 40, 200, size // 2, size - 1):
        h5case(f"h5-trunc-{n}", lambda p, n=n: truncate(p, n), must_fail=True)
    # --- h5: superblock bytes (signature, versions, offset/length sizes, flags, addresses)
    for off in (0, 3, 7, 8, 9, 10, 13, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 72, 80, 88):
        h5case(f"h5-super-{off}", lambda p, off=off: flip(p, off))
    # --- h5: metadata after the superblock (object headers, B-trees, heaps)
    for off in range(96, 2048, 97):
        h5case(f"h5-meta-{off}", lambda p, off=off: flip(p, off))
    # --- h5: data
    start, length = h5_chunk_span(h5, "x", 1)
    h5case("h5-chunk-gzip-head", lambda p: flip(p, start))
    h5case("h5-chunk-gzip-mid", lambda p: [flip(p, start + i) for i in range(length // 2, length)])
    coff = h5_contiguous_offset(h5, "c")
    h5case("h5-contig-data", lambda p: flip(p, coff + 3))

    def h5edit(fn: Callable[[h5py.File], None]) -> Callable[[Path], None]:
        def run(p: Path) -> None:
            with h5py.File(p, "r+") as f:
                fn(f)

        return run

    def bad_json(f: h5py.File) -> None:
        del f["j"]
        f.create_dataset("j", data="{not json", dtype=h5py.string_dtype())
        f["j"].attrs["__ptd_json__"] = True

    h5case("h5-json-invalid", h5edit(bad_json))

    def deep_json(f: h5py.File) -> None:
        del f["j"]
        f.create_dataset("j", data="[" * 100_000 + "]" * 100_000, dtype=h5py.string_dtype())
        f["j"].attrs["__ptd_json__"] = True

    h5case("h5-json-deep", h5edit(deep_json))
    for name, value in {
        "td-str": "batch",
        "td-json-list": "[1, 2]",
        "td-bad-bs": json.dumps({"batch_size": "abc"}),
        "td-neg-bs": json.dumps({"batch_size": [-1]}),
        "td-huge-bs": json.dumps({"batch_size": [10**30]}),
        "td-bool-bs": json.dumps({"batch_size": [True]}),
        "td-not-json": "{oops",
    }.items():
        h5case(
            f"h5-attr-{name}", h5edit(lambda f, v=value: f.attrs.__setitem__("__tensordict__", v))
        )
    for name, value in {
        "stack-str": "abc",
        "stack-wrong": np.array([3], dtype=np.int64),
        "stack-neg": np.array([-8], dtype=np.int64),
        "stack-huge": np.array([2**62], dtype=np.int64),
    }.items():
        h5case(
            f"h5-attr-{name}",
            h5edit(lambda f, v=value: f["st"].attrs.__setitem__("__tensordict_stack__", v)),
        )
    for name, value in {
        "dtype-nonsense": "complex512",
        "dtype-bf16-on-f32": "bfloat16",
        "dtype-int": 5,
        "dtype-f8-on-f32": "float8_e4m3fn",
    }.items():
        h5case(
            f"h5-attr-{name}",
            h5edit(lambda f, v=value: f["x"].attrs.__setitem__("__ptd_dtype__", v)),
        )

    def odd_names(f: h5py.File) -> None:
        f.create_dataset("..", data=np.zeros(ROWS))
        f.create_dataset(" ", data=np.zeros(ROWS))
        f.create_dataset("k" * 4000, data=np.zeros(ROWS))
        f.create_group("g").create_dataset("..", data=np.zeros(ROWS))

    h5case("h5-keys-odd", h5edit(odd_names))

    def absurd_h5(f: h5py.File) -> None:
        # allocated lazily: the file stays small, reading it whole cannot work
        f.create_dataset("huge", shape=(ROWS, 2**40), dtype="f8", chunks=(1, 1024))

    h5case("h5-huge-shape", h5edit(absurd_h5))

    def object_tag(f: h5py.File) -> None:
        f.create_dataset("obj", data=np.void(b"12345678"))

    h5case("h5-opaque", h5edit(object_tag))

    # data that lives in other files: external raw storage, a virtual dataset, an external link
    secret = out / "outside-secret.bin"
    secret.write_bytes(b"SECRET" * 4)
    with h5py.File(out / "outside.h5", "w") as f:
        f["data"] = np.arange(ROWS)

    def outside(f: h5py.File) -> None:
        f.create_dataset("ext", shape=(24,), dtype="u1", external=[(str(secret), 0, 24)])
        layout = h5py.VirtualLayout(shape=(ROWS,), dtype="i8")
        layout[:] = h5py.VirtualSource(str(out / "outside.h5"), "data", shape=(ROWS,))
        f.create_virtual_dataset("vds", layout)
        f["elink"] = h5py.ExternalLink(str(out / "outside.h5"), "/data")

    h5case("h5-outside", h5edit(outside), must_fail=True)

    # --- zarr: root zarr.json
    zcase("zarr-root-not-json", lambda p: (p / "zarr.json").write_text("{not json"), True)
    zcase("zarr-root-empty", lambda p: (p / "zarr.json").write_bytes(b""), True)
    zcase("zarr-root-binary", lambda p: (p / "zarr.json").write_bytes(b"\xff\xfe\x00garbage"), True)
    zcase("zarr-root-list", lambda p: write_json(p / "zarr.json", [1, 2]), True)
    zcase(
        "zarr-root-node-type-num",
        lambda p: write_json(p / "zarr.json", {"zarr_format": 3, "node_type": 5}),
        True,
    )
    zcase(
        "zarr-root-format-str",
        lambda p: write_json(p / "zarr.json", {"zarr_format": "3", "node_type": "group"}),
        True,
    )
    zcase(
        "zarr-root-format-2",
        lambda p: write_json(p / "zarr.json", {"zarr_format": 2, "node_type": "group"}),
    )
    zcase("zarr-root-missing-type", lambda p: write_json(p / "zarr.json", {"zarr_format": 3}))
    zcase(
        "zarr-root-is-array",
        lambda p: shutil.copyfile(p / "x" / "zarr.json", p / "zarr.json"),
        True,
    )

    def root_attrs(value: object) -> Callable[[Path], None]:
        def run(p: Path) -> None:
            doc = read_json(p / "zarr.json")
            doc["attributes"] = value
            write_json(p / "zarr.json", doc)

        return run

    zcase("zarr-root-attrs-list", root_attrs([1, 2]))
    zcase("zarr-root-td-str", root_attrs({"__tensordict__": "batch"}))
    zcase("zarr-root-td-bad-bs", root_attrs({"__tensordict__": {"batch_size": "abc"}}))
    zcase("zarr-root-td-neg-bs", root_attrs({"__tensordict__": {"batch_size": [-3]}}))
    zcase("zarr-root-td-huge-bs", root_attrs({"__tensordict__": {"batch_size": [10**30]}}))

    def cons_value(value: object) -> Callable[[Path], None]:
        def run(p: Path) -> None:
            doc = read_json(p / "zarr.json")
            doc["consolidated_metadata"] = value
            write_json(p / "zarr.json", doc)

        return run

    zcase("zarr-root-cons-list", cons_value([1]))
    zcase(
        "zarr-root-cons-bad-meta",
        cons_value({"kind": "inline", "must_understand": False, "metadata": 5}),
    )

    # --- zarr: an array's zarr.json (with and without consolidated metadata)
    def set_field(field: str, value: object) -> Callable[[dict], None]:
        return lambda doc: doc.__setitem__(field, value)

    def del_field(field: str) -> Callable[[dict], None]:
        return lambda doc: doc.pop(field, None)

    edits: dict[str, Callable[[dict], object]] = {
        "shape-str": set_field("shape", "abc"),
        "shape-neg": set_field("shape", [-8, 4]),
        "shape-float": set_field("shape", [8.5, 4]),
        "shape-absurd": set_field("shape", [2**62, 4]),
        "shape-huge-rows": set_field("shape", [2**40, 4]),
        "shape-ndim": set_field("shape", [8]),
        "shape-missing": del_field("shape"),
        "dtype-unknown": set_field("data_type", "float128x"),
        "dtype-num": set_field("data_type", 5),
        "dtype-missing": del_field("data_type"),
        "grid-ndim": lambda d: d["chunk_grid"]["configuration"].__setitem__("chunk_shape", [2]),
        "grid-zero": lambda d: d["chunk_grid"]["configuration"].__setitem__("chunk_shape", [0, 4]),
        "grid-huge": lambda d: d["chunk_grid"]["configuration"].__setitem__(
            "chunk_shape", [2**40, 4]
        ),
        "grid-name": lambda d: d["chunk_grid"].__setitem__("name", "irregular"),
        "codecs-unknown": set_field("codecs", [{"name": "nope"}]),
        "codecs-empty": set_field("codecs", []),
        "codecs-str": set_field("codecs", "zstd"),
        "fill-str": set_field("fill_value", "abc"),
        "node-type": set_field("node_type", "banana"),
        "dimnames": set_field("dimension_names", ["a"]),
        "attrs-list": set_field("attributes", [1]),
        "ptd-dtype-bad": lambda d: d["attributes"].__setitem__("__ptd_dtype__", "complex512"),
        "ptd-dtype-bf16": lambda d: d["attributes"].__setitem__("__ptd_dtype__", "bfloat16"),
        "not-dict": lambda d: [1, 2],
    }
    for name, fn in edits.items():
        zcase(f"zarr-arr-{name}", lambda p, fn=fn: edit_array_meta(p, "x", fn))
        zcase(
            f"zarr-arr-{name}-nocons",
            lambda p, fn=fn: (drop_consolidated(p), edit_array_meta(p, "x", fn)),
        )
    zcase(
        "zarr-arr-not-json-nocons",
        lambda p: (drop_consolidated(p), (p / "x" / "zarr.json").write_text("{")),
    )
    zcase(
        "zarr-arr-missing-json-nocons",
        lambda p: (drop_consolidated(p), (p / "x" / "zarr.json").unlink()),
    )
    zcase(
        "zarr-arr-stack-bad",
        lambda p: edit_array_meta(
            p, "st", lambda d: d["attributes"].__setitem__("__tensordict_stack__", "abc")
        ),
    )
    zcase(
        "zarr-arr-stack-wrong",
        lambda p: edit_array_meta(
            p, "st", lambda d: d["attributes"].__setitem__("__tensordict_stack__", [3, 3])
        ),
    )
    zcase(
        "zarr-arr-stack-huge",
        lambda p: edit_array_meta(
            p, "j", lambda d: d["attributes"].__setitem__("__tensordict_stack__", [2**40])
        ),
    )
    zcase(
        "zarr-arr-payload-as-f32",
        lambda p: edit_array_meta(p, "j", lambda d: d.__setitem__("data_type", "float32")),
    )

    # --- zarr: chunk files
    zcase("zarr-chunk-missing", lambda p: (p / "x" / "c" / "1" / "0").unlink())
    zcase("zarr-chunk-trunc", lambda p: truncate(p / "x" / "c" / "1" / "0", 5))
    zcase("zarr-chunk-empty", lambda p: truncate(p / "x" / "c" / "1" / "0", 0))
    zcase("zarr-chunk-garbage", lambda p: (p / "x" / "c" / "1" / "0").write_bytes(os.urandom(64)))
    zcase("zarr-chunk-flip", lambda p: flip(p / "x" / "c" / "1" / "0", 10))

    def chunk_dir(p: Path) -> None:
        f = p / "x" / "c" / "1" / "0"
        f.unlink()
        f.mkdir()

    zcase("zarr-chunk-dir", chunk_dir)
    zcase("zarr-chunk-raw-trunc", lambda p: truncate(p / "c" / "c" / "0" / "0", 7))
    zcase("zarr-chunk-raw-long", lambda p: (p / "c" / "c" / "0" / "0").write_bytes(b"\0" * 4096))
    zcase("zarr-chunk-raw-missing", lambda p: (p / "c" / "c" / "0" / "0").unlink())
    zcase("zarr-chunk-payload-missing", lambda p: (p / "j" / "c" / "0").unlink())
    zcase("zarr-chunk-str-garbage", lambda p: (p / "st" / "c" / "1").write_bytes(os.urandom(40)))

    # --- zarr: non-tensor payloads
    zcase("zarr-payload-not-json", lambda p: zarr_payload(p, "bad", b"{not json", "json"))
    zcase("zarr-payload-not-utf8", lambda p: zarr_payload(p, "bad", b"\xff\xfe\xfd", "json"))
    zcase(
        "zarr-payload-deep",
        lambda p: zarr_payload(p, "bad", b"[" * 100_000 + b"]" * 100_000, "json"),
    )
    zcase("zarr-payload-yaml", lambda p: zarr_payload(p, "bad", b"a: 1", "yaml"))
    zcase("zarr-payload-encoding-num", lambda p: zarr_payload(p, "bad", b"1", 5))
    zcase(
        "zarr-payload-pickle-evil",
        lambda p: zarr_payload(p, "evil", evil_pickle(marker), "pickle"),
        True,
    )
    zcase(
        "zarr-payload-pickle-garbage",
        lambda p: zarr_payload(p, "bad", b"\x80\x05garbage", "pickle"),
    )

    # --- zarr: keys that try to leave the store (via consolidated metadata)
    def cons_child(name: str) -> Callable[[Path], None]:
        def run(p: Path) -> None:
            doc = read_json(p / "zarr.json")
            meta = doc["consolidated_metadata"]["metadata"]
            meta[name] = meta["c"]
            write_json(p / "zarr.json", doc)

        return run

    for name, key in {
        "dotdot": "..",
        "parent": "../outside",
        "updown": "n/../../outside",
        "empty": "",
        "nul": "a\x00b",
        "abs": "/etc",
        "dot": ".",
    }.items():
        zcase(f"zarr-keys-{name}", cons_child(key), True)

    # --- memmap directory with a hostile pickle
    mm = out / "memmap-pickle"
    from ptd import NonTensorData, TensorDict

    TensorDict({"a": torch.zeros(2), "o": NonTensorData(b"raw")}, batch_size=[2]).memmap(mm)
    (mm / "o" / "other.pickle").write_bytes(evil_pickle(marker))
    cases.append(Case("memmap-pickle", mm, "memmap", True))
    # a sibling every escape attempt would find: readable data outside every store
    make_base_zarr(out / "outside")
    return cases


if __name__ == "__main__":  # pragma: no cover
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/robustness/corpus.py OUT_DIR")
    for case in build(Path(sys.argv[1])):
        print(f"{case.fmt:7} {case.name}")
