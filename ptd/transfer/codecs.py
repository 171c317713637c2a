"""Compression codecs in ``convert``'s terms: the ``compression=`` names and levels, and the
pipeline steps each format writes for a chosen one (:func:`chosen_steps`).

>>> check_compression("zstd", None), check_compression(None, None)
(('zstd', 3), (None, None))
>>> describe("blosc", None), describe("none", None)
('blosc(5)', None)
"""

from __future__ import annotations

from typing import Any

from ptd.errors import Option, PtdValueError
from ptd.storage.properties import Codec, Stage

__all__ = [
    "COMPRESSIONS",
    "DEFAULT_LEVEL",
    "H5_FILTER",
    "LEVELS",
    "check_compression",
    "chosen_steps",
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
            raise PtdValueError(Option("level", level), " does not apply to compression 'none'")
        return name, None
    lo, hi = LEVELS[name]
    if level is None:
        level = DEFAULT_LEVEL[name]
    elif not lo <= int(level) <= hi:
        raise PtdValueError(f"{name} level must be between {lo} and {hi}, got {level}")
    return name, int(level)


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


def chosen_steps(fmt: str, name: str | None, level: int | None) -> tuple[Codec, ...]:
    """A ``compression=`` choice as pipeline steps in the ``fmt`` destination's own terms
    (what :func:`codec_options` writes): empty for none.

    >>> [c.describe() for c in chosen_steps("h5", "zstd", 5)], chosen_steps("zarr", "none", None)
    (['zstd(5)'], ())
    """
    if name in (None, "none"):
        return ()
    opts = codec_options(fmt, name, level)
    lvl = DEFAULT_LEVEL[str(name)] if level is None else level
    if fmt == "h5":
        code = opts["compression"]
        if code == "gzip":
            return (Codec("gzip", Stage.COMPRESSOR, {"level": lvl}),)
        values = tuple(int(v) for v in opts["compression_opts"])
        config = {"cname": "zstd", "clevel": lvl} if name == "blosc" else {"level": lvl}
        return (Codec(str(name), Stage.COMPRESSOR, config, "h5", (int(code), 1, values)),)
    out = []
    for doc in opts.get("compressors") or ():
        conf = dict(doc.get("configuration") or {})
        neutral = {"level": lvl} if doc["name"] in ("gzip", "zstd") else conf
        out.append(Codec(str(doc["name"]), Stage.COMPRESSOR, neutral, "zarr", dict(doc)))
    return tuple(out)


def describe(name: str | None, level: int | None) -> str | None:
    """How a plan shows a codec (``"zstd(3)"``), None for none."""
    if name in (None, "none"):
        return None
    assert name is not None
    return f"{name}({level if level is not None else DEFAULT_LEVEL[name]})"
