"""The chunk layout rule both formats share: tensordict's ``chunks=`` creation option.

>>> leading_chunks(10, (100, 3, 4)), leading_chunks((0, 2), (5, 3))
((10, 3, 4), (1, 2))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["leading_chunks"]


def leading_chunks(spec: Any, shape: Sequence[int]) -> tuple[int, ...]:
    """The chunk shape that a ``chunks=`` option (an int or a tuple) gives an array of
    ``shape``: it covers the leading dims, the others stay whole; each chunk dim is at least 1
    (``docs/format.md`` §2)."""
    c = (int(spec),) if isinstance(spec, (int, np.integer)) else tuple(int(x) for x in spec)
    c = c[: len(shape)] + tuple(shape[len(c) :])
    return tuple(max(1, x) for x in c)
