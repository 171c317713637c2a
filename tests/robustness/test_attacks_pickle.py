"""Nothing in a file runs code, and non-tensor entries cost what the file really holds.

Each attack of :mod:`attacks_pickle` is a test of its own, run through the command line
(``inspect``, ``validate``, ``validate --data``, ``convert`` to h5 and to zarr) and through the
library (a ``PersistentTensorDict`` or ``load_memmap`` reading the key), each in a subprocess:
the marker file a payload would create never appears, refusals are one ``ptd: error:`` line
naming the key, ``inspect``/``validate`` list a pickle as ``pickled`` without decoding it, no
output is left behind, and the store is unchanged. With the opt-in (``allow_pickle=True``,
``--allow-pickle``) harmless twins of the same shapes are unpickled.

A zarr-python release that cannot parse a pipeline (zarr 3.1.6 has no ``numcodecs.pickle``; no
release reads a v2 ``|O`` array whose object codec is ``pickle``) lists the array as
unreadable instead: either way nothing is decoded, which is what these tests check.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from .attack_kit import MARKER, Attack, CliRun, assert_refused, expand, run_ptd, run_python
from .attacks_pickle import ATTACKS, HARMLESS, LIBRARY_KEYS, by_name

#: generous bound on the peak RSS of one ptd run (the benchmark holds the real bar)
PEAK_RSS = 1 << 30

PICKLE_ATTACKS = [a.name for a in ATTACKS if "declare" not in a.name]
SIZE_ATTACKS = [a.name for a in ATTACKS if "declare" in a.name]
#: attacks whose store zarr-python may be unable to parse (then listed as unreadable)
MAYBE_UNREADABLE = {
    "zarr_v2_object_pickle_codec_only",
    "zarr_v2_float_pickle_filter",
    "zarr_v2_pickle_compressor",
    "zarr_v3_numcodecs_pickle_codec",
    "zarr_v3_sharded_pickle_codec",
    "zarr_v3_consolidated_pickle_codec",
}


def _files(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root``: its size and mtime (ns)."""
    out = {}
    for d, _dirs, files in os.walk(root):
        for f in files:
            st = os.stat(os.path.join(d, f))
            out[os.path.relpath(os.path.join(d, f), root)] = (st.st_size, st.st_mtime_ns)
    return out


def _listed(run: CliRun, key: str, *words: str) -> bool:
    """Whether one line of the run's stdout names ``key`` with one of ``words``."""
    return any(key in line and any(w in line for w in words) for line in run.stdout.splitlines())


def _check_cli(attack: Attack, tmp_path: Path) -> None:
    store = attack.make(tmp_path)
    key = LIBRARY_KEYS[attack.name]
    before = _files(store) if store.is_dir() else {store.name: _files(tmp_path)[store.name]}
    outside = set(_files(tmp_path))
    for i, argv in enumerate(attack.commands):
        out_dir = tmp_path / f"out{i}"
        out_dir.mkdir()
        run = run_ptd(expand(argv, store, out_dir))
        what = f"{attack.name}: {' '.join(argv)}"
        assert not run.hung, what
        assert "Traceback" not in run.stderr, (what, run.stderr)
        assert run.peak_rss < PEAK_RSS, (what, run.peak_rss)
        for watched in attack.watch(tmp_path):
            assert not watched.exists(), f"{what}: code from the file ran ({watched})"
        _expect(attack.name, argv, run, key)
        if run.returncode != 0:  # a refusal leaves no output, not even a hidden temporary
            assert os.listdir(out_dir) == [], (what, os.listdir(out_dir))
    after = _files(store) if store.is_dir() else {store.name: _files(tmp_path)[store.name]}
    assert after == before, f"{attack.name}: the store changed"
    created = {f for f in set(_files(tmp_path)) - outside if not f.startswith("out")}
    assert created == set(), f"{attack.name}: files written outside the outputs: {created}"


