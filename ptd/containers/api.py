"""The public surface of ``TensorDictBase``: every public name of tensordict 0.15.3's
``TensorDictBase``, and what ptd does with it.

Each name has one status:

- ``IMPLEMENTED`` -- on :class:`ptd.TensorDictBase` with tensordict's signature and semantics
  (the value is the method family, which the differential tests use);
- ``REFUSED`` -- on :class:`ptd.TensorDictBase` (the in-memory :class:`ptd.TensorDict` has it), but
  a :class:`ptd.PersistentTensorDict` raises, as tensordict's own PersistentTensorDict does
  (its bases ``_NoShapeOps, _NoVmap, _NoSetNonTensor, _NoSelectExclude``) or, for a few,
  as ptd decides (the reason says which);
- ``OUT_OF_SCOPE`` -- not provided, for the reason given (issue 12: tensorclass, lazy stacks,
  vmap/functional/nn, ``TensorDict.map``, CUDA, private internals; and the families listed
  below with their reasons).

``GAPS`` names the ``IMPLEMENTED``/``REFUSED`` names that ptd does not have yet: the list
says where ptd is going, ``GAPS`` what is still missing. ``PTD_ONLY`` lists the public names
of ``ptd.TensorDictBase`` that tensordict's base class does not have.
``tests/containers/test_api_surface.py`` checks all of it against ``dir()`` of both classes, so that a
name tensordict adds, or one ptd gains or loses, fails a test until it is listed here.

>>> from ptd.containers.api import IMPLEMENTED, REFUSED, OUT_OF_SCOPE, status
>>> status("sum"), status("view"), status("map")
('implemented', 'refused', 'out of scope')
>>> IMPLEMENTED["logsumexp"]
'reductions'
>>> "view" in REFUSED and "lazy_stack" in OUT_OF_SCOPE
True
"""

from __future__ import annotations

__all__ = [
    "DUNDERS",
    "DUNDER_GAPS",
    "GAPS",
    "IMPLEMENTED",
    "KNOWN_DIFFERENCES",
    "OUT_OF_SCOPE",
    "PTD_ONLY",
    "REFUSED",
    "TENSORDICT_VERSION",
    "all_names",
    "status",
]

#: the tensordict release whose ``TensorDictBase`` this table describes
TENSORDICT_VERSION = "0.15.3"

