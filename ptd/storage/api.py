"""The backend interface: the only thing the containers know about storage.

A :class:`Backend` is one open store (an HDF5 file or a Zarr v3 group hierarchy). Paths are
tuples of str, one component per level, relative to the backend's root group; ``()`` is the root.
Everything above ``ptd/storage/`` is written against this interface alone and never
imports h5py or zarr.

``Backend`` also holds what both implementations share, so that each keeps only what its format
does differently: the open/closed/writable state and its checks, the errors naming a key and
the store, the preamble of ``delete``/``move``, ``read``/``write`` around the
memory maps of the fast path, the error wrapping of ``read_non_tensor``, and how an array's
metadata is classified (numeric / non-tensor / unsupported). The subclasses fill in the
``_``-prefixed hooks.

Selections (``read``/``write``) are described in :mod:`ptd.storage.selection`; the
value types (:class:`ArrayMeta`...) live in :mod:`ptd.storage.meta`, the error guard in
:mod:`ptd.storage.guard`. This module re-exports them.
"""

from __future__ import annotations

import functools
import math
import warnings
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ptd.errors import (
    ClosedStoreError,
    PtdError,
    PtdKeyError,
    PtdValueError,
    ReadOnlyError,
    SkippedKeyWarning,
)
from ptd.format.dtypes import torch_dtype_name
from ptd.format.keynames import impossible_name
from ptd.format.names import TD_STACK_ATTR
from ptd.format.payload import parse_stack_shape
from ptd.storage import cancel, remote
from ptd.storage.chunk_info import ChunkInfo
from ptd.storage.guard import GUARDED, guard_methods, translate_error
from ptd.storage.indexer import project
from ptd.storage.limits import check_depth
from ptd.storage.meta import (
    ArrayMeta,
    NewArray,
    NodeKind,
    NonTensorPayload,
    Path,
    ValueKind,
)
from ptd.storage.nontensor import check_non_tensor_read, read_estimate
from ptd.storage.properties import (
    ArrayProperties,
    Codec,
    CodecSupport,
    Encoding,
    StoreProperties,
)
from ptd.storage.selection import Selection, fit_write_value, selection_shape

if TYPE_CHECKING:
    from ptd.storage.location import OpenOptions, ReopenSpec
    from ptd.storage.read.mapped import ArrayMaps
    from ptd.storage.strings import StringType

__all__ = [
    "GUARDED",
    "MODES",
    "ArrayMeta",
    "Backend",
    "FormatPolicy",
    "NewArray",
    "NodeKind",
    "NonTensorPayload",
    "Path",
    "RowCost",
    "Selection",
    "ValueKind",
    "check_mode",
    "check_path",
    "fit_write_value",
    "random_row_cost",
    "row_nbytes",
    "selection_shape",
    "translate_error",
]

#: the open modes every backend accepts (``"x"`` == ``"w-"``)
MODES = ("r", "r+", "w", "w-", "x", "a")


def check_mode(mode: Any) -> str:
    """Return ``mode`` if it is one of :data:`MODES`, else raise PtdValueError listing them."""
    if not isinstance(mode, str) or mode not in MODES:
        raise PtdValueError(f"Invalid mode {mode!r}; must be one of {', '.join(MODES)}")
    return mode


def check_path(path: Path, location: str) -> None:
    """Keys are data, not paths: raise PtdKeyError for a component that is empty, ``"."``,
    ``".."``, or holds ``/`` or a NUL character (so that no key reaches outside its store)."""
    for part in path:
        if not isinstance(part, str) or part in ("", ".", "..") or "/" in part or "\x00" in part:
            raise PtdKeyError(
                f"invalid key {'/'.join(map(str, path))!r} for {location}: bad name {part!r} "
                "(empty names, '.', '..', '/' and NUL are refused)"
            )


# --- what a format is: its policy, asked instead of its name -------------------------------


