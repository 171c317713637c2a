"""Fixtures of the robustness suite: the corpus of broken stores (built once per session), a
CliRunner helper, file snapshots, and ``only_ptd_errors`` (the contract every case checks)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from ptd.errors import PtdError

from .corpus import Case, build

#: seconds any single library call on a corpus case may take (a hang fails the test)
CALL_TIMEOUT = 20


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[Case]:
    return build(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(autouse=True)
def _plain_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("TERM", "dumb")
    monkeypatch.delenv("FORCE_COLOR", raising=False)


class _Hang(BaseException):
    pass


@contextlib.contextmanager
def deadline(seconds: int = CALL_TIMEOUT) -> Iterator[None]:
    """Fail (instead of hanging the suite) when the block runs longer than ``seconds``."""
    if not hasattr(signal, "SIGALRM"):  # pragma: no cover - Windows
        yield
        return

    def expired(*_: Any) -> None:
        raise _Hang(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    # pytest-timeout (timeout_method "signal") has its own alarm pending: put it back after,
    # or a later hang in the same test would never be cut off
    outer = signal.alarm(seconds)
    start = time.monotonic()
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        if outer:
            signal.alarm(max(1, outer - int(time.monotonic() - start)))


def only_ptd_errors(fn: Callable[[], Any], what: str) -> str:
    """Run ``fn``: it may succeed or raise a PtdError, nothing else, within the deadline.
    Returns ``"ok"`` or the PtdError's class name."""
    try:
        with deadline(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn()
    except PtdError as err:
        assert str(err).strip(), f"{what}: an empty message ({type(err).__name__})"
        return type(err).__name__
    except _Hang as err:
        pytest.fail(f"{what}: {err}")
    except Exception as err:  # noqa: BLE001 - what the test is about
        pytest.fail(f"{what}: raised {type(err).__module__}.{type(err).__name__}: {err}")
    return "ok"


def read_everything(path: Path, fmt: str) -> None:
    """Open ``path`` read-only (pickles refused) and read every entry, whole and by index."""
    from ptd import PersistentTensorDict

    if fmt == "h5":
        p = PersistentTensorDict.from_h5(path)
    else:
        p = PersistentTensorDict.from_zarr(path, allow_pickle=False)
    with p:
        list(p.keys(True))
        repr(p)
        p.to_tensordict()
        if p.batch_size and p.batch_size[0] > 1:
            p[0:2].to_tensordict()
            p[torch.tensor([1, 0, 1])].to_tensordict()


class Run:
    def __init__(self, result: Any) -> None:
        self.code: int = result.exit_code
        self.stdout: str = result.stdout
        self.stderr: str = result.stderr
        self.exception = result.exception

    def __repr__(self) -> str:
        return f"<Run code={self.code}\nstdout={self.stdout[-2000:]}\nstderr={self.stderr}\nexc={self.exception!r}>"


@pytest.fixture
def cli() -> Callable[..., Run]:
    from typer.testing import CliRunner

    from ptd_cli.main import app

    runner = CliRunner()

    def invoke(*args: Any) -> Run:
        with deadline(), warnings.catch_warnings():
            warnings.simplefilter("default")  # as on a user's terminal: shown, not raised
            warnings.filterwarnings("ignore", module=r"zarr\.")  # zarr's notes on its own specs
            return Run(runner.invoke(app, [str(a) for a in args]))

    return invoke


def assert_clean_exit(run: Run, ok_codes: tuple[int, ...] = (0,)) -> None:
    """A success (``ok_codes``), or exit 2 with ONE ``ptd: error:`` line on stderr, no traceback,
    no "internal error"."""
    assert "Traceback" not in run.stderr + run.stdout, run
    if run.code in ok_codes:
        return
    assert run.code == 2, run
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, run
    assert lines[0].startswith("ptd: error: "), run
    assert "internal error" not in lines[0], run
    assert isinstance(run.exception, SystemExit), run


def snapshot(path: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``path`` (or ``path`` itself): its bytes and its mtime in ns."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    return {str(p.relative_to(path.parent)): (p.read_bytes(), p.stat().st_mtime_ns) for p in files}


def python() -> list[str]:
    """The command line of this interpreter (subprocess tests)."""
    return [sys.executable, "-X", "faulthandler"]


def env_for_subprocess() -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("COLUMNS", "250")
    return env
