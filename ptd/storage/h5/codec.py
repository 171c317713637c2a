"""How values without a tensor form, and attributes, are stored in HDF5 (tensordict 0.15's
conventions plus ptd's JSON text; see :mod:`ptd.storage.h5.backend`).

Writing: a ``str`` is a vlen UTF-8 string marked ``__tensordict_str__``; ``bytes``, bools and
numbers, complex included (and numeric numpy arrays), are opaque data; a ``bytes`` ending in
NUL bytes, which numpy's ``S`` type would cut, is raw opaque bytes (``|V<n>``); anything else
that JSON round-trips is its JSON text marked ``__ptd_json__``. Stacks (marked ``__tensordict_stack__``)
hold str, bytes, bool, int or float of one type. Nothing is ever pickled.

Reading: a string marked ``__tensordict_str__`` reads as ``bytes`` with tensordict's
``FutureWarning``, foreign strings as ``bytes`` silently, opaque values as the numpy
scalar/array h5py returns. Attribute values HDF5 has no type for (dicts, lists of dicts, ragged
or mixed lists) are JSON text, listed in ``__ptd_json_attrs__`` and decoded on read.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import h5py
import numpy as np

from ptd.errors import PtdTypeError, PtdValueError
from ptd.format.attrvalues import hdf5_json_text
from ptd.format.names import (
    PTD_JSON_ATTR,
    PTD_JSON_ATTRS,
    TD_META_ATTR,
    TD_STACK_ATTR,
    TD_STR_ATTR,
)
from ptd.format.payload import all_of_type, encode_json, nested_to_array, parse_stack_shape
from ptd.format.tables import describe_table
from ptd.storage.h5.typenames import hdf5_type_words
from ptd.storage.limits import limit
from ptd.storage.meta import ArrayMeta, NonTensorPayload, Path, ValueKind
from ptd.storage.nontensor import check_non_tensor_read
from ptd.storage.selection import Selection
from ptd.storage.strings import (
    FIXED_BYTES,
    FIXED_UTF8,
    FIXED_UTF32,
    STRING_TYPE_ATTR,
    VLEN_BYTES,
    VLEN_UTF8,
    StringType,
    as_object_array,
)

__all__ = [
    "check_readable",
    "create_strings",
    "decode",
    "encode_stack",
    "encode_value",
    "non_tensor_kind",
    "opaque_reason",
    "read_attrs",
    "read_strings",
    "read_strings_of",
    "reference_kind",
    "string_array",
    "string_type",
    "string_type_of",
    "unmappable_meta",
    "unsupported_reason",
    "write_attrs",
]

_STACK_TYPE_ERROR = (
    "Cannot write a NonTensorStack to h5 unless its elements are all str, bytes, bool, int or "
    "float, of a single type. Use zarr, or a TensorDict saved with memmap, for other values."
)
_NUL_ERROR = (
    "Cannot write a NonTensorStack of str that contains a NUL character to h5: h5 strings cannot "
    "hold it. Use bytes, zarr, or a TensorDict saved with memmap."
)
_STR_WARNING = (
    "The h5 backend of PersistentTensorDict reads the string {name!r}, which tensordict wrote, "
    "as bytes. Starting with TensorDict 0.17, the default will change to reading it as str, as "
    "the other backends do. To support both, decode only bytes: "
    "`value.decode() if isinstance(value, bytes) else value`."
)


# --- attributes ------------------------------------------------------------------------------
def _plain(value: Any) -> Any:
    """An attribute value as plain python (numpy scalars/arrays -> python/lists)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, h5py.Empty):
        return None
    return value


def _json_object(value: Any) -> Any:
    """``__tensordict__`` stored as JSON object text decoded; anything else as it is."""
    decoded = _json_text(value)
    return decoded if isinstance(decoded, dict) else value


