"""Corpus statistics over the run's final documents (``--stats``): two phases at the end.

- ``shard_stats``, one element per shard: the shard's documents as counts, optionally per
  value of a field (``--stats-group-by language``): documents; characters, words, lines and
  (with ``--tokenize``) tokens per document, each as a sum, a minimum, a maximum and a
  histogram; documents per language, per domain and per TLD. Nothing is cut here, so shards
  add up exactly.
- ``stats``, one element: every shard's added up, the domains and TLDs cut to the ``--stats-top``
  most frequent, written to ``OUTPUT_DIR/stats.json`` (and kept in the checkpoint, where
  ``status --json`` reads it).

The measures, each a reader can recompute from the output: characters are Unicode code points
(``len(text)``); lines are the text's pieces between newlines (``len(text.split("\\n"))``, an
empty text is one line, as datatrove's ``LineStats`` counts); words are whitespace-separated
(``len(text.split())``, the word the ``--min-words`` filter counts); tokens are the document's
``token_count`` (its end-of-text token included). A histogram's bin is named by its lower
bound: 0, then powers of two (bin 8 holds 8 to 15). A domain is the URL's host as the Public
Suffix List bundled with ``tldextract`` splits it (its fully qualified name, and its suffix
for the TLD), as datatrove's stats do; a document without a URL counts under ``(none)``.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...core.atomic import dump_json, write_bytes_atomic, write_json_atomic
from ...core.counts import Counts
from ...core.options import RunOption
from ...core.phase import OUTPUT, SHARD, Phase, PhaseResult, PhaseSettings
from ...core.pinned_settings import PinnedSettings
from ...core.sharding import ShardRange
from ...stages.defaults import TOKEN_COUNT_FIELD
from ...storage.places import fetched, joined, put_bytes

if TYPE_CHECKING:
    import pyarrow as pa

    from ..lifecycle import PhaseContext

SHARD_STATS, STATS = "shard_stats", "stats"
STATS_FILE = "stats.json"
ALL = "all"
NONE = "(none)"
MEASURES = ("characters", "words", "lines", "tokens")

STATS_OPTIONS = (
    RunOption("stats", "Write OUTPUT_DIR/stats.json as phases after the others: documents, and characters, words, "
              "lines and tokens per document (sums, extremes, histograms), languages, top domains and TLDs, over "
              "the run's final documents.", "flag", STATS),
    RunOption("stats_group_by", "Also give the statistics per value of this field (language, quality_bucket, a "
              "label column).", group=STATS, metavar="FIELD", sets="group_by"),
    RunOption("stats_top", "How many of the most frequent domains and TLDs stats.json lists.", "int", STATS,
              minimum=1, sets="top"),
)


@dataclass(frozen=True)
class StatsSettings(PinnedSettings):
    group_by: str | None = None
    top: int = 100

    @classmethod
    def from_options(cls, given: dict[str, Any]) -> StatsSettings:
        return cls(given.get("group_by") or None, given.get("top") or 100)


def bin_of(value: int) -> int:
    """A histogram bin's lower bound: 0, or the power of two at or below ``value``."""
    return 0 if value <= 0 else 1 << (int(value).bit_length() - 1)


