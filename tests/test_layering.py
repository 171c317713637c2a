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
    assert spec is not None
    assert spec.loader is not None
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
    # the ptd.ops modules still typed against TensorDictBase are counted, one line; the list
    # may only shrink
    typing = [ln for ln in declared if "under TYPE_CHECKING" in ln]
    assert len(typing) == 1, typing
    assert len(checker.TYPING_IMPORTS_DEBT[0]) <= 29
    declared = [ln for ln in declared if ln not in typing]
    # the private attributes still read across packages, each with why: TensorDict's own
    # dict (memmap builds TensorDicts) and its unchecked constructor (ptd.data's batches);
    # stores are read through PersistentTensorDict.store_node
    assert {ln.split(":")[1].strip() for ln in declared} == {
        "ptd/containers/memmap/loader.py",
        "ptd/data/transport.py",
    }
    attrs = {ln.split("other packages: ")[1].split(" (")[0] for ln in declared}
    assert attrs == {"._data", "._unchecked"}


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
        "ptd/ops/__init__.py": "",
        "ptd/ops/a.py": "from ptd.ops import b\n",
        "ptd/ops/b.py": "def f():\n    from ptd.ops.a import x\n",
    })  # fmt: skip
    out = _run(checker, monkeypatch, root, capsys)
    assert "import cycle: ptd.ops.a <-> ptd.ops.b" in out