def _json_text(value: Any) -> Any:
    """An attribute ptd stored as JSON text (listed in ``__ptd_json_attrs__``: see
    :func:`~ptd.format.attrvalues.hdf5_json_text`) decoded; text that is not JSON as it is."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _attr_value(value: Any) -> Any:
    """A python attribute value in a form h5py can store: values HDF5 has no type for (dicts,
    lists of dicts, ragged or mixed lists) become their JSON text, lists of str vlen string
    arrays, None an empty attribute."""
    if value is None:
        return h5py.Empty("f")
    if isinstance(value, bytes):
        # h5py stores a python bytes as a variable-length string, which reads back as str:
        # fixed-length bytes read back as bytes
        return np.array(value, dtype=f"S{max(1, len(value))}")
    text = hdf5_json_text(value) if _maybe_json(value) else None
    if text is not None:
        return text
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, str) for v in value):
            return np.array(value, dtype=h5py.string_dtype())
        return np.asarray(value)
    return value


def _maybe_json(value: Any) -> bool:
    """Whether ``value`` is of a python type that may need JSON text (a mapping, a list, an
    object array): the others are stored as they are."""
    return isinstance(value, (Mapping, list, tuple)) or (
        isinstance(value, np.ndarray) and value.dtype.kind == "O"
    )


def read_attrs(obj: h5py.HLObject, skipped: dict[str, str] | None = None) -> dict[str, Any]:
    """The attributes of a group or dataset as plain python values. Attributes of a type
    numpy cannot represent, naming python objects (reading them crashes h5py), that h5py
    cannot read, or of a compound type (whose plain form would be another value) are left
    out, with why in ``skipped`` (name -> reason) when given."""
    total = h5py.h5a.get_num_attrs(obj.id)
    if not total:
        return {}
    attrs = obj.attrs
    out = {}
    why: dict[str, str] = {} if skipped is None else skipped
    for k in _attr_names(obj, total, why):
        try:
            aid = attrs.get_id(k)
        except (TypeError, ValueError, KeyError):
            why[k] = "an attribute h5py cannot open"
            continue
        try:
            dt = aid.dtype
        except (TypeError, ValueError):
            why[k] = f"{_type_words(aid)}, which numpy cannot represent"
            continue
        if _holds_raw_objects(dt):
            why[k] = "an opaque HDF5 type naming Python objects (never read)"
            continue
        if dt.fields is not None:
            fields = f"a compound type ({', '.join(dt.names or ())})"
            if any(h5py.check_ref_dtype(dt.fields[n][0]) for n in dt.names or ()):
                fields = f"HDF5 object references in {fields}"  # netCDF's REFERENCE_LIST
            why[k] = f"{fields}, which ptd does not copy"
            continue
        try:
            out[k] = _plain(attrs[k])
        except (OSError, TypeError, ValueError):
            why[k] = f"{_type_words(aid)}, which h5py {h5py.__version__} cannot read"
    # only the attributes ptd stored as JSON objects are decoded: a user's string that looks
    # like JSON (robomimic's env_args) stays a string
    listed = out.pop(PTD_JSON_ATTRS, None)
    if TD_META_ATTR in out:
        out[TD_META_ATTR] = _json_object(out[TD_META_ATTR])
    for k in (set(listed) if isinstance(listed, list) else set()) & out.keys():
        out[k] = _json_text(out[k])
    return out


def _type_words(oid: Any) -> str:
    """The HDF5 type of a dataset or attribute id in HDF5's words (``H5T_TIME (...)``)."""
    try:
        return hdf5_type_words(oid.get_type())
    except (TypeError, ValueError, RuntimeError):
        return "an HDF5 datatype"


def _attr_names(obj: h5py.HLObject, total: int, why: dict[str, str]) -> list[str]:
    """The names of the attributes to read: all of them up to ``PTD_MAX_ATTRS``, else the
    first ones in the file's order plus ptd's own (noted in ``why``). One pass of H5Aiterate,
    stopped early: iterating ``obj.attrs`` by name looks each one up again, which costs
    quadratic time on a node of 200,000 attributes."""
    most = limit("PTD_MAX_ATTRS")
    names: list[str] = []

    def take(name: bytes, *_: Any) -> int | None:
        names.append(name.decode("utf-8", "surrogateescape"))
        return 1 if len(names) >= most else None

    h5py.h5a.iterate(obj.id, take, index_type=h5py.h5.INDEX_NAME, order=h5py.h5.ITER_NATIVE)
    if total > len(names):
        have = set(names)
        for own in (TD_META_ATTR, PTD_JSON_ATTRS):
            if own not in have and h5py.h5a.exists(obj.id, own.encode()):
                names.append(own)
        why[f"({total - most} more)"] = (
            f"not read: the node holds {total} attributes, more than PTD_MAX_ATTRS ({most})"
        )
    return names


