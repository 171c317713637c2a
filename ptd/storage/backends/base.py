"""The backend interface: the only thing the containers know about storage.

A :class:`Backend` is one open store (an HDF5 file or a Zarr v3 group hierarchy). Paths are
tuples of str, one component per level, relative to the backend's root group; ``()`` is the root.
Everything above ``ptd/backends/`` is written against this interface alone and never imports
h5py or zarr.

Selections
----------
``read``/``write`` take a *selection*: a tuple with at most one entry per leading dimension of
the array, each entry being

* an ``int`` (the dimension is dropped),
* a ``slice`` with a step > 0 (``start``/``stop`` already clipped to the dimension), or
* a 1-D ``numpy.ndarray`` of int64, **sorted, without duplicates, in bounds** (at most one such
  entry per selection).

Missing trailing entries mean "everything". Unsorted and repeated indices, bool masks, several
arrays and so on are reduced to that form by :mod:`ptd._indexing`, once for both backends.
The optional :meth:`Backend.read_direct` also takes the index array unsorted and with repeats:
backends that read from memory maps (``_mmap.py``) serve it as one fancy index.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ptd.storage.location import ReopenSpec

Path = tuple[str, ...]
Selection = tuple[Any, ...]

__all__ = [
    "Backend",
    "NodeKind",
    "ValueKind",
    "ArrayMeta",
    "NonTensorPayload",
    "Path",
    "Selection",
    "MODES",
    "check_mode",
    "selection_shape",
    "fit_write_value",
    "check_path",
]

#: the open modes every backend accepts (``"x"`` == ``"w-"``)
MODES = ("r", "r+", "w", "w-", "x", "a")


def check_mode(mode: Any) -> str:
    """Return ``mode`` if it is one of :data:`MODES`, else raise PtdValueError listing them."""
    from ptd.errors import PtdValueError

    if not isinstance(mode, str) or mode not in MODES:
        raise PtdValueError(f"Invalid mode {mode!r}; must be one of {', '.join(MODES)}")
    return mode


def selection_shape(shape: Sequence[int], selection: Selection) -> tuple[int, ...]:
    """The shape of ``array[selection]`` for a normalised selection (see the module doc)."""
    out: list[int] = []
    for dim, item in zip(shape, selection, strict=False):
        if isinstance(item, slice):
            out.append(len(range(*item.indices(dim))))
        elif isinstance(item, np.ndarray):
            out.append(int(item.shape[0]))
        # an int drops the dimension
    out.extend(shape[len(selection):])
    return tuple(out)


def check_path(path: Path, location: str) -> None:
    """Keys are data, not paths: raise PtdKeyError for a component that is empty, ``"."``,
    ``".."``, or holds ``/`` or a NUL character (so that no key reaches outside its store)."""
    for part in path:
        if not isinstance(part, str) or part in ("", ".", "..") or "/" in part or "\x00" in part:
            from ptd.errors import PtdKeyError

            raise PtdKeyError(
                f"invalid key {'/'.join(map(str, path))!r} for {location}: bad name {part!r} "
                "(empty names, '.', '..', '/' and NUL are refused)"
            )


def fit_write_value(
    value: Any, target_shape: tuple[int, ...], key: str, location: str
) -> np.ndarray:
    """``value`` as an array of ``target_shape`` (a broadcast view when it is smaller).

    Numpy's assignment rules: the value broadcasts to the target, and extra leading dims of
    size 1 are dropped. Anything else raises PtdValueError naming the key and both shapes.
    """
    from ptd.errors import PtdValueError

    value = np.asarray(value)
    if value.shape == target_shape:
        return value
    shape = value.shape
    extra = value.ndim - len(target_shape)
    if extra > 0 and all(d == 1 for d in value.shape[:extra]):
        value = value.reshape(value.shape[extra:])
    try:
        return np.broadcast_to(value, target_shape)
    except ValueError:
        raise PtdValueError(
            f"cannot write a value of shape {list(shape)} into key {key!r} of "
            f"{location}: the selected region has shape {list(target_shape)}"
        ) from None


class NodeKind(enum.Enum):
    GROUP = "group"
    ARRAY = "array"


class ValueKind(enum.Enum):
    """What an array holds, as far as the store's own type system says."""

    NUMERIC = "numeric"  #: bool/int/uint/float/complex with a torch twin (or marked bits)
    NON_TENSOR = "non_tensor"  #: a string/bytes/opaque/payload entry: read with read_non_tensor
    UNSUPPORTED = "unsupported"  #: compound, longdouble... (listed, but reading raises)


