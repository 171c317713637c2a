"""Keys are data, not paths: no key reaches outside its store, on either backend.

Decided behaviour (README, "Safety"): a str key holding ``/`` is a nested key (``"a/b"`` is
``("a", "b")``, tensordict 0.15's documented behaviour on both backends); a key component that
is empty (``"/a"``, ``"a//b"``, ``"a/"``, ``""``), ``"."``, ``".."`` or holds a NUL character
raises ``PtdKeyError`` naming the key, before anything is created. Reads of such keys behave as
missing keys (``in`` is False, ``get(k, default)`` gives the default)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

import ptd
from ptd import PersistentTensorDict, TensorDict
from ptd.errors import PtdKeyError

BAD_KEYS = [
    "",
    ".",
    "..",
    "../x",
    "x/../../y",
    "/abs",
    "/",
    "a//b",
    "a/",
    "a\x00b",
    "\x00",
    ("n", ".."),
    ("n", ""),
    ("..", "x"),
    ("n", "a/../b"),
    ("n", "a\x00"),
]


def listing(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture
def store(tmp_path: Path, backend: str):
    inner = tmp_path / "inner"
    inner.mkdir()
    p = PersistentTensorDict.from_dict(
        {"x": torch.zeros(3), "n": {"y": torch.ones(3)}}, inner / f"s.{backend}", backend=backend
    )
    yield p
    p.close()


def test_slash_nests(store) -> None:
    store["a/b"] = torch.arange(3)
    store["n/m/c"] = torch.ones(3, 2)
    store[("q", "r/s")] = torch.zeros(3)
    keys = set(store.keys(True, True))
    assert {("a", "b"), ("n", "m", "c"), ("q", "r", "s")} <= keys
    assert torch.equal(store["a", "b"], torch.arange(3))
    assert torch.equal(store["a/b"], torch.arange(3))
    assert "a/b" in store
    assert ("a", "b") in store
    assert torch.equal(store.get("n/m/c"), torch.ones(3, 2))
    del store["a/b"]
    assert ("a", "b") not in store
    store.rename_key_("x", "z/x")
    assert torch.equal(store["z", "x"], torch.zeros(3))
    # a nested in-memory TensorDict whose keys hold "/" nests the same way
    store["t"] = TensorDict({"u/v": torch.ones(3)}, batch_size=[3])
    assert torch.equal(store["t", "u", "v"], torch.ones(3))


def test_from_dict_slash_nests(tmp_path: Path, backend: str) -> None:
    p = PersistentTensorDict.from_dict(
        {"a/b": torch.zeros(2), "c": {"d/e": torch.ones(2)}},
        tmp_path / f"x.{backend}",
        backend=backend,
    )
    assert set(p.keys(True, True)) == {("a", "b"), ("c", "d", "e")}
    p.close()


@pytest.mark.parametrize("key", BAD_KEYS, ids=repr)
def test_bad_keys_are_refused_everywhere(store, tmp_path: Path, key) -> None:
    before_fs = listing(tmp_path)
    before_keys = set(store.keys(True))
    shown = key
    writes = [
        lambda: store.__setitem__(key, torch.zeros(3)),
        lambda: store.set(key, torch.zeros(3)),
        lambda: store.update({key: torch.zeros(3)}),
        lambda: store.rename_key_("x", key),
        lambda: store.setdefault(key, torch.zeros(3)),
        lambda: store.__setitem__(key, TensorDict({"z": torch.zeros(3)}, batch_size=[3])),
    ]
    for write in writes:
        with pytest.raises(PtdKeyError) as info:
            write()
        assert repr(shown) in str(info.value) or repr(shown).strip("'") in str(info.value)
    # reads behave as a missing key
    assert key not in store
    assert store.get(key, "default") == "default"
    with pytest.raises(KeyError):
        store[key]
    with pytest.raises(KeyError):
        del store[key]
    assert set(store.keys(True)) == before_keys, "a refused key created something"
    assert listing(tmp_path) - before_fs <= {
        str(Path("inner") / p) for p in listing(tmp_path / "inner")
    }
    assert not (tmp_path / "x").exists()
    assert not (tmp_path / "abs").exists()


@pytest.mark.parametrize("key", ["..", "", "a/b", "a\x00b", "."], ids=repr)
def test_from_dict_refuses_bad_keys(tmp_path: Path, backend: str, key: str) -> None:
    path = tmp_path / f"x.{backend}"
    if key == "a/b":  # nests
        PersistentTensorDict.from_dict({key: torch.zeros(2)}, path, backend=backend).close()
        return
    with pytest.raises(PtdKeyError, match="invalid key"):
        PersistentTensorDict.from_dict({key: torch.zeros(2)}, path, backend=backend)
    with pytest.raises(PtdKeyError, match="invalid key"):  # inside a nested TensorDict too
        PersistentTensorDict.from_dict(
            TensorDict({"g": TensorDict({key: torch.zeros(2)}, [2])}, [2]), path, backend=backend
        )


@pytest.mark.parametrize("name", ["..", ".", "", "a/b", "a\x00b", "/abs"], ids=repr)
def test_backends_refuse_bad_names(tmp_path: Path, backend: str, name: str) -> None:
    """The backend layer checks too (convert and the streaming copy write through it)."""
    from ptd.storage.registry import get_backend

    be = get_backend(backend).open(str(tmp_path / f"b.{backend}"), "w")
    try:
        for call in (
            lambda: be.create_array(("g", name), shape=(2,), dtype=np.dtype("f4")),
            lambda: be.create_group((name,)),
            lambda: be.write_non_tensor((name,), "text"),
        ):
            with pytest.raises(PtdKeyError):
                call()
        be.create_array(("ok",), shape=(2,), dtype=np.dtype("f4"))
        with pytest.raises(PtdKeyError):
            be.move(("ok",), (name,))
        assert [n for n, _ in be.children(())] == ["ok"]
    finally:
        be.close()
    assert sorted(os.listdir(tmp_path)) == [f"b.{backend}"]


def test_h5_names_from_other_tools_stay_inside(tmp_path: Path) -> None:
    """HDF5 allows a link named ``..``: such a file reads (the name is a plain name inside the
    file), the entry cannot be addressed by key, convert refuses it with a ptd error naming it,
    and memmap percent-encodes it inside the directory."""
    import h5py

    path = tmp_path / "odd.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("..", data=np.arange(3))
        f.create_dataset("ok", data=np.arange(3))
    with PersistentTensorDict.from_h5(path) as p:
        assert set(p.keys()) == {"..", "ok"}
        td = p.to_tensordict()
        assert torch.equal(td[".."], torch.arange(3))
        with pytest.raises(KeyError):
            p[".."]
        p.memmap(tmp_path / "mm")
    assert sorted(os.listdir(tmp_path / "mm")) == ["%2E%2E.memmap", "meta.json", "ok.memmap"]
    with pytest.raises(ptd.errors.ConvertError, match=r"key '\.\.' cannot be stored in zarr"):
        ptd.convert(path, tmp_path / "odd.zarr")
    assert not (tmp_path / "odd.zarr").exists()
    assert sorted(os.listdir(tmp_path)) == ["mm", "odd.h5"]


def test_h5_data_outside_the_file_is_never_read(corpus, tmp_path: Path, cli) -> None:
    """External raw storage, virtual datasets and external links point at other files (a
    hostile file could name any file): listed at most, never read, nor copied by convert."""
    case = next(c for c in corpus if c.name == "h5-outside")
    secret = (case.path.parent / "outside-secret.bin").read_bytes()
    with pytest.warns(ptd.errors.SkippedKeyWarning, match="elink"):
        p = PersistentTensorDict.from_h5(case.path)
    keys = list(p.keys())
    with p:
        assert "elink" not in keys
        for key in ("ext", "vds"):
            with pytest.raises(ptd.errors.UnsupportedOperationError, match="outside the file"):
                p[key]
        with pytest.raises(ptd.errors.UnsupportedOperationError):
            p.to_tensordict()
        assert torch.equal(p["x"], torch.arange(32, dtype=torch.float32).reshape(8, 4))
    # refused by name before anything is written (skipped and listed with skip_unsupported)
    with pytest.raises(ptd.errors.ConvertError, match="'ext' keeps its data outside the file"):
        ptd.convert(case.path, tmp_path / "o.zarr")
    result = ptd.convert(case.path, tmp_path / "s.zarr", skip_unsupported=True)
    assert {"ext", "vds"} <= {i["key"] for i in result.not_copied}
    run = cli("memmap", case.path, tmp_path / "mm")
    assert run.code == 2
    assert "outside the file" in run.stderr
    for f in tmp_path.rglob("*"):
        assert not f.is_file() or secret not in f.read_bytes()
