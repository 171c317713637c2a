"""Atomic publication: write a store into a hidden sibling, then rename it into place.

A killed or failed write leaves the destination absent or complete, never half-written. Both
``convert`` and memmap export publish this way, with one naming rule for the temporaries:
``.ptd-tmp-<pid>-<random>.<name>`` beside the destination (hidden, and telling which process
left it), and ``.ptd-old-<pid>-<random>.<name>`` for a replaced directory while it is swapped.

>>> import os, tempfile
>>> with tempfile.TemporaryDirectory() as d:
...     dst = os.path.join(d, "out.bin")
...     tmp = temp_sibling(dst)
...     with open(tmp, "w") as f:
...         _ = f.write("done")
...     publish(tmp, dst)
...     print(os.listdir(d))
['out.bin']
"""

from __future__ import annotations

import os
import secrets
import shutil

from ptd.errors import StoreExistsError

__all__ = [
    "TMP_TAG",
    "OLD_TAG",
    "temp_sibling",
    "make_temp_dir",
    "publish",
    "remove",
    "check_free_destination",
]

#: the prefix of every temporary that ptd writes beside a destination
TMP_TAG = ".ptd-tmp-"
#: the prefix of a replaced destination while it is being swapped out
OLD_TAG = ".ptd-old-"


def _sibling(dst: str, tag: str) -> str:
    parent, name = os.path.split(os.path.abspath(dst))
    return os.path.join(parent, f"{tag}{os.getpid()}-{secrets.token_hex(4)}.{name}")


def temp_sibling(dst: str) -> str:
    """A fresh hidden path beside ``dst`` (nothing is created)."""
    return _sibling(dst, TMP_TAG)


def make_temp_dir(dst: str) -> str:
    """Create and return a fresh hidden directory beside ``dst``."""
    while True:
        path = temp_sibling(dst)
        try:
            os.mkdir(path)
            return path
        except FileExistsError:  # pragma: no cover - 32 random bits collided
            continue


def remove(path: str) -> None:
    """Delete a file or a directory tree; a missing one is fine."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def check_free_destination(dst: str, overwrite: bool, *, hint: str = "pass overwrite=True") -> None:
    """Refuse an existing destination unless ``overwrite`` (an empty directory is free)."""
    if not os.path.lexists(dst):
        return
    if os.path.isdir(dst) and not os.path.islink(dst) and not os.listdir(dst):
        return
    if not overwrite:
        raise StoreExistsError(f"{dst} already exists and is not empty: {hint} to replace it")


def publish(tmp: str, dst: str) -> None:
    """Move the finished ``tmp`` to ``dst``, replacing what is there only now.

    A file replacing a file is one atomic rename. Otherwise the old destination is renamed
    aside first and deleted after: a kill between the two renames leaves the destination
    absent and the old one in its hidden ``.ptd-old-*`` sibling; a failed second rename puts
    the old one back.
    """
    if not os.path.lexists(dst):
        os.rename(tmp, dst)
        return
    if os.path.isfile(dst) and os.path.isfile(tmp):
        os.replace(tmp, dst)
        return
    old = _sibling(dst, OLD_TAG)
    os.rename(dst, old)
    try:
        os.rename(tmp, dst)
    except BaseException:
        os.rename(old, dst)
        raise
    remove(old)
