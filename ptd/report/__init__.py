"""Metadata reports: :func:`ptd.info` and :func:`ptd.validate` (torch is never imported)."""
