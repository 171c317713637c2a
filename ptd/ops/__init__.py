"""The in-memory containers: batch sizes, index arithmetic, the shared base class and its method
families, :class:`~ptd.containers.tensordict.TensorDict` and the non-tensor types. Knows nothing of
files: storage reaches it only through the primitives a subclass implements."""