@dataclass(frozen=True)
class ArrayMeta:
    """Metadata of one array, read without touching its data."""

    path: Path
    shape: tuple[int, ...]
    #: the stored numpy dtype (object for variable-length strings)
    dtype: np.dtype
    kind: ValueKind
    #: the torch dtype (as a string like ``"float32"``/``"bfloat16"``) for NUMERIC arrays
    torch_dtype: str | None
    attrs: Mapping[str, Any] = field(default_factory=dict)
    #: chunk shape, or None for contiguous storage
    chunks: tuple[int, ...] | None = None
    #: human-readable compression/codec description, e.g. ``"gzip(4)"``, ``"zstd(3)"``, or None
    compression: str | None = None
    #: bytes the array occupies in the store, when cheaply known
    stored_nbytes: int | None = None
    #: for non-tensors: "str", "bytes", "json", "pickle", "opaque", "other"
    non_tensor_kind: str | None = None
    #: for non-tensors: the stack shape (from ``__tensordict_stack__``) when it is a marked stack
    stack_shape: tuple[int, ...] | None = None


@dataclass
class NonTensorPayload:
    """A decoded non-tensor entry: one value, or a (nested) list for a stack."""

    value: Any
    #: True when ``value`` is a nested list whose leading dims are ``stack_shape``
    is_stack: bool = False
    stack_shape: tuple[int, ...] = ()


