"""Zarr's side of the property inventory (:mod:`ptd.storage.properties`): an array's
codec pipeline (v3 codecs, or a v2 array's filters and compressor), fill value, dimension
names and shards, and a neutral :class:`~ptd.storage.properties.Encoding` turned into
``zarr.Group.create_array`` arguments.

Neutral names drop numcodecs' prefix (``numcodecs.delta`` is ``delta``, v2's ``{"id": "zlib"}``
is ``zlib``); each step keeps its zarr JSON (``{"name": ..., "configuration": ...}``) so that a
zarr -> zarr copy writes exactly the codec it read. A sharded array's pipeline is that of its
inner chunks (what one read decodes); the shard shape is beside it.

Zarr arrays resize freely along every dimension. An HDF5 dataset's ``maxshape`` that is not its
shape has no zarr field: it is recorded in the ``__ptd_maxshape__`` attribute (``null`` for an
unlimited dimension), so that a copy back to HDF5 restores it.
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Mapping
from typing import Any

import numpy as np
from zarr.abc.codec import ArrayArrayCodec, ArrayBytesCodec

from ptd.format.names import PTD_MAXSHAPE_ATTR
from ptd.storage import spelled
from ptd.storage.properties import Codec, CodecSupport, Encoding, Stage

__all__ = [
    "MAXSHAPE_ATTR",
    "PROPERTY_ATTRS",
    "V2_DIMENSIONS_ATTR",
    "attr_types",
    "cf_fill_value",
    "codec_note",
    "codec_support",
    "creation_options",
    "dimension_names",
    "fill_value",
    "maxshape",
    "pipeline",
]

#: ptd's record of an HDF5 maxshape (see the module doc)
MAXSHAPE_ATTR = PTD_MAXSHAPE_ATTR
#: xarray's dimension names of a zarr v2 array
V2_DIMENSIONS_ATTR = "_ARRAY_DIMENSIONS"
#: attributes through which a store states a property, not user attributes (the table is
#: :data:`ptd.storage.spelled.SPELLINGS`)
PROPERTY_ATTRS = frozenset(s.attr for s in spelled.SPELLINGS["zarr"])

_NATIVE = "zarr"
_CHECKSUMS = frozenset({"crc32c", "adler32", "crc32", "fletcher32", "jenkins_lookup3"})
_BYTE_SHUFFLES = frozenset({"shuffle", "bitshuffle"})
#: codecs of the zarr v3 specification (every implementation reads them)
_SPEC = frozenset({"gzip", "zstd", "blosc", "crc32c", "bytes", "transpose", "sharding_indexed"})
#: numcodecs codecs zarr-python 3 reads and writes (``numcodecs.<name>`` in v3 metadata)
_NUMCODECS = frozenset(
    {
        "zlib",
        "lz4",
        "bz2",
        "lzma",
        "shuffle",
        "adler32",
        "crc32",
        "fletcher32",
        "jenkins_lookup3",
        "delta",
        "fixedscaleoffset",
        "bitround",
        "quantize",
        "astype",
        "packbits",
        "zfpy",
        "pcodec",
    }
)
_LOSSY = frozenset({"zfpy"})
_V2_NAMES = {"gzip": "gzip", "zstd": "zstd", "blosc": "blosc"}


def _neutral(name: str) -> str:
    return name[len("numcodecs.") :] if name.startswith("numcodecs.") else name


def _v3_step(codec: Any) -> Codec:
    try:
        doc = codec.to_dict()
    except Exception:  # noqa: BLE001 - a codec without a JSON form: named by its class
        doc = {"name": type(codec).__name__.lower(), "configuration": {}}
    raw = str(doc.get("name"))
    name = _neutral(raw)
    config = dict(doc.get("configuration") or {})
    if isinstance(codec, ArrayArrayCodec):
        stage = Stage.FILTER
    elif isinstance(codec, ArrayBytesCodec):
        stage = Stage.SERIALIZER
    else:
        stage = Stage.CHECKSUM if name in _CHECKSUMS else Stage.COMPRESSOR
    if name == "zstd":
        config = {k: v for k, v in config.items() if k != "checksum" or v}
    if name in _LOSSY:
        config["lossy"] = True
    return Codec(
        name, stage, config, _NATIVE, {"name": raw, "configuration": doc.get("configuration") or {}}
    )


def _v2_step(codec: Any, *, compressor: bool) -> Codec:
    conf = dict(codec.get_config())
    raw = str(conf.pop("id", type(codec).__name__.lower()))
    name = _neutral(raw)
    if name in _CHECKSUMS:
        stage = Stage.CHECKSUM
    elif compressor or name in _BYTE_SHUFFLES:
        stage = Stage.COMPRESSOR
    else:
        stage = Stage.FILTER
    native = {"id": raw, **conf}
    if name in _LOSSY:
        conf["lossy"] = True
    return Codec(name, stage, conf, _NATIVE, native)


def pipeline(arr: Any) -> tuple[Codec, ...]:
    """The array's steps from values to stored bytes (a sharded array: its inner chunks')."""
    md = arr.metadata
    if md.zarr_format == 3:
        codecs = list(md.codecs)
        for c in codecs:
            if type(c).__name__ == "ShardingCodec":
                codecs = list(c.codecs)
                break
        return tuple(_v3_step(c) for c in codecs)
    out = [_v2_step(f, compressor=False) for f in (md.filters or ())]
    if md.compressor is not None:
        out.append(_v2_step(md.compressor, compressor=True))
    return tuple(out)


def fill_value(arr: Any) -> Any:
    """The fill value the array states (a numpy scalar), None for a v2 array without one."""
    value = arr.metadata.fill_value
    if value is None:
        return None
    if isinstance(value, np.generic):
        return value
    try:
        return np.asarray(value, dtype=arr.dtype)[()]
    except (TypeError, ValueError):
        return value


def dimension_names(arr: Any, attrs: Mapping[str, Any]) -> tuple[str | None, ...] | None:
    """v3's ``dimension_names``, v2's ``_ARRAY_DIMENSIONS`` attribute; None when unnamed."""
    md = arr.metadata
    names = getattr(md, "dimension_names", None) if md.zarr_format == 3 else None
    if names is None and md.zarr_format == 2:
        names = attrs.get(V2_DIMENSIONS_ATTR)
    if not isinstance(names, (list, tuple)) or len(names) != len(md.shape):
        return None
    out = tuple(str(n) if n is not None else None for n in names)
    return out if any(out) else None


def cf_fill_value(arr: Any, attrs: Mapping[str, Any]) -> Any:
    """The value xarray masks as missing: in Zarr v3 the ``_FillValue`` attribute as xarray
    spells it (a float as the base64 of its little-endian float64 bytes, an integer as a
    number); in Zarr v2 xarray takes the array's fill value, for arrays it wrote (those with
    ``_ARRAY_DIMENSIONS``). None when not stated or not understood."""
    md = arr.metadata
    dtype = np.dtype(getattr(arr, "dtype", None) or "V")
    if md.zarr_format == 2:
        if V2_DIMENSIONS_ATTR not in attrs or md.fill_value is None:
            return None
        return fill_value(arr)
    value = attrs.get(spelled.FILL_ATTR)
    if value is None:
        return None
    try:
        if dtype.kind == "f" and isinstance(value, str):
            return dtype.type(struct.unpack("<d", base64.b64decode(value, validate=True))[0])
        if dtype.kind in "iub" and isinstance(value, (int, float, bool)):
            return dtype.type(value)
    except (binascii.Error, struct.error, ValueError, OverflowError, TypeError):
        return None
    return None


def cf_fill_attr(value: Any, dtype: np.dtype) -> Any:
    """``value`` as xarray spells the ``_FillValue`` attribute of a Zarr v3 array (see
    :func:`cf_fill_value`), None for a type it has no spelling of here."""
    if dtype.kind == "f":
        return base64.b64encode(struct.pack("<d", float(value))).decode("ascii")
    if dtype.kind in "iu":
        return int(value)
    if dtype.kind == "b":
        return bool(value)
    return None


def json_fill(value: Any) -> Any:
    """A fill value as zarr's v3 specification spells it in JSON: NaN and the infinities as
    the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (a bare ``NaN`` is not JSON)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    return value


