"""OpenOptions: one value from the constructor through pickles and reopens to Backend.open,
checked once (an unknown option is named, never swallowed)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch

from ptd import PersistentTensorDict
from ptd.errors import PtdTypeError, PtdValueError
from ptd.storage.location import OpenOptions, ReopenSpec, StoreLocation
from ptd.storage.registry import get_backend
from ptd.storage.stores import open_store, reopen


def test_of_checks_and_normalizes() -> None:
    o = OpenOptions.of(fast_path=0, chunk_cache="2MiB", storage_options={"b": 1, "a": 2})
    assert o.fast_path is False
    assert o.chunk_cache == 2 << 20
    assert o.storage_options == (("a", 2), ("b", 1))
    assert o.storage == {"a": 2, "b": 1}
    assert OpenOptions.of(o, fast_path=None) == o  # None leaves a field as it is
    with pytest.raises(PtdTypeError, match=r"unknown open option.*chunkcache"):
        OpenOptions.of(chunkcache=0)
    with pytest.raises(PtdValueError, match="chunk_cache must be"):
        OpenOptions.of(chunk_cache="lots")


@pytest.mark.parametrize("backend", ["h5", "zarr"])
def test_one_value_travels_to_the_backend_and_back(tmp_path: Path, backend: str) -> None:
    path = str(tmp_path / f"s.{backend}")
    PersistentTensorDict.from_dict({"x": torch.arange(6.0)}, path, backend=backend).close()
    opener = PersistentTensorDict.from_h5 if backend == "h5" else PersistentTensorDict.from_zarr
    p = opener(path, fast_path=False, chunk_cache="1MiB")
    spec = p._store.backend.reopen_spec
    assert isinstance(spec.options, OpenOptions)
    assert spec.options.fast_path is False
    assert spec.options.chunk_cache == 1 << 20
    again = pickle.loads(pickle.dumps(p))  # reopened from the spec, options included
    assert again._store.backend.reopen_spec.options == spec.options
    assert torch.equal(again["x"], torch.arange(6.0))
    streamed = reopen(spec.streaming())
    assert streamed.reopen_spec.options.chunk_cache == 0
    assert streamed.reopen_spec.options.fast_path is False
    streamed.close()
    again.close()
    p.close()


@pytest.mark.parametrize("backend", ["h5", "zarr"])
def test_unknown_options_are_refused_at_every_door(tmp_path: Path, backend: str) -> None:
    path = str(tmp_path / f"s.{backend}")
    with pytest.raises(PtdTypeError, match=r"unknown open option.*fastpath"):
        get_backend(backend).open(path, "w", fastpath=False)
    with pytest.raises(PtdTypeError, match=r"unknown open option.*fastpath"):
        open_store(StoreLocation.parse(path).with_format(backend), "w", fastpath=False)
    with pytest.raises(PtdTypeError, match="unknown open option"):
        ReopenSpec.make(StoreLocation.parse(path), "r", fastpath=False)
