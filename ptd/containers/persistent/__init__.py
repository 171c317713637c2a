"""PersistentTensorDict: the containers of :mod:`ptd.ops` on a store of :mod:`ptd.storage`."""
