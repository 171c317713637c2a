"""A seed becomes one mutant: a copy of a base store damaged in one way, described in words.

:func:`make_mutant` is deterministic: the same seed (and the same bases) gives the same bytes.
Every edit is made the way an attacker would make it: bytes written into the file, h5py /
zarr-python / numcodecs calls on a clean copy, JSON rewritten by hand, links made with ``os``.

Families (``Mutant.mutation`` starts with the family name):

* HDF5: ``flip-super`` (superblock bits), ``flip-meta:SIG`` (an object header, B-tree, heap,
  ... found by its signature, or a v1 object header found by its address), ``zero-meta:SIG``,
  ``flip-chunk`` / ``flip-contig`` (data), ``flip-any``, ``truncate``, ``h5-attr:NAME`` (ptd's
  attributes set to hostile JSON), ``h5-link:KIND`` (soft links dangling, looping, inside;
  hard-link cycles; external links, external raw storage and virtual datasets pointing at the
  "outside" store), ``h5-chunk:KIND`` (raw chunks replaced: garbage, another dataset's,
  a decompression bomb, a wrong filter mask);
* Zarr: ``json-value:DOC`` (a value anywhere in a metadata document replaced by a hostile one,
  or a key deleted), ``json-field:FIELD`` (shape, chunks, codecs, data type, fill value, format
  set to absurd values, in the node's own document, its consolidated copy or both),
  ``json-text:KIND`` (not JSON, NaN tokens, deep nesting, huge literals, not UTF-8),
  ``chunk:KIND`` (deleted, truncated, flipped, garbage, swapped, from another array, a
  directory, decoder bombs, a lying blosc header), ``link:KIND`` (symlinks to the outside
  store, to ``/dev/zero``, to themselves, a FIFO), ``pickle:KIND`` (pickle codecs and pickled
  payloads whose loading would create the ``PWNED`` marker).
"""

from __future__ import annotations

import json
import os
import pickle
import random
import shutil
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from .bases import BASES, SUFFIX, fmt_of

#: the file a payload creates when code from a store runs (in the case's directory)
MARKER = "PWNED"

H5_SIGNATURES = (
    b"OHDR", b"OCHK", b"TREE", b"HEAP", b"GCOL", b"BTHD", b"BTIN", b"BTLF", b"FRHP", b"FHDB",
    b"FHIB", b"FSHD", b"FSSE", b"SNOD", b"FAHD", b"FADB", b"EAHD", b"EAIB", b"EADB", b"EASB",
)  # fmt: skip


@dataclass(frozen=True)
class Mutant:
    seed: int
    base: str
    fmt: str  #: "h5" or "zarr"
    mutation: str  #: family[:kind]
    detail: str  #: what exactly was changed (offsets, values)
    store: Path


# ------------------------------------------------------------------------------ helpers
def _flip(data: bytearray, rng: random.Random, start: int, end: int, count: int) -> str:
    end = min(end, len(data))
    if end <= start:
        return "nothing to flip"
    done = []
    for _ in range(count):
        off = rng.randrange(start, end)
        mask = 1 << rng.randrange(8) if rng.random() < 0.7 else rng.randrange(1, 256)
        data[off] ^= mask
        done.append(f"{off}^{mask:#04x}")
    return "bytes " + ",".join(done)


def _rewrite(path: Path, fn: Callable[[bytearray], str]) -> str:
    data = bytearray(path.read_bytes())
    what = fn(data)
    path.write_bytes(bytes(data))
    return what


#: JSON values an attacker would put anywhere: wrong types, absurd and negative numbers,
#: huge literals, empty and deep containers
JSON_POOL: tuple[Any, ...] = (
    None, True, False, 0, -1, 1, 3, 2**31, 2**53 + 1, 2**63, 2**64 + 1, -(2**63), 10**30,
    1.5, -0.0, 1e308, float("nan"), float("inf"), "", "abc", "float32", "x" * 5000,
    [], [0], [-1], [0, 0], [2**40, 2**40], [2**62, 4], [[1]], [None], {}, {"name": "nope"},
    {"name": "bytes", "configuration": {"endian": "sideways"}}, {"": {"": {}}},
)  # fmt: skip


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def _json_text(value: Any) -> str:
    return json.dumps(value)  # NaN / Infinity tokens stay (Python's json writes them)


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


