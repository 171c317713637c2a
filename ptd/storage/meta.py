"""What the backends say about a store's contents: node and value kinds, array metadata, and
decoded non-tensor entries.

These are plain values (no h5py or zarr object in them); :mod:`ptd.storage.api`
re-exports them, and the containers above the backends read them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["ArrayMeta", "NewArray", "NodeKind", "NonTensorPayload", "Path", "ValueKind"]

#: a key path: one str per level, relative to the backend's root group; ``()`` is the root
Path = tuple[str, ...]


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
    #: chunk shape: what one read decodes (the inner chunk of a sharded zarr array), or None
    #: for contiguous storage
    chunks: tuple[int, ...] | None = None
    #: human-readable compression/codec description, e.g. ``"gzip(4)"``, ``"zstd(3)"``, or None
    compression: str | None = None
    #: bytes the array occupies in the store, when cheaply known
    stored_nbytes: int | None = None
    #: for non-tensors: "str", "bytes", "json", "pickle", "opaque", "other"
    non_tensor_kind: str | None = None
    #: for non-tensors: the stack shape (from ``__tensordict_stack__``) when it is a marked stack
    stack_shape: tuple[int, ...] | None = None
    #: a sharded zarr array: the shape of its shards (each one stored object holding a grid
    #: of ``chunks``, read through the shard's index); None for unsharded arrays
    shards: tuple[int, ...] | None = None
    #: for unsupported arrays: what they hold, for messages (``"HDF5 object references"``)
    unsupported: str | None = None
    #: the store library could not parse this node's metadata (``unsupported`` says why):
    #: ``shape`` and ``dtype`` are what its document states, when it can be read at all
    unreadable: bool = False
    #: an array of HDF5 references: ``"object"`` or ``"region"`` (a column kind of its own,
    #: an NWB table's ``group`` column; ``kind`` stays UNSUPPORTED: no tensor holds it)
    reference: str | None = None

    @property
    def inner_chunks(self) -> tuple[int, ...] | None:
        """The chunk shape inside the shards of a sharded array (``chunks``), else None."""
        return self.chunks if self.shards is not None else None


@dataclass
class NonTensorPayload:
    """A decoded non-tensor entry: one value, or a (nested) list for a stack."""

    value: Any
    #: True when ``value`` is a nested list whose leading dims are ``stack_shape``
    is_stack: bool = False
    stack_shape: tuple[int, ...] = ()

    @classmethod
    def of_rows(cls, data: Any) -> NonTensorPayload:
        """The rows of an array read from the store: a stack of its shape as nested lists, or
        one value for a 0-d array."""
        data = np.asarray(data)
        if data.ndim == 0:
            return cls(data.tolist())
        return cls(data.tolist(), is_stack=True, stack_shape=data.shape)


@dataclass
class NewArray:
    """One numeric array to create with :meth:`Backend.create_arrays` (the arguments of
    :meth:`Backend.create_array`)."""

    path: Path
    shape: tuple[int, ...]
    dtype: np.dtype
    data: np.ndarray | None = None
    attrs: Mapping[str, Any] | None = None
    chunks: tuple[int, ...] | None = None
    options: Mapping[str, Any] | None = None
