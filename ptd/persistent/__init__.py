"""PersistentTensorDict: the containers of :mod:`ptd.core` on a store of :mod:`ptd.storage`."""
