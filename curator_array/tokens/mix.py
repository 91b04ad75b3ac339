"""A mixture of token-file sets (``--mix FILE``): what share of training each set gets.

The file is TOML. Each set it names (``[sets."quality_bucket=19"]``) takes one of ``weight``
(a relative share), ``tokens`` (a token budget) or ``epochs`` (how many times its tokens: 0
drops it, 2.5 repeats it two and a half times); a set it does not name takes one epoch.
``total_tokens`` (optional) is what the training run draws in all; ``max_epochs`` (optional)
the most epochs any set may take. Everything becomes tokens drawn per set:

- epochs: ``epochs × tokens held``; a budget: ``tokens``;
- weights share what ``total_tokens`` leaves after the budgets and epochs (without
  ``total_tokens``, a mixture of weights alone shares by weight, and weights beside budgets
  or epochs are refused: they would have nothing to share).

A set's share is its tokens drawn over all drawn; its epochs are what that share of the
total (``total_tokens``, else all drawn) takes of the tokens it holds. Megatron samples each
prefix in proportion to its weight and repeats a prefix asked for more than it holds, so
the blend's weights are the shares, split among a set's files by their tokens.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomllib

from ..core.errors import ConfigError

WAYS = ("weight", "tokens", "epochs")


@dataclass(frozen=True)
class SetChoice:
    way: str  # one of WAYS
    value: float


@dataclass(frozen=True)
class Mixture:
    choices: dict[str, SetChoice]
    total_tokens: float | None = None
    max_epochs: float | None = None

    @classmethod
    def read(cls, path: str | Path) -> Mixture:
        """The mixture in the TOML file ``path``; ConfigError names what is wrong."""
        try:
            payload = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
            raise ConfigError(f"--mix {path}: {error}") from None
        return cls.of(payload, str(path))

    @classmethod
    def of(cls, payload: Mapping[str, Any], where: str = "--mix") -> Mixture:
        unknown = sorted(set(payload) - {"sets", "total_tokens", "max_epochs"})
        if unknown:
            raise ConfigError(f"--mix {where}: unknown key {unknown[0]!r} (the keys are sets, total_tokens, max_epochs)")
        choices = {}
        for name, entry in (payload.get("sets") or {}).items():
            given = [way for way in WAYS if way in (entry or {})]
            if not isinstance(entry, Mapping) or len(given) != 1 or set(entry) - set(WAYS):
                raise ConfigError(f"--mix {where}: set {name!r} takes one of weight, tokens or epochs")
            value = entry[given[0]]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or not math.isfinite(value):
                raise ConfigError(f"--mix {where}: set {name!r}: {given[0]} must be a number at least 0, got {value!r}")
            choices[name] = SetChoice(given[0], float(value))
        total, most = payload.get("total_tokens"), payload.get("max_epochs")
        for key, value in (("total_tokens", total), ("max_epochs", most)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                raise ConfigError(f"--mix {where}: {key} must be a number above 0, got {value!r}")
        weighted = [c for c in choices.values() if c.way == "weight"]
        if weighted and total is None and len(weighted) != len(choices):
            raise ConfigError(f"--mix {where}: weights beside budgets or epochs need total_tokens (what the weights "
                              "share)")
        return cls(choices, float(total) if total is not None else None, float(most) if most is not None else None)

    def blend(self, held: Mapping[str, int]) -> dict[str, dict[str, float]]:
        """Each set's tokens ``held`` → its drawn tokens, share and epochs; ConfigError for a
        set the mixture names that the run has not, or one asked for more epochs than allowed."""
        missing = sorted(set(self.choices) - set(held))
        if missing:
            raise ConfigError(f"--mix names the set {missing[0]!r}, which the run has not (its sets: "
                              f"{', '.join(sorted(held)) or 'none'})")
        drawn: dict[str, float] = {}
        weights = {name: c.value for name, c in self.choices.items() if c.way == "weight"}
        for name, tokens in held.items():
            choice = self.choices.get(name, SetChoice("epochs", 1.0))
            if choice.way == "epochs":
                drawn[name] = choice.value * tokens
            elif choice.way == "tokens":
                drawn[name] = choice.value
        if weights:
            left = (self.total_tokens - sum(drawn.values())) if self.total_tokens is not None else sum(weights.values())
            if left < 0:
                raise ConfigError(f"--mix: the budgets and epochs draw {sum(drawn.values()):,.0f} tokens, more than "
                                  f"total_tokens {self.total_tokens:,.0f}")
            scale = left / sum(weights.values()) if sum(weights.values()) else 0.0
            drawn.update({name: weight * scale for name, weight in weights.items()})
        everything = sum(drawn.values())
        if not everything:
            raise ConfigError("--mix: every set is drawn 0 tokens")
        total = self.total_tokens or everything
        blend = {}
        for name, tokens in sorted(held.items()):
            share = drawn[name] / everything
            epochs = share * total / tokens if tokens else 0.0
            if self.max_epochs is not None and epochs > self.max_epochs + 1e-9:
                raise ConfigError(f"--mix: set {name!r} holds {tokens:,} tokens and would be drawn {epochs:.2f} "
                                  f"epochs, more than max_epochs {self.max_epochs:g}")
            blend[name] = {"tokens": tokens, "drawn": share * total, "share": share, "epochs": epochs}
        return blend
