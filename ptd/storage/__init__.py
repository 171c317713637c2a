"""Where stores live and how they are opened: store locations (local paths and URLs), remote
access, atomic publication, memory/disk limits, the structure cache, and the backends (the
only code that imports h5py or zarr)."""
