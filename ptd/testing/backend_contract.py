"""The :class:`~ptd.storage.api.Backend` contract as a reusable test class, in the manner of
``zarr.testing.store.StoreTests``: the tests are written once against the interface, and each
backend's test module subclasses :class:`BackendContract`, setting its hooks (class attributes
and methods, listed on the class). Everything format-specific comes from the hooks: this module
imports pytest, numpy and ptd's storage, errors and format layers, never h5py, zarr, torch or
tensordict. Tests that only one format has (its own objects as targets, its on-disk layout, its
interop with tensordict) stay in that format's test module, beside the subclass.

pytest collects only classes named ``Test*``, so ``BackendContract`` itself is never run; a
subclass is. For a new backend, ``tests/storage/backends/test_<format>_backend.py``::

    from pathlib import Path

    from ptd.storage.mine.backend import MyBackend
    from ptd.testing.backend_contract import BackendContract


    class TestMyBackend(BackendContract):
        backend_cls = MyBackend
        backend_name = "mine"
        suffix = ".mine"
        registered = False  # not in ptd's registry (get_backend, detect_backend)
        # what differs from the defaults, each flag's docstring says what it changes
        pickles_non_tensors = False

        def compressed_options(self) -> dict[str, object]:
            return {"codec": "zstd"}

        def make_corrupt(self, path: Path) -> None:
            path.write_bytes(b"not a store")

Required hooks: :attr:`~BackendContract.backend_cls`, :attr:`~BackendContract.backend_name`,
:attr:`~BackendContract.suffix`, :meth:`~BackendContract.compressed_options` and
:meth:`~BackendContract.make_corrupt` (the last two raise NotImplementedError until a
subclass gives them). The rest have defaults: a backend that behaves like the defaults sets
nothing more. A read-only backend sets ``writable = False``: every test that opens the store
for writing then skips, saying so, and :meth:`~BackendContract.test_read_only_backend` checks
that the write modes are refused.

``pip install ptd[test]`` brings pytest; nothing in ``ptd`` imports this module.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path as FsPath
from typing import Any, ClassVar

import numpy as np
import pytest

from ptd.errors import (
    ClosedStoreError,
    CorruptStoreError,
    PtdError,
    PtdKeyError,
    PtdTypeError,
    PtdValueError,
    ReadOnlyError,
    StoreExistsError,
    StoreNotFoundError,
)
from ptd.format.dtypes import BITS
from ptd.format.names import PTD_DTYPE_ATTR
from ptd.storage.api import GUARDED, MODES, Backend, NodeKind, ValueKind
from ptd.storage.location import ReopenSpec, StoreLocation
from ptd.storage.registry import detect_backend, entry, get_backend
from ptd.storage.stores import reopen

__all__ = ["NUMERIC_DTYPES", "SINGLE_NON_TENSORS", "BackendContract", "Opener"]

#: the torch dtype names stored as numpy dtypes of their own (every one, by default: see
#: :attr:`BackendContract.numeric_dtypes`)
NUMERIC_DTYPES: tuple[str, ...] = (
    "bool",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
)

#: case -> the non-tensor value :meth:`BackendContract.test_single_roundtrip` writes (how it
#: reads back is :attr:`BackendContract.non_tensor_readback`)
SINGLE_NON_TENSORS: dict[str, Any] = {
    "str": "héllo",
    "bytes": b"ab",
    "bytes_nul": b"a\x00",
    "int": 5,
    "float": 2.5,
    "bool": True,
    "none": None,
    "dict": {"k": [1, None], "s": "x"},
    "list_str": ["a", "b"],
    "list_num": [1, 2, 3],
    "bigint": 2**70,
    "complex": 1 + 2j,
}

#: ``opener(mode="w", target=None, **options)``: the :meth:`BackendContract.opener` fixture
Opener = Callable[..., Backend]


def _arr(shape: tuple[int, ...] = (4, 3), dtype: str = "float32") -> np.ndarray:
    return np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape).astype(dtype)


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same type (arrays: equal elements, both arrays)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(a, b)) and type(a) is type(b)
    return bool(a == b) and type(a) is type(b)


class BackendContract:
    """What every backend must do; subclass it as ``Test<Format>Backend`` and set the hooks.

    Each test opens its stores through the :meth:`opener` fixture (closed at teardown) at
    :meth:`target` (``tmp_path / "data<suffix>"``, a local path). The hooks, each documented
    where it is defined below: the class under test (:attr:`backend_cls`,
    :attr:`backend_name`, :attr:`suffix`); capability flags for what truly differs between
    formats (:attr:`writable`, :attr:`registered`, :attr:`stores_mixed_stacks` with
    :attr:`mixed_stack_refusal`, :attr:`stores_big_int_stacks`, :attr:`stores_nul_in_str`,
    :attr:`pickles_non_tensors`); expectations (:attr:`numeric_dtypes`,
    :attr:`non_tensor_readback`, :attr:`non_tensor_read_warnings`,
    :attr:`library_read_options`); and methods (:meth:`target`, :meth:`compressed_options`,
    :meth:`make_corrupt`, :meth:`write_string_columns`, :meth:`reopen`).
    """

    # --- required -------------------------------------------------------------------------
    #: the Backend subclass under test
    backend_cls: ClassVar[type[Backend]]
    #: its name: what ``Backend.name`` says, and its registry name
    backend_name: ClassVar[str]
    #: the suffix of a store's path (``".h5"``); ``""`` for a format without one
    suffix: ClassVar[str]

    # --- capability flags (what truly differs between formats) -----------------------------
    #: False for a read-only backend: ``open`` refuses every mode but ``"r"`` with
    #: ReadOnlyError (:meth:`test_read_only_backend`), and every test that opens a store for
    #: writing skips. Such a backend can only be checked on stores written by other means
    writable: ClassVar[bool] = True
    #: whether the backend is in ptd's registry: ``get_backend(backend_name)`` returns it and
    #: ``detect_backend`` tells its stores by their content. False skips those two tests, and
    #: :meth:`reopen` opens a ``reopen_spec`` with :attr:`backend_cls` instead
    registered: ClassVar[bool] = True
    #: True: a NonTensorStack of values of mixed or non-scalar types (``[1, "a"]``, dicts,
    #: ``None``s, ``[1, 2.0]``) is stored and reads back equal (zarr: as a JSON payload);
    #: False: ``write_non_tensor`` refuses it with PtdTypeError naming the key and matching
    #: :attr:`mixed_stack_refusal`, and creates nothing (h5 stores stacks as typed arrays)
    stores_mixed_stacks: ClassVar[bool] = True
    #: the regular expression the refusal of a mixed stack matches, after the key (when
    #: :attr:`stores_mixed_stacks` is False)
    mixed_stack_refusal: ClassVar[str] = "Cannot write a NonTensorStack"
    #: True: a stack of ints beyond int64 (``[2**70, 1]``) is stored; False: refused with
    #: PtdTypeError naming the key and ``int64`` (a typed integer array cannot hold them)
    stores_big_int_stacks: ClassVar[bool] = True
    #: True: strings holding NUL (``"a\\x00b"``), single or in a stack, are stored and read
    #: back; False: refused with PtdValueError saying ``NUL`` (HDF5 strings end at a NUL)
    stores_nul_in_str: ClassVar[bool] = True
    #: True: a non-tensor no other encoding holds (a tuple) is pickled, and reads back with
    #: ``allow_pickle=True``; False: the backend never pickles, and refuses what it cannot
    #: encode (``(1, "a")``, an object array) with PtdTypeError naming the key
    pickles_non_tensors: ClassVar[bool] = True

    # --- expectations ----------------------------------------------------------------------
    #: the torch dtype names of :data:`NUMERIC_DTYPES` the backend stores; the others skip
    numeric_dtypes: ClassVar[frozenset[str]] = frozenset(NUMERIC_DTYPES)
    #: case of :data:`SINGLE_NON_TENSORS` -> the value it reads back as, compared with its
    #: type (``np.int64(5)`` is not ``5``); a case not listed reads back as written
    non_tensor_readback: ClassVar[Mapping[str, Any]] = {}
    #: case of :data:`SINGLE_NON_TENSORS` -> (warning class, regular expression) that reading
    #: it back warns with, the value being written at key ``n/v`` (none by default)
    non_tensor_read_warnings: ClassVar[Mapping[str, tuple[type[Warning], str]]] = {}
    #: the open options that make reads and writes go through the ``_read``/``_write``/
    #: ``_decode_non_tensor`` hooks (no memory maps)
    library_read_options: ClassVar[Mapping[str, Any]] = {"fast_path": False}

    # --- hook methods ----------------------------------------------------------------------
    def target(self, tmp_path: FsPath) -> FsPath:
        """Where the test's store goes: a local path that does not exist yet."""
        return tmp_path / f"data{self.suffix}"

    def compressed_options(self) -> dict[str, Any]:
        """``options=`` of ``create_array``/``write_non_tensor`` that store an array in
        chunks, compressed (h5: ``{"compression": "gzip"}``, zarr: ``{"chunks": 2}``)."""
        raise NotImplementedError(f"{type(self).__name__} must define compressed_options()")

    def make_corrupt(self, path: FsPath) -> None:
        """Make, at ``path`` (which ends in :attr:`suffix`), what looks like a store of this
        format but is damaged, so that opening it raises CorruptStoreError."""
        raise NotImplementedError(f"{type(self).__name__} must define make_corrupt(path)")

    def write_string_columns(self, path: FsPath) -> tuple[list[Any], list[Any]]:
        """Add to the (closed) store at ``path``, with the format's own library, two 1-d
        string arrays of three rows, ``col`` (fixed-length) and ``vcol`` (variable-length or
        bytes), as other writers make them; return the rows each reads back as. By default
        the test skips (a format without string arrays)."""
        pytest.skip(f"{type(self).__name__} defines no write_string_columns(path)")

    def reopen(self, spec: ReopenSpec) -> Backend:
        """Open a store again from its ``reopen_spec``: through ptd's registry
        (:func:`~ptd.storage.stores.reopen`), or with :attr:`backend_cls` for a backend
        outside it (:attr:`registered` False)."""
        if self.registered:
            return reopen(spec)
        return self.backend_cls.open(spec.location, spec.mode, spec.options)

    # --- fixtures --------------------------------------------------------------------------
    @pytest.fixture
    def path(self, tmp_path: FsPath) -> FsPath:
        """The test's store path (:meth:`target`)."""
        return self.target(tmp_path)

    @pytest.fixture
    def opener(self, path: FsPath) -> Iterator[Opener]:
        """``opener(mode="w", target=path, **options)``: opens a backend, closed at teardown.
        On a read-only backend a mode other than ``"r"`` skips the test."""
        opened: list[Backend] = []

        def open_(mode: Any = "w", target: Any = None, **kw: Any) -> Backend:
            if not self.writable and mode in MODES and mode != "r":
                pytest.skip(f"{self.backend_name} is a read-only backend (the test writes)")
            b = self.backend_cls.open(path if target is None else target, mode, **kw)
            opened.append(b)
            return b

        yield open_
        for b in opened:
            b.close()

    @pytest.fixture
    def be(self, opener: Opener) -> Backend:
        """A new, empty store opened for writing."""
        return opener("w")

    def _need_registry(self) -> None:
        if not self.registered:
            pytest.skip(f"{self.backend_name} is not in ptd's registry")

    # === opening ===========================================================================
    def test_modes_create_and_reopen(self, opener: Opener) -> None:
        b = opener("w")
        assert b.writable
        assert not b.closed
        assert b.name == self.backend_name
        b.create_array(("a",), shape=(2,), dtype=np.dtype("f4"), data=np.ones(2, "f4"))
        b.close()
        assert b.closed
        r = opener("r")
        assert not r.writable
        np.testing.assert_array_equal(r.read(("a",)), np.ones(2, "f4"))
        r.close()
        a = opener("a")
        a.create_array(("b",), shape=(1,), dtype=np.dtype("i8"))
        a.close()
        assert [c for c, _ in opener("r+").children(())] == ["a", "b"]

    @pytest.mark.parametrize("mode", ["r", "r+"])
    def test_missing_store(self, opener: Opener, path: FsPath, mode: str) -> None:
        with pytest.raises(StoreNotFoundError, match=str(path.name)) as info:
            opener(mode)
        assert isinstance(info.value, FileNotFoundError)

    @pytest.mark.parametrize("mode", ["w-", "x"])
    def test_existing_store(self, opener: Opener, mode: str) -> None:
        opener("w").close()
        with pytest.raises(StoreExistsError) as info:
            opener(mode)
        assert isinstance(info.value, FileExistsError)

    @pytest.mark.parametrize("mode", ["w-", "x", "a"])
    def test_new_store_modes(self, opener: Opener, mode: str) -> None:
        b = opener(mode)
        assert b.writable
        assert b.reopen_spec is not None
        assert b.reopen_spec.mode == "r+"

    @pytest.mark.parametrize("mode", ["q", "rb", "", None])
    def test_invalid_mode(self, opener: Opener, mode: str | None) -> None:
        with pytest.raises(PtdValueError, match="r, r\\+, w, w-, x, a"):
            opener(mode)

    def test_reopen_spec_never_truncates(self, opener: Opener, path: FsPath) -> None:
        b = opener("w")
        spec = b.reopen_spec
        assert spec is not None
        assert spec.mode == "r+"
        assert spec.location.path == os.fspath(path)
        b.create_array(("a",), shape=(2,), dtype=np.dtype("f4"), data=np.ones(2, "f4"))
        b.close()
        again = self.reopen(spec)
        try:
            np.testing.assert_array_equal(again.read(("a",)), np.ones(2, "f4"))
        finally:
            again.close()
        r_spec = opener("r").reopen_spec
        assert r_spec is not None
        assert r_spec.mode == "r"

    @pytest.mark.parametrize("mode", ["r", "r+"])
    def test_corrupt_file(self, opener: Opener, tmp_path: FsPath, mode: str) -> None:
        bad = tmp_path / f"bad{self.suffix}"
        self.make_corrupt(bad)
        with pytest.raises(CorruptStoreError, match=bad.name):
            opener(mode, target=bad)

    def test_read_only_backend(self, path: FsPath) -> None:
        """A read-only backend refuses every mode but ``"r"``, before looking at the target."""
        if self.writable:
            pytest.skip(f"{self.backend_name} is writable: test_read_only covers its mode 'r'")
        for mode in MODES:
            if mode == "r":
                continue
            with pytest.raises(ReadOnlyError) as info:
                self.backend_cls.open(path, mode)
            assert isinstance(info.value, PermissionError)

    # === numeric arrays ====================================================================
    @pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
    def test_roundtrip_dtypes(self, be: Backend, dtype: str) -> None:
        if dtype not in self.numeric_dtypes:
            pytest.skip(f"{self.backend_name} does not store {dtype}")
        data = _arr((3, 2), dtype)
        be.create_array(("x",), shape=data.shape, dtype=data.dtype, data=data)
        out = be.read(("x",))
        assert out.dtype == data.dtype
        np.testing.assert_array_equal(out, data)
        meta = be.array_meta(("x",))
        assert meta.kind is ValueKind.NUMERIC
        assert meta.torch_dtype == dtype
        assert meta.shape == (3, 2)

    @pytest.mark.parametrize("dtype", sorted(BITS))
    def test_bits_stored_dtypes(self, be: Backend, dtype: str) -> None:
        """bfloat16 and float8: unsigned integers of their width, marked ``__ptd_dtype__``,
        read back bit for bit and classified as that torch dtype."""
        bits = BITS[dtype]
        data = np.arange(6, dtype=bits).reshape(3, 2)
        be.create_array(
            ("b",), shape=data.shape, dtype=bits, data=data, attrs={PTD_DTYPE_ATTR: dtype}
        )
        meta = be.array_meta(("b",))
        assert meta.kind is ValueKind.NUMERIC
        assert meta.torch_dtype == dtype
        assert meta.attrs[PTD_DTYPE_ATTR] == dtype
        out = be.read(("b",))
        assert out.dtype == bits
        np.testing.assert_array_equal(out, data)
        np.testing.assert_array_equal(be.read(("b",), (1,)), data[1])

    @pytest.mark.parametrize(
        "sel",
        [
            (2,),
            (slice(1, 3),),
            (slice(0, 5, 2),),
            (np.array([0, 2, 3]),),
            (np.array([1, 2, 3]),),  # consecutive
            (slice(1, 4), np.array([0, 2])),
            (1, np.array([1, 2])),
            (np.array([0, 3]), 1),
            (slice(0, 2), 1),
            (3, 2),
            (slice(2, 2),),
            (np.array([], dtype=np.int64),),
        ],
        ids=repr,
    )
    def test_read_write_selections(self, be: Backend, sel: tuple[Any, ...]) -> None:
        data = _arr((5, 3), "float64")
        be.create_array(("x",), shape=data.shape, dtype=data.dtype, data=data)
        expect = data[sel]  # one index array at most: numpy agrees with the contract
        out = be.read(("x",), sel)
        assert isinstance(out, np.ndarray)
        assert out.dtype == data.dtype
        np.testing.assert_array_equal(out, expect)
        # write the selection back, negated
        be.write(("x",), sel, -expect)
        data2 = be.read(("x",))
        np.testing.assert_array_equal(be.read(("x",), sel), -expect)
        mask = np.ones_like(data, dtype=bool)
        mask[sel] = False
        np.testing.assert_array_equal(data2[mask], data[mask])

    def test_sparse_index_on_large_array(self, be: Backend) -> None:
        data = np.arange(40_000 * 64, dtype=np.float32).reshape(40_000, 64)
        be.create_array(("big",), shape=data.shape, dtype=data.dtype, data=data)
        idx = np.array([3, 17_000, 39_999])
        np.testing.assert_array_equal(be.read(("big",), (idx,)), data[idx])
        idx = np.arange(100, 2000, 3)  # dense: read as a span
        np.testing.assert_array_equal(be.read(("big",), (idx, slice(2, 5))), data[idx, 2:5])

    def test_0d_and_zero_size(self, be: Backend) -> None:
        be.create_array(("s",), shape=(), dtype=np.dtype("f8"), data=np.array(2.5))
        out = be.read(("s",))
        assert isinstance(out, np.ndarray)
        assert out.shape == ()
        assert out == 2.5
        be.write(("s",), (), np.array(4.0))
        assert be.read(("s",)) == 4.0
        be.create_array(("z",), shape=(0, 4), dtype=np.dtype("i4"))
        assert be.read(("z",)).shape == (0, 4)
        assert be.read(("z",), (slice(0, 0),)).shape == (0, 4)
        be.write(("z",), (), np.zeros((0, 4), "i4"))
        assert be.array_meta(("z",)).shape == (0, 4)

    def test_options_on_scalars_and_empty_arrays(self, be: Backend) -> None:
        opts = self.compressed_options()
        be.create_array(
            ("s",), shape=(), dtype=np.dtype("f4"), data=np.array(1.0, "f4"), options=opts
        )
        be.create_array(("z",), shape=(0, 3), dtype=np.dtype("f4"), options=opts, chunks=(2, 3))
        be.write_non_tensor(("t",), "x", options=opts)
        assert be.read(("s",)) == 1.0
        assert be.read(("z",)).shape == (0, 3)

    def test_broadcast_write(self, be: Backend) -> None:
        be.create_array(("x",), shape=(4, 3), dtype=np.dtype("f4"))
        be.write(("x",), (slice(1, 3),), np.array([1, 2, 3], "f4"))
        be.write(("x",), (0,), np.array(7, "f4"))
        out = be.read(("x",))
        np.testing.assert_array_equal(out[1:3], [[1, 2, 3]] * 2)
        np.testing.assert_array_equal(out[0], [7, 7, 7])

    @pytest.mark.parametrize(
        ("sel", "shape"), [((), (6, 7)), ((), (3,)), ((slice(0, 2),), (3, 2)), ((1,), (2, 2))]
    )
    def test_shape_mismatch_raises(
        self, be: Backend, sel: tuple[Any, ...], shape: tuple[int, ...], path: FsPath
    ) -> None:
        be.create_array(("n", "x"), shape=(6, 2), dtype=np.dtype("f4"))
        with pytest.raises(PtdValueError, match="n/x") as info:
            be.write(("n", "x"), sel, np.ones(shape, "f4"))
        assert path.name in str(info.value)
        assert str(list(shape)) in str(info.value)
        np.testing.assert_array_equal(be.read(("n", "x")), np.zeros((6, 2), "f4"))

    def test_extra_leading_one_dims(self, be: Backend) -> None:
        be.create_array(("x",), shape=(4, 3), dtype=np.dtype("f4"))
        be.write(("x",), (1,), np.ones((1, 3), "f4"))  # numpy drops leading 1s on assignment
        np.testing.assert_array_equal(be.read(("x",), (1,)), np.ones(3, "f4"))
        with pytest.raises(PtdValueError, match=r"\[2, 3\]"):
            be.write(("x",), (1,), np.ones((2, 3), "f4"))

    def test_missing_key(self, be: Backend, path: FsPath) -> None:
        with pytest.raises(PtdKeyError, match="nope") as info:
            be.read(("nope",))
        assert path.name in str(info.value)
        be.create_group(("g",))
        with pytest.raises(PtdKeyError, match="group"):
            be.read(("g",))
        with pytest.raises(PtdKeyError):
            be.array_meta(("g", "x"))

    def test_create_replaces(self, be: Backend) -> None:
        be.create_array(("x",), shape=(2,), dtype=np.dtype("f4"))
        be.create_array(("x",), shape=(3, 3), dtype=np.dtype("i8"), data=np.ones((3, 3), "i8"))
        assert be.array_meta(("x",)).shape == (3, 3)
        assert be.read(("x",)).sum() == 9

    # === structure =========================================================================
    def test_groups_attrs(self, be: Backend) -> None:
        be.create_group(("g", "h"), attrs={"__tensordict__": {"batch_size": [3], "version": 1}})
        assert be.kind(("g",)) is NodeKind.GROUP
        assert be.kind(("g", "h")) is NodeKind.GROUP
        assert be.get_attrs(("g", "h")) == {"__tensordict__": {"batch_size": [3], "version": 1}}
        be.set_attrs(("g", "h"), {"note": "x", "n": 3, "l": [1, 2]})
        attrs = be.get_attrs(("g", "h"))
        assert attrs["note"] == "x"
        assert attrs["n"] == 3
        assert attrs["l"] == [1, 2]
        assert all(type(v) in (str, int, list, dict) for v in attrs.values())
        be.set_attrs((), {"root": True})
        assert be.get_attrs(())["root"] is True
        be.create_group(("g", "h"), attrs={"more": 1})  # existing group: attrs merged
        assert be.get_attrs(("g", "h"))["note"] == "x"
        assert be.get_attrs(("g", "h"))["more"] == 1
        be.create_array(("a",), shape=(2,), dtype=np.dtype("f4"), attrs={"unit": "m"})
        assert be.get_attrs(("a",)) == {"unit": "m"} == dict(be.array_meta(("a",)).attrs)

    def test_attr_value_kinds(self, be: Backend) -> None:
        be.create_group(("g",))
        values = {
            "none": None,
            "names": ["time", "x"],
            "nested": {"names": ["t", None]},
            "f": 1.5,
            "b": False,
            "ints": [1, 2],
        }
        be.set_attrs(("g",), values)
        assert be.get_attrs(("g",)) == values

    def test_kind_children_order(self, be: Backend) -> None:
        for k in ("zeta", "alpha", "mid"):
            be.create_array((k,), shape=(1,), dtype=np.dtype("f4"))
        be.create_group(("beta",))
        assert be.children(()) == [
            ("alpha", NodeKind.ARRAY),
            ("beta", NodeKind.GROUP),
            ("mid", NodeKind.ARRAY),
            ("zeta", NodeKind.ARRAY),
        ]
        assert be.kind(("nope",)) is None
        assert be.kind(("alpha", "x")) is None
        assert be.kind(()) is NodeKind.GROUP
        assert be.kind(("alpha",)) is NodeKind.ARRAY

    def test_walk(self, be: Backend) -> None:
        be.create_array(("b",), shape=(3,), dtype=np.dtype("f4"))
        be.create_array(("a", "y"), shape=(3, 2), dtype=np.dtype("i8"))
        be.create_array(("a", "x", "deep"), shape=(3,), dtype=np.dtype("f8"))
        be.create_group(("empty",))
        be.write_non_tensor(("a", "s"), "hello")
        walked = be.walk()
        assert [p for p, _, _ in walked] == [
            ("a",),
            ("a", "s"),
            ("a", "x"),
            ("a", "x", "deep"),
            ("a", "y"),
            ("b",),
            ("empty",),
        ]
        for p, kind, meta in walked:
            assert kind is be.kind(p)
            if kind is NodeKind.ARRAY:
                assert meta == be.array_meta(p)
            else:
                assert meta is None
        assert [p for p, _, _ in be.walk(("a",))] == [
            ("a", "s"),
            ("a", "x"),
            ("a", "x", "deep"),
            ("a", "y"),
        ]
        s_meta = dict((p, m) for p, _, m in walked)[("a", "s")]
        assert s_meta is not None
        assert s_meta.kind is ValueKind.NON_TENSOR

    def test_delete_move(self, be: Backend, path: FsPath) -> None:
        data = _arr((3,), "f4")
        be.create_array(("g", "x"), shape=(3,), dtype=data.dtype, data=data)
        be.create_array(("y",), shape=(3,), dtype=data.dtype, data=data)
        be.move(("g",), ("h", "g2"))
        assert be.kind(("g",)) is None
        np.testing.assert_array_equal(be.read(("h", "g2", "x")), data)
        be.move(("y",), ("z",))
        np.testing.assert_array_equal(be.read(("z",)), data)
        with pytest.raises(PtdKeyError, match="z"):
            be.move(("h",), ("z",))
        with pytest.raises(PtdKeyError, match="missing") as info:
            be.move(("missing",), ("q",))
        assert path.name in str(info.value)
        be.delete(("h", "g2"))
        assert be.children(("h",)) == []
        be.delete(("z",))
        assert be.kind(("z",)) is None
        with pytest.raises(PtdKeyError, match="z"):
            be.delete(("z",))

    def test_read_only(self, opener: Opener) -> None:
        b = opener("w")
        b.create_array(("x",), shape=(2,), dtype=np.dtype("f4"))
        b.create_group(("g",))
        b.close()
        r = opener("r")
        calls: list[Callable[[], object]] = [
            lambda: r.write(("x",), (), np.ones(2, "f4")),
            lambda: r.create_array(("y",), shape=(1,), dtype=np.dtype("f4")),
            lambda: r.create_group(("h",)),
            lambda: r.delete(("x",)),
            lambda: r.move(("x",), ("w",)),
            lambda: r.set_attrs(("x",), {"a": 1}),
            lambda: r.write_non_tensor(("s",), "x"),
        ]
        for call in calls:
            with pytest.raises(ReadOnlyError, match="'") as info:
                call()
            assert isinstance(info.value, PermissionError)
        np.testing.assert_array_equal(r.read(("x",)), np.zeros(2, "f4"))

    def test_closed(self, be: Backend) -> None:
        be.create_array(("x",), shape=(2,), dtype=np.dtype("f4"))
        be.read(("x",))  # cached
        be.close()
        be.close()  # idempotent
        assert be.closed
        assert not be.writable
        calls: list[Callable[[], object]] = [
            lambda: be.read(("x",)),
            lambda: be.children(()),
            lambda: be.array_meta(("x",)),
            lambda: be.write(("x",), (), np.ones(2, "f4")),
            lambda: be.kind(("x",)),
            lambda: be.walk(),
            lambda: be.read_non_tensor(("x",)),
        ]
        for call in calls:
            with pytest.raises(ClosedStoreError):
                call()

    # === non-tensors =======================================================================
    @pytest.mark.parametrize("case", list(SINGLE_NON_TENSORS))
    def test_single_roundtrip(self, be: Backend, case: str) -> None:
        value = SINGLE_NON_TENSORS[case]
        expect = self.non_tensor_readback.get(case, value)
        be.write_non_tensor(("n", "v"), value)
        meta = be.array_meta(("n", "v"))
        assert meta.kind is ValueKind.NON_TENSOR
        assert meta.stack_shape is None
        warning = self.non_tensor_read_warnings.get(case)
        if warning is not None:
            with pytest.warns(warning[0], match=warning[1]):
                out = be.read_non_tensor(("n", "v"), allow_pickle=True)
        else:
            out = be.read_non_tensor(("n", "v"), allow_pickle=True)
        assert not out.is_stack
        assert _same(out.value, expect), (out.value, expect)
        # selection is ignored for single values
        if warning is None:
            assert _same(be.read_non_tensor(("n", "v"), (0,), allow_pickle=True).value, expect)

    @pytest.mark.parametrize(
        ("values", "shape"),
        [
            (["a", "bb", "é"], (3,)),
            ([["a", "b"], ["c", "d"], ["e", "f"]], (3, 2)),
            ([1, 2, 3], (3,)),
            ([[1, 2], [3, 4]], (2, 2)),
            ([b"x", b"yy", b"z"], (3,)),
            ([1.5, 2.5], (2,)),
            ([True, False], (2,)),
            ([], (0,)),
        ],
        ids=repr,
    )
    def test_stack_roundtrip(self, be: Backend, values: list[Any], shape: tuple[int, ...]) -> None:
        be.write_non_tensor(("st",), values, stack_shape=shape)
        meta = be.array_meta(("st",))
        assert meta.kind is ValueKind.NON_TENSOR
        assert meta.stack_shape == shape
        out = be.read_non_tensor(("st",), allow_pickle=True)
        assert out.is_stack
        assert out.stack_shape == shape
        assert out.value == values
        assert all(
            type(a) is type(b)
            for a, b in zip(
                np.ravel(np.array(out.value, dtype=object)),
                np.ravel(np.array(values, dtype=object)),
                strict=True,
            )
        )
        if shape[0] >= 2:
            sel = (np.array([0, shape[0] - 1]),)
            part = be.read_non_tensor(("st",), sel, allow_pickle=True)
            assert part.is_stack
            assert part.value == [values[0], values[-1]]
            assert part.stack_shape == (2,) + shape[1:]
            one = be.read_non_tensor(("st",), (1,), allow_pickle=True)
            assert one.value == values[1]
            sl = be.read_non_tensor(("st",), (slice(1, None),), allow_pickle=True)
            assert sl.value == values[1:]
            assert sl.stack_shape == (shape[0] - 1,) + shape[1:]

    def test_stack_shape_mismatch(self, be: Backend) -> None:
        with pytest.raises(PtdValueError, match="st"):
            be.write_non_tensor(("st",), ["a", "b"], stack_shape=(3,))

    @pytest.mark.parametrize("values", [[1, "a"], [{"k": 1}, {"k": 2}], [None, None], [1, 2.0]])
    def test_mixed_type_stacks(self, opener: Opener, values: list[Any]) -> None:
        """:attr:`stores_mixed_stacks`"""
        b = opener("w")
        if self.stores_mixed_stacks:
            b.write_non_tensor(("st",), values, stack_shape=(2,))
            assert b.read_non_tensor(("st",)).value == values
            return
        with pytest.raises(PtdTypeError, match=r"'st'.*" + self.mixed_stack_refusal):
            b.write_non_tensor(("st",), values, stack_shape=(2,))
        assert b.kind(("st",)) is None

    def test_int_stack_overflow(self, opener: Opener) -> None:
        """:attr:`stores_big_int_stacks`"""
        b = opener("w")
        if self.stores_big_int_stacks:
            b.write_non_tensor(("st",), [2**70, 1], stack_shape=(2,))
            assert b.read_non_tensor(("st",)).value == [2**70, 1]
            return
        with pytest.raises(PtdTypeError, match=r"'st'.*int64"):
            b.write_non_tensor(("st",), [2**70, 1], stack_shape=(2,))

    def test_nul_in_str(self, be: Backend) -> None:
        """:attr:`stores_nul_in_str`"""
        if self.stores_nul_in_str:
            be.write_non_tensor(("s",), "a\x00b")
            be.write_non_tensor(("st",), ["a\x00", "b"], stack_shape=(2,))
            assert be.read_non_tensor(("s",)).value == "a\x00b"
            assert be.read_non_tensor(("st",)).value == ["a\x00", "b"]
            return
        with pytest.raises(PtdValueError, match="NUL"):
            be.write_non_tensor(("s",), "a\x00b")
        with pytest.raises(PtdValueError, match=r"'st'.*NUL"):
            be.write_non_tensor(("st",), ["a\x00", "b"], stack_shape=(2,))

    def test_unencodable_non_tensors(self, opener: Opener) -> None:
        """:attr:`pickles_non_tensors`"""
        b = opener("w")
        if self.pickles_non_tensors:
            b.write_non_tensor(("o",), (1, 2))  # pickled
            assert b.read_non_tensor(("o",), allow_pickle=True).value == (1, 2)
            return
        with pytest.raises(PtdTypeError, match="'o'"):
            b.write_non_tensor(("o",), (1, "a"))
        with pytest.raises(PtdTypeError, match="'o'"):
            b.write_non_tensor(("o",), np.array([object()], dtype=object))

    def test_rows_as_stack_of_foreign_column(self, be: Backend, path: FsPath) -> None:
        """String arrays written by other tools (:meth:`write_string_columns`) read as a
        whole array, or row by row as a stack."""
        be.close()
        expect = self.write_string_columns(path)
        b = self.backend_cls.open(path, "r")
        try:
            for key, exp in zip(("col", "vcol"), expect, strict=True):
                meta = b.array_meta((key,))
                assert meta.kind is ValueKind.NON_TENSOR
                rows = b.read_non_tensor((key,), as_stack=True)
                assert rows.is_stack
                assert rows.value == exp
                assert rows.stack_shape == (3,)
                part = b.read_non_tensor((key,), (np.array([0, 2]),), as_stack=True)
                assert part.value == [exp[0], exp[2]]
                whole = b.read_non_tensor((key,))
                assert not whole.is_stack
                assert isinstance(whole.value, np.ndarray)
                assert whole.value.tolist() == exp
        finally:
            b.close()

    def test_replace_non_tensor(self, be: Backend) -> None:
        be.write_non_tensor(("v",), [1, 2], stack_shape=(2,))
        be.write_non_tensor(("v",), {"a": 1})
        assert be.read_non_tensor(("v",)).value == {"a": 1}
        assert be.array_meta(("v",)).stack_shape is None

    # === the registry ======================================================================
    def test_registry_name(self) -> None:
        """``get_backend`` returns the class; :func:`~ptd.storage.registry.writable_formats` lists
        the formats ptd writes (a read-only backend is registered, but not there)."""
        self._need_registry()
        assert get_backend(self.backend_name) is self.backend_cls
        assert self.backend_cls.name == self.backend_name
        assert entry(self.backend_name).writable is self.writable

    def test_detected_by_content(self, opener: Opener, tmp_path: FsPath) -> None:
        """A store is told by its content, whatever its name says."""
        self._need_registry()
        for name in ("a.bin", "z.store"):
            p = tmp_path / name
            opener("w", target=p).close()
            assert detect_backend(p) == self.backend_name
            assert detect_backend(str(p)) == self.backend_name

    # === the error guard ===================================================================
    def test_every_guarded_method_is_guarded(self) -> None:
        """Also those that Backend implements for every backend (read, write, close...)."""
        cls = self.backend_cls
        for attr in GUARDED:
            fn = getattr(cls, attr)
            assert getattr(getattr(fn, "__func__", fn), "__ptd_guarded__", False), attr

    @pytest.mark.parametrize(("hook", "call"), [
        ("_read", lambda b: b.read(("x",))),
        ("_write", lambda b: b.write(("x",), (), np.zeros(3))),
        ("_decode_non_tensor", lambda b: b.read_non_tensor(("x",))),
    ])  # fmt: skip
    def test_unexpected_errors_in_shared_methods(
        self,
        opener: Opener,
        monkeypatch: pytest.MonkeyPatch,
        hook: str,
        call: Callable[[Backend], object],
    ) -> None:
        be = opener("w", **self.library_read_options)  # reads through the library: the hooks
        be.create_array(("x",), shape=(3,), dtype=np.dtype("float64"))

        def boom(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("boom")

        monkeypatch.setattr(type(be), hook, boom)
        with pytest.raises(PtdError, match="boom") as info:
            call(be)
        assert "'x'" in str(info.value)
        assert be.location in str(info.value)

    def test_store_location_target(self, opener: Opener, path: FsPath) -> None:
        loc = StoreLocation.parse(path)
        b = opener("w", target=loc)
        b.create_array(("a",), shape=(2,), dtype=np.dtype("int64"), data=np.arange(2))
        b.close()
        r = self.backend_cls.open(loc, "r")
        assert r.location == str(path)
        assert r.reopen_spec is not None
        assert r.reopen_spec.location == loc
        assert r.read(("a",)).tolist() == [0, 1]
        r.close()
        name = self.backend_name
        with pytest.raises(PtdTypeError, match=f"with the {name} backend: expected a path"):
            self.backend_cls.open(3.5, "r")
        with pytest.raises(PtdValueError, match="storage_options only apply"):
            self.backend_cls.open(path, "r", storage_options={"anon": True})
