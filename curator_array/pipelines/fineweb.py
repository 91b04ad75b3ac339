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

from pathlib import Path

from ..core.errors import ConfigError
from ..formats import writer_for
from ..formats.warc import WarcReader
from ..stages.base import ProcessingStage
from ..stages.defaults import FINEWEB_LANGUAGES, FINEWEB_MIN_SCORE
from ..stages.web.extract import FINEWEB_EXTRACTOR, HtmlExtractor
from ..stages.web.fasttext_language import FastTextLanguageFilter
from ..stages.web.fineweb_quality import FineWebQualityFilter
from ..stages.web.languages import language_rules
from ..stages.web.pii import PiiFormatter
from ..stages.web.provenance import WarcProvenance
from ..stages.web.quality import C4QualityFilter, GopherFilter
from ..stages.web.url_filter import UrlFilter, read_blocklists

OUTPUT_FORMAT = "parquet"
EXTRACT_TIMEOUT_S = 1.0


def build(options) -> list[ProcessingStage]:
    if not (options.url_lists or options.crawl) and options.input_file_type != "warc":
        raise ConfigError("the fineweb pipeline reads WARC files: give --crawl or --input-urls, "
                          "or --input-file-type warc")
    text = options.text_field
    rules = language_rules(options.quality_settings)
    domains, urls = read_blocklists([Path(p) for p in options.url_blocklist])
    timeout = options.extract_timeout if options.extract_timeout is not None else EXTRACT_TIMEOUT_S
    min_score = options.min_language_score if options.min_language_score is not None else FINEWEB_MIN_SCORE
    return [
        *options.downloads(),
        WarcReader(records_per_batch=options.records_per_batch),
        UrlFilter(extra_domains=domains, extra_urls=urls, lists_dir=options.blocklists_dir),
        HtmlExtractor(FINEWEB_EXTRACTOR, text_field=text, timeout_s=timeout, allocator=options.allocator),
        FastTextLanguageFilter(options.languages or FINEWEB_LANGUAGES, min_score, options.language_model,
                               text_field=text),
        GopherFilter(text_field=text, rules=rules),
        C4QualityFilter(text_field=text, rules=rules),
        FineWebQualityFilter(text_field=text, rules=rules),
        PiiFormatter(text_field=text),
        WarcProvenance(),
        writer_for(options.output_file_type or OUTPUT_FORMAT, options.written_dir),
    ]
