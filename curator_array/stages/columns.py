"""Reading a batch's columns as every stage reads them: each row's language, else the
default, and a text column that must be there.

Every stage and phase that splits words or counts tokens by language asks here, so a row
without a ``language`` (a null, an empty code, or no such column at all) is read the same
way everywhere; a batch without the text field fails its task with the same message,
naming its input files, whichever stage found it missing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from ..text.language import LANGUAGE_FIELD

if TYPE_CHECKING:
    import pyarrow as pa

Default = TypeVar("Default", str, None)


def row_languages(table: pa.Table, default: Default) -> list[str | Default]:
    """Each row's language code, else ``default``."""
    import pyarrow as pa

    if LANGUAGE_FIELD not in table.column_names:
        return [default] * table.num_rows
    return [code or default for code in table.column(LANGUAGE_FIELD).cast(pa.string()).to_pylist()]


def missing_field(task, field: str, stage: str, purpose: str = ""):
    """``task`` failed (a ``FailedTask`` naming its input files) when its batch has no column
    ``field``; None when it has."""
    if field in task.table.column_names:
        return None
    where = ", ".join(task.metadata.get("source_files", [])) or "input"
    return task.failed(f"no {field!r} field in {where}{' ' + purpose if purpose else ''}", stage)


def taken_field(task, fields, stage: str, advice: str):
    """``task`` failed when its batch already has a column named as one of ``fields`` (which
    the stage would write over); None when it has none. ``advice`` says how to avoid it."""
    name = next((name for name in fields if name in task.table.column_names), None)
    if name is None:
        return None
    where = ", ".join(task.metadata.get("source_files", [])) or "input"
    return task.failed(f"{where} already has a field {name!r}{advice}", stage)
