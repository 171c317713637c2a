"""The codec policy of ``convert``: how each property of a source array (its codec pipeline,
fill value, dimension names, resizable dims; :class:`~ptd.storage.properties.
ArrayProperties`) is carried into the destination, translated, or named as not kept.

Every step of the source's pipeline is asked of the destination's backend
(:meth:`~ptd.storage.api.Backend.codec_support`):

* a step the destination writes as it is (same format: HDF5 filters with their settings, zarr
  codecs with their JSON) is **kept**, plugin filters included (the source's readers needed the
  plugin too);
* across formats, a compressor the destination's plain readers decode is translated to it
  (HDF5 deflate <-> zarr ``gzip``; numcodecs ``zlib`` -> HDF5 deflate, the same zlib stream;
  byte shuffle <-> numcodecs ``shuffle``); one they would need a plugin for (zstd, blosc, lz4,
  bzip2 as HDF5 filters) or that the destination lacks (HDF5's lzf and szip in zarr) is replaced
  by the destination's default, ``shuffle+gzip(4)`` for HDF5 (h5py and tensordict read it with
  nothing installed) and ``zstd(3)`` for zarr, with a note saying which codec was replaced and how
  to keep it (``compression=``);
* a checksum is kept, else translated (fletcher32 <-> crc32c), with a note;
* a filter that changes the values or their type (delta, fixedscaleoffset, bitround, quantize,
  astype, packbits; HDF5's scaleoffset and nbit) is carried exactly where the destination has it
  and otherwise left out: the **decoded** values are written, and the leaf is listed in
  ``not_copied`` with ``"property": "filter"``.

A chosen ``compression`` replaces the compressors (filters and checksums are still carried as
above); ``compression="none"`` drops them. A compression the destination's plain readers cannot
decode (zstd, blosc, lz4 in HDF5) is written when asked, with a note that readers need
``hdf5plugin``. The ``random-access`` layout writes raw values (filters decoded, checksums
dropped, noted) so that reads can map them.

Fill values, dimension names and HDF5 maxshape are carried whenever the destination has them
(zarr arrays resize freely: a resizable HDF5 maxshape is recorded for a copy back, see
:mod:`ptd.storage.zarr.properties`).

>>> import numpy as np
>>> from ptd.storage.registry import get_backend
>>> from ptd.storage.properties import ArrayProperties, Codec, Stage
>>> zstd = Codec("zstd", Stage.COMPRESSOR, {"level": 3}, "zarr", {"name": "zstd"})
>>> props = ArrayProperties(("x",), (100, 4), np.dtype("f4"), (10, 4), None, (zstd,), None,
...                         None, None, {}, {}, "chunked")
>>> leaf = leaf_encoding(props, get_backend("h5"), compression=None, level=None)
>>> describe_pipeline(leaf.encoding.pipeline), leaf.notes[0][:29]
('shuffle+gzip(4)', 'zstd is an HDF5 filter plugin')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ptd.storage.api import Backend
from ptd.storage.properties import (
    ArrayProperties,
    Codec,
    CodecSupport,
    Encoding,
    Stage,
    describe_pipeline,
    same_fill,
)
from ptd.transfer.codecs import chosen_steps

__all__ = [
    "LeafEncoding",
    "default_compressors",
    "describe_pipeline",
    "leaf_encoding",
]


@dataclass
class LeafEncoding:
    """What one leaf gets in the destination: its :class:`Encoding`, the notes its
    translations call for (one line per kind, shared by many leaves), and the properties
    not kept (``(property, reason)``, listed in ``not_copied`` for this key)."""

    encoding: Encoding
    notes: list[str] = field(default_factory=list)
    dropped: list[tuple[str, str]] = field(default_factory=list)

    @property
    def compressed(self) -> bool:
        return any(c.stage is Stage.COMPRESSOR for c in self.encoding.pipeline)


def _gzip(level: int = 4) -> Codec:
    return Codec("gzip", Stage.COMPRESSOR, {"level": level})


def default_compressors(dst: type[Backend], itemsize: int) -> tuple[Codec, ...]:
    """The compressors a destination gets in place of one it cannot write plainly: HDF5's
    ``shuffle+gzip(4)``, zarr's ``zstd(3)``."""
    zstd = Codec("zstd", Stage.COMPRESSOR, {"level": 3})
    if dst.codec_support(zstd) is CodecSupport.PLAIN:
        return (zstd,)
    shuffle = Codec("shuffle", Stage.COMPRESSOR, {"elementsize": itemsize})
    return (shuffle, _gzip()) if itemsize > 1 else (_gzip(),)


def _format(dst: type[Backend]) -> str:
    return dst.policy.label


def _native_to(codec: Codec, dst: type[Backend]) -> bool:
    return codec.native_format == dst.name and codec.native is not None


def _neutral(codec: Codec) -> Codec:
    """The step without the source format's own spelling (for another format to write)."""
    return Codec(codec.name, codec.stage, codec.config)