def maxshape(attrs: Mapping[str, Any], shape: tuple[int, ...]) -> tuple[int | None, ...] | None:
    """ptd's record of an HDF5 maxshape, when it fits the array; else None (zarr arrays
    resize freely)."""
    record = attrs.get(MAXSHAPE_ATTR)
    if not isinstance(record, list) or len(record) != len(shape):
        return None
    if not all(
        m is None or (isinstance(m, int) and m >= s) for m, s in zip(record, shape, strict=True)
    ):
        return None
    return tuple(record)


def attr_types(attrs: Mapping[str, Any]) -> dict[str, str]:
    """Each attribute's JSON type: ``number``, ``integer``, ``string``, ``boolean``, ``list``,
    ``object``, ``null``."""
    out = {}
    for name, value in attrs.items():
        if isinstance(value, bool):
            out[name] = "boolean"
        elif isinstance(value, int):
            out[name] = "integer"
        elif isinstance(value, float):
            out[name] = "number"
        elif isinstance(value, str):
            out[name] = "string"
        elif isinstance(value, (list, tuple)):
            out[name] = "list"
        elif value is None:
            out[name] = "null"
        else:
            out[name] = "object"
    return out


# --- writing ---------------------------------------------------------------------------------
def codec_support(codec: Codec) -> CodecSupport:
    """The zarr v3 specification's codecs and numcodecs' are written, and zarr-python reads
    both without anything more (other implementations may not read numcodecs'); HDF5-only
    filters (scaleoffset, nbit, szip, lzf, plugins) have no zarr codec."""
    if codec.native_format == _NATIVE and isinstance(codec.native, dict):
        if "id" in codec.native:  # a v2 codec: v3 has it under numcodecs' name
            return CodecSupport.PLAIN if codec.name in _NUMCODECS | _SPEC else CodecSupport.NONE
        return CodecSupport.PLAIN
    if codec.name in _SPEC or codec.name in _NUMCODECS:
        return CodecSupport.PLAIN
    return CodecSupport.NONE


