"""OME-Zarr pyramids written by ome-zarr itself (NGFF 0.4 on Zarr v2, 0.5 on Zarr v3), converted
to h5 and back to zarr by ptd, and the zarr copy opened with ome-zarr's own reader: the same
levels, axes, transformations and multiscales metadata; ``diff`` of original and copies is
"same"."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zarr

import ptd

ome_zarr = pytest.importorskip("ome_zarr", reason="ome-zarr writes and reads the NGFF fixtures")
with warnings.catch_warnings():
    # ome-zarr's writer module makes a deprecated Scaler as a default argument on import
    warnings.simplefilter("ignore", DeprecationWarning)
    from ome_zarr.format import FormatV04, FormatV05
    from ome_zarr.io import parse_url
    from ome_zarr.reader import Reader
    from ome_zarr.writer import write_image

FORMATS = {"0.4": FormatV04, "0.5": FormatV05}


def _write_pyramid(path: Path, version: str) -> np.ndarray:
    fmt = FORMATS[version]()
    data = np.arange(2 * 32 * 24, dtype=np.uint16).reshape(2, 32, 24)
    store = parse_url(str(path), mode="w", fmt=fmt).store
    root = zarr.group(store=store, zarr_format=fmt.zarr_format)
    write_image(data, group=root, scale_factors=(2, 4), axes="cyx", fmt=fmt)
    return data


def _read(path: Path, version: str) -> tuple[list[np.ndarray], dict[str, Any]]:
    """The levels and the image's metadata, as ome-zarr's reader gives them."""
    nodes = list(Reader(parse_url(str(path), fmt=FORMATS[version]()))())
    assert nodes, f"ome-zarr finds no image in {path}"
    return [np.asarray(level) for level in nodes[0].data], dict(nodes[0].metadata)


def _multiscales(path: Path) -> Any:
    attrs = dict(zarr.open_group(str(path), mode="r").attrs)
    return attrs["ome"]["multiscales"] if "ome" in attrs else attrs["multiscales"]


@pytest.mark.parametrize("version", ["0.4", "0.5"])
def test_a_pyramid_converted_to_h5_and_back_opens_in_ome_zarr(tmp_path: Path, version: str) -> None:
    src, h5, back = tmp_path / "image.zarr", tmp_path / "image.h5", tmp_path / "copy.zarr"
    data = _write_pyramid(src, version)
    levels, meta = _read(src, version)
    assert len(levels) > 1
    assert np.array_equal(levels[0], data)

    to_h5 = ptd.convert(src, h5)
    assert not [i for i in to_h5.not_copied if "attr" in i], to_h5.not_copied
    to_zarr = ptd.convert(h5, back)
    assert not [i for i in to_zarr.not_copied if "attr" in i], to_zarr.not_copied

    copy_levels, copy_meta = _read(back, version)
    assert len(copy_levels) == len(levels)
    for a, b in zip(levels, copy_levels, strict=True):
        assert a.dtype == b.dtype
        assert np.array_equal(a, b)
    assert copy_meta["axes"] == meta["axes"]
    assert copy_meta["coordinateTransformations"] == meta["coordinateTransformations"]
    assert _multiscales(back) == _multiscales(src)

    assert ptd.diff(src, back).same
