"""A run's decontamination, as its options give it and ``run.json`` pins it.

The eval files are pinned by their digests, the index by its own: ``from_options`` reads
and checks the files, builds the index into the checkpoint (``INDEX_NAME``, named by what
it is built from, so every start of the run finds the same one and builds it only once)
and records its digest beside it. An element checks the file against the pinned digest
before it reads a document (``check_index``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ..core.atomic import write_bytes_atomic, write_json_atomic
from ..core.errors import ConfigError
from ..core.file_digests import file_digest
from ..core.layout import CheckpointLayout, given_name
from ..core.pinned_settings import PinnedSettings
from .rules import IndexRules

DECONT = "decontaminate"  # the fingerprint key, and the option that turns it on
MODES = ("drop", "cut")
DEFAULT_NGRAMS = 13
INDEX_NAME = "decont.index"
INDEX_FORMAT = 1
logger = logging.getLogger(__name__)
@dataclass(frozen=True)
class DecontSettings(PinnedSettings):
    """The eval files (``files``: name → sha256; ``paths`` where they are), the index's
    digest and where it is, n, the mode, and whether query/answer straddles are indexed."""

    files: dict[str, str]
    index_digest: str
    ngrams: int = DEFAULT_NGRAMS
    mode: str = MODES[0]
    overlap: bool = False
    paths: tuple[str, ...] = field(default=(), compare=False)
    index_path: str = field(default="", compare=False)
    index_stats: dict[str, Any] = field(default_factory=dict, compare=False)

    UNPINNED: ClassVar[tuple[str, ...]] = ("paths", "index_path", "index_stats")
    OPTION_DEFAULTS: ClassVar[dict[str, Any]] = {"files": ()}

    @property
    def rules(self) -> IndexRules:
        return IndexRules(self.ngrams, self.overlap)

    @classmethod
    def from_options(cls, given: Mapping[str, Any]) -> DecontSettings:
        """The settings the options give, the index built into the run's checkpoint
        (``checkpoint_path``, else ``output_dir``) unless it is there already."""
        paths = tuple(str(path) for path in given.get("files") or ())
        digests: dict[str, str] = {}
        for path in paths:
            name = given_name(path)
            if not Path(path).is_file():
                raise ConfigError(f"--decontaminate {path}: no such file")
            if name in digests:
                raise ConfigError(f"--decontaminate: two eval files are named {name}; rename one (a file's name "
                                  "names its records in the report, and its stem is their default task)")
            digests[name] = file_digest(path)
        rules = IndexRules(int(given.get("ngrams") or DEFAULT_NGRAMS), bool(given.get("overlap")))
        root = given.get("checkpoint_path") or given.get("output_dir")
        if not root:
            raise ConfigError("--decontaminate needs --output-dir (the index is kept in the run's checkpoint)")
        path = index_path(CheckpointLayout(Path(root)), digests, rules)
        digest, stats = _built(path, paths, rules)
        return cls(digests, digest, rules.ngrams, given.get("mode") or MODES[0], rules.overlap, paths, str(path), stats)


def index_path(layout: CheckpointLayout, digests: Mapping[str, str], rules: IndexRules) -> Path:
    """Where the index of these files under these rules is kept: named by what it is built from."""
    key = hashlib.sha256(json.dumps([INDEX_FORMAT, sorted(digests.items()), rules.ngrams, rules.overlap])
                         .encode()).hexdigest()
    return layout.pinned_file_path(key[:16], INDEX_NAME)


def _description_path(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def _built(path: Path, eval_paths: tuple[str, ...], rules: IndexRules) -> tuple[str, dict[str, Any]]:
    """The index's digest and figures, building it first when the checkpoint has none."""
    description = _description_path(path)
    if path.is_file() and description.is_file():
        try:
            saved = json.loads(description.read_text(encoding="utf-8"))
            return str(saved["sha256"]), dict(saved.get("stats", {}))
        except (ValueError, KeyError, TypeError):
            pass
    from .evalsets import read_eval_files
    from .index import build_index

    began = time.perf_counter()
    evalset = read_eval_files(eval_paths)
    if evalset.skipped:
        logger.warning("--decontaminate: %d eval record(s) whose text is not a string left out (the first: %s)",
                       sum(evalset.skipped.values()), evalset.first_skipped)
    index = build_index(evalset, rules)
    data = index.to_bytes()
    stats = {**index.stats, "build_s": round(time.perf_counter() - began, 3), "bytes": len(data),
             "memory_bytes": index.memory_bytes}
    digest = hashlib.sha256(data).hexdigest()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, data)
    write_json_atomic(description, {"sha256": digest, "stats": stats})
    short = (f", {stats['short_texts_skipped']} text(s) under {rules.short_min_words} words left out"
             if rules.short_min_words else "")
    logger.info("decontamination index of %d eval record(s): %d n-grams%s, built in %.1f s into %s", stats["records"],
                stats["ngrams"], short, stats["build_s"], path)
    return digest, stats


def check_index(settings: DecontSettings) -> None:
    """Refuse an index that is not the one the run pinned (truncated, replaced), in one line."""
    path = Path(settings.index_path)
    if not path.is_file():
        raise ConfigError(f"decontamination index {path} is missing: the next start of the run builds it again "
                          "from the pinned eval files")
    found = file_digest(path)
    if found != settings.index_digest:
        raise ConfigError(f"decontamination index {path} is not the one the run pinned (sha256 {found[:12]}, pinned "
                          f"{settings.index_digest[:12]}): it is truncated or was replaced; delete it and "
                          f"{_description_path(path).name}, and the next start builds it again from the pinned eval files")
