"""Store URLs: telling them from paths, the fsspec filesystem behind one, one-line errors.

A *URL* is ``scheme://...``: ``s3://bucket/data.zarr``, ``gs://...``, ``memory://...``,
``file://...``. ``file://`` URLs are turned into local paths up front (:func:`normalize`), so
everything local (zip stores, atomic renames) works with them; the others are *remote*.

    >>> is_url("s3://bucket/x.zarr"), is_url("data/x.zarr"), is_remote("file:///tmp/x.h5")
    (True, False, False)
    >>> normalize("file:///tmp/x%20y.zarr")
    '/tmp/x y.zarr'

fsspec is imported only when a remote URL is used, and the filesystem's own package (s3fs,
gcsfs...) only by fsspec, for its scheme. ``storage_options`` go to that filesystem as they are
(``endpoint_url``, ``key``/``secret``, ``anon``...).

A URL may carry secrets: ``http://user:password@host/...``, a presigned S3 URL's
``X-Amz-Signature``. Wherever ptd shows a location (errors, reports, logs, warnings) it shows
:func:`display`, with those hidden by :func:`ptd.errors.redact`'s rule; the URL itself is used
as given to reach the store.

    >>> display("http://alice:secret@host/x.zarr"), display("data/x.zarr")
    ('http://***@host/x.zarr', 'data/x.zarr')
"""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import parse_qsl, unquote, urlparse

from ptd.errors import (
    PtdError,
    PtdValueError,
    RemoteAccessError,
    StoreNotFoundError,
    UnsupportedOperationError,
    redact,
)

__all__ = [
    "check_bucket",
    "display",
    "filesystem",
    "is_remote",
    "is_url",
    "join",
    "normalize",
    "probe",
    "remote_error",
    "remote_nbytes",
    "scheme",
    "scrub",
    "secrets_of",
]

_URL_RE = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)://")
#: object stores whose first path component is a bucket (or container)
_BUCKET_SCHEMES = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl"})
_CREDENTIAL_HINT = (
    "pass the storage options key=... and secret=... (ptd: -O key=... -O secret=...), set "
    "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or anon=true for a public bucket"
)


def _as_str(target: Any) -> str | None:
    if isinstance(target, str):
        return target
    if isinstance(target, os.PathLike):
        try:
            return os.fsdecode(os.fspath(target))
        except TypeError:
            return None
    return None


def is_url(target: Any) -> bool:
    """True for a ``scheme://...`` string (``file://`` included)."""
    s = _as_str(target)
    return s is not None and _URL_RE.match(s) is not None


def scheme(url: str) -> str:
    """The URL's scheme in lower case (``"s3"``), or ``""`` for a path."""
    m = _URL_RE.match(url)
    return m["scheme"].lower() if m else ""


def is_remote(target: Any) -> bool:
    """True for a URL that is not ``file://`` (fsspec serves it)."""
    s = _as_str(target)
    return s is not None and is_url(s) and scheme(s) != "file"


def normalize(target: Any) -> Any:
    """A ``file://`` URL as its local path; anything else unchanged."""
    s = _as_str(target)
    if s is None or scheme(s) != "file":
        return target
    parsed = urlparse(s)
    if parsed.netloc not in ("", "localhost"):
        raise PtdValueError(f"{s}: file:// URLs must name a local path (file:///path)")
    return unquote(parsed.path) or "/"


def display(target: str) -> str:
    """``target`` as ptd shows it: a URL with its user-info and secret query values hidden
    (:func:`ptd.errors.redact`), a local path as it is."""
    return redact(target) if is_url(target) else target


#: shorter secrets are not searched for in free text (they would hide common words)
_MIN_SECRET = 4
#: a user name this long is taken for a token (``https://<token>@host``) and searched for too;
#: a shorter one is a name (``alice``), hidden in URLs only
_MIN_TOKEN_USER = 16


def secrets_of(url: str) -> list[str]:
    """The secrets ``url`` holds (its password, a user name long enough to be a token, the
    values of its secret query parameters), as written and decoded; what :func:`scrub` hides
    wherever it appears."""
    if not is_url(url):
        return []
    found: set[str] = set()
    parsed = urlparse(url)
    userinfo = parsed.netloc.rpartition("@")[0]
    if userinfo:
        user, _, password = userinfo.partition(":")
        found.update((password, unquote(password)))
        if len(user) >= _MIN_TOKEN_USER:
            found.update((user, unquote(user)))
    for name, value in parse_qsl(parsed.query, keep_blank_values=False):
        if redact(f"x://h?{name}={value}").endswith("=***"):
            found.update((value, unquote(value)))
    return sorted((s for s in found if len(s) >= _MIN_SECRET), key=len, reverse=True)


