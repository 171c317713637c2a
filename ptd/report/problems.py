"""The :class:`Problem` of a validation report, and how each check's findings become one.

Every problem has a code, a severity (``error``, ``warning``, ``info``) and the *check* it
comes from, which groups problems in reports (one JUnit test case per check):

==============  ===================================================================
check           codes
==============  ===================================================================
``metadata``    unreadable, bad_metadata, skipped_key (a warning: a link ptd does not follow),
                data_elsewhere (a note: data in other files, which ptd does not read),
                too_large (an array declaring more than PTD_MAX_ARRAY_BYTES),
                too_many_attrs (a warning: attributes beyond PTD_MAX_ATTRS not read)
``batch_size``  batch_mismatch, group_batch_mismatch, length_mismatch, dimension_mismatch
                (a named dimension's length), encoding_mismatch (a known encoding's rule:
                :mod:`ptd.report.layouts`)
``dtype``       unsupported_dtype
``schema``      missing_key, unexpected_key, kind_mismatch, dtype_mismatch, shape_mismatch,
                no_batch_size
``consolidated`` consolidated_missing, consolidated_extra, consolidated_differs
``data``        undecodable_chunk, checksum_failed, missing_chunks, nan_values, inf_values,
                value_out_of_range, value_not_allowed, nan_not_allowed, bad_non_tensor,
                not_checked (too many chunks to visit; a warning for data in other files)
``lint``        L001 ... L012 (:mod:`ptd.report.lint`)
==============  ===================================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ptd.report.consolidated import ConsolidatedFinding
from ptd.report.datacheck import DataResult
from ptd.report.lint import LintFinding

__all__ = ["CHECKS", "Problem", "check_of", "from_consolidated", "from_data", "from_lint"]

#: every check, in report order, with its codes (lint codes are ``L`` + digits)
CHECKS: dict[str, tuple[str, ...]] = {
    "metadata": (
        "unreadable",
        "bad_metadata",
        "skipped_key",
        "data_elsewhere",
        "too_large",
        "too_many_attrs",
    ),
    "batch_size": (
        "batch_mismatch",
        "group_batch_mismatch",
        "length_mismatch",
        "dimension_mismatch",
        "encoding_mismatch",
    ),
    "dtype": ("unsupported_dtype",),
    "schema": (
        "missing_key",
        "unexpected_key",
        "kind_mismatch",
        "dtype_mismatch",
        "shape_mismatch",
        "no_batch_size",
    ),
    "consolidated": ("consolidated_missing", "consolidated_extra", "consolidated_differs"),
    "data": (
        "undecodable_chunk",
        "checksum_failed",
        "missing_chunks",
        "nan_values",
        "inf_values",
        "value_out_of_range",
        "value_not_allowed",
        "nan_not_allowed",
        "bad_non_tensor",
        "not_checked",
    ),
    "lint": (),
}
_CHECK_OF = {code: check for check, codes in CHECKS.items() for code in codes}


def check_of(code: str) -> str:
    """The check a code belongs to (``"lint"`` for ``L001``...)."""
    if code[:1] == "L" and code[1:].isdigit():
        return "lint"
    return _CHECK_OF.get(code, "metadata")


@dataclass
class Problem:
    """One problem: the key (``""`` for the root), a code, a readable message, the shape found
    and what was expected where that applies, its severity, the check it comes from, a
    one-line fix (lint), the chunk's grid index (a bad chunk) and a count (values, chunks)."""

    key: str
    code: str
    message: str
    shape: list[int] | None = None
    expected: Any = None
    severity: str = "error"
    check: str = ""
    fix: str | None = None
    name: str | None = None
    chunk: list[int] | None = None
    count: int | None = None
    #: the files a key's data lies in, where it lies outside the store (virtual, external)
    sources: list[str] | None = None

    def __post_init__(self) -> None:
        if not self.check:
            self.check = check_of(self.code)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: ``key``, ``code``, ``message``, ``shape``, ``expected`` always; then
        ``severity`` when it is not ``"error"``, and ``fix``, ``name``, ``chunk``, ``count``,
        ``sources`` when set (so documents of the first format version keep their shape)."""
        d: dict[str, Any] = {
            "key": self.key,
            "code": self.code,
            "message": self.message,
            "shape": self.shape,
            "expected": self.expected,
        }
        if self.severity != "error":
            d["severity"] = self.severity
        for name in ("fix", "name", "chunk", "count", "sources"):
            value = getattr(self, name)
            if value is not None:
                d[name] = value
        return d


def from_consolidated(found: list[ConsolidatedFinding]) -> list[Problem]:
    return [Problem(f.key, f.code, f.message) for f in found]


def from_lint(found: list[LintFinding]) -> list[Problem]:
    return [
        Problem(f.key, f.code, f.message, severity=f.severity, fix=f.fix, name=f.name)
        for f in found
    ]


def from_data(res: DataResult) -> list[Problem]:
    out = [Problem(f.key, f.code, f.message, chunk=f.chunk, count=1) for f in res.faults]
    strict_missing = {v.key for v in res.violations if v.code == "missing_chunks"}
    for key, (n, total, first) in res.missing.items():
        fill = res.fill_values.get(key)
        value = "the fill value" if fill is None else f"the fill value {fill!r}"
        what = (
            f"none of the {total} chunks of {key!r} is stored: it reads as {value} throughout"
            if n == total
            else f"{n} of {total} chunks of {key!r} are not stored (they read as {value}; "
            f"first: {first})"
        )
        out.append(
            Problem(
                key,
                "missing_chunks",
                what,
                severity="error" if key in strict_missing else "info",
                count=n,
                chunk=first[0] if first else None,
            )
        )
    strict_nan = {v.key for v in res.violations if v.code == "nan_not_allowed"}
    for key, st in res.stats.items():
        if st.nan and key not in strict_nan:
            out.append(
                Problem(
                    key,
                    "nan_values",
                    f"{key!r} holds {st.nan} NaN values of {st.count}",
                    severity="warning",
                    count=st.nan,
                )
            )
        if st.inf:
            out.append(
                Problem(
                    key,
                    "inf_values",
                    f"{key!r} holds {st.inf} infinite values of {st.count}",
                    severity="warning",
                    count=st.inf,
                )
            )
    for v in res.violations:
        if v.code == "missing_chunks":
            continue
        out.append(Problem(v.key, v.code, v.message, count=v.count))
    for key, msg in res.not_checked.items():
        sources = res.elsewhere.get(key)
        severity = "warning" if sources is not None else "error"
        out.append(Problem(key, "not_checked", msg, severity=severity, sources=sources))
    for key, msg in res.bad_non_tensors.items():
        out.append(Problem(key, "bad_non_tensor", f"cannot decode {key!r}: {msg}"))
    return out
