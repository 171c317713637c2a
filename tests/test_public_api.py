"""The public import paths of the last release (0.1.0) keep working (issue 37, part 6).

Each module below was importable in 0.1.0 and documented as public (the README, the package's
``__all__``, the docstrings that pointed users at it); each name listed under it must still be
importable from there. A later move of a package must leave a thin re-export behind: add its old
path here instead of deleting a line.
"""

from __future__ import annotations

import importlib

import pytest

#: module -> the names code written against 0.1.0 imports from it
PUBLIC_0_1_0: dict[str, tuple[str, ...]] = {
    "ptd": (
        "TensorDict",
        "TensorDictBase",
        "EntryMeta",
        "is_leaf_nontensor",
        "NonTensorData",
        "NonTensorStack",
        "PersistentTensorDict",
        "convert",
        "ConvertResult",
        "ConvertOptions",
        "convert_distributed",
        "info",
        "StoreInfo",
        "validate",
        "ValidationReport",
        "StoreLocation",
        "TdMeta",
        "PtdError",
        "errors",
        "memmap",
        "__version__",
    ),
    "ptd.errors": (
        "PtdError",
        "PtdKeyError",
        "PtdValueError",
        "BatchSizeError",
        "PtdTypeError",
        "PtdIndexError",
        "StoreNotFoundError",
        "StoreExistsError",
        "ReadOnlyError",
        "CorruptStoreError",
        "UnsupportedDtypeError",
        "UnsupportedOperationError",
        "PickleRefusedError",
        "ClosedStoreError",
        "StoreLockedError",
        "UnknownBackendError",
        "NotSupportedError",
        "ArgumentError",
        "RemoteAccessError",
        "StoreIOError",
        "PtdMemoryError",
        "ConvertError",
    ),
    # moved to ptd.containers.memmap by the redesign; ptd.memmap re-exports it
    "ptd.memmap": (
        "MemmapSummary",
        "export_memmap",
        "memmap_tensordict",
        "memmap_inplace",
        "load_memmap",
        "tensor_nbytes",
        "encode_key",
        "decode_key",
        "SLAB_BYTES",
    ),
    "ptd.memmap.loader": ("encode_key", "decode_key", "load_dir", "map_leaf", "MODES"),
    "ptd.memmap.writer": (
        "MemmapSummary",
        "export_memmap",
        "tensor_nbytes",
        "memmap_tensordict",
        "memmap_inplace",
        "load_memmap",
    ),
    "ptd.format.tdmeta": ("TdMeta", "parse_td_meta"),
    "ptd.storage.location": ("StoreLocation",),
    "ptd.transfer.options": ("ConvertOptions", "ConvertResult"),
    "ptd.report.info": ("info", "StoreInfo"),
    "ptd.report.validate": ("validate", "ValidationReport"),
}


@pytest.mark.parametrize("module", sorted(PUBLIC_0_1_0))
def test_the_public_names_of_0_1_0_still_import(module: str) -> None:
    mod = importlib.import_module(module)
    missing = [name for name in PUBLIC_0_1_0[module] if not hasattr(mod, name)]
    assert not missing, f"{module} lost {missing}"


def test_from_ptd_memmap_import_load_memmap() -> None:
    # the two spellings the issue names, and the old path gives the same objects as the new
    import ptd.memmap
    from ptd.containers import memmap as moved
    from ptd.memmap import load_memmap

    assert load_memmap is moved.load_memmap
    import ptd

    assert ptd.memmap.export_memmap is moved.export_memmap


def test_every_name_in_ptd_all_imports() -> None:
    import ptd

    missing = [name for name in ptd.__all__ if not hasattr(ptd, name)]
    assert not missing, missing
