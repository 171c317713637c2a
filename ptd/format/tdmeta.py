"""The ``__tensordict__`` group attribute: one model, one parser, one writer.

tensordict 0.15 writes ``{"batch_size": [..], "version": 1}`` on zarr groups, plus
``"names": [..]`` when dim names are set (keys in that order); ptd writes the same on HDF5
groups too. Every reader of the attribute in ptd (the constructor, ``from_h5``/``from_zarr``,
``ptd.info``, ``ptd.validate``, ``convert``) goes through :func:`parse_td_meta`, so a malformed
attribute gets one answer everywhere: it is ignored (the batch size is inferred from the
entries) and reported as a problem.

>>> parse_td_meta({"__tensordict__": {"batch_size": [4, 2], "version": 1}})
ParsedTdMeta(meta=TdMeta(batch_size=(4, 2), names=None, version=1), problem='')
>>> parse_td_meta({"__tensordict__": {"batch_size": ["2"]}}).meta is None
True
>>> TdMeta((3,), names=("time",)).to_attr()
{'batch_size': [3], 'version': 1, 'names': ['time']}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ptd.format.names import TD_META_ATTR, TD_META_VERSION

__all__ = ["ParsedTdMeta", "TdMeta", "parse_td_meta", "td_meta_attrs"]


@dataclass(frozen=True)
class TdMeta:
    """A group's recorded batch size, dim names (or None) and format version."""

    batch_size: tuple[int, ...]
    names: tuple[str | None, ...] | None = None
    version: int = TD_META_VERSION

    def to_attr(self) -> dict[str, Any]:
        """The attribute value, keys in tensordict's order."""
        out: dict[str, Any] = {"batch_size": list(self.batch_size), "version": self.version}
        if self.names is not None and any(n is not None for n in self.names):
            out["names"] = list(self.names)
        return out


class ParsedTdMeta(NamedTuple):
    """What :func:`parse_td_meta` found: the metadata (None when there is none, or when its
    batch size is unusable) and a one-line problem ("" when none)."""

    meta: TdMeta | None
    problem: str


def _is_count(n: Any) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n >= 0


def parse_td_meta(attrs: Mapping[str, Any]) -> ParsedTdMeta:
    """Parse the ``__tensordict__`` attribute among a group's ``attrs``.

    The batch size must be a JSON list of non-negative integers: ``["2"]``, ``[2.0]``,
    ``[true]`` or ``[-1]`` make the whole attribute unusable (``meta`` None, with a problem).
    Names that are not a list of str/None as long as the batch size are dropped (``names``
    None) and reported, the batch size still counts. A missing attribute is ``(None, "")``.

    >>> parse_td_meta({}).problem
    ''
    >>> parse_td_meta({"__tensordict__": {"batch_size": [2], "names": ["a", "b"]}}).meta
    TdMeta(batch_size=(2,), names=None, version=1)
    """
    if TD_META_ATTR not in attrs:
        return ParsedTdMeta(None, "")
    raw = attrs[TD_META_ATTR]
    if not isinstance(raw, Mapping):
        return ParsedTdMeta(None, f"the {TD_META_ATTR} attribute is not a JSON object: {raw!r}")
    bs = raw.get("batch_size")
    if not isinstance(bs, list) or not all(_is_count(n) for n in bs):
        return ParsedTdMeta(
            None, f"the {TD_META_ATTR} attribute has no valid batch_size list: {dict(raw)!r}"
        )
    version = raw.get("version", TD_META_VERSION)
    if not _is_count(version):
        version = TD_META_VERSION
    names_raw = raw.get("names")
    names: tuple[str | None, ...] | None = None
    problem = ""
    if names_raw is not None:
        if (
            isinstance(names_raw, list)
            and len(names_raw) == len(bs)
            and all(n is None or isinstance(n, str) for n in names_raw)
        ):
            names = tuple(names_raw)
        else:
            problem = (
                f"the {TD_META_ATTR} attribute's names {names_raw!r} do not fit its batch_size "
                f"{bs} (ignored)"
            )
    return ParsedTdMeta(TdMeta(tuple(bs), names, version), problem)


def td_meta_attrs(
    batch_size: Sequence[int], names: Sequence[str | None] | None = None
) -> dict[str, Any]:
    """``{"__tensordict__": ...}``: the attributes to write on a group of this batch size.

    >>> td_meta_attrs([3])
    {'__tensordict__': {'batch_size': [3], 'version': 1}}
    """
    meta = TdMeta(tuple(int(n) for n in batch_size), tuple(names) if names is not None else None)
    return {TD_META_ATTR: meta.to_attr()}
