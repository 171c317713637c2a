"""The ptd error classes.

Every error ptd raises on purpose derives from :class:`PtdError`, and also from the builtin
exception a user would catch anyway, so ``except KeyError`` keeps working::

    >>> from ptd.errors import PtdKeyError, PtdError
    >>> err = PtdKeyError("key 'a' not found in data.h5")
    >>> isinstance(err, KeyError), isinstance(err, PtdError)
    (True, True)

Messages name the file (or store), the key and what was expected.

An error whose fix is an argument carries it as an :class:`Option` among the message's
parts, and the file and key it is about as ``path`` and ``key``: ``str(err)`` spells the
option in the library's terms, and a front end renders the same parts in its own (the command
line writes ``--overwrite``), without rewriting any text::

    >>> err = StoreExistsError("out.zarr exists: pass ", Option("overwrite"), " to replace it",
    ...                        path="out.zarr")
    >>> str(err)
    'out.zarr exists: pass overwrite=True to replace it'
    >>> err.render(lambda o: "--" + o.name)
    'out.zarr exists: pass --overwrite to replace it'
    >>> err.path, err.options
    ('out.zarr', (Option(name='overwrite', value=True),))

No message shows a URL's secrets: every text part and the ``path`` of a ptd error go through
:func:`redact`, the one rule for how a location is shown (user-info and secret-looking query
values become ``***``)::

    >>> str(StoreNotFoundError("http://alice:pw@host/x.zarr does not exist"))
    'http://***@host/x.zarr does not exist'
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

__all__ = [
    "ArgumentError",
    "BatchSizeError",
    "ClosedStoreError",
    "ConvertError",
    "CorruptStoreError",
    "GradientError",
    "Interrupted",
    "InvalidKeyError",
    "KeyTypeError",
    "KeysMismatchError",
    "LockedError",
    "NotNestedError",
    "NotSupportedError",
    "Option",
    "PickleRefusedError",
    "PrefixExistsError",
    "PtdError",
    "PtdIndexError",
    "PtdKeyError",
    "PtdMemoryError",
    "PtdTypeError",
    "PtdValueError",
    "ReadOnlyError",
    "RemoteAccessError",
    "SkippedKeyWarning",
    "StoreExistsError",
    "StoreIOError",
    "StoreLimitError",
    "StoreLockedError",
    "StoreNotFoundError",
    "UnknownBackendError",
    "UnsupportedDtypeError",
    "UnsupportedOperationError",
    "UntestedDependencyError",
    "WriterStateWarning",
    "redact",
]

# ----------------------------------------------------------------------- showing locations
#: the user-info of a URL in a text: ``scheme://`` then everything up to the last ``@`` before
#: the path, query or fragment (or a blank, a quote, ``<``, ``>``, ``\\``)
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://)[^/?#\s'\"<>\\]*@")
#: a query (or fragment) parameter in a text: ``?``, ``&``, ``;`` or ``#``, a name, ``=`` and its value
_PARAM = re.compile(r"([?&;#])([^=?&;#\s'\"<>\\]+)=([^&;#\s'\"<>\\]+)")
#: query parameter names whose value is a secret, as parts of the name in lower case with
#: ``-``, ``_`` and ``.`` removed: AWS (``X-Amz-Signature``, ``X-Amz-Credential``,
#: ``X-Amz-Security-Token``, ``AWSAccessKeyId``, ``Signature``), GCS (``X-Goog-Signature``,
#: ``X-Goog-Credential``), Azure SAS (``sig``), OAuth/API (``access_token``, ``api_key``,
#: ``auth``), and plain ``password``/``secret``
_SECRET_PARAM_PARTS = ("sig", "token", "credential", "secret", "password", "passwd", "pwd",
                       "key", "auth", "session")  # fmt: skip
#: what replaces a secret
HIDDEN = "***"


def _secret_param(name: str) -> bool:
    flat = unquote(name).lower().replace("-", "").replace("_", "").replace(".", "")
    return any(part in flat for part in _SECRET_PARAM_PARTS)


def _hide_param(m: re.Match[str]) -> str:
    sep, name, value = m.groups()
    if not _secret_param(name):
        return m.group(0)
    kept = value[len(value.rstrip(".,:)]}!")) :]  # the sentence's punctuation stays
    return f"{sep}{name}={HIDDEN}{kept}"


def redact(text: str) -> str:
    """``text`` with the secrets of every URL in it replaced by ``***``: the user-info
    (``http://alice:pw@host/x`` -> ``http://***@host/x``; the user name too, since tokens are
    often passed there) and the values of query parameters whose name says they are a
    credential (a part of the name is ``sig``, ``token``, ``credential``, ``secret``,
    ``password``, ``key``, ``auth`` or ``session``: presigned S3 and GCS URLs, Azure SAS
    tokens, ``?access_token=``), wherever such a parameter appears, even in a piece of a URL.
    Other parameters (``X-Amz-Expires``, ``versionId``) are kept: they tell why a URL fails.
    A text without ``://``, ``?`` or ``=`` is returned as it is.

    >>> redact("cannot open s3://b/x.zarr?X-Amz-Expires=60&X-Amz-Signature=ab12: expired")
    'cannot open s3://b/x.zarr?X-Amz-Expires=60&X-Amz-Signature=***: expired'
    >>> redact("https://tok@host/a.h5?sig=s3cr3t&sv=2024 and 'a.zarr?token=t0k'")
    "https://***@host/a.h5?sig=***&sv=2024 and 'a.zarr?token=***'"
    """
    if "://" in text:
        text = _USERINFO.sub(lambda m: m.group(1) + HIDDEN + "@", text)
    if "=" in text:
        text = _PARAM.sub(_hide_param, text)
    return text


@dataclass(frozen=True)
class Option:
    """An argument of a ptd function named in an error message as the fix (``name``, the
    keyword; ``value``, what to pass, or None to name the argument alone). ``str()`` is the
    library's spelling."""

    name: str
    value: Any = True

    def __str__(self) -> str:
        return self.name if self.value is None else f"{self.name}={self.value!r}"


