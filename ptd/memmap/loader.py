"""0.1.0's ``ptd.memmap.loader``: the key <-> file name encoding and the directory reader, now in
:mod:`ptd.containers.memmap.loader` (re-exported here so that old imports keep working).

>>> from ptd.memmap.loader import decode_key, encode_key
>>> decode_key(encode_key("a/b"))
'a/b'
"""

from ptd.containers.memmap.loader import MODES, decode_key, encode_key, load_dir, map_leaf

__all__ = ["MODES", "decode_key", "encode_key", "load_dir", "map_leaf"]
