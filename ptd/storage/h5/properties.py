"""HDF5's side of the property inventory (:mod:`ptd.storage.properties`): reading a
dataset's filter pipeline, fill value, dimension labels, maxshape and layout from its creation
property list, and turning a neutral :class:`~ptd.storage.properties.Encoding` into
``h5py.Group.create_dataset`` arguments.

The filter pipeline is HDF5's, in the order HDF5 applies it when writing (``shuffle`` before
``deflate``); each step keeps its ``(filter id, flags, cd_values)`` so that an HDF5 -> HDF5 copy
sets exactly the same filters (plugin filters and their settings included). Dimension names
are HDF5 dimension labels (``ds.dims[i].label``, stored in the ``DIMENSION_LABELS``
attribute), else the names of attached dimension scales (netCDF-4 and xarray write those).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import h5py
import numpy as np

from ptd.storage import spelled
from ptd.storage.h5 import plugins as h5_plugins
from ptd.storage.properties import Codec, CodecSupport, Encoding, Stage

__all__ = [
    "PROPERTY_ATTRS",
    "attr_types",
    "cf_fill_value",
    "codec_support",
    "creation_options",
    "dimension_names",
    "dimension_only_length",
    "fill_value",
    "layout",
    "pipeline",
    "scale_name",
    "set_dimension_names",
    "userblock_size",
]

#: attributes through which HDF5 (and netCDF-4 in it) states a property, not user attributes:
#: the table is :data:`ptd.storage.spelled.SPELLINGS` (``CLASS`` and ``NAME`` only on a scale)
PROPERTY_ATTRS = frozenset(s.attr for s in spelled.SPELLINGS["h5"])

_NATIVE = "h5"
# builtin filters: neutral name, stage
_BUILTIN: dict[int, tuple[str, Stage]] = {
    h5py.h5z.FILTER_DEFLATE: ("gzip", Stage.COMPRESSOR),
    h5py.h5z.FILTER_SHUFFLE: ("shuffle", Stage.COMPRESSOR),
    h5py.h5z.FILTER_FLETCHER32: ("fletcher32", Stage.CHECKSUM),
    h5py.h5z.FILTER_SZIP: ("szip", Stage.COMPRESSOR),
    h5py.h5z.FILTER_NBIT: ("nbit", Stage.FILTER),
    h5py.h5z.FILTER_SCALEOFFSET: ("scaleoffset", Stage.FILTER),
}
_LZF = 32000
# plugin filter names (h5_plugins.FILTERS) that differ from the neutral ones
_PLUGIN_NAMES = {"bzip2": "bz2"}
_LOSSY_PLUGINS = frozenset({"zfp", "sz", "sz3", "sperr", "htj2k", "fcidecomp"})
_BLOSC_CNAMES = {0: "blosclz", 1: "lz4", 2: "lz4hc", 3: "snappy", 4: "zlib", 5: "zstd"}
_BLOSC_CODES = {v: k for k, v in _BLOSC_CNAMES.items()}
_BLOSC_SHUFFLES = {0: "noshuffle", 1: "shuffle", 2: "bitshuffle"}


def _step(code: int, flags: int, values: tuple[int, ...], dtype: np.dtype) -> Codec:
    native = (int(code), int(flags), tuple(int(v) for v in values))
    config: dict[str, Any] = {}
    if code in _BUILTIN:
        name, stage = _BUILTIN[code]
        if code == h5py.h5z.FILTER_DEFLATE:
            config["level"] = int(values[0]) if values else 6
        elif code == h5py.h5z.FILTER_SHUFFLE:
            config["elementsize"] = int(values[0]) if values else dtype.itemsize
        elif code == h5py.h5z.FILTER_SCALEOFFSET and values:
            # cd_values[0]: 0 float (D-scale, lossy), 2 integer; [1]: the scale factor
            config = {"scale_type": int(values[0]), "scale_factor": int(values[1])}
            if int(values[0]) == 2:
                config["lossy"] = False
        elif code == h5py.h5z.FILTER_SZIP and len(values) >= 2:
            config = {"options_mask": int(values[0]), "pixels_per_block": int(values[1])}
        return Codec(name, stage, config, _NATIVE, native)
    if code == _LZF:
        return Codec("lzf", Stage.COMPRESSOR, {}, _NATIVE, native)
    known = h5_plugins.FILTERS.get(int(code))
    if known is None:
        return Codec(f"h5filter{code}", Stage.COMPRESSOR, {}, _NATIVE, native)
    name = _PLUGIN_NAMES.get(known.name, known.name)
    if name == "blosc" and len(values) >= 7:
        config = {
            "cname": _BLOSC_CNAMES.get(int(values[6]), str(values[6])),
            "clevel": int(values[4]),
            "shuffle": _BLOSC_SHUFFLES.get(int(values[5]), str(values[5])),
        }
    elif name in ("zstd", "bz2") and values:
        config = {"level": int(values[0])}
    elif name in _LOSSY_PLUGINS:
        config = {"lossy": True}
    stage = Stage.FILTER if name in _LOSSY_PLUGINS else Stage.COMPRESSOR
    return Codec(name, stage, config, _NATIVE, native)


def pipeline(dcpl: Any, dtype: np.dtype) -> tuple[Codec, ...]:
    """The filters of a dataset creation property list, in the order HDF5 applies them."""
    out = []
    for i in range(dcpl.get_nfilters()):
        code, flags, values, _name = dcpl.get_filter(i)
        out.append(_step(code, flags, tuple(values), dtype))
    return tuple(out)


def fill_value(ds: h5py.Dataset, dcpl: Any) -> Any:
    """The fill value the file states (a numpy scalar), None when it is HDF5's default."""
    if dcpl.fill_value_defined() != h5py.h5d.FILL_VALUE_USER_DEFINED:
        return None
    try:
        value = ds.fillvalue
    except (TypeError, ValueError, OSError):
        return None
    return value if isinstance(value, np.generic) else np.asarray(value)[()]


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def dimension_names(ds: h5py.Dataset, attrs: Mapping[str, Any]) -> tuple[str | None, ...] | None:
    """The dimension labels, else the names of attached dimension scales; None when no
    dimension has a name."""
    ndim = ds.id.rank
    if not ndim:
        return None
    if ndim == 1 and spelled.is_scale(attrs):  # a coordinate variable: its scale's own name
        return (scale_name(ds),)
    labels = attrs.get("DIMENSION_LABELS")
    if labels is not None:
        names = [_text(v) or None for v in np.atleast_1d(np.asarray(labels, dtype=object))]
        if len(names) == ndim and any(names):
            return tuple(names)
    if not h5py.h5a.exists(ds.id, b"DIMENSION_LIST"):  # (cheaper than ds.attrs)
        return None
    out: list[str | None] = []
    try:
        for dim in ds.dims:
            scales = list(dim.values())
            out.append(scale_name(scales[0]) if scales else None)
    except (OSError, TypeError, ValueError, KeyError):
        return None
    return tuple(out) if any(out) else None