def test_type_checking_imports_do_not_count(
    checker: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = _fake_tree(tmp_path, {
        "ptd/ops/__init__.py": "",
        "ptd/ops/a.py": "from ptd.ops import b\n",
        "ptd/ops/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ptd.ops.a import x\n",
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
        "ptd/ops/__init__.py": "",
        "ptd/ops/x.py": "def f():\n    from ptd.containers.persistent import y\n",
        "ptd/containers/persistent/__init__.py": "",
        "ptd/containers/persistent/y.py": "import h5py\n",
        "ptd/report/__init__.py": "",
        "ptd/report/r.py": "import rich\n" + "x = 1\n" * 601,
        "ptd/storage/__init__.py": "",
        "ptd/storage/zarr/__init__.py": "",
        "ptd/storage/zarr/x.py": "from zarr.core.sync import sync\n",
        "ptd/storage/zarr/private.py": "from zarr.core.sync import sync\n",
    })  # fmt: skip
    out = _run(checker, monkeypatch, root, capsys)
    assert (
        "ptd.ops.x (layer ptd.ops) imports ptd.containers.persistent.y (layer ptd.containers)"
        in out
    )
    assert "ptd.containers.persistent.y imports h5py" in out
    assert "ptd.report.r imports rich" in out
    # zarr's private API: only through the one module that checks zarr's version
    assert "ptd.storage.zarr.x imports zarr.core.sync, private API of zarr" in out
    assert "ptd.storage.zarr.private imports" not in out
    assert "lines" not in out  # no line cap: a long module is not a problem


def test_imports_by_name_are_found(
    checker: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = _fake_tree(tmp_path, {
        "ptd/__init__.py": "import importlib\ndef __getattr__(n):\n    return importlib.import_module(f'ptd.{n}')\n",
        "ptd/ops/__init__.py": "",
        "ptd/ops/a.py": "import importlib\nm = importlib.import_module('ptd.containers.memmap.w')\n",
        "ptd/ops/b.py": "from importlib import import_module\ndef f(n):\n    return import_module(n)\n",
        "ptd/ops/c.py": "import sys\nw = sys.modules.get('ptd.containers.persistent.x')\nt = sys.modules.get('torch')\n",
        "ptd/ops/d.py": "import sys\nw = sys.modules['ptd.data']\nv = __import__('ptd.containers.memmap')\n",
    })  # fmt: skip
    out = _run(checker, monkeypatch, root, capsys)
    assert "ptd/ops/a.py:2: ptd.ops.a imports ptd.containers.memmap.w by name" in out
    assert "ptd/ops/b.py:3: ptd.ops.b imports a computed name by name" in out
    assert "ptd/ops/c.py:2: ptd.ops.c imports ptd.containers.persistent.x by name" in out
    assert "ptd/ops/d.py:2: ptd.ops.d imports ptd.data by name" in out
    assert "ptd/ops/d.py:3: ptd.ops.d imports ptd.containers.memmap by name" in out
    assert "torch by name" not in out  # a third-party module looked up: not a hidden edge
    assert "ptd/__init__.py" not in out  # the public lazy namespace may


def test_branching_on_a_format_name_is_found_outside_the_format_layers(
    checker: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = _fake_tree(tmp_path, {
        "ptd/report/__init__.py": "",
        "ptd/report/a.py": "def f(fmt):\n    return 1 if fmt == 'h5' else 2\n",
        "ptd/report/b.py": "def f(be):\n    return be.name in ('zarr', 'memmap')\n",
        "ptd/report/c.py": "def f(x):\n    match x:\n        case 'HDF5':\n            return 1\n",
        "ptd/report/d.py": "NAMES = {'h5': 'HDF5'}\ndef f(x):\n    return x == 'zip'\n",
        "ptd/report/m.py": "def f(fmt):\n    return fmt == 'memmap'\n",
        "ptd/report/n.py": "from x import MEMMAP_FORMAT\ndef f(fmt):\n    return fmt != MEMMAP_FORMAT\n",
        "ptd/report/o.py": "import x\ndef f(loc):\n    return loc.format in (x.MEMMAP_FORMAT,)\n",
        "ptd/storage/__init__.py": "",
        "ptd/storage/e.py": "def f(fmt):\n    return fmt == 'h5'\n",
        "ptd/format/__init__.py": "",
        "ptd/format/g.py": "def f(fmt):\n    return fmt != 'zarr'\n",
    })  # fmt: skip
    out = _run(checker, monkeypatch, root, capsys)
    assert "ptd/report/a.py:2: ptd.report.a branches on a format's name" in out
    assert "ptd/report/b.py:2: ptd.report.b branches on a format's name" in out
    assert "ptd/report/c.py:3: ptd.report.c branches on a format's name" in out
    assert "ptd/report/m.py:2: ptd.report.m branches on a format's name" in out
    assert "ptd/report/n.py:3: ptd.report.n branches on a format's name" in out
    assert "ptd/report/o.py:3: ptd.report.o branches on a format's name" in out
    assert "ptd/report/d.py" not in out  # a table keyed by names, or another string: not a branch
    assert "ptd/storage/e.py" not in out  # the formats' own layers may
    assert "ptd/format/g.py" not in out


def test_private_names_of_another_package_are_found(
    checker: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = _fake_tree(tmp_path, {
        "ptd/ops/__init__.py": "",
        "ptd/ops/elementwise.py": "def _helper(): ...\n",
        "ptd/ops/same.py": "from ptd.ops.elementwise import _helper\n",  # its own package: fine
        "ptd/containers/__init__.py": "",
        "ptd/containers/base.py": "def _hook(): ...\n",
        "ptd/containers/tensordict.py": "from ptd.containers.base import _hook\n",  # fine
        "ptd/containers/persistent/__init__.py": "",
        "ptd/containers/persistent/p.py": "from ptd.ops.elementwise import _helper\n",
        # a subpackage is a package of its own
        "ptd/containers/persistent/q.py": "from ptd.containers.base import _hook\n",
    })  # fmt: skip
    out = _run(checker, monkeypatch, root, capsys)
    assert "ptd.containers.persistent.p imports the private name ptd.ops.elementwise._helper" in out
    assert "ptd.containers.persistent.q imports the private name ptd.containers.base._hook" in out
    assert "ptd.ops.same" not in out
    assert "ptd.containers.tensordict " not in out


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


def test_private_attributes_of_another_package_are_found(
    checker: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = _fake_tree(tmp_path, {
        "ptd/ops/__init__.py": "",
        "ptd/ops/interface.py": (
            "class Container:\n    _leaves: object\n    def _get_str(self, key): ...\n"
        ),
        "ptd/containers/__init__.py": "",
        "ptd/containers/base.py": "class B:\n    def _secret(self): ...\n    def _get_str(self, k): ...\n",
        "ptd/data/__init__.py": "",
        "ptd/data/d.py": (
            "import numpy as np\n"
            "def f(td):\n"
            "    td._get_str('a')\n"  # the container interface: any layer above ptd.ops
            "    td._leaves\n"
            "    td._own\n"  # declared in its own package below
            "    np._NoValue\n"  # not a ptd name
            "    return td._secret()\n"  # another package's private method: refused
        ),
        "ptd/data/e.py": "class E:\n    _own = 1\n",
        "ptd/storage/__init__.py": "",
        # a layer below ptd.ops may not use the container interface either
        "ptd/storage/s.py": "def g(td):\n    return td._get_str('a')\n",
    })  # fmt: skip
    out = _run(checker, monkeypatch, root, capsys)
    assert (
        "ptd/data/d.py:7: ptd.data.d reads the private attribute ._secret of ptd.containers" in out
    )
    assert "ptd.storage.s reads the private attribute ._get_str" in out
    assert "._leaves" not in out
    assert "._own" not in out
    assert "_NoValue" not in out
    assert "d.py:3" not in out


def test_a_backend_subclass_anywhere_may_use_the_backend_hooks(
    checker: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A format of one's own (ptd/testing/npy_format.py) implements the hooks outside
    ptd/storage; a module that defines no Backend subclass still may not read them."""
    root = _fake_tree(tmp_path, {
        "ptd/storage/__init__.py": "",
        "ptd/storage/api.py": (
            "class Backend:\n    def __init__(self):\n        self._location = 'x'\n"
            "    def _not_found(self, p): ...\n"
        ),
        "ptd/testing/__init__.py": "",
        "ptd/testing/fmt.py": (
            "from ptd.storage.api import Backend\n"
            "class Mine(Backend):\n"
            "    def kind(self, p):\n"
            "        raise self._not_found(p)\n"
        ),
        "ptd/testing/other.py": "def f(be):\n    return be._location\n",
    })  # fmt: skip
    out = _run(checker, monkeypatch, root, capsys)
    assert "ptd.testing.fmt reads" not in out
    assert "ptd.testing.other reads the private attribute ._location of ptd.storage" in out


def test_ops_looks_nothing_up_by_name(
    checker: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = _fake_tree(tmp_path, {
        "ptd/ops/__init__.py": "",
        "ptd/ops/a.py": "from ptd.ops.r import lookup\nx = lookup('TensorDict')\n",
        "ptd/ops/b.py": "from ptd.ops import r\nr.register('memmap', print)\n",
        "ptd/ops/c.py": "from ptd.ops.r import new_tensordict\ny = new_tensordict({})\n",
        "ptd/ops/d.py": "def f(td, table):\n    return td._new_tensordict({}), table.lookup(td)\n",
        "ptd/ops/r.py": "def lookup(n): ...\ndef register(n, f): ...\ndef new_tensordict(*a): ...\n",
        # the containers may keep a registry of their own
        "ptd/containers/__init__.py": "",
        "ptd/containers/e.py": "from ptd.ops.r import register\nregister('x', print)\n",
    })  # fmt: skip
    out = _run(checker, monkeypatch, root, capsys)
    assert "ptd/ops/a.py:2: ptd.ops.a looks up by name (lookup(...))" in out
    assert "ptd/ops/b.py:2: ptd.ops.b looks up by name (register(...))" in out
    assert "ptd/ops/c.py:2: ptd.ops.c looks up by name (new_tensordict(...))" in out
    assert "ptd.ops.d" not in out  # a constructor primitive, a lookup by a value
    assert "ptd.containers.e" not in out


def test_ops_imports_no_container_even_for_typing(
    checker: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    typing_only = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    {}\n"
    root = _fake_tree(tmp_path, {
        "ptd/ops/__init__.py": "",
        "ptd/ops/interface.py": "class Container: ...\n",
        "ptd/ops/new.py": typing_only.format("from ptd.containers.base import TensorDictBase"),
        "ptd/ops/rel.py": typing_only.format("from ..containers import base"),
        "ptd/ops/ok.py": typing_only.format("from ptd.ops.interface import Container"),
        "ptd/containers/__init__.py": "",
        "ptd/containers/base.py": "class TensorDictBase: ...\n",
        # a layer not held to the rule: its typing imports still do not count
        "ptd/format/__init__.py": "",
        "ptd/format/f.py": typing_only.format("from ptd.containers.base import TensorDictBase"),
    })  # fmt: skip
    out = _run(checker, monkeypatch, root, capsys)
    assert (
        "ptd/ops/new.py:3: ptd.ops.new (layer ptd.ops) imports ptd.containers.base "
        "(layer ptd.containers) under TYPE_CHECKING"
    ) in out
    assert "ptd.ops.rel (layer ptd.ops) imports ptd.containers" in out
    assert "ptd.ops.ok" not in out
    assert "ptd.format.f" not in out
    assert "cycle" not in out


def test_ops_debt_is_declared_not_refused(
    checker: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A module in TYPING_IMPORTS_DEBT is counted on every run, not reported as a problem."""
    root = _fake_tree(tmp_path, {
        "ptd/ops/__init__.py": "",
        "ptd/ops/apply.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                            "    from ptd.containers.base import TensorDictBase\n",
        "ptd/containers/__init__.py": "",
        "ptd/containers/base.py": "class TensorDictBase: ...\n",
        "ptd/format/__init__.py": "",
        "ptd/format/bad.py": "import torch\n",  # one real problem, so that main() reports
    })  # fmt: skip
    out = _run(checker, monkeypatch, root, capsys)
    assert "ptd.ops.apply (layer" not in out
    assert "declared: 1 module(s) of ptd.ops import ptd.containers under TYPE_CHECKING" in out
