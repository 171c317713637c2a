"""HDF5 datasets whose data lies outside the file: where it lies, and when ptd reads it.

Two HDF5 layouts keep a dataset's bytes in other files. A **virtual dataset** maps regions of
datasets in source files (``h5py.VirtualLayout``); **external storage** keeps the raw bytes in
plain files (``create_dataset(external=[...])``). Either can name any file on the machine, so a
hostile file could make a copy carry ``/etc/passwd`` or a private key into its output: ptd does
not read such data by default. It names the key and its sources (:func:`sources`), and the
checks go on with the other keys.

``follow_virtual=True`` (CLI ``--follow-virtual``) reads a virtual dataset when every source
file lies inside the directory of the file named, resolved (symbolic links followed, so a link
out of the directory is refused), and exists (HDF5 would read a missing source as fill
values). :func:`refusal` says why a dataset stays refused, naming the source path. External
storage stays refused in all cases: the option is about virtual datasets only.

HDF5 looks for a relative source name first under the ``HDF5_VDS_PREFIX`` environment
variable, then beside the file: with that variable set, ptd cannot tell which file HDF5 would
open, and refuses. A source name with a ``%`` (HDF5's printf-style patterns, which expand to
many files) is refused too.
"""

from __future__ import annotations

import os
from typing import Any

import h5py

__all__ = ["THIS_FILE", "refusal", "sources"]

#: how a virtual dataset's source in its own file (HDF5's ``"."``) is shown
THIS_FILE = "(this file)"


def _text(name: Any) -> str:
    return name.decode("utf-8", "surrogateescape") if isinstance(name, bytes) else str(name)


def _virtual_files(dcpl: Any) -> list[str]:
    names: list[str] = []
    for i in range(dcpl.get_virtual_count()):
        name = _text(dcpl.get_virtual_filename(i))
        if name not in names:
            names.append(name)
    return names


def sources(dcpl: Any) -> tuple[str, ...]:
    """The files a dataset's data lies in, as the file names them, each once (empty: the data
    is in the file): a virtual dataset's source files (``(this file)`` for a source in the
    same file), external storage's raw files."""
    if dcpl.get_layout() == h5py.h5d.VIRTUAL:
        return tuple(THIS_FILE if n == "." else n for n in _virtual_files(dcpl))
    return tuple(
        dict.fromkeys(_text(dcpl.get_external(i)[0]) for i in range(dcpl.get_external_count()))
    )


def _inside(directory: str, path: str) -> bool:
    return os.path.commonpath([directory, path]) == directory


def refusal(dcpl: Any, filename: str | None, follow_virtual: bool) -> str | None:
    """Why ptd does not read this dataset's data (None: it does). ``filename``: the file as it
    was named (None: not a local file, an h5py object or a URL); ``follow_virtual``: the
    user's opt-in."""
    if dcpl.get_layout() != h5py.h5d.VIRTUAL:
        if not dcpl.get_external_count():
            return None
        return "external storage is never read"
    if not follow_virtual:
        return (
            "pass follow_virtual=True (--follow-virtual) to read a virtual dataset whose "
            "sources lie beside the file"
        )
    if filename is None:
        return "follow_virtual reads only a local file named by its path"
    if os.environ.get("HDF5_VDS_PREFIX"):
        return "HDF5_VDS_PREFIX is set, so HDF5 would look for the sources elsewhere"
    directory = os.path.dirname(os.path.abspath(filename))
    real_dir = os.path.realpath(directory)
    for name in _virtual_files(dcpl):
        if name == ".":
            continue
        if "%" in name:
            return f"source {name!r} is a file name pattern, which ptd does not expand"
        real = os.path.realpath(os.path.join(directory, name))
        if not _inside(real_dir, real):
            return f"source {name!r} resolves to {real}, outside {real_dir}"
        if not os.path.isfile(real):
            return f"source {name!r} ({real}) does not exist (HDF5 would read fill values)"
    return None
