"""What ``validate`` and ``diff`` share: ``--format``, ``--report FORMAT=FILE``, ``--fail-on``
and a progress callback that counts bytes."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .._common import fail, redact
from ._progress import byte_progress

#: the formats of --format / --report
FORMATS = ("text", "json", "junit", "github", "markdown")
SEVERITIES = ("error", "warning", "info")

FORMAT_HELP = (
    "text (default), json, junit (JUnit XML), github (workflow annotations) or markdown "
    "(for $GITHUB_STEP_SUMMARY)."
)
REPORT_HELP = (
    "Also write the report in FORMAT to FILE (FORMAT=FILE overwrites, FORMAT+=FILE appends, "
    "e.g. markdown+=$GITHUB_STEP_SUMMARY); repeatable."
)


def check_format(fmt: str, json_: bool) -> str:
    if json_:
        if fmt not in ("text", "json"):
            raise fail("--json and --format cannot be used together")
        return "json"
    if fmt not in FORMATS:
        raise fail(f"--format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    return fmt


def check_fail_on(value: str) -> str:
    if value not in SEVERITIES:
        raise fail(f"--fail-on must be one of {', '.join(SEVERITIES)}, got {value!r}")
    return value


def parse_reports(items: list[str] | None) -> list[tuple[str, str, bool]]:
    """``FORMAT=FILE`` / ``FORMAT+=FILE`` -> (format, file, append)."""
    out = []
    for item in items or []:
        fmt, sep, path = item.partition("=")
        append = fmt.endswith("+")
        fmt = fmt.rstrip("+")
        if not sep or not path or fmt not in FORMATS or fmt == "text":
            raise fail(
                f"--report {item!r}: expected FORMAT=FILE with FORMAT one of "
                f"{', '.join(f for f in FORMATS if f != 'text')}"
            )
        out.append((fmt, path, append))
    return out


def render(fmt: str, suites: list[Any], fail_on: str, doc: Any, title: str) -> str:
    """A report in ``fmt`` (not text): ``doc`` is the JSON document."""
    import json

    from ptd.report import formats

    if fmt == "json":
        return json.dumps(doc, indent=2, allow_nan=True) + "\n"
    if fmt == "junit":
        return formats.junit(suites, fail_on=fail_on, name=title) + "\n"
    if fmt == "github":
        text = formats.github(suites, fail_on=fail_on)
        return text + "\n" if text else ""
    return formats.markdown(suites, fail_on=fail_on, title=title)


def write_reports(
    reports: list[tuple[str, str, bool]], suites: list[Any], fail_on: str, doc: Any, title: str
) -> None:
    for fmt, path, append in reports:
        text = redact(render(fmt, suites, fail_on, doc, title))
        try:
            with open(os.path.expanduser(path), "a" if append else "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as err:
            raise fail(f"cannot write the {fmt} report to {path}: {err.strerror or err}") from None


def emit(text: str) -> None:
    """``text`` on stdout, URLs' secrets hidden."""
    sys.stdout.write(redact(text))
    sys.stdout.flush()


@contextmanager
def counting_progress(description: str, enabled: bool) -> Iterator[Callable[..., None]]:
    """A callback for the library's ``progress``: ``progress(total=N)`` once per store, then
    ``progress(nbytes)`` per block; drawn as a Rich bar on a terminal."""
    with byte_progress(description, None, enabled=enabled) as update:
        state = {"done": 0, "total": 0}

        def progress(nbytes: int = 0, *, total: int | None = None) -> None:
            if total is not None:
                state["total"] += int(total)
                update(state["done"], state["total"])
                return
            state["done"] += int(nbytes)
            update(state["done"], None)

        yield progress
