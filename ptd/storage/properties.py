"""The property inventory: everything a store says about a node besides its values.

Each backend describes its arrays with :class:`ArrayProperties` (:meth:`Backend.array_properties`)
and the store itself with :class:`StoreProperties` (:meth:`Backend.store_properties`), in terms
that do not depend on the format: a codec pipeline of :class:`Codec` steps with neutral names,
a fill value, dimension names, resizable dimensions, attributes with their types, links, the
HDF5 user block. ``convert`` and ``memmap`` carry each property (translated where the
destination has an equivalent) or name it as not copied; ``diff --metadata-only`` compares
inventories; ``inspect`` shows them.

The neutral codec names (:data:`CODEC_NAMES`) are what both formats call the same operation:
HDF5's deflate filter and zarr's ``gzip`` codec are ``"gzip"`` (the same DEFLATE stream in a
different wrapper: zlib's ``numcodecs.zlib`` is ``"zlib"``), HDF5's byte shuffle and
numcodecs' ``shuffle`` are ``"shuffle"``, and so on. A step keeps the format's own spelling in
:attr:`Codec.native` so that a same-format copy writes exactly what it read.

>>> c = Codec("fixedscaleoffset", Stage.FILTER, {"offset": 0, "scale": 100, "astype": "<i4"})
>>> c.describe(), c.lossy, c.changes_values
('fixedscaleoffset(offset=0,scale=100,astype=<i4)', True, True)
>>> Codec("gzip", Stage.COMPRESSOR, {"level": 4}).describe()
'gzip(4)'
>>> describe_pipeline((Codec("shuffle", Stage.FILTER), Codec("gzip", Stage.COMPRESSOR, {"level": 4})))
'shuffle+gzip(4)'
"""

from __future__ import annotations

import enum
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ptd.storage.meta import Path

__all__ = [
    "CODEC_NAMES",
    "LOSSY",
    "VALUE_FILTERS",
    "ArrayProperties",
    "Codec",
    "CodecSupport",
    "Encoding",
    "Stage",
    "StoreProperties",
    "copy_userblock",
    "describe_pipeline",
    "fill_text",
    "same_fill",
]


class Stage(enum.Enum):
    """Where a step sits in the pipeline, from the array's values to the stored bytes."""

    #: array to array: changes the values, their type or their order before encoding
    #: (zarr's array-to-array codecs, numcodecs filters; HDF5's scaleoffset and nbit)
    FILTER = "filter"
    #: array to bytes: how the values become bytes (zarr's ``bytes``/``vlen-utf8``; the
    #: implicit step of HDF5)
    SERIALIZER = "serializer"
    #: bytes to bytes, byte reordering included (HDF5's shuffle, numcodecs' shuffle): lossless
    COMPRESSOR = "compressor"
    #: bytes to bytes that adds a checksum (fletcher32, crc32c, adler32)
    CHECKSUM = "checksum"


#: the neutral names: what each step does, whatever format it is written in
CODEC_NAMES = (
    # compressors (bytes to bytes, lossless)
    "gzip",
    "zlib",
    "zstd",
    "blosc",
    "lz4",
    "bz2",
    "lzma",
    "lzf",
    "szip",
    "shuffle",
    "bitshuffle",
    # checksums
    "fletcher32",
    "crc32c",
    "adler32",
    "crc32",
    # filters (array to array)
    "delta",
    "fixedscaleoffset",
    "bitround",
    "quantize",
    "astype",
    "packbits",
    "scaleoffset",
    "nbit",
    "transpose",
    # serializers
    "bytes",
    "vlen-utf8",
    "vlen-bytes",
)
#: steps whose decoded values can differ from what was written
LOSSY = frozenset({"fixedscaleoffset", "bitround", "quantize", "scaleoffset", "zfp", "sz", "sz3"})
#: filters that change the values or their type on the way to the bytes (lossy or not): a copy
#: that drops one writes the decoded values, which is a change of representation to say
VALUE_FILTERS = frozenset(
    {
        "delta",
        "fixedscaleoffset",
        "bitround",
        "quantize",
        "astype",
        "packbits",
        "scaleoffset",
        "nbit",
    }
)


