"""The file formats curator-array reads and writes, one module each.

Each module subclasses ``stages.io.ReaderStage`` and/or ``WriterStage`` once; the catalog
that names them, their suffixes and their descriptions is ``core.formats`` (plain data, so
the CLI and the file source need no pyarrow). Here: the classes, loaded by name when a
pipeline is built.

May import: core, stages, storage.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING

from ..core.formats import (
    DEFAULT_FORMAT,
    FORMATS,
    Format,
    get_format,
    input_formats,
    output_formats,
)
from ..stages.defaults import MALFORMED_POLICIES

if TYPE_CHECKING:
    from ..stages.io import ReaderStage, WriterStage

__all__ = ["DEFAULT_FORMAT", "FORMATS", "Format", "get_format", "input_formats", "output_formats", "reader_class",
           "reader_for", "writer_class", "writer_for"]


def _load_class(reference: str | None):
    module, _, name = (reference or "").partition(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def reader_class(fmt: Format) -> type[ReaderStage]:
    return _load_class(fmt.reader)


def writer_class(fmt: Format) -> type[WriterStage]:
    return _load_class(fmt.writer)


def reader_for(name: str, malformed: str = MALFORMED_POLICIES[0], records_per_part: int | None = None) -> ReaderStage:
    """The reader of format ``name``; one that streams its files reads ``records_per_part`` records at a time."""
    cls = reader_class(get_format(name, "input"))
    return cls(malformed, records_per_part) if cls.streams and records_per_part else cls(malformed)


def writer_for(name: str, output_dir: str | os.PathLike) -> WriterStage:
    return writer_class(get_format(name, "output"))(output_dir)