class Backend(ABC):
    """One open store. Create with the subclass's :meth:`open`.

    Every method of a subclass named in :data:`GUARDED` raises only ptd errors: anything else
    that escapes it (h5py's ``RuntimeError``/``KeyError`` on a damaged file, zarr's
    ``TypeError`` on malformed metadata, a codec's error on a corrupt chunk, ``MemoryError``,
    a full disk) is turned into one naming the store and the key (see :func:`translate_error`).
    """

    #: the registry name: ``"h5"`` or ``"zarr"``
    name: str = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for attr in GUARDED:
            fn = cls.__dict__.get(attr)
            if isinstance(fn, classmethod):
                setattr(cls, attr, classmethod(_guarded(fn.__func__, attr)))
            elif callable(fn) and not getattr(fn, "__ptd_guarded__", False):
                setattr(cls, attr, _guarded(fn, attr))

    # --- lifecycle ---------------------------------------------------------------------------
    @classmethod
    @abstractmethod
    def open(cls, target: Any, mode: str = "r", **options: Any) -> Backend:
        """Open ``target`` (a path, or the library's own file/group/store object).

        ``mode`` is one of ``r, r+, w, w-, x, a`` (``"x"`` == ``"w-"``); anything else raises
        ``PtdValueError`` listing them. A missing store in ``r``/``r+`` raises
        ``StoreNotFoundError``; an existing one with ``w-``/``x`` raises ``StoreExistsError``; a
        file that is not of this format raises ``CorruptStoreError``. ``options`` are
        backend-specific (``locking=`` for h5, ``storage_options=`` for zarr...).
        """

    @abstractmethod
    def close(self) -> None:
        """Close the store. Idempotent. Afterwards every other call raises ClosedStoreError."""

    @property
    @abstractmethod
    def closed(self) -> bool: ...

    @property
    @abstractmethod
    def writable(self) -> bool: ...

    @property
    @abstractmethod
    def location(self) -> str:
        """A short description naming the file or store, for error messages."""

    @property
    @abstractmethod
    def reopen_spec(self) -> ReopenSpec | None:
        """What it takes to reopen this store in another process, or None when the store
        cannot be reopened by name (an in-memory store, a user's h5py/zarr object)."""

    @abstractmethod
    def raw_group(self, path: Path) -> Any:
        """The library's own group object at ``path`` (``h5py.Group`` / ``zarr.Group``), for
        users who need to reach past ptd (``PersistentTensorDict.file``)."""

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
        for name, kind in self.children(path):
            p = path + (name,)
            if kind is NodeKind.ARRAY:
                out.append((p, kind, self.array_meta(p)))
            else:
                out.append((p, kind, None))
                out.extend(self.walk(p))
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

    @abstractmethod
    def delete(self, path: Path) -> None:
        """Delete the node at ``path``; a missing node raises PtdKeyError."""

    @abstractmethod
    def move(self, src: Path, dst: Path) -> None:
        """Rename a node without reading its data; ``dst`` must not exist."""

    # --- attributes --------------------------------------------------------------------------
    @abstractmethod
    def get_attrs(self, path: Path) -> dict[str, Any]:
        """The node's attributes as plain python values (numpy scalars/arrays -> python/lists)."""

    @abstractmethod
    def set_attrs(self, path: Path, attrs: Mapping[str, Any]) -> None:
        """Merge ``attrs`` into the node's attributes."""

    # --- data --------------------------------------------------------------------------------
    @abstractmethod
    def read(self, path: Path, selection: Selection = ()) -> np.ndarray:
        """Read a numeric array (or a part of it) into a new numpy array of the stored dtype."""

    def read_direct(self, path: Path, selection: Selection) -> np.ndarray | None:
        """Optional: :meth:`read`, where the selection's index array may also be unsorted and
        hold repeats (the result follows its order), or None when this array cannot be read
        that way cheaply (callers then :meth:`read` a sorted selection and re-order). The
        default is None; backends override it for memory-mapped arrays."""
        return None

    @abstractmethod
    def write(self, path: Path, selection: Selection, value: np.ndarray) -> None:
        """Write ``value`` (already of the stored dtype and of the selected shape, or
        broadcastable to it) into a numeric array. A shape that does not fit raises
        PtdValueError naming the key (zarr must not silently cut it)."""

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

    @abstractmethod
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
        ``allow_pickle`` follows the reference: False raises PickleRefusedError before decoding,
        None decodes with a FutureWarning, True decodes silently.
        """

    # --- optional capabilities ---------------------------------------------------------------
    def flush(self) -> None:  # noqa: B027 - optional hook
        """Flush buffered writes (no-op by default)."""

    def finalize(self) -> None:  # noqa: B027 - optional hook
        """Called after a bulk write (``from_dict``, convert): e.g. consolidate zarr metadata."""

    # --- helpers shared by both implementations ----------------------------------------------
    @staticmethod
    def key_str(path: Path) -> str:
        return "/".join(path) if path else "/"


# ------------------------------------------------------------------------------ error guard
#: the Backend methods whose unexpected exceptions become ptd errors
GUARDED = frozenset({
    "open", "close", "flush", "finalize", "kind", "children", "array_meta", "walk",
    "create_group", "create_array", "delete", "move", "get_attrs", "set_attrs", "read",
    "read_direct", "write", "write_non_tensor", "read_non_tensor", "raw_group",
})
_WRITES = frozenset({
    "close", "flush", "finalize", "create_group", "create_array", "delete", "move", "set_attrs",
    "write", "write_non_tensor",
})
#: errno values (and HDF5's words for them) that mean "the disk is full"
_FULL_ERRNOS = (28, 27, 122)  # ENOSPC, EFBIG, EDQUOT
_FULL_WORDS = ("No space left", "File too large", "Disk quota", "errno = 28", "errno = 27")


def translate_error(err: Exception, where: str, op: str, key: str) -> Exception:
    """The ptd error for an unexpected exception ``err`` raised by backend method ``op``."""
    from ptd.errors import CorruptStoreError, PtdMemoryError, StoreIOError

    detail = f"{type(err).__name__}: {err}"
    if isinstance(err, MemoryError):
        return PtdMemoryError(
            f"not enough memory to read key {key!r} of {where} ({detail}); the store may be "
            "damaged (an absurd shape)"
        )
    text = str(err)
    if (isinstance(err, OSError) and err.errno in _FULL_ERRNOS) or any(w in text for w in _FULL_WORDS):
        return StoreIOError(f"cannot write key {key!r} of {where}: the disk is full ({detail})")
    if op == "open":
        return CorruptStoreError(f"{where} is not a readable store ({detail})")
    if op in _WRITES:
        return StoreIOError(f"cannot write key {key!r} of {where} ({detail})")
    what = (f"key {key!r} of {where}" if op in ("read", "read_direct", "read_non_tensor")
            else f"the metadata of {where}" + (f" (key {key!r})" if key != "/" else ""))
    return CorruptStoreError(
        f"cannot read {what}: the store is damaged or not in the expected format ({detail})"
    )


def _guarded(fn: Any, op: str) -> Any:
    import functools

    from ptd.errors import PtdError

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
