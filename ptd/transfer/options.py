"""What a conversion is asked to do, checked once: :class:`ConvertOptions` (every argument of
:func:`ptd.convert`, parsed and validated at the boundary), and what it reports:
:class:`ConvertResult` with one :class:`LeafPlan` per entry.

>>> opts = ConvertOptions.parse("data.h5", compression="ZSTD", chunks=64)
>>> opts.src.path, opts.dst, opts.compression, opts.level, opts.chunks
('data.h5', None, 'zstd', 3, 64)
>>> ConvertOptions.parse("data.h5", chunks=0)
Traceback (most recent call last):
...
ptd.errors.PtdValueError: chunks must be a positive number of rows, got 0
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, TypedDict, Unpack

from ptd.errors import Option, PtdTypeError, PtdValueError, redact
from ptd.storage import remote
from ptd.storage.location import StoreLocation, split_options
from ptd.storage.registry import writable_formats
from ptd.storage.stores import parse_source
from ptd.transfer.codecs import check_compression
from ptd.transfer.layouts import check_layout

__all__ = ["ConvertArgs", "ConvertOptions", "ConvertResult", "LeafPlan"]


class ConvertArgs(TypedDict, total=False):
    """The keyword arguments of a conversion, the one list :func:`ptd.convert`,
    :func:`ptd.distributed.convert_distributed` and :meth:`ConvertOptions.parse` take (each is
    documented at :func:`ptd.convert`); ``scheduler`` is beside it, since it is optional for
    one and required for the other."""

    to: str | None
    chunks: int | None
    compression: str | None
    level: int | None
    overwrite: bool
    dry_run: bool
    allow_pickle: bool
    skip_unsupported: bool
    workers: int
    storage_options: Mapping[str, Any] | None
    dst_storage_options: Mapping[str, Any] | None
    layout: str | None
    batch_size: Any
    batch_dims: int | None
    follow_virtual: bool


@dataclass(frozen=True)
class ConvertOptions:
    """The arguments of one conversion, checked (see :func:`ptd.convert` for each).

    Build it with :meth:`parse` from what a user passed; constructing it directly checks the
    scalar arguments the same way (the locations must be parsed already)."""

    #: the source (storage options attached when it is a URL)
    src: StoreLocation
    #: the destination as given, trailing separators dropped; None: beside ``src``
    dst: StoreLocation | None = None
    #: ``"h5"``/``"zarr"``, or None: from ``dst``'s suffix, else the other format
    to: str | None = None
    #: rows per chunk along the first dim of every tensor, or None: chosen per leaf
    chunks: int | None = None
    #: a codec name of :data:`ptd.transfer.codecs.COMPRESSIONS`, or None: keep each leaf's
    compression: str | None = None
    #: the codec's level (its default filled in), None without a compression
    level: int | None = None
    overwrite: bool = False
    dry_run: bool = False
    allow_pickle: bool = False
    #: leave out (and list as not copied) the keys the destination cannot hold, instead of
    #: refusing the whole conversion
    skip_unsupported: bool = False
    #: threads copying chunk regions (local conversion)
    workers: int = 1
    #: a Dask scheduler address, client or cluster, or None: convert locally
    scheduler: Any = field(default=None, compare=False)
    #: storage options of a default destination (derived from a URL ``src``) when they differ
    #: from the source's (``dst_storage_options=`` without ``dst``)
    default_dst_options: tuple[tuple[str, Any], ...] | None = None
    #: ``"random-access"`` (:mod:`ptd.transfer.layouts`), or None: keep each leaf's layout
    layout: str | None = None
    #: the root's batch size to record (``__tensordict__``), or None: keep the stored ones
    batch_size: tuple[int, ...] | None = None
    #: record each group's batch size of this many leading dims (per group), or None
    batch_dims: int | None = None
    #: HDF5 source: read (and copy) virtual datasets whose sources lie beside the file
    follow_virtual: bool = False

    def __post_init__(self) -> None:
        chunks = self.chunks
        if chunks is not None:
            if isinstance(chunks, bool) or int(chunks) < 1:
                raise PtdValueError(f"chunks must be a positive number of rows, got {chunks!r}")
            object.__setattr__(self, "chunks", int(chunks))
        name, level = check_compression(self.compression, self.level)
        object.__setattr__(self, "compression", name)
        object.__setattr__(self, "level", level)
        if self.to is not None and self.to not in writable_formats():
            raise PtdValueError(
                f"unknown format {self.to!r}; choose one of {', '.join(writable_formats())}"
            )
        layout = check_layout(self.layout)
        object.__setattr__(self, "layout", layout)
        if layout is not None and (self.chunks is not None or self.compression is not None):
            raise PtdValueError(
                f"layout {layout!r} chooses every leaf's chunks and compression: leave out ",
                Option("chunks", None),
                " and ",
                Option("compression", None),
                ", or convert without a layout",
            )
        if self.batch_size is not None:
            bs = self.batch_size
            if isinstance(bs, int) and not isinstance(bs, bool):
                bs = (bs,)
            try:
                bs = tuple(int(n) for n in bs)
            except (TypeError, ValueError):
                raise PtdValueError(
                    f"batch_size must be a sequence of ints, got {self.batch_size!r}"
                ) from None
            if any(n < 0 for n in bs):
                raise PtdValueError(f"batch_size must not be negative, got {list(bs)}")
            object.__setattr__(self, "batch_size", bs)
        if self.batch_dims is not None:
            bd = self.batch_dims
            if isinstance(bd, bool) or not isinstance(bd, int) or bd < 0:
                raise PtdValueError(f"batch_dims must be a number of dims >= 0, got {bd!r}")
            if self.batch_size is not None:
                raise PtdValueError("pass batch_size or batch_dims, not both")
        workers = self.workers
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise PtdValueError(f"workers must be a positive number of threads, got {workers!r}")

    @classmethod
    def parse(
        cls, src: Any, dst: Any = None, *, scheduler: Any = None, **args: Unpack[ConvertArgs]
    ) -> ConvertOptions:
        """Check :func:`ptd.convert`'s arguments and parse its stores (nothing is opened).

        ``storage_options`` go to whichever of ``src`` and ``dst`` is a URL (an error when
        neither is); ``dst_storage_options`` to a URL ``dst`` when they differ from ``src``'s.
        An argument that is not one of :class:`ConvertArgs` raises PtdTypeError naming it.
        """
        unknown = sorted(set(args) - set(ConvertArgs.__annotations__))
        if unknown:
            raise PtdTypeError(
                f"unknown conversion argument(s) {', '.join(unknown)}; the arguments are "
                f"{', '.join(ConvertArgs.__annotations__)}"
            )
        storage_options = args.get("storage_options")
        dst_storage_options = args.get("dst_storage_options")
        default_dst: tuple[tuple[str, Any], ...] | None = None
        if dst_storage_options is None:
            targets = (src,) if dst is None else (src, dst)
            locs = split_options(storage_options, *targets)
            src_loc, dst_loc = locs[0], (locs[1] if dst is not None else None)
        else:
            src_loc = StoreLocation.parse(src, storage_options)
            if dst is None:
                default_dst = tuple(sorted(dict(dst_storage_options).items()))
                dst_loc = None
            else:
                dst_loc = StoreLocation.parse(dst, dst_storage_options)
        # the source may lead into a store (robo.h5/data/demo_0: that group is converted)
        src_loc = parse_source(src_loc)
        if dst_loc is not None:
            stripped = dst_loc.path.rstrip("/\\")
            if stripped and stripped != dst_loc.path:
                dst_loc = StoreLocation(stripped, dst_loc.storage_options, dst_loc.format)
        return cls(
            src=src_loc,
            dst=dst_loc,
            to=args.get("to"),
            chunks=args.get("chunks"),
            compression=args.get("compression"),
            level=args.get("level"),
            overwrite=bool(args.get("overwrite", False)),
            dry_run=bool(args.get("dry_run", False)),
            allow_pickle=bool(args.get("allow_pickle", False)),
            skip_unsupported=bool(args.get("skip_unsupported", False)),
            workers=args.get("workers", 1),
            scheduler=scheduler,
            default_dst_options=default_dst,
            layout=args.get("layout"),
            batch_size=args.get("batch_size"),
            batch_dims=args.get("batch_dims"),
            follow_virtual=bool(args.get("follow_virtual", False)),
        )


@dataclass
class LeafPlan:
    """What happens to one entry."""

    key: str
    #: "group", "tensor", "non_tensor", "table", "unsupported", "references" (object
    #: references, made again in the copy) or "link" (a soft link; ``dtype`` names its target)
    kind: str
    shape: list[int] | None = None
    dtype: str | None = None
    nbytes: int = 0
    src_chunks: list[int] | None = None
    dst_chunks: list[int] | None = None
    #: the destination's shard shape (a sharded zarr array), else None
    dst_shards: list[int] | None = None
    src_compression: str | None = None
    dst_compression: str | None = None


@dataclass
class ConvertResult:
    src: str
    dst: str
    src_format: str
    dst_format: str
    groups: int = 0
    tensors: int = 0
    non_tensors: int = 0
    #: tables (records: HDF5 compound types, zarr structured arrays; ptd.format.tables)
    tables: int = 0
    #: logical bytes of every tensor copied
    nbytes: int = 0
    #: what the source and the destination occupy on disk (dst: None for a dry run)
    src_bytes: int | None = None
    dst_bytes: int | None = None
    #: bytes the destination's tensors occupy (None for a dry run, or when unknown)
    stored_nbytes: int | None = None
    seconds: float = 0.0
    dry_run: bool = False
    overwritten: bool = False
    #: threads that copied chunk regions (``workers=``); 0 for a distributed conversion
    workers: int = 1
    #: the Dask scheduler's address for a distributed conversion, else None
    scheduler: str | None = None
    #: chunk regions copied (one task each when distributed)
    regions: int = 0
    plan: list[LeafPlan] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: what the source holds that is not in the destination, each ``{"key", "reason"}`` (and
    #: ``"attr"`` for an attribute): skipped links always, unsupported keys with
    #: ``skip_unsupported`` (otherwise the conversion is refused)
    not_copied: list[dict[str, str]] = field(default_factory=list)

    @property
    def leaves(self) -> int:
        return self.tensors + self.non_tensors + self.tables

    @property
    def ratio(self) -> float | None:
        """Logical tensor bytes per stored tensor byte in the destination (compression)."""
        if not self.stored_nbytes:
            return None
        return self.nbytes / self.stored_nbytes

    @property
    def throughput(self) -> float | None:
        """Logical bytes per second."""
        return self.nbytes / self.seconds if self.seconds > 0 else None

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON-ready values; ``src`` and ``dst`` as ptd shows a location (a
        URL's secrets hidden: ``remote.display``), while the fields keep them as given."""
        d = asdict(self)
        d["src"], d["dst"] = remote.display(self.src), remote.display(self.dst)
        d["notes"] = [redact(n) for n in self.notes]
        d["leaves"] = self.leaves
        d["ratio"] = self.ratio
        return d
