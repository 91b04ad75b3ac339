"""docs/architecture.md says what the code does: its layer table is the layers' import rules,
its list of phases the phase registry, in its order, its list of pipelines the pipelines'
registries, and its trees every directory the phases write."""

from __future__ import annotations

import re

from curator_array.pipelines import web
from curator_array.pipelines.filters import FILTERS
from curator_array.pipelines.options import BUILT_IN_PIPELINES
from curator_array.run.phases import PHASES
from curator_array.run.phases.paragraph_removal import PARAGRAPHS_REMOVED_DIR
from curator_array.run.phases.quality import QUALITY_REMOVED_DIR
from curator_array.run.phases.removal import DEDUP_REMOVED_DIR
from curator_array.run.phases.url_removal import URLS_REMOVED_DIR
from curator_array.stages.defaults import PIPELINE_REMOVED_DIR, REMOVED_DIR
from tests.conftest import REPO
from tests.unit.test_layers import RULES

DOC = (REPO / "docs" / "architecture.md").read_text()


def section(title: str) -> str:
    start = DOC.index(f"## {title}\n")
    end = DOC.find("\n## ", start + 1)
    return DOC[start:end if end >= 0 else len(DOC)]


def test_the_layer_table_is_the_layers_rules():
    rows = [line for line in section("Layers").splitlines() if line.startswith("| `")]
    table = {}
    for row in rows:
        layer, _, allowed = (cell.strip() for cell in row.strip("|").split("|"))
        table[layer.strip("`/")] = set(re.findall(r"`([a-z]+)`", allowed))
    assert table == RULES, "docs/architecture.md's layer table differs from the layers' rules"


def test_the_phase_list_is_the_registry():
    listed = re.findall(r"^- `([a-z_]+)`:", section("Phases"), re.M)
    assert listed == [phase.name for phase in PHASES]


def test_the_pipeline_list_is_the_registries():
    text = " ".join(section("Pipelines").split())
    listed = dict(re.findall(r"- `([a-z]+)`: (.*?)[;.] (?=- `|The )", text))
    assert set(listed) == {"default", *BUILT_IN_PIPELINES}
    for pipeline in web.PIPELINES:
        assert listed[pipeline.name] == ", ".join(step.name for step in pipeline.steps), pipeline.name
    assert ", ".join(f.name for f in FILTERS) in listed["default"]


def test_the_checkpoint_section_names_every_directory_the_phases_write():
    """Every phase's data directory in the committed checkpoint, every staging directory of the
    phase registry and every directory of removed documents is in the trees."""
    text = section("The checkpoint directory")
    fixture = REPO / "tests" / "fixtures" / "checkpoint-all-phases"
    for data in (fixture / ".nemo_curator_metadata" / ".phases").glob("*/data"):
        assert f".phases/{data.parent.name}/data/" in text, data.parent.name
    for phase in PHASES:
        if phase.staging_dir:
            assert f"  {phase.staging_dir}/ " in text, phase.name
    removed = re.search(r"\.removed/([a-z|]+)/", text).group(1).split("|")
    assert sorted(f"{REMOVED_DIR}/{name}" for name in removed) == sorted(
        str(path) for path in (PIPELINE_REMOVED_DIR, URLS_REMOVED_DIR, PARAGRAPHS_REMOVED_DIR, DEDUP_REMOVED_DIR,
                               QUALITY_REMOVED_DIR))
