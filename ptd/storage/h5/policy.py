"""HDF5's :class:`~ptd.storage.api.FormatPolicy`: what the format is, and how ptd writes
values in it (creation options of each codec, attribute values). Imports no store library
(but to tell HDF5's version), so that code above the backends can ask it without importing
h5py.

>>> POLICY.codec_options("gzip", 4)
{'compression': 'gzip', 'compression_opts': 4}
>>> [c.describe() for c in POLICY.chosen_steps("zstd", 5)]
['zstd(5)']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ptd.format.attrvalues import hdf5_problem, hdf5_values
from ptd.storage.api import FormatPolicy
from ptd.storage.properties import Codec, Stage

__all__ = ["H5_CHUNK_CACHE", "H5_FILTER", "POLICY", "H5Policy"]

#: registered HDF5 filter ids of the plugin codecs ``convert`` writes
H5_FILTER = {"zstd": 32015, "blosc": 32001, "lz4": 32004}
#: HDF5's default chunk cache per dataset (1 MiB): unfiltered chunks larger than it are read
#: in place, not through the cache
H5_CHUNK_CACHE = 1 << 20


class H5Policy(FormatPolicy):
    name = "h5"
    label = "HDF5"
    suffix = ".h5"
    stores_contiguous = True
    in_place_chunk_bytes = H5_CHUNK_CACHE
    keeps_userblock = True
    handles_survive_fork = False
    serial_reads = True
    bytes_list_as_stack = True
    tables = "any"
    swmr_reading = True
    virtual_data = True
    #: ``h5py.File``'s keywords that ptd does not pass (it opens with its own choices)
    library_open_options = frozenset(
        {
            "driver",
            "libver",
            "rdcc_nslots",
            "rdcc_nbytes",
            "rdcc_w0",
            "fs_strategy",
            "fs_persist",
            "fs_threshold",
            "fs_page_size",
            "page_buf_size",
            "min_meta_keep",
            "min_raw_keep",
            "alignment_threshold",
            "alignment_interval",
            "meta_block_size",
            "backing_store",
        }
    )
    #: ``h5py.Group.create_dataset``'s keywords (hdf5plugin's filters expand to
    #: ``compression``/``compression_opts``), and ptd's ``dimension_names``
    array_options = frozenset(
        {
            "chunks",
            "maxshape",
            "compression",
            "compression_opts",
            "scaleoffset",
            "shuffle",
            "fletcher32",
            "fillvalue",
            "fill_time",
            "track_times",
            "track_order",
            "dcpl",
            "dapl",
            "external",
            "efile_prefix",
            "virtual_prefix",
            "allow_unknown_filter",
            "dimension_names",
        }
    )

    def library_versions(self) -> dict[str, str]:
        import h5py  # h5py may bundle its own HDF5: only it knows which

        return {"hdf5": h5py.version.hdf5_version}

    def codec_options(self, name: str | None, level: int) -> dict[str, Any]:
        if name in (None, "none"):
            return {}
        if name == "gzip":
            return {"compression": "gzip", "compression_opts": level}
        if name == "zstd":
            return {"compression": H5_FILTER["zstd"], "compression_opts": (level,)}
        if name == "blosc":  # cd_values: reserved x4, clevel, shuffle, compressor (5: zstd)
            return {
                "compression": H5_FILTER["blosc"],
                "compression_opts": (0, 0, 0, 0, level, 1, 5),
            }
        return {"compression": H5_FILTER["lz4"], "compression_opts": (0,)}

    def chosen_steps(self, name: str | None, level: int) -> tuple[Codec, ...]:
        if name in (None, "none"):
            return ()
        opts = self.codec_options(name, level)
        code = opts["compression"]
        if code == "gzip":
            return (Codec("gzip", Stage.COMPRESSOR, {"level": level}),)
        values = tuple(int(v) for v in opts["compression_opts"])
        config = {"cname": "zstd", "clevel": level} if name == "blosc" else {"level": level}
        return (Codec(str(name), Stage.COMPRESSOR, config, "h5", (int(code), 1, values)),)

    def attrs_for(self, attrs: Mapping[str, Any]) -> dict[str, Any]:
        return hdf5_values(attrs)

    def attr_problem(self, value: Any) -> str | None:
        return hdf5_problem(value)


#: the one instance (``H5Backend.policy``)
POLICY = H5Policy()
