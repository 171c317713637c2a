"""How values without a tensor form, and attributes, are stored in zarr (tensordict 0.15's
conventions; see :mod:`ptd.storage.zarr.backend`).

A non-tensor is a 1-D ``uint8`` array holding its JSON or pickle *payload*, marked
``__tensordict_non_tensor__: {"encoding": ...}`` (:mod:`ptd.format.payload` picks the encoding
and applies the ``allow_pickle`` policy); a stack is a payload of the nested list, marked
``__tensordict_stack__`` with its shape too. Stacks of str are zarr ``string`` arrays of the
stack's shape marked ``__tensordict_stack__``. Attributes are JSON.

**Pickles.** An array is *pickled* when its payload is a pickle (the marker's encoding) or
when any step of its codec pipeline unpickles (numcodecs' ``pickle`` codec, as a Zarr v2
filter or compressor, or ``numcodecs.pickle`` in a Zarr v3 pipeline, sharded ones included:
:func:`unpickling_codecs`). Such an array is a non-tensor of kind ``"pickle"``, and nothing
asks zarr or numcodecs to decode it unless the caller passed ``allow_pickle=True``
(:func:`~ptd.format.payload.refuse_pickle`): the refusal reads the array's metadata only, so
it holds whatever numcodecs release is installed (those before 0.15.2, and 0.16.0-0.16.5,
unpickle whatever a file says).
"""

from __future__ import annotations

import contextlib
import copy
import math
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from ptd.errors import PtdValueError
from ptd.format.names import (
    ENCODING_PICKLE,
    PTD_BYTES_ATTRS,
    PTD_FLOAT_ATTRS,
    TD_NON_TENSOR_ATTR,
    TD_STACK_ATTR,
)
from ptd.format.payload import (
    all_of_type,
    decode_payload,
    encode_payload,
    has_nested_shape,
    nested_to_array,
    parse_stack_shape,
    refuse_pickle,
    select_nested,
)
from ptd.storage.meta import NonTensorPayload
from ptd.storage.nontensor import check_non_tensor_read, check_payload_stored
from ptd.storage.selection import Selection, selection_shape
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
    "attrs_json",
    "attrs_read",
    "check_payload_size",
    "check_stack_marker",
    "create_strings",
    "decode",
    "encode",
    "non_tensor_kind",
    "plain_python",
    "read_strings",
    "string_array",
    "string_type",
    "unpickling_codecs",
]

#: the codec names (v2 ``id``, v3 ``name``) whose decode is ``pickle.loads`` of the stored
#: bytes: numcodecs' ``pickle``. The other codecs numcodecs has for object arrays (vlen-*,
#: ``json2``, ``msgpack2``) parse data without running any of it.
UNPICKLING_CODEC_NAMES = frozenset({"pickle", "numcodecs.pickle"})
#: how deep a codec's JSON form is searched (a sharding codec nests its inner pipelines)
_MAX_CODEC_DEPTH = 16


def _codec_json(codec: Any) -> Any:
    """A codec object as the JSON its metadata states (v3 ``to_dict()``, numcodecs'
    ``get_config()``), or its class name when it has neither."""
    for method in ("to_dict", "get_config"):
        fn = getattr(codec, method, None)
        if callable(fn):
            try:
                return fn()
            except Exception:  # noqa: BLE001 - then named by its class
                break
    return {"name": type(codec).__name__}


def _codec_names(doc: Any, depth: int = 0) -> Iterator[str]:
    """Every ``id`` and ``name`` in a codec's JSON form, nested pipelines included."""
    if depth > _MAX_CODEC_DEPTH:
        return
    if isinstance(doc, Mapping):
        for field in ("id", "name"):
            value = doc.get(field)
            if isinstance(value, str):
                yield value
        for value in doc.values():
            if isinstance(value, (Mapping, list, tuple)):
                yield from _codec_names(value, depth + 1)
    elif isinstance(doc, (list, tuple)):
        for value in doc:
            yield from _codec_names(value, depth + 1)


def unpickling_codecs(arr: Any) -> tuple[str, ...]:
    """The names of the steps of the zarr array ``arr``'s pipeline that unpickle what is
    stored (``("pickle",)``), from its metadata alone (what zarr would run: a consolidated
    document's pipeline when the store was opened from one); ``()`` for every other array.
    One call per array's metadata, a few dict lookups per codec."""
    md = arr.metadata
    if md.zarr_format == 3:
        steps = list(md.codecs)
    else:
        steps = list(md.filters or ())
        if md.compressor is not None:
            steps.append(md.compressor)
    found = {
        name
        for step in steps
        for name in _step_names(step)
        if name.strip().lower() in UNPICKLING_CODEC_NAMES
    }
    return tuple(sorted(found))


