"""The read-only memmap directory backend under the Backend contract
(:class:`ptd.testing.backend_contract.BackendContract` with ``writable = False``): what it can
show without writing (opening, modes, corrupt and missing stores, the registry, the error
guard); every test that writes a store first skips, saying so. What it reads, on directories
that ``ptd memmap`` and tensordict 0.15 write, is tested in ``tests/cli/test_memmap_backend.py``.
"""

from __future__ import annotations

from pathlib import Path as FsPath

from ptd.storage.memmap_dir import MemmapDirBackend
from ptd.testing.backend_contract import BackendContract


class TestMemmapDirBackend(BackendContract):
    backend_cls = MemmapDirBackend
    backend_name = "memmap"
    suffix = ""  # a memmap directory has none
    writable = False

    def make_corrupt(self, path: FsPath) -> None:
        path.mkdir()
        (path / "meta.json").write_text('{"shape": [')