def write_attrs(obj: h5py.HLObject, attrs: Mapping[str, Any], key: str, location: str) -> None:
    """Set ``attrs`` on ``obj`` (key ``key`` of ``location``, for the error)."""
    as_json: set[str] = set()
    plain: set[str] = set()
    for name, value in attrs.items():
        try:
            obj.attrs[name] = _attr_value(value)
        except (TypeError, ValueError) as err:
            raise PtdTypeError(
                f"cannot store attribute {name!r}={value!r} on key {key!r} in {location}: {err}"
            ) from None
        stored_as_json = name != TD_META_ATTR and _maybe_json(value)
        if stored_as_json and hdf5_json_text(value) is not None:
            as_json.add(name)
        else:
            plain.add(name)
    _mark_json(obj, as_json, plain)


def _mark_json(obj: h5py.HLObject, as_json: set[str], plain: set[str]) -> None:
    """Keep the list of attributes stored as JSON text (``__ptd_json_attrs__``) up to date:
    ``as_json`` were just written as JSON, ``plain`` as anything else."""
    old = obj.attrs.get(PTD_JSON_ATTRS) if PTD_JSON_ATTRS in obj.attrs else None
    listed = (
        {n.decode() if isinstance(n, bytes) else str(n) for n in np.atleast_1d(old)}
        if (old is not None)
        else set()
    )
    new = (listed - plain) | as_json
    if new == listed:
        return
    if new:
        obj.attrs[PTD_JSON_ATTRS] = np.array(sorted(new), dtype=h5py.string_dtype())
    elif PTD_JSON_ATTRS in obj.attrs:
        del obj.attrs[PTD_JSON_ATTRS]


# --- types -----------------------------------------------------------------------------------
def _is_non_tensor_dtype(dt: np.dtype) -> bool:
    """tensordict's test: string, vlen, enum or opaque (h5py's own type metadata)."""
    return bool(
        dt.kind in "OSU"
        or h5py.check_string_dtype(dt)
        or h5py.check_vlen_dtype(dt)
        or h5py.check_enum_dtype(dt)
        or h5py.check_opaque_dtype(dt)
    )


def _holds_raw_objects(dt: np.dtype) -> bool:
    """Whether h5py would turn stored bytes into python object pointers when reading ``dt``
    (an opaque type tagged as a numpy object dtype, also inside a vlen, array or compound
    type): reading such data crashes the interpreter, so ptd never does."""
    if not dt.hasobject:
        return False
    if h5py.check_opaque_dtype(dt):
        return True
    if h5py.check_string_dtype(dt) is not None or h5py.check_ref_dtype(dt) is not None:
        return False
    base = h5py.check_vlen_dtype(dt)
    if base is not None:
        return _holds_raw_objects(base)
    if dt.subdtype is not None:
        return _holds_raw_objects(dt.subdtype[0])
    if dt.fields:
        return any(_holds_raw_objects(field[0]) for field in dt.fields.values())
    return False


def unsupported_reason(dt: np.dtype) -> str | None:
    """What a dataset of ``dt`` holds when ptd cannot copy it as a tensor or a non-tensor
    (``"HDF5 object references"``...), or None."""
    ref = h5py.check_ref_dtype(dt)
    if ref is h5py.RegionReference:
        return "HDF5 region references"
    if ref is not None:
        return "HDF5 object references"
    base = h5py.check_vlen_dtype(dt)
    if base is not None and h5py.check_string_dtype(dt) is None:
        return f"variable-length sequences (vlen of {np.dtype(base)})"
    if dt.fields is not None:
        return describe_table(dt)
    if dt.subdtype is not None:
        return f"an HDF5 array type ({dt.subdtype[0]} x {list(dt.subdtype[1])})"
    return None


def reference_kind(dt: np.dtype) -> str | None:
    """``"object"`` or ``"region"`` for a dataset of HDF5 references, else None."""
    ref = h5py.check_ref_dtype(dt)
    if ref is None:
        return None
    return "region" if ref is h5py.RegionReference else "object"


def opaque_reason(dt: np.dtype) -> str | None:
    """What a dataset of numpy's void type holds that is none of tensordict's non-tensor
    types (h5py reads HDF5's ``H5T_OPAQUE`` as ``|V<n>``), in HDF5's words; None for others."""
    if dt.kind != "V" or dt.fields is not None or dt.subdtype is not None:
        return None
    return f"H5T_OPAQUE (opaque bytes, {dt.itemsize} byte{'s' if dt.itemsize != 1 else ''} each)"


