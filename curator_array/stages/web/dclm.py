"""DCLM-Baseline's RefinedWeb step as one stage: every rule of ``dclm_rules`` on each page, in
DCLM's order.

One stage, not one per rule: the rules hand each other the modified text and word counts, and
a batch crosses Arrow and Python once. Each drop is counted under its DCLM step
(``dclm.page_length_filter``), each line modifier's removed lines under its name
(the ``lines_removed`` tally), and ``--keep-removed`` keeps a dropped page as it came in,
with the step that dropped it. The fastText language model and the domain list are loaded
once per process.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa

from ...core.errors import ConfigError
from ..columns import missing_field
from ..defaults import TEXT_FIELD
from ..filters import FilterStage
from ..process_state import PerProcess
from ..requirements import Requirement, module
from ..tasks import DocumentBatch, Task
from .dclm_rules import STEPS, RefinedWebRules
from .fasttext_language import LABEL_PREFIX, bundled_model, load_model, model_languages
from .url_filter import URL_FIELD, installed_lists, lists_requirement, site_lists_digest, with_extra
from .url_lists import UrlLists, listed


class DclmRefinedWebFilter(FilterStage):
    """Pinned by the language model's digest and a site's extra domains' digest; the word lists
    ship with the package and FineWeb's domains are pinned by the wheel they come from."""

    name = "dclm"
    pinned = ("model_digest", "extra_domains_digest", "text_field", "url_field")
    rules = PerProcess(lambda stage: stage._rules(), key=lambda stage: (stage.model_path, stage.lists_dir,
                                                                          stage.extra_domains_digest))

    def __init__(self, text_field: str = TEXT_FIELD, url_field: str = URL_FIELD, model_path: str | None = None,
                 extra_domains: tuple[str, ...] = (), lists_dir: str | None = None):
        from ...core.file_digests import file_digest

        self.url_field = url_field
        self.model_path = str(model_path or bundled_model())
        if "en" not in model_languages(load_model(self.model_path)):  # checked when built: at submit
            raise ConfigError(f"--language-model {self.model_path}: --pipeline dclm keeps English, and this model "
                              "has no label en (is it a language-ID model, such as lid.176.bin?)")
        self.model_digest = file_digest(Path(self.model_path))
        self.extra_domains = tuple(sorted(set(extra_domains)))
        self.extra_domains_digest = site_lists_digest(*self.extra_domains)
        self.lists_dir = lists_dir
        super().__init__(text_field)

    @property
    def installed_lists(self) -> Path:
        return installed_lists(self.lists_dir)

    def reads(self) -> tuple[str, ...]:
        return self.text_field, self.url_field

    def needs(self) -> tuple[Requirement, ...]:
        return module("fasttext"), module("tldextract"), module("regex"), lists_requirement(self.installed_lists)

    def setup(self) -> None:
        self.rules

    def _rules(self) -> RefinedWebRules:
        model = load_model(self.model_path)
        domains = with_extra(UrlLists.load(self.installed_lists).domains, self.extra_domains)

        def language(line: str) -> tuple[str, float]:
            labels, scores = model.predict(line, k=1)
            return (labels[0].removeprefix(LABEL_PREFIX), float(scores[0])) if labels else ("", 0.0)

        return RefinedWebRules(language, lambda key: bool(key) and bool(listed(domains, [key])[0]))

    def process(self, task: DocumentBatch) -> Task:
        table = task.table
        if table.num_rows == 0:
            return task
        for field in (self.text_field, self.url_field):
            missing = missing_field(task, field, self.stage_name)
            if missing is not None:
                return missing
        rules = self.rules
        outcomes = [rules(text, url) for text, url in zip(table.column(self.text_field).to_pylist(),
                                                          table.column(self.url_field).to_pylist())]
        texts = [outcome.text for outcome in outcomes]
        index = table.schema.get_field_index(self.text_field)
        scored = table.set_column(index, self.text_field, pa.array(texts, pa.string()))
        masks = {step: pa.array([outcome.dropped_by != step for outcome in outcomes]) for step in STEPS}
        lines: Counter[str] = Counter()
        for outcome in outcomes:
            lines.update(outcome.lines_removed)
        counters = task.counters.with_tally("lines_removed", {f"{self.stage_name}.{name}": count
                                                     for name, count in lines.items() if count})
        return self.apply_masks(task, scored, masks, counters)
