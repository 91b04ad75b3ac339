"""Deduplication across a whole run: document signatures, candidate pairs, duplicate clusters.

Here: MinHash signatures and their LSH bands (``minhash``), and clusters of duplicates
with the copy each keeps (``clusters``). These are the algorithms the dedup phases of a
run are built from; each works on one batch or one set of pairs, never on the whole corpus.

May import: core, stages (the word n-gram keys of the web text statistics). Never Ray.
"""