# ---------------------------------------------------------------------------------------------
# IMPLEMENTED: name -> method family
# ---------------------------------------------------------------------------------------------
_FAMILIES: dict[str, str] = {
    # keys, entries and structure
    "keys entries": (
        "keys values items get set set_ setdefault pop popitem del_ rename_key_ update update_ "
        "update_at_ get_at set_at_ copy_at_ fill_ zero_ clear create_nested is_empty entry_class "
        "sorted_keys split_keys separates non_tensor_items get_non_tensor is_non_tensor "
        "filter_non_tensor_data filter_empty_ flatten_keys unflatten_keys replace depth"
    ),
    # batch size, names, dtype/device properties
    "properties": (
        "batch_size batch_dims shape ndim dim ndimension numel size names refine_names rename "
        "rename_ device dtype is_floating_point is_locked is_contiguous is_cpu is_cuda is_meta "
        "is_shared data data_ptr bytes get_item_shape param_count requires_grad grad "
        "auto_batch_size_ auto_device_ clear_device_"
    ),
    # locking (also used as context managers)
    "locking": "lock_ unlock_",
    # data loading (ptd.data): copies every leaf into pinned memory (needs an accelerator)
    "data loading": "pin_memory",
    # apply family
    "apply": "apply apply_ named_apply",
    # reductions (dim=, keepdim=, dim='feature', reduce=True)
    "reductions": (
        "sum mean nansum nanmean prod std var min max amin amax cummin cummax logsumexp "
        "quantile softmax norm all any"
    ),
    # pointwise math, out of place and in place
    "pointwise": (
        "abs abs_ acos acos_ add add_ addcdiv addcdiv_ addcmul addcmul_ asin asin_ atan atan_ "
        "bitwise_and ceil ceil_ clamp clamp_max clamp_max_ clamp_min clamp_min_ cos cos_ cosh "
        "cosh_ div div_ erf erf_ erfc erfc_ exp exp_ expm1 expm1_ floor floor_ frac frac_ lerp "
        "lerp_ lgamma lgamma_ log log10 log10_ log1p log1p_ log2 log2_ log_ logical_and "
        "maximum maximum_ minimum minimum_ mod mul mul_ neg neg_ pow pow_ reciprocal "
        "reciprocal_ round round_ rsub sigmoid sigmoid_ sign sign_ sin sin_ sinh sinh_ sqrt "
        "sqrt_ sub sub_ tan tan_ tanh tanh_ trunc trunc_ isfinite isnan isneginf "
        "isposinf isreal masked_fill masked_fill_"
    ),
    # batch-shape operations
    "shape": (
        "view reshape transpose permute squeeze unsqueeze flatten unflatten expand expand_as "
        "broadcast_to movedim moveaxis swapaxes swapdims flip fliplr flipud roll rot90 narrow "
        "tile repeat repeat_interleave atleast_1d atleast_2d atleast_3d unbind split chunk "
        "tensor_split pad"
    ),
    # functions that are also torch functions
    "torch functions": (
        "gather where masked_select cat stack maybe_dense_stack cat_tensors stack_tensors "
        "cat_from_tensordict stack_from_tensordict"
    ),
    # new tensordicts from a tensordict, class constructors
    "constructors": (
        "empty new_empty new_full new_ones new_tensor new_zeros clone copy copy_ contiguous "
        "from_dict from_dict_instance from_any from_namedtuple from_pytree from_struct_array "
        "from_tuple from_list fromkeys from_schema from_h5 from_zarr from_dataclass"
    ),
    # conversions and casts
    "conversions": (
        "to to_dict to_tensordict to_namedtuple to_pytree to_struct_array tolist numpy "
        "as_tensor cpu type bool bfloat16 half float double int float16 float32 float64 "
        "complex32 complex64 complex128 int8 int16 int32 int64 uint8 uint16 uint32 uint64 "
        "detach detach_ requires_grad_ zero_grad backward state_dict load_state_dict attrs "
        "to_h5 to_zarr pack"
    ),
    # the memmap format (ptd.containers.memmap writes and reads it)
    "memmap": (
        "memmap memmap_ memmap_like load_memmap load_memmap_ save load load_ dumps saved_path "
        "is_memmap make_memmap make_memmap_from_storage make_memmap_from_tensor memmap_refresh_"
    ),
    # refused on PersistentTensorDict; the in-memory TensorDict implements them
    "select exclude": "select exclude rename_keys set_non_tensor share_memory_",
}

IMPLEMENTED: dict[str, str] = {
    name: family for family, names in _FAMILIES.items() for name in names.split()
}

# ---------------------------------------------------------------------------------------------
# REFUSED on PersistentTensorDict: name -> reason (the names are also in IMPLEMENTED: the
# in-memory TensorDict has them)
# ---------------------------------------------------------------------------------------------
_SHAPE = "shape op: a file-backed tensordict cannot give views (tensordict's _NoShapeOps)"
REFUSED: dict[str, str] = {
    "view": _SHAPE + "; view(dtype) and a view to the same batch size work, as in tensordict",
    "transpose": _SHAPE,
    "permute": _SHAPE,
    "squeeze": _SHAPE + "; a squeeze that changes nothing returns self",
    "unsqueeze": _SHAPE,
    "movedim": _SHAPE + " (a permute)",
    "moveaxis": _SHAPE + " (a permute)",
    "swapaxes": _SHAPE + " (a transpose)",
    "swapdims": _SHAPE + " (a transpose)",
    "atleast_1d": _SHAPE + " (an unsqueeze); returns self when nothing is added",
    "atleast_2d": _SHAPE + " (an unsqueeze); returns self when nothing is added",
    "atleast_3d": _SHAPE + " (an unsqueeze); returns self when nothing is added",
    "select": "tensordict's _NoSelectExclude: a shallow copy would share the file",
    "exclude": "tensordict's _NoSelectExclude: a shallow copy would share the file",
    "rename_keys": "tensordict's _NoSelectExclude: renaming a copy would rename the stored keys",
    "set_non_tensor": "tensordict's _NoSetNonTensor; set(key, NonTensorData(...)) writes one",
    "share_memory_": "file-backed: the leaves are read into new tensors on each access",
    "memmap_": "in place from a file is refused as in tensordict; memmap() returns a copy",
}

