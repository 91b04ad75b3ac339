"""The package's folders are its layers: each imports only what its rule allows, and no
module imports itself in a circle. Every import counts, including those inside functions."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "curator_array"

# layer → the layers it may import (besides itself and the root package's version).
RULES = {
    "core": set(),
    "text": {"core"},
    "helpers": {"core"},
    "storage": {"core"},
    "tokens": {"core", "helpers"},
    "slurm": {"core"},
    "classify": {"core"},
    "stages": {"core", "text", "tokens", "helpers", "classify", "decont", "storage"},
    "formats": {"core", "stages", "storage"},
    "dedup": {"core", "text"},
    "decont": {"core", "text", "dedup"},
    "pipelines": {"core", "stages", "formats", "dedup", "tokens", "helpers", "storage"},
    "examples": {"core", "stages", "formats", "pipelines"},
    "execution": {"core", "slurm", "stages"},
    "report": {"core"},
    "run": {"core", "text", "helpers", "slurm", "stages", "formats", "pipelines", "execution", "dedup", "tokens",
            "classify", "decont", "storage"},
    "cli": {"core", "slurm", "stages", "formats", "pipelines", "execution", "report", "run", "classify"},
}
# Third-party packages a layer must not import (core: anything outside the standard library).
FORBIDDEN = {
    "text": {"ray", "pyarrow"},
    "tokens": {"ray", "pyarrow"},
    "helpers": {"ray", "pyarrow", "numpy"},
    "storage": {"ray"},
    "slurm": {"ray", "pyarrow", "numpy", "pandas"},
    "stages": {"ray"},
    "formats": {"ray"},
    "pipelines": {"ray"},
    "examples": {"ray"},
    "dedup": {"ray"},
    "decont": {"ray"},
    "classify": {"ray"},
    "report": {"ray", "pyarrow"},
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str) -> list[str]:
    """Absolute names of everything ``name`` imports, at any depth of its code."""
    path = MODULES[name]
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1]) if node.level else ""
            target = ".".join(p for p in (base, node.module or "") if p)
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                found.append(candidate if candidate in MODULES else target)
    return found


def layer_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else None


def internal_graph() -> dict[str, set[str]]:
    return {name: {i for i in imports_of(name) if i in MODULES and i != name} for name in MODULES}


def test_every_module_lives_in_a_layer_with_a_rule():
    loose = [name for name in MODULES if name.count(".") == 1 and name.split(".")[1] not in RULES]
    assert not loose, f"modules outside the layer folders, or a folder without a rule in RULES: {loose}"


@pytest.mark.parametrize("layer", sorted(RULES))
def test_each_layer_docstring_states_its_rule(layer):
    doc = ast.get_docstring(ast.parse((PACKAGE / layer / "__init__.py").read_text())) or ""
    lines = [line for line in doc.splitlines() if line.startswith("May import:")]
    assert len(lines) == 1, f"{layer}/__init__.py: its docstring needs one 'May import:' line"
    named = {word.strip(".,()") for word in lines[0].split()} & set(RULES)
    assert named == RULES[layer], f"{layer}: the docstring says {sorted(named)}, the rule {sorted(RULES[layer])}"


@pytest.mark.parametrize("layer", sorted(RULES))
def test_each_layer_imports_only_what_its_rule_allows(layer):
    allowed = RULES[layer] | {layer}
    stdlib = set(sys.stdlib_module_names)
    wrong = []
    for name in (n for n in MODULES if layer_of(n) == layer):
        for imported in imports_of(name):
            top = imported.split(".")[0]
            if top == "curator_array":
                other = layer_of(imported)
                if other is not None and other not in allowed:
                    wrong.append(f"{name} imports {imported}")
            elif layer == "core" and top not in stdlib and top != "__future__":
                wrong.append(f"{name} imports {imported} (the core uses the standard library only)")
            elif top in FORBIDDEN.get(layer, ()):
                wrong.append(f"{name} imports {imported}")
    assert not wrong, "\n".join(wrong)


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            members = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                members.append(member)
                if member == node:
                    break
            if len(members) > 1:
                circles.append(sorted(members))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def test_no_import_circles():
    assert strongly_connected(internal_graph()) == []


def test_no_two_layers_import_each_other():
    """The rules say which layer may import which; here, whatever they say, no two layers
    lean on each other (a format catalog imported by the stages that formats subclass, say)."""
    edges = {(layer_of(name), layer_of(other)) for name in MODULES for other in imports_of(name)
             if other in MODULES and layer_of(name) and layer_of(other) and layer_of(name) != layer_of(other)}
    both_ways = sorted({tuple(sorted(edge)) for edge in edges if edge[::-1] in edges})
    assert not both_ways, f"layers importing each other: {both_ways}"


def test_the_package_docstring_lists_every_layer():
    doc = ast.get_docstring(ast.parse((PACKAGE / "__init__.py").read_text())) or ""
    listed = {match.group(1) for line in doc.splitlines() if (match := re.match(r"``(\w+)``\s", line))}
    assert listed == set(RULES)


def test_the_circle_finder_finds_a_circle():
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


LIGHT = {
    "core": [n for n in MODULES if layer_of(n) == "core"],
    "slurm": [n for n in MODULES if layer_of(n) == "slurm"],
    "entry points": ["curator_array.cli", "curator_array.cli.entrypoint", "curator_array.run.shard",
                     "curator_array.run.option_table", "curator_array.run.element", "curator_array.run.phases",
                     "curator_array.pipelines.options", "curator_array.stages.defaults",
                     "curator_array.formats"],
}


@pytest.mark.parametrize("group", sorted(LIGHT))
def test_imports_stay_light(group):
    """The core on a login node, and a run until its Ray head is launched, load none of these."""
    code = (f"import sys, importlib; [importlib.import_module(m) for m in {LIGHT[group]!r}]; "
            "heavy = sorted(m for m in ('ray', 'pyarrow', 'numpy', 'requests') if m in sys.modules); print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", f"{group} pulled in {out.strip()}"


RAY_PRIVATE = ("ray._private", "ray._raylet", "ray.data._internal", "ray.util.state._private")


def test_rays_private_api_is_used_in_one_subpackage_only():
    """Every use of Ray's internals sits in ``execution/ray_internals/``, and the rest of the
    package reaches it through that subpackage's ``__init__`` alone."""
    inside = "curator_array.execution.ray_internals"
    wrong = [f"{name} imports {imported}" for name in MODULES if not name.startswith(inside)
             for imported in imports_of(name) if imported.startswith(RAY_PRIVATE)]
    wrong += [f"{name} imports {imported}" for name in MODULES if not name.startswith(inside)
              for imported in imports_of(name) if imported.startswith(inside + ".")]
    assert not wrong, "\n".join(wrong)
