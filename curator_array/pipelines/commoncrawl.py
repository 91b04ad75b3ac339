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

from ..core.errors import ConfigError
from ..formats import writer_for
from ..formats.warc import WarcReader
from ..stages.base import ProcessingStage
from ..stages.web.extract import HtmlExtractor
from ..stages.web.fineweb_quality import FineWebQualityFilter
from ..stages.web.language import LanguageFilter
from ..stages.web.languages import language_rules
from ..stages.web.quality import C4QualityFilter, GopherFilter

OUTPUT_FORMAT = "parquet"


def build(options) -> list[ProcessingStage]:
    if not (options.url_lists or options.crawl) and options.input_file_type != "warc":
        raise ConfigError("the commoncrawl pipeline reads WARC files: give --crawl or --input-urls, or --input-file-type warc")
    text = options.text_field
    rules = language_rules(options.quality_settings)
    return [
        *options.downloads(),
        WarcReader(records_per_batch=options.records_per_batch),
        HtmlExtractor(options.extractor, text_field=text, timeout_s=options.extract_timeout,
                      allocator=options.allocator),
        LanguageFilter(options.languages, options.min_language_score or 0.0, text_field=text),
        GopherFilter(text_field=text, rules=rules),
        C4QualityFilter(text_field=text, rules=rules),
        FineWebQualityFilter(text_field=text, rules=rules),
        writer_for(options.output_file_type or OUTPUT_FORMAT, options.written_dir),
    ]
