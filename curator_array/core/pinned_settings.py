"""What the settings of a run's later phases are: one declared base with one codec.

A group of later phases (dedup, tokenize, the quality phases, ...) is planned by one
settings value. It is built from the run options that set its fields (``from_options``),
pinned in the pipeline fingerprint under the phases' settings key (``to_json``) and read back
from ``run.json`` by every later start (``from_json``); the run options take their defaults
from it (``field_defaults``). The codec is written once, here, because a pinned value must
serialise exactly as runs already pinned it: a different spelling would refuse every such run
as changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, fields
from typing import Any, ClassVar


class PinnedSettings:
    """Base of a frozen dataclass of phase settings.

    ``UNPINNED`` names the fields the fingerprint leaves out (a file's path: another mount
    point is the same run); the others are pinned in their declared order, tuples as lists.
    ``LATER`` maps a field added after runs were pinned to the value that writes what those
    runs wrote: at that value it is left out, so their fingerprints stay as they were.
    ``READ_BACK`` gives the unpinned fields without a default their value in settings read
    back from a fingerprint. ``OPTION_DEFAULTS`` gives the default of an option that sets a
    field in another form than the field's own (``NAME=PATH`` items for a dict of digests).
    """

    UNPINNED: ClassVar[tuple[str, ...]] = ()
    LATER: ClassVar[Mapping[str, Any]] = {}
    READ_BACK: ClassVar[Mapping[str, Any]] = {}
    OPTION_DEFAULTS: ClassVar[Mapping[str, Any]] = {}

    @classmethod
    def pinned_names(cls) -> tuple[str, ...]:
        return tuple(item.name for item in fields(cls) if item.name not in cls.UNPINNED)

    def left_out(self) -> set[str]:
        """The pinned fields this value leaves out of its fingerprint."""
        return {name for name, unchanged in self.LATER.items() if getattr(self, name) == unchanged}

    def to_json(self) -> dict[str, Any]:
        left_out = self.left_out()
        return {name: _plain(getattr(self, name)) for name in self.pinned_names() if name not in left_out}

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> Any:
        """The settings a fingerprint pins; a field it leaves out takes its default."""
        tuples = {item.name for item in fields(cls) if isinstance(item.default, tuple)}
        read = {name: tuple(payload[name]) if name in tuples else payload[name]
                for name in cls.pinned_names() if name in payload}
        return cls(**{**cls.READ_BACK, **read})

    @classmethod
    def field_defaults(cls) -> dict[str, Any]:
        """The default of each option that sets a field, by the field's name (None: no default)."""
        return {**{item.name: _default(item) for item in fields(cls)}, **cls.OPTION_DEFAULTS}

    @classmethod
    def from_options(cls, given: Mapping[str, Any]) -> Any:
        """The settings the run options ``given`` (field → value) give; ConfigError names what is wrong."""
        raise NotImplementedError


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _default(item) -> Any:
    if item.default is not MISSING:
        return item.default
    return item.default_factory() if item.default_factory is not MISSING else None
