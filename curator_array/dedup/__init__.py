"""Deduplication across a whole run: the algorithms, one batch or one bucket at a time.

Here: the dedup settings (``settings``, with MinHash's inside), words as dedup and
decontamination compare them (``words``), MinHash signatures and
their LSH band keys (``minhash``), candidate and confirmed pairs over tables (``lsh``),
clusters of duplicates with the copy each keeps (``clusters``), and a document's stable
identity (``keys``). The phases that run them over a checkpoint's files are
``run.phases``'; nothing here reads or writes a file.

May import: core, text (the word n-gram keys). Never Ray.
"""