def non_tensor_kind(dt: np.dtype, attrs: Mapping[str, Any]) -> str | None:
    """The non-tensor kind of a dataset (``"json"``, ``"bytes"``, ``"opaque"``, ``"str"``,
    ``"other"``), or None when its type is not one of tensordict's non-tensor types."""
    if not _is_non_tensor_dtype(dt):
        return None
    if attrs.get(PTD_JSON_ATTR):
        return "json"
    if h5py.check_opaque_dtype(dt):
        return "bytes" if dt.kind in "SV" else "opaque"
    if h5py.check_string_dtype(dt) is not None or dt.kind in "SU":
        return "str"
    return "other"


def check_readable(dt: np.dtype, key: str, location: str) -> None:
    """Refuse a type that names python objects: h5py would turn stored bytes into pointers."""
    if _holds_raw_objects(dt):
        raise PtdValueError(
            f"cannot read key {key!r} of {location}: its type {dt} holds opaque python "
            "objects, which cannot be read from a file safely"
        )


def _opaque(arr: np.ndarray) -> np.ndarray:
    return arr.astype(h5py.opaque_dtype(arr.dtype))


# --- string arrays ---------------------------------------------------------------------------
def string_type(dt: np.dtype, attrs: Mapping[str, Any]) -> StringType | None:
    """The kind of a string dataset that a conversion copies as a string array (see
    :mod:`~ptd.storage.strings`): h5py's string types, unless the dataset is
    tensordict's one str (``__tensordict_str__``) or ptd's JSON text. A recorded
    ``__ptd_string_type__`` of the same family (UTF-32 stored as UTF-8 text) wins."""
    info = h5py.check_string_dtype(dt)
    if info is None or h5py.check_opaque_dtype(dt) or dt.fields is not None:
        return None
    if attrs.get(TD_STR_ATTR) or attrs.get(PTD_JSON_ATTR):
        return None
    recorded = StringType.parse(attrs.get(STRING_TYPE_ATTR))
    if info.length is None:
        if info.encoding == "utf-8":
            if recorded is not None and recorded.kind == FIXED_UTF32:
                return recorded
            return StringType(VLEN_UTF8)
        return StringType(VLEN_BYTES)
    return StringType(FIXED_UTF8 if info.encoding == "utf-8" else FIXED_BYTES, info.length)


def read_strings(ds: h5py.Dataset) -> np.ndarray | None:
    """The whole string dataset ``ds`` (see ``Backend.read_strings``), or None when it is no
    string array."""
    stype = string_type(ds.dtype, read_attrs(ds))
    if stype is None:
        return None
    if stype.kind == FIXED_UTF32:
        return as_object_array(ds.asstr()[()], text=True).astype(f"U{stype.length}")
    if stype.kind in (VLEN_UTF8, VLEN_BYTES):
        data = ds.asstr()[()] if stype.kind == VLEN_UTF8 else ds[()]
        return as_object_array(data, text=stype.kind == VLEN_UTF8)
    return np.asarray(ds[()])


def string_type_of(be: Any, meta: Any) -> StringType | None:
    """``H5Backend.string_type``: :func:`string_type` of the dataset ``meta`` describes."""
    return string_type(meta.dtype, meta.attrs)


def read_strings_of(be: Any, path: Any) -> np.ndarray:
    """``H5Backend.read_strings``: :func:`read_strings` of the dataset at ``path``, bounded
    first (:mod:`ptd.storage.nontensor`)."""
    ds = be._entry(path).ds
    n = int(np.prod(ds.shape, dtype=object))
    check_non_tensor_read(
        n * max(8, ds.dtype.itemsize),
        f"key {be.key_str(path)!r} of {be.location}",
        f"a string array of {n} strings",
    )
    data = read_strings(ds)
    if data is None:
        raise PtdValueError(f"key {be.key_str(path)!r} of {be.location} is no string array")
    return data