def labels_only(ds: h5py.Dataset, attrs: Mapping[str, Any]) -> bool:
    """Whether the dataset names its dimensions by plain labels (``DIMENSION_LABELS``) with no
    dimension scale attached and is no scale itself: HDF5's own spelling, not netCDF's."""
    if "DIMENSION_LABELS" not in attrs or spelled.is_scale(attrs):
        return False
    return not h5py.h5a.exists(ds.id, b"DIMENSION_LIST")


def cf_fill_value(attrs: Mapping[str, Any], dtype: np.dtype) -> Any:
    """netCDF's ``_FillValue`` attribute as a scalar of the array's type, None when there is
    none (or it is no single value)."""
    value = attrs.get(spelled.FILL_ATTR)
    if value is None:
        return None
    arr = np.asarray(value)
    if arr.size != 1:
        return None
    try:
        return arr.reshape(()).astype(dtype)[()] if dtype.kind in "biufc" else arr.reshape(())[()]
    except (TypeError, ValueError):
        return None


def scale_name(scale: h5py.Dataset) -> str | None:
    """A dimension scale's name: its ``NAME`` attribute unless netCDF's placeholder, else the
    last part of its path."""
    name = scale.attrs.get("NAME")
    text = _text(name) if name is not None else ""
    if text and not spelled.is_dimension_only_name(text):
        return text
    return (scale.name or "").rsplit("/", 1)[-1] or None


