"""Validation and diff reports as :class:`~ptd.report.formats.Suite` objects (one per store,
one case per check), for the CI formats of :mod:`ptd.report.formats`."""

from __future__ import annotations

from ptd.report.diff import DiffReport
from ptd.report.formats import Case, Finding, Suite
from ptd.report.problems import CHECKS, Problem
from ptd.report.validate import ValidationReport
from ptd.storage.registry import policy

__all__ = ["diff_suite", "error_suite", "validation_suite"]


def _finding(p: Problem) -> Finding:
    return Finding(p.severity, p.code, p.key, p.message, p.fix)


def validation_suite(report: ValidationReport) -> Suite:
    """One case per check; ``schema`` and ``data`` are skipped when they did not run,
    ``consolidated`` for stores other than local zarr directories."""
    by_check: dict[str, list[Finding]] = {c: [] for c in CHECKS}
    for p in report.findings():
        by_check.setdefault(p.check, []).append(_finding(p))
    cases = []
    for check, found in by_check.items():
        case = Case(check, found)
        if check == "schema" and report.schema is None and not found:
            case.skipped = "no --schema given"
        elif check == "data" and not report.data_checked:
            case.skipped = "not run (--data reads every chunk)"
            case.findings = found
        elif check == "consolidated" and (
            report.format is None or not policy(report.format).consolidated_metadata
        ):
            case.skipped = "not a zarr store"
        if check == "data":
            case.seconds = report.data_seconds
        cases.append(case)
    return Suite(report.path, report.path, cases, seconds=max(report.seconds, report.data_seconds))


def error_suite(path: str, message: str) -> Suite:
    """A store that could not be read at all."""
    return Suite(path, path, [], error=message)


def diff_suite(report: DiffReport) -> Suite:
    """Cases ``structure`` and ``values`` (skipped with ``metadata_only``)."""
    structure = [
        Finding("error", d.kind, d.key, d.message)
        for d in report.differences
        if d.kind != "values_differ"
    ]
    values = [
        Finding("error", d.kind, d.key, d.message)
        for d in report.differences
        if d.kind == "values_differ"
    ]
    v = Case("values", values, seconds=report.seconds)
    if report.metadata_only:
        v.skipped = "--metadata-only"
    name = f"{report.a} vs {report.b}"
    return Suite(name, report.b, [Case("structure", structure), v], seconds=report.seconds)
