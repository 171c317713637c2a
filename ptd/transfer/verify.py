"""``ptd.verify_conversion(result)``: compare a conversion's destination with its source.

What ``ptd convert --verify`` runs: :func:`ptd.diff` of the source and the written store, with
NaN equal to NaN by default (a copy of NaN is NaN) and the tolerances given. A key the
conversion left out on purpose (``skip_unsupported=True``: it is in ``result.not_copied``) is
not a difference; it is listed in the report's ``left_out`` with the reason it was not
copied. So is an attribute the destination could not hold (HDF5 object references in a zarr
copy: ``{"key", "attr", "reason"}`` in ``result.not_copied``): the node's other attributes
are still compared. :meth:`ptd.DiffReport.verified` then says whether the copy passes: no difference and,
unless ``allow_uncompared``, no leaf left uncompared.

>>> import os, tempfile, torch
>>> import ptd
>>> with tempfile.TemporaryDirectory() as d:
...     src = os.path.join(d, "x.h5")
...     ptd.PersistentTensorDict.from_dict({"obs": torch.full((4,), float("nan"))}, src).close()
...     report = verify_conversion(ptd.convert(src))
>>> report.verified(), report.leaves_compared
(True, 1)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ptd.report.diff import Difference, DiffReport, diff
from ptd.transfer.options import ConvertResult

__all__ = ["verify_conversion"]


def verify_conversion(
    result: ConvertResult,
    *,
    rtol: float = 0.0,
    atol: float = 0.0,
    equal_nan: bool = True,
    storage_options: dict[str, Any] | None = None,
    progress: Callable[..., None] | None = None,
    follow_virtual: bool = False,
) -> DiffReport:
    """Compare ``result.dst`` with ``result.src`` (see the module doc); ``follow_virtual``:
    as the conversion was given (the source's virtual datasets beside it are compared)."""
    report = diff(
        result.src,
        result.dst,
        rtol=rtol,
        atol=atol,
        equal_nan=equal_nan,
        storage_options=storage_options,
        progress=progress,
        follow_virtual=follow_virtual,
    )
    skipped = {
        item["key"]: item["reason"]
        for item in result.not_copied
        if "property" not in item and "attr" not in item
    }
    lost_attrs: dict[str, dict[str, str]] = {}
    for item in result.not_copied:
        if "attr" in item:
            key = "" if item["key"] == "/" else item["key"]
            lost_attrs.setdefault(key, {})[item["attr"]] = item["reason"]
    kept = []
    for d in report.differences:
        if d.kind in ("only_in_a", "values_differ") and d.key in skipped:
            # (values_differ: references to objects left out, written as null references)
            report.left_out.append({"key": d.key, "reason": skipped[d.key]})
        elif d.kind == "attrs_differ" and d.key in lost_attrs:
            kept.extend(_without_lost(d, lost_attrs[d.key], report))
        else:
            kept.append(d)
    report.differences = kept
    report.same = not kept
    return report


def _without_lost(d: Difference, lost: dict[str, str], report: DiffReport) -> list[Difference]:
    """The attribute difference ``d`` without the attributes the conversion listed as not
    copied (``lost``: name -> why), which go to ``report.left_out``; empty when nothing else
    differs."""
    a = {k: v for k, v in (d.a or {}).items() if k not in lost}
    b = {k: v for k, v in (d.b or {}).items() if k not in lost}
    da, db = dict(d.a or {}), dict(d.b or {})
    for name in sorted(n for n in lost.keys() & da.keys() if n not in db or da[n] != db[n]):
        report.left_out.append({"key": d.key or "/", "attr": name, "reason": lost[name]})
    return [] if a == b else [replace(d, a=a, b=b)]
