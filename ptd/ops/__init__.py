"""The method families of every container, as typed functions that take the container first.

Each module is one family (``reductions``, ``pointwise``, ``shape``, ``apply``, ``entries``,
``conversions``, ``autograd``, ``state_dict``, ...); :class:`ptd.containers.base.TensorDictBase`
binds every public function as a method from one table, so ``td.sum()`` *is*
``ptd.ops.reductions.sum(td)``. The functions are written on the container's primitives and
public methods only, never on a concrete class, and reach a store only through the container's
leaf strategy (:mod:`ptd.ops.leaf_access`). Beside the families are the helpers they share:
keys, batch sizes, dtypes, non-tensor values, index arithmetic. Nothing here knows of files.

>>> import torch
>>> from ptd import TensorDict
>>> from ptd.ops import reductions
>>> td = TensorDict(a=torch.arange(4.0), batch_size=[4])
>>> reductions.sum(td)["a"], td.sum()["a"]
(tensor(6.), tensor(6.))
>>> type(td).sum is reductions.sum
True
"""
