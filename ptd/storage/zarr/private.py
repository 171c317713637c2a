"""Every name ptd takes from zarr-python's private API, in one place, behind a version check.

zarr-python 3 documents ``zarr.core`` (and the numcodecs wrappers' internals) as private: a
release may rename or change them without notice. ptd needs a few of them for what the public
API does not offer — the synchronous bridge to zarr's event loop (``sync``), buffer prototypes,
``AsyncArray`` for concurrent small reads, the v3 metadata and chunk-grid classes, and each
codec's synchronous decode (``_decode_sync``) for its own parallel chunk decoder. This module
is the only one that imports them (``tools/check_imports.py`` refuses ``zarr.core`` anywhere
else), and it first checks that the installed zarr is one ptd was tested with:
:data:`~ptd.storage.zarr.version.TESTED_ZARR` is the range ``.ci/run`` tests (its oldest and newest ends), and
``pyproject.toml`` declares the same bounds. Another zarr raises
:class:`~ptd.errors.UntestedDependencyError` when a zarr store is opened (HDF5 keeps working),
unless ``PTD_UNTESTED_ZARR=1`` asks to try anyway (then it warns once).

>>> from ptd.storage.zarr.private import decode_sync
>>> from zarr.codecs import GzipCodec
>>> decode_sync(GzipCodec()) is not None
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ptd.storage.zarr.version import check_version

try:
    from zarr.codecs._v2 import V2Codec  # a v2 array's codec (compressor, filters)
    from zarr.core.array import AsyncArray
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.buffer.cpu import as_numpy_array_wrapper
    from zarr.core.chunk_grids import RegularChunkGrid
    from zarr.core.codec_pipeline import BatchedCodecPipeline
    from zarr.core.dtype import VariableLengthBytes
    from zarr.core.metadata.v3 import ArrayV3Metadata
    from zarr.core.sync import sync
except ImportError:
    check_version()  # an untested zarr that moved them: say so, not which import failed
    raise
check_version()  # a tested zarr, or PTD_UNTESTED_ZARR=1 (a warning)

# zarr's wrapper class of numcodecs' byte-to-byte codecs (lz4, bz2, zlib...): in zarr since
# 3.1.3, in numcodecs (0.14-0.16, for zarr 3.1.2) before
try:
    from zarr.codecs.numcodecs._codecs import (
        _NumcodecsBytesBytesCodec as NumcodecsBytesBytesCodec,
    )
except ImportError:
    from numcodecs.zarr3 import (  # type: ignore[attr-defined,no-redef]
        _NumcodecsBytesBytesCodec as NumcodecsBytesBytesCodec,
    )

__all__ = [
    "ArraySpec",
    "ArrayV3Metadata",
    "AsyncArray",
    "BatchedCodecPipeline",
    "NumcodecsBytesBytesCodec",
    "RegularChunkGrid",
    "V2Codec",
    "VariableLengthBytes",
    "as_numpy_array_wrapper",
    "decode_sync",
    "default_buffer_prototype",
    "sync",
]


def decode_sync(codec: Any) -> Callable[..., Any] | None:
    """A codec's synchronous decode (zarr's private ``_decode_sync``), or None without one."""
    found = getattr(codec, "_decode_sync", None)
    return found if callable(found) else None
