"""How each kind of run option reads, shows and declares its values: one object per kind.

A ``RunOption`` names its kind (``kind="size"``); everything that depends on it lives here,
once: how a text (a flag's or a variable's) is read and checked, how a value is written back
into a variable, which of its paths are made absolute, whether the flag may be repeated and
whether submit copies its files into the checkpoint, and what ``click`` is told about it.
The command line passes its ``click`` module in (``click_settings``): the core imports the
standard library only.
"""

from __future__ import annotations

import os
import re
from typing import Any, Protocol


class RunOption(Protocol):
    """What a kind reads of the option it serves (``options.RunOption`` is one)."""

    kind: str
    choices: tuple[str, ...]
    minimum: float | None
    maximum: float | None
    minimum_open: bool
    hint: str | None
    default: Any

    @property
    def default_shown(self) -> str: ...

    def parse(self, text: str) -> Any: ...

# The name in a NAME=VALUE value: it names a column of the output, so it is one.
VALUE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Units a size may be given in: 10G is 10**10 bytes, 10GiB 10 * 2**30.
SIZE_UNITS = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30,
              "TIB": 2**40}
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


def bounded(option: RunOption, value: float) -> float:
    """``value`` within the option's bounds; ValueError naming the bound otherwise."""
    low, high = option.minimum, option.maximum
    shown = (lambda bound: show_size(int(bound))) if option.kind == "size" else (lambda bound: f"{bound:g}")
    if low is not None and (value <= low if option.minimum_open else value < low):
        raise ValueError(f"must be {'above' if option.minimum_open else 'at least'} {shown(low)}")
    if high is not None and value > high:
        raise ValueError(f"must be at most {shown(high)}")
    return value


def _an_existing_file(value: str) -> str:
    if not os.path.isfile(value):
        raise ValueError(f"{value} is not a file")
    return value


class Kind:
    """A plain text (``text``): the base every kind refines."""

    name = "text"
    separator = ","  # between the items of a tuple value, in a variable
    copies_files = False  # submit copies its files into the checkpoint
    repeatable = False  # the flag may be given several times (the value is a tuple)
    negatable = False  # the flag has a --no- form
    named = False  # each value is NAME=VALUE

    def parse(self, option: RunOption, text: str) -> Any:
        if not text.strip():
            raise ValueError("empty")
        return text

    def absolute(self, value: Any) -> Any:
        """``value`` with its local paths absolute (only the kinds of paths have any)."""
        return value

    def show(self, option: RunOption, value: Any) -> str:
        """The value as a user would write it in the variable."""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (tuple, list)):
            return self.separator.join(str(v) for v in value)
        return "" if value is None else str(value)

    def click_settings(self, option: RunOption, click) -> dict[str, Any]:
        """What ``click.option`` is told about the option, beyond its help, flag and variable."""
        return {"type": None, **self._default(option)}

    @staticmethod
    def _default(option: RunOption) -> dict[str, Any]:
        if option.default is None:
            return {}
        return {"default": option.default, "show_default": option.default_shown or True}

    def parsed_by_the_table(self, option: RunOption, click):
        """A click type that reads a value as ``parse`` does (sizes with units, named values)."""

        class ParsedBy(click.ParamType):
            name = self.name

            def convert(self, value, param, ctx):
                if not isinstance(value, str):
                    return value
                try:
                    return option.parse(value)
                except ValueError as problem:
                    self.fail(str(problem), param, ctx)

        return ParsedBy()


class Flag(Kind):
    """On or off; off unless given."""

    name = "flag"

    def parse(self, option, text):
        return parse_bool(text)

    def click_settings(self, option, click):
        return {"is_flag": True}


class Switch(Flag):
    """``--name/--no-name``; unset means "decide for me"."""

    name = "switch"
    negatable = True

    def click_settings(self, option, click):
        return {"default": None}


class Integer(Kind):
    name = "int"

    def parse(self, option, text):
        try:
            return bounded(option, int(text.strip()))
        except ValueError as exc:
            raise ValueError(str(exc) if "must be" in str(exc) else "not an integer") from None

    def click_settings(self, option, click):
        low, high = option.minimum, option.maximum
        kind = click.IntRange(min=low, max=high) if low is not None or high is not None else int
        return {"type": kind, **self._default(option)}


