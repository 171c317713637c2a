"""Compression codecs in ``convert``'s terms: the ``compression=`` names and levels, reading a
backend's codec description, and the creation options each format needs for a codec.

>>> check_compression("zstd", None), check_compression(None, None)
(('zstd', 3), (None, None))
>>> parse_codec("shuffle+gzip(4)"), parse_codec("blosc(lz4,5)"), parse_codec(None)
(('gzip', 4), ('lz4', 5), None)
>>> describe("blosc", None), describe("none", None)
('blosc(5)', None)
"""

from __future__ import annotations

import re
from typing import Any

from ptd.errors import PtdValueError
from ptd.storage.backends.base import ArrayMeta

__all__ = [
    "COMPRESSIONS",
    "DEFAULT_LEVEL",
    "LEVELS",
    "H5_FILTER",
    "check_compression",
    "parse_codec",
    "choose_codec",
    "codec_options",
    "describe",
]

#: the ``compression=`` names
COMPRESSIONS = ("none", "gzip", "zstd", "blosc", "lz4")
#: each codec's level when none is given, and the levels it accepts
DEFAULT_LEVEL = {"gzip": 4, "zstd": 3, "blosc": 5, "lz4": 5}
LEVELS = {"gzip": (0, 9), "zstd": (0, 22), "blosc": (0, 9), "lz4": (0, 9)}
#: registered HDF5 filter ids of the plugin codecs
H5_FILTER = {"zstd": 32015, "blosc": 32001, "lz4": 32004}
_H5_FILTER_NAMES = {f"filter{v}": k for k, v in H5_FILTER.items()}
_CODEC_RE = re.compile(r"^(?P<name>[a-z0-9_]+)(?:\((?P<args>[^)]*)\))?$")


def check_compression(compression: str | None, level: int | None) -> tuple[str | None, int | None]:
    """The ``compression=``/``level=`` arguments checked: ``(name, level)``, the level filled
    in with the codec's default; ``(None, None)`` keeps each leaf's codec."""
    if compression is None:
        if level is not None:
            raise PtdValueError("a compression level needs a compression (gzip, zstd, blosc, lz4)")
        return None, None
    name = str(compression).lower()
    if name not in COMPRESSIONS:
        raise PtdValueError(
            f"unknown compression {compression!r}; choose one of {', '.join(COMPRESSIONS)}"
        )
    if name == "none":
        if level is not None:
            raise PtdValueError("--level does not apply to compression 'none'")
        return name, None
    lo, hi = LEVELS[name]
    if level is None:
        level = DEFAULT_LEVEL[name]
    elif not lo <= int(level) <= hi:
        raise PtdValueError(f"{name} level must be between {lo} and {hi}, got {level}")
    return name, int(level)


def parse_codec(desc: str | None) -> tuple[str, int | None] | None:
    """A backend's compression description (``"shuffle+gzip(4)"``, ``"blosc(lz4,5)"``,
    ``"zstd(3)"``) as ``(name, level)`` in :data:`COMPRESSIONS` terms, or None."""
    if not desc:
        return None
    for part in desc.split("+"):
        m = _CODEC_RE.match(part.strip().lower())
        if not m:
            continue
        name, args = m["name"], [a.strip() for a in (m["args"] or "").split(",") if a.strip()]
        name = _H5_FILTER_NAMES.get(name, name)
        nums = [int(a) for a in args if a.lstrip("-").isdigit()]
        if name == "blosc":
            if args and args[0] == "lz4":
                return "lz4", nums[-1] if nums else None
            return "blosc", nums[-1] if nums else None
        if name in ("gzip", "zlib", "zstd", "lz4"):
            return ("gzip" if name == "zlib" else name), (nums[0] if nums else None)
    return None


def choose_codec(
    meta: ArrayMeta,
    fmt: str,
    compression: str | None,
    level: int | None,
    notes: list[str],
) -> tuple[str | None, int | None]:
    """The codec a leaf gets in a ``fmt`` destination: the one asked for, else the source's
    when ``fmt`` has it (a note in ``notes`` says when it has not), else none."""
    if compression is not None:
        return compression, level
    parsed = parse_codec(meta.compression)
    if parsed is None:
        codecs = [c.split("(")[0] for c in (meta.compression or "").split("+") if c]
        other = [c for c in codecs if c not in ("shuffle", "fletcher32", "crc32c", "bytes")]
        if other:
            note = (
                f"{'+'.join(other)} is none of ptd's codecs ({', '.join(COMPRESSIONS[1:])}): the "
                "leaves compressed with it were written uncompressed (pass --compression to "
                "choose one)"
            )
            if note not in notes:
                notes.append(note)
        return None, None
    name, lvl = parsed
    # zstd, blosc and lz4 are HDF5 filter plugins, registered by hdf5plugin (a dependency)
    if lvl is not None:
        lo, hi = LEVELS[name]
        lvl = min(max(lvl, lo), hi)
    return name, lvl


def codec_options(fmt: str, name: str | None, level: int | None) -> dict[str, Any]:
    """The backend creation options for a codec (``None``/``"none"``: uncompressed)."""
    if name in (None, "none"):
        return {} if fmt == "h5" else {"compressors": None}
    assert name is not None
    level = DEFAULT_LEVEL[name] if level is None else level
    if fmt == "h5":
        if name == "gzip":
            return {"compression": "gzip", "compression_opts": level}
        if name == "zstd":
            return {"compression": H5_FILTER["zstd"], "compression_opts": (level,)}
        if name == "blosc":  # cd_values: reserved x4, clevel, shuffle, compressor (5: zstd)
            return {
                "compression": H5_FILTER["blosc"],
                "compression_opts": (0, 0, 0, 0, level, 1, 5),
            }
        return {"compression": H5_FILTER["lz4"], "compression_opts": (0,)}
    if name == "gzip":
        codec: dict[str, Any] = {"name": "gzip", "configuration": {"level": level}}
    elif name == "zstd":
        codec = {"name": "zstd", "configuration": {"level": level, "checksum": False}}
    else:
        cname = "lz4" if name == "lz4" else "zstd"
        codec = {
            "name": "blosc",
            "configuration": {"cname": cname, "clevel": level, "shuffle": "shuffle"},
        }
    return {"compressors": [codec]}


def describe(name: str | None, level: int | None) -> str | None:
    """How a plan shows a codec (``"zstd(3)"``), None for none."""
    if name in (None, "none"):
        return None
    assert name is not None
    return f"{name}({level if level is not None else DEFAULT_LEVEL[name]})"
