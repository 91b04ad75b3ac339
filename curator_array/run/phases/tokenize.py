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

from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ...core.counts import Counts, breakdown
from ...core.errors import ConfigError
from ...core.options import RunOption
from ...core.phase import OUTPUT, SHARD, Phase, PhaseResult, PhaseSettings
from ...storage.places import fetched, joined
from ...tokens.settings import TOKEN_FORMAT_NAMES, TokenizeSettings
from ...tokens.tokenizer import fetch_tokenizer
from .layouts import TOKENIZE, keys_file, sets_file, token_file
from .signatures import whole_documents

if TYPE_CHECKING:
    import numpy as np

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
    RunOption("token_partition_by", "One token-file set per value of these fields (quality_bucket, language, a label "
              "column; comma-separated), nested in the order given: OUTPUT_DIR/tokens/FIELD=VALUE/....", "list", TOKENIZE,
              metavar="FIELD", sets="partition_by"),
    RunOption("token_max_sets", "The most token-file sets a run may write: more fails the tokenize phase, naming "
              "the fields and the count.", "int", TOKENIZE, minimum=1, sets="max_sets"),
    RunOption("token_shuffle", "Shuffle the documents within each token-file set across the whole run, by "
              "--token-shuffle-seed: the same seed gives the same bytes on any sharding (default: on for a new run; "
              "--no-token-shuffle keeps the run's order).", "switch", TOKENIZE, sets="shuffle",
              before_it_existed=False),
    RunOption("token_shuffle_seed", "The seed of the shuffle.", "int", TOKENIZE, minimum=0, sets="shuffle_seed"),
    RunOption("rehydrate", "Repeat each kept document of a deduplicated run by its cluster's size (FineWeb-2's "
              "re-hydration): ranges of sizes and their copies, e.g. 1:1,2-4:2,5-100:3 (beyond the last range, its "
              "copies); the copies are spread by the shuffle.", group=TOKENIZE, metavar="SIZES:COPIES,..."),
    RunOption("mix", "A TOML mixture of the token-file sets: per set a weight, a token budget or epochs, a total and "
              "the most epochs (docs/tokens.md); written as OUTPUT_DIR/tokens/blend.json and Megatron's data args. "
              "Without it each set weighs its tokens.", "file", TOKENIZE),
)


@dataclass(frozen=True)
class TokenizeCounts(Counts):
    documents: int = 0
    tokens: int = 0  # written, each document's end-of-text token included
    empty_documents: int = 0  # encoded to nothing: left out
    tokens_by_language: dict[str, int] = breakdown("Tokens by language")
    documents_by_copies: dict[str, int] = breakdown("Documents by rehydration range (cluster sizes:copies)")

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
            if tokenize.rehydrate and whole_documents(settings) is None:
                raise ConfigError(f"--rehydrate {tokenize.rehydrate}: it repeats documents by their cluster's size, "
                                  "which only a run deduplicated by document has: give --dedup exact or fuzzy")

    def before_writer(self, settings: TokenizeSettings, options) -> list:
        """Each document's ``token_count``, counted as it is written."""
        from ...stages.token_count import TokenCounter

        return [TokenCounter(settings.tokenizer, settings.digest, settings.eos_token, options.text_field,
                             options.allocator)]

    def work(self, context: PhaseContext, index: int) -> PhaseResult:
        from ...tokens.encoder import EncoderFailed, EncoderProcess
        from ...tokens.files import TOKEN_FORMATS

        settings = context.request.options.phases.get(self.settings_key)  # the run's: open_run compared the digests
        fmt = TOKEN_FORMATS[settings.format]
        try:
            with (EncoderProcess(settings.tokenizer, settings.eos_token, allocator=context.request.options.allocator)
                  as encoder, ExitStack() as files):
                sets = ShardSets(context.layout, index, fmt, fmt.dtype(encoder.wide), files, settings)
                empty, by_language = _write_documents(context, self, index, encoder, sets)
                sets.close()
        except EncoderFailed:
            context.tick_stop()  # a stop signal the encoder saw first: stopped, not failed
            raise
        return PhaseResult(TokenizeCounts(sets.documents, sets.tokens, empty, by_language, sets.by_copies))


