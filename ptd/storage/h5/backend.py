"""The HDF5 backend (h5py), on-disk compatible with tensordict 0.15's ``backend="h5"``.

Layout (see ``docs/format.md`` §1): a nested key ``("a", "b")`` is the HDF5 path
``a/b``; groups are nested tensordicts, datasets are leaves. Non-tensors follow tensordict's
conventions (vlen UTF-8 strings marked ``__tensordict_str__``, opaque bytes/numbers, stacks
marked ``__tensordict_stack__``) plus one ptd extension: values that have no HDF5 form (None,
dicts, lists of non-numbers) are stored as their JSON text in a string dataset marked
``__ptd_json__`` (tensordict reads such an entry as the ``bytes`` of that text). Nothing is ever
pickled on h5. ``bytes`` ending in NUL bytes, which numpy's ``S`` type would cut, are stored as
raw opaque bytes (``|V<n>``; tensordict reads them as ``np.void``).

Reads follow tensordict 0.15: a string that tensordict (or ptd) wrote, marked
``__tensordict_str__``, reads as ``bytes`` with tensordict's ``FutureWarning``; foreign strings
read as ``bytes`` silently; opaque values as the numpy scalar/array h5py returns. Group and
dataset attributes that are dicts are stored as JSON object text and decoded on read.

The codec of those values is :mod:`~ptd.storage.h5.codec`; opening files (local or at
a URL) is :mod:`~ptd.storage.h5.opening`; contiguous datasets are read from memory maps by
:mod:`~ptd.storage.h5.maps`. h5py is imported only by the modules of this package,
``ptd/storage/h5/``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

import h5py
import numpy as np

from ptd.errors import (
    ClosedStoreError,
    PtdError,
    PtdKeyError,
    PtdValueError,
    ReadOnlyError,
    UnsupportedOperationError,
)
from ptd.storage import spelled
from ptd.storage.api import (
    ArrayMeta,
    Backend,
    NodeKind,
    NonTensorPayload,
    Path,
    Selection,
    ValueKind,
    check_mode,
    check_path,
)
from ptd.storage.chunk_info import ChunkInfo
from ptd.storage.chunking import leading_chunks
from ptd.storage.h5 import bulk as h5_bulk
from ptd.storage.h5 import codec as h5_codec
from ptd.storage.h5 import elsewhere as h5_elsewhere
from ptd.storage.h5 import links as h5_links
from ptd.storage.h5 import plugins as h5_plugins
from ptd.storage.h5 import properties as h5_properties
from ptd.storage.h5 import refs as h5_refs
from ptd.storage.h5 import scales as h5_scales
from ptd.storage.h5.chunk_index import h5_chunk_info
from ptd.storage.h5.decode import H5Chunks
from ptd.storage.h5.maps import H5Maps
from ptd.storage.h5.opening import open_local, open_remote
from ptd.storage.h5.policy import POLICY
from ptd.storage.h5.span import read_span as _read_span
from ptd.storage.limits import check_depth
from ptd.storage.location import OpenOptions, ReopenSpec, StoreLocation
from ptd.storage.properties import (
    ArrayProperties,
    Codec,
    CodecSupport,
    Encoding,
    StoreProperties,
)
from ptd.storage.targets import parse_target

__all__ = ["H5Backend"]

#: dataset creation options that a scalar (or unchunkable) dataset cannot take
_CHUNK_OPTIONS = frozenset(
    {
        "chunks",
        "compression",
        "compression_opts",
        "shuffle",
        "fletcher32",
        "scaleoffset",
        "maxshape",
        "dcpl",
    }
)
#: reads of at least this many bytes go straight into a new array (one copy less)
_DIRECT_READ_BYTES = 1 << 20
#: a whole dataset of at most this many bytes is read by h5py alone (no map, no chunk reader)
_SMALL_WHOLE_READ = 64 << 10


class _Entry(NamedTuple):
    """A cached dataset and what reads need of it, each read of HDF5 once per dataset: its
    creation property list is fixed when the dataset is made, and ptd never resizes one."""

    ds: h5py.Dataset
    shape: tuple[int, ...]
    dtype: np.dtype
    nbytes: int
    #: the dataset's creation property list (layout, filters, fill value)
    dcpl: Any
    #: whether its layout is chunked (else no chunk reader serves it)
    chunked: bool
    #: whether its dataspace is HDF5's null one (``h5py.Empty``: no data)
    null: bool


class H5Backend(Backend):
    """One open HDF5 file (or a group inside a user's ``h5py.File``)."""

    name = "h5"
    policy = POLICY
    _DATA_ERRORS = (OSError, ValueError, TypeError, IndexError)
    _WRITE_ERRORS = (OSError, ValueError, TypeError)

    def __init__(
        self,
        root: h5py.Group,
        *,
        loc: StoreLocation | None,
        owns_file: bool,
        locking: Any = None,
        read_only: bool = False,
        fast_path: bool | None = None,
        fileobj: Any = None,
        chunk_cache: Any = None,
        swmr: bool = False,
        follow_virtual: bool = False,
    ) -> None:
        if loc is not None:
            location = loc.path
        else:
            name = root.file.filename
            location = name if root.name == "/" else f"{name}:{root.name}"
        # mode "r" stays read-only even when HDF5 shares an already writable handle
        super().__init__(
            location,
            writable=root.file.mode == "r+" and not read_only,
            # the fast path: contiguous datasets read from a memory map (h5/maps.py)
            maps=H5Maps.create(root.file, fast_path),
        )
        self._root = root
        self._loc = loc
        self._owns_file = owns_file
        self._locking = locking
        self._fast_path = fast_path
        self._chunk_cache = chunk_cache
        self._swmr = swmr
        self._follow_virtual = follow_virtual
        #: why each key of :attr:`data_elsewhere` is not read (:mod:`~ptd.storage.h5.elsewhere`)
        self._elsewhere_why: dict[Path, str] = {}
        # chunked datasets decoded in parallel through a chunk cache (h5/decode.py), mode "r"
        self._chunked = H5Chunks.create(root.file, chunk_cache)
        #: a remote file's fsspec file object, closed after h5py's file
        self._fileobj = fileobj
        self._ds_cache: dict[Path, _Entry] = {}
        #: arrays given dimension names since the last finishing step: their coordinates are
        #: made dimension scales and attached then (:mod:`ptd.storage.h5.scales`)
        self._named_dims: set[Path] = set()

    # --- lifecycle ---------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        target: Any,
        mode: str = "r",
        options: OpenOptions | None = None,
        **changes: Any,
    ) -> H5Backend:
        """Open an HDF5 file by path or URL, or wrap an open ``h5py.File``/``h5py.Group``.

        A user's file or group is used as the root (``mode`` is then ignored) and is not closed
        by :meth:`close`. ``locking`` goes to ``h5py.File``. ``fast_path``: read contiguous
        datasets from a memory map (None: on unless ``PTD_FAST_PATH=0``; see ``fast_path``).
        ``chunk_cache``: the chunk cache's budget (see ``read/cache.py``). A URL
        (``s3://...``, with ``storage_options``) is opened read-only. ``userblock_size``:
        the bytes a new file reserves at its start for another program's header. ``swmr``:
        open the file for SWMR reading (mode ``"r"``); a file whose superblock says a writer
        holds it is opened that way (or with its flags read as cleared) without being asked
        (:func:`~ptd.storage.h5.opening.open_local`). ``follow_virtual``: read virtual
        datasets whose sources lie beside the file (:mod:`~ptd.storage.h5.elsewhere`). The options
        come as one :class:`~ptd.storage.location.OpenOptions` (``changes`` applied to it).
        """
        check_mode(mode)
        o = OpenOptions.of(options, **changes)
        locking, fast_path, chunk_cache = o.locking, o.fast_path, o.chunk_cache
        storage_options, userblock_size = o.storage, o.userblock_size
        h5_plugins.load()  # blosc, zstd, lz4... filters (hdf5plugin)
        opts: dict[str, Any] = {
            "fast_path": fast_path,
            "chunk_cache": chunk_cache,
            "follow_virtual": bool(o.follow_virtual),
        }
        if isinstance(target, (h5py.File, h5py.Group)):
            if not target.id.valid:
                raise ClosedStoreError(f"the h5py object {target!r} is closed")
            return cls(target, loc=None, owns_file=False, locking=locking, **opts)
        loc = parse_target(
            target, storage_options, format=cls.name, accepted="an h5py.File or an h5py.Group"
        )
        if loc.is_remote:
            file, fobj = open_remote(loc, mode)
            return cls(file, loc=loc, owns_file=True, read_only=True, fileobj=fobj, **opts)
        file, fobj = open_local(loc.path, mode, locking, userblock_size, bool(o.swmr))
        return cls(
            file,
            loc=loc,
            owns_file=True,
            locking=locking,
            read_only=mode == "r",
            fileobj=fobj,
            swmr=bool(o.swmr),
            **opts,
        )

    def finalize(self) -> None:
        """The finishing step of a write: the coordinates of the arrays named dimensions in
        this session become dimension scales, attached netCDF-4's way (no data is read)."""
        self._attach_scales()

    def _flush_before_close(self) -> None:
        self._attach_scales()

    def _attach_scales(self) -> None:
        if not self._named_dims or not self._root.id.valid:
            return
        paths, self._named_dims = self._named_dims, set()
        h5_scales.attach_coordinates(self._root, paths)

    def _release_handles(self) -> None:
        self._ds_cache.clear()
        if self._owns_file:
            with contextlib.suppress(Exception):  # closing an already invalid file
                self._root.file.close()
        if self._fileobj is not None:  # a remote file's (or a ClearedFlagsFile's) file object
            fileobj, self._fileobj = self._fileobj, None
            fileobj.close()

    @property
    def closed(self) -> bool:
        return self._closed or not self._root.id.valid

    @property
    def reopen_spec(self) -> ReopenSpec | None:
        if self._loc is None:
            return None
        # never "w"/"w-": reopening must not truncate (nor fail on) the file we made
        return ReopenSpec.make(
            self._loc,
            "r+" if self._writable else "r",
            locking=self._locking,
            fast_path=self._fast_path,
            chunk_cache=self._chunk_cache,
            swmr=self._swmr or None,
            follow_virtual=self._follow_virtual or None,
        )

    # --- helpers -----------------------------------------------------------------------------
    def _node(self, path: Path) -> h5py.Group | h5py.Dataset:
        self._check_open(self.key_str(path))
        if not path:
            return self._root
        oid = self._resolve(path)
        node = h5_links.wrap(oid)
        if node is None or self._is_dimension(oid):  # a named datatype, a netCDF dimension
            raise self._not_found(path)
        return node

    @staticmethod
    def _is_dimension(oid: Any) -> bool:
        """Whether ``oid`` is netCDF's scale of a dimension that is no variable (no key)."""
        return (
            isinstance(oid, h5py.h5d.DatasetID)
            and h5_properties.dimension_only_length(oid) is not None
        )

    def _resolve(self, path: Path) -> Any:
        """The object ID at ``path``, reached through this file's own links only
        (:func:`~ptd.storage.h5.links.resolve`): a path through an external link is a
        skipped key, reported as missing with why."""
        try:
            return h5_links.resolve(self._root, path)
        except h5_links.Outside as out:
            raise PtdKeyError(
                f"key {self.key_str(path)!r} of {self._location} is skipped: it leads out of "
                f"the file ({out.reason})"
            ) from None
        except (KeyError, ValueError, TypeError, RuntimeError, OSError):
            raise self._not_found(path) from None

    def _check_inside(self, path: Path) -> None:
        """Refuse to write at ``path`` when an existing part of it leads out of the file
        (a soft link through an external link): a write must never reach another file."""
        for i in range(1, len(path) + 1):
            try:
                h5_links.resolve(self._root, path[:i])
            except h5_links.Outside as out:
                raise PtdKeyError(
                    f"cannot write key {self.key_str(path)!r} in {self._location}: "
                    f"{self.key_str(path[:i])!r} leads out of the file ({out.reason})"
                ) from None
            except (KeyError, ValueError, TypeError, RuntimeError, OSError):
                return  # missing from here on: created inside this file

    def _entry(self, path: Path, data: bool = True) -> _Entry:
        """The dataset at ``path`` and its shape, dtype and size, cached (ptd never resizes a
        dataset).

        ``data``: the caller reads or writes the data, which must then lie in this file: a
        dataset with external raw storage or a virtual dataset (data in other files, which a
        hostile file could point anywhere) raises UnsupportedOperationError."""
        entry = self._ds_cache.get(path)
        if entry is not None and not self._closed:
            if data and path in self.data_elsewhere:
                self._refuse_outside(path)
            return entry
        node = self._node(path)
        if not isinstance(node, h5py.Dataset):
            raise self._wrong_kind(path, NodeKind.GROUP)
        entry = self._remember(path, node)
        if data and path in self.data_elsewhere:
            self._refuse_outside(path)
        return entry

    def _remember(self, path: Path, node: h5py.Dataset) -> _Entry:
        """Cache the dataset ``node`` found at ``path`` (noting data outside the file)."""
        dsid = node.id
        dcpl = dsid.get_create_plist()
        layout = dcpl.get_layout()
        if layout == h5py.h5d.VIRTUAL or dcpl.get_external_count():
            why = h5_elsewhere.refusal(dcpl, self._named_file(), self._follow_virtual)
            if why is not None:
                self.data_elsewhere[path] = h5_elsewhere.sources(dcpl)
                what = h5_properties.layout(dcpl)
                self._elsewhere_why[path] = f"{what}: {why}"
        shape, dtype = dsid.shape, dsid.dtype
        # a null dataspace (h5py.Empty) has no shape: no data (described as unsupported)
        null = shape is None
        shape = () if shape is None else shape
        entry = _Entry(
            node,
            shape,
            dtype,
            math.prod(shape) * dtype.itemsize,
            dcpl,
            layout == h5py.h5d.CHUNKED,
            null,
        )
        self._ds_cache[path] = entry
        return entry

    def _named_file(self) -> str | None:
        """The local file as the user named it (None: an h5py object or a URL)."""
        return None if self._loc is None or self._loc.is_remote else self._loc.path

    def _refuse_outside(self, path: Path) -> None:
        shown = ", ".join(self.data_elsewhere.get(path, ())) or "none listed"
        raise UnsupportedOperationError(
            f"key {self.key_str(path)!r} of {self._location} keeps its data outside the file "
            f"({self._elsewhere_why.get(path, 'not followed')}; sources: {shown}): a file can "
            "point it at any file on this machine, so ptd does not read it by default"
        )

    def _group(self, path: Path) -> h5py.Group:
        node = self._node(path)
        if not isinstance(node, h5py.Group):
            raise self._wrong_kind(path, NodeKind.ARRAY)
        return node

    def _exists(self, path: Path) -> bool:
        return self.kind(path) is not None

    def _parent_for_create(self, path: Path) -> tuple[h5py.Group, str]:
        """The (created) parent group of ``path`` and the last name; an existing node at
        ``path`` is deleted first (creation replaces)."""
        key = self._check_create(path)
        self._check_inside(path)
        parent = self._root
        try:
            for i, part in enumerate(path[:-1]):
                child = parent.get(part) if parent.id.links.exists(part.encode()) else None
                if child is None:
                    child = parent.create_group(part)
                elif not isinstance(child, h5py.Group):
                    raise PtdKeyError(
                        f"cannot create key {key!r} in {self._location}: "
                        f"{self.key_str(path[: i + 1])!r} is an array"
                    )
                parent = child
            if parent.id.links.exists(path[-1].encode()):  # (the link, not its target)
                self._refuse_dimension(parent, path)
                del parent[path[-1]]
                self._ds_cache.clear()
        except (OSError, ValueError, KeyError) as err:
            if isinstance(err, PtdKeyError):
                raise
            raise PtdValueError(f"cannot create key {key!r} in {self._location}: {err}") from None
        self._ds_cache.pop(path, None)
        return parent, path[-1]

    def _refuse_dimension(self, parent: h5py.Group, path: Path) -> None:
        """Refuse to replace netCDF's scale of a dimension that is no variable: arrays name
        their dimension through it, and deleting it would leave them pointing at nothing."""
        try:
            oid = h5py.h5o.open(parent.id, path[-1].encode())
        except (KeyError, ValueError, RuntimeError, OSError):
            return
        length = h5_properties.dimension_only_length(oid) if self._is_dimension(oid) else None
        if length is None:
            return
        raise PtdKeyError(
            f"cannot write key {self.key_str(path)!r} in {self._location}: the file names a "
            f"netCDF dimension {path[-1]!r} (of length {length}) there, which arrays of the "
            "file use for their dimension names; write the value under another key"
        )

    def _meta(self, path: Path, entry: _Entry) -> ArrayMeta:
        """The metadata of the dataset of ``entry`` (what was read of it once, reused)."""
        ds, dcpl = entry.ds, entry.dcpl
        chunks = dcpl.get_chunk() if entry.chunked else None
        meta = self._describe_array(
            path,
            entry.shape,
            entry.dtype,
            self._read_attrs(path, ds),
            chunks=chunks,
            compression=None if chunks is None else h5_plugins.describe_pipeline(dcpl),
            stored_nbytes=ds.id.get_storage_size(),
        )
        if entry.null:
            why = "no data (an HDF5 null dataspace, h5py.Empty)"
            meta = replace(meta, kind=ValueKind.UNSUPPORTED, torch_dtype=None, unsupported=why)
        elif (ref := h5_codec.reference_kind(meta.dtype)) is not None:
            meta = replace(meta, reference=ref)
        return meta

    def _value_kind(
        self, dtype: np.dtype, attrs: Mapping[str, Any]
    ) -> tuple[ValueKind, str | None]:
        """h5py's type metadata first: the types ptd cannot copy (references, vlen sequences,
        compound types: ``(UNSUPPORTED, reason)``), tensordict's non-tensor types, then
        torch's dtypes."""
        reason = h5_codec.unsupported_reason(dtype)
        if reason is not None:
            return ValueKind.UNSUPPORTED, reason
        nt = h5_codec.non_tensor_kind(dtype, attrs)
        if nt is not None:
            return ValueKind.NON_TENSOR, nt
        kind, name = self._numeric_kind(dtype, attrs)
        if kind is ValueKind.UNSUPPORTED and name is None:
            name = h5_codec.opaque_reason(dtype)  # H5T_OPAQUE named in HDF5's words
        return kind, name

    # --- structure ---------------------------------------------------------------------------
    def kind(self, path: Path) -> NodeKind | None:
        self._check_open(self.key_str(path))
        if not path:
            return NodeKind.GROUP
        try:
            oid = h5_links.resolve(self._root, path)  # never through an external link
        except (h5_links.Outside, KeyError, ValueError, TypeError, RuntimeError, OSError):
            return None
        if isinstance(oid, h5py.h5d.DatasetID):
            return None if self._is_dimension(oid) else NodeKind.ARRAY
        if isinstance(oid, h5py.h5g.GroupID):
            return NodeKind.GROUP
        return None

    def children(self, path: Path) -> list[tuple[str, NodeKind]]:
        """Each link of the group that reaches a dataset or group in this file (soft links and
        extra hard links included, see :mod:`~ptd.storage.h5.links`); the others
        (dangling, external, cyclic) are left out and recorded in :attr:`walk_skipped`, with a
        :class:`~ptd.errors.SkippedKeyWarning` the first time."""
        group = self._group(path)
        ancestors = h5_links.ancestors(self._root, path)
        out = []
        for name, obj, _note, skip in h5_links.child_links(
            group, ancestors, {}, lambda n: n, self._hidden_dimension(path)
        ):
            if skip is not None:
                self._skip(path + (name,), skip)
            elif isinstance(obj, h5py.Dataset):
                out.append((name, NodeKind.ARRAY))
            else:
                out.append((name, NodeKind.GROUP))
        return out

    def _note_dimension(self, path: Path, length: int) -> None:
        self.hidden_dimensions[path] = length

    def _hidden_dimension(self, group: Path) -> Any:
        return lambda name, length: self._note_dimension(group + (name,), length)

    # --- the property inventory (h5_properties.py) --------------------------------------------
    property_attrs = h5_properties.PROPERTY_ATTRS

    def array_properties(self, path: Path, meta: ArrayMeta | None = None) -> ArrayProperties:
        meta = meta if meta is not None else self.array_meta(path)
        entry = self._entry(path, data=False)
        ds, dcpl = entry.ds, entry.dcpl
        attrs = dict(meta.attrs)
        names = h5_properties.dimension_names(ds, attrs)
        user = spelled.user_attrs(self.name, attrs)
        return ArrayProperties(
            path=path,
            shape=tuple(meta.shape),
            dtype=meta.dtype,
            chunks=meta.chunks,
            shards=None,
            pipeline=h5_properties.pipeline(dcpl, meta.dtype),
            fill_value=h5_properties.fill_value(ds, dcpl),
            dimension_names=names,
            maxshape=tuple(maxshape) if (maxshape := ds.maxshape) is not None else None,
            attrs=user,
            attr_types=h5_properties.attr_types(ds, user),
            layout=h5_properties.layout(dcpl),
            link=self.walk_links.get(path),
            cf_fill_value=h5_properties.cf_fill_value(attrs, meta.dtype),
            dimension_labels_only=names is not None and h5_properties.labels_only(ds, attrs),
        )

    def dimension_names(
        self, path: Path, meta: ArrayMeta | None = None
    ) -> tuple[str | None, ...] | None:
        # the labels and scales only: no fill value, pipeline or attribute types read
        meta = meta if meta is not None else self.array_meta(path)
        return h5_properties.dimension_names(self._entry(path, data=False).ds, dict(meta.attrs))

    def store_properties(self) -> StoreProperties:
        return StoreProperties(
            format=self.name, userblock_size=h5_properties.userblock_size(self._root.file)
        )

    @classmethod
    def codec_support(cls, codec: Codec) -> CodecSupport:
        return h5_properties.codec_support(codec)

    @classmethod
    def codec_available(cls, codec: Codec) -> bool:
        return h5_properties.codec_available(codec)

    @classmethod
    def creation_options(cls, encoding: Encoding, dtype: np.dtype) -> dict[str, Any]:
        return h5_properties.creation_options(encoding, dtype)

    def stored_sizes(self, paths: Sequence[Path]) -> dict[Path, int]:
        # the low-level open: no h5py.Dataset (and its property lists) per array
        self._check_open("/")
        out: dict[Path, int] = {}
        for path in paths:
            oid = self._resolve(path)
            out[path] = int(oid.get_storage_size()) if isinstance(oid, h5py.h5d.DatasetID) else 0
        return out

    def array_meta(self, path: Path) -> ArrayMeta:
        try:
            entry = self._entry(path, data=False)
        except (TypeError, ValueError) as err:
            node = self._node(path)
            if not isinstance(node, h5py.Dataset):
                raise
            return h5_codec.unmappable_meta(path, node, err)
        return self._meta(path, entry)

    def walk(self, path: Path = ()) -> list[tuple[Path, NodeKind, ArrayMeta | None]]:
        """One pass over the links below ``path`` (name order, parents first), opening only
        the datasets; links are followed as :meth:`children` says, and noted in
        :attr:`walk_links`."""
        group = self._group(path)
        out: list[tuple[Path, NodeKind, ArrayMeta | None]] = []

        def visit(p: Path, obj: Any, note: str | None) -> None:
            if note is not None:
                self.walk_links[p] = note
            if isinstance(obj, h5py.Group):
                check_depth(p, self._location)  # before the walk enters it (PTD_MAX_DEPTH)
                out.append((p, NodeKind.GROUP, None))
                return
            try:
                meta = self._meta(p, self._remember(p, obj))
            except (TypeError, ValueError) as err:
                # a type h5py cannot map to numpy (e.g. an opaque tag naming no dtype):
                # listed, and reading it raises an error naming the key
                meta = h5_codec.unmappable_meta(p, obj, err)
            out.append((p, NodeKind.ARRAY, meta))

        h5_links.walk(
            group,
            path,
            visit,
            self._skip,
            ancestors=h5_links.ancestors(self._root, path),
            dimension=self._note_dimension,
        )
        return out

    def create_group(self, path: Path, attrs: Mapping[str, Any] | None = None) -> None:
        key = self.key_str(path)
        self.check_writable(key)
        check_path(path, self._location)
        self._check_inside(path)
        try:
            group = self._root.require_group("/".join(path)) if path else self._root
        except TypeError:
            for i in range(1, len(path) + 1):
                above = self._root.get("/".join(path[: i - 1])) if i > 1 else self._root
                if isinstance(above, h5py.Group):
                    self._refuse_dimension(above, path[:i])
            raise PtdKeyError(
                f"cannot create group {key!r} in {self._location}: an array is in the way"
            ) from None
        except ValueError as err:
            raise PtdValueError(f"cannot create group {key!r} in {self._location}: {err}") from None
        if attrs:
            h5_codec.write_attrs(group, attrs, key, self._location)

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
        """Create a dataset (an existing node at ``path`` is replaced).

        With no ``chunks``/``options`` the dataset is contiguous, like tensordict's. A
        ``chunks`` option that is an int or a tuple shorter than the array covers its leading
        dims (the rest stay whole). Chunk/filter options are dropped for 0-d datasets, and
        explicit chunks for zero-size ones, which HDF5 cannot chunk.
        """
        parent, name = self._parent_for_create(path)
        shape = tuple(int(s) for s in shape)
        opts = dict(options or {})
        if chunks is not None:
            opts["chunks"] = tuple(chunks)
        self._create_dataset(parent, name, path, shape, np.dtype(dtype), data, opts, attrs)

    # many small datasets created or read at once (h5/bulk.py)
    create_arrays, read_many = h5_bulk.create, h5_bulk.read_many

    def _create_dataset(
        self,
        parent: h5py.Group,
        name: str,
        path: Path,
        shape: tuple[int, ...],
        dtype: np.dtype,
        data: Any,
        opts: dict[str, Any],
        attrs: Mapping[str, Any] | None,
    ) -> h5py.Dataset:
        size = int(np.prod(shape)) if shape else 1
        after: dict[str, Any] = {
            k: opts.pop(k)
            for k in ("dimension_names", "cf_fill_value", "dimension_labels_only")
            if k in opts
        }
        if not shape:
            opts = {k: v for k, v in opts.items() if k not in _CHUNK_OPTIONS}
        elif "chunks" in opts and opts["chunks"] not in (None, True, False):
            if size == 0:
                opts.pop("chunks")
            else:
                chunks = leading_chunks(opts["chunks"], shape)
                opts["chunks"] = tuple(min(c, s) for c, s in zip(chunks, shape, strict=True))
        try:
            ds = parent.create_dataset(name, shape=shape, dtype=dtype, data=data, **opts)
        except (ValueError, TypeError) as err:
            if size == 0 and any(k in _CHUNK_OPTIONS for k in opts):
                opts = {k: v for k, v in opts.items() if k not in _CHUNK_OPTIONS}
                ds = parent.create_dataset(name, shape=shape, dtype=dtype, data=data, **opts)
            else:
                raise self._create_error(path, shape, dtype, opts, err) from None
        if after:
            self._set_properties(path, ds, after)
        if attrs:
            h5_codec.write_attrs(ds, attrs, self.key_str(path), self._location)
        return ds

    def _set_properties(self, path: Path, ds: h5py.Dataset, options: Mapping[str, Any]) -> None:
        """Set what the dataset's creation left (:func:`h5_properties.set_properties`); an
        array whose dimensions are named waits for the finishing step (:meth:`finalize`)."""
        h5_properties.set_properties(ds, options)
        if options.get("dimension_names") and not options.get("dimension_labels_only"):
            self._named_dims.add(path)  # netCDF's spelling, made when the write finishes

    def _delete(self, path: Path, key: str) -> None:
        self._check_inside(path[:-1])
        try:
            oid = h5_links.resolve(self._root, path)
        except (h5_links.Outside, KeyError, ValueError, TypeError, RuntimeError, OSError):
            oid = None
        if self._is_dimension(oid):  # (no key)
            raise self._not_found(path)
        try:
            del self._root["/".join(path)]
        except (KeyError, ValueError):
            raise self._not_found(path) from None
        self._ds_cache.clear()

    def _move(self, src: Path, dst: Path) -> None:
        self._check_inside(src[:-1])
        if len(dst) > 1:
            self.create_group(dst[:-1])
        self._check_inside(dst[:-1])
        try:
            self._root.move("/".join(src), "/".join(dst))
        except (KeyError, ValueError) as err:
            raise PtdValueError(
                f"cannot move {self.key_str(src)!r} to {self.key_str(dst)!r} in "
                f"{self._location}: {err}"
            ) from None
        self._ds_cache.clear()

    # --- references and soft links (see :mod:`ptd.storage.h5.refs`) -------------------------
    holds_links = True
    holds_references = True

    def reference_attrs(self, path: Path) -> dict[str, Any]:
        return h5_refs.reference_attr_paths(self._node(path))

    def read_reference_paths(self, path: Path, selection: Selection) -> np.ndarray:
        node = self._node(path)
        if not isinstance(node, h5py.Dataset):
            raise self._wrong_kind(path, NodeKind.GROUP)
        return h5_refs.read_paths(self._root.file, node[selection if selection else ()])

    def create_reference_array(
        self,
        path: Path,
        shape: tuple[int, ...],
        *,
        chunks: tuple[int, ...] | None = None,
        maxshape: tuple[int | None, ...] | None = None,
        attrs: Mapping[str, Any] | None = None,
    ) -> None:
        key = self._check_create(path)
        if len(path) > 1:
            self.create_group(path[:-1])
        parent = self._root["/".join(path[:-1])] if len(path) > 1 else self._root
        opts: dict[str, Any] = {}
        if chunks and shape and 0 not in shape:
            opts["chunks"] = tuple(min(c, n) for c, n in zip(chunks, shape, strict=False))
        if maxshape is not None and shape:
            opts["maxshape"] = maxshape
            opts.setdefault("chunks", True)
        ds = parent.create_dataset(path[-1], shape=shape, dtype=h5py.ref_dtype, **opts)
        if attrs:
            h5_codec.write_attrs(ds, attrs, key, self._location)

    def write_reference_paths(
        self, path: Path, selection: Selection, paths: np.ndarray
    ) -> list[str]:
        self.check_writable(self.key_str(path))
        node = self._node(path)
        missing: list[str] = []
        node[selection if selection else ()] = h5_refs.write_paths(self._root.file, paths, missing)
        return missing

    def set_reference_attrs(self, path: Path, refs: Mapping[str, Any]) -> list[str]:
        self.check_writable(self.key_str(path))
        missing: list[str] = []
        h5_refs.write_attr_refs(self._node(path), refs, missing)
        return missing

    def create_soft_link(self, path: Path, target: str) -> None:
        self._check_create(path)
        if len(path) > 1:
            self.create_group(path[:-1])
        parent = self._root["/".join(path[:-1])] if len(path) > 1 else self._root
        h5_refs.make_soft_link(parent, path[-1], target)

    # --- attributes --------------------------------------------------------------------------
    def get_attrs(self, path: Path) -> dict[str, Any]:
        return self._read_attrs(path, self._node(path))

    def _read_attrs(self, path: Path, node: Any) -> dict[str, Any]:
        skipped: dict[str, str] = {}
        out = h5_codec.read_attrs(node, skipped)
        if skipped:
            self.attrs_skipped[path] = skipped
        return out

    def set_attrs(self, path: Path, attrs: Mapping[str, Any]) -> None:
        key = self.key_str(path)
        self.check_writable(key)
        h5_codec.write_attrs(self._node(path), attrs, key, self._location)

    # --- data --------------------------------------------------------------------------------
    def _array_handle(self, path: Path) -> _Entry:
        return self._entry(path)

    def _chunk_info(self, handle: _Entry, list_stored: bool) -> ChunkInfo:
        return h5_chunk_info(handle.ds, list_stored, handle.dcpl, handle.shape)

    def _read_mapped(
        self, path: Path, handle: _Entry, selection: Selection, out: np.ndarray | None = None
    ) -> np.ndarray | None:
        return None if self._maps is None else self._maps.read(path, handle.ds, selection, out)

    def _small_whole_read(self, handle: _Entry) -> bool:
        if handle.nbytes > _SMALL_WHOLE_READ:
            return False
        # a dataset ptd decodes itself is never handed to HDF5's filters, which trust what a
        # chunk's header says (see ptd.storage.h5.decode)
        return not handle.chunked or self._chunked is None or not self._chunked.serves(handle)

    def _read(self, handle: _Entry, selection: Selection) -> np.ndarray:
        ds, shape, dtype, nbytes = handle.ds, handle.shape, handle.dtype, handle.nbytes
        if not selection:
            if not shape:
                return np.asarray(ds[()])
            if nbytes >= _DIRECT_READ_BYTES:
                out = np.empty(shape, dtype)
                ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, out)
                return out
            return ds[()]
        if any(isinstance(item, np.ndarray) for item in selection):
            return _read_span(ds, shape, dtype, selection)
        out = ds[selection]  # ints and slices: h5py's fast path
        return out if type(out) is np.ndarray else np.asarray(out)

    def _write(self, handle: _Entry, selection: Selection, value: np.ndarray) -> None:
        if not value.flags.c_contiguous:
            # h5py broadcasts element by element: expand a broadcast view in memory first
            value = np.ascontiguousarray(value)
        handle.ds[selection if selection else ()] = value

    def _read_error(self, path: Path, selection: Selection, err: Exception) -> PtdError:
        missing = h5_plugins.missing_filters(self._entry(path, data=False).dcpl)
        if not missing:
            return super()._read_error(path, selection, err)
        self._check_open(self.key_str(path))
        return UnsupportedOperationError(
            f"cannot read key {self.key_str(path)!r} of {self._location}: it is compressed with "
            f"{', '.join(missing)}, which is not available here (pip install hdf5plugin)"
        )

    def _write_error(self, key: str, err: Exception) -> PtdError:
        self._check_open(key)
        if "no write intent" in str(err):
            return ReadOnlyError(f"cannot write key {key!r}: {self._location} is read-only")
        return super()._write_error(key, err)

    # string arrays kept as their kind (h5/codec.py)
    string_type, read_strings = h5_codec.string_type_of, h5_codec.read_strings_of
    create_strings = h5_codec.create_strings

    # --- non-tensor entries ------------------------------------------------------------------
    def write_non_tensor(
        self,
        path: Path,
        value: Any,
        *,
        stack_shape: tuple[int, ...] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        key = self.key_str(path)
        if stack_shape is not None:
            arr, attrs = h5_codec.encode_stack(value, tuple(stack_shape), key, self._location)
            opts = dict(options or {})
        else:
            arr, attrs = h5_codec.encode_value(value, key)
            opts = {}  # scalar datasets take no chunk/filter options (tensordict passes them and fails)
        parent, name = self._parent_for_create(path)
        self._create_dataset(parent, name, path, arr.shape, arr.dtype, arr, opts, None)
        ds = parent[name]
        for k, v in attrs.items():
            ds.attrs[k] = v

    def _non_tensor_entry(self, path: Path) -> tuple[h5py.Dataset, dict[str, Any]]:
        ds = self._entry(path).ds
        attrs = h5_codec.read_attrs(ds)
        h5_codec.check_readable(ds.dtype, self.key_str(path), self._location)
        return ds, attrs

    def _decode_non_tensor(
        self,
        entry: tuple[h5py.Dataset, dict[str, Any]],
        key: str,
        selection: Selection,
        *,
        allow_pickle: bool | None,
        as_stack: bool,
    ) -> NonTensorPayload:
        """h5 never pickles: ``allow_pickle`` is not used."""
        ds, attrs = entry
        return h5_codec.decode(
            ds,
            attrs,
            key,
            self._location,
            selection,
            as_stack=as_stack,
            read_rows=lambda d, sel: _read_span(d, d.shape, d.dtype, sel),
        )
