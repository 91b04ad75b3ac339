"""Reading a batch's language column: each row's language, else the default.

Every stage and phase that splits words or counts tokens by language asks here, so a row
without a ``language`` (a null, an empty code, or no such column at all) is read the same
way everywhere.
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
