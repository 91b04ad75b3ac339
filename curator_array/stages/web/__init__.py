"""Stages for web text: HTML → main text, language identification, heuristic quality
filters (Gopher, C4). The built-in ``commoncrawl`` pipeline (``pipelines.commoncrawl``)
joins them to the WARC reader (``formats.warc``) and the capped download stage.

Their libraries (FastWARC/Resiliparse, Trafilatura, py3langid) are the ``web`` extras:
``pip install 'curator-array[web]'``.
"""