class PtdError(Exception):
    """Root of every error that ptd raises on purpose.

    ``PtdError(message)`` or ``PtdError(part, Option(...), part, ..., path=..., key=...)``:
    the parts are joined into the message (see the module doc); ``path`` and ``key`` name the
    store and the entry the error is about, when the raiser knows them.
    """

    def __init__(self, *parts: Any, path: str | None = None, key: str | None = None) -> None:
        parts = tuple(redact(p) if isinstance(p, str) else p for p in parts)
        if isinstance(path, str):
            path = redact(path)
        if any(isinstance(p, Option) for p in parts):
            self.parts: tuple[Any, ...] = parts
            super().__init__("".join(str(p) for p in parts))
        else:
            self.parts = (parts[0],) if len(parts) == 1 else ()
            super().__init__(*parts)
        self.path = path
        self.key = key

    @property
    def options(self) -> tuple[Option, ...]:
        """The arguments the message names as the fix."""
        return tuple(p for p in self.parts if isinstance(p, Option))

    def render(self, spell: Callable[[Option], str]) -> str:
        """The message with each option spelled by ``spell`` (a front end's own words)."""
        if not self.options:
            return str(self)
        return "".join(spell(p) if isinstance(p, Option) else str(p) for p in self.parts)

    def retold(self, text: Callable[[str], str]) -> PtdError:
        """This error again with each text part passed through ``text`` (its options, path
        and key kept); itself when nothing changes."""
        parts = self.parts or self.args
        new = tuple(p if isinstance(p, Option) else text(str(p)) for p in parts)
        if new == tuple(parts):
            return self
        path = text(self.path) if self.path is not None else None
        return type(self)(*new, path=path, key=self.key)

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain.
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()


class Interrupted(KeyboardInterrupt):
    """A long job stopped at a safe point after Ctrl-C or SIGTERM (:mod:`ptd.storage.cancel`),
    its partial output removed. A ``KeyboardInterrupt``, so code that handles Ctrl-C handles
    it too.

    ``signum``: the signal that asked for it; ``phase``: what the job was doing
    (``"planning"``, ``"copying"``, ``"publishing"``, ``"reading"``, or None);
    ``left_behind``: partial outputs that could not be removed (empty when the clean-up was
    checked complete).
    """

    def __init__(self, signum: int, *, phase: str | None = None) -> None:
        super().__init__(signum)
        self.signum = int(signum)
        self.phase = phase
        self.left_behind: tuple[str, ...] = ()


class PtdKeyError(PtdError, KeyError):
    """A key is missing (or already present when it must not be)."""


class NotNestedError(PtdKeyError):
    """A nested key goes through an entry that is not a nested tensordict (``("x", "y")`` where
    ``x`` is a tensor): raised even by ``get(key, default)``, which returns the default only for
    keys that are absent."""


class PtdValueError(PtdError, ValueError):
    """A value does not fit what the store or container expects."""


class BatchSizeError(PtdValueError, RuntimeError):
    """A leaf's leading dims do not match the batch size (caught as ValueError, or as
    RuntimeError like tensordict's)."""


