"""Check ptd's layering: no import cycle between modules, each layer importing only the layers
below it, and the third-party rules (h5py/zarr only in the backends, no torch in the torch-free
layers, no typer/rich/tensordict in the library, pytest only in the test helpers of
``ptd.testing``). One declared exception: ``ptd/__main__.py`` (``python -m ptd``) imports
``ptd_cli`` to start the command line.

    python tools/check_imports.py          # prints every violation; exit 1 if there is one

Every ``import``/``from ... import`` counts, those inside functions included; only imports under
``if TYPE_CHECKING:`` (never executed) are left out.

Imports by name (``importlib.import_module(...)``, ``import_module(...)``, ``__import__(...)``,
``sys.modules[...]`` / ``sys.modules.get(...)`` of a ptd module or of a name computed at run
time) hide an edge from this check, so they are refused everywhere but in the public lazy
``ptd/__init__.py`` (PEP 562), except where :data:`DYNAMIC_IMPORTS` declares one, with why and
what removes it; the declared ones are printed on every run, so they stay in sight.

Imports under ``if TYPE_CHECKING:`` do not make cycles, but they still may not go up a layer in
:data:`NO_UPWARD_TYPING` (``ptd.ops`` types its functions against the ``Container`` protocol
of ``ptd/ops/interface.py``, not against the classes above it); the modules not yet moved off
the classes are declared in :data:`TYPING_IMPORTS_DEBT` and counted on every run. Nor does
``ptd.ops`` look anything up by a string (``lookup("TensorDict")``, ``register("...", f)``,
``new_tensordict(...)``): a family builds its results with ``td._new_tensordict(...)`` and reaches
the layers above through ``td._io``.

Outside ``ptd/storage`` and ``ptd/format`` nothing compares a value with a format's name
(``fmt == "h5"``): the code there asks the format's policy (``ptd.storage.api.FormatPolicy``).

A ``_private`` name is its package's own (a subpackage such as ``ptd.containers.persistent`` is
a package of its own): importing one from another package (``from ptd.ops.elementwise import
_helper`` in ``ptd.containers.persistent``) is refused, and so is reading ``x._name`` where
``_name`` is declared by another ptd package and never by the reader's own. The exception is
the container interface: the private members of ``Container`` in ``ptd/ops/interface.py``
(``_get_str``, ``_walk``, ``_leaves``...) are the contract between the layers, and any layer
above ``ptd.ops`` may use them. Uses still waiting for a public way are declared in
:data:`PRIVATE_ATTRIBUTES`, with why, and printed on every run.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("ptd", "ptd_cli")

#: layer -> the layers it may import (besides itself); a module's layer is its first two
#: dotted components (``ptd.containers.base`` -> ``ptd.containers``), ``ptd`` for ``ptd/__init__.py``
LAYERS: dict[str, set[str]] = {
    "ptd.errors": set(),
    "ptd.format": {"ptd.errors"},
    "ptd.storage": {"ptd.errors", "ptd.format"},
    "ptd.report": {"ptd.errors", "ptd.format", "ptd.storage"},
    "ptd.transfer": {"ptd.errors", "ptd.format", "ptd.storage", "ptd.report"},
    # the method families: typed functions on the container interface (no storage, no classes
    # of ptd.containers at run time)
    "ptd.ops": {"ptd.errors", "ptd.format"},
    # base, tensordict, persistent/, memmap/: the classes, and what a store-backed or a
    # memory-mapped container needs of the storage and transfer layers
    "ptd.containers": {
        "ptd.errors", "ptd.format", "ptd.storage", "ptd.report", "ptd.transfer", "ptd.ops",
    },
    "ptd.data": {"ptd.errors", "ptd.format", "ptd.storage", "ptd.ops", "ptd.containers"},
    # 0.1.0's import path of the memmap package, kept: re-exports of ptd.containers.memmap only
    "ptd.memmap": {"ptd.containers"},
    # test helpers for code built on ptd (the backend contract): pytest, and the interface
    # they test; nothing in ptd imports them
    "ptd.testing": {"ptd.errors", "ptd.format", "ptd.storage"},
    "ptd": {"ptd.errors"},  # everything else by name, lazily (PEP 562)
    "ptd_cli": {"ptd", "ptd.errors", "ptd.report", "ptd.transfer", "ptd.containers",
                "ptd.storage", "ptd.format"},
    # the one exception to "the library never imports ptd_cli": `python -m ptd` starts the
    # command line (ptd/__main__.py runs only as a script; nothing in ptd imports it)
    "ptd.__main__": {"ptd_cli"},
}  # fmt: skip
#: modules allowed to import ptd modules by name, and why (each one is debt, printed every run)
DYNAMIC_IMPORTS: dict[str, str] = {}
#: private attributes a package reads of another package, and why (each one is debt, printed
#: on every run, like DYNAMIC_IMPORTS)
PRIVATE_ATTRIBUTES: dict[str, tuple[frozenset[str], str]] = {
    "ptd.data": (
        frozenset({"_unchecked"}),
        "builds each batch with TensorDict._unchecked, the container's constructor without "
        "per-entry checks, for ptd's own hot paths whose tensors it made with the batch size "
        "leading; a public constructor that skips the checks would be a trap for users",
    ),
    "ptd.containers.memmap": (
        frozenset({"_data"}),
        "its loader, make and methods modules fill the TensorDicts they build through their "
        "own dict (the same containers layer, in a package of its own)",
    ),
}  # fmt: skip
#: layers whose imports under ``if TYPE_CHECKING:`` must not go up a layer either
NO_UPWARD_TYPING = {"ptd.ops"}
#: modules of those layers still typed against the classes above them (``TensorDictBase``
#: under ``if TYPE_CHECKING:``), and why; counted on every run. Nothing may be added here.
TYPING_IMPORTS_DEBT: tuple[frozenset[str], str] = (
    frozenset({
        "ptd.ops.apply", "ptd.ops.attrs", "ptd.ops.autograd", "ptd.ops.checks",
        "ptd.ops.conversions", "ptd.ops.devices", "ptd.ops.elementwise", "ptd.ops.entries",
        "ptd.ops.factories", "ptd.ops.interface", "ptd.ops.joining", "ptd.ops.keymoves",
        "ptd.ops.keysplit", "ptd.ops.lastop", "ptd.ops.leaf_access", "ptd.ops.locking",
        "ptd.ops.memmap", "ptd.ops.names", "ptd.ops.operands", "ptd.ops.packing",
        "ptd.ops.pointwise", "ptd.ops.reductions", "ptd.ops.reshaping", "ptd.ops.root",
        "ptd.ops.shape", "ptd.ops.state_dict", "ptd.ops.tdhooks", "ptd.ops.torch_functions",
        "ptd.ops.update",
    }),
    "their functions are still annotated with TensorDictBase; typing them against the "
    "Container protocol (ptd/ops/interface.py) needs the protocol to declare the public "
    "methods the families call on each other",
)  # fmt: skip
#: layers that may not look anything up by a string name (a registry of constructors)
NO_STRING_LOOKUPS = {"ptd.ops"}
#: the calls that look something up by name (any call of ``new_tensordict``; ``lookup`` and
#: ``register`` with a string as their first argument)
STRING_LOOKUPS = {"lookup", "register", "new_tensordict"}
#: layers that must never import torch (``ptd inspect``/``validate`` run without it)
TORCH_FREE = {
    "ptd", "ptd.errors", "ptd.format", "ptd.storage", "ptd.report", "ptd.transfer", "ptd.testing",
}  # fmt: skip
#: third-party packages -> the only module prefixes allowed to import them
RESTRICTED = {
    "h5py": ("ptd.storage.h5.",),
    "zarr": ("ptd.storage.zarr.",),
    # numcodecs: zarr's codecs, the decoders of HDF5's plugin filters (blosc, lz4...), and the
    # bounded decodes both formats share (ptd/storage/frames.py)
    "numcodecs": ("ptd.storage.zarr.", "ptd.storage.h5.", "ptd.storage.frames"),
    "typer": ("ptd_cli",),
    "rich": ("ptd_cli",),
    "tensordict": (),
    # a test extra: only the test helpers, which nothing in ptd imports
    "pytest": ("ptd.testing",),
}
#: private modules of a third-party package -> the one ptd module that may import them (it
#: checks the package's version first: zarr calls everything under zarr.core private)
PRIVATE_THIRD_PARTY = {
    "zarr.core": "ptd.storage.zarr.private",
    "zarr.codecs.numcodecs._codecs": "ptd.storage.zarr.private",
    "numcodecs.zarr3": "ptd.storage.zarr.private",
}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "ptd_cli":
        return "ptd_cli"
    return ".".join(parts[:2]) if len(parts) > 1 else parts[0]


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = getattr(test, "id", None) or getattr(test, "attr", None)
            if name == "TYPE_CHECKING":
                for sub in node.body:
                    for n in ast.walk(sub):
                        skip.add(id(n))
    return skip


def package_of(module: str) -> str:
    """The package a module belongs to for the private-name rule: ``ptd.ops.reductions`` ->
    ``ptd.ops``, ``ptd.containers.persistent.leaves`` -> ``ptd.containers.persistent`` (a
    subpackage of a layer is a package of its own); all of ``ptd_cli`` is one package."""
    if module.split(".")[0] == "ptd_cli":
        return "ptd_cli"
    parts = module.split(".")
    if len(parts) >= 4 or (len(parts) == 3 and (ROOT / Path(*parts) / "__init__.py").exists()):
        return ".".join(parts[:3])
    return layer_of(module)


def private_imports(path: Path, module: str) -> list[tuple[str, int]]:
    """(``module.name``, line) for every ``_private`` name imported from another package."""
    out: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
            continue
        if node.module.split(".")[0] not in PACKAGES:
            continue
        if package_of(node.module) == package_of(module):
            continue
        for a in node.names:
            if a.name.startswith("_") and not a.name.startswith("__"):
                out.append((f"{node.module}.{a.name}", node.lineno))
    return out


#: the module declaring the container interface, whose private names any layer above ptd.ops
#: may use (``class Container(Protocol)`` in it lists them)
INTERFACE = ROOT / "ptd" / "ops" / "interface.py"
#: the module declaring the backend interface: the private members of ``class Backend`` in it
#: (its hooks and the state it keeps) are the contract between the interface and the formats:
#: ``ptd.storage``'s packages may use them (``ptd.storage.h5`` implementing ``_read``,
#: ``ptd.storage.read`` reading ``_maps``), and so may a module anywhere that defines a
#: ``Backend`` subclass (a format of its own, as ``ptd/testing/npy_format.py``)
BACKEND_INTERFACE = ROOT / "ptd" / "storage" / "api.py"


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def declared_names(tree: ast.AST) -> set[str]:
    """The private names a module declares: functions and classes, assigned names and
    attributes (``self._x = ...``), annotated class attributes, imported aliases."""
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = n.name
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            name = n.id
        elif isinstance(n, ast.Attribute) and isinstance(n.ctx, (ast.Store, ast.Del)):
            name = n.attr
        elif isinstance(n, ast.alias):
            name = n.asname or n.name.split(".")[-1]
        else:
            continue
        if _is_private(name):
            out.add(name)
    return out


def interface_names() -> set[str]:
    """The private members of ``Container`` in :data:`INTERFACE` (empty without the file)."""
    if not INTERFACE.exists():
        return set()
    for node in ast.parse(INTERFACE.read_text()).body:
        if isinstance(node, ast.ClassDef) and node.name == "Container":
            names = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
            names |= {
                n.target.id
                for n in node.body
                if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
            }
            return {n for n in names if _is_private(n)}
    return set()


def backend_interface_names() -> set[str]:
    """The private members of ``Backend`` in :data:`BACKEND_INTERFACE`: its methods, and the
    attributes its methods assign on ``self`` (empty without the file)."""
    if not BACKEND_INTERFACE.exists():
        return set()
    for node in ast.parse(BACKEND_INTERFACE.read_text()).body:
        if isinstance(node, ast.ClassDef) and node.name == "Backend":
            names = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
            for n in ast.walk(node):
                if (
                    isinstance(n, ast.Attribute)
                    and isinstance(n.ctx, ast.Store)
                    and isinstance(n.value, ast.Name)
                    and n.value.id == "self"
                ):
                    names.add(n.attr)
            return {n for n in names if _is_private(n)}
    return set()


def defines_backend(tree: ast.AST) -> bool:
    """Whether a module defines a subclass of ``Backend`` (a format's backend, wherever it
    lives): its hooks are then the module's to implement and use."""
    for n in ast.walk(tree):
        if isinstance(n, ast.ClassDef):
            for base in n.bases:
                name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
                if name == "Backend":
                    return True
    return False