def _attr(oid: Any, name: bytes) -> Any:
    """The attribute ``name`` of the object ``oid`` (None when it has none or it cannot be
    read), by the low-level API: no h5py object made."""
    try:
        if not h5py.h5a.exists(oid, name):
            return None
        aid = h5py.h5a.open(oid, name)
        if aid.shape not in ((), (1,)):
            return None
        out = np.empty(aid.shape, dtype=aid.dtype)
        aid.read(out)
        return out.reshape(-1)[0]
    except (OSError, TypeError, ValueError, KeyError, RuntimeError):
        return None


def dimension_only_length(oid: Any) -> int | None:
    """The length of the dimension that the dataset ``oid`` (a ``DatasetID``) states when it
    is netCDF-4's scale of a dimension that is no variable (1-D, ``CLASS`` is
    ``DIMENSION_SCALE``, ``NAME`` begins with :data:`~ptd.storage.spelled.DIMENSION_ONLY`);
    else None. Reads two attributes at most, one for most datasets (those with no ``NAME``)."""
    try:
        if oid.rank != 1:
            return None
    except (OSError, TypeError, ValueError):
        return None
    if not spelled.is_dimension_only_name(_attr(oid, b"NAME")):
        return None
    marker = _attr(oid, b"CLASS")
    if marker is None or _text(marker) != spelled.DIMENSION_SCALE:
        return None
    return int(oid.shape[0])


def layout(dcpl: Any) -> str:
    """``contiguous``, ``chunked``, ``compact``, ``virtual`` or ``external``."""
    kind = dcpl.get_layout()
    if kind == h5py.h5d.VIRTUAL:
        return "virtual"
    if dcpl.get_external_count():
        return "external"
    if kind == h5py.h5d.CHUNKED:
        return "chunked"
    if kind == h5py.h5d.COMPACT:
        return "compact"
    return "contiguous"


def attr_types(obj: h5py.HLObject, names: Any) -> dict[str, str]:
    """Each named attribute's HDF5 type as text: ``float32``, ``int64[3]``, ``vlen str``,
    ``bytes[10]``."""
    out = {}
    for name in names:
        try:
            aid = obj.attrs.get_id(name)
            dt, shape = aid.dtype, aid.shape
        except (KeyError, TypeError, ValueError):
            continue
        out[name] = _type_text(dt) + (f"[{','.join(map(str, shape))}]" if shape else "")
    return out


def _type_text(dt: np.dtype) -> str:
    info = h5py.check_string_dtype(dt)
    if info is not None:
        kind = "str" if info.encoding == "utf-8" else "bytes"
        return f"vlen {kind}" if info.length is None else f"{kind}[{info.length}]"
    return str(dt)


# --- writing ---------------------------------------------------------------------------------
def codec_support(codec: Codec) -> CodecSupport:
    """What HDF5 does with a step: builtin filters (and lzf) are plain h5py; the filters
    ``hdf5plugin`` registers need it to be read."""
    if codec.native_format == _NATIVE and codec.native is not None:
        code = codec.native[0]
        if code in _BUILTIN or code == _LZF:
            return CodecSupport.PLAIN
        return CodecSupport.PLUGIN if code in h5_plugins.FILTERS else CodecSupport.NONE
    if codec.name in ("gzip", "zlib", "shuffle", "fletcher32", "lzf"):
        return CodecSupport.PLAIN
    if codec.name == "szip" and h5py.h5z.filter_avail(h5py.h5z.FILTER_SZIP):
        return CodecSupport.PLAIN
    cname = codec.config.get("cname", "lz4")  # what the source's metadata says: any JSON
    if codec.name in ("zstd", "bz2", "bitshuffle") or (
        codec.name == "blosc" and isinstance(cname, str) and cname in _BLOSC_CODES
    ):
        return CodecSupport.PLUGIN
    if codec.name == "lz4":
        return CodecSupport.PLUGIN
    return CodecSupport.NONE


def codec_available(codec: Codec) -> bool:
    """Whether the HDF5 library of this process has the step's filter (a plugin filter
    needs ``hdf5plugin`` imported, or the plugin on ``HDF5_PLUGIN_PATH``)."""
    try:
        code = _native(codec, np.dtype("u1"))[0]
    except ValueError:
        return False
    return bool(h5py.h5z.filter_avail(code))


