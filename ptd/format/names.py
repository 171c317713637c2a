"""Every on-disk name ptd reads or writes, in one place.

The names shared with tensordict 0.15 are fixed by its format (see
``docs/format.md``); the ``__ptd_*`` names are ptd's own extensions, which tensordict
ignores.
"""

from __future__ import annotations

# --- shared with tensordict ------------------------------------------------------------------
#: group attribute holding ``{"batch_size": [...], "version": 1[, "names": [...]]}``
TD_META_ATTR = "__tensordict__"
TD_META_VERSION = 1
#: h5 dataset attribute marking a string that tensordict (or ptd) wrote
TD_STR_ATTR = "__tensordict_str__"
#: attribute marking a NonTensorStack; its value is the stack shape
TD_STACK_ATTR = "__tensordict_stack__"
#: zarr array attribute marking a JSON/pickle payload: ``{"encoding": "json" | "pickle"}``
TD_NON_TENSOR_ATTR = "__tensordict_non_tensor__"
ENCODING_JSON = "json"
ENCODING_PICKLE = "pickle"

# --- ptd extensions --------------------------------------------------------------------------
#: dataset/array attribute naming the torch dtype when the stored numpy dtype differs from it
#: (bfloat16 stored as uint16 bits, float8 as uint8 bits)
PTD_DTYPE_ATTR = "__ptd_dtype__"
#: h5 string dataset attribute (``True``) marking a value ptd stored as JSON text (None, dicts,
#: lists of non-numbers...), since h5 has no payload arrays; tensordict reads it as the string
PTD_JSON_ATTR = "__ptd_json__"

#: h5 node attribute listing the names of the attributes ptd stored as JSON object text (dicts;
#: h5 has no mapping type); other string attributes are never decoded, even when they look
#: like JSON
PTD_JSON_ATTRS = "__ptd_json_attrs__"

#: string array attribute naming the kind of string (``"fixed_utf8:10"``) a conversion stored
#: in the nearest type the destination has (``ptd.storage.strings``)
STRING_TYPE_ATTR = "__ptd_string_type__"
#: zarr node attribute listing the attributes ptd stored as UTF-8 text that were bytes (JSON
#: has no bytes); they read back as bytes
PTD_BYTES_ATTRS = "__ptd_bytes_attrs__"
#: zarr node attribute listing the attributes holding floats JSON cannot (NaN, infinities),
#: stored as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (zarr's spelling of such
#: fill values); they read back as floats
PTD_FLOAT_ATTRS = "__ptd_float_attrs__"
#: node attribute holding a node's original name when the store holds it under an escaped name
#: (a name the format cannot hold as it is; ``ptd.format.keynames``)
PTD_NAME_ATTR = "__ptd_name__"
#: zarr array attribute recording the maxshape of the HDF5 dataset it was copied from (a list,
#: ``null`` for an unlimited dim), restored by a copy back to HDF5
PTD_MAXSHAPE_ATTR = "__ptd_maxshape__"

#: attributes ptd manages itself; user attributes are everything else
RESERVED_ATTRS = frozenset(
    {
        TD_META_ATTR,
        TD_STR_ATTR,
        TD_STACK_ATTR,
        TD_NON_TENSOR_ATTR,
        PTD_DTYPE_ATTR,
        PTD_JSON_ATTR,
        PTD_JSON_ATTRS,
        STRING_TYPE_ATTR,
        PTD_BYTES_ATTRS,
        PTD_FLOAT_ATTRS,
        PTD_NAME_ATTR,
        PTD_MAXSHAPE_ATTR,
    }
)

# --- memmap directories ----------------------------------------------------------------------
MEMMAP_META = "meta.json"
MEMMAP_SUFFIX = ".memmap"
MEMMAP_FORMAT_VERSION = 1
MEMMAP_TD_TYPE = "<class 'tensordict._td.TensorDict'>"
MEMMAP_TD_CLASS = "tensordict:TensorDict"
MEMMAP_NON_TENSOR_TYPE = "<class 'tensordict.tensorclass.NonTensorData'>"
MEMMAP_NON_TENSOR_STACK_TYPE = "<class 'tensordict.tensorclass.NonTensorStack'>"
MEMMAP_NON_TENSOR_STACK_CLASS = "tensordict:NonTensorStack"
MEMMAP_PICKLE_FILE = "other.pickle"
MEMMAP_PTD_TYPE = "<class 'tensordict.persistent.PersistentTensorDict'>"
MEMMAP_PTD_CLASS = "tensordict:PersistentTensorDict"
#: the pickle a NonTensorStack dir holds when its data is not JSON (meta "data" names it)
MEMMAP_STACK_PICKLE_FILE = "pickle.pkl"
#: ptd's own field in a node's meta.json: ``{"attrs": {...}}``, the node's user attributes
#: (a dict without ``type``/``dtype``/``shape``: tensordict's loader skips it)
MEMMAP_PTD_FIELD = "_ptd"
#: in an entry of meta.json: the key's own name, when the entry is stored under an escaped one
MEMMAP_ENTRY_NAME = "_ptd_name"
#: in an entry of meta.json: the leaf's user attributes
MEMMAP_ENTRY_ATTRS = "_ptd_attrs"
#: in an entry of meta.json: the shape of the string array a ``NonTensorData`` was written from
#: (one value, the nested list of its strings, where the array does not fit its group's batch
#: size): a 1-element array stays ``[1]``, not a 0-d value
MEMMAP_ENTRY_SHAPE = "_ptd_shape"
#: the fields of a tensordict node's meta.json (tensordict's and ptd's); a key with one of these
#: names is stored under its escaped name (ptd.format.memmap_dir.stored_entry_name)
MEMMAP_NODE_FIELDS = frozenset(
    {"shape", "device", "_type", "_format_version", "_class", "_names", MEMMAP_PTD_FIELD}
)
#: the longest file name (in UTF-8 bytes) the common file systems hold (ext4, XFS, APFS, NTFS)
NAME_MAX_BYTES = 255

# --- format detection ------------------------------------------------------------------------
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
ZARR_JSON = "zarr.json"
#: a Zarr v2 group's metadata document (v2 stores are read, never written)
ZARR_V2_GROUP = ".zgroup"
