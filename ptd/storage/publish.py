"""Atomic publication: write a store into a hidden sibling, then rename it into place.

A killed or failed write leaves the destination absent or complete, never half-written. Both
``convert`` and memmap export publish this way, with one naming rule for the temporaries:
``.ptd-tmp-<host>-<pid>-<random>.<name>`` beside the destination (hidden, and telling which
machine and process left it: ``<host>`` is :data:`HOST`, the host name's letters and digits,
shortened, and a hash of the whole name), and ``.ptd-old-<pid>-<random>.<name>`` for a replaced
directory while it is swapped.

A process that is killed (SIGKILL, a power cut) cannot clean up: its temporary stays. The next
write beside it removes such leftovers (:func:`remove_stale`):

- a temporary of *this* host whose process is gone is removed at once: its process id is not
  running, or it is running but is another process (one started after the temporary was
  made, from ``/proc/<pid>/stat``; where that cannot be read, a running id is taken for the
  owner);
- a temporary of another host (a shared file system: its process id means nothing here) is
  removed once untouched for :data:`STALE_AFTER_S` seconds, so it is left alone while it
  works;
- an old-style name without a host (``.ptd-tmp-<pid>-<random>.<name>``, ptd before 0.2) keeps
  the old rule: its process id is not running here, and it is untouched for
  :data:`STALE_AFTER_S` seconds.

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

import contextlib
import hashlib
import os
import re
import secrets
import shutil
import socket
import time

from ptd.errors import Option, StoreExistsError

__all__ = [
    "HOST",
    "OLD_TAG",
    "STALE_AFTER_S",
    "TMP_TAG",
    "check_free_destination",
    "in_use",
    "make_temp_dir",
    "publish",
    "remove",
    "remove_stale",
    "temp_sibling",
]

#: the prefix of every temporary that ptd writes beside a destination
TMP_TAG = ".ptd-tmp-"
#: the prefix of a replaced destination while it is being swapped out
OLD_TAG = ".ptd-old-"


def host_tag(hostname: str) -> str:
    """The ``<host>`` of a temporary's name: at most 16 letters and digits of ``hostname`` (in
    lower case), ``_`` and 6 hex digits of its hash (two hosts whose names shorten alike still
    differ).

    >>> host_tag("Node-07.cluster.example.org")
    'node07clusterexa_e9aca6'
    """
    short = re.sub(r"[^a-z0-9]", "", hostname.lower())[:16] or "host"
    return f"{short}_{hashlib.sha256(hostname.encode()).hexdigest()[:6]}"


#: this machine's ``<host>`` in the names of its temporaries
HOST = host_tag(socket.gethostname())


def _sibling(dst: str, tag: str) -> str:
    parent, name = os.path.split(os.path.abspath(dst))
    where = f"{HOST}-" if tag == TMP_TAG else ""
    return os.path.join(parent, f"{tag}{where}{os.getpid()}-{secrets.token_hex(4)}.{name}")


#: the temporaries this process handed out and has not published nor removed yet
_in_use: set[str] = set()


def in_use() -> list[str]:
    """The temporaries of this process that exist on disk now (what an abrupt exit would
    leave behind; ``ptd``'s second Ctrl-C names them)."""
    return sorted(p for p in list(_in_use) if os.path.lexists(p))


def temp_sibling(dst: str) -> str:
    """A fresh hidden path beside ``dst`` (nothing is created; stale temporaries beside it
    are removed first: :func:`remove_stale`)."""
    remove_stale(os.path.dirname(os.path.abspath(dst)))
    path = _sibling(dst, TMP_TAG)
    while os.path.lexists(path):  # (a planted link there would be written through)
        path = _sibling(dst, TMP_TAG)  # pragma: no cover - 32 random bits taken
    _in_use.add(path)
    return path


#: a temporary of another host (or an old-style one of a dead process) is removed once
#: untouched this long
STALE_AFTER_S = 600.0
#: (never ``.ptd-old-*``: a kill between publish's two renames leaves the replaced store there,
#: the user's data)
_TEMP_NAME = re.compile(r"^\.ptd-tmp-([a-z0-9]{1,16}_[0-9a-f]{6})-(\d+)-[0-9a-f]+\.")
#: the names ptd gave its temporaries before they held the host
_OLD_STYLE_NAME = re.compile(r"^\.ptd-tmp-(\d+)-[0-9a-f]+\.")
#: seconds of doubt between a process's start (whole seconds of boot time plus clock ticks)
#: and a file's times
_START_SLACK_S = 2.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: someone else's process, alive
        return True
    return True


def _started(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch), or None where it cannot be read
    (no ``/proc``: not Linux; the process is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        with open("/proc/stat", "rb") as f:
            boot = next(float(line.split()[1]) for line in f if line.startswith(b"btime "))
        ticks = int(stat.rsplit(b")", 1)[1].split()[19])  # field 22: starttime, in ticks
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _owner_runs(pid: int, path: str) -> bool:
    """Whether the process of this host that made the temporary ``path`` still runs: ``pid``
    runs, and (where its start time can be read) it started before ``path`` was last
    changed; a process started later only reuses the id."""
    if not _alive(pid):
        return False
    started = _started(pid)
    if started is None:
        return True
    st = os.lstat(path)
    return started <= min(st.st_mtime, st.st_ctime) + _START_SLACK_S


def _last_touched(path: str) -> float:
    """The newest modification time of ``path`` and its direct entries."""
    newest = os.lstat(path).st_mtime
    if os.path.isdir(path) and not os.path.islink(path):
        with os.scandir(path) as entries:
            for entry in entries:
                try:
                    newest = max(newest, entry.stat(follow_symlinks=False).st_mtime)
                except OSError:
                    continue
    return newest


def remove_stale(directory: str, *, now: float | None = None) -> list[str]:
    """Remove the temporaries ptd left in ``directory`` from processes that are gone (see
    the module doc); returns their paths. Errors are ignored: this is housekeeping."""
    now = time.time() if now is None else now
    removed: list[str] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        path = os.path.join(directory, name)
        m = _TEMP_NAME.match(name)
        try:
            if m is not None:
                host, pid = m.group(1), int(m.group(2))
                if host == HOST:  # a process of this machine: known at once
                    if pid == os.getpid() or _owner_runs(pid, path):
                        continue
                elif now - _last_touched(path) < STALE_AFTER_S:  # another host's: by age
                    continue
            else:
                old = _OLD_STYLE_NAME.match(name)
                if old is None or int(old.group(1)) == os.getpid() or _alive(int(old.group(1))):
                    continue
                if now - _last_touched(path) < STALE_AFTER_S:
                    continue
            remove(path)
        except OSError:
            continue
        if not os.path.lexists(path):
            removed.append(path)
    return removed


def make_temp_dir(dst: str) -> str:
    """Create and return a fresh hidden directory beside ``dst``."""
    while True:
        path = temp_sibling(dst)
        try:
            os.mkdir(path)
            return path
        except FileExistsError:  # pragma: no cover - 32 random bits collided
            continue


def remove(path: str) -> tuple[str, ...]:
    """Delete a file or a directory tree; a missing one is fine. Returns what is still there
    afterwards (checked): ``()`` when it is gone, else ``(path,)``."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    if os.path.lexists(path):
        return (path,)
    _in_use.discard(path)
    return ()


def check_free_destination(dst: str, overwrite: bool, *, option: str = "overwrite") -> None:
    """Refuse an existing destination unless ``overwrite`` (an empty directory is free);
    ``option``: the caller's argument that allows it, named in the error."""
    if not os.path.lexists(dst):
        return
    if os.path.isdir(dst) and not os.path.islink(dst) and not os.listdir(dst):
        return
    if not overwrite:
        raise StoreExistsError(
            f"{dst} already exists and is not empty: pass ",
            Option(option),
            " to replace it",
            path=dst,
        )


def publish(tmp: str, dst: str) -> None:
    """Move the finished ``tmp`` to ``dst``, replacing what is there only now.

    A file replacing a file is one atomic rename. Otherwise the old destination is renamed
    aside first and deleted after: a kill between the two renames leaves the destination
    absent and the old one in its hidden ``.ptd-old-*`` sibling; a failed second rename puts
    the old one back.
    """
    if not os.path.lexists(dst):
        os.rename(tmp, dst)
        _in_use.discard(tmp)
        return
    if os.path.isfile(dst) and os.path.isfile(tmp):
        os.replace(tmp, dst)
        _in_use.discard(tmp)
        return
    old = _sibling(dst, OLD_TAG)
    os.rename(dst, old)
    try:
        os.rename(tmp, dst)
    except BaseException:
        os.rename(old, dst)
        raise
    _in_use.discard(tmp)
    remove(old)
