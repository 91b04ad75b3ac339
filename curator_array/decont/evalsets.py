"""The user's eval sets: JSONL or Parquet records with ``text`` (the answer, gold or passage),
an optional ``query`` (the prompt), ``task`` (default: the file's stem) and ``language``.

A file that is missing, empty, not JSON, or whose records lack ``text`` is refused before
any work, naming the file and the line (or row). A record whose ``text`` is not a string is
left out and counted: one odd record should not stop a run, and the count says it happened.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from ..core.layout import given_name

TEXT, QUERY, TASK, LANGUAGE = "text", "query", "task", "language"
NON_STRING_TEXT = "non_string_text"
PARQUET_SUFFIXES = (".parquet", ".pq")


@dataclass(frozen=True)
class EvalRecord:
    text: str
    query: str | None
    task: str
    source: str  # file:line (JSONL) or file:row N (Parquet), as the report names it
    language: str | None = None


@dataclass(frozen=True)
class EvalSet:
    records: tuple[EvalRecord, ...]
    skipped: Mapping[str, int] = field(default_factory=dict)
    first_skipped: str | None = None  # where the first record left out is, to name it

    @property
    def tasks(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(record.task for record in self.records))


def read_eval_files(paths: Iterable[str | Path]) -> EvalSet:
    records: list[EvalRecord] = []
    skipped: Counter[str] = Counter()
    first_skipped = None
    for path in map(Path, paths):
        if not path.is_file():
            raise ConfigError(f"--decontaminate {path}: no such file")
        found = 0
        for number, payload in _rows(path):
            where = f"{path}: {'row' if _is_parquet(path) else 'line'} {number}"
            if not isinstance(payload, Mapping):
                raise ConfigError(f"--decontaminate {where}: not a JSON object")
            if TEXT not in payload:
                raise ConfigError(f"--decontaminate {where}: no 'text' field (the answer, gold or passage to look for)")
            found += 1
            text = payload[TEXT]
            if not isinstance(text, str):
                skipped[NON_STRING_TEXT] += 1
                first_skipped = first_skipped or f"{path}: {'row' if _is_parquet(path) else 'line'} {number}"
                continue
            records.append(EvalRecord(text, _string(payload.get(QUERY)), _string(payload.get(TASK)) or stem(path),
                                      f"{given_name(path)}:{number}", _string(payload.get(LANGUAGE))))
        if not found:
            raise ConfigError(f"--decontaminate {path}: empty, no eval records")
    return EvalSet(tuple(records), dict(skipped), first_skipped)


def stem(path: Path) -> str:
    """The file's stem as the user named it (a task's default name)."""
    name = given_name(path)
    for suffix in (".jsonl", ".json", *PARQUET_SUFFIXES):
        if name.lower().endswith(suffix):
            return name[:-len(suffix)]
    return Path(name).stem


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _is_parquet(path: Path) -> bool:
    return path.suffix.lower() in PARQUET_SUFFIXES


def _rows(path: Path) -> Iterator[tuple[int, Any]]:
    """Each record with its line (JSONL, from 1) or row (Parquet, from 0)."""
    if _is_parquet(path):
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except Exception as error:  # noqa: BLE001 - pyarrow raises several kinds for a bad file
            raise ConfigError(f"--decontaminate {path}: not a Parquet file ({error})") from None
        if TEXT not in table.column_names:
            raise ConfigError(f"--decontaminate {path}: no 'text' column (the answer, gold or passage to look for)")
        for row, payload in enumerate(table.to_pylist()):
            yield row, payload
        return
    number = 0
    try:
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if line.strip():
                    yield number, json.loads(line)
    except json.JSONDecodeError as error:
        raise ConfigError(f"--decontaminate {path}: line {number}: not JSON ({error.msg})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"--decontaminate {path}: line {number + 1}: not UTF-8 text (JSONL or Parquet)") from None
