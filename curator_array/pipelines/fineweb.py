"""The built-in ``fineweb`` pipeline: FineWeb's recipe, step by step, in its order.

    curator-array submit --pipeline fineweb --crawl CC-MAIN-2024-10 --output-dir out/ --dedup fuzzy

1. **URL filter** (``url_filter``): FineWeb's block lists, plus a site's own
   (``--url-blocklist FILE``: one domain or URL a line).
2. **Extraction** (``html_extract``): trafilatura with FineWeb's settings, each page under a
   deadline in a child process (``--extract-timeout``, 1 s as FineWeb).
3. **Language** (``language``): fastText ``lid.176`` (or ``--language-model FILE``); a page is
   kept when a language of ``--languages`` (English by default) scores above
   ``--min-language-score`` (0.65 by default).
4. **Gopher repetition** then **Gopher quality** (one stage that splits words once; each drop is
   counted, and kept, under its own step), **C4** (its terminal-punctuation rule off) and
   **FineWeb's own line rules**, with each language's rules (``--quality-settings``).
5. **PII** (``pii``): e-mail and public IPv4 addresses replaced. FineWeb did this after its
   MinHash dedup; here it comes before the dedup phases (``--dedup fuzzy``), which changes no
   decision that matters: an address is a few words of a page.

The rows keep FineWeb's columns: text, id, url, date, dump, warc_path, language,
language_score (and token_count with ``--tokenize``). ``--keep-removed`` writes what each
step dropped under ``OUTPUT_DIR/.removed/pipeline/`` (the step in ``removed_by``).
"""

from __future__ import annotations

from ..stages.defaults import FINEWEB_LANGUAGES, FINEWEB_MIN_SCORE
from .steps import (
    C4,
    DOWNLOADS,
    EXTRACT_TIMEOUT,
    FINEWEB_LINES,
    GOPHER,
    LANGUAGE_MODEL,
    LANGUAGES,
    MIN_LANGUAGE_SCORE,
    URL_BLOCKLIST,
    WARC_READER,
    WRITER,
    Step,
    WebPipeline,
    reads_warc,
)

EXTRACT_TIMEOUT_S = 1.0


def _url_filter(values, options):
    from pathlib import Path

    from ..stages.web.url_filter import UrlFilter, read_blocklists

    domains, urls = read_blocklists([Path(p) for p in values["url_blocklist"]])
    return UrlFilter(extra_domains=domains, extra_urls=urls, lists_dir=options.blocklists_dir)


def _extract(values, options):
    from ..stages.web.extract import FINEWEB_EXTRACTOR, HtmlExtractor

    return HtmlExtractor(FINEWEB_EXTRACTOR, text_field=options.text_field, timeout_s=values["extract_timeout"],
                         allocator=options.allocator)


def _language(values, options):
    from ..stages.web.fasttext_language import FastTextLanguageFilter

    return FastTextLanguageFilter(values["languages"], values["min_language_score"], values["language_model"],
                                  text_field=options.text_field)


def _pii(values, options):
    from ..stages.web.pii import PiiFormatter

    return PiiFormatter(text_field=options.text_field)


def _provenance(values, options):
    from ..stages.web.provenance import WarcProvenance

    return WarcProvenance()


FINEWEB = WebPipeline("fineweb", [
    DOWNLOADS,
    WARC_READER,
    Step("url_filter", _url_filter, (URL_BLOCKLIST,)),
    Step("extract", _extract, (EXTRACT_TIMEOUT,)),
    Step("language", _language, (LANGUAGES, MIN_LANGUAGE_SCORE, LANGUAGE_MODEL)),
    GOPHER,
    C4,
    FINEWEB_LINES,
    Step("pii", _pii),
    Step("provenance", _provenance),
    WRITER,
], defaults={"extract_timeout": EXTRACT_TIMEOUT_S, "languages": FINEWEB_LANGUAGES,
             "min_language_score": FINEWEB_MIN_SCORE}, check=reads_warc("fineweb"))


def build(options):
    return FINEWEB.build(options)