# ---------------------------------------------------------------------------------------------
# OUT_OF_SCOPE: name -> reason
# ---------------------------------------------------------------------------------------------
_DIST = "distributed communication (torch.distributed / UCXX): send an in-memory copy instead"
_FORMATS = "another storage format (pandas/pyarrow/json/csv/MosaicML/Redis): not ptd's"
OUT_OF_SCOPE: dict[str, str] = {
    **dict.fromkeys(
        [
            "all_gather",
            "all_reduce",
            "arecv",
            "asend",
            "broadcast",
            "gather_and_stack",
            "init_remote",
            "from_remote_init",
            "irecv",
            "isend",
            "recv",
            "reduce",
            "scatter",
            "send",
        ],
        _DIST,
    ),
    **dict.fromkeys(
        [
            "from_csv",
            "to_csv",
            "from_json",
            "to_json",
            "from_pandas",
            "to_pandas",
            "from_parquet",
            "to_parquet",
            "to_mds",
            "to_store",
        ],
        _FORMATS,
    ),
    "from_module": "nn: tensordicts of module parameters",
    "from_modules": "nn: tensordicts of module parameters",
    "to_module": "nn: tensordicts of module parameters",
    "lazy_stack": "lazy stacks",
    "to_lazystack": "lazy stacks",
    "densify": "lazy stacks and nested (jagged) tensors",
    "to_padded_tensor": "nested (jagged) tensors, which ptd does not store",
    "map": "TensorDict.map (worker processes)",
    "map_iter": "TensorDict.map (worker processes)",
    "cuda": "CUDA",
    "record_stream": "CUDA streams",
    "pin_memory_": "CUDA pinned memory",
    "clear_refs_for_compile_": "torch.compile internals",
    "consolidate": "consolidated single-storage layout, an in-memory transport optimisation",
    "from_consolidated": "consolidated single-storage layout",
    "is_consolidated": "consolidated single-storage layout",
    "qint8": "quantized dtypes cannot be stored in h5 or zarr",
    "qint32": "quantized dtypes cannot be stored in h5 or zarr",
    "quint8": "quantized dtypes cannot be stored in h5 or zarr",
    "quint4x2": "quantized dtypes cannot be stored in h5 or zarr",
}

# ---------------------------------------------------------------------------------------------
# GAPS: IMPLEMENTED names that ptd.TensorDictBase does not have yet (on the branch this file was
# written on and on the method branches of issue 12 merged together)
# ---------------------------------------------------------------------------------------------
GAPS: frozenset[str] = frozenset()

#: public names of ptd.TensorDictBase that tensordict's TensorDictBase does not have
PTD_ONLY: dict[str, str] = {
    "leaf_meta": "shape and dtype of a leaf without reading it (ptd.EntryMeta)",
    "clamp_": "in-place clamp(min, max), next to tensordict's clamp_min_/clamp_max_",
}

#: the operator and protocol methods of tensordict's TensorDictBase that ptd has too
#: (object's and the ABC machinery's are left out) -> family
DUNDERS: dict[str, str] = {
    **dict.fromkeys(
        [
            "__abs__",
            "__neg__",
            "__invert__",
            "__add__",
            "__radd__",
            "__iadd__",
            "__sub__",
            "__rsub__",
            "__isub__",
            "__mul__",
            "__rmul__",
            "__imul__",
            "__truediv__",
            "__rtruediv__",
            "__itruediv__",
            "__pow__",
            "__rpow__",
            "__ipow__",
            "__mod__",
            "__and__",
            "__rand__",
            "__or__",
            "__ror__",
            "__xor__",
            "__rxor__",
        ],
        "operators",
    ),
    **dict.fromkeys(
        ["__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__bool__"], "equality"
    ),
    **dict.fromkeys(
        [
            "__getitem__",
            "__setitem__",
            "__delitem__",
            "__contains__",
            "__iter__",
            "__len__",
            "__reversed__",
        ],
        "keys entries",
    ),
    **dict.fromkeys(["__enter__", "__exit__"], "locking"),
    **dict.fromkeys(["__copy__", "__deepcopy__"], "constructors"),
    "__torch_function__": "torch functions",
}

#: DUNDERS that ptd does not define yet (none today)
DUNDER_GAPS: frozenset[str] = frozenset()


def status(name: str) -> str:
    """``"implemented"``, ``"refused"`` (on PersistentTensorDict), ``"out of scope"``,
    ``"ptd only"`` or ``"unknown"`` for a public name."""
    if name in REFUSED:
        return "refused"
    if name in IMPLEMENTED:
        return "implemented"
    if name in OUT_OF_SCOPE:
        return "out of scope"
    if name in PTD_ONLY:
        return "ptd only"
    return "unknown"


def all_names() -> frozenset[str]:
    """Every tensordict ``TensorDictBase`` name this table classifies."""
    return frozenset(IMPLEMENTED) | frozenset(OUT_OF_SCOPE)


