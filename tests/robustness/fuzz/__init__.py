"""The fuzzing suite: seeded, deterministic mutants of small HDF5 files and Zarr v2/v3 stores,
each run through ``ptd inspect``, ``ptd validate --data``, ``ptd convert`` and a library read
in a long-lived worker subprocess, with a per-case timeout and memory cap.

* :mod:`.bases` writes the valid stores every mutant starts from (plain h5py and zarr-python,
  never ptd) and the "outside" files a hostile link would point at;
* :mod:`.mutations` turns a seed into one mutant (bit flips in parsed HDF5 regions, truncation,
  JSON edits, chunk edits, links);
* :mod:`.oracle` reads a mutant with plain h5py / zarr-python (what ptd's values must equal);
* :mod:`.worker` runs cases one by one (``python -m tests.robustness.fuzz.worker``);
* :mod:`.harness` drives workers, enforces timeouts and the memory cap, and classifies outcomes.

``tests/robustness/test_fuzz.py`` runs a few hundred seeds in the normal suite;
``benchmarks/fuzz_stores.py`` runs thousands and writes failing mutants for reproduction.
"""
