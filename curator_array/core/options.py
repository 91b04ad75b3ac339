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

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

KINDS = ("text", "path", "file", "files", "named-files", "file-or-name", "existing-paths", "int", "size", "float",
         "named-numbers", "flag", "switch", "choice", "list")
# Kinds whose values are paths, joined with os.pathsep in a variable.
PATH_LISTS = ("existing-paths", "files", "named-files")
# Kinds whose files submit copies into the checkpoint.
FILE_KINDS = ("file", "files", "named-files", "file-or-name")
# The name in a NAME=VALUE value: it names a column of the output, so it is one.
VALUE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Units a size may be given in: 10G is 10**10 bytes, 10GiB 10 * 2**30.
SIZE_UNITS = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30,
              "TIB": 2**40}
SCOPES = ("run", "start")
EXECUTION_GROUPS = ("start", "ray", "nodes", "host")
PREFIX = "CURATOR_ARRAY_"
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})
BOOLEAN_HINT = "use 1/0, true/false, yes/no or on/off"


def parse_bool(text: str) -> bool:
    """A boolean as variables spell it; ValueError for anything else."""
    word = text.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ValueError(f"not a boolean ({BOOLEAN_HINT})")


def show_size(size: int) -> str:
    """A number of bytes as a size option reads it back, in the largest unit that divides it (``10G``)."""
    for unit in ("T", "G", "M", "K", "TiB", "GiB", "MiB", "KiB"):
        factor = SIZE_UNITS[unit.upper()]
        if size and size % factor == 0:
            return f"{size // factor}{unit}"
    return str(size)


def split_named(item: str) -> tuple[str, str]:
    """A named value as run options keep it (``NAME=VALUE``): its name and its value."""
    name, _, value = item.partition("=")
    return name, value


def names_given_twice(items: tuple[str, ...]) -> list[str]:
    """The names that more than one of the named ``items`` has, sorted."""
    names = [split_named(item)[0] for item in items]
    return sorted({name for name in names if names.count(name) > 1})


def absolute(path: str) -> str:
    """A local path as an absolute one (a URL as it is): a value pinned in the run, or put on an
    sbatch line, must not depend on the directory the job happens to start in."""
    if "://" in path:
        return path
    return os.path.abspath(os.path.expanduser(path))


