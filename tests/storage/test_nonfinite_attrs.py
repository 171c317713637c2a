"""Attributes holding NaN or an infinity keep their value when more attributes are written
later (a merge): zarr stores them as zarr's strings, listed in ``__ptd_float_attrs__``, and a
later ``set_attrs`` must keep the earlier names listed; HDF5 stores the floats themselves."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ptd.storage.api import Backend
from ptd.storage.registry import get_backend

SUFFIX = {"h5": ".h5", "zarr": ".zarr"}


def _open(tmp_path: Path, backend: str, mode: str) -> Backend:
    return get_backend(backend).open(tmp_path / f"attrs{SUFFIX[backend]}", mode)


def test_nan_attribute_survives_a_later_merge(tmp_path: Path, backend: str) -> None:
    be = _open(tmp_path, backend, "w")
    be.create_array(("v",), shape=(3,), dtype=np.dtype("f4"))
    be.set_attrs(("v",), {"missing": float("nan"), "range": [float("-inf"), 1.0]})
    # merges naming other attributes, one of them not finite either
    be.set_attrs(("v",), {"units": "K", "low": float("-inf")})
    be.set_attrs((), {"top": float("inf")})
    be.set_attrs((), {"title": "t", "hole": float("nan")})
    be.close()
    be = _open(tmp_path, backend, "r")
    attrs, root = be.get_attrs(("v",)), be.get_attrs(())
    be.close()
    assert math.isnan(attrs["missing"])
    assert attrs["range"] == [float("-inf"), 1.0]
    assert attrs["units"] == "K"
    assert attrs["low"] == float("-inf")
    assert math.isnan(root["hole"])
    assert root["top"] == float("inf")
    assert root["title"] == "t"


def test_rewritten_as_text_leaves_the_listing(tmp_path: Path, backend: str) -> None:
    """An attribute listed as a NaN and written again as the text "NaN" reads back as text;
    one written again as a finite float as that float."""
    be = _open(tmp_path, backend, "w")
    be.create_array(("v",), shape=(3,), dtype=np.dtype("f4"))
    be.set_attrs(("v",), {"a": float("nan"), "b": float("nan"), "c": float("nan")})
    be.set_attrs(("v",), {"a": "NaN", "b": 2.0})
    be.close()
    be = _open(tmp_path, backend, "r")
    attrs = be.get_attrs(("v",))
    be.close()
    assert attrs["a"] == "NaN"
    assert attrs["b"] == 2.0
    assert math.isnan(attrs["c"])


def test_zarr_listing_is_json(tmp_path: Path) -> None:
    be = _open(tmp_path, "zarr", "w")
    be.create_array(("v",), shape=(3,), dtype=np.dtype("f4"))
    be.set_attrs(("v",), {"missing": float("nan")})
    be.set_attrs(("v",), {"units": "K", "low": float("-inf")})
    be.close()

    def refuse(token: str) -> None:
        raise AssertionError(f"non-JSON token {token}")

    doc = json.loads(
        (tmp_path / "attrs.zarr" / "v" / "zarr.json").read_text(), parse_constant=refuse
    )
    assert doc["attributes"]["missing"] == "NaN"
    assert doc["attributes"]["__ptd_float_attrs__"] == ["low", "missing"]