def _plain_codec_types() -> frozenset[type]:
    """zarr's own codec classes that decode without unpickling (exact types: a subclass may
    be anything)."""
    from zarr import codecs

    names = (
        "BytesCodec", "BloscCodec", "ZstdCodec", "GzipCodec", "Crc32cCodec", "TransposeCodec",
        "VLenUTF8Codec", "VLenBytesCodec",
    )  # fmt: skip
    return frozenset(t for n in names if isinstance(t := getattr(codecs, n, None), type))


_PLAIN_CODECS = _plain_codec_types()


def _step_names(step: Any, depth: int = 0) -> Iterator[str]:
    """The codec names of one pipeline step: none for zarr's own plain codecs (a type check,
    the common case: this runs for every array a store lists), a sharding codec's inner and
    index pipelines step by step, any other step's JSON form."""
    if type(step) in _PLAIN_CODECS or depth > _MAX_CODEC_DEPTH:
        return
    inner = getattr(step, "codecs", None), getattr(step, "index_codecs", None)
    if type(step).__name__ == "ShardingCodec" and all(isinstance(c, tuple) for c in inner):
        for sub in (*inner[0], *inner[1]):  # type: ignore[misc]
            yield from _step_names(sub, depth + 1)
        return
    yield from _codec_names(_codec_json(step))


_UNPICKLE_LOCK = threading.Lock()


@contextlib.contextmanager
def _codecs_may_unpickle(codecs: tuple[str, ...]) -> Iterator[None]:
    """Let numcodecs' ``pickle`` codec decode inside the block (only entered once
    ``allow_pickle=True`` was checked): numcodecs 0.15.2 and 0.16.6+ refuse unless their
    process-wide ``ALLOW_UNSAFE_PICKLE_DECODE`` is set; older ones decode anyway. The flag
    is set for this block alone, under a lock."""
    if not codecs:
        yield
        return
    import numcodecs.pickles as numcodecs_pickles

    with _UNPICKLE_LOCK:
        before = getattr(numcodecs_pickles, "ALLOW_UNSAFE_PICKLE_DECODE", None)
        if before is not None:
            numcodecs_pickles.ALLOW_UNSAFE_PICKLE_DECODE = True
        try:
            yield
        finally:
            if before is not None:
                numcodecs_pickles.ALLOW_UNSAFE_PICKLE_DECODE = before


def refuse_unpickling(arr: Any, key: str, location: str) -> None:
    """PickleRefusedError when ``arr``'s codecs unpickle: what reads it as data (tensor
    reads, string arrays) never opts in; only :func:`decode` with ``allow_pickle=True``."""
    if unpickling_codecs(arr):
        refuse_pickle(False, key=key, location=location, source="codec")


def _uncompressed(arr: Any) -> bool:
    """Whether each stored byte of ``arr`` is one byte of its values (no filter, compressor
    or sharding): then its payload must be stored whole."""
    md = arr.metadata
    if md.zarr_format == 3:
        return [type(c).__name__ for c in md.codecs] == ["BytesCodec"]
    return not md.filters and md.compressor is None


def _stored_bytes(arr: Any) -> int | None:
    """The bytes stored under ``arr`` (its chunks and metadata document, from one listing of
    its prefix), or None when the store cannot tell."""
    try:
        return int(arr.nbytes_stored())
    except Exception:  # noqa: BLE001 - a store that cannot list: the limit alone bounds it
        return None


def plain_python(value: Any) -> Any:
    """An attribute value with numpy scalars and arrays as python values and lists, anything
    else as it is (zarr refuses what JSON cannot hold; compare
    :func:`ptd.format.attrvalues.jsonable`, which renders everything for reports)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): plain_python(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_python(v) for v in value]
    return value


def _bytes_as_text(value: Any) -> Any:
    """``value`` (bytes, or a non-empty list of bytes) as UTF-8 text, or None for anything
    else; bytes that are not UTF-8 raise ValueError (JSON holds no bytes)."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, list) and value and all(isinstance(v, bytes) for v in value):
        return [v.decode("utf-8") for v in value]
    return None


