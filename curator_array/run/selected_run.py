"""The finished run a selection reads (``--select-from``), resolved once and pinned.

A selection is a run of its own whose input is another run's output. What it selected from
must be the same on every element and every retry, or two shards would choose from two
different corpora. So the first start of the selection (``submit``, or its first element)
resolves the run: it must be complete (every phase, every element), and its identity is
its run id plus a digest of every completion manifest it has, which a ``--relist``,
``--repair`` or ``--new-run`` of that run changes even when its options stay the same. The
identity is saved in the selection's checkpoint and pinned with its pipeline (``run.json``);
a later ``submit`` or ``retry --submit`` resolves it again and refuses a run that changed.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.atomic import create_bytes_exclusive, dump_json
from ..core.errors import CheckpointMismatchError, ConfigError
from ..core.layout import MANIFEST_PREFIX, CheckpointLayout
from ..core.records.run import PinnedRequest
from ..core.run_contract import read_run_config

if TYPE_CHECKING:
    import pyarrow as pa

SELECTED_FILE = "selected-from.json"


@dataclass(frozen=True)
class SelectedRun:
    """Where the selected run's output is, in which format, and which run it is."""

    checkpoint: str
    output_dir: str
    output_format: str
    run_id: str
    manifests: str  # sha256 over every completion manifest, by path

    def identity(self) -> dict[str, str]:
        """What the selection's ``run.json`` pins of it."""
        return {"run_id": self.run_id, "manifests": self.manifests}

    @classmethod
    def of(cls, path: str, phases) -> SelectedRun:
        """The complete run whose checkpoint (by default its output dir) is ``path`` (its phases
        as the registry ``phases`` plans them)."""
        layout = CheckpointLayout(path)
        if not layout.run_file.is_file():
            raise ConfigError(f"--select-from {path}: no run there (no {layout.run_file.relative_to(layout.root)}); "
                              "give the output dir of a finished run, or its --checkpoint-path")
        run = read_run_config(layout)
        incomplete = [state for state in phases.states(layout) if not state.is_complete]
        if incomplete:
            state = incomplete[0]
            shown = ", ".join(map(str, state.missing[:5])) + (", ..." if len(state.missing) > 5 else "")
            raise ConfigError(f"--select-from {path}: the run is not complete: its {state.name} phase misses "
                              f"{len(state.missing)} of {len(state.elements)} element(s) ({shown}); finish it "
                              "(curator-array retry) before selecting from it")
        output_dir = path
        if run.request:
            output_dir = str(PinnedRequest.read(layout, run.request).options["output_dir"].value)
        return cls(str(layout.root), output_dir, run.output_format or "jsonl", run.run_id or "",
                   manifests_digest(layout))

    def schema(self) -> pa.Schema | None:
        """The columns of its first output file, which a selection's expression may name."""
        from ..core.formats import get_format
        from ..formats import reader_for

        output = get_format(self.output_format, "input")
        for root, directories, files in os.walk(self.output_dir):  # stops at the first file
            directories[:] = sorted(name for name in directories if not name.startswith("."))
            first = next((name for name in sorted(files) if output.matches(name) and not name.startswith(".")), None)
            if first is not None:
                return reader_for(self.output_format).schema(os.path.join(root, first))
        return None

    def to_json(self) -> bytes:
        return dump_json(asdict(self))

    @classmethod
    def from_json(cls, data: bytes) -> SelectedRun:
        return cls(**json.loads(data))


def manifests_digest(layout: CheckpointLayout) -> str:
    """sha256 over every completion manifest of every phase, each with its path."""
    found = sorted([*layout.completion_dir.glob(f"{MANIFEST_PREFIX}*.json"),
                    *layout.phases_root.glob("*/completed_*.json")])
    hasher = hashlib.sha256()
    for path in found:
        hasher.update(str(path.relative_to(layout.root)).encode() + b"\0")
        hasher.update(path.read_bytes() + b"\0")
    return hasher.hexdigest()


def resolve_selected_run(select_from: str, layout: CheckpointLayout, phases, refresh: bool = False,
                         save: bool = True) -> SelectedRun:
    """The run ``select_from`` names as this selection (``layout``) pinned it; resolved and
    saved on its first start, resolved again and compared with ``refresh`` (a submission)."""
    saved_path = layout.completion_dir / SELECTED_FILE
    saved = SelectedRun.from_json(saved_path.read_bytes()) if saved_path.is_file() else None
    if saved is not None and not refresh:
        return saved
    found = SelectedRun.of(select_from, phases)
    if Path(found.output_dir).resolve() == Path(layout.root).resolve():
        raise ConfigError(f"--select-from {select_from}: the selection writes its records where it reads; give "
                          "another --output-dir (or --checkpoint-path)")
    if saved is not None and saved.identity() != found.identity():
        what = "it is another run (--new-run)" if saved.run_id != found.run_id else \
            "its manifests changed (--relist, --repair or a rerun)"
        raise CheckpointMismatchError(
            f"--select-from {select_from}: the run changed since this selection began: {what}; select into another "
            "--output-dir, or start this selection again with --new-run")
    if saved is None and save and not create_bytes_exclusive(saved_path, found.to_json()):
        return resolve_selected_run(select_from, layout, phases, refresh, save)  # another element saved it first
    return found
