"""Untrusted input: every case of the corpus (``corpus.py``) ends, in the library, in a normal
result or a ptd error, and in the CLI in exit 0 (1 for ``validate``) or a one-line error with
exit code 2: no crash, no hang, no traceback, and no code from the files ever runs."""

from __future__ import annotations

from pathlib import Path

import pytest

import ptd
from ptd.containers.memmap import export_memmap, load_memmap

from .conftest import assert_clean_exit, only_ptd_errors, read_everything
from .corpus import PWNED, Case


def _cases(corpus: list[Case], fmt: str | None = None) -> list[Case]:
    return [c for c in corpus if c.fmt != "memmap" and (fmt is None or c.fmt == fmt)]


def test_corpus_is_large_and_varied(corpus: list[Case]) -> None:
    names = {c.name.split("-")[0] + "-" + c.name.split("-")[1] for c in corpus}
    assert len(corpus) > 150
    for prefix in (
        "h5-trunc",
        "h5-super",
        "h5-chunk",
        "zarr-root",
        "zarr-arr",
        "zarr-chunk",
        "zarr-payload",
        "zarr-keys",
        "memmap-pickle",
    ):
        assert prefix in names


@pytest.mark.parametrize("fmt", ["h5", "zarr"])
def test_library_raises_only_ptd_errors(corpus: list[Case], fmt: str, tmp_path: Path) -> None:
    outcomes: dict[str, str] = {}
    for case in _cases(corpus, fmt):
        p = case.path
        other = "zarr" if fmt == "h5" else "h5"
        read = only_ptd_errors(lambda p=p: read_everything(p, fmt), f"{case.name}: read")
        if case.must_fail:
            assert read != "ok", f"{case.name}: opened and read without an error"
        ctor = only_ptd_errors(
            lambda p=p: ptd.PersistentTensorDict(
                filename=p, mode="r", backend=fmt, batch_size=[8], allow_pickle=False
            ).close(),
            f"{case.name}: PersistentTensorDict(...)",
        )
        only_ptd_errors(lambda p=p: ptd.info(p), f"{case.name}: info")
        only_ptd_errors(lambda p=p: ptd.validate(p), f"{case.name}: validate")
        conv, mm = tmp_path / f"{case.name}.{other}", tmp_path / f"{case.name}.mm"
        only_ptd_errors(lambda p=p, d=conv: ptd.convert(p, d), f"{case.name}: convert")
        only_ptd_errors(
            lambda p=p, d=mm: export_memmap(p, d, allow_pickle=False), f"{case.name}: memmap"
        )
        outcomes[case.name] = f"{read}/{ctor}"
        assert not (case.path.parent / PWNED).exists(), f"{case.name}: a pickle was executed"
    # the damage is seen: most cases fail, and no failed step left a destination behind
    assert sum(o != "ok/ok" for o in outcomes.values()) > len(outcomes) // 2
    assert not [p for p in tmp_path.iterdir() if ".ptd-tmp" in p.name]


@pytest.mark.parametrize("fmt", ["h5", "zarr"])
def test_cli_one_line_errors(corpus: list[Case], fmt: str, cli, tmp_path: Path) -> None:
    for case in _cases(corpus, fmt):
        assert_clean_exit(cli("inspect", case.path))
        assert_clean_exit(cli("inspect", case.path, "--json", "--attrs"))
        assert_clean_exit(cli("validate", case.path), ok_codes=(0, 1))
        assert_clean_exit(cli("convert", case.path, tmp_path / f"{case.name}.conv"))
        assert_clean_exit(cli("memmap", case.path, tmp_path / f"{case.name}.mm"))
        assert not (case.path.parent / PWNED).exists(), f"{case.name}: a pickle was executed"


def test_pickles_are_refused_and_never_run(corpus: list[Case], cli, tmp_path: Path) -> None:
    evil = next(c for c in corpus if c.name == "zarr-payload-pickle-evil")
    marker = evil.path.parent / PWNED
    for allow in (False,):
        p = ptd.PersistentTensorDict.from_zarr(evil.path, allow_pickle=allow)
        with pytest.raises(ptd.errors.PickleRefusedError, match="allow_pickle"):
            p["evil"]
        assert p["x"].shape == (8, 4)  # the rest of the store still reads
        p.close()
    with pytest.raises(ptd.errors.PickleRefusedError):
        ptd.convert(evil.path, tmp_path / "e.h5")
    for cmd, out in (("convert", "e.zarr"), ("memmap", "e.memmap")):
        run = cli(cmd, evil.path, tmp_path / out)
        assert_clean_exit(run)
        assert run.code == 2
        assert "--allow-pickle" in run.stderr
    mm = next(c for c in corpus if c.name == "memmap-pickle")
    with pytest.raises(ptd.errors.PickleRefusedError):
        load_memmap(mm.path)
    assert not marker.exists()


def test_keys_in_hostile_metadata_never_leave_the_store(corpus: list[Case]) -> None:
    """Consolidated metadata naming ``..``, ``../outside``, ``""``, NUL...: refused, and the
    readable store next to them (``outside``) is never read through them."""
    for case in [c for c in corpus if c.name.startswith("zarr-keys-")]:
        with pytest.raises(ptd.errors.CorruptStoreError):
            read_everything(case.path, "zarr")
        for fn in (ptd.info, ptd.validate):
            with pytest.raises(ptd.errors.CorruptStoreError):
                fn(case.path)