class PtdTypeError(PtdError, TypeError):
    """An argument or value has the wrong type."""


class InvalidKeyError(PtdKeyError, TypeError):
    """A key that is not a NestedKey (a str or a possibly nested tuple of str): KeyError as in
    tensordict, TypeError for what it is."""


class KeyTypeError(PtdTypeError, RuntimeError):
    """``obj in td`` with an ``obj`` that is not a NestedKey (tensordict raises RuntimeError)."""


class PtdIndexError(PtdError, IndexError):
    """An index is out of bounds or of a kind ptd cannot apply."""


class StoreNotFoundError(PtdError, FileNotFoundError):
    """The file or store does not exist."""


class StoreExistsError(PtdError, FileExistsError):
    """The file or store exists and the mode forbids overwriting it."""


class PrefixExistsError(StoreExistsError, RuntimeError):
    """A memmap prefix exists and may not be replaced (``existsok=False``, or a directory of
    other files): FileExistsError, or RuntimeError as tensordict raises."""


class ReadOnlyError(PtdError, PermissionError):
    """A write was attempted on a store opened read-only."""


class CorruptStoreError(PtdError, OSError):
    """The file or store cannot be read: truncated, corrupt, or not of the expected format."""


class StoreLimitError(CorruptStoreError):
    """A store goes past one of ptd's sanity limits (groups nested deeper than
    ``PTD_MAX_DEPTH``, a metadata document larger or deeper than ``PTD_MAX_JSON_BYTES`` /
    ``PTD_MAX_JSON_DEPTH``): the message names the path and the setting. A walk stops at it
    rather than skipping the node, since everything below would be refused too."""


class UnsupportedDtypeError(PtdTypeError):
    """A dtype that neither the store nor ptd can represent."""


class UnsupportedOperationError(PtdError, RuntimeError):
    """An operation a file-backed tensordict cannot do (the message names the fix)."""


class LockedError(UnsupportedOperationError):
    """A locked tensordict was asked to add, delete or replace an entry (RuntimeError, as in
    tensordict); ``set_``/``update_`` and in-place writes still work."""


class PickleRefusedError(PtdError, RuntimeError):
    """A pickled entry was found and ``allow_pickle=False`` forbids decoding it."""


class ClosedStoreError(PtdKeyError):
    """The store was closed; reading from it is no longer possible."""


class StoreLockedError(PtdError, OSError):
    """The file is locked by another process (see the ``locking=`` option)."""


class UnknownBackendError(PtdError, NotImplementedError):
    """A backend name that ptd does not know (the reference raises NotImplementedError)."""


class UntestedDependencyError(PtdError, ImportError):
    """An installed library whose version ptd was not tested with, where ptd relies on parts
    of it that may change between releases (zarr-python's private ``zarr.core`` API)."""


class NotSupportedError(UnsupportedOperationError, NotImplementedError):
    """An operation a file-backed tensordict does not implement (NotImplementedError)."""


class GradientError(PtdError, RuntimeError):
    """A gradient operation that cannot run: nothing requires gradients, a gradient is
    missing or has the wrong shape, or the tensordict is file-backed (its leaves are read
    into new tensors and hold no autograd state). RuntimeError, as torch and tensordict."""


class ArgumentError(PtdError, ValueError, RuntimeError):
    """Arguments that contradict each other (caught as ValueError or RuntimeError)."""


class RemoteAccessError(PtdError, PermissionError):
    """A remote store (``s3://``, ``gs://``...) cannot be reached: missing or refused
    credentials, an unreachable endpoint (the message names the storage option to fix)."""


class StoreIOError(PtdError, OSError):
    """The operating system failed a read or write of the store: disk full, file too large,
    I/O error. Entries not being written are left as they were."""


class PtdMemoryError(PtdError, MemoryError):
    """A read needs more memory than this machine has (often the absurd shape of a damaged
    store); nothing was allocated."""


class ConvertError(PtdError, OSError):
    """A conversion failed while copying (the destination was left untouched)."""


class KeysMismatchError(PtdKeyError, ValueError):
    """Tensordicts to be joined (``torch.cat``) do not have the same keys."""


class SkippedKeyWarning(UserWarning):
    """A key of a store that ptd does not list or read (an HDF5 external link, a dangling soft
    link, a link cycle), named with the reason. Issued once per key and open store."""


class WriterStateWarning(UserWarning):
    """A file was opened in a state its writer left it in: an HDF5 file another process holds
    open for (SWMR) writing, or whose writer ended without closing it. The message names what
    was found (the superblock's consistency flags) and how the file was read."""
