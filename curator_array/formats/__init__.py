"""The file formats curator-array reads and writes, in one registry.

A format is a name, the file suffixes that belong to it, and its reader and/or writer
class. The partitioning stage, the CLI's choices, the site scripts' comment and the
README all come from here. Adding a format is one new module in this package that
subclasses ``ReaderStage``/``WriterStage`` and calls :func:`register`, plus its name in
``_MODULES``.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..stages.io import ReaderStage, WriterStage


@dataclass(frozen=True)
class Format:
    name: str
    suffixes: tuple[str, ...]
    reader: type[ReaderStage] | None = None
    writer: type[WriterStage] | None = None
    description: str = ""

    def matches(self, filename: str) -> bool:
        return filename.endswith(self.suffixes)


_REGISTRY: dict[str, Format] = {}
_MODULES = ("jsonl", "parquet", "warc")


def register(fmt: Format) -> Format:
    _REGISTRY[fmt.name] = fmt
    return fmt


def _load() -> dict[str, Format]:
    """Import every format module once (each registers itself; importing one alone is fine)."""
    for module in _MODULES:
        importlib.import_module(f"{__name__}.{module}")
    return _REGISTRY


def input_formats() -> list[str]:
    return sorted(name for name, fmt in _load().items() if fmt.reader is not None)


def output_formats() -> list[str]:
    return sorted(name for name, fmt in _load().items() if fmt.writer is not None)


def get_format(name: str, role: str = "input") -> Format:
    """The format called ``name`` that can be read (``role="input"``) or written (``"output"``)."""
    names = input_formats() if role == "input" else output_formats()
    if name not in names:
        raise ConfigError(f"{role} file type {name!r} is not supported; use one of {', '.join(names)}")
    return _load()[name]


def reader_for(name: str, malformed: str = "fail") -> ReaderStage:
    return get_format(name, "input").reader(malformed)


def writer_for(name: str, output_dir: str | os.PathLike) -> WriterStage:
    return get_format(name, "output").writer(output_dir)
