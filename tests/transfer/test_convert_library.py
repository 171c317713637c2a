"""ptd.convert, ptd.validate, ptd.diff and ptd.info called as a library (the commands' tests
run them through the CLI): the results' fields, what was read, and the errors raised as ptd
error classes naming the file and the key. Stores are made with plain h5py / zarr-python."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import zarr

import ptd
from ptd.errors import PtdError, StoreExistsError, StoreNotFoundError
from ptd.testing.recording import recording

SUFFIX = {"h5": ".h5", "zarr": ".zarr"}
OTHER = {"h5": "zarr", "zarr": "h5"}
N = 64


def _plain_store(path: Path, fmt: str) -> dict[str, np.ndarray]:
    """A store another tool wrote: two arrays with a leading dim of N, one nested."""
    data = {
        "obs": np.arange(N * 3, dtype=np.float32).reshape(N, 3),
        "meta/step": np.arange(N, dtype=np.int64),
    }
    if fmt == "h5":
        with h5py.File(path, "w") as f:
            for key, value in data.items():
                f.create_dataset(key, data=value, chunks=(16,) + value.shape[1:])
    else:
        root = zarr.open_group(str(path), mode="w")
        for key, value in data.items():
            arr = root.create_array(
                key, shape=value.shape, dtype=value.dtype, chunks=(16,) + value.shape[1:]
            )
            arr[...] = value
    return data


@pytest.fixture(params=["h5", "zarr"])
def fmt(request) -> str:
    return request.param


def test_convert_result_and_reads(tmp_path: Path, fmt: str) -> None:
    src = tmp_path / f"src{SUFFIX[fmt]}"
    data = _plain_store(src, fmt)
    dst = tmp_path / f"dst{SUFFIX[OTHER[fmt]]}"
    with recording() as rec:
        result = ptd.convert(src, dst)
    assert result.src_format == fmt
    assert result.dst_format == OTHER[fmt]
    assert result.tensors == 2
    assert result.nbytes == sum(v.nbytes for v in data.values())
    assert result.not_copied == []
    assert not result.dry_run
    # every row of each array read (once) and written
    for key, value in data.items():
        assert rec.rows_read(key).tolist() == list(range(N)), key
        assert rec.bytes_read(key) == value.nbytes, key
        assert sum(c.nbytes for c in rec.writes_of(key)) == value.nbytes, key
    report = ptd.diff(src, dst)
    assert report.same, report.differences
    assert report.leaves_compared == 2


def test_convert_dry_run_reads_and_writes_nothing(tmp_path: Path, fmt: str) -> None:
    src = tmp_path / f"src{SUFFIX[fmt]}"
    _plain_store(src, fmt)
    dst = tmp_path / f"dst{SUFFIX[OTHER[fmt]]}"
    with recording() as rec:
        result = ptd.convert(src, dst, dry_run=True)
    assert result.dry_run
    assert rec.backends
    assert rec.reads() == []
    assert rec.writes() == []
    assert not dst.exists()


def test_convert_errors_name_the_store(tmp_path: Path, fmt: str) -> None:
    missing = tmp_path / f"missing{SUFFIX[fmt]}"
    with pytest.raises(StoreNotFoundError, match="missing"):
        ptd.convert(missing, tmp_path / "out")
    src = tmp_path / f"src{SUFFIX[fmt]}"
    _plain_store(src, fmt)
    dst = tmp_path / f"dst{SUFFIX[OTHER[fmt]]}"
    ptd.convert(src, dst)
    with pytest.raises(StoreExistsError, match="dst"):
        ptd.convert(src, dst)
    assert ptd.convert(src, dst, overwrite=True).overwritten


def test_convert_read_failure_names_the_key_and_leaves_nothing(tmp_path: Path, fmt: str) -> None:
    src = tmp_path / f"src{SUFFIX[fmt]}"
    _plain_store(src, fmt)
    dst = tmp_path / f"dst{SUFFIX[OTHER[fmt]]}"

    def fail(call) -> None:
        if call.op == "read" and call.key == "meta/step":
            raise OSError("bad sector")

    with recording(fault=fail), pytest.raises(PtdError, match="bad sector") as err:
        ptd.convert(src, dst)
    assert "meta/step" in str(err.value)
    assert str(src.name) in str(err.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == [src.name]


def test_validate_and_info_read_no_data(tmp_path: Path, fmt: str) -> None:
    src = tmp_path / f"src{SUFFIX[fmt]}"
    data = _plain_store(src, fmt)
    with recording() as rec:
        report = ptd.validate(src, batch_size=[N])
        info = ptd.info(src)
    assert report.valid, report.problems
    assert report.format == fmt
    assert report.leaves == 2
    assert report.batch_size == [N]
    assert not report.data_checked
    assert len(rec.backends) == 2
    assert rec.reads() == []  # metadata only
    assert sorted(e.key for e in info.entries) == sorted(["meta", *data])  # the group too


def test_validate_data_reads_every_row(tmp_path: Path, fmt: str) -> None:
    src = tmp_path / f"src{SUFFIX[fmt]}"
    data = _plain_store(src, fmt)
    with recording() as rec:
        report = ptd.validate(src, data=True)
    assert report.valid, report.problems
    assert report.data_checked
    for key in data:
        assert rec.rows_read(key).tolist() == list(range(N)), key


def test_validate_wrong_batch_size_is_a_problem_naming_the_key(tmp_path: Path, fmt: str) -> None:
    src = tmp_path / f"src{SUFFIX[fmt]}"
    _plain_store(src, fmt)
    report = ptd.validate(src, batch_size=[N + 1])
    assert not report.valid
    assert report.problems
    assert any("obs" in str(p) or "step" in str(p) for p in report.problems), report.problems


def test_diff_finds_a_changed_value_and_names_the_key(tmp_path: Path, fmt: str) -> None:
    a = tmp_path / f"a{SUFFIX[fmt]}"
    b = tmp_path / f"b{SUFFIX[fmt]}"
    _plain_store(a, fmt)
    _plain_store(b, fmt)
    if fmt == "h5":
        with h5py.File(b, "r+") as f:
            f["obs"][5, 1] = -1.0
    else:
        zarr.open_group(str(b), mode="r+")["obs"][5, 1] = -1.0
    report = ptd.diff(a, b)
    assert not report.same
    assert [d.key for d in report.differences] == ["obs"]
    with pytest.raises(StoreNotFoundError, match="nothere"):
        ptd.diff(a, tmp_path / f"nothere{SUFFIX[fmt]}")
