"""Tokenize, phase 2: one element, the shards' token files merged for training.

It writes ``OUTPUT_DIR/tokens/`` (merged next to the checkpoint, then uploaded, when the
output dir is an ``s3://`` prefix): files of at most ``--token-file-size`` bytes of tokens
each (a valid file each, documents never split, in shard order), then ``manifest.json``
listing each file with its documents and tokens, the tokenizer's digest and the
end-of-text token: Megatron's ``--data-path`` list and datatrove's readers take the files
as they are. A rerun writes the same bytes; parts a rerun no longer needs are removed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...core.atomic import dump_json, write_bytes_atomic
from ...core.counts import Counts
from ...core.phase import Phase, PhaseResult, PhaseSettings
from ...core.sharding import ShardRange
from ...storage.places import LocalPlace, StorePlace, joined, place_of
from .layouts import TOKENIZE, TOKENS, token_file
from .tokenize import tokenizer_of

if TYPE_CHECKING:
    from ..lifecycle import PhaseContext

DIRECTORY = "tokens"
MANIFEST = "manifest.json"


@dataclass(frozen=True)
class TokenFileCounts(Counts):
    files: int = 0
    documents: int = 0
    tokens: int = 0
    bytes: int = 0


class TokenFiles(Phase):
    name = TOKENS
    needs = (TOKENIZE,)
    counts = TokenFileCounts
    settings_key = TOKENIZE

    def elements(self, settings: PhaseSettings, shards: ShardRange) -> ShardRange | None:
        return ShardRange(1) if settings.get(self.settings_key) is not None else None

    def work(self, context: PhaseContext, index: int) -> PhaseResult:
        from ...tokens.files import TOKEN_FORMATS, merge

        settings = context.request.options.phases.get(self.settings_key)
        fmt = TOKEN_FORMATS[settings.format]
        place = place_of(joined(context.output_dir, DIRECTORY))
        directory = place.directory if isinstance(place, LocalPlace) else self.layout_of(context.layout).data_dir / DIRECTORY
        directory.mkdir(parents=True, exist_ok=True)
        inputs = [token_file(context.layout, shard) for shard in context.elements(TOKENIZE)]
        parts = merge(fmt, inputs, directory, settings.file_size)
        tokenizer = tokenizer_of(settings)
        manifest = {
            "format": fmt.name, "suffixes": [fmt.data_suffix, fmt.index_suffix],
            "tokenizer_sha256": settings.digest, "eos_token": tokenizer.eos_token, "eos_id": tokenizer.eos_id,
            "vocab_size": tokenizer.vocab_size, "files": [part.to_json() for part in parts],
            "documents": sum(p.documents for p in parts), "tokens": sum(p.tokens for p in parts),
            "data_path": [str(Path(DIRECTORY) / part.name) for part in parts],
        }
        write_bytes_atomic(directory / MANIFEST, dump_json(manifest))
        if not isinstance(place, LocalPlace):
            _upload(directory, place)
        return PhaseResult(TokenFileCounts(len(parts), manifest["documents"], manifest["tokens"],
                                           sum(p.bytes for p in parts)))


def _upload(directory: Path, place: StorePlace) -> None:
    """The merged files, each uploaded whole and then removed here, the manifest last (so a
    manifest names only files that are there); objects of an earlier merge that this one no
    longer has are removed."""
    files = sorted(directory.iterdir(), key=lambda path: path.name == MANIFEST)
    names = {path.name for path in files}
    for path in files:
        place.upload(path, path.name)
        path.unlink()
    for stale in place.names():
        if stale not in names:
            place.remove(stale)
