"""Stages for web text: HTML → main text, language identification, heuristic quality
filters (Gopher, C4), and the built-in ``commoncrawl`` pipeline that joins them to the
WARC reader (``curator_array.formats.warc``) and the capped download stage.

Their libraries (FastWARC/Resiliparse, Trafilatura, py3langid) are the ``web`` extras:
``pip install 'curator-array[web]'``.
"""