def private_attributes(
    tree: ast.AST,
    module: str,
    declared: dict[str, set[str]],
    interface: set[str],
    backend_interface: frozenset[str] = frozenset(),
) -> list[tuple[str, str, int]]:
    """(attribute, packages declaring it, line) for every ``x._name`` read in ``module`` whose
    name its own package never declares but another ptd package does. The container
    interface's names are allowed in every layer above ``ptd.ops``, the backend interface's
    in ``ptd.storage`` and its subpackages and in any module defining a ``Backend`` subclass."""
    own = declared.get(package_of(module), set())
    layer = layer_of(module)
    above_ops = layer == "ptd.ops" or "ptd.ops" in LAYERS.get(layer, set())
    allowed = (interface if above_ops else set()) | (
        backend_interface if module.startswith("ptd.storage.") or defines_backend(tree) else set()
    )
    out: list[tuple[str, str, int]] = []
    for n in ast.walk(tree):
        if not (isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)):
            continue
        name = n.attr
        if not _is_private(name) or name in own or name in allowed:
            continue
        owners = sorted(pkg for pkg, names in declared.items() if name in names)
        if owners:
            out.append((name, ", ".join(owners), n.lineno))
    return out


#: the format names nothing outside the formats' own layers may branch on
FORMAT_NAMES = frozenset({"h5", "hdf5", "zarr", "memmap"})
#: the constants that hold a format's name (compared with, they are a format's name too)
FORMAT_NAME_CONSTANTS = frozenset({"MEMMAP_FORMAT"})
#: the layers that know formats by name: the backends (and their policies) and the on-disk
#: conventions
FORMAT_LAYERS = ("ptd.storage", "ptd.format")


