"""Label models: not a phase of its own, a stage of the first one, before the writer.

Declared here, as decontamination is, because the phase registry is where a run's later work
brings its settings and options: ``--label-model NAME=FILE`` (repeatable) adds the labels,
the models are copied into the checkpoint and pinned by their digests, and every
first-phase element runs ``stages.labels`` on each document it keeps, after the quality
scorer (a document a threshold drops is not labelled). It has no elements: it never appears
in a run's plan, status or retry.
"""

from __future__ import annotations

from typing import Any

from ...classify.label_settings import LABEL_MODELS, LabelSettings
from ...core.options import RunOption
from ...core.phase import Phase, PhaseSettings
from ...core.sharding import ShardRange

LABEL_OPTIONS = (
    RunOption("label_model", "Label every document with a fastText classifier of several labels (topics, formats), "
              "given a name: NAME is the best label (without __label__), NAME_prob its probability. Repeatable; the "
              "models are copied into the checkpoint and pinned by their digests.", "named-files", LABEL_MODELS,
              metavar="NAME=FILE", sets="models"),
    RunOption("label_top_k", "Also write NAME_labels and NAME_probs, each document's K best labels and their "
              "probabilities, best first (K above 1).", "int", LABEL_MODELS, minimum=1, metavar="K", sets="top_k"),
)


class LabelModels(Phase):
    name = "label_models"
    settings_key = LABEL_MODELS
    settings_type = LabelSettings
    options = LABEL_OPTIONS

    def elements(self, settings: PhaseSettings, shards: ShardRange) -> None:
        return None

    def before_writer(self, settings: LabelSettings, options: Any) -> list:
        from ...stages.labels import LabelScorer

        return [LabelScorer.of(settings, options.text_field)]
