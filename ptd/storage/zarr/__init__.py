"""The Zarr backend, whole: opening stores, escaped names, codecs and attributes, consolidated
metadata, unreadable nodes, bulk creation and reads, chunk decoding, memory maps, and zarr's
private API behind one module and a version check. Importing it imports zarr."""