def _set_path(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    doc[path[0]] = _set_path(doc[path[0]], path[1:], value)
    return doc


def _del_path(doc: Any, path: tuple) -> Any:
    if not path:
        return {}
    parent = doc
    for p in path[:-1]:
        parent = parent[p]
    del parent[path[-1]]
    return doc


def evil_pickle(marker: Path) -> bytes:
    """A protocol-0 pickle whose loading calls ``open(marker, "w")`` (creates the marker)."""
    return b"c__builtin__\nopen\n(" + pickle.dumps(str(marker), 0)[:-1] + b"S'w'\ntR."


@cache
def _zlib_bomb() -> bytes:
    """256 MiB of zeros, deflated (about 250 kB)."""
    c = zlib.compressobj(9)
    block = bytes(1 << 20)
    return b"".join(c.compress(block) for _ in range(256)) + c.flush()


@cache
def _gzip_bomb() -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(1 << 20)
    return b"".join(c.compress(block) for _ in range(256)) + c.flush()


@cache
def _zstd_bomb() -> bytes:
    """A zstd frame that declares (and holds) 512 MiB of zeros."""
    import numcodecs

    return bytes(numcodecs.Zstd(level=19).encode(np.zeros(512 << 20, dtype=np.uint8)))


def _blosc_liar(real: bytes) -> bytes:
    """A blosc chunk whose header claims 2 GiB of decompressed data."""
    if len(real) < 16:
        real = real.ljust(16, b"\0")
    head = bytearray(real[:16])
    struct.pack_into("<I", head, 4, 2**31 - 16)  # nbytes
    return bytes(head) + real[16:]


# ------------------------------------------------------------------------------ HDF5
def _h5_regions(path: Path) -> list[tuple[str, int]]:
    """(signature, offset) of every signed metadata block, plus ``v1hdr`` object headers (by
    their addresses: version 1 headers carry no signature)."""
    data = path.read_bytes()
    found = []
    for sig in H5_SIGNATURES:
        start = 0
        while (i := data.find(sig, start)) >= 0:
            found.append((sig.decode(), i))
            start = i + 1
    with h5py.File(path, "r") as f:
        addrs: list[int] = []
        f.visit(lambda name: addrs.append(int(h5py.h5o.get_info(f[name].id).addr)))
        addrs.append(int(h5py.h5o.get_info(f.id).addr))
    for a in addrs:
        if data[a : a + 4] != b"OHDR":
            found.append(("v1hdr", a))
    return sorted(found, key=lambda t: (t[1], t[0]))


def _h5_chunks(path: Path) -> list[tuple[str, int, int]]:
    """(dataset, offset, size) of every stored chunk."""
    out = []
    with h5py.File(path, "r") as f:
        for name in ("x", "y", "n/z", "e", "st"):
            ds = f[name]
            for i in range(ds.id.get_num_chunks()):
                info = ds.id.get_chunk_info(i)
                out.append((name, int(info.byte_offset), int(info.size)))
    return out


def _h5_bytes(rng: random.Random, store: Path, family: str) -> tuple[str, str]:
    size = store.stat().st_size
    if family == "flip-super":
        with open(store, "rb") as fh:
            end = 96 if fh.read(9)[8] in (0, 1) else 48
        return family, _rewrite(store, lambda d: _flip(d, rng, 0, end, rng.randint(1, 2)))
    if family in ("flip-meta", "zero-meta"):
        sig, off = rng.choice(_h5_regions(store))
        span = rng.choice((16, 64, 256))
        if family == "flip-meta":
            # the signature itself only sometimes: its check is the easy case
            lo = off if rng.random() < 0.15 else off + 4
            what = _rewrite(store, lambda d: _flip(d, rng, lo, off + span, rng.randint(1, 3)))
        else:
            start = off + rng.randrange(4, span)
            n = rng.choice((1, 4, 8, 32))

            def zero(d: bytearray) -> str:
                d[start : start + n] = bytes(len(d[start : start + n]))
                return f"{n} bytes zeroed at {start}"

            what = _rewrite(store, zero)
        return f"{family}:{sig}", f"{sig}@{off}: {what}"
    if family == "flip-chunk":
        name, off, n = rng.choice(_h5_chunks(store))
        what = _rewrite(store, lambda d: _flip(d, rng, off, off + n, rng.randint(1, 4)))
        return family, f"chunk of {name} @{off}+{n}: {what}"
    if family == "flip-contig":
        with h5py.File(store, "r") as f:
            off = int(f["c"].id.get_offset())
        return family, _rewrite(store, lambda d: _flip(d, rng, off, off + 192, 2))
    if family == "flip-any":
        return family, _rewrite(store, lambda d: _flip(d, rng, 0, size, rng.randint(1, 8)))
    # truncate
    cut = rng.choice(
        (0, rng.randrange(8), rng.randrange(96), rng.randrange(size), size - rng.randint(1, 64))
    )
    with open(store, "r+b") as fh:
        fh.truncate(cut)
    return "truncate", f"cut to {cut} of {size} bytes"


def _h5_attr(rng: random.Random, store: Path) -> tuple[str, str]:
    where, name = rng.choice(
        (
            ("/", "__tensordict__"),
            ("n", "__tensordict__"),
            ("st", "__tensordict_stack__"),
            ("x", "__ptd_dtype__"),
            ("s", "__tensordict_str__"),
            ("j", "__ptd_json__"),
        )
    )
    r = rng.random()
    if r < 0.15:
        text = _deep(rng.choice((1000, 100_000)))
    elif r < 0.3:
        text = "9" * rng.choice((5000, 100_000))
    elif r < 0.45:
        text = json.dumps({"batch_size": rng.choice(JSON_POOL), "version": 1})
    else:
        value = rng.choice(JSON_POOL)
        text = _json_text(value)
    with h5py.File(store, "r+") as f:
        obj = f[where]
        if name == "__tensordict_stack__" and rng.random() < 0.5:
            arr = np.array([rng.choice((-8, 0, 3, 2**62, 2**63 - 1))], dtype=np.int64)
            obj.attrs[name] = arr
            return f"h5-attr:{name}", f"{where}.{name} = {arr.tolist()}"
        obj.attrs[name] = text
    return f"h5-attr:{name}", f"{where}.{name} = {text[:60]!r}{'...' if len(text) > 60 else ''}"


def _h5_link(rng: random.Random, store: Path, case: Path, outside: Path) -> tuple[str, str]:
    kind = rng.choice(
        ("soft-dangling", "soft-loop", "soft-inside", "hard-cycle", "external-link",
         "external-storage", "virtual", "soft-to-root")
    )  # fmt: skip
    secret_h5 = case / "outside.h5"
    shutil.copyfile(outside / "outside-h5-latest.h5", secret_h5)
    secret_bin = case / "outside-secret.bin"
    shutil.copyfile(outside / "outside-secret.bin", secret_bin)
    with h5py.File(store, "r+") as f:
        if kind == "soft-dangling":
            f["dangle"] = h5py.SoftLink("/nowhere/at/all")
        elif kind == "soft-loop":
            f["la"] = h5py.SoftLink("/lb")
            f["lb"] = h5py.SoftLink("/la")
        elif kind == "soft-inside":
            f["n/alias"] = h5py.SoftLink("/y")
        elif kind == "soft-to-root":
            f["n/root"] = h5py.SoftLink("/")
        elif kind == "hard-cycle":
            f["n/again"] = f["n"]  # a group that contains itself
        elif kind == "external-link":
            target = str(secret_h5) if rng.random() < 0.5 else os.path.relpath(secret_h5, case)
            f["ext"] = h5py.ExternalLink(target, rng.choice(("/x", "/y", "/", "/n")))
        elif kind == "external-storage":
            f.create_dataset("raw", shape=(8,), dtype="<i8", external=[(str(secret_bin), 0, 64)])
        else:
            layout = h5py.VirtualLayout(shape=(8,), dtype="i8")
            layout[:] = h5py.VirtualSource(str(secret_h5), "y", shape=(8,))
            f.create_virtual_dataset("vds", layout)
    return f"h5-link:{kind}", kind


def _h5_chunk(rng: random.Random, store: Path) -> tuple[str, str]:
    kind = rng.choice(("garbage", "other-dataset", "bomb", "filter-mask", "empty", "oversize"))
    with h5py.File(store, "r+") as f:
        target = rng.choice(("x", "y", "n/z", "e"))
        ds = f[target]
        i = rng.randrange(ds.id.get_num_chunks())
        info = ds.id.get_chunk_info(i)
        offset = info.chunk_offset
        if kind == "garbage":
            data = rng.randbytes(rng.choice((1, 7, 40, 200)))
            mask = 0
        elif kind == "other-dataset":
            other = f[rng.choice([n for n in ("x", "y", "n/z", "e") if n != target])]
            mask, data = other.id.read_direct_chunk(other.id.get_chunk_info(0).chunk_offset)
        elif kind == "bomb":
            data, mask = _zlib_bomb(), 0
        elif kind == "filter-mask":
            mask, data = ds.id.read_direct_chunk(offset)
            mask = 0xFFFF
        elif kind == "empty":
            data, mask = b"\0", 0  # HDF5 stores no chunk of 0 bytes: the shortest there is
        else:
            data = zlib.compress(bytes(1 << 20))  # decompresses to far more than one chunk
            mask = 0
        ds.id.write_direct_chunk(offset, data, mask)
    return f"h5-chunk:{kind}", f"{target} chunk {offset}"


# ------------------------------------------------------------------------------ Zarr
def _metadata_docs(store: Path) -> list[Path]:
    names = ("zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata")
    return sorted(p for p in store.rglob("*") if p.name in names and p.is_file())


def _chunk_files(store: Path) -> list[Path]:
    meta = ("zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata")
    return sorted(p for p in store.rglob("*") if p.is_file() and p.name not in meta)


def _drop_consolidated(store: Path) -> None:
    zmeta = store / ".zmetadata"
    if zmeta.exists():
        zmeta.unlink()
    root = store / "zarr.json"
    if root.exists():
        doc = json.loads(root.read_text())
        doc.pop("consolidated_metadata", None)
        root.write_text(json.dumps(doc))


def _array_docs(store: Path) -> list[tuple[str, Path]]:
    """(key, own metadata document) of every array."""
    out = []
    for p in _metadata_docs(store):
        is_array = p.name == ".zarray" or (
            p.name == "zarr.json" and json.loads(p.read_text()).get("node_type") == "array"
        )
        if is_array:
            out.append((p.parent.relative_to(store).as_posix(), p))
    return out


def _array_dir(store: Path, chunk: Path) -> Path:
    """The array directory a chunk file belongs to (the nearest one with a metadata file)."""
    d = chunk.parent
    while d != store and not ((d / "zarr.json").exists() or (d / ".zarray").exists()):
        d = d.parent
    return d


def _consolidated(store: Path) -> tuple[Path, dict, dict] | None:
    """(document, its JSON, key -> node metadata) of the consolidated metadata, if any."""
    if (store / ".zmetadata").exists():
        path = store / ".zmetadata"
        doc = json.loads(path.read_text())
        return path, doc, doc["metadata"]
    doc = json.loads((store / "zarr.json").read_text())
    cons = doc.get("consolidated_metadata")
    if cons:
        return store / "zarr.json", doc, cons["metadata"]
    return None


def _field_edit(rng: random.Random, store: Path, v2: bool) -> tuple[str, str]:
    key, own = rng.choice(_array_docs(store))
    field, value = rng.choice(
        (
            ("shape", rng.choice(([2**62, 4], [2**40, 4], [-8, 4], [0, 4], [8.5, 4], [8], "8"))),
            ("chunks", rng.choice(([0, 4], [-2, 4], [2**40, 4], [1], [2**31, 2**31], None))),
            ("codec", rng.choice(("nope", "numcodecs.nope", "zstd", "blosc", "gzip", None))),
            ("dtype", rng.choice(("float128x", "<f16", "|O", "<U2000000000", 5, "int4", "|V0"))),
            ("fill_value", rng.choice(("abc", [1, 2], 2**70, "NaN", None, {"a": 1}))),
            ("zarr_format", rng.choice((2, 3, 4, "3", None))),
            ("order", rng.choice(("F", "X", None))),
        )
    )

    def edit(doc: dict) -> None:
        if field == "shape":
            doc["shape"] = value
        elif field == "chunks":
            if v2:
                doc["chunks"] = value
            else:
                doc["chunk_grid"]["configuration"]["chunk_shape"] = value
        elif field == "codec":
            if v2:
                doc["compressor"] = None if value is None else {"id": value}
            else:
                doc["codecs"] = [{"name": "bytes", "configuration": {"endian": "little"}}] + (
                    [] if value is None else [{"name": value}]
                )
        elif field == "dtype":
            doc["dtype" if v2 else "data_type"] = value
        elif field == "order":
            doc["order"] = value
        else:
            doc[field] = value

    where = rng.choice(("own", "consolidated", "both"))
    cons = _consolidated(store)
    if cons is None:
        where = "own"
    if where in ("own", "both"):
        doc = json.loads(own.read_text())
        edit(doc)
        own.write_text(_json_text(doc))
    if where in ("consolidated", "both") and cons is not None:
        path, whole, table = cons
        entry = table.get(f"{key}/.zarray" if v2 else key)
        if entry is not None:
            edit(entry)
            path.write_text(_json_text(whole))
    return f"json-field:{field}", f"{key} {field}={str(value)[:40]} in {where}"


def _json_value(rng: random.Random, store: Path) -> tuple[str, str]:
    if rng.random() < 0.5:
        _drop_consolidated(store)
    doc_path = rng.choice(_metadata_docs(store))
    doc = json.loads(doc_path.read_text())
    paths = _paths(doc)
    where = paths[rng.randrange(len(paths))]
    if where and rng.random() < 0.2:
        doc = _del_path(doc, where)
        what = f"deleted {list(where)}"
    else:
        value = rng.choice(JSON_POOL)
        doc = _set_path(doc, where, value)
        what = f"{list(where)} = {str(value)[:40]}"
    doc_path.write_text(_json_text(doc))
    rel = doc_path.relative_to(store).as_posix()
    return f"json-value:{doc_path.name}", f"{rel}: {what}"


def _json_text_edit(rng: random.Random, store: Path) -> tuple[str, str]:
    if rng.random() < 0.5:
        _drop_consolidated(store)
    doc_path = rng.choice(_metadata_docs(store))
    text = doc_path.read_text()
    kind = rng.choice(("cut", "deep", "nan", "bigint", "bigfloat", "binary", "empty", "dupkeys"))
    if kind == "cut":
        new: str | bytes = text[: rng.randrange(len(text))]
    elif kind == "deep":
        depth = rng.choice((2000, 100_000))
        new = text.replace(": ", ": " + "[" * depth, 1)
        new = new.replace(",", "]" * depth + ",", 1) if depth else new
    elif kind == "nan":
        new = text.replace("8", "NaN", 1) if rng.random() < 0.5 else text.replace("8", "-Infinity")
    elif kind == "bigint":
        new = text.replace("8", "9" * rng.choice((400, 5000, 1_000_000)), 1)
    elif kind == "bigfloat":
        new = text.replace("8", "1e999999", 1)
    elif kind == "binary":
        new = text.encode()[:20] + b"\xff\xfe\x00" + text.encode()[20:]
    elif kind == "empty":
        new = ""
    else:
        new = "{" + '"zarr_format": 3, ' * 3 + text.lstrip()[1:]
    if isinstance(new, bytes):
        doc_path.write_bytes(new)
    else:
        doc_path.write_text(new)
    return f"json-text:{kind}", doc_path.relative_to(store).as_posix()


def _chunk_edit(rng: random.Random, store: Path, v2: bool) -> tuple[str, str]:
    chunks = _chunk_files(store)
    victim = rng.choice(chunks)
    rel = victim.relative_to(store).as_posix()
    kind = rng.choice(
        ("delete", "truncate", "flip", "garbage", "swap", "other-array", "directory",
         "zstd-bomb", "gzip-bomb", "blosc-liar", "empty", "append")
    )  # fmt: skip
    data = victim.read_bytes()
    if kind == "delete":
        victim.unlink()
    elif kind == "truncate":
        victim.write_bytes(data[: rng.randrange(max(1, len(data)))])
    elif kind == "flip":
        buf = bytearray(data)
        what = _flip(buf, rng, 0, len(buf), rng.randint(1, 4))
        victim.write_bytes(bytes(buf))
        rel += f" {what}"
    elif kind == "garbage":
        victim.write_bytes(rng.randbytes(rng.choice((1, 16, 100, 4096))))
    elif kind in ("swap", "other-array"):
        home = _array_dir(store, victim)
        same = [c for c in chunks if _array_dir(store, c) == home and c != victim]
        pool = same if kind == "swap" and same else [c for c in chunks if c != victim]
        other = rng.choice(pool)
        victim.write_bytes(other.read_bytes())
        if kind == "swap":
            other.write_bytes(data)
        rel += f" <-> {other.relative_to(store).as_posix()}"
    elif kind == "directory":
        victim.unlink()
        victim.mkdir()
        (victim / "0").write_bytes(data)
    elif kind == "zstd-bomb":
        victim.write_bytes(_zstd_bomb())
    elif kind == "gzip-bomb":
        victim.write_bytes(_gzip_bomb() if rng.random() < 0.5 else _zlib_bomb())
    elif kind == "blosc-liar":
        victim.write_bytes(_blosc_liar(data))
    elif kind == "empty":
        victim.write_bytes(b"")
    else:
        victim.write_bytes(data + rng.randbytes(rng.choice((1, 1000))))
    return f"chunk:{kind}", rel


def _link(rng: random.Random, store: Path, case: Path, base: str, outside: Path) -> tuple[str, str]:
    twin = case / f"outside{SUFFIX[base]}"
    shutil.copytree(outside / f"outside-{base}{SUFFIX[base]}", twin, symlinks=True)
    kind = rng.choice(
        ("chunk-outside", "array-outside", "meta-outside", "chunk-devzero", "chunk-self",
         "chunk-fifo", "chunk-absolute", "store-dir-outside")
    )  # fmt: skip
    chunks = [c for c in _chunk_files(store) if c.parts[-2] != "s" and "/j/" not in str(c)]
    victim = rng.choice(chunks)
    rel = victim.relative_to(store)
    if kind in ("chunk-outside", "chunk-absolute"):
        target = twin / rel
        victim.unlink()
        if kind == "chunk-absolute":
            victim.symlink_to(target)
        else:
            victim.symlink_to(os.path.relpath(target, victim.parent))
    elif kind == "array-outside":
        arr = rng.choice(("x", "y", "c"))
        shutil.rmtree(store / arr)
        (store / arr).symlink_to(os.path.relpath(twin / arr, store))
        rel = Path(arr)
    elif kind == "store-dir-outside":
        shutil.rmtree(store / "n")
        (store / "n").symlink_to(twin / "n")
        rel = Path("n")
    elif kind == "meta-outside":
        name = "zarr.json" if (store / "x" / "zarr.json").exists() else ".zarray"
        _drop_consolidated(store)
        (store / "x" / name).unlink()
        (store / "x" / name).symlink_to(twin / "x" / name)
        rel = Path("x") / name
    elif kind == "chunk-devzero":
        victim.unlink()
        victim.symlink_to("/dev/zero")
    elif kind == "chunk-self":
        victim.unlink()
        victim.symlink_to(victim.name)
    else:
        victim.unlink()
        os.mkfifo(victim)
    return f"link:{kind}", rel.as_posix()


def _pickle(rng: random.Random, store: Path, case: Path, v2: bool) -> tuple[str, str]:
    import zarr

    marker = case / MARKER
    payload = evil_pickle(marker)
    kind = rng.choice(("payload", "codec"))
    if kind == "payload":
        # ptd's own pickled non-tensor entry (v3 only: ptd writes v3), or a v2 uint8 array
        g = zarr.open_group(str(store), mode="r+", use_consolidated=False)
        arr = g.create_array(
            "evil",
            shape=(len(payload),),
            dtype="uint8",
            chunks=(len(payload),),
            compressors=None,
            attributes={"__tensordict_non_tensor__": {"encoding": "pickle"}},
        )
        arr[...] = np.frombuffer(payload, dtype=np.uint8)
    elif v2:
        d = store / "evil"
        d.mkdir()
        (d / ".zarray").write_text(
            json.dumps(
                {
                    "zarr_format": 2,
                    "shape": [8],
                    "chunks": [8],
                    "dtype": "|O",
                    "compressor": None,
                    "fill_value": None,
                    "order": "C",
                    "filters": [{"id": "pickle", "protocol": 5}],
                }
            )
        )
        (d / "0").write_bytes(payload)
    else:
        d = store / "evil"
        d.mkdir()
        (d / "zarr.json").write_text(
            json.dumps(
                {
                    "zarr_format": 3,
                    "node_type": "array",
                    "shape": [8],
                    "data_type": "uint8",
                    "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [8]}},
                    "chunk_key_encoding": {"name": "default"},
                    "fill_value": 0,
                    "codecs": [
                        {"name": "numcodecs.pickle", "configuration": {"protocol": 5}},
                        {"name": "bytes"},
                    ],
                }
            )
        )
        (d / "c").mkdir()
        (d / "c" / "0").write_bytes(payload)
    _drop_consolidated(store)
    return f"pickle:{kind}", "evil"


# ------------------------------------------------------------------------------ the cases
H5_FAMILIES = {
    "flip-super": 3,
    "flip-meta": 8,
    "zero-meta": 3,
    "flip-chunk": 3,
    "flip-contig": 1,
    "flip-any": 3,
    "truncate": 3,
    "h5-attr": 3,
    "h5-link": 3,
    "h5-chunk": 3,
}
ZARR_FAMILIES = {
    "json-value": 6,
    "json-field": 6,
    "json-text": 3,
    "chunk": 6,
    "link": 3,
    "pickle": 1,
}


def _pick(rng: random.Random, families: dict[str, int]) -> str:
    names = list(families)
    return rng.choices(names, weights=[families[n] for n in names])[0]


def describe(seed: int) -> tuple[str, str]:
    """(base, family) of ``seed`` without making anything (the same choice make_mutant makes)."""
    rng = random.Random(seed)
    base = BASES[seed % len(BASES)]
    return base, _pick(rng, H5_FAMILIES if fmt_of(base) == "h5" else ZARR_FAMILIES)


def make_mutant(seed: int, bases_dir: Path, case: Path) -> Mutant:
    """Copy the seed's base into ``case`` (a fresh directory) and damage it; the store is
    ``case/store.h5`` or ``case/store.zarr``."""
    rng = random.Random(seed)
    base = BASES[seed % len(BASES)]
    fmt = fmt_of(base)
    family = _pick(rng, H5_FAMILIES if fmt == "h5" else ZARR_FAMILIES)
    store = case / f"store{SUFFIX[base]}"
    src = bases_dir / f"{base}{SUFFIX[base]}"
    if fmt == "h5":
        shutil.copyfile(src, store)
        if family == "h5-attr":
            mutation, detail = _h5_attr(rng, store)
        elif family == "h5-link":
            mutation, detail = _h5_link(rng, store, case, bases_dir)
        elif family == "h5-chunk":
            mutation, detail = _h5_chunk(rng, store)
        else:
            mutation, detail = _h5_bytes(rng, store, family)
    else:
        shutil.copytree(src, store)
        v2 = base == "zarr-v2"
        if family == "json-value":
            mutation, detail = _json_value(rng, store)
        elif family == "json-field":
            mutation, detail = _field_edit(rng, store, v2)
        elif family == "json-text":
            mutation, detail = _json_text_edit(rng, store)
        elif family == "chunk":
            mutation, detail = _chunk_edit(rng, store, v2)
        elif family == "link":
            mutation, detail = _link(rng, store, case, base, bases_dir)
        else:
            mutation, detail = _pickle(rng, store, case, v2)
    return Mutant(seed, base, fmt, mutation, detail, store)