#: deliberate differences from tensordict 0.15.3, keyed by differential case id
#: (tests/diff_cases.py), optionally ``@container`` or ``@kind@container`` -> reason. The table of
#: deliberate differences in docs/tensordict-compat.md lists the same.
_ZARR_ORDER = (
    "key order in a zarr store: tensordict 0.15.3 lists the keys in the order zarr's listing "
    "gives them (the store's, often the file system's), ptd by name on every backend, as "
    "h5py lists an HDF5 group; the two agree when the listing happens to be in name order"
)
_SAVED_PATH = (
    "memmap() of a PersistentTensorDict: tensordict 0.15.3's result has no saved path "
    "(saved_path raises); ptd's is mapped from the prefix and saved_path gives it"
)
_STORE_GRAD = (
    "requires_grad_() on a file-backed store raises GradientError (RuntimeError): its leaves are "
    "read into new tensors and never carry a graph; tensordict 0.15.3 sets the flag on those "
    "copies and returns, so nothing requires gradients afterwards (it raises only for an "
    "integer leaf)"
)
_H5_NONE_WRITE = (
    "writing through a view with a None (new dim) in its index on h5: tensordict 0.15.3 raises "
    "TypeError (h5py: Selection can't process None); ptd writes the selected rows"
)
KNOWN_DIFFERENCES: dict[str, str] = {
    "abs_-mixed-dtypes@memory": (
        "an in-place op that fails on one leaf (abs_ of a bool) writes nothing in ptd; "
        "tensordict 0.15.3 has already changed the leaves before it"
    ),
    "values@nested@zarr": _ZARR_ORDER,
    "values@empty_batch@zarr": _ZARR_ORDER,
    "popitem@zarr": _ZARR_ORDER,
    "to_namedtuple@zarr": _ZARR_ORDER,
    "cat_tensors@zarr": _ZARR_ORDER + " (the first key's dtype decides the result's)",
    "stack_tensors@zarr": _ZARR_ORDER + " (the first key's dtype decides the result's)",
    "to_struct_array@zarr": _ZARR_ORDER + " (the order of the fields)",
    "clone@zarr": (
        "tensordict 0.15.3 fails to clone a zarr store without a destination (FileExistsError "
        "on its temporary path); ptd copies it"
    ),
    "__torch_function__@zarr": (
        "torch.clone of a zarr store: tensordict 0.15.3 fails (FileExistsError, as clone); "
        "ptd copies it"
    ),
    "copy_at_@h5": (
        "tensordict 0.15.3 raises on copy_at_ of a PersistentTensorDict; ptd writes only the "
        "rows asked"
    ),
    "copy_at_@zarr": (
        "tensordict 0.15.3 raises on copy_at_ of a PersistentTensorDict; ptd writes only the "
        "rows asked"
    ),
    "separates@h5": (
        "ptd removes the separated entries from the file, as tensordict documents; tensordict "
        "0.15.3 leaves them in the file"
    ),
    "separates@zarr": (
        "ptd removes the separated entries from the store, as tensordict documents; tensordict "
        "0.15.3 leaves them in the store"
    ),
    "squeeze@h5": "squeeze() with nothing to squeeze: ptd returns the store, tensordict refuses",
    "squeeze@zarr": "squeeze() with nothing to squeeze: ptd returns the store, tensordict refuses",
    "saved_path@h5": _SAVED_PATH,
    "saved_path@zarr": _SAVED_PATH,
    "cat_from_tensordict@zarr": _ZARR_ORDER,
    "__setitem__-none@h5": _H5_NONE_WRITE,
    "__setitem__-none-broadcast@h5": _H5_NONE_WRITE,
    "__setitem__-none-number@h5": _H5_NONE_WRITE,
    "update_-none-view@h5": _H5_NONE_WRITE,
    "set_-none-view@h5": _H5_NONE_WRITE,
    "add_-none-view@h5": _H5_NONE_WRITE,
    "stack_from_tensordict@zarr": _ZARR_ORDER,
    "set_non_tensor-through-leaf@memory": (
        "set_non_tensor with a key that runs through a tensor: tensordict 0.15.3 fails with "
        "AttributeError ('Tensor' object has no attribute '_set_non_tensor'); ptd raises "
        "PtdTypeError (a TypeError) naming the key"
    ),
    "requires_grad_-direct-float@h5": _STORE_GRAD,
    "requires_grad_-direct-float@zarr": _STORE_GRAD,
}
