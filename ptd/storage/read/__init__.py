"""The read engine both backends share: selections planned into chunk reads, chunks served from
memory maps (uncompressed bytes) or fetched and decoded in parallel (compressed ones), and the
decoded-chunk cache. A backend supplies what only it knows (where a chunk's bytes are, how to
decode them); everything else is here, once."""