_NON_FINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def _spell_floats(value: Any) -> tuple[Any, bool]:
    """``value`` with NaN and the infinities (at any depth) as zarr's strings for them, and
    whether there was one (a bare ``NaN`` token is not JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return ("NaN" if value != value else "Infinity" if value > 0 else "-Infinity"), True
    if isinstance(value, list):
        items = [_spell_floats(v) for v in value]
        return [v for v, _ in items], any(f for _, f in items)
    if isinstance(value, dict):
        pairs = {k: _spell_floats(v) for k, v in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(f for _, f in pairs.values())
    return value, False


def _read_floats(value: Any) -> Any:
    """The inverse of :func:`_spell_floats` for an attribute listed in
    ``__ptd_float_attrs__``."""
    if isinstance(value, str):
        return _NON_FINITE.get(value, value)
    if isinstance(value, list):
        return [_read_floats(v) for v in value]
    if isinstance(value, dict):
        return {k: _read_floats(v) for k, v in value.items()}
    return value


def _names(listed: Any) -> set[str]:
    return {n for n in listed if isinstance(n, str)} if isinstance(listed, list) else set()


def attrs_json(
    attrs: Mapping[str, Any], listed: Any = None, floats_listed: Any = None
) -> dict[str, Any]:
    """Attributes as the JSON a zarr node stores: :func:`plain_python` values, where bytes (and
    lists of bytes) become their UTF-8 text, named in ``__ptd_bytes_attrs__`` so that they
    read back as bytes (:func:`attrs_read`), and NaN and the infinities become zarr's strings
    for them, named in ``__ptd_float_attrs__``. ``listed`` and ``floats_listed``: the node's
    current listings, when ``attrs`` are merged into existing ones (names set here again
    leave a listing or join it; the others stay listed)."""
    out: dict[str, Any] = {}
    before, floats_before = _names(listed), _names(floats_listed)
    as_bytes, floats = set(before), set(floats_before)
    for name, value in attrs.items():
        key = str(name)
        if key in (PTD_BYTES_ATTRS, PTD_FLOAT_ATTRS):
            continue
        plain = plain_python(value)
        text = _bytes_as_text(plain)
        floats.discard(key)
        if text is None:
            plain, spelled = _spell_floats(plain)
            if spelled:
                floats.add(key)
            out[key] = plain
            as_bytes.discard(key)
        else:
            out[key] = text
            as_bytes.add(key)
    if as_bytes != before or (as_bytes and listed is None):
        out[PTD_BYTES_ATTRS] = sorted(as_bytes)
    if floats != floats_before or (floats and floats_listed is None):
        out[PTD_FLOAT_ATTRS] = sorted(floats)
    return out


def attrs_read(attributes: Mapping[str, Any], *, deep: bool = False) -> dict[str, Any]:
    """A zarr node's attributes as ptd hands them out (a copy, ``deep`` or not): those named
    in ``__ptd_bytes_attrs__`` as bytes again, the listing itself left out."""
    out = copy.deepcopy(dict(attributes)) if deep else dict(attributes)
    floats = out.pop(PTD_FLOAT_ATTRS, None)
    if isinstance(floats, list):
        for name in floats:
            if isinstance(name, str) and name in out:
                out[name] = _read_floats(out[name])
    listed = out.pop(PTD_BYTES_ATTRS, None)
    if not isinstance(listed, list):
        return out
    for name in listed:
        value = out.get(name) if isinstance(name, str) else None
        if isinstance(value, str):
            out[name] = value.encode("utf-8")
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            out[name] = [v.encode("utf-8") for v in value]
    return out


def non_tensor_kind(dt: np.dtype, marker: Any) -> str:
    """The non-tensor kind of an array of ``dt`` that holds no tensor: its payload's encoding
    (``"json"``, ``"pickle"``) when ``marker`` (its ``__tensordict_non_tensor__``) is set,
    else ``"str"``, ``"bytes"`` or ``"other"`` by its dtype."""
    if marker is not None:
        enc = marker.get("encoding") if isinstance(marker, dict) else None
        return enc if enc in ("json", "pickle") else "other"
    if dt.kind in "TUO":
        return "str"
    if dt.kind in "SV":
        return "bytes"
    return "other"


def string_type(arr: Any) -> StringType | None:
    """The kind of a zarr string array (v2 or v3) that a conversion copies as a string array
    (see :mod:`~ptd.storage.strings`), or None (numbers, a JSON/pickle payload). A
    recorded ``__ptd_string_type__`` of the same family (UTF-8 stored as bytes) wins."""
    md = arr.metadata
    attrs = md.attributes
    if attrs.get(TD_NON_TENSOR_ATTR) is not None or unpickling_codecs(arr):
        return None
    zdt = md.data_type if md.zarr_format == 3 else md.dtype
    name = type(zdt).__name__
    if name == "NullTerminatedBytes":
        recorded = StringType.parse(attrs.get(STRING_TYPE_ATTR))
        if recorded is not None and recorded.kind == FIXED_UTF8:
            return recorded
        return StringType(FIXED_BYTES, int(zdt.length))
    if name == "FixedLengthUTF32":
        return StringType(FIXED_UTF32, int(zdt.length))
    if name == "VariableLengthUTF8":
        return StringType(VLEN_UTF8)
    if name == "VariableLengthBytes":
        return StringType(VLEN_BYTES)
    return None


def read_strings(arr: Any, key: str, location: str) -> np.ndarray | None:
    """The whole string array ``arr`` (see ``Backend.read_strings``), or None when it is none.
    An array whose codecs unpickle is refused, and what it would allocate is bounded first."""
    refuse_unpickling(arr, key, location)
    stype = string_type(arr)
    if stype is None:
        return None
    item = 8 if stype.kind in (VLEN_UTF8, VLEN_BYTES) else max(1, arr.dtype.itemsize)
    n = int(np.prod(arr.shape, dtype=object))
    check_non_tensor_read(n * item, f"key {key!r} of {location}", f"a string array of {n} strings")
    data = np.asarray(arr[...])
    if stype.kind in (VLEN_UTF8, VLEN_BYTES):
        return as_object_array(data, text=stype.kind == VLEN_UTF8)
    return data


def string_array(stype: StringType, data: Any) -> tuple[Any, np.ndarray, dict[str, Any]]:
    """``(zarr dtype, data, attributes)`` of the array holding the strings ``data`` as
    ``stype``: zarr's type for it (fixed-length UTF-8, which zarr lacks, as fixed-length bytes
    with the kind recorded)."""
    from ptd.storage.zarr.private import VariableLengthBytes

    arr = np.asarray(data)
    if stype.kind in (FIXED_BYTES, FIXED_UTF8):
        if arr.dtype.kind != "S":
            arr = as_object_array(arr, text=False).astype(f"S{stype.length}")
        extra = {STRING_TYPE_ATTR: stype.tag()} if stype.kind == FIXED_UTF8 else {}
        dt = np.dtype(f"S{stype.length}")
        return dt, np.asarray(arr, dtype=dt), extra
    if stype.kind == FIXED_UTF32:
        dt = np.dtype(f"U{stype.length}")
        return dt, as_object_array(arr, text=True).astype(dt), {}
    if stype.kind == VLEN_BYTES:
        return VariableLengthBytes(), as_object_array(arr, text=False), {}
    return str, as_object_array(arr, text=True), {}


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
    """``ZarrBackend.create_strings``: the array of zarr's type for ``stype`` (replacing a
    node at ``path``), filled with ``data``."""
    try:
        dtype, values, extra = string_array(stype, data)
    except (ValueError, TypeError) as err:
        raise PtdValueError(
            f"cannot write key {be.key_str(path)!r} to {be.location} as {stype.tag()} "
            f"strings: {err}"
        ) from None
    kwargs = be._create_kwargs(values.shape, None, chunks)
    kwargs["attributes"] = {**attrs_json(dict(attrs or {})), **extra}
    if dimension_names is not None and len(dimension_names) == values.ndim:
        kwargs["dimension_names"] = list(dimension_names)
    arr = be._new_array(path, values.shape, dtype, None, kwargs)
    if values.size:
        arr[...] = values


def encode(
    value: Any, stack_shape: tuple[int, ...] | None, key: str, location: str
) -> tuple[np.ndarray, dict[str, Any], bool]:
    """``(data, attributes, strings)`` of the array holding a non-tensor: one value
    (``stack_shape`` None) or a stack (``value`` nested lists of ``stack_shape``, checked).
    ``strings``: the data is a string array of the stack's shape, else a payload."""
    attributes: dict[str, Any] = {}
    if stack_shape is not None:
        attributes[TD_STACK_ATTR] = list(stack_shape)
        if all_of_type(value, len(stack_shape), str):
            arr = nested_to_array(value, stack_shape, key=key, location=location)
            return arr, attributes, True
        nested_to_array(value, stack_shape, key=key, location=location)  # shape check
    payload, encoding = encode_payload(value)
    attributes[TD_NON_TENSOR_ATTR] = {"encoding": encoding}
    return np.frombuffer(payload, dtype=np.uint8), attributes, False


