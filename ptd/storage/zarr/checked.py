"""zarr-python's codec pipeline with the first decode of every chunk checked and bounded.

Whatever ptd hands to zarr-python itself (zarr v2 arrays, zip and remote stores, arrays of
many small chunks read together, string arrays, the inner chunks of a shard) is decoded by
zarr's codec pipeline, whose compressors trust a chunk's header: c-blosc copies what a blosc
header says (a 16-byte "memcpyed" header claiming 64 kB leaks the process's memory into the
values), numcodecs' zstd, gzip, bz2 and lzma decode without bound. :class:`CheckedCodecPipeline`
is zarr's own :class:`BatchedCodecPipeline` whose ``decode_batch`` first undoes the chunk's
outer compressor itself with :mod:`ptd.storage.frames` -- its header checked against the
chunk's length and the size the chunk must have (exactly the chunk's bytes when that
compressor is next to the values, else a bound), the decode stopped at that size -- and hands
the result to the rest of the pipeline; a codec frames does not know goes to zarr unchanged.

:func:`install` selects it through zarr's public door (``zarr.registry.register_pipeline``
and the ``codec_pipeline.path`` setting of ``zarr.config``), once, when ptd opens a zarr store,
unless the process chose another pipeline already. A refused chunk raises
:class:`~ptd.storage.frames.FrameError` (a ValueError): the backends name the key and store.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable
from typing import Any

import numpy as np
import zarr
from zarr.registry import register_pipeline

from ptd.storage.frames import check_blosc, decode_bound, frame_decoder
from ptd.storage.zarr.decode import codec_name
from ptd.storage.zarr.private import BatchedCodecPipeline, V2Codec

__all__ = ["CheckedCodecPipeline", "install"]

_DEFAULT = "zarr.core.codec_pipeline.BatchedCodecPipeline"
_PATH = f"{__name__}.CheckedCodecPipeline"


def _v2_name(compressor: Any) -> str | None:
    name = getattr(compressor, "codec_id", None)
    if name == "lzma" and getattr(compressor, "format", 1) == 3:  # lzma.FORMAT_RAW
        return None
    return name if isinstance(name, str) and frame_decoder(name) is not None else None


def _sizes(spec: Any) -> tuple[int | None, int | None]:
    """(the chunk's decoded bytes, a bound) for a fixed-size dtype, else (None, None)."""
    try:
        native = np.dtype(spec.dtype.to_native_dtype())
    except Exception:  # noqa: BLE001 - a dtype numpy cannot hold
        return None, None
    if (native.kind in "OTV" and native.kind != "V") or native.hasobject:
        return None, None
    nbytes = int(np.prod(spec.shape, dtype=np.int64)) * native.itemsize
    return nbytes, decode_bound(nbytes)


@dataclasses.dataclass(frozen=True)
class CheckedCodecPipeline(BatchedCodecPipeline):  # type: ignore[misc]
    """zarr's batched pipeline, the outer compressor of each chunk undone by
    :mod:`ptd.storage.frames` (see the module's docstring)."""

    def _outer(self) -> tuple[str | None, bool, Any]:
        """(frames' name of the codec that decodes the stored bytes, whether its output is
        the values' bytes, the pipeline of what follows it)."""
        if self.bytes_bytes_codecs:
            outer = self.bytes_bytes_codecs[-1]
            name = codec_name(outer)
            if name is None:
                return None, False, None
            tail = dataclasses.replace(self, bytes_bytes_codecs=self.bytes_bytes_codecs[:-1])
            return name, len(self.bytes_bytes_codecs) == 1, tail
        ab = self.array_bytes_codec
        if isinstance(ab, V2Codec) and ab.compressor is not None:
            name = _v2_name(ab.compressor)
            if name is None:
                return None, False, None
            tail = dataclasses.replace(
                self, array_bytes_codec=dataclasses.replace(ab, compressor=None)
            )
            return name, not ab.filters, tail
        return None, False, None

    def _stored_spec(self, spec: Any) -> Any:
        """The spec of what the array-to-bytes codec writes: the array's chunk spec passed
        through the array-to-array codecs (an ``astype`` filter changes the dtype, so the
        decoded bytes are not the array's)."""
        for codec in self.array_array_codecs:
            spec = codec.resolve_metadata(spec)
        return spec

    async def decode_batch(self, chunk_bytes_and_specs: Iterable[tuple[Any, Any]]) -> Any:
        items = list(chunk_bytes_and_specs)
        name, adjacent, tail = self._outer()
        if name is None:
            return await super().decode_batch(items)
        decode = frame_decoder(name)
        assert decode is not None

        def undo(buf: Any, spec: Any) -> Any:
            if buf is None:
                return None
            raw = buf.as_numpy_array()
            nbytes, limit = _sizes(self._stored_spec(spec))
            if limit is None:
                if name == "blosc":
                    check_blosc(raw, None)
                return buf  # no size to bound it by (strings): zarr's own decode
            assert nbytes is not None
            out = decode(raw, nbytes if adjacent else None, nbytes if adjacent else limit)
            return spec.prototype.buffer.from_array_like(np.frombuffer(out, np.uint8))

        def undo_all() -> list[tuple[Any, Any]]:
            return [(undo(buf, spec), spec) for buf, spec in items]

        if not any(_sizes(self._stored_spec(spec))[1] is None for _, spec in items):
            decoded = await asyncio.to_thread(undo_all)
            return await tail.decode_batch(decoded)
        # some chunks have no fixed size: check what can be checked, zarr decodes them all
        for buf, spec in items:
            if buf is not None and _sizes(self._stored_spec(spec))[1] is None and name == "blosc":
                check_blosc(buf.as_numpy_array(), None)
        return await super().decode_batch(items)


register_pipeline(CheckedCodecPipeline)
_installed = False


def install() -> None:
    """Make :class:`CheckedCodecPipeline` zarr's pipeline in this process, unless another
    than zarr's default was chosen (then that one is the chooser's business)."""
    global _installed
    if _installed:
        return
    _installed = True
    if zarr.config.get("codec_pipeline.path") == _DEFAULT:
        zarr.config.set({"codec_pipeline.path": _PATH})
