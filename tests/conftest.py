"""Shared fixtures: one ``backend`` fixture parametrized over h5 and zarr, a fresh store path
with the right suffix, and a factory for a small sample PersistentTensorDict."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import zarr.errors


def pytest_configure(config: pytest.Config) -> None:
    """zarr's own warnings about its experimental features are not failures: ignore them by
    class where this zarr has the classes, else every UserWarning zarr issues."""
    if hasattr(zarr.errors, "ZarrUserWarning"):
        config.addinivalue_line("filterwarnings", "ignore::zarr.errors.ZarrUserWarning")
        config.addinivalue_line(
            "filterwarnings", "ignore::zarr.errors.UnstableSpecificationWarning"
        )
    else:
        config.addinivalue_line("filterwarnings", "ignore::UserWarning:zarr")
    # numcodecs' own zarr 3 wrappers (what zarr < 3.1.3 uses) say the same of themselves
    config.addinivalue_line(
        "filterwarnings", "ignore:Numcodecs codecs are not in the Zarr version 3:UserWarning"
    )


BACKEND_NAMES = ("h5", "zarr")
SUFFIX = {"h5": ".h5", "zarr": ".zarr"}


@pytest.fixture(params=BACKEND_NAMES)
def backend(request: pytest.FixtureRequest) -> str:
    """The storage backend under test: ``"h5"`` or ``"zarr"``."""
    return request.param


@pytest.fixture
def recorder() -> Iterator[Any]:
    """A :class:`ptd.testing.recording.Recorder` watching every store opened while the test
    runs: request it *before* the fixtures that open stores (``def test(recorder,
    sample_ptd)``), since a store opened earlier is not seen."""
    from ptd.testing.recording import recording

    with recording() as rec:
        yield rec


@pytest.fixture
def store_path(tmp_path: Path, backend: str) -> Path:
    """A path that does not exist yet, with the suffix of ``backend`` (.h5 / .zarr)."""
    return tmp_path / f"data{SUFFIX[backend]}"


def sample_data(n: int = 6) -> dict[str, Any]:
    """A nested dict with batch size ``[n]``: float, int, int32 and bool leaves, a nested
    level with an extra batch dim (``n/m`` is ``[n, 3]``)."""
    return {
        "a": torch.arange(n * 4, dtype=torch.float32).reshape(n, 4),
        "b": torch.arange(n),
        "n": {
            "c": torch.arange(n * 2, dtype=torch.int32).reshape(n, 2),
            "m": {"d": (torch.arange(n * 3).reshape(n, 3) % 2).bool()},
        },
    }


@pytest.fixture
def make_ptd(tmp_path: Path, backend: str) -> Iterator[Callable[..., Any]]:
    """``make_ptd(data=None, name="sample", **from_dict_kwargs)``: write ``data`` (default
    :func:`sample_data`) with ``from_dict`` to a fresh store of ``backend``; every store made is
    closed at teardown."""
    from ptd import PersistentTensorDict

    made: list[Any] = []

    def make(data: Any = None, name: str = "sample", **kwargs: Any) -> Any:
        path = tmp_path / f"{name}{SUFFIX[backend]}"
        p = PersistentTensorDict.from_dict(
            sample_data() if data is None else data, path, backend=backend, **kwargs
        )
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()


@pytest.fixture
def sample_ptd(make_ptd: Callable[..., Any]) -> Any:
    """A writable PersistentTensorDict holding :func:`sample_data` (batch size ``[6]``)."""
    return make_ptd()


@pytest.fixture
def sample_td() -> Any:
    """An in-memory ``ptd.TensorDict`` with the same leaves as :func:`sample_data`."""
    from ptd import TensorDict

    return TensorDict(sample_data(), batch_size=[6])