@dataclass(frozen=True)
class Codec:
    """One step of an array's codec pipeline."""

    #: the neutral name (:data:`CODEC_NAMES`), or the format's own name for one ptd does not
    #: know (``"h5filter32013"``, ``"numcodecs.zfpy"``)
    name: str
    stage: Stage
    #: the step's settings in neutral terms (JSON values): ``level``, ``elementsize``, ...
    config: Mapping[str, Any] = field(default_factory=dict)
    #: the format that wrote it and its own description of the step, for a same-format copy:
    #: h5 ``(filter id, flags, cd_values)``, zarr the codec's JSON
    native_format: str | None = None
    native: Any = None

    @property
    def level(self) -> int | None:
        value = self.config.get("level")
        return int(value) if isinstance(value, (int, np.integer)) else None

    @property
    def lossy(self) -> bool:
        """Whether decoding can give back other values than were written."""
        if "lossy" in self.config:  # the reader knows better (HDF5's integer scaleoffset)
            return bool(self.config["lossy"])
        return self.name in LOSSY

    @property
    def changes_values(self) -> bool:
        """Whether the step changes the values or their type on the way to the bytes (a
        filter such as delta, fixedscaleoffset, astype), not only how the bytes are packed."""
        return self.name in VALUE_FILTERS or self.lossy

    def describe(self) -> str:
        """``gzip(4)``, ``shuffle``, ``fixedscaleoffset(offset=0,scale=100,astype=<i4)``."""
        conf = {k: v for k, v in self.config.items() if k != "lossy"}
        if set(conf) == {"level"}:
            return f"{self.name}({conf['level']})"
        if self.name == "blosc" and "cname" in conf:
            return f"blosc({conf['cname']},{conf.get('clevel', conf.get('level'))})"
        if self.stage is Stage.COMPRESSOR and self.name in ("shuffle", "bitshuffle"):
            return self.name
        if not conf or self.stage is Stage.CHECKSUM or self.name == "bytes":
            return self.name
        return f"{self.name}({','.join(f'{k}={_short(v)}' for k, v in conf.items())})"


def _short(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_short(v) for v in value) + "]"
    return str(value)


def describe_pipeline(pipeline: Sequence[Codec], *, serializers: bool = False) -> str | None:
    """A pipeline as one line (``"delta(dtype=<i8)+zstd(3)"``), None when it is empty; the
    serializer step (zarr's ``bytes``) is left out unless ``serializers``."""
    steps = [c.describe() for c in pipeline if serializers or c.stage is not Stage.SERIALIZER]
    return "+".join(steps) or None


class CodecSupport(enum.Enum):
    """What a backend can do with a codec step (:meth:`Backend.codec_support`)."""

    #: written, and read by the format's plain readers (h5py, zarr-python) with nothing more
    PLAIN = "plain"
    #: written, but readers need a plugin (an HDF5 filter from hdf5plugin)
    PLUGIN = "plugin"
    #: this format has no such step
    NONE = "none"


@dataclass(frozen=True)
class ArrayProperties:
    """Everything a store states about one array except its values."""

    path: Path
    shape: tuple[int, ...]
    dtype: np.dtype
    #: the chunk one read decodes (inside the shards of a sharded array), None if contiguous
    chunks: tuple[int, ...] | None
    #: a sharded zarr array's shard shape, else None
    shards: tuple[int, ...] | None
    #: the steps in order from the values to the stored bytes (the serializer included)
    pipeline: tuple[Codec, ...]
    #: the value unwritten elements read as (a numpy scalar of ``dtype``), None when the
    #: store states none (HDF5's default, zeros)
    fill_value: Any
    #: a name per dimension (None for an unnamed one), or None when no dimension is named
    dimension_names: tuple[str | None, ...] | None
    #: the largest shape the array can grow to (None: unlimited), or None when the format
    #: states none (a zarr array resizes freely; ptd records an HDF5 maxshape through it)
    maxshape: tuple[int | None, ...] | None
    #: the node's user attributes (ptd's and tensordict's own left out) and their types as
    #: the format states them (``"float32"``, ``"vlen str"``, ``"json"``, ``"int64[3]"``)
    attrs: Mapping[str, Any]
    attr_types: Mapping[str, str]
    #: how the data is stored: ``contiguous``, ``chunked``, ``compact``, ``sharded``,
    #: ``virtual`` (an HDF5 virtual dataset), ``external`` (HDF5 external storage)
    layout: str
    #: a link to this node (``"soft link to /obs"``), or None
    link: str | None = None
    #: the value netCDF and CF readers (xarray) mask as missing, as the store spells it
    #: (netCDF's ``_FillValue`` attribute, xarray's in zarr: :mod:`ptd.storage.spelled`); None
    #: when not stated. In netCDF-4 it is also the HDF5 fill value; in Zarr v3 it need not be.
    cf_fill_value: Any = None
    #: the dimension names are plain HDF5 dimension labels, no dimension scale attached (HDF5's
    #: own spelling, not netCDF's): an HDF5 copy writes them as labels again, and neither
    #: attaches scales nor adds netCDF's dimension-only datasets, so an h5 -> h5 copy of a
    #: plain HDF5 file holds the same nodes. How a name is spelled, not a property of its own:
    #: not compared.
    dimension_labels_only: bool = False

    @property
    def resizable(self) -> tuple[int, ...]:
        """The dims the array can grow along (as stated: empty for a fixed HDF5 dataset)."""
        if self.maxshape is None:
            return ()
        return tuple(
            i
            for i, (m, s) in enumerate(zip(self.maxshape, self.shape, strict=False))
            if m is None or m > s
        )

    @property
    def filters(self) -> tuple[Codec, ...]:
        """The steps that change values (:attr:`Codec.changes_values`)."""
        return tuple(c for c in self.pipeline if c.changes_values)

    @property
    def compression(self) -> str | None:
        """The pipeline as one line, serializer left out (what ``inspect`` shows)."""
        return describe_pipeline(self.pipeline)

    def fill_description(self) -> str | None:
        """The fill value as text (``"nan"``, ``"-1"``), None when the store states none."""
        return fill_text(self.fill_value)

    def summary(self) -> dict[str, Any]:
        """The inventory as JSON values (for ``--json`` and for comparing two stores)."""
        return {
            "shape": list(self.shape),
            "dtype": str(self.dtype),
            "chunks": list(self.chunks) if self.chunks is not None else None,
            "shards": list(self.shards) if self.shards is not None else None,
            "pipeline": [c.describe() for c in self.pipeline if c.stage is not Stage.SERIALIZER],
            "fill_value": self.fill_description(),
            "dimension_names": list(self.dimension_names)
            if self.dimension_names is not None
            else None,
            "maxshape": [m if m is not None else None for m in self.maxshape]
            if self.maxshape is not None
            else None,
            "layout": self.layout,
            "attr_types": dict(self.attr_types),
            "link": self.link,
            "cf_fill_value": fill_text(self.cf_fill_value),
        }


