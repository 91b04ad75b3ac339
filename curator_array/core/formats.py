"""The catalog of file formats: names, suffixes, and where each one's reader and writer live.

Plain data, importable without pyarrow and below every layer that needs it: the file
source matches suffixes with it (``stages``), the CLI offers its names as choices, the
site scripts and docs/options.md list it, and ``formats`` loads the classes it names when
a pipeline is built. Adding a format is one module in ``curator_array/formats/`` and one
entry in ``FORMATS``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ConfigError

DEFAULT_FORMAT = "jsonl"


@dataclass(frozen=True)
class Format:
    """A format: its name, its suffixes, and ``module:Class`` of its reader and writer
    inside ``curator_array.formats``."""

    name: str
    suffixes: tuple[str, ...]
    reader: str | None = None
    writer: str | None = None
    description: str = ""
    reader_notes: str = ""
    writer_notes: str = ""

    def matches(self, filename: str) -> bool:
        return filename.endswith(self.suffixes)


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