class ShardSets:
    """A shard's token files, one per token-file set (one unnamed set without
    ``--token-partition-by``), with each document's shuffle key when the run shuffles, and
    the list of them (``sets_file``) written last."""

    def __init__(self, layout, shard: int, fmt, dtype, files: ExitStack, settings: TokenizeSettings):
        self.layout, self.shard, self.fmt, self.dtype, self.files, self.settings = layout, shard, fmt, dtype, files, settings
        self.writers: dict[str, TokenWriter] = {}
        self.keys: dict[str, list[np.ndarray]] = {}
        self.closed = False
        self.by_copies: dict[str, int] = {}
        files.callback(self._abandon)
        if not settings.partition_by:  # the one unnamed set: a shard without documents has an empty file
            import numpy as np

            self.add("", np.zeros(0, dtype), np.zeros(0, np.int64), np.zeros(0, np.uint64) if settings.shuffle else None)

    def add(self, name: str, ids: np.ndarray, lengths: np.ndarray, keys: np.ndarray | None) -> None:
        from ...tokens.files import TokenWriter

        if name not in self.writers:
            if len(self.writers) >= self.settings.max_sets:
                raise ConfigError(f"--token-partition-by {','.join(self.settings.partition_by)}: more than "
                                  f"{self.settings.max_sets} token-file sets (--token-max-sets) in shard {self.shard} "
                                  "alone; partition by fields with fewer values")
            self.writers[name] = TokenWriter(self.fmt, token_file(self.layout, self.shard, name), self.dtype).__enter__()
            self.keys[name] = []
        self.writers[name].add(ids, lengths)
        if keys is not None:
            self.keys[name].append(keys)

    def close(self) -> None:
        """Every file complete (the keys beside each), then the list of sets."""
        import numpy as np

        from ...core.atomic import write_bytes_atomic, write_json_atomic

        self.closed = True
        for name, writer in self.writers.items():
            writer.__exit__(None, None, None)
            if self.settings.shuffle:
                keys = np.concatenate(self.keys[name]) if self.keys[name] else np.zeros(0, np.uint64)
                write_bytes_atomic(keys_file(token_file(self.layout, self.shard, name)), keys.astype("<u8").tobytes())
        listing = {name: {"documents": w.documents, "tokens": w.tokens} for name, w in sorted(self.writers.items())}
        write_json_atomic(sets_file(self.layout, self.shard), listing)

    def _abandon(self) -> None:
        """Without ``close`` (an error, a stop): no file of this attempt appears."""
        if not self.closed:
            for writer in self.writers.values():
                writer.__exit__(RuntimeError, RuntimeError("tokenize stopped"), None)

    @property
    def documents(self) -> int:
        return sum(writer.documents for writer in self.writers.values())

    @property
    def tokens(self) -> int:
        return sum(writer.tokens for writer in self.writers.values())


def _write_documents(context: PhaseContext, phase: Tokenize, shard: int, encoder: EncoderProcess,
                     sets: ShardSets) -> tuple[int, dict[str, int]]:
    """Each of the shard's output files, its documents encoded and added to their sets;
    (documents that encoded to nothing, tokens written by language)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from ...formats import reader_for
    from ...stages.columns import row_languages
    from ...tokens.sets import set_names, shuffle_keys, spread_keys

    reader, field, settings = reader_for(context.output_format), context.text_field, sets.settings
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
        values = [table[name].to_pylist() if name in table.column_names else [None] * table.num_rows
                  for name in settings.partition_by]
        names = set_names(settings.partition_by, values, table.num_rows)
        keys = shuffle_keys(settings.shuffle_seed, relative, range(table.num_rows)) if settings.shuffle else None
        copies = _copies(table, settings, sets.by_copies) if settings.rehydrate else None
        for start in range(0, len(texts), BATCH):
            ids, lengths = encoder.documents(texts[start:start + BATCH])
            kept = lengths > 0
            empty += int((~kept).sum())
            sizes = lengths[kept] + 1
            rows = np.flatnonzero(kept) + start
            if copies is not None:  # each document its copies times, each copy with a key of its own
                pieces = np.split(ids, np.cumsum(sizes)[:-1]) if len(sizes) else []
                repeated, copy_keys = spread_keys(keys[rows], copies[rows])
                ids = np.concatenate([pieces[i] for i in repeated.tolist()]) if len(repeated) else ids[:0]
                sizes, rows, row_keys = sizes[repeated], rows[repeated], copy_keys
            else:
                row_keys = keys[rows] if keys is not None else None
            row_sets = np.array([names[row] for row in rows.tolist()], object)
            if len(set(row_sets.tolist())) == 1:  # the usual batch: one set, as it is
                sets.add(row_sets[0], ids, sizes, row_keys)
            else:
                pieces = np.split(ids, np.cumsum(sizes)[:-1]) if len(sizes) else []
                for name in sorted(set(row_sets.tolist())):
                    mine = row_sets == name
                    sets.add(name, np.concatenate([piece for piece, take in zip(pieces, mine) if take]), sizes[mine],
                             row_keys[mine] if row_keys is not None else None)
            for language, length in zip(languages[start:start + BATCH], lengths.tolist()):
                if length:
                    by_language[language] = by_language.get(language, 0) + length + 1
    return empty, dict(sorted(by_language.items()))


def _copies(table, settings: TokenizeSettings, counted: dict[str, int]):
    """Each row's copies by its cluster's size (``minhash_cluster_size``, 1 without), counted
    by range into ``counted``."""
    import numpy as np
    import pyarrow.compute as pc

    from ...tokens.sets import copies_of, parse_rehydration, range_label, range_of
    from .removal import CLUSTER_SIZE

    ranges = parse_rehydration(settings.rehydrate)
    sizes = (pc.fill_null(table[CLUSTER_SIZE], 1).to_numpy(zero_copy_only=False).astype(np.int64)
             if CLUSTER_SIZE in table.column_names else np.ones(table.num_rows, np.int64))
    which = range_of(ranges, sizes)
    for index, count in zip(*np.unique(which, return_counts=True)):
        label = range_label(ranges[int(index)])
        counted[label] = counted.get(label, 0) + int(count)
    return copies_of(ranges, sizes)


def tokenizer_of(settings: TokenizeSettings) -> LoadedTokenizer:
    from ...tokens.tokenizer import load_tokenizer

    return load_tokenizer(settings.tokenizer, settings.eos_token)
