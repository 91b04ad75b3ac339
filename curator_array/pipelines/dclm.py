"""The built-in ``dclm`` pipeline: DCLM-Baseline's recipe (``dclm_baseline_refinedweb.yaml``,
then its fastText quality classifier), deciding as DCLM's own mappers decide.

    curator-array submit --pipeline dclm --crawl CC-MAIN-2024-10 --output-dir out/ --dedup fuzzy
    curator-array submit --pipeline dclm --input-dir dclm-pool/ --input-file-type jsonl ...

1. **Text**: from WARC files, resiliparse's main content (as DCLM-Pool was extracted); from
   JSONL or Parquet that already holds ``text`` and ``url`` (DCLM-Pool's own shape), as it is.
2. **RefinedWeb's rules** (``dclm``, ``stages.web.dclm_rules``): the four URL filters, URL
   removal, newline collapse, fastText ``lid.176`` English above 0.65 (``--language-model``),
   page, word, symbol, bullet, ellipsis, alphabetic and stop-word rules, Gopher's repetition
   rules, the seven line modifiers and the word-removal ratio; each drop counted under its
   DCLM step, each modifier's removed lines counted.
3. **Paragraph dedup over the whole run** (DCLM's BFF ``old-both``: ``--dedup paragraphs``,
   this pipeline's default; ``--dedup none`` turns it off, ``--dedup paragraphs,fuzzy`` adds
   MinHash after it): the phases after curation (``run.phases.paragraph_*``).
4. With ``--quality-model NAME=FILE`` (DCLM's OH-2.5 + ELI5 classifier), documents scoring
   below 0.018112 are dropped, unless ``--quality-threshold NAME=T`` says otherwise: after the
   paragraph dedup, as DCLM orders it (``run.phases.late_scores``), or in the first phase
   without it.
"""

from __future__ import annotations

from pathlib import Path

from ..core.errors import ConfigError
from ..formats import writer_for
from ..formats.warc import WarcReader
from ..stages.base import ProcessingStage
from ..stages.web.dclm import DclmRefinedWebFilter
from ..stages.web.extract import DCLM_EXTRACTOR, HtmlExtractor
from ..stages.web.url_filter import read_blocklists

OUTPUT_FORMAT = "parquet"
TEXT_INPUTS = ("jsonl", "parquet")


def build(options) -> list[ProcessingStage]:
    text = options.text_field
    domains, urls = read_blocklists([Path(p) for p in options.url_blocklist])
    if urls:
        raise ConfigError(f"--url-blocklist: --pipeline dclm blocks domains (DCLM's exact-domain step), not URLs; "
                          f"{len(urls)} URL line(s) given, the first {urls[0]}")
    warc = bool(options.url_lists or options.crawl) or options.input_file_type == "warc"
    if not warc and options.input_file_type not in TEXT_INPUTS:
        raise ConfigError(f"the dclm pipeline reads WARC files, or JSONL or Parquet with text and url: "
                          f"not --input-file-type {options.input_file_type}")
    if warc:
        source = [WarcReader(records_per_batch=options.records_per_batch),
                  HtmlExtractor(DCLM_EXTRACTOR, text_field=text, allocator=options.allocator)]
    else:
        source = [options.reader()]
    return [
        *options.downloads(),
        *source,
        DclmRefinedWebFilter(text_field=text, model_path=options.language_model, extra_domains=domains,
                             lists_dir=options.blocklists_dir),
        writer_for(options.output_file_type or OUTPUT_FORMAT, options.written_dir),
    ]