def string_array(stype: StringType, data: Any) -> tuple[np.ndarray, dict[str, Any]]:
    """``(data, attributes)`` of the dataset holding the strings ``data`` as ``stype``: its
    h5py type (UTF-32, which HDF5 lacks, as variable-length UTF-8 text with the kind
    recorded)."""
    arr = np.asarray(data)
    if stype.kind in (FIXED_BYTES, FIXED_UTF8):
        encoding = "utf-8" if stype.kind == FIXED_UTF8 else "ascii"
        dt = h5py.string_dtype(encoding, stype.length)
        if arr.dtype.kind != "S":
            arr = as_object_array(arr, text=False).astype(f"S{stype.length}")
        return arr.astype(dt), {}
    if stype.kind == VLEN_BYTES:
        return as_object_array(arr, text=False).astype(h5py.string_dtype("ascii")), {}
    out = as_object_array(arr, text=True).astype(h5py.string_dtype())
    if any("\x00" in v for v in out.reshape(-1)):
        raise PtdValueError("HDF5 strings cannot hold a NUL character")
    return out, ({STRING_TYPE_ATTR: stype.tag()} if stype.kind == FIXED_UTF32 else {})


def create_strings(
    be: Any,
    path: Any,
    stype: StringType,
    data: np.ndarray,
    *,
    attrs: Mapping[str, Any] | None = None,
    chunks: Any = None,
    dimension_names: tuple[str | None, ...] | None = None,
) -> None:
    """``H5Backend.create_strings``: the dataset of h5py's type for ``stype`` (replacing a
    node at ``path``), filled with ``data``."""
    try:
        arr, extra = string_array(stype, data)
    except (ValueError, TypeError) as err:
        raise PtdValueError(
            f"cannot write key {be.key_str(path)!r} to {be.location} as {stype.tag()} "
            f"strings: {err}"
        ) from None
    parent, name = be._parent_for_create(path)
    opts: dict[str, Any] = {} if chunks is None else {"chunks": tuple(chunks)}
    if dimension_names is not None and len(dimension_names) == arr.ndim:
        opts["dimension_names"] = tuple(dimension_names)
    all_attrs = {**dict(attrs or {}), **extra}
    be._create_dataset(parent, name, path, arr.shape, arr.dtype, arr, opts, all_attrs)


# --- writing ---------------------------------------------------------------------------------
def encode_value(value: Any, key: str) -> tuple[np.ndarray, dict[str, Any]]:
    """``(data, attributes)`` of the scalar dataset holding one non-tensor ``value``."""
    if isinstance(value, str):
        if "\x00" in value:
            raise PtdValueError(
                f"Cannot write the str {key!r} to h5: it contains a NUL character, which h5 "
                "strings cannot hold. Use bytes, zarr, or a TensorDict saved with memmap."
            )
        return np.array(value, dtype=h5py.string_dtype()), {TD_STR_ATTR: np.True_}
    if isinstance(value, bytes):
        if value.endswith(b"\x00"):
            # numpy's S type drops trailing NULs: keep them as raw opaque bytes
            return _opaque(np.array(np.void(bytes(value)))), {}
        return _opaque(np.array(value)), {}
    if isinstance(value, (bool, int, float, complex, np.generic)) and not isinstance(
        value, np.object_
    ):
        try:
            arr = np.array(value)
        except OverflowError:
            arr = np.array(None)
        if arr.dtype.kind in "biufcSUV":
            return _opaque(arr), {}
    elif isinstance(value, np.ndarray):
        if value.dtype.kind in "biufcSU" and value.dtype.fields is None:
            return _opaque(np.ascontiguousarray(value)), {}
        raise PtdTypeError(
            f"Cannot write {key!r} to h5: numpy arrays of dtype {value.dtype} cannot be "
            "stored as opaque data. Use zarr, or a TensorDict saved with memmap."
        )
    elif isinstance(value, (list, tuple)) and value:
        try:
            arr = np.array(value)
        except (ValueError, OverflowError):
            arr = np.array(None)
        if arr.dtype.kind in "biufc":
            return _opaque(arr), {}
    text = encode_json(value)
    if text is None:
        raise PtdTypeError(
            f"Cannot write {key!r} to h5: a {type(value).__name__} value is stored as JSON "
            "on h5, and this one does not round-trip through JSON (h5 never pickles). Use "
            "zarr, or a TensorDict saved with memmap."
        )
    return np.array(text, dtype=h5py.string_dtype()), {PTD_JSON_ATTR: np.True_}