@dataclass
class GroupStats:
    """The figures of one group of documents; ``add`` and ``+`` keep them exact."""

    documents: int = 0
    measures: dict[str, dict[str, Any]] = field(default_factory=dict)
    languages: Counter = field(default_factory=Counter)
    domains: Counter = field(default_factory=Counter)
    tlds: Counter = field(default_factory=Counter)

    def add_measure(self, name: str, values: list[int]) -> None:
        if not values:
            return
        entry = self.measures.setdefault(name, {"sum": 0, "min": None, "max": None, "histogram": Counter()})
        entry["sum"] += sum(values)
        low, high = min(values), max(values)
        entry["min"] = low if entry["min"] is None else min(entry["min"], low)
        entry["max"] = high if entry["max"] is None else max(entry["max"], high)
        entry["histogram"].update(bin_of(v) for v in values)

    def merge(self, other: GroupStats) -> None:
        self.documents += other.documents
        for name, entry in other.measures.items():
            mine = self.measures.setdefault(name, {"sum": 0, "min": None, "max": None, "histogram": Counter()})
            mine["sum"] += entry["sum"]
            mine["min"] = entry["min"] if mine["min"] is None else min(mine["min"], entry["min"])
            mine["max"] = entry["max"] if mine["max"] is None else max(mine["max"], entry["max"])
            mine["histogram"].update(entry["histogram"])
        self.languages.update(other.languages)
        self.domains.update(other.domains)
        self.tlds.update(other.tlds)

    def to_json(self, top: int | None = None) -> dict[str, Any]:
        def listed(counter: Counter) -> dict[str, int]:
            ordered = sorted(counter.items(), key=lambda item: (-item[1], item[0]))
            return dict(ordered[:top] if top else ordered)

        measures = {name: {"sum": e["sum"], "mean": e["sum"] / self.documents if self.documents else 0.0,
                           "min": e["min"], "max": e["max"],
                           "histogram": {str(b): n for b, n in sorted(e["histogram"].items())}}
                    for name, e in self.measures.items()}
        return {"documents": self.documents, **measures, "languages": dict(sorted(self.languages.items())),
                "domains": listed(self.domains), "distinct_domains": len(self.domains), "tlds": listed(self.tlds)}

    @classmethod
    def from_json(cls, payload: dict[str, Any]) -> GroupStats:
        measures = {name: {"sum": payload[name]["sum"], "min": payload[name]["min"], "max": payload[name]["max"],
                           "histogram": Counter({int(b): n for b, n in payload[name]["histogram"].items()})}
                    for name in MEASURES if name in payload}
        return cls(payload["documents"], measures, Counter(payload["languages"]), Counter(payload["domains"]),
                   Counter(payload["tlds"]))


def _hosts():
    from tldextract import TLDExtract

    return TLDExtract(suffix_list_urls=(), cache_dir=None)  # the bundled list: no network


def table_stats(table: pa.Table, text_field: str, group_by: str | None, hosts) -> dict[str, GroupStats]:
    """The figures of ``table``'s documents, for all of them and per value of ``group_by``."""
    import pyarrow.compute as pc

    from ...stages.whitespace import count_words

    text = pc.fill_null(table.column(text_field), "")
    columns = {"characters": pc.utf8_length(text).to_pylist(),
               "words": count_words(text).to_pylist(),
               "lines": pc.add(pc.count_substring(text, "\n"), 1).to_pylist()}
    if TOKEN_COUNT_FIELD in table.column_names:
        columns["tokens"] = pc.fill_null(table.column(TOKEN_COUNT_FIELD), 0).to_pylist()
    rows = table.num_rows
    languages = _strings(table, "language", rows)
    urls = _strings(table, "url", rows)
    keys = _strings(table, group_by, rows) if group_by else [None] * rows
    groups: dict[str, GroupStats] = {}
    parts = {ALL: range(rows)}
    if group_by:
        by_value: dict[str, list[int]] = {}
        for row, key in enumerate(keys):
            by_value.setdefault(key or NONE, []).append(row)
        parts.update(by_value)
    split = [hosts.extract_str(url) if url else None for url in urls]
    for name, members in parts.items():
        stats = groups[name] = GroupStats(len(members))
        for measure, values in columns.items():
            stats.add_measure(measure, [values[row] for row in members])
        if "language" in table.column_names:
            stats.languages.update(languages[row] or NONE for row in members)
        stats.domains.update((split[row].fqdn or NONE) if split[row] else NONE for row in members)
        stats.tlds.update((split[row].suffix or NONE) if split[row] else NONE for row in members)
    return groups