def _names_a_format(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value.lower() in FORMAT_NAMES
    if isinstance(node, ast.Name):
        return node.id in FORMAT_NAME_CONSTANTS
    if isinstance(node, ast.Attribute):
        return node.attr in FORMAT_NAME_CONSTANTS
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_a_format(e) for e in node.elts)
    return False


def format_branches(tree: ast.AST) -> list[int]:
    """Lines where code compares something with a format's name (``fmt == "h5"``,
    ``be.name != "zarr"``, ``x in ("h5", "zarr")``, ``fmt == MEMMAP_FORMAT``) or matches on
    one (``case "zarr":``):
    outside :data:`FORMAT_LAYERS` a caller asks the format's policy
    (``backend.policy.stores_shards``...) instead, so that a new format touches only its own
    subpackage."""
    out: list[int] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Compare):
            if any(_names_a_format(x) for x in [n.left, *n.comparators]):
                out.append(n.lineno)
        elif isinstance(n, ast.MatchValue) and _names_a_format(n.value):
            out.append(n.lineno)
    return sorted(set(out))


def string_lookups(tree: ast.AST) -> list[tuple[str, int]]:
    """(called name, line) for each lookup by name: a call of ``new_tensordict``, or of
    ``lookup``/``register`` (a bare name or an attribute: ``registry.register``) whose first
    argument is a string."""
    out: list[tuple[str, int]] = []
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call):
            continue
        name = getattr(n.func, "id", None) or getattr(n.func, "attr", None)
        if name not in STRING_LOOKUPS:
            continue
        first = n.args[0] if n.args else None
        named = isinstance(first, ast.Constant) and isinstance(first.value, str)
        if name == "new_tensordict" or named:
            out.append((name, n.lineno))
    return out