def check_payload_size(arr: Any, key: str, location: str) -> None:
    """A payload (an array marked ``__tensordict_non_tensor__``) stored uncompressed must hold
    the bytes its shape declares (tensordict writes it whole, in one chunk): fewer is a lie,
    a CorruptStoreError, found from one listing of its prefix before anything is read."""
    if arr.metadata.attributes.get(TD_NON_TENSOR_ATTR) is None or not _uncompressed(arr):
        return
    declared = int(np.prod(arr.shape, dtype=object)) * arr.dtype.itemsize
    if declared:
        check_payload_stored(declared, _stored_bytes(arr), f"key {key!r} of {location}")


def check_stack_marker(
    attrs: Mapping[str, Any], shape: tuple[int, ...], key: str, location: str
) -> None:
    """Check the ``__tensordict_stack__`` marker of an array of ``shape``: a shape, and for a
    string stack (no payload) the array's own shape; else PtdValueError."""
    stack = attrs.get(TD_STACK_ATTR)
    if stack is None:
        return
    payload = attrs.get(TD_NON_TENSOR_ATTR) is not None
    stack_shape = parse_stack_shape(stack)
    if stack_shape is None or (not payload and stack_shape != shape):
        raise PtdValueError(
            f"Corrupt non-tensor stack (key {key!r} in {location}): its "
            f"{TD_STACK_ATTR} attribute {stack!r} is not a shape"
            + ("" if payload else f" equal to the array's {list(shape)}")
        )


