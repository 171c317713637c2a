"""Compression codecs in ``convert``'s terms: the ``compression=`` names and levels, and the
pipeline steps each format writes for a chosen one (:func:`chosen_steps`, from the
destination's policy).

>>> check_compression("zstd", None), check_compression(None, None)
(('zstd', 3), (None, None))
>>> describe("blosc", None), describe("none", None)
('blosc(5)', None)
"""

from __future__ import annotations

from ptd.errors import Option, PtdValueError
from ptd.storage.api import FormatPolicy
from ptd.storage.properties import Codec

__all__ = [
    "COMPRESSIONS",
    "DEFAULT_LEVEL",
    "LEVELS",
    "check_compression",
    "chosen_steps",
    "describe",
]

#: the ``compression=`` names
COMPRESSIONS = ("none", "gzip", "zstd", "blosc", "lz4")
#: each codec's level when none is given, and the levels it accepts
DEFAULT_LEVEL = {"gzip": 4, "zstd": 3, "blosc": 5, "lz4": 5}
LEVELS = {"gzip": (0, 9), "zstd": (0, 22), "blosc": (0, 9), "lz4": (0, 9)}


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


def chosen_steps(dst: FormatPolicy, name: str | None, level: int | None) -> tuple[Codec, ...]:
    """A ``compression=`` choice as pipeline steps in the ``dst`` format's own terms (what
    its policy's ``codec_options`` writes): empty for none; the level defaults to the codec's.

    >>> from ptd.storage.registry import policy
    >>> [c.describe() for c in chosen_steps(policy("h5"), "zstd", 5)]
    ['zstd(5)']
    >>> chosen_steps(policy("zarr"), "none", None)
    ()
    """
    if name in (None, "none"):
        return ()
    return dst.chosen_steps(name, DEFAULT_LEVEL[str(name)] if level is None else level)


def describe(name: str | None, level: int | None) -> str | None:
    """How a plan shows a codec (``"zstd(3)"``), None for none."""
    if name in (None, "none"):
        return None
    assert name is not None
    return f"{name}({level if level is not None else DEFAULT_LEVEL[name]})"