class FormatPolicy:
    """What a format is and how ptd stores values in it, for the code above the backends:
    everything there asks the policy (``backend.policy``, ``get_backend(name).policy``, or
    :func:`ptd.storage.registry.policy` when no store library should be imported) instead of
    comparing format names. One instance per format, in its subpackage's ``policy.py``
    (``ptd/storage/h5/policy.py``...), which imports no store library.

    The flags are facts about the format (and the library ptd reads it with), each worded as
    what a caller may rely on; the methods say how a value is written in the format's terms.

    >>> from ptd.storage.registry import policy
    >>> h5, zarr = policy("h5"), policy("zarr")
    >>> h5.label, h5.suffix, h5.stores_contiguous, zarr.chunks_required, zarr.stores_shards
    ('HDF5', '.h5', True, True, True)
    """

    #: the registry name (``"h5"``), the name people know (``"HDF5"``), the suffix ptd gives
    #: a new store of this format
    name: str = ""
    label: str = ""
    suffix: str = ""

    # --- layout ------------------------------------------------------------------------------
    #: arrays can be stored unchunked, as one byte range (HDF5's contiguous layout)
    stores_contiguous: bool = False
    #: arrays can be stored in chunks (and so compressed); False: every array is one raw byte
    #: range, never chunked, filtered or compressed (a directory of raw files): a copy into
    #: the format drops chunks and codecs, and refuses a chosen compression
    stores_chunks: bool = True
    #: every array is stored in chunks, so a source's chunk shape may say nothing about how
    #: its data wants to be stored (zarr)
    chunks_required: bool = False
    #: arrays can be sharded: shards holding a grid of inner chunks, read one inner chunk at a
    #: time (a ``shards=`` creation option)
    stores_shards: bool = False
    #: uncompressed, unsharded chunks of a local store are whole files ptd reads from memory
    #: maps: a random row of one costs its own bytes (zarr)
    maps_chunk_files: bool = False
    #: the size of the store library's own per-array chunk cache when unfiltered chunks larger
    #: than it are read in place, not whole (HDF5's 1 MiB); None when there is no such rule
    in_place_chunk_bytes: int | None = None
    #: every array with a batch dim is chunked along it when ptd creates it (``from_dict``,
    #: ``convert``), as tensordict writes the format; otherwise it is stored as it comes
    chunks_along_batch: bool = False

    # --- writing -----------------------------------------------------------------------------
    #: ptd can create and write a store of this format at a URL (fsspec), not only locally
    writes_remote: bool = False
    #: several processes may write one store at once, each its own chunks (a distributed
    #: conversion); otherwise one writer holds the whole file
    concurrent_writers: bool = False
    #: a file may begin with a user block (bytes before the format's own) that a copy keeps
    keeps_userblock: bool = False
    #: an open handle of the store library cannot be used across ``fork``: a forked process
    #: reopens the store by name, and one opened for writing (or from a library object) cannot
    #: be used there at all
    handles_survive_fork: bool = True

    #: a file can be read while one writer appends to it (HDF5's SWMR: an ``swmr=`` open
    #: option)
    swmr_reading: bool = False
    #: a dataset may keep its data in other files (HDF5's virtual datasets): the
    #: ``follow_virtual=`` open option applies
    virtual_data: bool = False
    #: keyword names of the store library's own open call that ptd does not pass on: given to
    #: a constructor they are refused, naming the option, never silently ignored
    library_open_options: frozenset[str] = frozenset()
    #: keyword names a constructor accepts as array creation options (passed to the store
    #: library when an entry is created); None: not checked here (the library checks them)
    array_options: frozenset[str] | None = None

    # --- metadata ----------------------------------------------------------------------------
    #: a store may carry consolidated metadata (one document listing every node), which can go
    #: stale when another tool writes the store
    consolidated_metadata: bool = False
    #: every group and array is a metadata object of its own: listing N nodes reads N objects
    #: (a remote store pays a request each)
    object_per_node: bool = False
    #: the store library reads under one global lock: a second reader thread waits, so a
    #: streamed pass overlaps one read with the statistics of the previous one instead of
    #: reading in parallel
    serial_reads: bool = False

    # --- values ------------------------------------------------------------------------------
    #: an unmarked bytes array with dims reads as one value per element (a column), as a
    #: string array does (zarr's vlen-bytes); otherwise it is one bytes value
    bytes_columns: bool = False
    #: a list of bytes values is held only as a stack: a bytes array of the list's shape (h5)
    bytes_list_as_stack: bool = False
    #: the structured (compound) dtypes a copy can write as raw values: ``"any"`` without
    #: objects, ``"numeric"`` of plain number fields only, ``"none"``
    tables: str = "none"
    #: what a copy's summary says of tables written in this format (None: nothing)
    table_note: str | None = None

    def __repr__(self) -> str:
        return f"<FormatPolicy {self.name}>"

    def library_versions(self) -> dict[str, str]:
        """The C libraries the format's store library links and their versions (for bug
        reports: ``ptd version``), e.g. ``{"hdf5": "1.14.6"}``; the Python packages are
        reported by their distributions' metadata. Imports the store library only if it must."""
        return {}

    def codec_options(self, name: str | None, level: int) -> dict[str, Any]:
        """The creation options (``create_array(options=...)``) that compress with the codec
        ``name`` of ``convert``'s ``compression=`` names (gzip, zstd, blosc, lz4; None or
        ``"none"``: uncompressed) at ``level``."""
        raise NotImplementedError

    def chosen_steps(self, name: str | None, level: int) -> tuple[Codec, ...]:
        """:meth:`codec_options`'s codec as the pipeline steps the format writes (empty for
        none), in the neutral terms of :mod:`ptd.storage.properties`."""
        raise NotImplementedError

    def attrs_for(self, attrs: Mapping[str, Any]) -> dict[str, Any]:
        """Attribute values in the python types this format stores (the same values): JSON's
        for zarr, numpy's for HDF5 (a list of str as a vlen string array); bytes stay bytes."""
        raise NotImplementedError

    def attr_problem(self, value: Any) -> str | None:
        """Why an attribute of this format cannot hold ``value`` unchanged, or None."""
        raise NotImplementedError


# --- the access-cost model: what one random row costs -----------------------------------------


@dataclass(frozen=True)
class RowCost:
    """What reading one random row (one index along the first dim) of an array costs: the
    bytes read and decoded to return it, against the row's own bytes. The one model that
    ``ptd inspect`` (its per-row figure), the layout lint, ``convert --layout random-access``
    and ``ptd.data``'s reader all use."""

    #: bytes read (and decoded) to return one random row
    nbytes: int
    #: the row's own bytes
    row_nbytes: int

    @property
    def direct(self) -> bool:
        """A random row is read as itself (memory maps, in-place reads): nothing is gained by
        reading whole chunks and keeping them decoded."""
        return self.nbytes <= self.row_nbytes


def row_nbytes(meta: ArrayMeta) -> int:
    """Bytes of one row (one index along the first dim) of an array."""
    shape = tuple(meta.shape)
    return math.prod(shape[1:]) * meta.dtype.itemsize if shape else meta.dtype.itemsize


