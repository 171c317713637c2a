"""Moving entries between keys in one call: ``rename_keys`` (a renamed shallow copy) and
``set_non_tensor``, as tensordict 0.15.3 has them. A PersistentTensorDict refuses both
(``ptd.containers.persistent.refused``), as tensordict's does.

>>> import torch
>>> from ptd import TensorDict
>>> td = TensorDict(a=torch.zeros(()), b=torch.ones(()))
>>> out = td.rename_keys({"a": "b", "b": "a"})
>>> out["a"], td["a"]
(tensor(1.), tensor(0.))
>>> td = TensorDict(raw=TensorDict(p=torch.zeros(3), u=torch.ones(3)))
>>> sorted(td.rename_keys({("raw", "p"): "p", ("raw", "u"): "u"}).keys(include_nested=True))
['p', 'u']
>>> data = TensorDict({}, batch_size=[2]).set_non_tensor(("n", "s"), "a string!")
>>> data["n", "s"], data.get(("n", "s")).batch_size
('a string!', torch.Size([2]))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ptd.errors import ArgumentError, InvalidKeyError, KeyTypeError, PtdKeyError, PtdTypeError
from ptd.ops import locking as locking_ops
from ptd.ops.keys import NestedKey, out_key, unravel_key
from ptd.ops.nontensor import NonTensorData

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase

__all__: list[str] = []

Parts = tuple[str, ...]


def _parts(key: Any) -> Parts:
    if isinstance(key, tuple) and not key:
        raise InvalidKeyError(
            "a key must be a str or a non-empty, possibly nested tuple of str; got ()"
        )
    return unravel_key(key)


def _inside(a: Parts, b: Parts) -> bool:
    """Whether one of ``a``, ``b`` is a prefix of the other."""
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def _check_pairs(pairs: list[tuple[Parts, Parts]]) -> None:
    dests: set[Parts] = set()
    for _, dst in pairs:
        if dst in dests:
            raise ArgumentError(f"rename_keys: the key {out_key(dst)!r} is a destination twice")
        dests.add(dst)
    for what, side in (("sources", 0), ("destinations", 1)):
        keys = [p[side] for p in pairs]
        for i, a in enumerate(keys):
            for b in keys[i + 1 :]:
                if _inside(a, b):
                    raise ArgumentError(
                        f"rename_keys: the {what} {out_key(a)!r} and {out_key(b)!r} lie inside "
                        "one another, so the result would depend on the order of the mapping"
                    )


def _kind(td: Any, parts: Parts) -> str | None:
    """``"tensor"``, ``"nested"``, ``"non_tensor"`` or ``None`` (absent) for ``parts``."""
    node = td
    for i, part in enumerate(parts):
        if part not in node._keys_str():
            return None
        kind = str(node._meta_str(part).kind)
        if i == len(parts) - 1:
            return kind
        if kind != "nested":
            return None
        node = node._get_str(part)
    return None


def rename_keys(
    td: TensorDictBase, mapping: Mapping[NestedKey, NestedKey], *, strict: bool = True
) -> TensorDictBase:
    """A new tensordict with the keys renamed as ``mapping`` says (old key -> new key,
    either side nested); ``self`` is left as it is and the result shares its leaves.

    Every source is read before any destination is written, so swaps and chains work. A
    nested tensordict that the renaming empties is removed. The result is not locked.

    Raises:
        KeyError: a source is missing (``strict=True``), or a key is empty.
        ValueError: two sources have one destination, a source lies inside another
            source (or a destination inside another destination), or a destination is
            present (or runs through a leaf) and is not renamed away.
    """
    pairs = [(_parts(src), _parts(dst)) for src, dst in mapping.items()]
    _check_pairs(pairs)
    kept = []
    for src, dst in pairs:
        if _kind(td, src) is not None:
            kept.append((src, dst))
        elif strict:
            raise PtdKeyError(
                f"rename_keys: key {out_key(src)!r} not found (keys: {sorted(td.keys())})"
            )
    sources = [src for src, _ in kept]

    def moved(parts: Parts) -> bool:
        return any(parts[: len(s)] == s for s in sources)

    for _, dst in kept:
        for n in range(1, len(dst) + 1):
            kind = _kind(td, dst[:n])
            if kind is None or moved(dst[:n]):
                continue
            if n == len(dst):
                raise ArgumentError(
                    f"rename_keys: the destination {out_key(dst)!r} is already present and "
                    "is not renamed away"
                )
            if kind != "nested":
                raise ArgumentError(
                    f"rename_keys: the destination {out_key(dst)!r} runs through the entry "
                    f"{out_key(dst[:n])!r}, which is not a tensordict"
                )
    out = td.clone(False)
    values = [(dst, out.get(out_key(src))) for src, dst in kept]
    for src in sources:
        out.del_(out_key(src))
    for dst, value in values:
        out.set(out_key(dst), value)
    parents = sorted({s[:n] for s in sources for n in range(1, len(s))}, key=len, reverse=True)
    for parent in parents:
        if _kind(out, parent) == "nested" and not out.get(out_key(parent))._keys_str():
            out.del_(out_key(parent))
    return out


def set_non_tensor(td: TensorDictBase, key: NestedKey, value: Any) -> TensorDictBase:
    """Store ``value`` as non-tensor data at ``key`` (a number too, unlike :meth:`set`),
    wrapped in a :class:`~ptd.NonTensorData` of the batch size and device of the
    tensordict that holds it; the missing nested tensordicts of a tuple key are created.
    ``td[key]`` then gives ``value`` back. Returns ``self``. A locked tensordict raises
    :class:`~ptd.errors.LockedError` (a RuntimeError)."""
    if not isinstance(key, str | tuple):
        raise KeyTypeError(f"set_non_tensor: key should be a str or a tuple of str, got {key!r}")
    parts = _parts(key)
    node: Any = td
    for part in parts[:-1]:
        locking_ops.check_unlocked(
            node,
        )
        if part not in node._keys_str():
            node = node._new_nested(part)
            continue
        if node._meta_str(part).kind != "nested":
            raise PtdTypeError(
                f"set_non_tensor: key {part!r} of {out_key(parts)!r} is a leaf, not a "
                "nested tensordict"
            )
        node = node._get_str(part)
    locking_ops.check_unlocked(
        node,
    )
    node.set(parts[-1], NonTensorData(value, node.batch_size, node.device))
    return td
