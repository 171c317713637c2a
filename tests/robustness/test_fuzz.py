"""Property: random damage to a valid store (bytes flipped, files cut, JSON values replaced by
values of the wrong type) never gets anything but a ptd error out of the library, nor anything
but exit 0/2 with one line out of ``ptd inspect``. Fixed seeds, bounded examples."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import ptd

from .conftest import assert_clean_exit, only_ptd_errors, read_everything
from .corpus import make_base_h5, make_base_zarr

#: examples per property (CI: 30; ``PTD_FUZZ_EXAMPLES=2000`` for a longer local search)
SETTINGS = settings(
    max_examples=int(os.environ.get("PTD_FUZZ_EXAMPLES", "30")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("fuzz-base")
    return {"h5": make_base_h5(d / "base.h5"), "zarr": make_base_zarr(d / "base.zarr")}


def check(path: Path, fmt: str, cli: Any) -> None:
    only_ptd_errors(lambda: read_everything(path, fmt), f"read {path.name}")
    only_ptd_errors(lambda: ptd.info(path), f"info {path.name}")
    only_ptd_errors(lambda: ptd.validate(path), f"validate {path.name}")
    assert_clean_exit(cli("inspect", path))


def _flip(data: bytearray, edits: list[tuple[float, int]]) -> bytearray:
    for where, mask in edits:
        if data:
            data[int(where * len(data)) % len(data)] ^= mask
    return data


edits = st.lists(
    st.tuples(st.floats(0, 1, exclude_max=True), st.integers(1, 255)), min_size=1, max_size=6
)


@seed(20240611)
@SETTINGS
@given(edits=edits, cut=st.one_of(st.none(), st.floats(0, 1)))
def test_damaged_h5(bases: dict[str, Path], cli: Any, edits: list, cut: float | None) -> None:
    data = _flip(bytearray(bases["h5"].read_bytes()), edits)
    if cut is not None:
        data = data[: int(cut * len(data))]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "x.h5"
        path.write_bytes(bytes(data))
        check(path, "h5", cli)


@seed(20240612)
@SETTINGS
@given(pick=st.integers(0, 10_000), edits=edits, cut=st.one_of(st.none(), st.floats(0, 1)))
def test_damaged_zarr_bytes(
    bases: dict[str, Path], cli: Any, pick: int, edits: list, cut: float | None
) -> None:
    with tempfile.TemporaryDirectory() as d:
        store = Path(shutil.copytree(bases["zarr"], Path(d) / "x.zarr"))
        files = sorted(p for p in store.rglob("*") if p.is_file())
        target = files[pick % len(files)]
        data = _flip(bytearray(target.read_bytes()), edits)
        if cut is not None:
            data = data[: int(cut * len(data))]
        target.write_bytes(bytes(data))
        check(store, "zarr", cli)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, prefix + (i,))
    return out


def _replace(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    doc[path[0]] = _replace(doc[path[0]], path[1:], value)
    return doc


@seed(20240613)
@SETTINGS
@given(
    pick=st.integers(0, 10_000),
    where=st.integers(0, 10_000),
    value=json_values,
    drop_consolidated=st.booleans(),
)
def test_wrong_types_in_zarr_json(
    bases: dict[str, Path], cli: Any, pick: int, where: int, value: Any, drop_consolidated: bool
) -> None:
    with tempfile.TemporaryDirectory() as d:
        store = Path(shutil.copytree(bases["zarr"], Path(d) / "x.zarr"))
        metas = sorted(store.rglob("zarr.json"))
        if drop_consolidated:
            root = json.loads((store / "zarr.json").read_text())
            root.pop("consolidated_metadata", None)
            (store / "zarr.json").write_text(json.dumps(root))
        target = metas[pick % len(metas)]
        doc = json.loads(target.read_text())
        paths = _paths(doc)
        doc = _replace(doc, paths[where % len(paths)], value)
        target.write_text(json.dumps(doc))
        check(store, "zarr", cli)


# ------------------------------------------------------------------------------ mutants
#: the seeds the suite runs (``PTD_FUZZ_CASES`` / ``PTD_FUZZ_SEED0`` to widen or move them;
#: ``benchmarks/fuzz_stores.py`` runs thousands)
FUZZ_SEED0 = int(os.environ.get("PTD_FUZZ_SEED0", "0"))
FUZZ_CASES = int(os.environ.get("PTD_FUZZ_CASES", "200"))
#: seeds past that range that once broke the contract (``benchmarks/fuzz_stores.py`` found
#: them), run every time: 1539, a Zarr v2 blosc compressor whose ``cname`` is a list
REGRESSION_SEEDS = (1539,)


@pytest.mark.timeout(1800)  # only hangs make it long: each is cut off after 60 s and reported
def test_seeded_mutants_through_every_entry_point() -> None:
    """Each seed's mutant (an HDF5 file, libver earliest or latest, or a Zarr v2/v3 store,
    damaged in one way: see ``tests/robustness/fuzz/mutations.py``) goes through ``ptd
    inspect``, ``ptd validate --data``, ``ptd convert`` and ``to_tensordict()`` in a worker
    subprocess. Each must end in exit 0/1/2 with one ``ptd: error:`` line (or a PtdError),
    without hang, crash, traceback, leftovers, code run, outside data or changes to the
    store, and the values ptd returns or writes must be h5py's / zarr-python's."""
    from .fuzz.harness import run_seeds, summary, table

    seeds = sorted({*range(FUZZ_SEED0, FUZZ_SEED0 + FUZZ_CASES), *REGRESSION_SEEDS})
    outcomes = run_seeds(seeds, jobs=2, timeout=60)
    failing = [o for o in outcomes if not o.ok]
    assert not failing, (
        f"{len(failing)} of {len(outcomes)} mutants broke the contract "
        f"(outcomes: {summary(outcomes)}):\n{table(failing)}"
    )
