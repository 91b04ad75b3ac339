"""How a run tokenizes its output: the tokenizer (pinned by digest), its end-of-text token,
the token file format and the largest file. Plain values, importable without the
tokenizer library: the tokenize options (``run.phases.tokenize``) take their defaults from
these fields, the pipeline fingerprint pins them, and the tokenize phases read them back
from ``run.json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from ..core.fingerprint import file_digest

TOKEN_FORMAT_NAMES = ("megatron", "datatrove")
GB = 10**9
DEFAULT_FILE_SIZE = 10 * GB
DEFAULT_MAX_SETS = 256
LATER_FIELDS = {"partition_by": (), "max_sets": DEFAULT_MAX_SETS, "shuffle": False,  # pinned only when not these
                "mix_digest": None, "rehydrate": None}


@dataclass(frozen=True)
class TokenizeSettings:
    """``tokenizer`` is its ``tokenizer.json`` (None when read back from a fingerprint, which
    pins its ``digest`` instead of a path); ``eos_token`` None means the tokenizer's own
    end-of-text token; ``file_size`` bounds each merged token file, in bytes."""

    tokenizer: str | None
    digest: str
    eos_token: str | None = None
    format: str = TOKEN_FORMAT_NAMES[0]
    file_size: int = DEFAULT_FILE_SIZE
    # Added later: at these values a run writes what runs pinned before them wrote, and they are
    # then left out of the fingerprint. A new run shuffles unless told not to (``from_options``).
    partition_by: tuple[str, ...] = ()
    max_sets: int = DEFAULT_MAX_SETS
    shuffle: bool = False
    shuffle_seed: int = 0
    mix: str | None = None  # the --mix file (not pinned: its digest is)
    mix_digest: str | None = None
    rehydrate: str | None = None  # cluster-size ranges → copies (``tokens.sets.parse_rehydration``)

    def __post_init__(self) -> None:
        if self.format not in TOKEN_FORMAT_NAMES:
            raise ValueError(f"token format {self.format!r} is not one of {', '.join(TOKEN_FORMAT_NAMES)}")
        if self.file_size < 1:
            raise ValueError(f"the token file size must be at least 1 byte, got {self.file_size}")

    def to_json(self) -> dict[str, Any]:
        """What the pipeline fingerprint pins: everything but the path (another mount point is
        the same run); a field added later only when it changes what is written."""
        pinned = {item.name: getattr(self, item.name) for item in fields(self) if item.name not in ("tokenizer", "mix")}
        for name, unchanged in LATER_FIELDS.items():
            if pinned[name] == unchanged:
                del pinned[name]
        if not self.shuffle:
            del pinned["shuffle_seed"]
        if "partition_by" in pinned:
            pinned["partition_by"] = list(self.partition_by)
        return pinned

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> TokenizeSettings:
        read = {f.name: payload[f.name] for f in fields(cls) if f.name in payload and f.name not in ("tokenizer", "mix")}
        return cls(None, **{**read, "partition_by": tuple(read.get("partition_by", ()))})

    @classmethod
    def field_defaults(cls) -> dict[str, Any]:
        defaults = {item.name: None if item.default is MISSING else item.default for item in fields(cls)
                    if item.name != "digest"}
        return {**defaults, "shuffle": None}  # unset: a new run shuffles

    @classmethod
    def from_options(cls, given: Mapping[str, Any]) -> TokenizeSettings:
        """The settings the run options give, by field; the tokenizer file is read for its
        digest (a name on the Hub is fetched by ``submit`` first)."""
        tokenizer = given["tokenizer"]
        path = Path(tokenizer)
        if not path.is_file():
            raise ConfigError(f"--tokenize {tokenizer}: no such file (a tokenizer's name on the Hugging Face Hub is "
                              "fetched by `curator-array submit` on the login node; to run here, give its "
                              "tokenizer.json)")
        values = {name: value for name, value in given.items() if name != "tokenizer"}
        values["shuffle"] = values.get("shuffle") is not False
        values["partition_by"] = tuple(values.get("partition_by") or ())
        if values.get("rehydrate"):
            from .sets import parse_rehydration

            try:
                parse_rehydration(values["rehydrate"])
            except ValueError as problem:
                raise ConfigError(f"--rehydrate {values['rehydrate']}: {problem}") from None
            if not values["shuffle"]:
                raise ConfigError("--rehydrate with --no-token-shuffle: a document's copies would sit side by side; "
                                  "the shuffle spreads them")
        if values.get("mix"):
            from .mix import Mixture

            Mixture.read(values["mix"])  # refused at submit, not when the last phase starts
            values["mix_digest"] = file_digest(values["mix"])
        return cls(str(path), file_digest(path), **values)