@dataclass(frozen=True)
class StoreProperties:
    """What a store states about itself (file-level properties)."""

    format: str
    #: the zarr format (2 or 3), else None
    format_version: int | None = None
    #: bytes reserved at the start of an HDF5 file for another program's header (0: none)
    userblock_size: int = 0
    #: whether a zarr store has consolidated metadata
    consolidated: bool = False


@dataclass(frozen=True)
class Encoding:
    """How a new array is to be stored, in neutral terms: what ``convert`` asks a backend to
    write (:meth:`Backend.creation_options` turns it into the format's own arguments).

    ``pipeline`` lists only steps the backend can write (:meth:`Backend.codec_support`);
    ``maxshape`` None means the backend's default (fixed HDF5, freely resizable zarr)."""

    pipeline: tuple[Codec, ...] = ()
    fill_value: Any = None
    dimension_names: tuple[str | None, ...] | None = None
    maxshape: tuple[int | None, ...] | None = None
    #: :attr:`ArrayProperties.cf_fill_value`, to be spelled the destination's way
    cf_fill_value: Any = None
    #: :attr:`ArrayProperties.dimension_labels_only`: an HDF5 destination writes the names
    #: as labels only
    dimension_labels_only: bool = False


def fill_text(value: Any) -> str | None:
    """A fill value as text (``"nan"``, ``"-1"``), None for None."""
    if value is None:
        return None
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if isinstance(value, bytes):
        return repr(value)
    return str(value)


def same_fill(a: Any, b: Any) -> bool:
    """Whether two fill values are the same value: NaN equals NaN, and None (no fill value
    stated: the format's default) equals zero, the default of both formats.

    >>> same_fill(np.float32("nan"), float("nan")), same_fill(0, np.int8(0)), same_fill(None, 0)
    (True, True, True)
    >>> same_fill(None, -1), same_fill(np.nan, 0.0)
    (False, False)
    >>> rec = np.zeros((), [("t", "f8"), ("id", "i4")])[()]  # a table's: a record
    >>> same_fill(None, rec), same_fill(rec, rec), same_fill(rec, 0)
    (True, True, False)
    """
    if a is None and b is None:
        return True
    records = [np.asarray(v) for v in (a, b) if v is not None]
    if any(r.dtype.kind == "V" for r in records):  # records: the same bytes (None: all zero)
        if len(records) == 1:
            return not any(records[0].tobytes())
        x, y = records
        return x.dtype == y.dtype and x.tobytes() == y.tobytes()
    if a is None or b is None:
        other = b if a is None else a
        try:
            return not bool(np.any(np.asarray(other).astype(bool)))
        except (TypeError, ValueError):
            return other in (0, b"", "", False)
    try:
        x, y = np.asarray(a), np.asarray(b)
        if x.dtype.kind in "fc" and y.dtype.kind in "fc":
            return bool(np.array_equal(x, y, equal_nan=True))
        return bool(np.array_equal(x, y))
    except (TypeError, ValueError):
        return bool(a == b)


def copy_userblock(src: str, dst: str, size: int) -> None:
    """Copy the first ``size`` bytes of the file ``src`` (an HDF5 user block: another
    program's header) into the file ``dst``, a closed HDF5 file created with a user block of
    that size."""
    with open(src, "rb") as f:
        head = f.read(size)
    with open(dst, "r+b") as f:
        f.write(head)
        f.flush()
        os.fsync(f.fileno())
