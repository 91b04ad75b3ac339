"""``token_count`` per document, as FineWeb's ``TokensCounter`` adds it (no end-of-text
token), with the shard's total in its manifest. A run with ``--tokenize`` ends its first
phase with it, so every kept document says how many tokens it will train on. The tokens
are counted by this process's encoder (``tokens.encoder``: a child on mimalloc), whose
CPU time is the stage's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from ..helpers.allocator import MIMALLOC
from ..tokens.encoder import shared_encoder, shared_encoders_cpu_s
from .base import ProcessingStage
from .columns import missing_field
from .defaults import TEXT_FIELD, TOKEN_COUNT_FIELD
from .requirements import TOKENIZE_EXTRAS, Requirement, module
from .tasks import DocumentBatch, Task

COLUMN = TOKEN_COUNT_FIELD


class TokenCounter(ProcessingStage):
    """The tokenizer is read from ``tokenizer`` (a path, so not part of the fingerprint) and
    pinned by its ``digest`` (which is)."""

    name = "token_count"
    pinned = ("eos_token", "text_field", "tokenizer_digest")  # the tokenizer by its digest, not its path

    def __init__(self, tokenizer: str | Path, digest: str, eos_token: str | None = None,
                 text_field: str = TEXT_FIELD, allocator: str = MIMALLOC):
        self.tokenizer_file = Path(tokenizer)
        self.tokenizer_digest = digest
        self.eos_token = eos_token
        self.text_field = text_field
        self.allocator = allocator
        super().__init__()

    def reads(self) -> tuple[str, ...]:
        return (self.text_field,)

    def writes(self) -> tuple[str, ...]:
        return (COLUMN,)

    def needs(self) -> tuple[Requirement, ...]:
        return (module("tokenizers", TOKENIZE_EXTRAS),)

    def cpu_elsewhere_s(self) -> float:
        return shared_encoders_cpu_s()

    def process(self, task: DocumentBatch) -> Task:
        table = task.table
        if table.num_rows == 0:
            return task
        missing = missing_field(task, self.text_field, self.stage_name, "to count tokens of")
        if missing is not None:
            return missing
        texts = pc.fill_null(table.column(self.text_field).cast(pa.string()), "").to_pylist()
        counts = shared_encoder(str(self.tokenizer_file), self.eos_token, self.allocator).lengths(texts)
        column = pa.array(counts)
        index = table.schema.get_field_index(COLUMN)
        table = table.set_column(index, COLUMN, column) if index >= 0 else table.append_column(COLUMN, column)
        return replace(task, table=table, counters=replace(task.counters, tokens=task.counters.tokens + int(counts.sum())))
