"""The file formats curator-array reads and writes: one catalog, one module per format.

The catalog below names each format, the file suffixes that belong to it, and where its
reader and writer classes live. It imports nothing heavy, so the CLI's choices, the file
source's suffix matching, the site scripts' comments and the format table of
docs/options.md all come from it without importing pyarrow; a class is imported when a
pipeline is built.
Adding a format is one module here that subclasses ``stages.io.ReaderStage`` and/or
``WriterStage``, and one entry in ``FORMATS``.

May import: core, stages.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..core.errors import ConfigError
from ..stages.defaults import MALFORMED_POLICIES

if TYPE_CHECKING:
    from ..stages.io import ReaderStage, WriterStage

DEFAULT_FORMAT = "jsonl"


@dataclass(frozen=True)
class Format:
    """A format: its name, its suffixes, and ``module:Class`` of its reader and writer."""

    name: str
    suffixes: tuple[str, ...]
    reader: str | None = None
    writer: str | None = None
    description: str = ""
    reader_notes: str = ""
    writer_notes: str = ""

    def matches(self, filename: str) -> bool:
        return filename.endswith(self.suffixes)

    def reader_class(self) -> type[ReaderStage]:
        return _load_class(self.reader)

    def writer_class(self) -> type[WriterStage]:
        return _load_class(self.writer)


def _load_class(reference: str | None):
    module, _, name = (reference or "").partition(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


FORMATS: dict[str, Format] = {
    fmt.name: fmt
    for fmt in (
        Format("jsonl", (".jsonl", ".jsonl.gz"), "jsonl:JsonlReader", "jsonl:JsonlWriter",
               "JSON Lines, plain or gzip on input", writer_notes="`.jsonl`"),
        Format("jsonl.gz", (".jsonl.gz",), "jsonl:JsonlReader", "jsonl:GzipJsonlWriter",
               "gzip-compressed JSON Lines", writer_notes="gzip, byte-identical on replay"),
        Format("parquet", (".parquet",), "parquet:ParquetReader", "parquet:ParquetWriter", "Apache Parquet",
               writer_notes="zstd"),
        Format("warc", (".warc", ".warc.gz"), "warc:WarcReader", None, "Web ARChive (response records with HTML)",
               reader_notes="HTML responses, streamed in parts"),
    )
}


def input_formats() -> list[str]:
    return sorted(name for name, fmt in FORMATS.items() if fmt.reader is not None)


def output_formats() -> list[str]:
    return sorted(name for name, fmt in FORMATS.items() if fmt.writer is not None)


def get_format(name: str, role: str = "input") -> Format:
    """The format called ``name`` that can be read (``role="input"``) or written (``"output"``)."""
    names = input_formats() if role == "input" else output_formats()
    if name not in names:
        raise ConfigError(f"{role} file type {name!r} is not supported; use one of {', '.join(names)}")
    return FORMATS[name]


def reader_for(name: str, malformed: str = MALFORMED_POLICIES[0]) -> ReaderStage:
    return get_format(name, "input").reader_class()(malformed)


def writer_for(name: str, output_dir: str | os.PathLike) -> WriterStage:
    return get_format(name, "output").writer_class()(output_dir)