def _expect(name: str, argv: tuple[str, ...], run: CliRun, key: str) -> None:
    """What each command must say about the attack's key."""
    command = argv[0]
    data = "--data" in argv
    unreadable = ("unsupported", "unreadable")
    if name == "h5_pickle_marker":  # HDF5 has no pickled entries: plain bytes, copied as such
        assert run.returncode == 0, (argv, run.stderr)
        return
    if name in SIZE_ATTACKS:
        if command == "inspect":
            assert run.returncode == 0, (argv, run.stderr)  # metadata only: nothing is read
            assert key in run.stdout
        elif command == "validate" and not data:
            assert run.returncode == 0, (argv, run.stdout, run.stderr)
        elif command == "validate":
            assert run.returncode == 1, (argv, run.stdout, run.stderr)
            assert _listed(run, key, "bad_non_tensor"), run.stdout
            assert _listed(run, key, "PTD_MAX_NON_TENSOR", "declares"), run.stdout
        else:
            assert_refused(run, repr(key))
            assert any(w in run.stderr for w in ("PTD_MAX_NON_TENSOR", "declares")), run.stderr
        return
    # a pickle: listed as such (or, where zarr cannot parse its pipeline, as unreadable;
    # a consolidated document zarr cannot parse: the real node is listed, and told apart)
    may_be_unreadable = name in MAYBE_UNREADABLE
    if name == "zarr_v3_consolidated_pickle_codec":
        unreadable += ("consolidated", "uint8")
    if command == "inspect":
        assert run.returncode == 0, (argv, run.stderr)
        assert _listed(run, key, "pickled", *(unreadable if may_be_unreadable else ())), run.stdout
    elif command == "validate":
        assert _listed(run, key, "L011", *(unreadable if may_be_unreadable else ())), run.stdout
        if _listed(run, key, "L011"):  # a note, not a problem: the store is intact
            assert run.returncode == 0, (argv, run.stdout)
            assert "bad_non_tensor" not in run.stdout
            assert "damaged" not in run.stdout
    else:
        assert_refused(run, repr(key))
        if not may_be_unreadable or "--allow-pickle" in run.stderr:
            assert "--allow-pickle" in run.stderr, run.stderr
            assert "pickle" in run.stderr.replace("--allow-pickle", ""), run.stderr
        else:
            assert "cannot read" in run.stderr, run.stderr


@pytest.mark.parametrize("name", [a.name for a in ATTACKS])
def test_cli(name: str, tmp_path: Path) -> None:
    """Every command on the hostile store: nothing runs, refusals name the key."""
    _check_cli(by_name(name), tmp_path)


# --- the library --------------------------------------------------------------------------

_READ = textwrap.dedent(
    """
    import sys, warnings
    import ptd
    from ptd.errors import PtdError
    path, key, allow = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
    kw = {"allow_pickle": True} if allow else {}
    warnings.simplefilter("error", FutureWarning)
    try:
        if path.endswith(".zarr"):
            p = ptd.PersistentTensorDict.from_zarr(path, **kw)
        elif path.endswith(".h5"):
            p = ptd.PersistentTensorDict.from_h5(path, **kw)
        else:
            p = ptd.TensorDict.load_memmap(path, **kw)
        value = p[key]
        print("OK", repr(getattr(value, "tolist", lambda: value)()))
    except PtdError as err:
        print(type(err).__name__, str(err).replace(chr(10), " "))
    """
)


def _library(store: Path, key: str, allow: bool) -> tuple[str, str]:
    """``(outcome, message)`` of a library read of ``key`` in a process of its own (``OK`` and
    the value's repr, or the PtdError's class and message); its peak RSS is bounded too."""
    run = run_python(_READ, [str(store), key, "1" if allow else "0"])
    assert not run.hung, (key, "still running")
    assert run.returncode == 0, (run.returncode, run.stderr)
    assert run.peak_rss < PEAK_RSS, (key, run.peak_rss)
    outcome, _, message = run.stdout.strip().partition(" ")
    return outcome, message


#: what a library read of each attack's key raises (any of)
LIBRARY_OUTCOME: dict[str, set[str]] = {
    **{n: {"PickleRefusedError"} for n in PICKLE_ATTACKS},
    **{n: {"PickleRefusedError", "UnsupportedDtypeError"} for n in MAYBE_UNREADABLE},
    "zarr_v3_consolidated_pickle_codec": {
        "PickleRefusedError",
        "UnsupportedDtypeError",
        "CorruptStoreError",
        "PtdValueError",
    },
    "h5_pickle_marker": {"OK"},
    "zarr_v3_payload_declares_4gib": {"CorruptStoreError"},
    "zarr_v3_zstd_payload_declares_4gib": {"PtdMemoryError"},
    "zarr_v3_strings_declare_2_32": {"PtdMemoryError"},
    "h5_strings_declare_2_32": {"PtdMemoryError"},
}