def encode_stack(
    values: Any, shape: tuple[int, ...], key: str, location: str
) -> tuple[np.ndarray, dict[str, Any]]:
    """``(data, attributes)`` of the dataset holding a stack: ``values`` nested lists of
    ``shape`` (checked), all str, bytes, bool, int or float."""
    attrs = {TD_STACK_ATTR: np.asarray(shape, dtype=np.int64)}
    ndim = len(shape)
    if all_of_type(values, ndim, str):
        arr = nested_to_array(values, shape, key=key, location=location)
        if any("\x00" in v for v in arr.reshape(-1)):
            raise PtdValueError(f"{key!r}: {_NUL_ERROR}")
        return arr.astype(h5py.string_dtype()), attrs
    for cls, np_dtype in (
        (bytes, None),
        (bool, np.bool_),
        (int, np.int64),
        (float, np.float64),
    ):
        if all_of_type(values, ndim, cls):
            flat = nested_to_array(values, shape, key=key, location=location)
            try:
                arr = np.array(flat.reshape(-1).tolist(), dtype=np_dtype).reshape(shape)
            except OverflowError:
                raise PtdTypeError(
                    f"{key!r}: an int of this NonTensorStack does not fit in int64, which h5 "
                    "stacks of int use. Use zarr, or a TensorDict saved with memmap."
                ) from None
            return _opaque(arr), attrs
    raise PtdTypeError(f"{key!r}: {_STACK_TYPE_ERROR}")


# --- reading ---------------------------------------------------------------------------------
def decode(
    ds: h5py.Dataset,
    attrs: Mapping[str, Any],
    key: str,
    location: str,
    selection: Selection,
    *,
    as_stack: bool,
    read_rows: Callable[[h5py.Dataset, Selection], Any],
) -> NonTensorPayload:
    """The non-tensor in ``ds`` (whose attributes are ``attrs``): a marked stack, a JSON
    value, a foreign column read as a stack (``as_stack``), or one value. ``read_rows`` reads
    the rows of a column that ``selection`` picks."""
    dt = ds.dtype
    opaque = h5py.check_opaque_dtype(dt)
    is_str = not opaque and h5py.check_string_dtype(dt) is not None
    if TD_STACK_ATTR in attrs:
        if parse_stack_shape(attrs[TD_STACK_ATTR]) != tuple(ds.shape):
            raise PtdValueError(
                f"Corrupt non-tensor stack (key {key!r} in {location}): its "
                f"{TD_STACK_ATTR} attribute {attrs[TD_STACK_ATTR]!r} is not the dataset's "
                f"shape {list(ds.shape)}"
            )
        src = ds.asstr() if is_str else ds
        return NonTensorPayload.of_rows(src[selection] if selection else src[()])
    if attrs.get(PTD_JSON_ATTR):
        text = ds[()]
        try:
            return NonTensorPayload(json.loads(text))
        except (ValueError, TypeError) as err:
            raise PtdValueError(f"Corrupt JSON value (key {key!r} in {location}): {err}") from None
    if as_stack and ds.ndim and not opaque:
        return NonTensorPayload.of_rows(read_rows(ds, selection) if selection else ds[()])
    value = ds[()]
    if is_str and isinstance(value, (bytes, np.bytes_)):
        value = bytes(value)
        if attrs.get(TD_STR_ATTR):
            warnings.warn(_STR_WARNING.format(name=ds.name), FutureWarning, stacklevel=5)
    elif isinstance(value, np.void) and dt.kind == "V" and dt.fields is None:
        value = value.tobytes()
    return NonTensorPayload(value)


def unmappable_meta(path: Path, ds: h5py.Dataset, err: Exception) -> ArrayMeta:
    """A dataset whose HDF5 datatype h5py cannot map to numpy (``H5T_TIME``, an opaque tag
    naming no dtype...): an unsupported leaf naming the type in HDF5's words; reading it
    raises."""
    return ArrayMeta(
        path=path,
        shape=tuple(ds.id.shape or ()),
        dtype=np.dtype(f"V{ds.id.get_type().get_size()}"),
        kind=ValueKind.UNSUPPORTED,
        torch_dtype=None,
        unsupported=f"{_type_words(ds.id)}, which h5py {h5py.__version__} cannot map to a "
        "NumPy type",
        unreadable=True,
    )
