"""Zarr's :class:`~ptd.storage.api.FormatPolicy`: what the format is, and how ptd writes values
in it (each codec as a v3 codec document, attributes as JSON). Imports no store library, so
that code above the backends can ask it without importing zarr.

>>> POLICY.codec_options("zstd", 3)
{'compressors': [{'name': 'zstd', 'configuration': {'level': 3, 'checksum': False}}]}
>>> POLICY.codec_options("none", 0), POLICY.chosen_steps(None, 0)
({'compressors': None}, ())
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ptd.format.attrvalues import json_problem, json_values
from ptd.storage.api import FormatPolicy
from ptd.storage.properties import Codec, Stage

__all__ = ["POLICY", "ZarrPolicy"]


class ZarrPolicy(FormatPolicy):
    name = "zarr"
    label = "Zarr"
    suffix = ".zarr"
    chunks_required = True
    stores_shards = True
    maps_chunk_files = True
    chunks_along_batch = True
    writes_remote = True
    concurrent_writers = True
    consolidated_metadata = True
    object_per_node = True
    bytes_columns = True
    tables = "numeric"
    table_note = (
        "tables (records) are written as zarr-python's `structured` data type, which other "
        "Zarr v3 implementations may not read"
    )

    def codec_options(self, name: str | None, level: int) -> dict[str, Any]:
        if name in (None, "none"):
            return {"compressors": None}
        if name == "gzip":
            codec: dict[str, Any] = {"name": "gzip", "configuration": {"level": level}}
        elif name == "zstd":
            codec = {"name": "zstd", "configuration": {"level": level, "checksum": False}}
        else:
            cname = "lz4" if name == "lz4" else "zstd"
            codec = {
                "name": "blosc",
                "configuration": {"cname": cname, "clevel": level, "shuffle": "shuffle"},
            }
        return {"compressors": [codec]}

    def chosen_steps(self, name: str | None, level: int) -> tuple[Codec, ...]:
        out = []
        for doc in self.codec_options(name, level).get("compressors") or ():
            conf = dict(doc.get("configuration") or {})
            neutral = {"level": level} if doc["name"] in ("gzip", "zstd") else conf
            out.append(Codec(str(doc["name"]), Stage.COMPRESSOR, neutral, "zarr", dict(doc)))
        return tuple(out)

    def attrs_for(self, attrs: Mapping[str, Any]) -> dict[str, Any]:
        return json_values(attrs)

    def attr_problem(self, value: Any) -> str | None:
        return json_problem(value)


#: the one instance (``ZarrBackend.policy``)
POLICY = ZarrPolicy()
