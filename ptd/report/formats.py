"""Report formats for CI: JUnit XML, GitHub Actions annotations and Markdown.

``ptd validate`` and ``ptd diff`` turn their reports into :class:`Suite` objects (one per store,
or per pair of stores), each holding one :class:`Case` per check, and render them here:

* :func:`junit`: one ``<testsuite>`` per store with one ``<testcase>`` for the store itself
  (it opens) and one per check; a check with an error-level finding (or one at the
  ``fail_on`` threshold) is a ``<failure>``; warnings and information are in
  ``<system-out>``.
* :func:`github`: one workflow command per finding, ``::error file=PATH,title=CODE::message``
  (``::warning``/``::notice`` below ``error``), which GitHub shows as annotations.
* :func:`markdown`: a summary table and the findings, for ``$GITHUB_STEP_SUMMARY``.

>>> s = Suite("data.h5", "data.h5", [Case("batch_size", [Finding("error", "batch_mismatch",
...     "obs", "'obs' has shape [3]")])])
>>> print(github([s]))
::error file=data.h5,title=batch_mismatch (obs)::'obs' has shape [3]
>>> "<failure" in junit([s])
True
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

__all__ = ["FORMATS", "Case", "Finding", "Suite", "github", "junit", "markdown"]

#: the report formats of ``--format``
FORMATS = ("text", "json", "junit", "github", "markdown")
_RANK = {"info": 0, "warning": 1, "error": 2}


@dataclass
class Finding:
    severity: str
    code: str
    key: str
    message: str
    fix: str | None = None


@dataclass
class Case:
    """One check of one store, and what it found (nothing: passed)."""

    name: str
    findings: list[Finding] = field(default_factory=list)
    skipped: str | None = None
    seconds: float = 0.0


@dataclass
class Suite:
    """One store (or pair of stores): its name, the file annotations point at, its checks,
    and the error that stopped it (an unreadable store) if any."""

    name: str
    file: str
    cases: list[Case] = field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0


def _fails(f: Finding, fail_on: str) -> bool:
    return _RANK.get(f.severity, 2) >= _RANK.get(fail_on, 2)


def _line(f: Finding) -> str:
    where = f" [{f.key}]" if f.key else ""
    fix = f" (fix: {f.fix})" if f.fix else ""
    return f"{f.severity} {f.code}{where}: {f.message}{fix}"


def junit(suites: list[Suite], *, fail_on: str = "error", name: str = "ptd") -> str:
    """JUnit XML (the schema most CI reporters read: ``testsuites/testsuite/testcase`` with
    ``failure``, ``error`` and ``skipped``)."""
    root = ET.Element("testsuites", name=name)
    t_tests = t_fail = t_err = 0
    t_seconds = 0.0
    for s in suites:
        ts = ET.SubElement(root, "testsuite", name=s.name)
        tests = failures = errors = skipped = 0
        # times add up: "open" (reading the metadata, the checks without a case time of
        # their own) is what the suite took beyond its timed cases
        timed = sum(c.seconds for c in s.cases)
        opened = ET.SubElement(
            ts,
            "testcase",
            name="open",
            classname=s.name,
            time=f"{max(0.0, s.seconds - timed):.3f}",
        )
        tests += 1
        if s.error is not None:
            err = ET.SubElement(opened, "error", message=s.error, type="unreadable")
            err.text = s.error
            errors += 1
        for c in s.cases:
            tc = ET.SubElement(
                ts, "testcase", name=c.name, classname=s.name, time=f"{c.seconds:.3f}"
            )
            tests += 1
            failing = [f for f in c.findings if _fails(f, fail_on)]
            if c.skipped is not None:
                ET.SubElement(tc, "skipped", message=c.skipped)
                skipped += 1
            elif failing:
                fl = ET.SubElement(
                    tc,
                    "failure",
                    message=f"{len(failing)} finding(s): {failing[0].message}"[:500],
                    type=failing[0].code,
                )
                fl.text = "\n".join(_line(f) for f in failing)
                failures += 1
            rest = [f for f in c.findings if not _fails(f, fail_on)]
            if rest:
                out = ET.SubElement(tc, "system-out")
                out.text = "\n".join(_line(f) for f in rest)
        ts.set("tests", str(tests))
        ts.set("failures", str(failures))
        ts.set("errors", str(errors))
        ts.set("skipped", str(skipped))
        ts.set("time", f"{max(s.seconds, timed):.3f}")
        t_seconds += max(s.seconds, timed)
        t_tests, t_fail, t_err = t_tests + tests, t_fail + failures, t_err + errors
    root.set("tests", str(t_tests))
    root.set("failures", str(t_fail))
    root.set("errors", str(t_err))
    root.set("time", f"{t_seconds:.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")


def _escape_data(text: str) -> str:
    # the workflow-command escapes of a message: % CR LF
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_prop(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github(suites: list[Suite], *, fail_on: str = "error") -> str:
    """GitHub Actions workflow commands: ``::error``/``::warning``/``::notice`` per finding
    (``error`` for findings at the ``fail_on`` threshold), naming the file."""
    lines = []
    for s in suites:
        if s.error is not None:
            lines.append(
                f"::error file={_escape_prop(s.file)},title=unreadable::{_escape_data(s.error)}"
            )
        for c in s.cases:
            for f in c.findings:
                level = (
                    "error"
                    if _fails(f, fail_on)
                    else {"warning": "warning", "error": "warning"}.get(f.severity, "notice")
                )
                title = f"{f.code} ({f.key})" if f.key else f.code
                msg = f.message + (f" Fix: {f.fix}" if f.fix else "")
                lines.append(
                    f"::{level} file={_escape_prop(s.file)},title={_escape_prop(title)}::"
                    f"{_escape_data(msg)}"
                )
    return "\n".join(lines)


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(suites: list[Suite], *, fail_on: str = "error", title: str = "ptd validate") -> str:
    """A Markdown summary: one table row per store, then each store's findings."""
    icon = {True: "✅", False: "❌"}
    out = [
        f"## {title}",
        "",
        "| store | result | errors | warnings | info |",
        "|---|---|---|---|---|",
    ]
    for s in suites:
        fs = [f for c in s.cases for f in c.findings]
        ok = s.error is None and not any(_fails(f, fail_on) for f in fs)
        n = {k: sum(1 for f in fs if f.severity == k) for k in ("error", "warning", "info")}
        result = "unreadable" if s.error is not None else ("passed" if ok else "failed")
        out.append(
            f"| `{_md(s.name)}` | {icon[ok]} {result} | {n['error']} | {n['warning']} | "
            f"{n['info']} |"
        )
    for s in suites:
        pairs = [(c.name, f) for c in s.cases for f in c.findings]
        if s.error is None and not pairs:
            continue
        out += ["", f"### `{_md(s.name)}`", ""]
        if s.error is not None:
            out.append(f"**unreadable**: {_md(s.error)}")
            continue
        out += ["| severity | check | code | key | message |", "|---|---|---|---|---|"]
        for check, f in pairs:
            msg = _md(f.message) + (f" — fix: `{_md(f.fix)}`" if f.fix else "")
            out.append(f"| {f.severity} | {check} | `{f.code}` | `{_md(f.key or '/')}` | {msg} |")
    return "\n".join(out) + "\n"
