"""Tokenize, phase 1: one element per curation shard, its documents as one token file.

It reads the run's final output of its shard (after dedup's removal when the run has it),
encodes each document with the run's tokenizer (in a child process on mimalloc:
``tokens.encoder``), appends the end-of-text token and writes one file of the run's token
format (``tokens.files``) under the phase's data dir: a Megatron ``.bin``/``.idx`` pair
or a datatrove ``.ds``. A document that encodes to
nothing is counted and left out. The pair appears complete or not at all, so a killed
element leaves nothing under a final name and a rerun writes the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from ...core.errors import ConfigError
from ...core.layout import CheckpointLayout
from ...core.phase import SHARD, Counts, Phase, PhaseResult, breakdown
from ...core.sharding import ShardRange
from ...pipelines.phase_settings import PhaseSettings
from .curation import curated_files

if TYPE_CHECKING:
    from ...tokens.encoder import EncoderProcess
    from ...tokens.files import TokenWriter
    from ...tokens.settings import TokenizeSettings
    from ...tokens.tokenizer import LoadedTokenizer
    from ..lifecycle import PhaseContext

BATCH = 1000  # documents encoded at once
LANGUAGE = "language"


@dataclass(frozen=True)
class TokenizeCounts(Counts):
    documents: int = 0
    tokens: int = 0  # written, each document's end-of-text token included
    empty_documents: int = 0  # encoded to nothing: left out
    tokens_by_language: dict[str, int] = breakdown("Tokens by language")

    RATE: ClassVar[str] = "tokens"


class Tokenize(Phase):
    name = "tokenize"
    needs = ("curation", "removal")  # the run's final output: after dedup's removal when there is one
    noun = SHARD
    counts = TokenizeCounts
    matching_elements = True
    added_by = "--tokenize"

    def elements(self, settings: PhaseSettings, shards: ShardRange) -> ShardRange | None:
        return shards if settings.tokenize is not None else None

    def check(self, settings: PhaseSettings) -> None:
        if settings.tokenize is not None:
            tokenizer_of(settings.tokenize)

    def work(self, context: PhaseContext, index: int) -> PhaseResult:
        from ...tokens.encoder import EncoderFailed, EncoderProcess
        from ...tokens.files import TOKEN_FORMATS, TokenWriter

        settings = context.request.options.tokenize  # the run's: open_run compared the digests
        fmt = TOKEN_FORMATS[settings.format]
        try:
            with (EncoderProcess(settings.tokenizer, settings.eos_token) as encoder,
                  TokenWriter(fmt, token_file(context.layout, index), fmt.dtype(encoder.wide)) as writer):
                empty, by_language = _write_documents(context, curated_files(context, index), encoder, writer)
        except EncoderFailed:
            context.tick_stop()  # a stop signal the encoder saw first: stopped, not failed
            raise
        return PhaseResult(TokenizeCounts(writer.documents, writer.tokens, empty, by_language))


def _write_documents(context: PhaseContext, files: tuple[str, ...], encoder: EncoderProcess,
                     writer: TokenWriter) -> tuple[int, dict[str, int]]:
    """Each file's documents, encoded and added to ``writer``; (documents that encoded to
    nothing, tokens written by language)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ...formats import reader_for

    reader, field = reader_for(context.output_format), context.text_field
    empty, by_language = 0, {}
    for done, relative in enumerate(files):
        context.tick(done, len(files))
        table = reader.read_file(str(context.output_dir / relative)).table
        if not table.num_rows:
            continue
        if field not in table.column_names:
            raise ConfigError(f"{context.output_dir / relative}: no field {field!r} to tokenize "
                              "(--text-field names the text field)")
        texts = pc.fill_null(table[field].cast(pa.string()), "").to_pylist()
        languages = (table[LANGUAGE].cast(pa.string()).to_pylist() if LANGUAGE in table.column_names
                     else [None] * len(texts))
        for start in range(0, len(texts), BATCH):
            ids, lengths = encoder.documents(texts[start:start + BATCH])
            kept = lengths > 0
            empty += int((~kept).sum())
            writer.add(ids, lengths[kept] + 1)
            for language, length in zip(languages[start:start + BATCH], lengths.tolist()):
                if length:
                    key = language or "unknown"
                    by_language[key] = by_language.get(key, 0) + length + 1
    return empty, dict(sorted(by_language.items()))


def tokenizer_of(settings: TokenizeSettings) -> LoadedTokenizer:
    from ...tokens.tokenizer import load_tokenizer

    return load_tokenizer(settings.tokenizer, settings.eos_token)


def token_file(layout: CheckpointLayout, shard: int) -> Path:
    """Where shard ``shard``'s token file lives (a prefix: its format adds the suffixes)."""
    return Tokenize().layout_of(layout).data_dir / f"shard_{shard}"
