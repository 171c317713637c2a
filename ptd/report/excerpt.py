"""Two values shown so that the difference between them shows.

A report that cuts long values at a fixed length can print two different values as the same
text (two attribute dicts that differ at their 200th character, cut at 60). Here a pair is
cut *together*, around the first place where their texts differ: both excerpts start at the
same offset, a little before it, so the differing character is in both, and an excerpt that is
cut says so with ``…``. Of two mappings only the keys whose values differ are shown.

>>> a = "x" * 100 + "1" + "y" * 100
>>> b = "x" * 100 + "2" + "y" * 100
>>> excerpts(a, b, 30)
('…xxxxxxxxxx1yyyyyyyyyyyyyyyyyyy…', '…xxxxxxxxxx2yyyyyyyyyyyyyyyyyyy…')
>>> excerpts("short", "shirt", 30)
('short', 'shirt')
>>> differing_items({"units": "m", "scale": 1}, {"units": "m", "scale": 2})
({'scale': 1}, {'scale': 2})
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["differing_items", "excerpts"]

#: the mark of a cut end
CUT = "…"


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def excerpts(a: str, b: str, width: int) -> tuple[str, str]:
    """``a`` and ``b`` whole when both fit ``width`` characters; else each cut to ``width``
    characters from the same offset, a third of ``width`` before their first difference (less
    near the end, so that the longer one fills the window), with ``…`` at a cut end. Two
    different texts never give the same excerpts."""
    width = max(width, 8)
    if len(a) <= width and len(b) <= width:
        return a, b
    if a == b:
        start = 0
    else:  # a third of the width before the difference, the window filled where it can be
        start = max(0, min(_common_prefix(a, b) - width // 3, max(len(a), len(b)) - width))

    def cut(s: str) -> str:
        piece = s[start : start + width]
        return (CUT if start else "") + piece + (CUT if start + width < len(s) else "")

    return cut(a), cut(b)


def differing_items(a: Any, b: Any) -> tuple[Any, Any]:
    """Of two mappings, only the items whose values differ (a key on one side only included);
    anything else as it is."""
    if not isinstance(a, Mapping) or not isinstance(b, Mapping):
        return a, b
    missing = object()
    keys = [k for k in a if b.get(k, missing) != a[k]]
    keys += [k for k in b if k not in a]
    return (
        {k: a[k] for k in keys if k in a},
        {k: b[k] for k in keys if k in b},
    )