def codec_note(codec: Codec) -> str | None:
    """A step of another format written as a numcodecs codec: zarr-python reads it, other
    Zarr implementations may not (it is not in the v3 specification)."""
    if codec.name in _SPEC or codec.name not in _NUMCODECS:
        return None
    return (
        f"{codec.name} is written as the zarr codec numcodecs.{codec.name}, which zarr-python "
        "reads but the Zarr v3 specification does not define (other implementations may not)"
    )


_BLOSC_SHUFFLES = {0: "noshuffle", 1: "shuffle", 2: "bitshuffle"}


def _blosc_shuffle(value: Any, itemsize: int) -> str:
    """v3's blosc ``shuffle`` (a name) for v2's (an int; -1 is blosc's auto choice: bit
    shuffle for 1-byte items, byte shuffle otherwise)."""
    if isinstance(value, str):
        return value
    if value == -1:
        return "bitshuffle" if itemsize == 1 else "shuffle"
    return _BLOSC_SHUFFLES.get(int(value), "shuffle")


def _document(codec: Codec, dtype: np.dtype) -> dict[str, Any]:
    """The zarr v3 JSON of a step zarr can write."""
    # a v2 codec (numcodecs' ``id`` form) is written as its v3 spelling below
    if codec.native_format == _NATIVE and isinstance(codec.native, dict) and "name" in codec.native:
        return dict(codec.native)
    conf = {k: v for k, v in codec.config.items() if k != "lossy"}
    name = codec.name
    if name == "gzip":
        return {"name": "gzip", "configuration": {"level": int(conf.get("level", 5))}}
    if name == "zstd":
        return {
            "name": "zstd",
            "configuration": {
                "level": int(conf.get("level", 3)),
                "checksum": bool(conf.get("checksum", False)),
            },
        }
    if name == "blosc":
        shuffle = _blosc_shuffle(conf.get("shuffle", "shuffle"), dtype.itemsize)
        return {
            "name": "blosc",
            "configuration": {
                "cname": str(conf.get("cname", "lz4")),
                "clevel": int(conf.get("clevel", conf.get("level", 5))),
                "shuffle": shuffle,
                "typesize": dtype.itemsize,
                "blocksize": int(conf.get("blocksize", 0)),
            },
        }
    if name == "crc32c":
        return {"name": "crc32c"}
    if name == "shuffle":
        return {
            "name": "numcodecs.shuffle",
            "configuration": {"elementsize": int(conf.get("elementsize", dtype.itemsize))},
        }
    if name == "bz2":
        return {"name": "numcodecs.bz2", "configuration": {"level": int(conf.get("level", 9))}}
    if name in _NUMCODECS:
        return {"name": f"numcodecs.{name}", "configuration": conf}
    raise ValueError(f"zarr has no codec for {codec.describe()}")


def creation_options(encoding: Encoding, dtype: np.dtype) -> dict[str, Any]:
    """``create_array`` keyword arguments for ``encoding``: ``filters``, ``serializer``,
    ``compressors`` (checksums after the compressors, as zarr orders them), ``fill_value``,
    ``dimension_names``; a stated maxshape is recorded in ``__ptd_maxshape__`` (``attributes``)
    when it is not the array's shape."""
    filters, compressors, serializer = [], [], None
    for codec in encoding.pipeline:
        if codec.stage is Stage.FILTER:
            filters.append(_document(codec, dtype))
        elif codec.stage is Stage.SERIALIZER:
            serializer = _document(codec, dtype)
        else:
            compressors.append(_document(codec, dtype))
    out: dict[str, Any] = {"compressors": compressors or None}
    if filters:
        out["filters"] = filters
    if serializer is not None and serializer.get("name") != "bytes":
        out["serializer"] = serializer
    fill = encoding.fill_value
    if fill is None and encoding.cf_fill_value is not None:
        fill = encoding.cf_fill_value  # netCDF: the same value, so that a reader may mask
    if fill is not None:
        out["fill_value"] = fill.item() if isinstance(fill, np.generic) else fill
    if encoding.dimension_names is not None:
        out["dimension_names"] = list(encoding.dimension_names)
    attributes: dict[str, Any] = {}
    if encoding.maxshape is not None:
        attributes[MAXSHAPE_ATTR] = list(encoding.maxshape)
    if encoding.cf_fill_value is not None:
        spelled_fill = cf_fill_attr(encoding.cf_fill_value, dtype)
        if spelled_fill is not None:
            attributes[spelled.FILL_ATTR] = spelled_fill
    if attributes:
        out["attributes"] = attributes
    return out
