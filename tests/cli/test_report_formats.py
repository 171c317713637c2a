"""``--format junit|github|markdown|json`` and ``--report FORMAT=FILE`` on ``validate`` and
``diff``: JUnit XML validated against its schema (tests/data/junit.xsd), GitHub annotations by
their syntax, Markdown by its tables."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch

import ptd

from . import report_corpus as corpus

XSD = Path(__file__).parent.parent / "data" / "junit.xsd"
#: a workflow command as GitHub parses it: ::LEVEL file=F,title=T::MESSAGE (one line)
ANNOTATION = re.compile(r"^::(error|warning|notice) file=([^,:\n]+),title=([^:\n]+)::(.+)$")
CHECK_CASES = {"open", "metadata", "batch_size", "dtype", "schema", "consolidated", "data", "lint"}


@pytest.fixture(scope="module")
def junit_schema():
    xmlschema = pytest.importorskip("xmlschema")
    return xmlschema.XMLSchema(str(XSD))


def test_junit_schema_rejects_a_bad_document(junit_schema) -> None:
    # the schema has teeth: a testcase without a name, a count that is not a number
    assert not junit_schema.is_valid("<testsuites><testsuite tests='x' name='a'/></testsuites>")
    assert not junit_schema.is_valid(
        "<testsuites><testsuite tests='1' name='a'><testcase/></testsuite></testsuites>"
    )


def test_validate_junit(ptd_cli, tmp_path: Path, junit_schema) -> None:
    ok = corpus.h5_ok(tmp_path)
    bad = corpus.h5_checksum(tmp_path)
    stale = corpus.stale_added(tmp_path)
    missing = tmp_path / "missing.h5"
    run = ptd_cli("validate", ok, bad, stale, missing, "--data", "--format", "junit")
    assert run.code == 2, run  # one unreadable input
    junit_schema.validate(run.stdout)
    root = ET.fromstring(run.stdout)
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert list(suites) == [str(ok), str(bad), str(stale), str(missing)]
    for path in (ok, bad, stale):
        names = {c.get("name") for c in suites[str(path)].iter("testcase")}
        assert names == CHECK_CASES
    assert suites[str(ok)].get("failures") == "0"

    def failure(path: Path, case: str):
        tc = next(c for c in suites[str(path)].iter("testcase") if c.get("name") == case)
        return tc.find("failure")

    f = failure(bad, "data")
    assert f is not None
    assert f.get("type") == "checksum_failed"
    assert "[2, 0]" in f.text
    assert failure(bad, "batch_size") is None
    assert failure(stale, "consolidated").get("type") == "consolidated_missing"
    err = next(iter(suites[str(missing)].iter("testcase"))).find("error")
    assert err is not None
    assert "missing.h5" in err.get("message")
    assert int(root.get("failures")) == 3  # data of bad; consolidated and metadata of stale
    _times_add_up(root)


def _times_add_up(root: ET.Element) -> None:
    """Each suite's time is the sum of its cases' (to the rounding), the document's the sum
    of its suites'; the data pass took some time."""
    total = 0.0
    for s in root.iter("testsuite"):
        cases = sum(float(c.get("time", "0")) for c in s.iter("testcase"))
        assert float(s.get("time", "0")) == pytest.approx(cases, abs=0.002 * len(list(s))), s
        total += float(s.get("time", "0"))
    assert float(root.get("time", "0")) == pytest.approx(total, abs=0.002)
    assert total > 0


def test_validate_junit_skips_checks_not_run(ptd_cli, tmp_path: Path, junit_schema) -> None:
    run = ptd_cli("validate", corpus.h5_ok(tmp_path), "--format", "junit")
    assert run.code == 0
    junit_schema.validate(run.stdout)
    skipped = {
        c.get("name")
        for c in ET.fromstring(run.stdout).iter("testcase")
        if c.find("skipped") is not None
    }
    assert skipped == {"schema", "data", "consolidated"}


