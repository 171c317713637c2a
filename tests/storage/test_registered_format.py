"""A format of the test's own, added as one registry entry and one module
(:mod:`ptd.testing.npy_format`, a directory of ``.npy`` files): the backend contract, then
``convert``, ``diff``, ``validate``, ``info`` and the command line take it as they take HDF5 and
Zarr. The entry is registered for each test and taken out after (no leak under xdist)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path as FsPath
from typing import Any

import numpy as np
import pytest

from ptd.storage.registry import registered
from ptd.testing.backend_contract import BackendContract
from ptd.testing.npy_format import ENTRY, MARKER, NpyDirBackend


@pytest.fixture(autouse=True)
def npy_registered() -> Iterator[None]:
    with registered(ENTRY):
        yield


class TestNpyDirBackend(BackendContract):
    backend_cls = NpyDirBackend
    backend_name = "npy"
    suffix = ".npyd"

    def compressed_options(self) -> dict[str, Any]:
        return {}  # the format compresses nothing (its policy says so)

    def make_corrupt(self, path: FsPath) -> None:
        path.mkdir()
        (path / MARKER).write_text('{"format": ')

    def write_string_columns(self, path: FsPath) -> tuple[list[Any], list[Any]]:
        np.save(path / "col.npy", np.array([b"a", b"bc", b"d"]))
        np.save(path / "vcol.npy", np.array(["x", "y", "z"]))
        return [b"a", b"bc", b"d"], ["x", "y", "z"]
