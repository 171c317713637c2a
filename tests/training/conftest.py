"""Fixtures of the training tests."""

from __future__ import annotations

import pytest

from ptd.data import transport


@pytest.fixture(autouse=True)
def fresh_worker_ring(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with no ring: a test that retires the ring's leases (as a batch that
    left through another collate does) must not change what the next test sees."""
    monkeypatch.setattr(transport, "_ring", None)
