"""The names a backend's format can hold: the hooks of :class:`~ptd.storage.backends.base.Backend`
that say which names it stores escaped (:mod:`ptd.format.keynames`) and which it cannot hold at
all. HDF5 holds every name a key can have; the zarr backend overrides :meth:`escaped_name`
(:mod:`~ptd.storage.backends.zarr_names`)."""

from __future__ import annotations

from ptd.format.keynames import impossible_name
from ptd.storage.backends.meta import Path

__all__ = ["NamePolicy"]


class NamePolicy:
    """Which names a format stores as they are, escaped, or not at all."""

    @classmethod
    def escaped_name(cls, name: str) -> str | None:
        """The escaped name (:mod:`ptd.format.keynames`) a node called ``name`` is stored
        under when this format cannot hold it as it is, or None; listings give originals."""
        return None

    def stored_path(self, path: Path) -> Path:
        """``path`` as the store names it from its root, escaped names and all (for tools that
        read the store's own keys: file sizes)."""
        return tuple(self.escaped_name(p) or p for p in path)

    @classmethod
    def name_problem(cls, name: str) -> str | None:
        """Why this format cannot hold a node named ``name`` at all, even escaped, or None."""
        return impossible_name(name)
