"""How a run tokenizes its output: the tokenizer (pinned by digest), its end-of-text token,
the token file format and the largest file. Plain values, importable without the
tokenizer library: the tokenize options (``run.phases.tokenize``) take their defaults from
these fields, the pipeline fingerprint pins them, and the tokenize phases read them back
from ``run.json``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ..core.errors import ConfigError
from ..core.file_digests import file_digest
from ..core.pinned_settings import PinnedSettings

TOKEN_FORMAT_NAMES = ("megatron", "datatrove")
GB = 10**9
DEFAULT_FILE_SIZE = 10 * GB
DEFAULT_MAX_SETS = 256
LATER_FIELDS = {"partition_by": (), "max_sets": DEFAULT_MAX_SETS, "shuffle": False,  # pinned only when not these
                "mix_digest": None, "rehydrate": None}


@dataclass(frozen=True)
class TokenizeSettings(PinnedSettings):
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

    # The path and the --mix file are not pinned (their digests are); a field added later only
    # when it changes what is written; unset, --token-shuffle means a new run shuffles.
    UNPINNED: ClassVar[tuple[str, ...]] = ("tokenizer", "mix")
    LATER: ClassVar[dict[str, Any]] = LATER_FIELDS
    READ_BACK: ClassVar[dict[str, Any]] = {"tokenizer": None}
    OPTION_DEFAULTS: ClassVar[dict[str, Any]] = {"shuffle": None}

    def left_out(self) -> set[str]:
        """A seed is pinned only for a run that shuffles."""
        return super().left_out() | ({"shuffle_seed"} if not self.shuffle else set())

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