def _strings(table: pa.Table, name: str, rows: int) -> list[str | None]:
    import pyarrow as pa

    if name not in table.column_names:
        return [None] * rows
    column = table.column(name)
    return column.cast(pa.string()).to_pylist() if not pa.types.is_string(column.type) else column.to_pylist()


def merged(parts: list[dict[str, GroupStats]]) -> dict[str, GroupStats]:
    total: dict[str, GroupStats] = {}
    for part in parts:
        for name, stats in part.items():
            total.setdefault(name, GroupStats()).merge(stats)
    return total


@dataclass(frozen=True)
class StatsCounts(Counts):
    documents: int = 0


def _planned(settings: PhaseSettings, elements: ShardRange) -> ShardRange | None:
    return elements if settings.get(STATS) is not None else None


class ShardStats(Phase):
    """The first of the stats phases: it brings their settings and options."""

    name = SHARD_STATS
    needs = (OUTPUT,)
    noun = SHARD
    counts = StatsCounts
    matching_elements = True
    settings_key = STATS
    settings_type = StatsSettings
    options = STATS_OPTIONS

    def elements(self, settings: PhaseSettings, shards: ShardRange) -> ShardRange | None:
        return _planned(settings, shards)

    def work(self, context: PhaseContext, index: int) -> PhaseResult:
        from ...formats import reader_for

        settings = context.settings_of(self)
        text_field = context.request.options.text_field
        wanted = [text_field, "language", "url", TOKEN_COUNT_FIELD, *([settings.group_by] if settings.group_by else [])]
        reader, directory, hosts = reader_for(context.output_format), context.input_dir(self), _hosts()
        parts = []
        files = context.input_files(self, index)
        for done, relative in enumerate(files):
            context.tick(done, len(files))
            with fetched(joined(directory, relative)) as local:
                for table in reader.read_columns(str(local), wanted):
                    if table.num_rows:
                        parts.append(table_stats(_present(table, wanted), text_field, settings.group_by, hosts))
        total = merged(parts)
        payload = {name: stats.to_json() for name, stats in total.items()}
        path = self.layout_of(context.layout).data_path(index, ".json")
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, payload)
        return PhaseResult(StatsCounts(total[ALL].documents if ALL in total else 0))


def _present(table: pa.Table, wanted: list[str]) -> pa.Table:
    """``table`` without the columns its file lacks (read as all nulls), so that a missing
    token count or language is not counted as zero or as a language."""
    keep = [name for name in table.column_names if table.column(name).null_count < table.num_rows or name == wanted[0]]
    return table.select(keep)


class CorpusStats(Phase):
    name = STATS
    needs = (SHARD_STATS,)
    counts = StatsCounts
    settings_key = STATS

    def elements(self, settings: PhaseSettings, shards: ShardRange) -> ShardRange | None:
        return _planned(settings, ShardRange(1))

    def published(self, layout) -> dict[str, Any] | None:
        """The run's ``stats.json``, as the checkpoint keeps it."""
        path = self.layout_of(layout).data_dir / STATS_FILE
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None

    def work(self, context: PhaseContext, index: int) -> PhaseResult:
        settings = context.settings_of(self)
        data = context.phase_layout(SHARD_STATS)
        parts = [{name: GroupStats.from_json(payload) for name, payload in
                  json.loads(data.data_path(shard, ".json").read_text(encoding="utf-8")).items()}
                 for shard in context.elements(SHARD_STATS)]
        total = merged(parts)
        document = dump_json({"group_by": settings.group_by, "top": settings.top,
                              "groups": {name: stats.to_json(settings.top) for name, stats in total.items()}})
        kept = self.layout_of(context.layout).data_dir / STATS_FILE
        kept.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(kept, document)
        put_bytes(joined(context.output_dir, STATS_FILE), document)
        return PhaseResult(StatsCounts(total[ALL].documents if ALL in total else 0))



