"""Tokenize, phase 2: one element, the shards' token files merged for training.

It writes ``OUTPUT_DIR/tokens/`` (merged next to the checkpoint, then uploaded, when the
output dir is an ``s3://`` prefix): files of at most ``--token-file-size`` bytes of tokens
each (a valid file each, documents never split), then ``manifest.json`` listing each file
with its documents and tokens, the tokenizer's digest and the end-of-text token:
Megatron's ``--data-path`` list and datatrove's readers take the files as they are. With
``--token-partition-by`` each set has its own files, under ``FIELD=VALUE/``. Documents are
in shard order, or, when the run shuffles, in the order of their keys (``tokens.sets``):
the same on any sharding. A rerun writes the same bytes; parts a rerun no longer needs are
removed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ...core.atomic import write_bytes_atomic, write_json_atomic
from ...core.counts import Counts, breakdown
from ...core.errors import ConfigError
from ...core.phase import Phase, PhaseResult, PhaseSettings
from ...core.sharding import ShardRange
from ...storage.places import LocalPlace, StorePlace, joined, place_of
from .layouts import TOKENIZE, TOKENS, keys_file, sets_file, token_file
from .tokenize import tokenizer_of

if TYPE_CHECKING:
    from ..lifecycle import PhaseContext

DIRECTORY = "tokens"
MANIFEST = "manifest.json"


BLEND = "blend.json"
DATA_ARGS = "data_args.txt"  # Megatron's --data-args-path: "W1 PREFIX1 W2 PREFIX2 ..."


@dataclass(frozen=True)
class TokenFileCounts(Counts):
    files: int = 0
    documents: int = 0
    tokens: int = 0
    bytes: int = 0
    tokens_by_set: dict[str, int] = breakdown("Tokens by token-file set")
    share_by_set: dict[str, float] = breakdown("Share of training by set (%, the blend's weight)")
    epochs_by_set: dict[str, float] = breakdown("Epochs by set (what the share takes of the tokens it holds)")


class TokenFiles(Phase):
    name = TOKENS
    needs = (TOKENIZE,)
    counts = TokenFileCounts
    settings_key = TOKENIZE

    def elements(self, settings: PhaseSettings, shards: ShardRange) -> ShardRange | None:
        return ShardRange(1) if settings.get(self.settings_key) is not None else None

    def work(self, context: PhaseContext, index: int) -> PhaseResult:
        from ...tokens.files import TOKEN_FORMATS

        settings = context.request.options.phases.get(self.settings_key)
        fmt = TOKEN_FORMATS[settings.format]
        place = place_of(joined(context.output_dir, DIRECTORY))
        directory = place.directory if isinstance(place, LocalPlace) else self.layout_of(context.layout).data_dir / DIRECTORY
        directory.mkdir(parents=True, exist_ok=True)
        listings = _listings(context)
        by_set = _shards_by_set(listings)
        if len(by_set) > settings.max_sets:
            raise ConfigError(f"--token-partition-by {','.join(settings.partition_by)}: {len(by_set)} token-file sets, "
                              f"more than --token-max-sets {settings.max_sets}; partition by fields with fewer values")
        mixture = _mixture(settings)
        held = _held_tokens(listings)
        if held is not None:
            mixture.blend(held)  # a mixture the sets cannot give fails before anything is merged
        sets = []
        for name, shards in by_set.items():
            parts = _merged(fmt, settings, context, name, shards, directory / name if name else directory)
            sets.append({"name": name, "documents": sum(p.documents for p in parts),
                         "tokens": sum(p.tokens for p in parts),
                         "files": [{**part.to_json(), "name": str(Path(name) / part.name) if name else part.name}
                                   for part in parts]})
        _remove_stale_sets(directory, {item["name"] for item in sets})
        tokenizer = tokenizer_of(settings)
        files = [entry for item in sets for entry in item["files"]]
        manifest = {
            "format": fmt.name, "suffixes": [fmt.data_suffix, fmt.index_suffix],
            "tokenizer_sha256": settings.digest, "eos_token": tokenizer.eos_token, "eos_id": tokenizer.eos_id,
            "vocab_size": tokenizer.vocab_size, "files": files,
            "documents": sum(item["documents"] for item in sets), "tokens": sum(item["tokens"] for item in sets),
            "data_path": [str(Path(DIRECTORY) / entry["name"]) for entry in files],
            **({"partition_by": list(settings.partition_by), "sets": sets} if settings.partition_by else {}),
            **({"shuffle_seed": settings.shuffle_seed} if settings.shuffle else {}),
        }
        parts = files
        blend = mixture.blend({item["name"]: item["tokens"] for item in sets})
        write_json_atomic(directory / BLEND, _blend_file(sets, blend, mixture))
        if fmt.data_args:
            write_bytes_atomic(directory / DATA_ARGS, (" ".join(_data_args(sets, blend)) + "\n").encode())
        else:
            (directory / DATA_ARGS).unlink(missing_ok=True)
        write_json_atomic(directory / MANIFEST, manifest)
        if not isinstance(place, LocalPlace):
            _upload(directory, place)
        shown = {name or "(all)": figures for name, figures in blend.items()}
        return PhaseResult(TokenFileCounts(
            len(parts), manifest["documents"], manifest["tokens"], sum(p["bytes"] for p in parts),
            {name: f["tokens"] for name, f in shown.items()}, {name: round(100 * f["share"], 4) for name, f in shown.items()},
            {name: round(f["epochs"], 4) for name, f in shown.items()}))


def _mixture(settings):
    from ...tokens.mix import Mixture

    return Mixture.read(settings.mix) if settings.mix else Mixture({})


def _listings(context: PhaseContext) -> dict[int, dict | None]:
    """Each tokenize shard's list of sets with their documents and tokens, read once (None for
    a shard tokenized before sets existed: it wrote the one unnamed set)."""
    listed = {shard: sets_file(context.layout, shard) for shard in context.elements(TOKENIZE)}
    return {shard: json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
            for shard, path in listed.items()}


def _held_tokens(listings: dict[int, dict | None]) -> dict[str, int] | None:
    """Each set's tokens as the tokenize elements listed them (None for a run tokenized before sets)."""
    held: dict[str, int] = {}
    for listing in listings.values():
        if listing is None:
            return None
        for name, figures in listing.items():
            held[name] = held.get(name, 0) + figures["tokens"]
    return held


