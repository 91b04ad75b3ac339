"""Classifying documents with fastText models: a model's probability that a text is of its
quality label, exactly as DCLM computes it (``model``), the run's models and how it selects
by their scores (``settings``), and training such a model from texts a user has labelled
(``training``).

Prediction uses ``fasttext-predict`` (the web extra, which FineWeb's language filter uses
too); training uses the ``fasttext-numpy2-wheel`` wheel, which provides a package of the same
name, so it is installed apart and runs in a child process.

May import: core. Never Ray.
"""
