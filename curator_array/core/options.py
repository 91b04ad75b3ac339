"""What a run option is: its flag, variable, kind, bounds, default and help, and how a value
of it is read. Plain data, so that whatever brings an option declares it where it lives: the
run's own table (``run.option_table``), a filter of the default pipeline
(``pipelines.filters``), a phase and its settings (``run.phases``). The table gathers them.

The variable of an option is its flag in capitals with ``_`` for ``-`` (``--min-words`` →
``MIN_WORDS``); options about how a run executes rather than what it computes (this start,
Ray, several nodes, what the host has installed and how its helper processes run) take the
``CURATOR_ARRAY_`` prefix (``--num-cpus`` → ``CURATOR_ARRAY_NUM_CPUS``). A few keep another
tool's name (``variable_name``: ``RAY_ADDRESS``); names from before the rule are still read,
with a warning (``old_variables``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .option_kinds import (  # noqa: F401 (the options' API)
    KINDS,
    Kind,
    absolute,
    names_given_twice,
    parse_bool,
    show_size,
    split_named,
)

# Kinds whose values are paths, joined with os.pathsep in a variable.
PATH_LISTS = tuple(name for name, kind in KINDS.items() if kind.separator != ",")
# Kinds whose files submit copies into the checkpoint.
FILE_KINDS = tuple(name for name, kind in KINDS.items() if kind.copies_files)
SCOPES = ("run", "start")
EXECUTION_GROUPS = ("start", "ray", "nodes", "host")
PREFIX = "CURATOR_ARRAY_"


@dataclass(frozen=True)
class RunOption:
    """One option. ``kind`` names how a value is read, shown and declared: one of ``KINDS``
    (``core.option_kinds``, which says what each is).

    ``default`` is the value without a flag or a variable: whoever declares the option takes
    it from the field the option sets (``sets``: a field of a phase's settings, when it is
    not named as the option).
    """

    name: str
    help: str
    kind: str = "text"
    group: str = "input"
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    minimum_open: bool = False
    metavar: str | None = None
    required: bool = False
    default: Any = None
    default_text: str | None = None  # shown in --help instead of the default value
    hint: str | None = None  # added to the message about a value that is not a choice
    fetch: Callable[[str], bytes] | None = None  # file-or-name: the file's content of a name
    sets: str | None = None  # the settings field the option sets, when not its own name
    flag_name: str | None = None  # the flag without its dashes, when not the name's
    variable_name: str | None = None  # a variable that is not the flag's: another tool's (RAY_ADDRESS)
    old_variables: tuple[str, ...] = ()  # names it had before the naming rule: still read, with a warning
    pipelines: tuple[str, ...] = ()  # the built-in pipelines that use it ("default" for read, filters, write); () all
    # The value for a request pinned before the option existed, when not its default: what
    # that run did (a retry must not change it).
    before_it_existed: Any = None
    # Another default with a built-in pipeline (pipeline → value), for a new request only: a
    # pinned one keeps what it resolved to.
    pipeline_defaults: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"option {self.name}: unknown kind {self.kind!r}")

    @property
    def field(self) -> str:
        return self.sets or self.name

    @property
    def flag(self) -> str:
        return "--" + (self.flag_name or self.name.replace("_", "-"))

    @property
    def variable(self) -> str:
        if self.variable_name:
            return self.variable_name
        plain = self.flag[2:].replace("-", "_").upper()
        return PREFIX + plain if self.group in EXECUTION_GROUPS else plain

    @property
    def scope(self) -> str:
        return "start" if self.group == "start" else "run"

    @property
    def default_shown(self) -> str:
        """The default as ``--help`` and the docs show it."""
        value = self.default
        if self.default_text:
            return self.default_text
        if value is None or value is False or value == ():
            return ""
        return self.show(value)

    @property
    def behaviour(self) -> Kind:
        """The object that reads, shows and declares this option's values."""
        return KINDS[self.kind]

    def parse(self, text: str) -> Any:
        """The value of ``text`` as this option reads it, local paths made absolute; ValueError
        says what is wrong."""
        return self.with_absolute_paths(self.behaviour.parse(self, text))

    def with_absolute_paths(self, value: Any) -> Any:
        """``value`` with its local paths absolute (see ``absolute``), whichever way it was given."""
        return value if value is None else self.behaviour.absolute(value)

    def show(self, value: Any) -> str:
        """The value as a user would write it in the variable."""
        return self.behaviour.show(self, value)
