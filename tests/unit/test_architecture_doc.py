"""docs/architecture.md says what the code does: its layer table is the layers' import rules,
and its list of phases is the phase registry, in its order."""

from __future__ import annotations

import re

from curator_array.run.phases import PHASES
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
