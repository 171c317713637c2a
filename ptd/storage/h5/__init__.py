"""The HDF5 backend, whole: opening files, links, codecs and attributes, property lists, filter
plugins, bulk creation, raw-chunk decoding and memory maps. Only this package and
:mod:`ptd.storage.read`'s callers through it know HDF5; importing it imports h5py."""
