"""``python -m ptd``: the ``ptd`` command line.

The one place the library imports :mod:`ptd_cli` (declared in ``tools/check_imports.py``):
``python -m ptd`` is how people run a package's tool when its script is not on ``PATH``.
"""

from ptd_cli.main import run

if __name__ == "__main__":
    run()
