"""The ptd error classes.

Every error ptd raises on purpose derives from :class:`PtdError`, and also from the builtin
exception a user would catch anyway, so ``except KeyError`` keeps working::

    >>> from ptd.errors import PtdKeyError, PtdError
    >>> err = PtdKeyError("key 'a' not found in data.h5")
    >>> isinstance(err, KeyError), isinstance(err, PtdError)
    (True, True)

Messages name the file (or store), the key and what was expected.
"""

from __future__ import annotations

__all__ = [
    "PtdError",
    "Interrupted",
    "PtdKeyError",
    "KeysMismatchError",
    "BatchSizeError",
    "PtdValueError",
    "PtdTypeError",
    "PtdIndexError",
    "InvalidKeyError",
    "KeyTypeError",
    "LockedError",
    "StoreNotFoundError",
    "StoreExistsError",
    "ReadOnlyError",
    "CorruptStoreError",
    "UnsupportedDtypeError",
    "UnsupportedOperationError",
    "PickleRefusedError",
    "ClosedStoreError",
    "StoreLockedError",
    "UnknownBackendError",
    "RemoteAccessError",
    "StoreIOError",
    "PtdMemoryError",
    "ConvertError",
    "ArgumentError",
    "PrefixExistsError",
    "NotSupportedError",
    "GradientError",
    "SkippedKeyWarning",
]


class PtdError(Exception):
    """Root of every error that ptd raises on purpose."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain.
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()


class Interrupted(KeyboardInterrupt):
    """A long job stopped at a safe point after Ctrl-C or SIGTERM (:mod:`ptd.storage.cancel`),
    its partial output removed. ``signum``: the signal that asked for it. A
    ``KeyboardInterrupt``, so code that handles Ctrl-C handles it too."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = int(signum)


class PtdKeyError(PtdError, KeyError):
    """A key is missing (or already present when it must not be)."""


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