def typing_imports(path: Path, module: str) -> list[tuple[str, int]]:
    """(imported module, line) for every import under ``if TYPE_CHECKING:`` in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    skip = _type_checking_nodes(tree)
    is_pkg = path.name == "__init__.py"
    out: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if id(node) not in skip:
            continue
        if isinstance(node, ast.Import):
            out.extend((a.name, node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_pkg else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                out.append((".".join(base + ([node.module] if node.module else [])), node.lineno))
            else:
                out.append((node.module or "", node.lineno))
    return out


_BY_NAME = {"import_module", "__import__"}


def dynamic_imports(path: Path) -> list[tuple[str, int]]:
    """(what is imported, line) for every import by name of a ptd module (or of a name only
    known at run time) in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    out: list[tuple[str, int]] = []

    def target(arg: ast.expr | None) -> str | None:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return arg.value if arg.value.split(".")[0] in PACKAGES else None
        if isinstance(arg, ast.JoinedStr):  # f"ptd.{name}"
            head = arg.values[0] if arg.values else None
            text = head.value if isinstance(head, ast.Constant) else ""
            return f"{text}..." if str(text).split(".")[0] in PACKAGES else "a computed name"
        return "a computed name"

    def is_sys_modules(node: ast.expr) -> bool:
        return (
            isinstance(node, ast.Attribute)
            and node.attr == "modules"
            and isinstance(node.value, ast.Name)
            and node.value.id == "sys"
        )

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", None)
            if name in _BY_NAME:
                got = target(node.args[0] if node.args else None)
                if got is not None:
                    out.append((got, node.lineno))
            elif (
                isinstance(fn, ast.Attribute)
                and fn.attr == "get"
                and is_sys_modules(fn.value)
                and (got := target(node.args[0] if node.args else None)) is not None
            ):
                out.append((got, node.lineno))
        elif isinstance(node, ast.Subscript) and is_sys_modules(node.value):
            got = target(node.slice)
            if got is not None:
                out.append((got, node.lineno))
    return out