def _native(codec: Codec, dtype: np.dtype) -> tuple[int, int, tuple[int, ...]]:
    """The ``(filter id, flags, cd_values)`` of a step HDF5 can write."""
    if codec.native_format == _NATIVE and codec.native is not None:
        code, flags, values = codec.native
        return int(code), int(flags), tuple(values)
    name, conf = codec.name, codec.config
    optional = h5py.h5z.FLAG_OPTIONAL
    if name in ("gzip", "zlib"):
        level = codec.level
        return h5py.h5z.FILTER_DEFLATE, optional, (6 if level is None else min(max(level, 0), 9),)
    if name == "shuffle":
        return h5py.h5z.FILTER_SHUFFLE, optional, (int(conf.get("elementsize", dtype.itemsize)),)
    if name == "fletcher32":
        return h5py.h5z.FILTER_FLETCHER32, h5py.h5z.FLAG_MANDATORY, ()
    if name == "lzf":
        return _LZF, optional, ()
    if name == "szip":
        return (
            h5py.h5z.FILTER_SZIP,
            optional,
            (int(conf.get("options_mask", 4)), int(conf.get("pixels_per_block", 8))),
        )
    if name == "zstd":
        return 32015, optional, (int(conf.get("level", 3)),)
    if name == "bz2":
        return 307, optional, (int(conf.get("level", 9)),)
    if name == "lz4":
        return 32004, optional, (0,)
    if name == "bitshuffle":
        return 32008, optional, (0, 2, dtype.itemsize, 0, 0)
    if name == "blosc":
        shuffle = {v: k for k, v in _BLOSC_SHUFFLES.items()}.get(
            str(conf.get("shuffle", "shuffle")), 1
        )
        cname = _BLOSC_CODES.get(str(conf.get("cname", "lz4")), 1)
        clevel = int(conf.get("clevel", conf.get("level", 5)))
        return 32001, optional, (2, 2, dtype.itemsize, 0, clevel, shuffle, cname)
    raise ValueError(f"HDF5 has no filter for {codec.describe()}")


def creation_options(encoding: Encoding, dtype: np.dtype) -> dict[str, Any]:
    """``create_dataset`` keyword arguments for ``encoding``: a creation property list with
    its filters set in order (``dcpl``), ``fillvalue``, ``maxshape``; and ``dimension_names``
    for :func:`set_dimension_names` after the dataset exists. Steps HDF5 has no filter for
    raise ValueError (the caller asks :func:`codec_support` first)."""
    out: dict[str, Any] = {}
    steps = [c for c in encoding.pipeline if c.stage is not Stage.SERIALIZER]
    if steps:
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        for codec in steps:
            code, flags, values = _native(codec, dtype)
            if not h5py.h5z.filter_avail(code):  # an optional filter would be skipped silently
                raise ValueError(
                    f"the HDF5 filter {codec.describe()} (id {code}) is not available here "
                    "(pip install hdf5plugin)"
                )
            dcpl.set_filter(code, flags, values)
        out["dcpl"] = dcpl
    if encoding.fill_value is not None:
        out["fillvalue"] = encoding.fill_value
    if encoding.maxshape is not None:
        out["maxshape"] = tuple(encoding.maxshape)
    if encoding.dimension_names is not None:
        out["dimension_names"] = tuple(encoding.dimension_names)
        if encoding.dimension_labels_only:
            out["dimension_labels_only"] = True
    if encoding.cf_fill_value is not None and dtype.kind in "biufc":
        # netCDF states it twice: the HDF5 fill value and the attribute readers mask with
        out.setdefault("fillvalue", encoding.cf_fill_value)
        out["cf_fill_value"] = np.asarray([encoding.cf_fill_value], dtype=dtype)
    return out


def set_dimension_names(ds: h5py.Dataset, names: tuple[str | None, ...]) -> None:
    """Label the dataset's dimensions (``DIMENSION_LABELS``)."""
    for dim, name in zip(ds.dims, names, strict=False):
        if name:
            dim.label = name


def set_properties(ds: h5py.Dataset, options: Mapping[str, Any]) -> None:
    """What :func:`creation_options` leaves for after the dataset exists: the dimension
    labels and netCDF's ``_FillValue`` attribute."""
    names = options.get("dimension_names")
    if names:
        set_dimension_names(ds, names)
    fill = options.get("cf_fill_value")
    if fill is not None:
        ds.attrs[spelled.FILL_ATTR] = fill


def userblock_size(file: h5py.File) -> int:
    """The bytes the file reserves at its start for another program's header."""
    return int(file.id.get_create_plist().get_userblock())
