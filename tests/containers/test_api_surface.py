"""The public surface of ptd.TensorDictBase against tensordict 0.15.3's, through the table in
ptd/ops/api.py: a name tensordict adds, or one ptd gains or loses without the table saying so,
fails here."""

from __future__ import annotations

import pytest

import ptd
from ptd.containers import api


def _public(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_")}


def _defines(cls: type, name: str) -> bool:
    """``name`` is defined by ``cls`` or a base other than ``object``."""
    return any(name in vars(k) for k in cls.__mro__ if k is not object)


def test_table_is_consistent() -> None:
    implemented, out = set(api.IMPLEMENTED), set(api.OUT_OF_SCOPE)
    assert not implemented & out
    assert set(api.REFUSED) <= implemented, "a refused name is one the in-memory class has"
    assert implemented >= api.GAPS
    assert not set(api.PTD_ONLY) & (implemented | out)
    assert set(api.DUNDERS) >= api.DUNDER_GAPS
    for table in (api.REFUSED, api.OUT_OF_SCOPE, api.PTD_ONLY):
        assert all(isinstance(r, str) and r.strip() for r in table.values())
    assert all(f.strip() for f in api.IMPLEMENTED.values())
    assert api.status("sum") == "implemented"
    assert api.status("permute") == "refused"
    assert api.status("map") == "out of scope"
    assert api.status("leaf_meta") == "ptd only"
    assert api.status("no_such_method") == "unknown"


def test_every_tensordict_name_is_listed() -> None:
    """The table covers tensordict's TensorDictBase exactly: a name tensordict adds (or drops)
    fails until it is classified in ptd/ops/api.py."""
    tensordict = pytest.importorskip("tensordict")
    names = _public(tensordict.TensorDictBase)
    assert sorted(names - api.all_names()) == [], f"unlisted (tensordict {tensordict.__version__})"
    assert sorted(api.all_names() - names) == [], "listed, but not in tensordict's TensorDictBase"


def test_every_listed_dunder_is_tensordicts() -> None:
    tensordict = pytest.importorskip("tensordict")
    assert sorted(n for n in api.DUNDERS if not hasattr(tensordict.TensorDictBase, n)) == []


def test_ptd_public_names_are_listed() -> None:
    """Every public name of ptd.TensorDictBase is tensordict's (IMPLEMENTED) or a PTD_ONLY one."""
    extra = _public(ptd.TensorDictBase) - set(api.IMPLEMENTED) - set(api.PTD_ONLY)
    assert sorted(extra) == []
    assert sorted(set(api.PTD_ONLY) - _public(ptd.TensorDictBase)) == []


@pytest.mark.parametrize(
    "name",
    sorted(set(api.IMPLEMENTED) - api.GAPS),
)
def test_implemented(name: str) -> None:
    assert hasattr(ptd.TensorDictBase, name)
    assert hasattr(ptd.TensorDict, name)
    assert hasattr(ptd.PersistentTensorDict, name)


def test_gaps_are_still_missing() -> None:
    """A name listed as a gap that ptd now has: move it out of GAPS in ptd/ops/api.py (both
    lists are empty today: every method of tensordict's TensorDictBase is there)."""
    filled = [n for n in sorted(api.GAPS | api.DUNDER_GAPS) if hasattr(ptd.TensorDictBase, n)]
    assert not filled


@pytest.mark.parametrize("name", sorted(api.OUT_OF_SCOPE))
def test_out_of_scope_is_absent(name: str) -> None:
    """An out-of-scope name that ptd now has: reclassify it in ptd/ops/api.py."""
    assert not hasattr(ptd.TensorDictBase, name)


@pytest.mark.parametrize(
    "name",
    sorted(set(api.DUNDERS) - api.DUNDER_GAPS),
)
def test_dunder(name: str) -> None:
    assert _defines(ptd.TensorDictBase, name) or _defines(ptd.TensorDict, name)
    assert _defines(ptd.PersistentTensorDict, name)


def test_persistent_class_names() -> None:
    """What tensordict's PersistentTensorDict adds to the base, ptd's has too."""
    assert {"close", "kwargs"} <= _public(ptd.PersistentTensorDict)
