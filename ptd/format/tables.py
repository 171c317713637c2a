"""Tables: arrays of records (numpy structured dtypes; HDF5 compound types, zarr's
``structured`` data type), the one way ptd describes and treats them everywhere.

A table is one array whose elements are records of named fields (``[('t', 'f8'), ('id',
'i4')]``): what pandas/PyTables, Minari step tables and NWB's compound datasets write. It has
no torch dtype, so it is no tensor entry of a tensordict; ptd

* **lists** it in ``inspect`` as ``table (t f8, id i4)`` with its shape and size;
* **validates** it without an error: a table is a valid array, reported once (as a note that
  its values are not a tensor), never as an unsupported dtype;
* **converts** it record for record: HDF5 holds any compound type; a zarr store holds one of
  plain number fields (zarr-python's ``structured`` data type, which other Zarr
  implementations may not read: the conversion says so);
* **compares** it field by field in ``diff`` and ``convert --verify``.

>>> import numpy as np
>>> dt = np.dtype([("t", "<f8"), ("id", "<i4"), ("name", "S8")])
>>> is_table(dt), is_table(np.dtype("f4"))
(True, False)
>>> describe_table(dt)
'table (t f8, id i4, name S8)'
>>> [name for name, _ in table_fields(dt)], numeric_fields_only(dt)
(['t', 'id', 'name'], False)
"""

from __future__ import annotations

import numpy as np

__all__ = ["describe_field", "describe_table", "is_table", "numeric_fields_only", "table_fields"]


def is_table(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is a record type (named fields)."""
    return dtype.fields is not None and bool(dtype.names)


def table_fields(dtype: np.dtype) -> list[tuple[str, np.dtype]]:
    """The fields of a record type in order: ``(name, dtype)``."""
    if not is_table(dtype):
        return []
    assert dtype.fields is not None
    assert dtype.names is not None
    return [(name, dtype.fields[name][0]) for name in dtype.names]


def describe_field(dtype: np.dtype) -> str:
    """A field's type, short: ``f8``, ``i4``, ``u1``, ``b1``, ``S8``, ``U3``, ``str``
    (variable length), ``f4[3]`` (a sub-array), ``record`` (nested).

    >>> describe_field(np.dtype(("f4", (3,)))), describe_field(np.dtype("?"))
    ('f4[3]', 'b1')
    """
    if dtype.subdtype is not None:
        base, shape = dtype.subdtype
        return f"{describe_field(base)}[{','.join(str(n) for n in shape)}]"
    if is_table(dtype):
        return "record"
    if dtype.kind in "SU":
        return f"{dtype.kind}{dtype.itemsize // (4 if dtype.kind == 'U' else 1)}"
    if dtype.kind == "O":
        return "str"
    if dtype.kind == "V":
        return f"V{dtype.itemsize}"
    return f"{dtype.kind}{dtype.itemsize}"


def describe_table(dtype: np.dtype) -> str:
    """``table (name type, ...)`` for a record type (see :func:`describe_field`)."""
    fields = ", ".join(f"{name} {describe_field(dt)}" for name, dt in table_fields(dtype))
    return f"table ({fields})"


def numeric_fields_only(dtype: np.dtype) -> bool:
    """Whether every field is a plain number or bool (no strings, sub-arrays or nesting): the
    tables a zarr store holds as zarr-python's ``structured`` type."""
    fields = table_fields(dtype)
    return bool(fields) and all(dt.subdtype is None and dt.kind in "biuf" for _, dt in fields)
