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
from typing import TYPE_CHECKING, ClassVar

from ...core.counts import Counts, breakdown
from ...core.errors import ConfigError
from ...core.options import RunOption
from ...core.phase import OUTPUT, SHARD, Phase, PhaseResult, PhaseSettings
from ...storage.places import fetched, joined
from ...tokens.settings import TOKEN_FORMAT_NAMES, TokenizeSettings
from ...tokens.tokenizer import fetch_tokenizer
from .layouts import TOKENIZE, token_file

if TYPE_CHECKING:
    from ...tokens.encoder import EncoderProcess
    from ...tokens.files import TokenWriter
    from ...tokens.tokenizer import LoadedTokenizer
    from ..lifecycle import PhaseContext

BATCH = 1000  # documents encoded at once
UNKNOWN_LANGUAGE = "unknown"  # tokens of documents without a language, in the counts by language

TOKENIZE_OPTIONS = (
    RunOption("tokenize", "Tokenize the output for training, as phases after the last one: a tokenizer.json file, "
              "or a tokenizer's name on the Hugging Face Hub (fetched by submit on the login node). Documents also "
              "get a token_count.", "file-or-name", TOKENIZE, metavar="TOKENIZER", fetch=fetch_tokenizer,
              sets="tokenizer"),
    RunOption("eos_token", "The token appended to each document (default: the tokenizer's own end-of-text token).",
              group=TOKENIZE),
    RunOption("token_format", "Token files: Megatron's indexed dataset (.bin/.idx) or datatrove's (.ds).", "choice",
              TOKENIZE, choices=TOKEN_FORMAT_NAMES, sets="format"),
    RunOption("token_file_size", "The largest merged token file under OUTPUT_DIR/tokens/, in bytes of tokens "
              "(units: K, M, G, T, KiB, ...).", "size", TOKENIZE, minimum=1, sets="file_size"),
)


@dataclass(frozen=True)
class TokenizeCounts(Counts):
    documents: int = 0
    tokens: int = 0  # written, each document's end-of-text token included
    empty_documents: int = 0  # encoded to nothing: left out
    tokens_by_language: dict[str, int] = breakdown("Tokens by language")

    RATE: ClassVar[str] = "tokens"


class Tokenize(Phase):
    """The first of the tokenize phases: it brings their settings and options, and has the
    first phase count each document's tokens."""

    name = TOKENIZE
    needs = (OUTPUT,)  # the run's documents, whichever phase wrote them last
    noun = SHARD
    counts = TokenizeCounts
    matching_elements = True
    settings_key = TOKENIZE
    settings_type = TokenizeSettings
    options = TOKENIZE_OPTIONS

    def check(self, settings: PhaseSettings) -> None:
        tokenize = settings.get(self.settings_key)
        if tokenize is not None:
            tokenizer_of(tokenize)

    def before_writer(self, settings: TokenizeSettings, options) -> list:
        """Each document's ``token_count``, counted as it is written."""
        from ...stages.token_count import TokenCounter

        return [TokenCounter(settings.tokenizer, settings.digest, settings.eos_token, options.text_field,
                             options.allocator)]

    def work(self, context: PhaseContext, index: int) -> PhaseResult:
        from ...tokens.encoder import EncoderFailed, EncoderProcess
        from ...tokens.files import TOKEN_FORMATS, TokenWriter

        settings = context.request.options.phases.get(self.settings_key)  # the run's: open_run compared the digests
        fmt = TOKEN_FORMATS[settings.format]
        try:
            with (EncoderProcess(settings.tokenizer, settings.eos_token, allocator=context.request.options.allocator)
                  as encoder,
                  TokenWriter(fmt, token_file(context.layout, index), fmt.dtype(encoder.wide)) as writer):
                empty, by_language = _write_documents(context, self, index, encoder, writer)
        except EncoderFailed:
            context.tick_stop()  # a stop signal the encoder saw first: stopped, not failed
            raise
        return PhaseResult(TokenizeCounts(writer.documents, writer.tokens, empty, by_language))


def _write_documents(context: PhaseContext, phase: Tokenize, shard: int, encoder: EncoderProcess,
                     writer: TokenWriter) -> tuple[int, dict[str, int]]:
    """Each of the shard's output files, its documents encoded and added to ``writer``;
    (documents that encoded to nothing, tokens written by language)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ...formats import reader_for
    from ...stages.columns import row_languages

    reader, field = reader_for(context.output_format), context.text_field
    empty, by_language = 0, {}
    files, directory = context.input_files(phase, shard), context.input_dir(phase)
    for done, relative in enumerate(files):
        context.tick(done, len(files))
        with fetched(joined(directory, relative)) as local:
            table = reader.read_file(str(local)).table
        if not table.num_rows:
            continue
        if field not in table.column_names:
            raise ConfigError(f"{joined(directory, relative)}: no field {field!r} to tokenize "
                              "(--text-field names the text field)")
        texts = pc.fill_null(table[field].cast(pa.string()), "").to_pylist()
        languages = row_languages(table, UNKNOWN_LANGUAGE)
        for start in range(0, len(texts), BATCH):
            ids, lengths = encoder.documents(texts[start:start + BATCH])
            kept = lengths > 0
            empty += int((~kept).sum())
            writer.add(ids, lengths[kept] + 1)
            for language, length in zip(languages[start:start + BATCH], lengths.tolist()):
                if length:
                    by_language[language] = by_language.get(language, 0) + length + 1
    return empty, dict(sorted(by_language.items()))


def tokenizer_of(settings: TokenizeSettings) -> LoadedTokenizer:
    from ...tokens.tokenizer import load_tokenizer

    return load_tokenizer(settings.tokenizer, settings.eos_token)
