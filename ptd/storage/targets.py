"""What a backend's ``open`` takes by name: a path, a PathLike or a URL, parsed once into a
:class:`~ptd.storage.location.StoreLocation` (``file://`` URLs become local paths there).

The store library's own objects (an ``h5py.File``, a ``zarr.Group``...) are told apart by each
backend before it gets here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ptd.errors import PtdTypeError, PtdValueError
from ptd.storage.location import StoreLocation

__all__ = ["EXISTS_HINT", "parse_target"]

#: the end of a StoreExistsError for mode ``"w-"``/``"x"``
EXISTS_HINT = "use mode 'w' to overwrite it or 'a' to append"


def parse_target(
    target: Any,
    storage_options: Mapping[str, Any] | None,
    *,
    format: str,
    accepted: str,
    urls: str = "URLs",
) -> StoreLocation:
    """``target`` as a StoreLocation of ``format`` (``"h5"``/``"zarr"``).

    Something that is neither a path nor a StoreLocation raises PtdTypeError saying the backend
    takes a path or ``accepted`` (its own objects); storage options with a local path raise
    PtdValueError (they only apply to ``urls``, like ``s3://...``).
    """
    if isinstance(target, StoreLocation):
        return StoreLocation.parse(target, storage_options, format=format)
    try:
        os.fspath(target)
    except TypeError:
        raise PtdTypeError(
            f"cannot open {target!r} with the {format} backend: expected a path, {accepted}"
        ) from None
    loc = StoreLocation.parse(target, format=format)
    if storage_options is None:
        return loc
    if not loc.is_remote:
        raise PtdValueError(
            f"storage_options only apply to {urls} (like 's3://...'), not to the local path "
            f"{loc.path}"
        )
    return StoreLocation.parse(loc.path, storage_options, format=format)
