"""Command-line interface for ptd (``ptd --help``).

Only :mod:`typer` and :mod:`rich` are imported here and in :mod:`ptd_cli.main`; each command
imports the :mod:`ptd` library lazily, so ``ptd --help`` and ``ptd --version`` stay fast.
"""

from __future__ import annotations

__all__ = ["app"]


def __getattr__(name: str) -> object:
    # ``from ptd_cli import app`` without importing main at package import time
    if name == "app":
        from ptd_cli.main import app

        return app
    raise AttributeError(f"module 'ptd_cli' has no attribute {name!r}")
