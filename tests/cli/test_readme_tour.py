"""The README's command-line tour is the tool's real output (``tools/readme_tour.py``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tour_module():  # tools/ is not a package: load the script by its path
    spec = importlib.util.spec_from_file_location("readme_tour", ROOT / "tools" / "readme_tour.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_tour_is_what_the_commands_print() -> None:
    tour = _tour_module()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    copy = tour.readme_copy(readme)
    assert copy is not None, "README.md lost its tour markers"
    now = tour.tour()
    assert copy == now, "README.md's tour is out of date: python tools/readme_tour.py --write"
    for args in tour.COMMANDS:
        assert "$ ptd " + " ".join(args) in copy
    assert "Traceback" not in copy
    assert "ptd: error" not in copy


def test_the_readme_is_a_newcomers_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = readme.splitlines()
    assert len(lines) < 250, len(lines)
    head = "\n".join(lines[:30])
    assert "pip install torch==2.13.0 && pip install -e . && ptd demo" in head
    assert "python -m pytest -q -n auto" in head
    for link in ("docs/architecture.md", "CONTRIBUTING.md", "CHANGELOG.md", "LICENSE"):
        assert f"]({link})" in readme, link
        assert (ROOT / link).exists(), link