def scrub(text: str, *urls: str) -> str:
    """``text`` with every URL's secrets hidden (:func:`ptd.errors.redact`), and the secrets of
    ``urls`` hidden wherever they appear (a library may echo a URL without its scheme)."""
    text = redact(text)
    for url in urls:
        for secret in secrets_of(url):
            text = text.replace(secret, "***")
    return text


def join(url: str, *parts: str) -> str:
    return "/".join([url.rstrip("/"), *parts])


def filesystem(url: str, storage_options: dict[str, Any] | None = None) -> tuple[Any, str]:
    """``(fsspec filesystem, path in it)`` for a remote URL; a missing package (s3fs for
    ``s3://``...) or a bad option is one clear error."""
    try:
        from fsspec.core import url_to_fs
    except ImportError:  # pragma: no cover - torch depends on fsspec
        raise UnsupportedOperationError(
            f"cannot open {url}: URLs need fsspec (pip install 'ptd[remote]')"
        ) from None
    try:
        return url_to_fs(url, **dict(storage_options or {}))
    except ImportError as err:
        raise UnsupportedOperationError(
            f"cannot open {url}: {err} (pip install 'ptd[remote]' installs s3fs)"
        ) from None
    except (TypeError, ValueError) as err:
        raise PtdValueError(
            f"cannot open {url} with storage options {sorted(storage_options or {})}: {err}"
        ) from None


def remote_error(err: BaseException, url: str) -> PtdError:
    """``err`` (from fsspec, s3fs, botocore, aiohttp...) as one ptd error naming ``url``."""
    if isinstance(err, PtdError):
        return err
    name = type(err).__name__
    msg = scrub(" ".join(str(err).split()) or name, url)
    if isinstance(err, FileNotFoundError):
        return StoreNotFoundError(f"{url} does not exist ({msg})")
    if name in ("NoCredentialsError", "PartialCredentialsError", "DefaultCredentialsError"):
        return RemoteAccessError(f"no credentials to access {url} ({msg}): {_CREDENTIAL_HINT}")
    if isinstance(err, PermissionError) or name in ("ClientError", "AccessDenied"):
        return RemoteAccessError(
            f"access to {url} was refused ({msg}): check the credentials and the bucket's "
            f"permissions; {_CREDENTIAL_HINT}"
        )
    if "Endpoint" in name or "Connect" in name or isinstance(err, (ConnectionError, TimeoutError)):
        return RemoteAccessError(
            f"cannot reach the store {url} ({msg}): check the endpoint_url storage option and "
            "the network"
        )
    return RemoteAccessError(f"cannot access {url}: {name}: {msg}")


def check_bucket(fs: Any, path: str, url: str) -> None:
    """For object stores (s3, gs, az): a missing bucket is StoreNotFoundError naming it."""
    if scheme(url) not in _BUCKET_SCHEMES:
        return
    bucket = path.strip("/").split("/", 1)[0]
    if not bucket:
        return
    try:
        found = fs.exists(bucket)
    except Exception as err:  # noqa: BLE001 - translated
        raise remote_error(err, url) from None
    if not found:
        raise StoreNotFoundError(f"{url}: the bucket {bucket!r} does not exist")


def probe(
    url: str, storage_options: dict[str, Any] | None = None, *, marker: str | None = None
) -> tuple[Any, str, str | None]:
    """``(fs, path, kind)``: kind is ``"file"``, ``"dir"`` (``"marker"`` when ``marker``, a
    name such as ``zarr.json``, is found inside) or None when nothing is at ``url``.

    Credentials and connections are checked here, so their errors come out as one line
    before zarr or h5py ever see the URL.
    """
    fs, path = filesystem(url, storage_options)
    try:
        if marker is not None and fs.exists(f"{path.rstrip('/')}/{marker}"):
            return fs, path, "marker"
        if fs.isfile(path):
            return fs, path, "file"
        if fs.exists(path):
            return fs, path, "dir"
    except Exception as err:  # noqa: BLE001 - translated
        raise remote_error(err, url) from None
    return fs, path, None


def remote_nbytes(url: str, storage_options: dict[str, Any] | None = None) -> int | None:
    """Bytes stored under ``url`` (a file or a prefix), None when unknown."""
    try:
        fs, path = filesystem(url, storage_options)
        if hasattr(fs, "invalidate_cache"):
            fs.invalidate_cache(path)
        return int(fs.du(path, total=True))
    except Exception:  # noqa: BLE001 - a size is informative only
        return None
