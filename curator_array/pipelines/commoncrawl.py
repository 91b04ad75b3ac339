"""The built-in ``commoncrawl`` pipeline: WARC → main text → language → quality → Parquet.

The quality filters run in FineWeb's order (Gopher repetition, Gopher quality, C4, FineWeb's
own line rules) with each document's language rules (``stages/web/language_rules.toml``,
overridden by ``--quality-settings FILE``).

    curator-array run --pipeline commoncrawl --input-urls warc_urls.txt --output-dir out/
    curator-array run --pipeline commoncrawl --input-dir warcs/ --input-file-type warc --output-dir out/

With ``--input-urls`` the WARC files are downloaded first, under the per-node download cap;
with ``--input-dir`` they are read where they are. Either way each source task streams its
files in parts, and every part is written as its own Parquet file with the text, the URL,
the language and the filters' scores. Sharding, manifests and retries are the same as for
every other pipeline.
"""

from __future__ import annotations

from ..core.options import RunOption
from ..stages import defaults
from .steps import (
    C4,
    DOWNLOADS,
    EXTRACT_TIMEOUT,
    FINEWEB_LINES,
    GOPHER,
    LANGUAGES,
    MIN_LANGUAGE_SCORE,
    WARC_READER,
    WRITER,
    Step,
    WebPipeline,
    reads_warc,
)

EXTRACTOR = RunOption("extractor", "commoncrawl: HTML → main text extractor (fineweb: trafilatura with FineWeb's "
                      "settings).", "choice", "web", choices=defaults.EXTRACTORS, old_variables=("HTML_EXTRACTOR",),
                      default=defaults.EXTRACTORS[0])


def _extract(values, options):
    from ..stages.web.extract import HtmlExtractor

    return HtmlExtractor(values["extractor"], text_field=options.text_field, timeout_s=values["extract_timeout"],
                         allocator=options.allocator)


def _language(values, options):
    from ..stages.web.language import LanguageFilter

    return LanguageFilter(values["languages"], values["min_language_score"] or 0.0, text_field=options.text_field)


COMMONCRAWL = WebPipeline("commoncrawl", [
    DOWNLOADS,
    WARC_READER,
    Step("extract", _extract, (EXTRACTOR, EXTRACT_TIMEOUT)),
    Step("language", _language, (LANGUAGES, MIN_LANGUAGE_SCORE)),
    GOPHER,
    C4,
    FINEWEB_LINES,
    WRITER,
], check=reads_warc("commoncrawl"))


def build(options):
    return COMMONCRAWL.build(options)