@pytest.mark.parametrize("name", [a.name for a in ATTACKS])
def test_library_read(name: str, tmp_path: Path) -> None:
    """Reading the key with the defaults: refused (or bounded) before anything is decoded."""
    attack = by_name(name)
    store = attack.make(tmp_path)
    key = LIBRARY_KEYS[name]
    outcome, message = _library(store, key, allow=False)
    assert outcome in LIBRARY_OUTCOME[name], (outcome, message)
    if outcome != "OK":
        assert repr(key) in message, message
    if outcome == "PtdMemoryError":  # the non-tensor limit, not an allocation that failed
        assert "PTD_MAX_NON_TENSOR" in message, message
    if name == "zarr_v3_payload_declares_4gib":  # what is stored, compared with what is declared
        assert "declares 4294967296 bytes" in message, message
    if outcome == "PickleRefusedError":
        assert "allow_pickle=True" in message, message
        assert "unpickle" in message, message
    assert not (tmp_path / MARKER).exists(), f"{name}: code from the file ran"


# --- the opt-in -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(HARMLESS))
def test_allow_pickle_decodes(name: str, tmp_path: Path) -> None:
    """``allow_pickle=True`` is the one opt-in: the entry IS unpickled (a harmless payload),
    with no warning, whatever numcodecs release refuses on its own."""
    make, key, expected = HARMLESS[name]
    store = make(tmp_path)
    outcome, message = _library(store, key, allow=False)
    assert outcome == "PickleRefusedError", (outcome, message)
    outcome, message = _library(store, key, allow=True)
    assert outcome == "OK", message
    assert message == repr(expected)


@pytest.mark.parametrize("name", sorted(HARMLESS))
def test_convert_allow_pickle(name: str, tmp_path: Path) -> None:
    """``convert --allow-pickle`` decodes and re-encodes the pickle (zarr to zarr); without
    it the command refuses and leaves nothing."""
    make, key, expected = HARMLESS[name]
    store = make(tmp_path)
    out = tmp_path / "out.zarr"
    assert_refused(run_ptd(["convert", str(store), str(out)]), repr(key), "--allow-pickle")
    assert not out.exists()
    run = run_ptd(["convert", str(store), str(out), "--allow-pickle"])
    assert run.returncode == 0, run.stderr
    outcome, message = _library(out, key, allow=True)
    assert (outcome, message) == ("OK", repr(expected))
    run = run_ptd(["inspect", str(out)])
    assert _listed(run, key, "pickled"), run.stdout


# --- what the package never does ------------------------------------------------------------


def test_pickle_codecs_found_in_every_position() -> None:
    """:func:`unpickling_codecs` reads the pipeline's JSON form: a pickle step is found as a
    v2 filter or compressor and as a v3 codec, inside a sharding codec's inner or index
    pipeline too (zarr 3.1 cannot parse ``numcodecs.pickle`` yet: fakes stand for a release
    that can)."""
    from types import SimpleNamespace

    from ptd.storage.zarr.codec import unpickling_codecs

    class V3Codec:
        def __init__(self, doc: dict[str, object]) -> None:
            self.doc = doc

        def to_dict(self) -> dict[str, object]:
            return self.doc

    class V2Codec:
        def __init__(self, conf: dict[str, object]) -> None:
            self.conf = conf

        def get_config(self) -> dict[str, object]:
            return self.conf

    def v3(*docs: dict[str, object]) -> object:
        codecs = [V3Codec(d) for d in docs]
        return SimpleNamespace(metadata=SimpleNamespace(zarr_format=3, codecs=codecs))

    def v2(filters: list[dict[str, object]], compressor: dict[str, object] | None) -> object:
        md = SimpleNamespace(
            zarr_format=2,
            filters=[V2Codec(f) for f in filters] or None,
            compressor=V2Codec(compressor) if compressor else None,
        )
        return SimpleNamespace(metadata=md)

    def sharded(field: str) -> dict[str, object]:
        inner = {"codecs": [{"name": "bytes"}], "index_codecs": [{"name": "bytes"}]}
        inner[field] = [{"name": "bytes"}, {"name": "numcodecs.pickle"}]
        return {"name": "sharding_indexed", "configuration": inner}

    pickled = ("numcodecs.pickle",)
    assert unpickling_codecs(v3({"name": "bytes"}, {"name": "zstd"})) == ()
    assert unpickling_codecs(v3({"name": "numcodecs.pickle"})) == pickled
    assert unpickling_codecs(v3(sharded("codecs"))) == pickled
    assert unpickling_codecs(v3(sharded("index_codecs"))) == pickled
    assert unpickling_codecs(v3({"name": " Numcodecs.Pickle "})) == (" Numcodecs.Pickle ",)
    assert unpickling_codecs(v2([{"id": "vlen-utf8"}], None)) == ()
    assert unpickling_codecs(v2([{"id": "vlen-utf8"}, {"id": "pickle"}], None)) == ("pickle",)
    assert unpickling_codecs(v2([], {"id": "pickle", "protocol": 5})) == ("pickle",)
    assert unpickling_codecs(v2([{"id": "json2"}, {"id": "msgpack2"}], None)) == ()


