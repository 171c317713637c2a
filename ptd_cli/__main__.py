"""``python -m ptd_cli``: the ``ptd`` command line (as ``python -m ptd``)."""

from ptd_cli.main import run

if __name__ == "__main__":
    run()