def decode(
    arr: Any,
    key: str,
    location: str,
    selection: Selection,
    *,
    allow_pickle: bool | None,
    as_stack: bool,
    read_rows: Callable[[Any, Selection], np.ndarray],
) -> NonTensorPayload:
    """The non-tensor in the ``zarr.Array`` ``arr`` (its stack marker already checked by
    :func:`check_stack_marker`): a payload, a string stack, a foreign column read as a stack
    (``as_stack``), or one value. ``read_rows`` reads the rows ``selection`` picks."""
    attrs = arr.metadata.attributes
    marker = attrs.get(TD_NON_TENSOR_ATTR)
    stack = attrs.get(TD_STACK_ATTR)
    codecs = unpickling_codecs(arr)
    if codecs:  # before zarr (and numcodecs, whatever its release) decodes a byte
        refuse_pickle(allow_pickle, key=key, location=location, source="codec")
    if marker is not None:
        encoding = marker.get("encoding") if isinstance(marker, dict) else None
        if encoding == ENCODING_PICKLE:
            refuse_pickle(allow_pickle, key=key, location=location)
        with _codecs_may_unpickle(codecs):
            raw = np.asarray(arr[...])
        if raw.dtype != np.uint8 or raw.ndim != 1:
            raise PtdValueError(
                f"Corrupt non-tensor payload (key {key!r} in {location}): expected "
                f"a 1-D uint8 array, got {raw.dtype} of shape {list(raw.shape)}"
            )
        value = decode_payload(
            raw.tobytes(), encoding, allow_pickle=allow_pickle, key=key, location=location
        )
        if stack is None:
            return NonTensorPayload(value)
        stack_shape = parse_stack_shape(stack)
        assert stack_shape is not None  # checked by check_stack_marker
        if not has_nested_shape(value, stack_shape):
            raise PtdValueError(
                f"Corrupt non-tensor stack (key {key!r} in {location}): the decoded "
                f"value is not a nested list of shape {list(stack_shape)}"
            )
        shape = selection_shape(stack_shape, selection)
        value = select_nested(value, selection)
        return NonTensorPayload(value, is_stack=bool(shape), stack_shape=shape)
    if stack is not None or (as_stack and arr.ndim):
        with _codecs_may_unpickle(codecs):
            return NonTensorPayload.of_rows(read_rows(arr, selection))
    with _codecs_may_unpickle(codecs):
        value = arr[...] if arr.ndim else arr[()]
    if isinstance(value, np.ndarray) and value.dtype.kind == "T":
        value = value.astype(object)
    elif isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    return NonTensorPayload(value)