@dataclass(frozen=True)
class RunOption:
    """One option. ``kind`` says how a value is read (see ``KINDS``).

    ``flag`` is an on/off flag, ``switch`` a ``--name/--no-name`` pair whose unset value
    means "decide for me", ``list`` a comma-separated list, ``existing-paths`` one or more
    paths that must exist (the flag may be repeated; the variable separates them with
    ``os.pathsep``), ``file`` a file that must exist, copied into the checkpoint when a run
    is submitted (so every element reads it, whatever its container mounts); ``files`` one or
    more such files (repeatable, like ``existing-paths``); ``named-files`` such files, each
    given a name (``NAME=FILE``); ``file-or-name`` likewise, or a name ``submit`` fetches on
    the login node (a tokenizer on the Hugging Face Hub); ``size`` a number of bytes, with an
    optional unit (``10G``, ``512MiB``); ``named-numbers`` numbers within the bounds, each
    given a name (``NAME=0.5``; the flag may be repeated, the variable separates them with
    commas). A named value is kept as its text, ``NAME=VALUE``.

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

    def parse(self, text: str) -> Any:
        """The value of ``text`` as this option reads it, local paths made absolute; ValueError
        says what is wrong."""
        return self.with_absolute_paths(self._parse(text))

    def with_absolute_paths(self, value: Any) -> Any:
        """``value`` with its local paths absolute (see ``absolute``), whichever way it was given."""
        if value is None or self.kind not in (*FILE_KINDS, "path", "existing-paths"):
            return value
        if self.kind in ("path", "file"):
            return absolute(value)
        if self.kind in ("files", "existing-paths"):
            return tuple(map(absolute, value))
        if self.kind == "named-files":
            return tuple(f"{name}={absolute(path)}" for name, path in map(split_named, value))
        return absolute(value) if os.path.isfile(value) else value  # file-or-name: a name stays a name

    def _parse(self, text: str) -> Any:
        raw = text.strip()
        if self.kind in ("flag", "switch"):
            return parse_bool(raw)
        if self.kind == "size":
            found = re.fullmatch(r"(\d+)\s*([A-Z]*)", raw.upper())
            unit = found.group(2) if found else None
            if unit is not None and unit not in SIZE_UNITS and unit.endswith("B"):
                unit = unit[:-1]
            if unit not in SIZE_UNITS:
                raise ValueError("not a size (bytes, or a number with K, M, G, T, KiB, MiB, GiB, TiB)")
            return self._bounded(int(found.group(1)) * SIZE_UNITS[unit])
        if self.kind == "int":
            try:
                return self._bounded(int(raw))
            except ValueError as exc:
                raise ValueError(str(exc) if "must be" in str(exc) else "not an integer") from None
        if self.kind == "float":
            try:
                return self._bounded(float(raw))
            except ValueError as exc:
                raise ValueError(str(exc) if "must be" in str(exc) else "not a number") from None
        if self.kind == "choice":
            if raw not in self.choices:
                raise ValueError(f"not one of {', '.join(self.choices)}" + (f" ({self.hint})" if self.hint else ""))
            return raw
        if self.kind == "list":
            return tuple(item.strip() for item in raw.split(",") if item.strip())
        if self.kind == "named-files":
            named = tuple(self._named(item, self._file) for item in text.split(os.pathsep) if item)
            return self._distinct(named)
        if self.kind == "named-numbers":
            named = tuple(self._named(item, self._number) for item in raw.split(",") if item.strip())
            return self._distinct(named)
        if self.kind in ("existing-paths", "files"):
            paths = tuple(p for p in text.split(os.pathsep) if p)
            missing = [p for p in paths if not os.path.exists(p)]
            if missing:
                raise ValueError(f"{missing[0]} does not exist")
            if self.kind == "files" and not all(map(os.path.isfile, paths)):
                raise ValueError(f"{next(p for p in paths if not os.path.isfile(p))} is not a file")
            return paths
        if not raw:
            raise ValueError("empty")
        if self.kind == "file" and not os.path.isfile(text):
            raise ValueError(f"{text} is not a file")
        if self.kind == "file-or-name" and not os.path.isfile(text) and (
                os.path.exists(text) or text.startswith(("/", ".", "~")) or text.endswith(".json")):
            raise ValueError(f"{text} is not a file")
        return text

    @staticmethod
    def _named(item: str, read) -> str:
        name, equals, value = item.strip().partition("=")
        if not equals or not VALUE_NAME.match(name):
            raise ValueError(f"{item.strip()!r} is not NAME=VALUE (a name of letters, digits and _)")
        return f"{name}={read(value.strip())}"

    @staticmethod
    def _distinct(named: tuple[str, ...]) -> tuple[str, ...]:
        twice = names_given_twice(named)
        if twice:
            raise ValueError(f"{', '.join(twice)} given twice")
        return named

    @staticmethod
    def _file(value: str) -> str:
        if not os.path.isfile(value):
            raise ValueError(f"{value} is not a file")
        return value

    def _number(self, value: str) -> str:
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"{value!r} is not a number") from None
        return repr(self._bounded(number))

    def _bounded(self, value: float) -> float:
        low, high = self.minimum, self.maximum
        if low is not None and (value <= low if self.minimum_open else value < low):
            raise ValueError(f"must be {'above' if self.minimum_open else 'at least'} {self._shown_bound(low)}")
        if high is not None and value > high:
            raise ValueError(f"must be at most {self._shown_bound(high)}")
        return value

    def _shown_bound(self, bound: float) -> str:
        return show_size(int(bound)) if self.kind == "size" else f"{bound:g}"

    def show(self, value: Any) -> str:
        """The value as a user would write it in the variable."""
        if isinstance(value, bool):
            return "true" if value else "false"
        if self.kind == "size" and isinstance(value, int):
            return show_size(value)
        if isinstance(value, (tuple, list)):
            return (os.pathsep if self.kind in PATH_LISTS else ",").join(str(v) for v in value)
        return "" if value is None else str(value)
