"""The error guard of the backends: unexpected exceptions become ptd errors.

Every method of a backend named in :data:`GUARDED` raises only ptd errors: anything else that
escapes it (h5py's ``RuntimeError``/``KeyError`` on a damaged file, zarr's ``TypeError`` on
malformed metadata, a codec's error on a corrupt chunk, ``MemoryError``, a full disk) is turned
into one naming the store and the key (see :func:`translate_error`). :func:`guard_methods` wraps
them: ``Backend`` calls it on itself (for the methods it implements for every backend) and on
each subclass (for the methods the subclass defines).
"""

from __future__ import annotations

import functools
from typing import Any

from ptd.errors import CorruptStoreError, PtdError, PtdMemoryError, StoreIOError

__all__ = ["GUARDED", "guard_methods", "guarded", "translate_error"]

#: the Backend methods whose unexpected exceptions become ptd errors
GUARDED = frozenset({
    "open", "close", "flush", "finalize", "kind", "children", "array_meta", "walk",
    "create_group", "create_array", "delete", "move", "get_attrs", "set_attrs", "read",
    "write", "write_non_tensor", "read_non_tensor", "raw_group", "create_arrays",
    "create_groups", "read_many", "string_type", "read_strings", "create_strings",
    "array_properties", "store_properties",
})  # fmt: skip
_WRITES = frozenset({
    "close", "flush", "finalize", "create_group", "create_array", "delete", "move", "set_attrs",
    "write", "write_non_tensor", "create_arrays", "create_groups", "create_strings",
})  # fmt: skip
#: errno values (and HDF5's words for them) that mean "the disk is full"
_FULL_ERRNOS = (28, 27, 122)  # ENOSPC, EFBIG, EDQUOT
_FULL_WORDS = ("No space left", "File too large", "Disk quota", "errno = 28", "errno = 27")


def translate_error(err: Exception, where: str, op: str, key: str) -> Exception:
    """The ptd error for an unexpected exception ``err`` raised by backend method ``op``."""
    detail = f"{type(err).__name__}: {err}"
    if isinstance(err, MemoryError):
        return PtdMemoryError(
            f"not enough memory to read key {key!r} of {where} ({detail}); the store may be "
            "damaged (an absurd shape)"
        )
    text = str(err)
    if (isinstance(err, OSError) and err.errno in _FULL_ERRNOS) or any(
        w in text for w in _FULL_WORDS
    ):
        return StoreIOError(f"cannot write key {key!r} of {where}: the disk is full ({detail})")
    if op == "open":
        return CorruptStoreError(f"{where} is not a readable store ({detail})")
    if op in _WRITES:
        return StoreIOError(f"cannot write key {key!r} of {where} ({detail})")
    what = (
        f"key {key!r} of {where}"
        if op in ("read", "read_non_tensor", "read_many")
        else f"the metadata of {where}" + (f" (key {key!r})" if key != "/" else "")
    )
    return CorruptStoreError(
        f"cannot read {what}: the store is damaged or not in the expected format ({detail})"
    )


def guarded(fn: Any, op: str) -> Any:
    """``fn`` (backend method ``op``) with its unexpected exceptions translated."""

    @functools.wraps(fn)
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self, *args, **kwargs)
        except (PtdError, Warning):
            raise
        except Exception as err:
            if op == "open":
                target = args[0] if args else kwargs.get("target")
                where, key = str(target), "/"
            else:
                try:
                    where = str(self.location)
                except Exception:  # noqa: BLE001 - a half-built backend
                    where = type(self).__name__
                path = args[0] if args and isinstance(args[0], tuple) else ()
                key = "/".join(map(str, path)) if path else "/"
            raise translate_error(err, where, op, key) from err

    guarded.__ptd_guarded__ = True  # type: ignore[attr-defined]
    return guarded


def guard_methods(cls: type) -> None:
    """Wrap the :data:`GUARDED` methods that ``cls`` itself defines (abstract ones are left to
    the subclasses that implement them)."""
    for attr in GUARDED:
        fn = cls.__dict__.get(attr)
        if isinstance(fn, classmethod):
            if not getattr(fn.__func__, "__isabstractmethod__", False):
                setattr(cls, attr, classmethod(guarded(fn.__func__, attr)))
        elif (
            callable(fn)
            and not getattr(fn, "__ptd_guarded__", False)
            and not getattr(fn, "__isabstractmethod__", False)
        ):
            setattr(cls, attr, guarded(fn, attr))