def random_row_cost(meta: ArrayMeta, policy: FormatPolicy, *, local: bool = True) -> RowCost | None:
    """What one random row of the tensor leaf ``meta`` costs in a store of ``policy``'s format
    (``local``: a local file or directory, where uncompressed chunk files are memory-mapped);
    None for non-tensors and 0-d or empty arrays.

    * contiguous (no chunks): the row itself (mapped, or one hyperslab read);
    * uncompressed, unsharded chunks: the row itself where the format reads such chunks in
      place (:attr:`FormatPolicy.maps_chunk_files` on a local store; chunks over
      :attr:`FormatPolicy.in_place_chunk_bytes`);
    * otherwise every chunk the row lies in, whole: one along the first dim, all of those
      across the others (a sharded array's inner chunks: its shard index read is small).

    >>> from ptd.storage.registry import policy
    >>> meta = ArrayMeta(("obs",), (1000, 64), np.dtype("f4"), ValueKind.NUMERIC, "float32",
    ...                  chunks=(100, 64), compression="gzip")
    >>> random_row_cost(meta, policy("h5")).nbytes, random_row_cost(meta, policy("h5")).row_nbytes
    (25600, 256)
    """
    shape = tuple(meta.shape)
    if meta.kind is not ValueKind.NUMERIC or not shape or 0 in shape:
        return None
    row = row_nbytes(meta)
    if meta.chunks is None:
        return RowCost(row, row)
    unit = tuple(meta.chunks)
    chunk = math.prod(unit) * meta.dtype.itemsize
    if meta.compression is None and meta.shards is None:
        if policy.maps_chunk_files and local:
            return RowCost(row, row)
        if policy.in_place_chunk_bytes is not None and chunk > policy.in_place_chunk_bytes:
            return RowCost(row, row)
    count = math.prod(-(-s // max(1, c)) for s, c in zip(shape[1:], unit[1:], strict=False))
    return RowCost(count * chunk, row)


@functools.lru_cache(maxsize=64)
def _torch_dtype_of(dt: np.dtype) -> str | None:
    return torch_dtype_name(dt)


class Backend(ABC):
    """One open store. Create with the subclass's :meth:`open`.

    Every method named in :data:`GUARDED` raises only ptd errors: anything else that escapes it
    (h5py's ``RuntimeError``/``KeyError`` on a damaged file, zarr's ``TypeError`` on malformed
    metadata, a codec's error on a corrupt chunk, ``MemoryError``, a full disk) is turned into
    one naming the store and the key (see :func:`translate_error`), whether the subclass or this
    class implements it.
    """

    #: the registry name: ``"h5"`` or ``"zarr"``
    name: str = ""
    #: what the format is and how values are stored in it (:class:`FormatPolicy`)
    policy: ClassVar[FormatPolicy] = FormatPolicy()
    #: what the store library raises for a bad read (or write) of data, reported as
    #: PtdValueError naming the key (anything else is the guard's)
    _DATA_ERRORS: tuple[type[Exception], ...] = (ValueError, TypeError, IndexError)
    _WRITE_ERRORS: tuple[type[Exception], ...] = (ValueError, TypeError)

    def __init__(self, location: str, *, writable: bool, maps: ArrayMaps | None = None) -> None:
        #: the store's description in messages (see :attr:`location`), a URL's secrets hidden
        self._location = remote.display(location)
        #: opened for writing (mode other than ``"r"``)
        self._writable = writable
        self._closed = False
        #: the fast path's memory maps (:mod:`ptd.storage.read.mapped`), or None
        self._maps = maps
        #: the reader of chunked, compressed arrays that decodes chunks in parallel through a
        #: chunk cache (:mod:`ptd.storage.read.decoded`), set by the subclass, or None
        self._chunked: Any = None
        #: keys that are links to other keys (h5 soft/extra hard links), found by listing:
        #: path -> what it links to (``"soft link to /obs"``)
        self.walk_links: dict[Path, str] = {}
        #: keys the store holds but ptd does not list (dangling or external links...), found
        #: by listing: path -> the reason
        self.walk_skipped: dict[Path, str] = {}
        #: dimensions the store states by a node that is no key (netCDF-4's scale of a
        #: dimension that is no variable, in HDF5), found by listing: the node's path -> the
        #: dimension's length (the dimension is named like the node, in the node's group)
        self.hidden_dimensions: dict[Path, int] = {}
        #: arrays whose data is outside the store (h5 virtual datasets, external storage),
        #: which ptd does not read: found when their metadata is read: path -> the files the
        #: data lies in, as the store names them
        self.data_elsewhere: dict[Path, tuple[str, ...]] = {}
        #: attributes the backend could not read (or hand over unchanged) and left out of
        #: ``get_attrs``/``array_meta``: path -> {name: reason}
        self.attrs_skipped: dict[Path, dict[str, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        guard_methods(cls)

    # --- names the format can hold (the rule: ptd.format.keynames) -----------------------------
    @classmethod
    def escaped_name(cls, name: str) -> str | None:
        """The escaped name (:mod:`ptd.format.keynames`) a node called ``name`` is stored
        under when this format cannot hold it as it is, or None; listings give originals.
        HDF5 holds every name a key can have; the zarr backend escapes some."""
        return None

    def stored_path(self, path: Path) -> Path:
        """``path`` as the store names it from its root, escaped names and all (for tools that
        read the store's own keys: file sizes)."""
        return tuple(self.escaped_name(p) or p for p in path)

    @classmethod
    def name_problem(cls, name: str, *, array: bool = False) -> str | None:
        """Why this format cannot hold a node (``array``: an array) named ``name`` at all,
        even escaped, or None. HDF5 holds names of any length; formats that keep nodes as
        files refuse names longer than file systems hold."""
        return impossible_name(name)

    # --- string arrays as types of their own (ptd.storage.strings) ---------------------
    def string_type(self, meta: ArrayMeta) -> StringType | None:
        """The kind of a string array that a conversion copies as a string array of that kind
        and shape (a foreign one, or a string stack), or None (a format without string
        arrays keeps these defaults)."""
        return None

    def read_strings(self, path: Path) -> np.ndarray:
        """The whole string array at ``path``, its shape kept (``S n`` / ``U n``, or an object
        array of str or bytes for the variable-length kinds)."""
        raise PtdValueError(f"key {'/'.join(path)!r} of {self._location} is no string array")

    def create_strings(
        self,
        path: Path,
        stype: StringType,
        data: np.ndarray,
        *,
        attrs: Mapping[str, Any] | None = None,
        chunks: Sequence[int] | None = None,
        dimension_names: tuple[str | None, ...] | None = None,
    ) -> None:
        """Create the string array at ``path`` (replacing a node) in this format's type for
        ``stype``, or its nearest with the kind recorded; ``dimension_names`` named in the
        format's own spelling."""
        raise PtdValueError(f"{self._location} cannot store string arrays")

    # --- lifecycle ---------------------------------------------------------------------------
    @classmethod
    @abstractmethod
    def open(
        cls, target: Any, mode: str = "r", options: OpenOptions | None = None, **changes: Any
    ) -> Backend:
        """Open ``target`` (a path, or the library's own file/group/store object).

        ``mode`` is one of ``r, r+, w, w-, x, a`` (``"x"`` == ``"w-"``); anything else raises
        ``PtdValueError`` listing them. A missing store in ``r``/``r+`` raises
        ``StoreNotFoundError``; an existing one with ``w-``/``x`` raises ``StoreExistsError``; a
        file that is not of this format raises ``CorruptStoreError``. ``options``: one
        :class:`~ptd.storage.location.OpenOptions` (with ``changes`` applied: ``fast_path=``,
        ``locking=``...); each backend reads the fields its format has.
        """

    def close(self) -> None:
        """Close the store. Idempotent. Afterwards every other call raises ClosedStoreError."""
        if self._closed:
            return
        try:
            self._flush_before_close()
        finally:
            self._closed = True
            if self._maps is not None:
                self._maps.close()
                self._maps = None
            if self._chunked is not None:
                self._chunked.close()
                self._chunked = None
            self._release_handles()

    def _flush_before_close(self) -> None:  # noqa: B027 - optional hook
        """:meth:`close`'s first step, while the store is still open (no-op by default)."""

    def _release_handles(self) -> None:  # noqa: B027 - optional hook
        """:meth:`close`'s last step: drop caches, close what this backend opened."""

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def writable(self) -> bool:
        return self._writable and not self.closed

    @property
    def format_version(self) -> int | None:
        """The store format's version where it has several (Zarr: 2 or 3), else None."""
        return None

    @property
    def location(self) -> str:
        """A short description naming the file or store, for error messages."""
        return self._location

    @property
    @abstractmethod
    def reopen_spec(self) -> ReopenSpec | None:
        """What it takes to reopen this store in another process, or None when the store
        cannot be reopened by name (an in-memory store, a user's h5py/zarr object)."""

    def raw_group(self, path: Path) -> Any:
        """The library's own group object at ``path`` (``h5py.Group`` / ``zarr.Group``), for
        users who need to reach past ptd (``PersistentTensorDict.file``)."""
        return self._group(path)

    # --- the property inventory (ptd.storage.properties) ------------------------------
    def stored_sizes(self, paths: Sequence[Path]) -> dict[Path, int]:
        """The bytes each array at ``paths`` occupies in the store (its chunks, encoded), for
        a summary of many arrays; an array whose size the store does not tell is left out."""
        out: dict[Path, int] = {}
        for p in paths:
            n = self.array_meta(p).stored_nbytes
            if n is not None:
                out[p] = n
        return out

    def chunk_info(self, path: Path, *, list_stored: bool = True) -> ChunkInfo:
        """What ``validate --data`` and the layout lint need of the array at ``path``'s chunks:
        its filters (installed or not), checksum and chunk shape, and with ``list_stored``
        the chunks that are stored (one pass over the chunk index). See
        :mod:`ptd.storage.chunk_info`."""
        return self._chunk_info(self._array_handle(path), list_stored)

    def array_properties(self, path: Path, meta: ArrayMeta | None = None) -> ArrayProperties:
        """Everything the store states about the array at ``path`` besides its values: codec
        pipeline in order, fill value, dimension names, resizable dims, attribute types,
        layout (``meta``, when the caller holds it, saves reading it again).

        This default knows only what :class:`ArrayMeta` says (no pipeline, no fill value);
        the format backends override it."""
        meta = meta if meta is not None else self.array_meta(path)
        return ArrayProperties(
            path=path,
            shape=tuple(meta.shape),
            dtype=meta.dtype,
            chunks=meta.chunks,
            shards=meta.shards,
            pipeline=(),
            fill_value=None,
            dimension_names=None,
            maxshape=None,
            attrs=dict(meta.attrs),
            attr_types={},
            layout="contiguous" if meta.chunks is None else "chunked",
            link=self.walk_links.get(path),
        )

    def dimension_names(
        self, path: Path, meta: ArrayMeta | None = None
    ) -> tuple[str | None, ...] | None:
        """The names of the array at ``path``'s dimensions as its format states them (None
        when no dimension is named): :meth:`array_properties`' ``dimension_names``, which a
        backend may answer without the rest of the inventory (a check of many arrays asks
        only this)."""
        return self.array_properties(path, meta).dimension_names

    def store_properties(self) -> StoreProperties:
        """What the store states about itself (the HDF5 user block, the zarr format...)."""
        return StoreProperties(format=self.name, format_version=self.format_version)

    @classmethod
    def codec_support(cls, codec: Codec) -> CodecSupport:
        """Whether this format can write the step ``codec`` (:class:`Codec`, neutral name),
        and whether its plain readers decode it without a plugin. None by default."""
        return CodecSupport.NONE

    #: whether the format keeps an array's fill value, dimension names, and that it can grow
    #: (maxshape)
    holds_fill_value: ClassVar[bool] = True
    holds_dimension_names: ClassVar[bool] = True
    holds_maxshape: ClassVar[bool] = True

    @classmethod
    def codec_available(cls, codec: Codec) -> bool:
        """Whether this process can write the step ``codec`` (a plugin the format supports
        may not be installed here). True by default."""
        return True

    @classmethod
    def codec_note(cls, codec: Codec) -> str | None:
        """What a user should know about this format writing ``codec`` (a step of another
        format's), e.g. that other implementations may not read it; None when nothing."""
        return None

    @classmethod
    def creation_options(cls, encoding: Encoding, dtype: np.dtype) -> dict[str, Any]:
        """:meth:`create_array` ``options`` that store a new array as ``encoding`` says
        (its pipeline holds only steps :meth:`codec_support` accepts). A format without
        codecs ignores it."""
        return {}

    #: whether the format holds soft links (a name standing for another path) and object
    #: references (arrays and attributes naming other nodes); a copy carries both as the
    #: paths they name (see :meth:`reference_attrs`, :meth:`read_reference_paths`)
    holds_links: ClassVar[bool] = False
    holds_references: ClassVar[bool] = False
    #: the format holds them only as the paths they name, in a convention of its own (Zarr:
    #: hdmf-zarr's), not as references its own tools follow: ``convert`` says so
    references_as_paths: ClassVar[bool] = False

    @classmethod
    def maybe_reference(cls, value: Any) -> bool:
        """Whether an attribute value, as :meth:`get_attrs` gives it, may be an object
        reference (then :meth:`reference_attrs` says): by default one that is no plain
        JSON-like value (h5py's ``Reference``)."""
        return not isinstance(value, (str, bytes, int, float, bool, list, dict, type(None)))

    def reference_attrs(self, path: Path) -> dict[str, Any]:
        """The attributes of the node at ``path`` that hold object references: name -> the
        path each names (a str; a list, nested as the attribute's shape, for an array; ``""``
        for a null reference). Empty for a format without references."""
        return {}

    def read_reference_paths(self, path: Path, selection: Selection) -> np.ndarray:
        """The paths (an object array of str, ``""`` for a null reference) of the objects
        the references at ``selection`` of the reference array at ``path`` point to."""
        raise NotImplementedError(f"{type(self).__name__} holds no references")

    def create_reference_array(
        self,
        path: Path,
        shape: tuple[int, ...],
        *,
        chunks: tuple[int, ...] | None = None,
        maxshape: tuple[int | None, ...] | None = None,
        attrs: Mapping[str, Any] | None = None,
    ) -> None:
        """Create an array of (null) object references at ``path`` (:attr:`holds_references`
        formats only), growable up to ``maxshape`` when given; :meth:`write_reference_paths`
        fills it once every node exists."""
        raise NotImplementedError(f"{type(self).__name__} holds no references")

    def write_reference_paths(
        self, path: Path, selection: Selection, paths: np.ndarray
    ) -> list[str]:
        """Write references to the objects at ``paths`` (str, ``""``: a null reference) into
        ``selection`` of the reference array at ``path``. Returns the paths the store holds
        no object at (each written as a null reference)."""
        raise NotImplementedError(f"{type(self).__name__} holds no references")

    def set_reference_attrs(self, path: Path, refs: Mapping[str, Any]) -> list[str]:
        """Set attributes of the node at ``path`` as references to the paths ``refs`` names
        (the shape :meth:`reference_attrs` returns). Returns the paths the store holds no
        object at (null references)."""
        raise NotImplementedError(f"{type(self).__name__} holds no references")

    def create_soft_link(self, path: Path, target: str) -> None:
        """Make ``path`` a soft link to ``target`` (a path in the store, as the source spelled
        it; :attr:`holds_links` formats only)."""
        raise NotImplementedError(f"{type(self).__name__} holds no links")

    #: the names of attributes through which the format states a property (HDF5's
    #: ``DIMENSION_LABELS``): part of the inventory, not user attributes to copy
    property_attrs: frozenset[str] = frozenset()

    # --- structure ---------------------------------------------------------------------------
    @abstractmethod
    def kind(self, path: Path) -> NodeKind | None:
        """GROUP, ARRAY, or None when nothing is at ``path``."""

    @abstractmethod
    def children(self, path: Path) -> list[tuple[str, NodeKind]]:
        """Direct children of the group at ``path``, in the store's order."""

    @abstractmethod
    def array_meta(self, path: Path) -> ArrayMeta:
        """Metadata of the array at ``path`` (no data read)."""

    def walk(self, path: Path = ()) -> list[tuple[Path, NodeKind, ArrayMeta | None]]:
        """Every node below ``path`` (depth first, parents before children), with array metadata.

        Backends override this with a faster single-pass walk when the store offers one.
        """
        out: list[tuple[Path, NodeKind, ArrayMeta | None]] = []
        # a stack of children lists, not recursion: a hostile store nests groups thousands
        # of levels deep; PTD_MAX_DEPTH stops it with an error naming the path
        stack = [iter(self.children(path))]
        parents = [path]
        while stack:
            item = next(stack[-1], None)
            if item is None:
                stack.pop()
                parents.pop()
                continue
            name, kind = item
            p = parents[-1] + (name,)
            if kind is NodeKind.ARRAY:
                out.append((p, kind, self.array_meta(p)))
            else:
                check_depth(p, str(self.location))
                out.append((p, kind, None))
                stack.append(iter(self.children(p)))
                parents.append(p)
        return out

    @abstractmethod
    def create_group(self, path: Path, attrs: Mapping[str, Any] | None = None) -> None:
        """Create a group (and missing parents). An existing group is kept (attrs updated)."""

    @abstractmethod
    def create_array(
        self,
        path: Path,
        *,
        shape: Sequence[int],
        dtype: np.dtype,
        data: np.ndarray | None = None,
        attrs: Mapping[str, Any] | None = None,
        chunks: Sequence[int] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        """Create a numeric array (missing parents too), optionally filled with ``data``.

        ``chunks`` is a full chunk shape (or None for the backend's default: contiguous for h5,
        one chunk for zarr). ``options`` are the user's creation kwargs
        (``compression=...`` for h5, ``compressors=...`` for zarr...), passed through.
        """

    def create_arrays(self, specs: Sequence[NewArray]) -> None:
        """Create (and fill) many arrays: :meth:`create_array` for each by default; backends
        that can create nodes concurrently override it (zarr)."""
        for spec in specs:
            self.create_array(
                spec.path,
                shape=spec.shape,
                dtype=spec.dtype,
                data=spec.data,
                attrs=spec.attrs,
                chunks=spec.chunks,
                options=spec.options,
            )

    def create_groups(self, specs: Sequence[tuple[Path, Mapping[str, Any] | None]]) -> None:
        """Create many groups ``(path, attrs)``, parents listed before their children:
        :meth:`create_group` for each by default (zarr writes them concurrently)."""
        for path, attrs in specs:
            self.create_group(path, attrs)

    def read_many(self, paths: Sequence[Path]) -> list[np.ndarray]:
        """Whole numeric arrays, one per path, as :meth:`read` returns them (backends read
        many small arrays faster than one by one)."""
        return [self.read(path, ()) for path in paths]

    def delete(self, path: Path) -> None:
        """Delete the node at ``path``; a missing node raises PtdKeyError."""
        key = self.key_str(path)
        self.check_writable(key)
        if not path:
            raise PtdValueError(f"cannot delete the root group of {self._location}")
        self._delete(path, key)

    def move(self, src: Path, dst: Path) -> None:
        """Rename a node without reading its data; ``dst`` must not exist."""
        skey, dkey = self.key_str(src), self.key_str(dst)
        self.check_writable(skey)
        check_path(dst, self._location)
        if not self._exists(src):
            raise self._not_found(src)
        if self._exists(dst):
            raise PtdKeyError(f"key {dkey!r} already present in {self._location}")
        if not src or not dst or dst[: len(src)] == src:
            raise PtdValueError(f"cannot move {skey!r} to {dkey!r} in {self._location}")
        self._move(src, dst)

    # --- attributes --------------------------------------------------------------------------
    @abstractmethod
    def get_attrs(self, path: Path) -> dict[str, Any]:
        """The node's attributes as plain python values (numpy scalars/arrays -> python/lists)."""

    @abstractmethod
    def set_attrs(self, path: Path, attrs: Mapping[str, Any]) -> None:
        """Merge ``attrs`` into the node's attributes."""

    # --- data --------------------------------------------------------------------------------
    def read(
        self, path: Path, selection: Selection = (), *, out: np.ndarray | None = None
    ) -> np.ndarray:
        """Read a numeric array (or a part of it) into a new numpy array of the stored dtype,
        or into ``out`` (of the selected shape and the stored dtype), which is returned.

        ``selection`` is anything :func:`ptd.storage.indexer.project` takes: ints, slices with
        any step, index arrays in any order with repeats, bool masks, joint index arrays
        (:class:`~ptd.storage.indexer.Joint`); the result follows the asked order. Out of range
        raises PtdValueError naming the key.

        One plan serves every engine (:mod:`ptd.storage.indexer`): a mapped array is one chunk
        whose rows are taken in the asked order, a chunked array ptd decodes has each chunk
        decoded once and its part scattered straight into the output, and an array the store
        library reads gets the indexer's library form (sorted, unique rows) put in order after.
        Which engine serves an array is the backend's business, never the caller's.

        Every job reads through here, a slab or a chunk at a time: a requested cancellation
        (:mod:`ptd.storage.cancel`) stops it at this safe point."""
        cancel.check()
        handle = self._array_handle(path)
        try:
            got: np.ndarray | None = None
            if not (not selection and self._small_whole_read(handle)):
                got = self._read_mapped(path, handle, selection, out)
                if got is None and self._chunked is not None:
                    got = self._chunked.read(path, handle, selection, out)
                if got is not None:
                    return got
            sel, post = project(selection, handle.shape).library_form()
            got = self._read(handle, sel)  # the store library's own
            if post is not None:
                got = post.apply(got)
            if out is None:
                return got
            out[...] = got
            return out
        except PtdError:
            raise  # already names the store and key (a damaged chunk...)
        except self._DATA_ERRORS as err:
            raise self._read_error(path, selection, err) from None

    def _small_whole_read(self, handle: Any) -> bool:
        """Whether the whole array of ``handle`` is small enough that the format library's
        own read beats setting up the fast path's map or chunk reader for it."""
        return False

    def write(self, path: Path, selection: Selection, value: np.ndarray) -> None:
        """Write ``value`` (already of the stored dtype and of the selected shape, or
        broadcastable to it) into a numeric array. A shape that does not fit raises
        PtdValueError naming the key (zarr must not silently cut it)."""
        key = self.key_str(path)
        self.check_writable(key)
        handle = self._array_handle(path)
        target = selection_shape(handle.shape, selection)
        value = fit_write_value(value, target, key, self._location)
        if 0 in target:
            return
        try:
            self._write(handle, selection, value)
        except self._WRITE_ERRORS as err:
            raise self._write_error(key, err) from None

    # --- non-tensor entries ------------------------------------------------------------------
    @abstractmethod
    def write_non_tensor(
        self,
        path: Path,
        value: Any,
        *,
        stack_shape: tuple[int, ...] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        """Create (replacing any existing node) a non-tensor entry in this format's convention.

        ``stack_shape`` None: one value (NonTensorData). Otherwise ``value`` is a nested list of
        that shape (NonTensorStack). Values that the format cannot hold raise PtdTypeError
        naming the key.
        """

    def read_non_tensor(
        self,
        path: Path,
        selection: Selection = (),
        *,
        allow_pickle: bool | None = None,
        as_stack: bool = False,
    ) -> NonTensorPayload:
        """Decode a non-tensor entry.

        ``selection`` applies to stacks (marked stacks, or foreign columns when ``as_stack``).
        ``as_stack``: read a foreign string/bytes column as a stack of its rows.
        ``allow_pickle``: True decodes pickles; False and None (the default, where tensordict
        0.15 decodes with a FutureWarning) raise PickleRefusedError before decoding. What the
        read would allocate is bounded first (:mod:`ptd.storage.nontensor`).
        """
        key = self.key_str(path)
        entry = self._non_tensor_entry(path)
        meta = self.array_meta(path)
        nbytes, what = read_estimate(meta, selection, payload=self._is_payload(meta.attrs))
        check_non_tensor_read(nbytes, f"key {key!r} of {self._location}", what)
        try:
            return self._decode_non_tensor(
                entry, key, selection, allow_pickle=allow_pickle, as_stack=as_stack
            )
        except self._DATA_ERRORS as err:
            if isinstance(err, PtdError):
                raise
            raise PtdValueError(f"cannot read key {key!r} of {self._location}: {err}") from None

    # --- optional capabilities ---------------------------------------------------------------
    def flush(self) -> None:  # noqa: B027 - optional hook
        """Flush buffered writes (no-op by default)."""

    def finalize(self) -> None:  # noqa: B027 - optional hook
        """Called after a bulk write (``from_dict``, convert): e.g. consolidate zarr metadata."""

    # --- what the implementations fill in ----------------------------------------------------
    @abstractmethod
    def _group(self, path: Path) -> Any:
        """The library's group at ``path``; a missing node or an array raises PtdKeyError."""

    @abstractmethod
    def _exists(self, path: Path) -> bool:
        """Whether a node is at ``path``."""

    @abstractmethod
    def _delete(self, path: Path, key: str) -> None:
        """:meth:`delete` of a non-root ``path``, in a writable store."""

    @abstractmethod
    def _move(self, src: Path, dst: Path) -> None:
        """:meth:`move`, once ``src`` exists, ``dst`` does not and is not inside ``src``."""

    @abstractmethod
    def _array_handle(self, path: Path) -> Any:
        """What :meth:`_read`/:meth:`_write` take for the numeric array at ``path`` (it has
        the array's ``shape``); a missing node or a group raises PtdKeyError."""

    @abstractmethod
    def _chunk_info(self, handle: Any, list_stored: bool) -> ChunkInfo:
        """The chunk facts of an array handle (see :meth:`chunk_info`)."""

    @abstractmethod
    def _read(self, handle: Any, selection: Selection) -> np.ndarray:
        """``handle[selection]`` through the store library (a new array)."""

    @abstractmethod
    def _write(self, handle: Any, selection: Selection, value: np.ndarray) -> None:
        """Store ``value`` (of the selected, non-empty shape) at ``handle[selection]``."""

    def _read_mapped(
        self, path: Path, handle: Any, selection: Selection, out: np.ndarray | None = None
    ) -> np.ndarray | None:
        """``handle[selection]`` from the fast path's maps (into ``out`` when given), or None
        when they cannot serve it."""
        return None if self._maps is None else self._maps.read(path, handle, selection, out)

    @abstractmethod
    def _non_tensor_entry(self, path: Path) -> Any:
        """What :meth:`_decode_non_tensor` takes for the entry at ``path`` (its metadata read
        and checked; errors here are the guard's)."""

    @abstractmethod
    def _decode_non_tensor(
        self,
        entry: Any,
        key: str,
        selection: Selection,
        *,
        allow_pickle: bool | None,
        as_stack: bool,
    ) -> NonTensorPayload:
        """:meth:`read_non_tensor` of ``entry``; the store library's :attr:`_DATA_ERRORS`
        become PtdValueError naming the key."""

    @abstractmethod
    def _value_kind(
        self, dtype: np.dtype, attrs: Mapping[str, Any]
    ) -> tuple[ValueKind, str | None]:
        """What an array of ``dtype`` with ``attrs`` holds, by this format's conventions:
        ``(NUMERIC, torch dtype name)``, ``(NON_TENSOR, non-tensor kind)`` or
        ``(UNSUPPORTED, None)`` (see :meth:`_numeric_kind` for the torch side)."""

    def _is_payload(self, attrs: Mapping[str, Any]) -> bool:
        """Whether a non-tensor's stack shape is in its encoded value rather than its array
        shape (zarr's JSON/pickle payloads); no by default."""
        return False

    # --- helpers shared by both implementations ----------------------------------------------
    def _skip(self, path: Path, reason: str) -> None:
        """Record a key the store holds that is not listed, warning the first time."""
        if path not in self.walk_skipped:
            self.walk_skipped[path] = reason
            warnings.warn(
                f"key {self.key_str(path)!r} of {self._location} is skipped: {reason}",
                SkippedKeyWarning,
                stacklevel=3,
            )

    @staticmethod
    def key_str(path: Path) -> str:
        return "/".join(path) if path else "/"

    def _check_open(self, key: str = "/") -> None:
        if self.closed:
            raise ClosedStoreError(f"cannot access key {key!r}: {self._location} is closed")

    def check_writable(self, key: str) -> None:
        self._check_open(key)
        if not self._writable:
            raise ReadOnlyError(
                f"cannot write key {key!r}: {self._location} is opened read-only (mode 'r')"
            )

    def _check_create(self, path: Path) -> str:
        """The key of a new array at ``path``, after the checks every creation makes."""
        key = self.key_str(path)
        self.check_writable(key)
        if not path:
            raise PtdValueError(f"cannot create an array at the root of {self._location}")
        check_path(path, self._location)
        return key

    def _not_found(self, path: Path) -> PtdKeyError:
        return PtdKeyError(f"key {self.key_str(path)!r} not found in {self._location}")

    def _wrong_kind(self, path: Path, found: NodeKind) -> PtdKeyError:
        """The error for a node at ``path`` that is a ``found`` where the other kind is needed."""
        what = "a group, not an array" if found is NodeKind.GROUP else "an array, not a group"
        return PtdKeyError(f"key {self.key_str(path)!r} in {self._location} is {what}")

    def _create_error(
        self, path: Path, shape: Sequence[int], dtype: Any, options: Any, err: Exception
    ) -> PtdValueError:
        return PtdValueError(
            f"cannot create key {self.key_str(path)!r} in {self._location} (shape "
            f"{list(shape)}, dtype {dtype}, options {options}): {err}"
        )

    def _read_error(self, path: Path, selection: Selection, err: Exception) -> PtdError:
        key = self.key_str(path)
        self._check_open(key)
        return PtdValueError(f"cannot read key {key!r} of {self._location} at {selection}: {err}")

    def _write_error(self, key: str, err: Exception) -> PtdError:
        self._check_open(key)
        return PtdValueError(f"cannot write key {key!r} of {self._location}: {err}")

    def _numeric_kind(
        self, dtype: np.dtype, attrs: Mapping[str, Any]
    ) -> tuple[ValueKind, str | None]:
        """``(NUMERIC, name)`` when torch has a dtype for the array
        (:func:`~ptd.format.dtypes.torch_dtype_name`), else ``(UNSUPPORTED, None)``."""
        name = torch_dtype_name(dtype, attrs) if attrs else _torch_dtype_of(dtype)
        return (ValueKind.UNSUPPORTED, None) if name is None else (ValueKind.NUMERIC, name)

    def _describe_array(
        self,
        path: Path,
        shape: tuple[int, ...],
        dtype: np.dtype,
        attrs: dict[str, Any],
        *,
        chunks: tuple[int, ...] | None,
        compression: str | None,
        stored_nbytes: int | None,
    ) -> ArrayMeta:
        """The :class:`ArrayMeta` of an array, classified by :meth:`_value_kind`.

        A non-tensor's ``__tensordict_stack__`` shape is trusted only when it is the array's
        own shape (or, for payloads, when it parses): a corrupt marker is left out here, and
        reading the entry raises."""
        kind, name = self._value_kind(dtype, attrs)
        stack_shape = None
        if kind is ValueKind.NON_TENSOR and TD_STACK_ATTR in attrs:
            stack_shape = parse_stack_shape(attrs[TD_STACK_ATTR])
            if not self._is_payload(attrs) and stack_shape != tuple(shape):
                stack_shape = None
        return ArrayMeta(
            path=path,
            shape=shape,
            dtype=dtype,
            kind=kind,
            torch_dtype=name if kind is ValueKind.NUMERIC else None,
            attrs=attrs,
            chunks=chunks,
            compression=compression,
            stored_nbytes=stored_nbytes,
            non_tensor_kind=name if kind is ValueKind.NON_TENSOR else None,
            stack_shape=stack_shape,
            unsupported=(name or f"the type {dtype}, which torch cannot represent")
            if kind is ValueKind.UNSUPPORTED
            else None,
        )


# the methods implemented here for every backend are guarded too
guard_methods(Backend)
