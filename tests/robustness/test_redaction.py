"""URLs' secrets are never shown: error lines, reports (text, ``--json``, ``--format``), logs,
library errors and reports show ``http://***@host/...`` and ``X-Amz-Signature=***``.

The attacks (``attacks_redaction.py``) name a loopback port nothing listens on, so each command
fails; the success paths run against moto's S3 server on loopback, read over plain HTTP
(``http://user:password@127.0.0.1:PORT/bucket/key``: moto answers path-style requests without
checking the user-info), so every command gets to print its whole report.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import zarr

import ptd
from ptd import errors
from ptd.errors import PtdError, StoreNotFoundError
from ptd.storage.location import StoreLocation

from .attack_kit import MARKER, Attack, CliRun, assert_refused, expand, run_ptd
from .attacks_redaction import ATTACKS, PASSWORD, PRESIGNED_URL, SECRETS, SHOWN, USERINFO_URL

# aiobotocore may leave a coroutine behind when a request is cancelled (not our error to fail on)
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


def _no_secret(run: CliRun, secrets: tuple[str, ...] = SECRETS) -> None:
    for secret in secrets:
        assert secret not in run.stdout, (run.argv, secret, run.stdout)
        assert secret not in run.stderr, (run.argv, secret, run.stderr)


# --------------------------------------------------------------------------- the attacks
def _url_of(argv: tuple[str, ...]) -> str:
    return next(a for a in argv if a.startswith("http://"))


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_attack(attack: Attack, tmp_path: Path) -> None:
    store = attack.make(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    for command in attack.commands:
        argv = expand(command, store, tmp_path)
        run = run_ptd(argv, cwd=tmp_path)
        _no_secret(run)
        url = _url_of(argv)
        needle = SHOWN[USERINFO_URL if "@" in url else PRESIGNED_URL]
        needle = needle.replace("data.zarr", "out.zarr") if "out.zarr" in url else needle
        reported = "validate" in argv and ("--json" in argv or "--format" in argv)
        if reported:  # the report says the store is unreadable, naming it
            assert run.returncode == 2, (argv, run.stderr)
            assert "Traceback" not in run.stderr, run.stderr
            assert needle in run.stdout, (argv, run.stdout)
        else:
            assert_refused(run, needle)
        for watched in attack.watch(tmp_path):
            assert not watched.exists(), (argv, watched)
        assert sorted(p.name for p in tmp_path.iterdir()) == before, argv  # nothing left


# ------------------------------------------------------------------------------ the rule
@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("http://alice:pw@host/x.zarr", "http://***@host/x.zarr"),
        ("https://ghp_token@host/x.zarr", "https://***@host/x.zarr"),
        ("http://a:p@ss@host:9/x?y=1", "http://***@host:9/x?y=1"),  # an unescaped @ too
        ("s3://bucket/runs@v2/x.zarr", "s3://bucket/runs@v2/x.zarr"),  # @ in a key: kept
        (
            "gs://b/x?X-Goog-Credential=a%2Fb&X-Goog-Date=1",
            "gs://b/x?X-Goog-Credential=***&X-Goog-Date=1",
        ),
        ("https://acct.blob/c/x.h5?sv=2024&sig=abc%3D", "https://acct.blob/c/x.h5?sv=2024&sig=***"),
        ("u?access_token=t0k#frag", "u?access_token=***#frag"),
        ("x#access_token=t0k", "x#access_token=***"),
        ("(s3://b/x?Signature=zz): done", "(s3://b/x?Signature=***): done"),
        ("plain/path.h5 and shape=[4, 3]", "plain/path.h5 and shape=[4, 3]"),
        ("http://***@host/x?sig=***", "http://***@host/x?sig=***"),  # idempotent
    ],
)
def test_the_redaction_rule(text: str, shown: str) -> None:
    assert errors.redact(text) == shown


def test_library_errors_and_locations_hide_secrets() -> None:
    with pytest.raises(StoreNotFoundError) as info:
        ptd.info(USERINFO_URL)
    err = info.value
    assert PASSWORD not in str(err)
    assert PASSWORD not in repr(err)
    assert err.path is None or PASSWORD not in err.path
    assert "http://***@127.0.0.1:1/bucket/data.zarr" in str(err)
    # any ptd error, whoever builds its message
    built = PtdError(f"cannot open {PRESIGNED_URL}", path=PRESIGNED_URL)
    assert not any(s in str(built) or s in str(built.path) for s in SECRETS)
    loc = StoreLocation.parse(PRESIGNED_URL, {"key": "AKIA", "secret": "very-secret-value"})
    for shown in (str(loc), repr(loc), loc.display):
        assert not any(s in shown for s in SECRETS), shown
        assert "very-secret-value" not in shown
    assert loc.path == PRESIGNED_URL  # the location itself is used as given


def test_phase_logs_hide_secrets(caplog: pytest.LogCaptureFixture) -> None:
    from ptd.storage import cancel

    with caplog.at_level(logging.INFO, logger="ptd"), cancel.section():
        cancel.phase("planning", USERINFO_URL)
    assert "planning http://***@127.0.0.1:1/bucket/data.zarr" in caplog.text
    assert PASSWORD not in caplog.text


# ------------------------------------------------------- success paths: moto over loopback
BUCKET = "ptd-redaction"
S3_SECRET = "moto-secret-Zq81"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A zarr store (plain zarr-python) put on moto's S3 server; its HTTP URL with a password,
    and a local HDF5 copy of the same data (plain h5py)."""
    s3fs = pytest.importorskip("s3fs")
    server_mod = pytest.importorskip("moto.server")
    d = tmp_path_factory.mktemp("served")
    data = np.arange(24.0).reshape(8, 3)
    local_zarr = d / "x.zarr"
    root = zarr.open_group(local_zarr, mode="w", zarr_format=3)
    root.create_array("obs", shape=data.shape, dtype=data.dtype, chunks=(4, 3))[...] = data
    local_h5 = d / "x.h5"
    with h5py.File(local_h5, "w") as f:
        f["obs"] = data
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWS_EC2_METADATA_DISABLED", "true")
        mp.setenv("AWS_CONFIG_FILE", os.devnull)
        mp.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
        mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
        for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            mp.delenv(var, raising=False)
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        port = _free_port()
        server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        try:
            endpoint = f"http://127.0.0.1:{port}"
            fs = s3fs.S3FileSystem(endpoint_url=endpoint, key="testing", secret=S3_SECRET)
            fs.mkdir(BUCKET)
            fs.put(str(local_zarr), f"{BUCKET}/x.zarr", recursive=True)
            yield {
                "url": f"http://alice:{PASSWORD}@127.0.0.1:{port}/{BUCKET}/x.zarr",
                "shown": f"http://***@127.0.0.1:{port}/{BUCKET}/x.zarr",
                "endpoint": endpoint,
                "h5": local_h5,
                "zarr": local_zarr,
            }
        finally:
            server.stop()


