"""Test helpers for code built on ptd: :mod:`ptd.testing.backend_contract` holds
``BackendContract``, the tests every storage backend must pass.

Nothing in ``ptd`` imports this package: it needs pytest (the ``test`` extra), and only a test
suite imports it. This ``__init__`` imports nothing, so that ``import ptd.testing`` alone does
not need pytest either.
"""
