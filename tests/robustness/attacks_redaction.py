"""Hostile locations: URLs that carry secrets (user-info, presigned query parameters) which a
careless tool echoes into its error lines, reports, JSON and logs.

Nothing listens on the loopback port named (1), so every command fails to reach the store;
what is checked is what it prints: the secrets (:data:`SECRETS`) never, the URL with them
hidden (``http://***@127.0.0.1:1/...``) always. A local HDF5 file written with plain h5py is
the other side of ``diff`` and ``convert``.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np

from .attack_kit import Attack

#: the strings that must never be printed
PASSWORD = "s3cr3tPW"
SIGNATURE = "f00dfacecafe1234"
SESSION_TOKEN = "FQoGZXIvYXdzEXAMPLETOKEN"
ACCESS_KEY_ID = "AKIAEXAMPLEKEYID"
SECRETS = (PASSWORD, SIGNATURE, SESSION_TOKEN, ACCESS_KEY_ID)

#: a loopback port nothing listens on: connections are refused at once
USERINFO_URL = f"http://alice:{PASSWORD}@127.0.0.1:1/bucket/data.zarr"
PRESIGNED_URL = (
    "http://127.0.0.1:1/bucket/data.zarr?X-Amz-Algorithm=AWS4-HMAC-SHA256"
    f"&X-Amz-Credential={ACCESS_KEY_ID}%2F20240101%2Fus-east-1%2Fs3%2Faws4_request"
    f"&X-Amz-Expires=3600&X-Amz-Security-Token={SESSION_TOKEN}&X-Amz-Signature={SIGNATURE}"
)
#: what each URL must be shown as (a prefix of it)
SHOWN = {
    USERINFO_URL: "http://***@127.0.0.1:1/bucket/data.zarr",
    PRESIGNED_URL: "X-Amz-Signature=***",
}


def _local(directory: Path) -> Path:
    """A small valid HDF5 store (plain h5py): the local side of diff and convert."""
    path = directory / "local.h5"
    with h5py.File(path, "w") as f:
        f["obs"] = np.arange(12.0).reshape(4, 3)
    return path


def _commands(url: str) -> tuple[tuple[str, ...], ...]:
    return (
        ("inspect", url),
        ("inspect", "--json", url),
        ("-v", "validate", url),
        ("validate", "--format", "junit", url),
        ("validate", "--format", "github", url),
        ("validate", "--format", "markdown", url),
        ("validate", "--json", url),
        ("diff", "{store}", url),
        ("diff", "--format", "junit", url, "{store}"),
        ("-v", "convert", url, "{out_h5}"),
        ("convert", "--json", "{store}", url.replace("data.zarr", "out.zarr")),
        ("memmap", url, "{out}"),
    )


ATTACKS: list[Attack] = [
    Attack("url-userinfo-password", _local, _commands(USERINFO_URL)),
    Attack("url-presigned-query", _local, _commands(PRESIGNED_URL)),
]