def _ok(run: CliRun, codes: tuple[int, ...] = (0,)) -> CliRun:
    assert run.returncode in codes, (run.argv, run.stderr)
    _no_secret(run, (PASSWORD, S3_SECRET))
    return run


def test_reports_of_a_url_with_a_password_hide_it(served: dict[str, Any], tmp_path: Path) -> None:
    url, shown = served["url"], served["shown"]
    assert shown in _ok(run_ptd(["inspect", url])).stdout
    assert json.loads(_ok(run_ptd(["inspect", "--json", url])).stdout)["path"] == shown
    assert shown in _ok(run_ptd(["validate", url])).stdout
    doc = json.loads(_ok(run_ptd(["validate", "--json", url])).stdout)
    assert doc["reports"][0]["path"] == shown
    for fmt in ("junit", "markdown", "github"):
        report = tmp_path / f"report.{fmt}"
        run = _ok(run_ptd(["validate", "--format", fmt, url, "--report", f"{fmt}={report}"]))
        assert PASSWORD not in report.read_text()
        if fmt != "github":  # (github prints nothing for a valid store)
            assert shown in run.stdout, run.stdout
    # (over plain HTTP a zarr store cannot be listed: the two may differ, exit 1)
    run = _ok(run_ptd(["diff", url, str(served["zarr"])]), (0, 1))
    assert shown in run.stdout
    run = _ok(run_ptd(["diff", "--format", "junit", url, str(served["zarr"])]), (0, 1))
    assert shown in run.stdout
    run = _ok(run_ptd(["-v", "convert", url, str(tmp_path / "back.h5")]))
    assert shown in run.stdout  # the summary
    assert shown in run.stderr  # the phase log
    doc = json.loads(_ok(run_ptd(["convert", "--json", url, str(tmp_path / "b2.h5")])).stdout)
    assert doc["src"] == shown
    # s3:// with the secret as a storage option: never printed either
    s3 = f"s3://{BUCKET}/x.zarr"
    opts = ["-O", f"endpoint_url={served['endpoint']}", "-O", "key=testing"]
    run = _ok(run_ptd(["inspect", "--json", s3, *opts, "-O", f"secret={S3_SECRET}"]))
    assert json.loads(run.stdout)["path"] == s3


def test_library_reports_show_the_location_redacted(served: dict[str, Any], tmp_path: Path) -> None:
    url, shown = served["url"], served["shown"]
    assert ptd.info(url).path == shown
    assert ptd.validate(url).path == shown
    assert ptd.diff(url, served["zarr"]).a == shown
    result = ptd.convert(url, tmp_path / "back.zarr")
    assert result.to_dict()["src"] == shown
    assert result.src == url  # kept as given: verify_conversion reopens it
    assert ptd.verify_conversion(result).a == shown
    assert MARKER not in os.listdir(tmp_path)
