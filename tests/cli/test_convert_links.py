"""``convert --dry-run`` shows what an HDF5 copy makes again: a soft link (with its target)
and a column of object references (file made with plain h5py)."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np


def test_dry_run_lists_the_links_and_references_a_copy_makes(tmp_path: Path, ptd_cli) -> None:
    src = tmp_path / "a.h5"
    with h5py.File(src, "w") as f:
        f["data/a"] = np.arange(6, dtype="f4")
        f.create_group("meta")
        refs = f.create_dataset("refs", (5,), dtype=h5py.ref_dtype)
        refs[0] = f["meta"].ref
        f["data/link"] = h5py.SoftLink("/meta")
    run = ptd_cli("convert", src, tmp_path / "b.h5", "--dry-run")
    assert run.code == 0
    rows = {
        line.split()[0]: " ".join(line.split()[1:])
        for line in run.stdout.splitlines()
        if line.strip()
    }
    assert rows["data/link"].startswith("link ")
    assert "soft link to /meta" in rows["data/link"]
    assert "contiguous" not in rows["data/link"]  # (no chunks or codec: no data of its own)
    assert rows["refs"].startswith("references ")
    assert not (tmp_path / "b.h5").exists()