class Number(Kind):
    name = "float"

    def parse(self, option, text):
        try:
            return bounded(option, float(text.strip()))
        except ValueError as exc:
            raise ValueError(str(exc) if "must be" in str(exc) else "not a number") from None

    def click_settings(self, option, click):
        low, high = option.minimum, option.maximum
        kind = (click.FloatRange(min=low, max=high, min_open=option.minimum_open)
                if low is not None or high is not None else float)
        return {"type": kind, **self._default(option)}


class Size(Kind):
    """A number of bytes, with an optional unit (``10G``, ``512MiB``)."""

    name = "size"

    def parse(self, option, text):
        found = re.fullmatch(r"(\d+)\s*([A-Z]*)", text.strip().upper())
        unit = found.group(2) if found else None
        if unit is not None and unit not in SIZE_UNITS and unit.endswith("B"):
            unit = unit[:-1]
        if unit not in SIZE_UNITS:
            raise ValueError("not a size (bytes, or a number with K, M, G, T, KiB, MiB, GiB, TiB)")
        return bounded(option, int(found.group(1)) * SIZE_UNITS[unit])

    def show(self, option, value):
        return show_size(value) if isinstance(value, int) and not isinstance(value, bool) else super().show(option,
                                                                                                           value)

    def click_settings(self, option, click):
        return {"type": self.parsed_by_the_table(option, click), **self._default(option)}


class Choice(Kind):
    name = "choice"

    def parse(self, option, text):
        raw = text.strip()
        if raw not in option.choices:
            raise ValueError(f"not one of {', '.join(option.choices)}" + (f" ({option.hint})" if option.hint else ""))
        return raw

    def click_settings(self, option, click):
        return {"type": click.Choice(option.choices), **self._default(option)}


NONE = "none"


class Choices(Kind):
    """One or more of the choices, comma-separated (``paragraphs,fuzzy``), kept as that text;
    ``none`` for none of them (where a pipeline's default has some)."""

    name = "choices"

    def parse(self, option, text):
        if text.strip() == NONE:
            return NONE
        given = [item.strip() for item in text.strip().split(",") if item.strip()]
        for item in given or [""]:
            if item not in option.choices:
                raise ValueError(f"{item!r} is not one of {', '.join(option.choices)}"
                                 + (f" ({option.hint})" if option.hint else ""))
        twice = names_given_twice(tuple(given))
        if twice:
            raise ValueError(f"{', '.join(twice)} given twice")
        return ",".join(given)

    def click_settings(self, option, click):
        return {"type": self.parsed_by_the_table(option, click), **self._default(option)}


class TextList(Kind):
    """A comma-separated list."""

    name = "list"

    def parse(self, option, text):
        return tuple(item.strip() for item in text.strip().split(",") if item.strip())

    def click_settings(self, option, click):
        return {"callback": lambda ctx, param, value: self.parse(option, value or "")}


class Path(Kind):
    """A directory or a URL; local paths made absolute."""

    name = "path"

    def absolute(self, value):
        return None if value is None else absolute(value)

    def click_settings(self, option, click):
        return {"type": click.Path(file_okay=False), **self._default(option)}


class File(Path):
    """A file that must exist, copied into the checkpoint when a run is submitted."""

    name = "file"
    copies_files = True

    def parse(self, option, text):
        super().parse(option, text)
        return _an_existing_file(text)

    def click_settings(self, option, click):
        return {"type": click.Path(exists=True, dir_okay=False), **self._default(option)}


class FileOrName(File):
    """A file, or a name ``submit`` fetches on the login node (a tokenizer on the Hugging Face Hub)."""

    name = "file-or-name"

    def parse(self, option, text):
        Kind.parse(self, option, text)
        if not os.path.isfile(text) and (
                os.path.exists(text) or text.startswith(("/", ".", "~")) or text.endswith(".json")):
            raise ValueError(f"{text} is not a file")
        return text

    def absolute(self, value):
        return absolute(value) if value is not None and os.path.isfile(value) else value  # a name stays a name

    def click_settings(self, option, click):
        return {"type": self.parsed_by_the_table(option, click), **self._default(option)}


