"""The package's layering (see docs/architecture.md, "Layers and modules"), checked by ``tools/check_imports.py``:
no import cycle between modules (imports inside functions count), each layer importing only the
layers below it, h5py/zarr only in the backends, no torch in the torch-free layers, no
typer/rich/tensordict in the library. (Module length is not checked: a module is as long as
its one concept needs.)"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "check_imports", ROOT / "tools" / "check_imports.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_imports"] = module
    spec.loader.exec_module(module)
    return module


def test_the_package_is_layered(checker: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    status = checker.main()
    out = capsys.readouterr().out
    assert status == 0, out
    assert "0 problem(s)" in out.strip().splitlines()[-1]
    # the imports by name that remain are declared, and said on every run
    declared = [ln for ln in out.splitlines() if ln.startswith("declared: ")]
    assert {ln.split(":")[1].strip() for ln in declared} == {
        "ptd/core/registry.py",
        "ptd/storage/backends/__init__.py",
    }


def _fake_tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    for pkg in ("ptd", "ptd_cli"):
        (tmp_path / pkg).mkdir(exist_ok=True)
        (tmp_path / pkg / "__init__.py").touch()
    return tmp_path


def _run(
    checker: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    root: Path,
    capsys: pytest.CaptureFixture[str],
) -> str:
    monkeypatch.setattr(checker, "ROOT", root)
    status = checker.main()
    out = capsys.readouterr().out
    assert status == 1, out
    return out


def test_a_cycle_through_a_function_level_import_is_found(
    checker: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = _fake_tree(tmp_path, {
        "ptd/core/__init__.py": "",
        "ptd/core/a.py": "from ptd.core import b\n",
        "ptd/core/b.py": "def f():\n    from ptd.core.a import x\n",
    })  # fmt: skip
    out = _run(checker, monkeypatch, root, capsys)
    assert "import cycle: ptd.core.a <-> ptd.core.b" in out


def test_type_checking_imports_do_not_count(
    checker: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = _fake_tree(tmp_path, {
        "ptd/core/__init__.py": "",
        "ptd/core/a.py": "from ptd.core import b\n",
        "ptd/core/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ptd.core.a import x\n",
        "ptd/format/__init__.py": "",
        "ptd/format/bad.py": "import torch\n",  # one real problem, so that main() reports
    })  # fmt: skip
    out = _run(checker, monkeypatch, root, capsys)
    assert "cycle" not in out
    assert "ptd.format.bad imports torch" in out


def test_upward_imports_and_third_party_rules_are_found(
    checker: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = _fake_tree(tmp_path, {
        "ptd/core/__init__.py": "",
        "ptd/core/x.py": "def f():\n    from ptd.persistent import y\n",
        "ptd/persistent/__init__.py": "",
        "ptd/persistent/y.py": "import h5py\n",
        "ptd/report/__init__.py": "",
        "ptd/report/r.py": "import rich\n" + "x = 1\n" * 601,
    })  # fmt: skip
    out = _run(checker, monkeypatch, root, capsys)
    assert "ptd.core.x (layer ptd.core) imports ptd.persistent.y (layer ptd.persistent)" in out
    assert "ptd.persistent.y imports h5py" in out
    assert "ptd.report.r imports rich" in out
    assert "lines" not in out  # no line cap: a long module is not a problem


def test_imports_by_name_are_found(
    checker: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = _fake_tree(tmp_path, {
        "ptd/__init__.py": "import importlib\ndef __getattr__(n):\n    return importlib.import_module(f'ptd.{n}')\n",
        "ptd/core/__init__.py": "",
        "ptd/core/a.py": "import importlib\nm = importlib.import_module('ptd.memmap.w')\n",
        "ptd/core/b.py": "from importlib import import_module\ndef f(n):\n    return import_module(n)\n",
        "ptd/core/c.py": "import sys\nw = sys.modules.get('ptd.persistent.x')\nt = sys.modules.get('torch')\n",
        "ptd/core/d.py": "import sys\nw = sys.modules['ptd.data']\nv = __import__('ptd.memmap')\n",
    })  # fmt: skip
    out = _run(checker, monkeypatch, root, capsys)
    assert "ptd/core/a.py:2: ptd.core.a imports ptd.memmap.w by name" in out
    assert "ptd/core/b.py:3: ptd.core.b imports a computed name by name" in out
    assert "ptd/core/c.py:2: ptd.core.c imports ptd.persistent.x by name" in out
    assert "ptd/core/d.py:2: ptd.core.d imports ptd.data by name" in out
    assert "ptd/core/d.py:3: ptd.core.d imports ptd.memmap by name" in out
    assert "torch by name" not in out  # a third-party module looked up: not a hidden edge
    assert "ptd/__init__.py" not in out  # the public lazy namespace may


def test_private_names_of_another_package_are_found(
    checker: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = _fake_tree(tmp_path, {
        "ptd/core/__init__.py": "",
        "ptd/core/ops.py": "def _helper(): ...\n",
        "ptd/core/same.py": "from ptd.core.ops import _helper\n",  # its own package: fine
        "ptd/persistent/__init__.py": "",
        "ptd/persistent/p.py": "from ptd.core.ops import _helper\n",
    })  # fmt: skip
    out = _run(checker, monkeypatch, root, capsys)
    assert "ptd.persistent.p imports the private name ptd.core.ops._helper" in out
    assert "ptd.core.same" not in out


def test_the_container_classes_are_plain_classes() -> None:
    """The method families are functions bound by a table, not mixins: the base class and
    the store-backed class each have a short MRO, and every public method of a container is
    a function of :mod:`ptd.ops` or of the container's own module."""
    from ptd import PersistentTensorDict, TensorDict
    from ptd.containers.base import TensorDictBase

    assert len(TensorDictBase.__mro__) <= 4, TensorDictBase.__mro__
    assert len(PersistentTensorDict.__mro__) <= 6, PersistentTensorDict.__mro__
    assert len(TensorDict.__mro__) <= 5, TensorDict.__mro__
    for cls in (TensorDict, PersistentTensorDict):
        for name in dir(cls):
            fn = getattr(cls, name)
            module = getattr(fn, "__module__", None) or ""
            if name.startswith("__") or not callable(fn) or not module.startswith("ptd"):
                continue
            assert module.startswith(("ptd.ops.", "ptd.containers.")), (cls, name, module)
