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

from ..core.errors import ConfigError
from .steps import DOWNLOADS, LANGUAGE_MODEL, URL_BLOCKLIST, WRITER, Step, WebPipeline

TEXT_INPUTS = ("jsonl", "parquet")


def _reads_warc(options) -> bool:
    return bool(options.url_lists or options.crawl) or options.input_file_type == "warc"


def _check(options) -> None:
    if not _reads_warc(options) and options.input_file_type not in TEXT_INPUTS:
        raise ConfigError(f"the dclm pipeline reads WARC files, or JSONL or Parquet with text and url: "
                          f"not --input-file-type {options.input_file_type}")


def _source(values, options):
    from ..formats.warc import WarcReader
    from ..stages.web.extract import DCLM_EXTRACTOR, HtmlExtractor

    if not _reads_warc(options):
        return options.reader()
    return [WarcReader(records_per_batch=options.records_per_batch),
            HtmlExtractor(DCLM_EXTRACTOR, text_field=options.text_field, allocator=options.allocator)]


def _refinedweb(values, options):
    from pathlib import Path

    from ..stages.web.dclm import DclmRefinedWebFilter
    from ..stages.web.url_filter import read_blocklists

    domains, urls = read_blocklists([Path(p) for p in values["url_blocklist"]])
    if urls:
        raise ConfigError(f"--url-blocklist: --pipeline dclm blocks domains (DCLM's exact-domain step), not URLs; "
                          f"{len(urls)} URL line(s) given, the first {urls[0]}")
    return DclmRefinedWebFilter(text_field=options.text_field, model_path=values["language_model"],
                                extra_domains=domains, lists_dir=options.blocklists_dir)


DCLM = WebPipeline("dclm", [
    DOWNLOADS,
    Step("source", _source),
    Step("refinedweb", _refinedweb, (URL_BLOCKLIST, LANGUAGE_MODEL)),
    WRITER,
], check=_check)


def build(options):
    return DCLM.build(options)
