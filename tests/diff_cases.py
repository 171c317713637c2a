"""The case table of tests/containers/test_differential.py: (method, args, kwargs) per public method of
TensorDictBase, run on tensordict 0.15.3 and on ptd. Arguments that depend on the side (a
mask of the batch shape, an in-memory operand, a file name) are ``diff_support.A`` builders."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from diff_support import BATCH, CONTAINERS, MASK, ONES, OTHER, SELF, TMPFILE, A, Ctx

ALL_KINDS = ("nested", "dtypes", "empty_batch", "nontensor")

#: methods that change the object they are called on (besides names ending in "_")
MUTATING = set(
    [
        "set",
        "setdefault",
        "pop",
        "popitem",
        "update",
        "clear",
        "create_nested",
        "separates",
        "del_",
        "rename_key_",
        "split_keys",
        "__setitem__",
        "__delitem__",
        "cat_tensors",
        "stack_tensors",
    ]
)


@dataclass(frozen=True)
class Case:
    name: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    kinds: tuple[str, ...] = ("nested",)
    containers: tuple[str, ...] = CONTAINERS
    how: str = "method"  # method | attr | func
    fn: Callable[..., Any] | None = None  # how="func": fn(ctx, obj, *args, **kwargs)
    tag: str = ""

    @property
    def mutating(self) -> bool:
        return (self.name.endswith("_") and not self.name.startswith("__")) or (
            self.name in MUTATING
        )

    @property
    def id(self) -> str:
        return self.name + (f"-{self.tag}" if self.tag else "")

    def invoke(self, ctx: Ctx, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        obj = ctx.obj
        if self.how == "attr":
            return getattr(obj, self.name)
        if self.how == "func":
            assert self.fn is not None
            return self.fn(ctx, obj, *args, **kwargs)
        return getattr(obj, self.name)(*args, **kwargs)


def c(name: str, *args: Any, **kwargs: Any) -> Case:
    """A method call; the keyword ``_`` holds Case options (kinds, containers, tag, ...)."""
    opts = kwargs.pop("_", {})
    return Case(name, tuple(args), kwargs, **opts)


def f(name: str, fn: Callable[..., Any], *args: Any, **opts: Any) -> Case:
    return Case(name, tuple(args), {}, how="func", fn=fn, **opts)


def attr(name: str, **opts: Any) -> Case:
    return Case(name, how="attr", **opts)


def _cls(ctx: Ctx) -> Any:
    return ctx.lib.TensorDict


def _from_schema(ctx: Ctx, storage: str, kwargs: dict[str, str] | None) -> Any:
    schema = {"a": ([2], torch.float32), "b": ([], torch.int64)}
    if kwargs is None:  # not a storage ptd (or this tensordict, without a server) can use
        return _cls(ctx).from_schema(schema, storage="nowhere")
    kw = {k: str(ctx.tmp / f"{ctx.lib.name}-{v}") for k, v in kwargs.items()}
    td = _cls(ctx).from_schema(schema, batch_size=[3], storage=storage, **kw)
    return (type(td).__name__, td.is_shared(), td.is_memmap(), td.to_tensordict())


def _attrs_fields(attrs: Any) -> list[Any]:
    """The fields of each TensorAttrs leaf of ``attrs(...)`` (kind "nested")."""
    keys = ("a", "b", ("n", "x"), ("n", "m", "z"))
    return [(a.tgt_device, a.tgt_dtype, a.tgt_shape) for a in (attrs[k] for k in keys)]


def _foreign_nested(ctx: Ctx) -> Any:
    import tensordict

    return tensordict.TensorDict({"w": torch.zeros(*ctx.batch, 5, 2)}, [*ctx.batch, 5])


UNARY = [
    "abs",
    "acos",
    "asin",
    "atan",
    "ceil",
    "cos",
    "cosh",
    "erf",
    "erfc",
    "exp",
    "expm1",
    "floor",
    "frac",
    "lgamma",
    "log",
    "log10",
    "log1p",
    "log2",
    "neg",
    "reciprocal",
    "round",
    "sigmoid",
    "sign",
    "sin",
    "sinh",
    "sqrt",
    "tan",
    "tanh",
    "trunc",
]
CASTS = [
    "bool",
    "bfloat16",
    "half",
    "float",
    "double",
    "int",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
]
REDUCTIONS = ["sum", "mean", "nansum", "nanmean", "prod", "std", "var", "amin", "amax"]

CASES: list[Case] = [
    # ---------------------------------------------------------------- keys and entries
    c("keys", _={"kinds": ALL_KINDS}),
    f("keys", lambda ctx, o: sorted(map(str, o.keys(True, True))), tag="nested", kinds=ALL_KINDS),
    f("values", lambda ctx, o: list(o.values(True, True)), kinds=ALL_KINDS),
    f("items", lambda ctx, o: dict(o.items(True, True)), kinds=ALL_KINDS),
    c("get", "a", _={"kinds": ("nested", "nontensor")}),
    c("get", ("n", "x"), _={"tag": "nested"}),
    c("get", "missing", _={"tag": "default-none"}),
    c("get", "missing", 0, _={"tag": "default"}),
    c("set", "new", A(lambda x: torch.zeros(x.batch), "zeros"), _={"kinds": ALL_KINDS}),
    c("set", "a", A(lambda x: torch.zeros(3), "bad-shape"), _={"tag": "bad-shape"}),
    # a tensordict.TensorDict value on both sides keeps its own (deeper) batch size
    c("set", "sub", A(_foreign_nested, "tensordict.TensorDict"), _={"tag": "nested-batch"}),
    c("set_", "b", A(lambda x: torch.ones(x.batch, dtype=torch.long), "ones")),
    c("set_", "missing", A(lambda x: torch.ones(x.batch)), _={"tag": "missing"}),
    c("setdefault", "b", A(lambda x: torch.ones(x.batch, dtype=torch.long))),
    c("setdefault", "new", A(lambda x: torch.ones(x.batch)), _={"tag": "new"}),
    c("pop", "a"),
    c("pop", "missing", _={"tag": "missing"}),
    c("pop", "missing", None, _={"tag": "default"}),
    c("popitem"),
    c("del_", ("n", "x")),
    c("rename_key_", "a", "a2"),
    c("rename_key_", "a", "b", safe=True, _={"tag": "safe"}),
    c("update", OTHER),
    c("update", {"b": A(lambda x: torch.zeros(x.batch, dtype=torch.long))}, _={"tag": "dict"}),
    c("update_", ONES),
    c("update_at_", A(lambda x: x.fresh(2.0)[0], "td[0]"), 1),
    c("get_at", "a", 0),
    c("get_at", ("n", "x"), slice(1, 3), _={"tag": "nested"}),
    c("set_at_", "a", A(lambda x: torch.zeros(3, 2)), 0),
    c("copy_at_", A(lambda x: x.fresh(3.0)[1], "td[1]"), 0),
    c("fill_", "a", 1.5),
    c("zero_", _={"kinds": ("nested", "numeric")}),
    c("clear"),
    c("create_nested", "newsub"),
    c("is_empty", _={"kinds": ALL_KINDS}),
    c("entry_class", "a"),
    c("entry_class", "n", _={"tag": "nested"}),
    attr("sorted_keys"),
    c("split_keys", ["a", ("n", "x")]),
    c("split_keys", ["a"], [("n", "m", "z")], _={"tag": "two-sets"}),
    c("split_keys", {"a": "z", ("n", "x"): ("q", "r")}, _={"tag": "rename"}),
    c("split_keys", ["a", ("n", "x")], inplace=True, _={"tag": "inplace"}),
    c("split_keys", ["a", "missing"], _={"tag": "strict"}),
    c("split_keys", ["a", "missing"], strict=False, _={"tag": "non-strict"}),
    c("split_keys", ["a", ("n", "x")], reproduce_struct=True, _={"tag": "struct"}),
    c("separates", "a"),
    f("non_tensor_items", lambda ctx, o: dict(o.non_tensor_items()), kinds=("nontensor",)),
    c("get_non_tensor", "s", _={"kinds": ("nontensor",)}),
    c("is_non_tensor", "s", _={"kinds": ("nontensor",)}),
    c("filter_non_tensor_data", _={"kinds": ("nontensor",)}),
    # a non-tensor read back: its value by key (h5: bytes), its entry, its class's name
    f("__getitem__", lambda ctx, o: o["s"], kinds=("nontensor",), tag="non-tensor"),
    f("__getitem__", lambda ctx, o: o["n", "t"], kinds=("nontensor",), tag="nested-non-tensor"),
    c("get", "s", _={"kinds": ("nontensor",), "tag": "non-tensor"}),
    c("entry_class", "s", _={"kinds": ("nontensor",), "tag": "non-tensor"}),
    c("filter_empty_"),
    c("flatten_keys"),
    c("flatten_keys", "/", _={"tag": "sep"}),
    c("flatten_keys", inplace=True, _={"tag": "inplace", "containers": ("memory",)}),
    f("unflatten_keys", lambda ctx, o: o.flatten_keys().unflatten_keys()),
    f(
        "unflatten_keys",
        lambda ctx, o: o.flatten_keys().unflatten_keys(inplace=True),
        tag="inplace",
        containers=("memory",),
    ),
    f(
        "flatten_keys",
        lambda ctx, o: o.clone().lock_().flatten_keys(inplace=True),
        tag="inplace-locked",
        containers=("memory",),
    ),
    c("flatten_keys", inplace=True, _={"tag": "inplace-store", "containers": ("h5", "zarr")}),
    c("replace", a=A(lambda x: torch.zeros(*x.batch, 2) if x.batch else torch.zeros(3))),
    attr("depth"),
    # ---------------------------------------------------------------- properties
    *(
        attr(n, kinds=ALL_KINDS)
        for n in ["batch_size", "batch_dims", "shape", "ndim", "names", "device"]
    ),
    *(
        c(n, _={"kinds": ALL_KINDS})
        for n in ["dim", "ndimension", "numel", "size", "is_contiguous"]
    ),
    c("size", 0, _={"tag": "dim"}),
    attr("dtype", kinds=("nested", "numeric")),
    c("is_floating_point", _={"kinds": ("nested", "numeric")}),
    *(
        attr(n)
        for n in ["is_locked", "is_cpu", "is_cuda", "is_meta", "requires_grad", "grad", "data"]
    ),
    c("is_shared"),
    c("bytes"),
    c("get_item_shape", "a"),
    c("param_count"),
    c("refine_names", "x", "y"),
    f("rename", lambda ctx, o: o.rename("x", "y").names),
    c("rename_", "x", "y"),
    f("names", lambda ctx, o: (setattr(o, "names", ["x", "y"]), o.names)[1], tag="set"),
    c("data_ptr", _={"containers": ("memory",)}),
    # a store's leaves have no address until read: compare what data_ptr() holds, not values
    f(
        "data_ptr",
        lambda ctx, o: (p := o.data_ptr(), p.batch_size, sorted(map(str, p.keys(True, True))))[1:],
        tag="structure",
    ),
    c("auto_batch_size_"),
    c("auto_device_"),
    c("clear_device_"),
    f("auto_device_", lambda ctx, o: o.auto_device_()["n"].device, tag="nested"),
    f("clear_device_", lambda ctx, o: o.to("cpu").clear_device_()["n"].device, tag="nested"),
    f("auto_device_", lambda ctx, o: o.empty().auto_device_().device, tag="no-leaf"),
    # ---------------------------------------------------------------- locking
    f("lock_", lambda ctx, o: (o.lock_(), o.is_locked)[1]),
    f("unlock_", lambda ctx, o: (o.lock_(), o.unlock_(), o.is_locked)[2]),
    f("lock_", lambda ctx, o: o.lock_().set("zz", torch.zeros(ctx.batch)), tag="set-locked"),
    # ---------------------------------------------------------------- apply
    c("apply", A(lambda x: lambda t: t * 2, "t*2"), _={"kinds": ("nested", "numeric")}),
    c("apply", A(lambda x: lambda t: None, "None"), filter_empty=True, _={"tag": "filter"}),
    c("apply_", A(lambda x: lambda t: t + 1, "t+1"), _={"kinds": ("nested", "numeric")}),
    c("named_apply", A(lambda x: lambda k, t: t * 0 if "a" in k else t, "named")),
    # ---------------------------------------------------------------- reductions
    *(c(n, _={"kinds": ("nested", "numeric", "empty_batch")}) for n in REDUCTIONS),
    *(c(n, 0, _={"tag": "dim0"}) for n in REDUCTIONS),
    *(c(n, 1, keepdim=True, _={"tag": "dim1-keep"}) for n in REDUCTIONS),
    *(c(n, reduce=True, _={"tag": "reduce"}) for n in ["sum", "mean", "nansum", "nanmean"]),
    *(c(n, dim="feature", _={"tag": "feature"}) for n in ["sum", "mean"]),
    c("min"),
    c("max"),
    c("min", 0, _={"tag": "dim0"}),
    c("max", 0, keepdim=True, _={"tag": "dim0-keep"}),
    c("cummin", 0),
    c("cummax", 1),
    c("logsumexp", 0),
    c("quantile", 0.5),
    c("quantile", 0.5, dim=0, _={"tag": "dim0"}),
    c("softmax", 0),
    c("norm"),
    c("all", _={"kinds": ALL_KINDS}),
    c("any", _={"kinds": ALL_KINDS}),
    c("all", 0, _={"tag": "dim0"}),
    c("any", 1, _={"tag": "dim1"}),
    # ---------------------------------------------------------------- pointwise
    *(c(n) for n in UNARY),
    *(c(n + "_", _={"kinds": ("float",)}) for n in UNARY),
    c("abs_", _={"tag": "mixed-dtypes"}),
    *(c(n, 2) for n in ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "mod", "rsub"]),
    *(c(n, OTHER, _={"tag": "td"}) for n in ["add", "sub", "mul", "div", "maximum", "minimum"]),
    *(c(n + "_", 2, _={"kinds": ("float",)}) for n in ["add", "sub", "mul", "div", "pow"]),
    *(c(n + "_", ONES, _={"kinds": ("float",)}) for n in ["maximum", "minimum"]),
    c("add", 2, alpha=3, _={"tag": "alpha"}),
    c("lerp", ONES, 0.5),
    c("lerp_", ONES, 0.5, _={"kinds": ("float",)}),
    c("addcmul", OTHER, ONES, value=2),
    c("addcmul_", OTHER, ONES, value=2, _={"kinds": ("float",)}),
    c("addcdiv", OTHER, ONES),
    c("addcdiv_", OTHER, ONES, _={"kinds": ("float",)}),
    c("clamp", -0.5, 0.5),
    c("clamp", None, 0.5, _={"tag": "max-only"}),
    c("clamp_min", 0.0),
    c("clamp_max", 0.0),
    c("clamp_min_", 0.0, _={"kinds": ("float",)}),
    c("clamp_max_", 0.0, _={"kinds": ("float",)}),
    c("bitwise_and", True, _={"kinds": ("numeric",)}),
    c("logical_and", OTHER),
    *(
        c(n, _={"kinds": ("nested", "numeric")})
        for n in ["isfinite", "isnan", "isneginf", "isposinf", "isreal"]
    ),
    c("masked_fill", MASK, -1.0),
    c("masked_fill_", MASK, -1.0),
    # ---------------------------------------------------------------- shape
    c("view", -1),
    c("view", torch.uint8, _={"tag": "dtype", "kinds": ("numeric",)}),
    c("view", 4, 3, _={"tag": "same"}),
    c("view", size=(3, 4), _={"tag": "size"}),
    c("view", 5, _={"tag": "bad"}),
    c("view", torch.uint8, batch_size=[4], _={"tag": "dtype-batch", "kinds": ("numeric",)}),
    c("view", torch.int16, batch_size=[5], _={"tag": "dtype-bad", "kinds": ("numeric",)}),
    c("reshape", -1),
    c("reshape", 2, -1, _={"tag": "infer"}),
    c("reshape", size=(3, 4), _={"tag": "size"}),
    c("reshape", (4, 3), _={"tag": "same"}),
    c("reshape", 5, _={"tag": "bad"}),
    c("reshape", -1, -1, _={"tag": "two-free"}),
    c("reshape", shape=(12,), _={"tag": "bad-kw"}),
    c("reshape", -1, inplace=True, _={"tag": "inplace"}),
    c("transpose", 0, 1),
    c("permute", 1, 0),
    c("squeeze"),
    c("squeeze", 0, _={"tag": "dim0"}),
    c("unsqueeze", 0),
    c("flatten", 0, 1),
    f("unflatten", lambda ctx, o: o.flatten(0, 1).unflatten(0, (4, 3))),
    c("expand", 2, 4, 3),
    c("expand_as", A(lambda x: torch.zeros(2, 4, 3), "zeros(2,4,3)")),
    c("broadcast_to", (2, 4, 3)),
    c("movedim", 0, 1),
    c("moveaxis", 0, 1),
    c("swapaxes", 0, 1),
    c("swapdims", 0, 1),
    c("flip", 0),
    c("fliplr"),
    c("flipud"),
    c("roll", 1, 0),
    c("rot90"),
    c("narrow", 0, 1, 2),
    c("tile", (2, 1)),
    c("repeat", 2, 1),
    c("repeat_interleave", 2, dim=0),
    c("atleast_1d", _={"kinds": ("nested", "empty_batch")}),
    c("atleast_2d", _={"kinds": ("nested", "empty_batch")}),
    c("atleast_3d"),
    c("unbind", 0),
    c("split", 2, 0),
    c("split", [1, 3], 0, _={"tag": "sizes"}),
    c("chunk", 2, 0),
    c("tensor_split", 3, 0),
    c("pad", [0, 1]),
    # ---------------------------------------------------------------- torch functions
    c("gather", 0, A(lambda x: torch.tensor([[0, 1, 0], [3, 2, 1]]), "index")),
    f("gather", lambda ctx, o: torch.gather(o, 0, torch.tensor([[0, 1, 0]])), tag="torch"),
    c("where", MASK, 0.0),
    f("where", lambda ctx, o: torch.where(mask_of(ctx), o, 0.0), tag="torch"),
    c("masked_select", MASK),
    f("cat", lambda ctx, o: _cls(ctx).cat([o, o], 0)),
    f("cat", lambda ctx, o: torch.cat([o, o], 0), tag="torch"),
    f("stack", lambda ctx, o: _cls(ctx).stack([o, o], 0)),
    f("stack", lambda ctx, o: torch.stack([o, o], 0), tag="torch"),
    f("maybe_dense_stack", lambda ctx, o: _cls(ctx).maybe_dense_stack([o, o], 0)),
    c("cat_tensors", "a", "a", out_key="cat", dim=-1),
    c("stack_tensors", "a", "a", out_key="stk", dim=-1),
    c("cat_from_tensordict", 1, _={"kinds": ("numeric",)}),
    c("stack_from_tensordict", 1, _={"kinds": ("numeric",)}),
    # ---------------------------------------------------------------- constructors
    f("empty", lambda ctx, o: (e := o.empty(), list(e.keys()), e.batch_size)[1:]),
    f("empty", lambda ctx, o: o.empty(recurse=True).batch_size, tag="recurse"),
    f("new_empty", lambda ctx, o: o.new_empty(2, 3).batch_size),
    c("new_zeros", 2, 3),
    c("new_ones", 2, 3),
    c("new_full", (2, 3), 7),
    f("new_tensor", lambda ctx, o: o.new_tensor(torch.zeros(2))),
    c("clone"),
    c("clone", False, _={"tag": "shallow", "containers": ("memory",)}),
    c("copy", _={"containers": ("memory",)}),
    c("copy_", ONES),
    c("contiguous", _={"kinds": ALL_KINDS}),
    f("from_dict", lambda ctx, o: _cls(ctx).from_dict({"a": torch.zeros(3, 2)}, batch_size=[3])),
    f(
        "from_dict",
        lambda ctx, o: _cls(ctx).from_dict({"a": torch.zeros(3, 2)}, auto_batch_size=True),
        tag="auto",
    ),
    f(
        "from_dict_instance",
        lambda ctx, o: ctx.fresh().from_dict_instance({"a": torch.zeros(4, 3)}),
    ),
    f("from_any", lambda ctx, o: _cls(ctx).from_any({"a": torch.zeros(3)})),
    f("from_namedtuple", lambda ctx, o: _cls(ctx).from_namedtuple(ctx.fresh().to_namedtuple())),
    f(
        "from_pytree",
        lambda ctx, o: _cls(ctx).from_pytree({"a": torch.zeros(3), "b": [torch.ones(2)]}),
    ),
    f(
        "from_struct_array",
        lambda ctx, o: _cls(ctx).from_struct_array(ctx.fresh().to_struct_array()),
        kinds=("numeric",),
    ),
    f("from_tuple", lambda ctx, o: _cls(ctx).from_tuple((torch.zeros(3), torch.ones(3)))),
    f(
        "from_list",
        lambda ctx, o: _cls(ctx).from_list([{"a": torch.zeros(2)}, {"a": torch.ones(2)}]),
    ),
    f("from_dataclass", lambda ctx, o: _cls(ctx).from_dataclass(_DC(torch.zeros(3)))),
    f("fromkeys", lambda ctx, o: _cls(ctx).fromkeys(["a", "b"], 0)),
    f(
        "from_schema",
        lambda ctx, o: _cls(ctx).from_schema({"a": ([2], torch.float32)}, batch_size=[3]),
    ),
    *(
        f(
            "from_schema",
            lambda ctx, o, st=st, kw=kw: _from_schema(ctx, st, kw),
            tag=st,
            containers=("memory",),
        )
        for st, kw in (
            ("shared", {}),
            ("memmap", {"prefix": "fs-mm"}),
            ("h5", {"filename": "fs.h5"}),
            ("zarr", {"filename": "fs.zarr"}),
            ("redis-none", None),
        )
    ),
    f("from_h5", lambda ctx, o: _cls(ctx).from_h5(_h5_file(ctx)).to_tensordict()),
    f("from_zarr", lambda ctx, o: _cls(ctx).from_zarr(_zarr_store(ctx)).to_tensordict()),
    # ---------------------------------------------------------------- conversions
    c("to", torch.float64, _={"kinds": ("nested", "numeric")}),
    c("to", "cpu", _={"tag": "device"}),
    c("to_dict", _={"kinds": ALL_KINDS}),
    c("to_tensordict", _={"kinds": ALL_KINDS}),
    c("to_namedtuple"),
    c("to_pytree"),
    c("to_struct_array", _={"kinds": ("numeric",)}),
    c("tolist"),
    c("numpy", _={"kinds": ("nested", "numeric")}),
    c("as_tensor"),
    c("cpu"),
    # no accelerator here: both raise RuntimeError ("Cannot access accelerator device")
    c("pin_memory"),
    c("type", torch.float32),
    *(c(n, _={"kinds": ("numeric",)}) for n in CASTS),
    c("detach"),
    c("detach_"),
    f("requires_grad_", lambda ctx, o: o.float().requires_grad_().requires_grad),
    c("zero_grad"),
    f(
        "backward",
        lambda ctx, o: (
            t := ctx.fresh().float().requires_grad_(),
            t.sum().backward(t.sum().apply(torch.ones_like)),
            t.grad,
        )[2],
    ),
    c("state_dict"),
    f("load_state_dict", lambda ctx, o: o.load_state_dict(ctx.fresh(1.0).state_dict())),
    c("attrs"),
    *(
        f("attrs", lambda ctx, o, fl=fl: _attrs_fields(o.attrs(fields=fl)), tag="-".join(fl))
        for fl in (("device", "dtype", "shape"), ("dtype",), ("shape", "device"))
    ),
    f("attrs", lambda ctx, o: o.float().to(o.attrs()), tag="to"),
    f(
        "attrs",
        lambda ctx, o: o.float().exclude("b").to(o.attrs(fields=("dtype",))),
        tag="to-partial",
        containers=("memory",),
    ),
    f("attrs", lambda ctx, o: o.attrs().batch_size, tag="batch", kinds=ALL_KINDS),
    c("pack"),
    *(c("pack", d, _={"tag": f"dim{d}", "kinds": ("float",)}) for d in (-1, 0, 1, 2, -3, 3)),
    f("pack", lambda ctx, o: o.float().pack(), tag="float"),
    f(
        "pack",
        lambda ctx, o: o.filter_non_tensor_data().pack(),
        tag="nontensor",
        kinds=("nontensor",),
    ),
    f("pack", lambda ctx, o: o.empty().pack(), tag="no-leaf"),
    f(
        "pack",
        lambda ctx, o: (lay := (t := o.float()).pack(1)[1]).unpack(t.pack(1, layout=lay)[0][:2]),
        tag="unpack",
    ),
    f(
        "pack",
        lambda ctx, o: (t := o.float()).pack(1)[1].unpack(t.pack(1)[0][:, :1]),
        tag="unpack-short",
    ),
    f("pack", lambda ctx, o: (t := o.float()).pack(0, layout=t.pack(1)[1]), tag="layout-dim"),
    f(
        "pack",
        lambda ctx, o: (t := o.float()).exclude("a").pack(layout=t.pack()[1]),
        tag="layout-keys",
    ),
    f("to_h5", lambda ctx, o: o.to_h5(TMPFILE.fn(ctx)).to_tensordict()),
    f(
        "to_zarr",
        lambda ctx, o: o.to_zarr(str(ctx.tmp / f"z-{ctx.lib.name}.zarr")).to_tensordict(),
        kinds=("numeric",),
    ),
    # ---------------------------------------------------------------- memmap
    f("memmap", lambda ctx, o: o.memmap(str(ctx.tmp / f"mm-{ctx.lib.name}")).to_tensordict()),
    f("memmap_", lambda ctx, o: o.memmap_(str(ctx.tmp / f"mm_-{ctx.lib.name}")).is_memmap()),
    f("memmap_like", lambda ctx, o: o.memmap_like(str(ctx.tmp / f"ml-{ctx.lib.name}")).batch_size),
    f("save", lambda ctx, o: o.save(str(ctx.tmp / f"sv-{ctx.lib.name}")).to_tensordict()),
    f("dumps", lambda ctx, o: o.dumps(str(ctx.tmp / f"du-{ctx.lib.name}")).to_tensordict()),
    f("load_memmap", lambda ctx, o: _cls(ctx).load_memmap(_saved(ctx, o))),
    f("load", lambda ctx, o: _cls(ctx).load(_saved(ctx, o))),
    f("load_", lambda ctx, o: ctx.fresh(0.0).load_(_saved(ctx, o))),
    f("load_memmap_", lambda ctx, o: ctx.fresh(0.0).load_memmap_(_saved(ctx, o))),
    f("saved_path", lambda ctx, o: o.memmap(str(ctx.tmp / "sp")).saved_path.name),
    c("is_memmap"),
    f(
        "make_memmap",
        lambda ctx, o: ctx.fresh().memmap_(str(ctx.tmp / "mk")).make_memmap("q", [4, 3]).shape,
    ),
    f(
        "make_memmap_from_tensor",
        lambda ctx, o: (
            ctx.fresh().memmap_(str(ctx.tmp / "mt")).make_memmap_from_tensor("q", torch.ones(4, 3))
        ),
    ),
    f(
        "make_memmap_from_storage",
        lambda ctx, o: (
            ctx.fresh()
            .memmap_(str(ctx.tmp / "ms"))
            .make_memmap_from_storage(
                "q", torch.ones(12).untyped_storage(), [4, 3], dtype=torch.float32
            )
        ),
    ),
    f(
        "memmap_refresh_",
        lambda ctx, o: ctx.fresh().memmap_(str(ctx.tmp / "mr")).memmap_refresh_().batch_size,
    ),
    # ---------------------------------------------------------------- refused on persistent
    c("select", "a"),
    c("exclude", "a"),
    c("rename_keys", {"a": "a2"}),
    c("set_non_tensor", "s2", "text"),
    c("share_memory_"),
    # in memory: tensordict's semantics (a store refuses all three, compared above)
    *(
        c("rename_keys", m, _={"tag": tag, "containers": ("memory",)})
        for tag, m in (
            ("swap", {"a": "b", "b": "a"}),
            ("chain", {"a": "b", "b": "c"}),
            ("nested-out", {("n", "m", "z"): "z", ("n", "x"): "x"}),
            ("nested-in", {"a": ("n", "a"), "n": "n2"}),
            ("into-self", {"a": ("a", "inner")}),
            ("present", {"a": "b"}),
            ("twice", {"a": "q", "b": "q"}),
            ("overlap", {"n": "q", ("n", "x"): "r"}),
            ("through-leaf", {"a": ("b", "c")}),
            ("empty-key", {(): "q"}),
            ("missing", {"zz": "q"}),
        )
    ),
    c(
        "rename_keys",
        {"zz": "q", "a": "q2"},
        strict=False,
        _={"tag": "lax", "containers": ("memory",)},
    ),
    f(
        "rename_keys",
        lambda ctx, o: (o.lock_(), (r := o.rename_keys({"a": "q"})).is_locked, r["q"] is o["a"])[
            1:
        ],
        tag="locked-shares",
        containers=("memory",),
    ),
    c("set_non_tensor", ("n", "new", "s"), 3, _={"tag": "nested", "containers": ("memory",)}),
    f(
        "set_non_tensor",
        lambda ctx, o: o.set_non_tensor(("n", "s"), "v")["n", "s"],
        tag="read-back",
        containers=("memory",),
    ),
    f(
        "set_non_tensor",
        lambda ctx, o: o.lock_().set_non_tensor("a", 1),
        tag="locked",
        containers=("memory",),
    ),
    c("set_non_tensor", ("a", "b"), 1, _={"tag": "through-leaf", "containers": ("memory",)}),
    c("set_non_tensor", 1, 1, _={"tag": "bad-key", "containers": ("memory",)}),
    f(
        "share_memory_",
        lambda ctx, o: (
            o.share_memory_(),
            o.is_shared(),
            o.is_locked,
            o["a"].is_shared(),
            o["n"].is_shared(),
            o.unlock_().is_shared(),
            o.lock_().is_shared(),
        )[1:],
        tag="marks",
        containers=("memory",),
    ),
    f(
        "share_memory_",
        lambda ctx, o: o.memmap_(str(ctx.tmp / f"shm-{ctx.lib.name}")).share_memory_(),
        tag="memmap",
        containers=("memory",),
    ),
    # ---------------------------------------------------------------- operators
    f("__add__", lambda ctx, o: o + 1),
    f("__radd__", lambda ctx, o: 1 + o),
    f("__sub__", lambda ctx, o: o - 1),
    f("__rsub__", lambda ctx, o: 1 - o),
    f("__mul__", lambda ctx, o: o * 2),
    f("__rmul__", lambda ctx, o: 2 * o),
    f("__truediv__", lambda ctx, o: o / 2),
    f("__rtruediv__", lambda ctx, o: 2 / (o.abs() + 1)),
    f("__pow__", lambda ctx, o: o**2),
    f("__rpow__", lambda ctx, o: 2**o),
    f("__mod__", lambda ctx, o: o % 2),
    f("__neg__", lambda ctx, o: -o),
    f("__abs__", lambda ctx, o: abs(o)),
    f("__invert__", lambda ctx, o: ~o, kinds=("numeric",)),
    f("__and__", lambda ctx, o: o.bool() & True),
    f("__or__", lambda ctx, o: o.bool() | False),
    f("__xor__", lambda ctx, o: o.bool() ^ True),
    f("__eq__", lambda ctx, o: o == ctx.fresh(), kinds=ALL_KINDS),
    f("__eq__", lambda ctx, o: o == "z", tag="str"),
    f("__eq__", lambda ctx, o: o == ctx.fresh().to_dict(), tag="dict"),
    f("__ne__", lambda ctx, o: o != 0),
    f("__lt__", lambda ctx, o: o < 0),
    f("__ge__", lambda ctx, o: o >= 0),
    f("__bool__", lambda ctx, o: bool(o)),
    f("__len__", lambda ctx, o: len(o), kinds=ALL_KINDS),
    f("__iter__", lambda ctx, o: [t for t in o], kinds=("nested",)),
    f("__contains__", lambda ctx, o: ("a" in o, ("n", "x") in o, "zz" in o)),
    f("__getitem__", lambda ctx, o: o[1:3, 0], tag="slice"),
    f("__getitem__", lambda ctx, o: o[mask_of(ctx)], tag="mask"),
    f("__getitem__", lambda ctx, o: o[None], tag="none", kinds=ALL_KINDS),
    # None (a new dim) in an index: a lazy view on a store, read and written through
    f("__getitem__", lambda ctx, o: o[:, None], tag="none-mid"),
    f("__getitem__", lambda ctx, o: o[..., None], tag="none-last", kinds=ALL_KINDS),
    f("__getitem__", lambda ctx, o: o[None, 0], tag="none-int"),
    f("__getitem__", lambda ctx, o: o[None, 1:3, None, torch.tensor([2, 0])], tag="none-mixed"),
    f("__getitem__", lambda ctx, o: o[None, mask_of(ctx)], tag="none-mask"),
    f("__getitem__", lambda ctx, o: o[None][:, 1:3][0, None], tag="none-view-of-view"),
    f("__getitem__", lambda ctx, o: o[None, 4], tag="none-out-of-range"),
    f("__getitem__", lambda ctx, o: o[None, 0, 0, 0], tag="none-too-many"),
    f(
        "__setitem__",
        lambda ctx, o: o.__setitem__((None, slice(1, 3)), ctx.fresh(5.0)[None, 1:3]),
        tag="none",
    ),
    f(
        "__setitem__",
        lambda ctx, o: o.__setitem__((slice(1, 3), None), ctx.fresh(5.0)[1:2]),
        tag="none-broadcast",
    ),
    f(
        "__setitem__",
        lambda ctx, o: o.__setitem__((slice(1, 3), None), ctx.fresh(5.0)[1:3]),
        tag="none-mismatch",
    ),
    f("__setitem__", lambda ctx, o: o.__setitem__((None, 0), 7.0), tag="none-number"),
    f(  # a batch of 2 into a selection of 1 (tensordict's test_setitem): refused
        "__setitem__",
        lambda ctx, o: o.__setitem__(slice(0, 1), ctx.fresh(5.0)[0:2]),
        tag="batch-mismatch",
    ),
    f(  # a batch of 1 into a selection of 2: expanded on a store
        "__setitem__",
        lambda ctx, o: o.__setitem__(slice(0, 2), ctx.fresh(5.0)[0:1]),
        tag="batch-expand",
    ),
    f("update_", lambda ctx, o: o[:, None].update_(ctx.fresh(2.0)[:, None]), tag="none-view"),
    f("set_", lambda ctx, o: o[:, None].set_("a", torch.zeros(4, 1, 3, 2)), tag="none-view"),
    f("add_", lambda ctx, o: o[None, 1:3, None].add_(1), tag="none-view", kinds=("float",)),
    f("__getitem__", lambda ctx, o: o[torch.tensor([2, 0, 2])], tag="tensor"),
    f("__setitem__", lambda ctx, o: o.__setitem__(slice(0, 2), ctx.fresh(5.0)[0:2])),
    f("__setitem__", lambda ctx, o: o.__setitem__("k", torch.zeros(ctx.batch)), tag="key"),
    f("__delitem__", lambda ctx, o: (o.__delitem__("a"), sorted(map(str, o.keys(True))))[1]),
    f("__iadd__", lambda ctx, o: o.__iadd__(1)),
    f("__imul__", lambda ctx, o: o.__imul__(2), kinds=("float",)),
    f("__isub__", lambda ctx, o: o.__isub__(1), kinds=("float",)),
    f("__itruediv__", lambda ctx, o: o.__itruediv__(2), kinds=("float",)),
    f("__ipow__", lambda ctx, o: o.__ipow__(2), kinds=("float",)),
    f("__le__", lambda ctx, o: o <= 0),
    f("__gt__", lambda ctx, o: o > 0),
    f("__rand__", lambda ctx, o: True & o.bool()),
    f("__ror__", lambda ctx, o: False | o.bool()),
    f("__rxor__", lambda ctx, o: True ^ o.bool()),
    f("__copy__", lambda ctx, o: copy.copy(o), containers=("memory",)),
    f("__deepcopy__", lambda ctx, o: copy.deepcopy(o), containers=("memory",)),
    f("__reversed__", lambda ctx, o: sorted(map(str, reversed(o)))),
    f("__enter__", lambda ctx, o: _with_unlock(o)),
    f("__exit__", lambda ctx, o: _with_unlock(o)),
    f("__torch_function__", lambda ctx, o: torch.clone(o)),
    c("complex32", _={"kinds": ("float",)}),
]


@dataclasses.dataclass
class _DC:
    a: torch.Tensor


def mask_of(ctx: Ctx) -> torch.Tensor:
    return MASK.fn(ctx)


def _with_unlock(o: Any) -> Any:
    o.lock_()
    with o.unlock_():
        inside = o.is_locked
    return inside, o.is_locked


def _h5_file(ctx: Ctx) -> str:
    import tensordict  # the file is written by tensordict for both sides

    path = ctx.tmp / "src.h5"
    if not path.exists():
        tensordict.TensorDict({"a": torch.arange(6.0).reshape(3, 2)}, [3]).to_h5(str(path)).close()
    return str(path)


def _zarr_store(ctx: Ctx) -> str:
    import tensordict

    path = ctx.tmp / "src.zarr"
    if not path.exists():
        tensordict.TensorDict({"a": torch.arange(6.0).reshape(3, 2)}, [3]).to_zarr(
            str(path)
        ).close()
    return str(path)


def _saved(ctx: Ctx, o: Any) -> str:
    path = ctx.tmp / f"saved-{ctx.lib.name}"
    if not path.exists():
        ctx.fresh().memmap(str(path))
    return str(path)


_ = (BATCH, TMPFILE)  # builders kept importable for new cases


# ---------------------------------------------------------------- autograd, logsumexp(out=),
# apply(out=): in memory the leaves carry the graph; a store never does
def _rg(ctx: Ctx) -> Any:
    """An in-memory float copy of the data whose leaves require gradients."""
    return ctx.fresh().float().requires_grad_()


def _backward_grad(ctx: Ctx, gradient: Callable[[Any], Any]) -> Any:
    t = _rg(ctx)
    out = t * 2
    out.backward(gradient(out))
    return t.grad


def _partial_grad(ctx: Ctx) -> Any:
    t = _rg(ctx)
    t["a"].sum().backward()
    return t.grad


def _grad_setter(ctx: Ctx) -> Any:
    t = _rg(ctx)
    t.grad = ctx.fresh(2.0).float()
    t.grad = ctx.fresh(3.0).float()  # written into the existing .grad
    return t.grad


def _zero_grad_keeps(ctx: Ctx) -> Any:
    t = _rg(ctx)
    (t * 3).sum().backward(ctx.fresh(1.0).float().sum())
    return t.zero_grad(set_to_none=False).grad


def _lse_out(ctx: Ctx, o: Any, empty: bool, dim: Any, keepdim: bool) -> Any:
    out = ctx.fresh().logsumexp(dim, keepdim=keepdim)
    if empty:
        out = out.empty()
    before = {k: out.get(k) for k in out.keys(True, True)}
    result = o.logsumexp(dim, keepdim=keepdim, out=out)
    kept = all(result.get(k) is v for k, v in before.items())
    return result is out, kept, result


def _apply_out_replaces(ctx: Ctx, o: Any) -> Any:
    out = ctx.fresh()
    a = out["a"]
    result = o.apply(lambda t: t * 2, out=out)
    return result is out, out["a"] is a, out


def _autograd_grad(ctx: Ctx, o: Any) -> Any:
    t = _rg(ctx)
    out = t * 2 + t * t
    return torch.autograd.grad(out, t, torch.ones_like(out))


CASES.extend(
    [
        f("requires_grad_", lambda ctx, o: o.requires_grad_().requires_grad, tag="direct"),
        f(
            "requires_grad_",
            lambda ctx, o: o.requires_grad_().requires_grad,
            tag="direct-float",
            kinds=("float",),
        ),
        f("requires_grad_", lambda ctx, o: o.requires_grad_(False) is o, tag="false"),
        c("zero_grad", False, _={"tag": "keep", "kinds": ("nested", "nontensor")}),
        f("zero_grad", lambda ctx, o: _zero_grad_keeps(ctx), tag="zeros", containers=("memory",)),
        f("grad", lambda ctx, o: _partial_grad(ctx), tag="partial", kinds=("nested", "nontensor")),
        f("grad", lambda ctx, o: _grad_setter(ctx), tag="setter", containers=("memory",)),
        c("backward", _={"tag": "no-graph", "kinds": ALL_KINDS}),
        f("backward", lambda ctx, o: (_rg(ctx) + 1).backward(), tag="non-scalar"),
        f(
            "backward",
            lambda ctx, o: (t := _rg(ctx), t.sum().backward(), t.grad)[2],
            tag="scalars",
            kinds=("nested", "empty_batch"),
        ),
        f(
            "backward",
            lambda ctx, o: _backward_grad(ctx, lambda out: out.exclude("a")),
            tag="missing-key",
            containers=("memory",),
        ),
        f(
            "backward",
            lambda ctx, o: _backward_grad(ctx, lambda out: out.apply(lambda x: x.flatten()[:1])),
            tag="bad-shape",
            containers=("memory",),
        ),
        f(
            "backward",
            lambda ctx, o: _backward_grad(ctx, lambda out: torch.ones(out.batch_size)),
            tag="tensor-gradient",
            containers=("memory",),
        ),
        f(
            "backward",
            lambda ctx, o: (
                t := _rg(ctx),
                (t * t).sum().backward(inputs=t.select("a")),
                t.grad,
            )[2],
            tag="inputs",
            containers=("memory",),
        ),
        f(
            "detach_",
            lambda ctx, o: (u := _rg(ctx) * 2, u.detach_() is u, u.requires_grad)[1:],
            tag="graph",
            containers=("memory",),
        ),
        f("__torch_function__", _autograd_grad, tag="autograd-grad", kinds=("nested", "nontensor")),
        f(
            "__torch_function__",
            lambda ctx, o: torch.autograd.grad((o, o), o),
            tag="autograd-grad-two-outputs",
        ),
        f(
            "__torch_function__",
            lambda ctx, o: torch.autograd.grad(o, o, torch.ones_like(o)),
            tag="autograd-grad-no-graph",
        ),
        *(
            f(
                "logsumexp",
                lambda ctx, o, e=empty, d=dim, k=keep: _lse_out(ctx, o, e, d, k),
                tag=f"out-{'empty' if empty else 'complete'}-{'tuple' if isinstance(dim, tuple) else dim}-{keep}",
                kinds=("float",),
            )
            for empty in (False, True)
            for dim in (1, (0, -1))
            for keep in (False, True)
        ),
        f(
            "softmax",
            lambda ctx, o: (o.apply(lambda t: t.float(), out=o), o.softmax(-1))[1],
            tag="after-apply-out",
        ),
        c(
            "apply",
            A(lambda x: lambda t: t.float() * 2, "float*2"),
            out=SELF,
            _={"tag": "out-self"},
        ),
        f("apply", _apply_out_replaces, tag="out-replaces"),
        f(
            "apply",
            lambda ctx, o: o.apply(lambda t: t, out=ctx.fresh().lock_()),
            tag="out-locked",
        ),
    ]
)
