"""The zarr-python versions ptd is tested with, and the check
:mod:`ptd.storage.zarr.private` runs before it imports zarr's private API.

:data:`TESTED_ZARR` is the range ``.ci/run`` tests (its oldest end in a second environment,
the newest in the main one), and ``pyproject.toml`` declares the same bounds. zarr 3.1.1 lacks
``zarr.errors.NodeNotFoundError``, which ptd's error translation needs; before 3.1.6 zarr's
codecs have no synchronous decode, so ptd's parallel chunk reader leaves zarr arrays to zarr
(the same values, zarr's speed). Another zarr raises
:class:`~ptd.errors.UntestedDependencyError` when a zarr store is opened (HDF5 keeps working),
unless ``PTD_UNTESTED_ZARR=1`` asks to try anyway (then it warns once).

>>> from ptd.storage.zarr.version import TESTED_ZARR, tested
>>> tested("3.1.2"), tested("3.1.1"), tested("3.2.0"), tested("3.1.6")
(True, False, False, True)
>>> TESTED_ZARR
('3.1.2', '3.2')
"""

from __future__ import annotations

import warnings

import zarr
from packaging.version import Version

from ptd.errors import UntestedDependencyError
from ptd.storage import runtime

__all__ = ["TESTED_ZARR", "UNTESTED_ENV", "check_version", "tested"]

#: the zarr-python versions ptd is tested with: ``>= TESTED_ZARR[0]``, ``< TESTED_ZARR[1]``
TESTED_ZARR = ("3.1.2", "3.2")
#: set to ``1`` to use an untested zarr anyway (ptd warns once)
UNTESTED_ENV = "PTD_UNTESTED_ZARR"


def tested(version: str) -> bool:
    """Whether ``version`` of zarr-python is in :data:`TESTED_ZARR`."""
    low, high = (Version(v) for v in TESTED_ZARR)
    found = Version(version)
    # a pre-release of the next minor (3.2.0rc1) is that release, not 3.1.x
    return low <= found and Version(found.base_version) < high


def check_version(version: str = zarr.__version__) -> None:
    """Raise :class:`~ptd.errors.UntestedDependencyError` for a zarr outside
    :data:`TESTED_ZARR` (a warning instead when ``PTD_UNTESTED_ZARR=1``)."""
    if tested(version):
        return
    low, high = TESTED_ZARR
    said = (
        f"zarr {version} is installed, but this ptd was tested with zarr >={low},<{high}: "
        "it uses parts of zarr's private API (zarr.core), which may differ in another release"
    )
    if runtime.setting(UNTESTED_ENV) == "1":
        warnings.warn(f"{said}; trying anyway ({UNTESTED_ENV}=1)", RuntimeWarning, stacklevel=2)
        return
    raise UntestedDependencyError(
        f"{said}. Install a tested zarr (pip install 'zarr>={low},<{high}'), or set "
        f"{UNTESTED_ENV}=1 to try this one anyway"
    )