class ExistingPaths(Kind):
    """One or more paths that must exist; the flag repeated, the variable's separated by ``os.pathsep``."""

    name = "existing-paths"
    separator = os.pathsep
    repeatable = True

    def parse(self, option, text):
        paths = tuple(p for p in text.split(os.pathsep) if p)
        missing = [p for p in paths if not os.path.exists(p)]
        if missing:
            raise ValueError(f"{missing[0]} does not exist")
        return paths

    def absolute(self, value):
        return None if value is None else tuple(map(absolute, value))

    def click_settings(self, option, click):
        return {"type": click.Path(exists=True), "multiple": True}


class Files(ExistingPaths):
    """One or more files, copied into the checkpoint when a run is submitted."""

    name = "files"
    copies_files = True

    def parse(self, option, text):
        paths = super().parse(option, text)
        for path in paths:
            _an_existing_file(path)
        return paths

    def click_settings(self, option, click):
        return {"type": click.Path(exists=True, dir_okay=False), "multiple": True}


class Named(Kind):
    """Values each given a name (``NAME=VALUE``), kept as that text; no name twice."""

    repeatable = True
    named = True
    shape = "NAME=VALUE"

    def read(self, option: RunOption, value: str) -> str:
        raise NotImplementedError

    def items(self, text: str) -> list[str]:
        return [item for item in text.split(",") if item.strip()]

    def split(self, item: str) -> tuple[str, str, str]:
        """An item's name, what joins it to its value (``=``; "" when nothing does), its value."""
        return item.partition("=")

    def parse(self, option, text):
        named = []
        for item in self.items(text):
            name, joiner, value = self.split(item.strip())
            if not joiner or not VALUE_NAME.match(name):
                raise ValueError(f"{item.strip()!r} is not {self.shape} (a name of letters, digits and _)")
            named.append(f"{name}{joiner}{self.read(option, value.strip())}")
        twice = names_given_twice(tuple(named))
        if twice:
            raise ValueError(f"{', '.join(twice)} given twice")
        return tuple(named)

    def click_settings(self, option, click):
        def joined(ctx, param, value):
            items = tuple(item for given in value for item in given)
            twice = names_given_twice(items)
            if twice:
                raise click.BadParameter(f"{', '.join(twice)} given twice", ctx, param)
            return items

        return {"type": self.parsed_by_the_table(option, click), "multiple": True, "callback": joined}


class NamedNumbers(Named):
    """Numbers within the bounds, each named (``NAME=0.5``); the variable's separated by commas."""

    name = "named-numbers"

    def read(self, option, value):
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"{value!r} is not a number") from None
        return repr(bounded(option, number))


class NamedBounds(NamedNumbers):
    """Lower bounds (``NAME=T``: at least T) and upper bounds (``NAME<=T``: at most T) of named
    numbers; a name may have one of each (a band)."""

    name = "named-bounds"
    shape = "NAME=T or NAME<=T"

    def split(self, item):
        if "<=" in item:
            return item.partition("<=")
        return super().split(item)


def split_bound(item: str) -> tuple[str, str, float]:
    """A bound as run options keep it: its name, ``>=`` or ``<=``, its number."""
    name, joiner, value = item.partition("<=") if "<=" in item else item.partition("=")
    return name, "<=" if joiner == "<=" else ">=", float(value)


class NamedFiles(Named):
    """Files, each named (``NAME=FILE``), copied into the checkpoint when a run is submitted."""

    name = "named-files"
    separator = os.pathsep
    copies_files = True

    def items(self, text):
        return [item for item in text.split(os.pathsep) if item]

    def read(self, option, value):
        return _an_existing_file(value)

    def absolute(self, value):
        return None if value is None else tuple(f"{name}={absolute(path)}" for name, path in map(split_named, value))


KINDS: dict[str, Kind] = {kind.name: kind for kind in (
    Kind(), Path(), File(), Files(), NamedFiles(), FileOrName(), ExistingPaths(), Integer(), Size(), Number(),
    NamedNumbers(), NamedBounds(), Flag(), Switch(), Choice(), Choices(), TextList())}
