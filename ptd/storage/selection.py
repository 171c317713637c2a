"""Selections, as every backend takes them.

``Backend.read``/``Backend.write`` take a *selection*: a tuple with at most one entry per leading
dimension of the array, each entry being

* an ``int`` (the dimension is dropped),
* a ``slice`` with a step > 0 (``start``/``stop`` already clipped to the dimension), or
* a 1-D ``numpy.ndarray`` of int64, **sorted, without duplicates, in bounds** (at most one such
  entry per selection).

Missing trailing entries mean "everything". This is the form ``Backend.write`` and the store
libraries' own reads take. ``Backend.read`` takes more (index arrays unsorted and with
repeats, bool masks, joint arrays): the indexer (:mod:`ptd.storage.indexer`) projects it onto
the chunks, and hands a store library this form (:meth:`~ptd.storage.indexer.Indexer.library_form`).

    >>> selection_shape((10, 4, 3), (slice(0, 10, 2), 1))
    (5, 3)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ptd.errors import PtdValueError

__all__ = ["Selection", "fit_write_value", "selection_shape"]

#: a normalised selection (see the module doc)
Selection = tuple[Any, ...]


def selection_shape(shape: Sequence[int], selection: Selection) -> tuple[int, ...]:
    """The shape of ``array[selection]`` for a normalised selection (see the module doc)."""
    out: list[int] = []
    for dim, item in zip(shape, selection, strict=False):
        if isinstance(item, slice):
            out.append(len(range(*item.indices(dim))))
        elif isinstance(item, np.ndarray):
            out.append(int(item.shape[0]))
        # an int drops the dimension
    out.extend(shape[len(selection) :])
    return tuple(out)


def fit_write_value(
    value: Any, target_shape: tuple[int, ...], key: str, location: str
) -> np.ndarray:
    """``value`` as an array of ``target_shape`` (a broadcast view when it is smaller).

    Numpy's assignment rules: the value broadcasts to the target, and extra leading dims of
    size 1 are dropped. Anything else raises PtdValueError naming the key and both shapes.
    """
    value = np.asarray(value)
    if value.shape == target_shape:
        return value
    shape = value.shape
    extra = value.ndim - len(target_shape)
    if extra > 0 and all(d == 1 for d in value.shape[:extra]):
        value = value.reshape(value.shape[extra:])
    try:
        return np.broadcast_to(value, target_shape)
    except ValueError:
        raise PtdValueError(
            f"cannot write a value of shape {list(shape)} into key {key!r} of "
            f"{location}: the selected region has shape {list(target_shape)}"
        ) from None