def test_validate_github_annotations(ptd_cli, tmp_path: Path) -> None:
    bad = corpus.nan_store(tmp_path, "h5")
    small = corpus.lint_small_chunks(tmp_path)
    run = ptd_cli("validate", bad, small, "--data", "--format", "github", "--fail-on", "warning")
    assert run.code == 1, run
    lines = run.stdout.strip().splitlines()
    assert lines, lines
    assert all(ANNOTATION.match(ln) for ln in lines), lines
    parsed = [ANNOTATION.match(ln).groups() for ln in lines]
    assert ("error", str(bad), "nan_values (x)") in [p[:3] for p in parsed]
    assert any(p[1] == str(small) and p[2].startswith("L002") and "Fix:" in p[3] for p in parsed)
    # below the threshold: warnings and notices
    run = ptd_cli("validate", bad, "--data", "--format", "github")
    levels = {ANNOTATION.match(ln).group(1) for ln in run.stdout.strip().splitlines()}
    assert run.code == 0
    assert levels == {"warning"}


def test_annotation_escapes_newlines_and_commas(tmp_path: Path) -> None:
    from ptd.report.formats import Case, Finding, Suite, github

    s = Suite("a,b:c.h5", "a,b:c.h5", [Case("x", [Finding("error", "c", "k", "two\nlines 100%")])])
    (line,) = github([s]).splitlines()
    assert ANNOTATION.match(line)
    assert "%0A" in line
    assert "%25" in line
    assert "a%2Cb%3Ac.h5" in line


def test_validate_markdown_and_report_files(ptd_cli, tmp_path: Path, junit_schema) -> None:
    bad = corpus.h5_undecodable(tmp_path)
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n")
    junit = tmp_path / "out" / "junit.xml"
    junit.parent.mkdir()
    run = ptd_cli(
        "validate",
        bad,
        "--data",
        "--format",
        "markdown",
        "--report",
        f"junit={junit}",
        "--report",
        f"markdown+={summary}",
        "--report",
        f"json={tmp_path / 'r.json'}",
    )
    assert run.code == 1, run
    md = run.stdout
    assert md.startswith("## ptd validate")
    assert "| store | result |" in md
    assert "undecodable_chunk" in md
    assert "❌ failed" in md
    assert summary.read_text() == "# earlier step\n" + md
    junit_schema.validate(junit.read_text())
    import json

    assert json.loads((tmp_path / "r.json").read_text())["valid"] is False


def test_bad_format_options(ptd_cli, tmp_path: Path) -> None:
    ok = corpus.h5_ok(tmp_path)
    assert ptd_cli("validate", ok, "--format", "xml").code == 2
    assert ptd_cli("validate", ok, "--format", "junit", "--json").code == 2
    assert ptd_cli("validate", ok, "--fail-on", "fatal").code == 2
    assert ptd_cli("validate", ok, "--report", "junit").code == 2
    assert ptd_cli("validate", ok, "--report", "text=x").code == 2


def test_diff_formats(ptd_cli, tmp_path: Path, junit_schema) -> None:
    a, b = tmp_path / "a.h5", tmp_path / "b.zarr"
    ptd.PersistentTensorDict.from_dict({"x": torch.zeros(8)}, a, batch_size=[8]).close()
    y = torch.zeros(8)
    y[2] = 1
    ptd.PersistentTensorDict.from_dict({"x": y}, b, batch_size=[8], backend="zarr").close()
    run = ptd_cli("diff", a, b, "--format", "junit")
    assert run.code == 1
    junit_schema.validate(run.stdout)
    tcs = {c.get("name"): c for c in ET.fromstring(run.stdout).iter("testcase")}
    assert set(tcs) == {"open", "structure", "values"}
    assert tcs["values"].find("failure").get("type") == "values_differ"
    _times_add_up(ET.fromstring(run.stdout))
    gh = ptd_cli("diff", a, b, "--format", "github").stdout.strip().splitlines()
    assert len(gh) == 1
    assert ANNOTATION.match(gh[0]).group(2) == str(b)
    md = ptd_cli("diff", a, b, "--format", "markdown").stdout
    assert md.startswith("## ptd diff")
    assert "values_differ" in md
    same = ptd_cli("diff", a, a, "--format", "junit")
    assert same.code == 0
    assert "<failure" not in same.stdout
    junit_schema.validate(same.stdout)
