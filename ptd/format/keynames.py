"""Key names a store cannot hold as they are: the escaped form they are stored under.

Which names need it is each backend's knowledge (``Backend.escaped_name``: Zarr v3 reserves
names starting with ``__``, reads a backslash as a path separator and has its metadata
documents' names); how they are escaped is this module's one rule, shared by every backend
(``docs/format.md``, "Names a format cannot hold"):

* the escaped name is the name with every ``%``, ``\\`` and ``.``, and a leading ``_``,
  percent-encoded as its UTF-8 bytes in upper-case hex (``%25``, ``%5C``, ``%2E``, ``%5F``);
  everything else is kept;
* the node stored under it has the attribute ``__ptd_name__`` holding the original name
  (:data:`~ptd.format.names.PTD_NAME_ATTR`). Only that attribute makes the node's name the
  original: a node of another store whose name merely looks escaped is read as it is named.

>>> escape_name("__categories"), escape_name("a\\\\b.c"), escape_name("zarr.json")
('%5F_categories', 'a%5Cb%2Ec', 'zarr%2Ejson')
>>> unescape_name("%5F_categories")
'__categories'
>>> impossible_name("a/b"), impossible_name("ok") is None
("it holds '/', the path separator of every store", True)
"""

from __future__ import annotations

__all__ = ["ESCAPED_CHARS", "brief_key", "escape_name", "impossible_name", "unescape_name"]

#: the characters percent-encoded anywhere in an escaped name (``_`` only as its first)
ESCAPED_CHARS = frozenset("%\\.")


def _encode(ch: str) -> str:
    return "".join(f"%{b:02X}" for b in ch.encode("utf-8"))


def escape_name(name: str, *, first: bool = False) -> str:
    """The escaped form of ``name`` (see the module doc); it holds none of ``\\``, ``.`` and
    ``/`` and does not start with ``_``. ``first``: the first character is encoded whatever
    it is (for a name that is taken as it is, such as a field of a memmap ``meta.json``).

    >>> escape_name("device", first=True), unescape_name("%64evice")
    ('%64evice', 'device')
    """
    out = [(_encode(ch) if ch in ESCAPED_CHARS else ch) for ch in name]
    if name and (first or name.startswith("_")):
        out[0] = _encode(name[0])
    return "".join(out)


def unescape_name(stored: str) -> str:
    """The name whose :func:`escape_name` is ``stored`` (percent-decoding); for reading
    stored names by hand: ptd itself takes the original from the node's attribute."""
    raw = bytearray()
    i = 0
    while i < len(stored):
        if stored[i] == "%" and _is_hex(stored[i + 1 : i + 3]):
            raw.append(int(stored[i + 1 : i + 3], 16))
            i += 3
        else:
            raw.extend(stored[i].encode("utf-8"))
            i += 1
    return raw.decode("utf-8", errors="surrogateescape")


def _is_hex(two: str) -> bool:
    return len(two) == 2 and all(c in "0123456789abcdefABCDEF" for c in two)


def impossible_name(name: str) -> str | None:
    """Why no store can hold a node named ``name``, even escaped (empty, ``.``, ``..``, or
    holding ``/`` or NUL: a key name is never a path), or None."""
    if not isinstance(name, str) or name == "":
        return "it is empty"
    if name in (".", ".."):
        return f"{name!r} names a directory, not a node"
    if "/" in name:
        return "it holds '/', the path separator of every store"
    if "\x00" in name:
        return "it holds a NUL character"
    return None


def brief_key(key: str, limit: int = 80) -> str:
    """``key`` for a message: itself, or when longer than ``limit`` characters its start and
    its length (a 300-byte name would drown the line that names it).

    >>> brief_key("obs/x"), brief_key("a" * 300)
    ('obs/x', 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa... (300 bytes)')
    """
    if len(key) <= limit:
        return key
    return f"{key[:40]}... ({len(key.encode('utf-8'))} bytes)"