def imports_of(path: Path, module: str, modules: set[str]) -> list[tuple[str, int]]:
    """(imported module, line) for every executed import in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    skip = _type_checking_nodes(tree)
    is_pkg = path.name == "__init__.py"
    out: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.extend((a.name, node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_pkg else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for a in node.names:  # `from pkg import submodule` imports the submodule
                sub = f"{target}.{a.name}"
                out.append((sub if sub in modules else target, node.lineno))
    return out


def main() -> int:
    files = [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]
    modules = {module_name(p): p for p in files}
    names = set(modules)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    problems: list[str] = []
    declared: list[str] = []
    trees = {mod: ast.parse(path.read_text(), str(path)) for mod, path in modules.items()}
    by_package: dict[str, set[str]] = {}
    for mod, tree in trees.items():
        by_package.setdefault(package_of(mod), set()).update(declared_names(tree))
    interface = interface_names()
    backend_interface = frozenset(backend_interface_names())
    private_debt: dict[str, dict[str, str]] = {}
    typing_debt: set[str] = set()
    for mod, path in modules.items():
        for attr, owners, line in private_attributes(
            trees[mod], mod, by_package, interface, backend_interface
        ):
            where = f"{path.relative_to(ROOT)}:{line}"
            debt = PRIVATE_ATTRIBUTES.get(package_of(mod))
            if debt is not None and attr in debt[0]:
                private_debt.setdefault(package_of(mod), {}).setdefault(attr, where)
                continue
            problems.append(
                f"{where}: {mod} reads the private attribute .{attr} of {owners} (give that "
                "package a public way, add it to the container interface in "
                "ptd/ops/interface.py, or declare it in PRIVATE_ATTRIBUTES with why)"
            )
        if not any(mod == lay or mod.startswith(lay + ".") for lay in FORMAT_LAYERS):
            for line in format_branches(trees[mod]):
                problems.append(
                    f"{path.relative_to(ROOT)}:{line}: {mod} branches on a format's name (ask "
                    "the format's policy, ptd.storage.api.FormatPolicy, or add what it should "
                    "know to it)"
                )
        for name, line in private_imports(path, mod):
            problems.append(
                f"{path.relative_to(ROOT)}:{line}: {mod} imports the private name {name} of "
                "another package (make it public there, or keep the use inside that package)"
            )
        for what, line in dynamic_imports(path):
            where = f"{path.relative_to(ROOT)}:{line}"
            if mod == "ptd":
                continue  # the public lazy namespace (PEP 562)
            if mod in DYNAMIC_IMPORTS:
                declared.append(f"{where}: {mod} imports {what} by name ({DYNAMIC_IMPORTS[mod]})")
            else:
                problems.append(
                    f"{where}: {mod} imports {what} by name (hidden from this check: import it, "
                    "or declare it in DYNAMIC_IMPORTS with why)"
                )
        layer = layer_of(mod)
        if layer in NO_STRING_LOOKUPS:
            for called, line in string_lookups(trees[mod]):
                problems.append(
                    f"{path.relative_to(ROOT)}:{line}: {mod} looks up by name ({called}(...)): "
                    "build results with td._new_tensordict(...) and reach the layers above "
                    "through td._io (ptd/ops/interface.py)"
                )
        if layer in NO_UPWARD_TYPING:
            for target, line in typing_imports(path, mod):
                hit = target
                while hit and hit not in names:
                    hit = hit.rpartition(".")[0]
                if not hit:
                    continue
                tl = layer_of(hit)
                if tl == layer or tl in LAYERS.get(layer, set()):
                    continue
                if mod in TYPING_IMPORTS_DEBT[0]:
                    typing_debt.add(mod)
                    continue
                problems.append(
                    f"{path.relative_to(ROOT)}:{line}: {mod} (layer {layer}) imports {hit} "
                    f"(layer {tl}) under TYPE_CHECKING (type it against the Container protocol "
                    "of ptd/ops/interface.py)"
                )
        for target, line in imports_of(path, mod, names):
            where = f"{path.relative_to(ROOT)}:{line}"
            top = target.split(".")[0]
            if top == "torch" and layer in TORCH_FREE:
                problems.append(f"{where}: {mod} imports torch (layer {layer} is torch-free)")
            if top in RESTRICTED and not any(mod.startswith(p) for p in RESTRICTED[top]):
                problems.append(f"{where}: {mod} imports {top}")
            for private, owner in PRIVATE_THIRD_PARTY.items():
                if (target == private or target.startswith(private + ".")) and mod != owner:
                    problems.append(
                        f"{where}: {mod} imports {target}, private API of "
                        f"{private.split('.')[0]} (only {owner} may, behind its version check)"
                    )
            if top not in PACKAGES:
                continue
            # the innermost known module the import names
            hit = target
            while hit and hit not in names:
                hit = hit.rpartition(".")[0]
            if not hit or hit == mod:
                continue
            # importing a submodule runs its package's __init__ first: count the module only
            graph[mod].add(hit)
            tl = layer_of(hit)
            if tl != layer and tl not in LAYERS.get(layer, set()):
                problems.append(f"{where}: {mod} (layer {layer}) imports {hit} (layer {tl})")
    # cycles: Tarjan's strongly connected components
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    sccs: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            strong(v)
    for comp in sccs:
        problems.append("import cycle: " + " <-> ".join(comp))
    for p in problems:
        print(p)
    for d in declared:
        print(f"declared: {d}")
    for pkg, attrs in sorted(private_debt.items()):
        first = min(attrs.values())
        names = ", ".join(f".{a}" for a in sorted(attrs))
        print(
            f"declared: {first}: {pkg} reads private attributes of other packages: {names} "
            f"({PRIVATE_ATTRIBUTES[pkg][1]})"
        )
    if typing_debt:
        print(
            f"declared: {len(typing_debt)} module(s) of ptd.ops import ptd.containers under "
            f"TYPE_CHECKING ({TYPING_IMPORTS_DEBT[1]})"
        )
    print(
        f"{len(modules)} modules, {sum(map(len, graph.values()))} internal imports, "
        f"{len(problems)} problem(s), {len(declared)} declared import(s) by name, "
        f"{len(private_debt)} package(s) with declared private attributes"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
