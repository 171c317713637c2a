"""Object references and soft links in Zarr, spelled as hdmf-zarr (NWB's Zarr backend) spells
them: the paths they name.

Zarr has neither references nor links. hdmf-zarr stores both as the path of the object they
name, and ptd reads and writes that convention, so a store hdmf-zarr wrote gives its
references to ptd, and ptd's zarr copies of an HDF5 file (an NWB file) speak the same
language:

* a **reference attribute** (NWB's ``.specloc``, hdmf's ``target``) is the JSON object
  ``{"zarr_dtype": "object", "value": {"source": ".", "path": "/x/y"}}``;
* a **soft link** is an entry of its parent group's ``zarr_link`` attribute:
  ``[{"name": "device", "source": ".", "path": "/general/devices/probe"}]``;
* a **dataset of object references** has the attribute ``zarr_dtype: "object"``; each
  element names its object as ``{"source": ".", "path": "/x/y"}``. hdmf-zarr writes Zarr v2
  arrays of dtype ``|O`` whose elements are those dicts, encoded by numcodecs' JSON codec
  (``json2``). Zarr v3 has no codec for arbitrary JSON values (zarr-python 3 refuses an
  object dtype), so ptd writes such an array as a Zarr v3 **string array whose elements
  are the JSON text of hdmf-zarr's element** (``'{"path": "/x/y", "source": "."}'``, ``""``
  for a null reference): the closest honest form, since it keeps hdmf-zarr's spelling
  element for element (``json.loads`` gives its dict back) and any Zarr v3 reader opens it,
  as strings. ptd reads both forms as its reference kind (``ArrayMeta.reference ==
  "object"``, values: the paths), as it reads an HDF5 reference dataset.

``source`` names the file the object lives in; ``"."`` is this store. A reference into
another store is never followed: reading it raises, naming the source. A path is absolute
in the store (``/a/b``) and never steps up (``..``): one that does is refused as damaged
metadata. None of this is a real reference: zarr tools see strings and JSON, which is why
``convert`` says so in its notes when it writes them.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Mapping
from typing import Any

import numpy as np

from ptd.errors import CorruptStoreError, UnsupportedOperationError

__all__ = [
    "LINK_ATTR",
    "OBJECT",
    "REF_DTYPE_ATTR",
    "THIS_STORE",
    "BadReference",
    "OtherStore",
    "absolute_target",
    "attr_paths",
    "decode_element",
    "decode_elements",
    "decode_v2_chunk",
    "encode_attr",
    "encode_element",
    "is_reference_attr",
    "is_v2_reference_array",
    "link_entries",
    "read_error",
    "with_link",
]

#: the attribute marking a reference dataset (value :data:`OBJECT`) and a reference attribute
REF_DTYPE_ATTR = "zarr_dtype"
OBJECT = "object"
#: the group attribute listing its soft links
LINK_ATTR = "zarr_link"
#: hdmf-zarr's ``source`` for an object in the same store
THIS_STORE = "."


class BadReference(ValueError):
    """A reference or link spelled wrongly: ``str(err)`` says how."""


class OtherStore(ValueError):
    """A reference or link into another store (its ``source``), never followed."""


def _clean_path(path: Any) -> str:
    """The object path ``path`` names, normalized (``/a/b``); :class:`BadReference` for one
    that is not a str, or steps up with ``..``."""
    if not isinstance(path, str):
        raise BadReference(f"its path is {type(path).__name__} {path!r}, not a string")
    if not path:
        return ""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise BadReference(f"its path {path!r} steps up with '..' (it must stay in the store)")
    return "/" + "/".join(parts)


def decode_element(value: Any) -> str:
    """The path an hdmf-zarr reference element names (``""``: a null reference): a dict
    ``{"source": ".", "path": ...}``, or its JSON text (ptd's Zarr v3 form).

    >>> decode_element({"source": ".", "path": "/general/devices/probe"})
    '/general/devices/probe'
    >>> decode_element('{"path": "/a", "source": "."}'), decode_element("")
    ('/a', '')
    """
    if value is None or value == "":
        return ""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise BadReference(f"element {value[:60]!r} is not JSON") from None
    if not isinstance(value, dict):
        raise BadReference(f"element {value!r} is not an object with a 'path'")
    if "path" not in value:
        raise BadReference(f"element {value!r} has no 'path'")
    source = value.get("source", THIS_STORE)
    if source != THIS_STORE:
        raise OtherStore(f"it points into another store (source {source!r}), never followed")
    return _clean_path(value["path"])


def encode_element(path: str) -> str:
    """ptd's Zarr v3 element for a reference to ``path``: the JSON text of hdmf-zarr's dict.

    >>> encode_element("/a/b"), encode_element("")
    ('{"source": ".", "path": "/a/b"}', '')
    """
    if not path:
        return ""
    return json.dumps({"source": THIS_STORE, "path": _clean_path(path)})


def decode_elements(values: Any) -> np.ndarray:
    """The paths (an object array of str) of an array of elements (:func:`decode_element`)."""
    arr = np.asarray(values, dtype=object)
    out = np.empty(arr.shape, dtype=object)
    for i, v in np.ndenumerate(arr):
        out[i] = decode_element(v)
    return out


def is_reference_attr(value: Any) -> bool:
    """Whether an attribute value is a reference (``{"zarr_dtype": "object", ...}``)."""
    return isinstance(value, dict) and value.get(REF_DTYPE_ATTR) == OBJECT


def attr_paths(value: Any) -> Any:
    """The path (or list of paths) a reference attribute names (:func:`is_reference_attr`).

    >>> attr_paths({"zarr_dtype": "object", "value": {"source": ".", "path": "/a"}})
    '/a'
    """
    if "value" not in value:
        raise BadReference("it has no 'value'")
    inner = value["value"]
    if isinstance(inner, list):
        return [decode_element(v) for v in inner]
    return decode_element(inner)


def encode_attr(paths: Any) -> dict[str, Any]:
    """A reference attribute naming ``paths`` (a path, ``""`` for null, or a nested list)."""

    def one(p: Any) -> Any:
        if isinstance(p, list):
            return [one(x) for x in p]
        return {"source": THIS_STORE, "path": _clean_path(p)} if p else None

    return {REF_DTYPE_ATTR: OBJECT, "value": one(paths)}


def link_entries(attrs: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """``(links, bad)`` of a group's ``zarr_link`` attribute: name -> target path, and the
    entries that cannot be links (a name or ``"zarr_link[i]"`` -> why)."""
    raw = attrs.get(LINK_ATTR)
    links: dict[str, str] = {}
    bad: dict[str, str] = {}
    if raw is None:
        return links, bad
    if not isinstance(raw, list):
        bad[LINK_ATTR] = f"{LINK_ATTR} is {type(raw).__name__}, not a list of links"
        return links, bad
    for i, entry in enumerate(raw):
        where = f"{LINK_ATTR}[{i}]"
        if not isinstance(entry, dict):
            bad[where] = f"a soft link in {LINK_ATTR} is {entry!r}, not an object"
            continue
        name = entry.get("name")
        if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
            bad[where] = f"a soft link in {LINK_ATTR} has the name {name!r}, not a node name"
            continue
        try:
            if "path" not in entry:
                raise BadReference("it has no 'path'")
            source = entry.get("source", THIS_STORE)
            if source != THIS_STORE:
                raise OtherStore(
                    f"it points into another store (source {source!r}), never followed"
                )
            target = _clean_path(entry["path"])
            if not target:
                raise BadReference("its path is empty")
        except (BadReference, OtherStore) as err:
            bad[name] = f"a soft link ({LINK_ATTR}) that cannot be followed: {err}"
            continue
        links[name] = target
    return links, bad


def absolute_target(parent: tuple[str, ...], target: str) -> str:
    """A link target as an absolute path: ``target`` as is when absolute, else resolved from
    the link's ``parent`` group (hdmf-zarr's paths are absolute).

    >>> absolute_target(("a", "b"), "../c"), absolute_target(("a",), "/x")
    ('/a/c', '/x')
    """
    if target.startswith("/"):
        return posixpath.normpath(target)
    return posixpath.normpath("/".join(("",) + parent + (target,)))


def with_link(attrs: Mapping[str, Any], name: str, target: str) -> list[dict[str, str]]:
    """The ``zarr_link`` list of a group with ``attrs`` after adding the link ``name`` ->
    ``target`` (an absolute path; one of that name replaced)."""
    raw = attrs.get(LINK_ATTR)
    kept = []
    if isinstance(raw, list):
        kept = [e for e in raw if not (isinstance(e, dict) and e.get("name") == name)]
    kept.append({"name": name, "source": THIS_STORE, "path": _clean_path(target)})
    return kept


def read_error(location: str, key: str, err: Exception) -> Exception:
    """The ptd error for a reference of key ``key`` in ``location`` that cannot be read."""
    if isinstance(err, OtherStore):
        return UnsupportedOperationError(
            f"cannot read the references of key {key!r} in {location}: {err}"
        )
    return CorruptStoreError(
        f"cannot read the references of key {key!r} in {location}: a reference is malformed: {err}"
    )


#: the compressors a hdmf-zarr Zarr v2 reference array may name (numcodecs ids); a filter
#: other than numcodecs' JSON codec (a pickle codec would run code) is refused
_V2_COMPRESSORS = frozenset({"blosc", "zstd", "gzip", "zlib", "bz2", "lzma", "lz4"})
_V2_ELEMENT_CODEC = "json2"


def is_v2_reference_array(zarray: Any, zattrs: Any) -> bool:
    """Whether a Zarr v2 array's documents (``.zarray``, ``.zattrs``) are hdmf-zarr's object
    reference dataset: dtype ``|O`` with numcodecs' JSON codec, ``zarr_dtype: "object"``."""
    if not isinstance(zarray, dict) or not isinstance(zattrs, dict):
        return False
    filters = zarray.get("filters") or []
    return (
        zattrs.get(REF_DTYPE_ATTR) == OBJECT
        and zarray.get("dtype") == "|O"
        and isinstance(filters, list)
        and any(isinstance(f, dict) and f.get("id") == _V2_ELEMENT_CODEC for f in filters)
    )


def decode_v2_chunk(zarray: Mapping[str, Any], raw: bytes) -> np.ndarray:
    """The elements (an object array) of one chunk of a hdmf-zarr Zarr v2 reference array:
    its compressor undone, then numcodecs' JSON codec. Only the codecs named in
    :data:`_V2_COMPRESSORS` and the JSON filter are run; anything else is refused."""
    import numcodecs

    compressor = zarray.get("compressor")
    data: Any = raw
    if compressor is not None:
        if not isinstance(compressor, dict) or compressor.get("id") not in _V2_COMPRESSORS:
            raise BadReference(f"its compressor {compressor!r} is not one ptd decodes here")
        data = numcodecs.get_codec(dict(compressor)).decode(data)
    filters = list(zarray.get("filters") or [])
    for spec in reversed(filters):
        if not isinstance(spec, dict) or spec.get("id") != _V2_ELEMENT_CODEC:
            raise BadReference(f"its filter {spec!r} is not numcodecs' JSON codec")
        data = numcodecs.get_codec(dict(spec)).decode(data)
    return np.asarray(data, dtype=object)
