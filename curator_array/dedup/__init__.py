"""Deduplication across a whole run: document signatures, candidate pairs, duplicate clusters.

Here: MinHash signatures and their LSH bands (``minhash``), clusters of duplicates with
the copy each keeps (``clusters``), and the phases' work on files (``phases``: signatures
per shard, candidate pairs per bucket, the keys to remove). Each works on one batch, one
shard or one bucket, never on the whole corpus.

May import: core, stages (the word n-gram keys of the web text statistics). Never Ray.
"""