#: calls that run code or load objects from bytes: (module or None for a builtin, name)
_FORBIDDEN = {
    (None, "eval"),
    (None, "exec"),
    (None, "compile"),
    (None, "__import__"),
    ("pickle", "loads"),
    ("pickle", "load"),
    ("pickle", "Unpickler"),
    ("marshal", "loads"),
    ("marshal", "load"),
    ("dill", "loads"),
    ("cloudpickle", "loads"),
    ("shelve", "open"),
}
#: the one place that may unpickle: the opt-in (allow_pickle=True) of ptd.format.payload
_ALLOWED = {("ptd/format/payload.py", "pickle", "loads")}


def _calls(tree: object) -> list[tuple[str | None, str, object]]:
    import ast

    out = []
    for node in ast.walk(tree):  # type: ignore[arg-type]
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name):
            out.append((None, f.id, node))
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            out.append((f.value.id, f.attr, node))
    return out


def test_no_code_runs_from_files_source_audit() -> None:
    """A static check of ``ptd`` and ``ptd_cli`` (their AST: comments and docstrings left
    out): no ``eval``/``exec``/``compile``/``__import__``, no unpickling (``pickle``,
    ``marshal``, ``dill``...) but the one opt-in place, no ``torch.load`` without
    ``weights_only=True``, no ``numpy.load`` with ``allow_pickle``, and modules imported by
    name only from ptd's own table. HDF5 filter plugins are loaded by h5py/HDF5 from
    ``HDF5_PLUGIN_PATH`` and hdf5plugin's own directory, never from a path a file names:
    ptd sets neither."""
    import ast

    root = Path(__file__).resolve().parents[2]
    found = []
    for package in ("ptd", "ptd_cli"):
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            text = path.read_text()
            tree = ast.parse(text)
            for module, name, node in _calls(tree):
                where = f"{rel}:{getattr(node, 'lineno', '?')}"
                keywords = {k.arg: k.value for k in getattr(node, "keywords", [])}
                if (module, name) in _FORBIDDEN and (rel, module, name) not in _ALLOWED:
                    found.append(f"{where}: {module or ''}{'.' if module else ''}{name}()")
                if (module, name) == ("torch", "load"):
                    weights = keywords.get("weights_only")
                    if not (isinstance(weights, ast.Constant) and weights.value is True):
                        found.append(f"{where}: torch.load() without weights_only=True")
                if module in ("np", "numpy") and name == "load" and "allow_pickle" in keywords:
                    found.append(f"{where}: numpy.load(allow_pickle=...)")
                if name == "import_module" and rel != "ptd/__init__.py":
                    found.append(f"{where}: importlib.import_module()")
            if "HDF5_PLUGIN_PATH" in text and "environ[" in text:
                found.append(f"{rel}: sets HDF5_PLUGIN_PATH")
    assert found == [], "\n".join(found)
    # and the one allowed unpickling is behind the opt-in
    payload = (root / "ptd/format/payload.py").read_text()
    body = payload[payload.index("def decode_payload(") :]
    assert body.index("refuse_pickle(") < body.index("pickle.loads(")


def test_convert_skip_unsupported_lists_pickles(tmp_path: Path) -> None:
    """``convert --skip-unsupported`` without ``--allow-pickle``: the pickled entry is left out
    and listed as not copied, the rest is copied, nothing is unpickled."""
    store = by_name("zarr_v3_pickled_payload").make(tmp_path)
    out = tmp_path / "out.h5"
    run = run_ptd(["convert", str(store), str(out), "--skip-unsupported"])
    assert run.returncode == 0, run.stderr
    assert "not copied: obj: key 'obj' is pickled" in run.stdout, run.stdout
    assert out.exists()
    assert not (tmp_path / MARKER).exists()