def leaf_encoding(
    props: ArrayProperties,
    dst: type[Backend],
    *,
    compression: str | None,
    level: int | None,
    raw: bool = False,
    compressible: bool = True,
) -> LeafEncoding:
    """How the array ``props`` describes is stored in a ``dst`` destination (see the module
    doc). ``compression``/``level``: a chosen codec (``"none"`` for none); ``raw``: the
    values as they are, no filter, codec or checksum (the ``random-access`` layout);
    ``compressible``: whether the leaf is chunked in the destination (a contiguous HDF5
    dataset takes no filters)."""
    out = LeafEncoding(Encoding())
    fmt = _format(dst)
    bare = raw or not compressible
    pipeline: list[Codec] = []
    compressors: list[Codec] = []
    checksums: list[Codec] = []
    replaced: list[Codec] = []
    for step in props.pipeline:
        if step.stage is Stage.SERIALIZER:
            if _native_to(step, dst) and step.name != "bytes":
                pipeline.append(step)
            continue
        support = dst.codec_support(step)
        if step.stage is Stage.FILTER:
            if step.name in _LAYOUT_ONLY and (bare or support is CodecSupport.NONE):
                out.notes.append(
                    f"{step.name} (the order of a chunk's bytes, not its values) is not kept "
                    f"in {fmt}: the arrays are stored in C order"
                )
            elif bare:
                why = "the values are stored raw" if raw else f"a contiguous {fmt} array has none"
                out.dropped.append(("filter", _decoded(step, why)))
            elif support is not CodecSupport.NONE:
                pipeline.append(step if _native_to(step, dst) else _neutral(step))
            else:
                out.dropped.append(("filter", _decoded(step, f"{fmt} has no such filter")))
        elif step.stage is Stage.CHECKSUM:
            if bare:
                continue
            if _native_to(step, dst):
                checksums.append(step)
                continue
            other = _checksum(dst)
            if other is None:
                out.dropped.append(("checksum", f"{step.describe()}: {fmt} has no checksum"))
                continue
            checksums.append(other)
            if other.name != step.name:
                out.notes.append(
                    f"{step.name} checksums are written as {other.name} ({fmt}'s checksum)"
                )
        elif _native_to(step, dst):
            compressors.append(step)
        elif support is CodecSupport.PLAIN:
            compressors.append(_neutral(step))
            note = dst.codec_note(step)
            if note is not None:
                out.notes.append(note)
        else:
            replaced.append(step)
    if bare:
        if raw and any(c.stage in (Stage.COMPRESSOR, Stage.CHECKSUM) for c in props.pipeline):
            out.notes.append(
                "the random-access layout stores values raw (so reads can map them): the "
                "source's codecs and checksums are not kept"
            )
        compressors, checksums = [], []
        if raw and compression not in (None, "none"):  # remote zarr: zstd inner chunks
            compressors = list(chosen_steps(dst.policy, compression, level))
    elif compression is not None:
        compressors = list(chosen_steps(dst.policy, compression, level))
        for step in compressors:
            if dst.codec_support(step) is CodecSupport.PLUGIN:
                out.notes.append(
                    f"{step.name} is an {fmt} filter plugin: readers of the copy need it "
                    "(pip install hdf5plugin, then import hdf5plugin before h5py opens the file); "
                    "plain h5py and tensordict cannot read those leaves"
                )
    elif replaced:
        compressors = [c for c in compressors if c.name not in ("shuffle", "bitshuffle")]
        compressors.extend(default_compressors(dst, props.dtype.itemsize))
        names = "+".join(dict.fromkeys(c.name for c in replaced))
        # one note for every leaf, whatever its item size (no byte shuffle for 1-byte types)
        wide = default_compressors(dst, 8)
        instead = describe_pipeline(wide) or "uncompressed"
        if any(c.name == "shuffle" for c in wide):
            instead += " (without the shuffle for 1-byte types)"
        if any(dst.codec_support(c) is CodecSupport.PLUGIN for c in replaced):
            why = f"{names} is an {fmt} filter plugin that plain h5py and tensordict cannot read"
            keep = (
                f"pass --compression {replaced[0].name} to keep it (readers then need hdf5plugin)"
            )
        else:
            why = f"{names} is no codec of {fmt}"
            keep = "pass --compression to choose another"
        out.notes.append(f"{why}: those leaves were written as {instead}; {keep}")
    out.encoding = Encoding(
        pipeline=tuple(pipeline + compressors + checksums),
        fill_value=_fill(props),
        dimension_names=props.dimension_names,
        maxshape=_maxshape(props),
        cf_fill_value=props.cf_fill_value,
        dimension_labels_only=props.dimension_labels_only,
    )
    return out


#: filters that only reorder a chunk's bytes: the values are the same without them
_LAYOUT_ONLY = frozenset({"transpose"})


def _decoded(step: Codec, why: str) -> str:
    loss = " (as it quantized them)" if step.lossy else ""
    return f"{step.describe()}: {why}; the decoded values{loss} were written"


def _checksum(dst: type[Backend]) -> Codec | None:
    for name in ("crc32c", "fletcher32"):
        codec = Codec(name, Stage.CHECKSUM)
        if dst.codec_support(codec) is CodecSupport.PLAIN:
            return codec
    return None


def _fill(props: ArrayProperties) -> Any:
    """The source's fill value when it is not both formats' default (zero)."""
    if props.fill_value is None or props.dtype.fields is not None:
        return None
    if props.dtype.kind not in "biufc":
        return None
    return None if same_fill(props.fill_value, None) else props.fill_value


def _maxshape(props: ArrayProperties) -> tuple[int | None, ...] | None:
    """The source's maxshape when the array can grow (a fixed one is the default)."""
    return props.maxshape if props.resizable else None
