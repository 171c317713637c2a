"""Differential tests: every public method of TensorDictBase, called the same way on tensordict
0.15.3 (the oracle) and on ptd, in memory and in h5 and zarr stores, over generated
tensordicts (nested, every dtype with bfloat16, empty batch, non-tensor leaves). Results are
compared as data: values, dtypes, batch sizes, keys; for exceptions, the builtin class a
caller catches. In-place methods also compare the object after the call.

The cases are in tests/diff_cases.py; deliberate differences in
``ptd.containers.api.KNOWN_DIFFERENCES`` (strict xfail: a difference that goes away fails until the
table is updated).
"""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("tensordict")

import ptd
from diff_cases import CASES, Case
from diff_support import KINDS, Ctx, assert_outcomes, build, call, libs
from ptd.containers import api

pytestmark = pytest.mark.interop


#: (name, container) of a GAPS method whose case still agrees with tensordict (none today)
_GAP_AGREES: set[tuple[str, str]] = set()


def _marks(case: Case, kind: str, container: str) -> list[pytest.MarkDecorator]:
    for key in (f"{case.id}@{container}", f"{case.id}@{kind}@{container}", case.id):
        reason = api.KNOWN_DIFFERENCES.get(key)
        if reason is not None:
            # key order differences depend on the data and on how each side lists a zarr
            # group: not strict; every other known difference must still differ
            strict = "key order" not in reason
            return [pytest.mark.xfail(reason=f"deliberate: {reason}", strict=strict)]
    name = case.name
    if name in api.GAPS or name in api.DUNDER_GAPS:
        cls = ptd.TensorDict if container == "memory" else ptd.PersistentTensorDict
        filled = hasattr(cls, name)
        if filled or (name, container) in _GAP_AGREES:
            return []  # a gap of the base class that this subclass fills: must agree
        return [pytest.mark.xfail(reason=f"{name}: a gap (ptd/ops/api.py GAPS)", strict=True)]
    return []


def _params() -> list[Any]:
    out = []
    for case in CASES:
        for kind in case.kinds:
            for container in case.containers:
                out.append(
                    pytest.param(
                        case,
                        kind,
                        container,
                        id=f"{case.id}-{kind}-{container}",
                        marks=_marks(case, kind, container),
                    )
                )
    return out


def _close(obj: Any) -> None:
    close = getattr(obj, "close", None)
    if close is not None:
        with contextlib.suppress(Exception), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            close()


@pytest.mark.parametrize(("case", "kind", "container"), _params())
def test_same_as_tensordict(case: Case, kind: str, container: str, tmp_path: Path) -> None:
    td_lib, ptd_lib = libs()
    data, batch = KINDS[kind]()
    (tmp_path / "td").mkdir()
    (tmp_path / "ptd").mkdir()
    try:
        expected_obj = build(td_lib, kind, container, tmp_path / "td" / "store")
    except Exception as exc:  # noqa: BLE001 - tensordict cannot store this data
        pytest.skip(f"tensordict 0.15.3 cannot build {kind} in {container}: {exc}")
    actual_obj = build(ptd_lib, kind, container, tmp_path / "ptd" / "store")
    try:
        expected = call(
            case,
            td_lib,
            Ctx(expected_obj, td_lib, kind, tmp_path / "td", data, batch),
            case.mutating,
        )
        actual = call(
            case,
            ptd_lib,
            Ctx(actual_obj, ptd_lib, kind, tmp_path / "ptd", data, batch),
            case.mutating,
        )
        assert_outcomes(expected, actual)
    finally:
        _close(expected_obj)
        _close(actual_obj)


def test_every_implemented_name_has_a_case() -> None:
    covered = {case.name for case in CASES}
    missing = sorted((set(api.IMPLEMENTED) | set(api.DUNDERS)) - covered)
    assert missing == []


def test_known_differences_name_cases() -> None:
    ids = {case.id for case in CASES}
    for key in api.KNOWN_DIFFERENCES:
        assert key.split("@")[0] in ids, key


def test_ptd_errors_are_builtins() -> None:
    """The comparison of exceptions relies on ptd errors deriving from the builtin ones."""
    assert issubclass(ptd.errors.PtdError, Exception)
