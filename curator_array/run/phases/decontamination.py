"""Decontamination: not a phase of its own, a stage of the first one, before the writer.

It is declared here because the phase registry is where a run's later work brings its
settings and options: ``--decontaminate FILE`` (repeatable) turns it on, the settings
(``decont.settings``) build the eval sets' index into the checkpoint and pin it, and every
first-phase element runs ``stages.decontaminate`` on each document just before writing it.
It has no elements: it never appears in a run's plan, status or retry.
"""

from __future__ import annotations

from typing import Any

from ...core.options import RunOption
from ...core.phase import Phase, PhaseSettings
from ...core.sharding import ShardRange
from ...decont.settings import DECONT, MODES, DecontSettings, check_index

DECONT_OPTIONS = (
    RunOption("decontaminate", "Check every document against these eval sets (JSONL or Parquet records with text, the "
              "answer or passage, and optional query and task) just before it is written; repeatable. The first start "
              "builds one n-gram index from them into the checkpoint and pins it.", "files", DECONT, sets="files"),
    RunOption("decont_ngrams", "Words per n-gram of the eval sets' index (datatrove: 12).", "int", DECONT, minimum=1,
              sets="ngrams"),
    RunOption("decont_mode", "drop: drop a document with any hit; cut: cut each hit out with 200 characters on either "
              "side (GPT-3), drop pieces under 200 characters and documents cut more than 10 times.", "choice", DECONT,
              choices=MODES, sets="mode"),
    RunOption("decont_overlap", "Index as datatrove's NGramsDecontIndexer does: n-grams that begin in a record's query "
              "and end in its text too, short texts and n-grams without a letter as datatrove has them.", "flag", DECONT,
              sets="overlap"),
)


class Decontamination(Phase):
    name = "decontamination"
    settings_key = DECONT
    settings_type = DecontSettings
    options = DECONT_OPTIONS
    run_values = ("checkpoint_path", "output_dir")

    def elements(self, settings: PhaseSettings, shards: ShardRange) -> None:
        return None

    def check(self, settings: PhaseSettings) -> None:
        decont = settings.get(self.settings_key)
        if decont is not None:
            check_index(decont)

    def before_writer(self, settings: DecontSettings, options: Any) -> list:
        from ...stages.decontaminate import Decontaminator

        return [Decontaminator.of(settings, options)]