def _prefixes(item: dict) -> list[tuple[str, int]]:
    return [(str(Path(DIRECTORY) / part["name"]), part["tokens"]) for part in item["files"]]


def _blend_file(sets: list[dict], blend: dict[str, dict[str, float]], mixture) -> dict:
    """``blend.json``: each set's documents, tokens, share, epochs and its files' weights."""
    return {"total_tokens": mixture.total_tokens, "max_epochs": mixture.max_epochs,
            "sets": [{"name": item["name"], "documents": item["documents"], **blend[item["name"]],
                      "prefixes": [{"prefix": prefix, "weight": blend[item["name"]]["share"] * tokens / item["tokens"]}
                                   for prefix, tokens in _prefixes(item) if item["tokens"]]}
                     for item in sets],
            "data_path": _data_args(sets, blend)}


def _data_args(sets: list[dict], blend: dict[str, dict[str, float]]) -> list[str]:
    """Megatron's ``--data-path`` list: a weight, then its prefix, for every file of a set drawn."""
    args = []
    for item in sets:
        share = blend[item["name"]]["share"]
        for prefix, tokens in _prefixes(item):
            if share and tokens:
                args += [f"{share * tokens / item['tokens']:.12g}", prefix]
    return args


def _shards_by_set(listings: dict[int, dict | None]) -> dict[str, list[int]]:
    """Each token-file set (by name, sorted) with the shards that wrote a file of it."""
    found: dict[str, list[int]] = {}
    for shard, listing in listings.items():
        for name in listing if listing is not None else {"": {}}:
            found.setdefault(name, []).append(shard)
    return dict(sorted(found.items()))


def _merged(fmt, settings, context: PhaseContext, name: str, shards: list[int], directory: Path) -> list:
    """The set's shard files merged into ``directory``: in shard order, or shuffled by the
    documents' keys across the whole run."""
    import numpy as np

    from ...tokens.files import merge, merge_by_keys

    directory.mkdir(parents=True, exist_ok=True)
    inputs = [token_file(context.layout, shard, name) for shard in shards]
    if not settings.shuffle:
        return merge(fmt, inputs, directory, settings.file_size)
    keys = [np.fromfile(keys_file(prefix), dtype="<u8") for prefix in inputs]
    return merge_by_keys(fmt, inputs, keys, directory, settings.file_size)


def _remove_stale_sets(directory: Path, names: set[str]) -> None:
    """Set directories an earlier merge wrote that this one has not (another partitioning)."""
    import shutil

    if "" not in names:
        for stale in directory.glob("part-*"):
            stale.unlink()
    for path in sorted(directory.rglob("*=*"), key=lambda p: len(p.parts), reverse=True):
        relative = str(path.relative_to(directory))
        if path.is_dir() and not any(name == relative or name.startswith(relative + "/") for name in names):
            shutil.rmtree(path)


def _upload(directory: Path, place: StorePlace) -> None:
    """The merged files, each uploaded whole and then removed here, the manifest last (so a
    manifest names only files that are there); objects of an earlier merge that this one no
    longer has are removed."""
    files = sorted((path for path in directory.rglob("*") if path.is_file()), key=lambda path: path.name == MANIFEST)
    names = {str(path.relative_to(directory)) for path in files}
    for path in files:
        place.upload(path, str(path.relative_to(directory)))
        path.unlink()
    for stale in place.names():
        if stale not in names:
            place.remove(stale)
