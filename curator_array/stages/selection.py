"""Selection by an expression over the documents' columns: ``--where`` (SQL, run by DuckDB).

A tagged run (``--annotate``) keeps every document with its marks, measures and scores;
choosing from them is then a question over columns, and SQL's ``WHERE`` is the language data
engineers already write it in (``would_drop IS NULL AND dclm >= 0.018``). DuckDB reads the
batch's Arrow table in place and answers one boolean per row; a row whose answer is false or
NULL is dropped, as SQL's ``WHERE`` drops it.

The expression is parsed as one expression, never as a statement (a ``;`` or a second
statement is a syntax error), and DuckDB runs with file and network access switched off and
its configuration locked, so a subquery over ``read_csv('/etc/passwd')`` is refused too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.errors import ConfigError
from ..core.options import RunOption
from .defaults import TEXT_FIELD
from .filters import FilterStage
from .process_state import PerProcess

if TYPE_CHECKING:
    import pyarrow as pa

KEEP = "__curator_array_keep"


def _connection(_stage=None):
    import duckdb

    return duckdb.connect(config={"enable_external_access": False, "threads": 1, "lock_configuration": True})


def mask_of(connection, expression: str, table: pa.Table) -> pa.ChunkedArray:
    """``expression``'s answer for every row of ``table``, in row order (one thread keeps it)."""
    import duckdb

    try:
        answered = connection.from_arrow(table).project(f"({expression})::BOOLEAN AS {KEEP}").to_arrow_table()
    except duckdb.Error as error:
        raise ConfigError(f"--where {expression!r}: {_first_line(error)}") from None
    return answered.column(KEEP)


def check_expression(expression: str, schema: pa.Schema | None = None) -> None:
    """Refuse an expression DuckDB cannot parse, or (given the documents' ``schema``) one that
    names a column they do not have, before any element starts."""
    if not expression.strip():
        raise ConfigError("--where: the expression is empty")
    import duckdb

    try:
        duckdb.SQLExpression(expression)
    except duckdb.Error as error:
        raise ConfigError(f"--where {expression!r}: {_first_line(error)}") from None
    if schema is not None:
        mask_of(_connection(), expression, schema.empty_table())


def _first_line(error: Exception) -> str:
    lines = [line for line in str(error).splitlines() if line.strip()]
    return "; ".join(lines[:2])


class WhereFilter(FilterStage):
    """Keeps the rows for which the SQL expression ``where`` is true."""

    name = "where"
    pinned = ("where",)
    options = (RunOption("where", "Keep the documents for which this SQL expression over their columns is true (as "
                         "SQL's WHERE; DuckDB's dialect): e.g. \"would_drop IS NULL AND quality_bucket >= 15\". No file "
                         "or network access.", "text", "filters", metavar="EXPRESSION",
                         variable_name="SELECT_WHERE"),)
    connection = PerProcess(_connection)

    def __init__(self, where: str, text_field: str = TEXT_FIELD):
        check_expression(where)
        self.where = where
        super().__init__(text_field)

    @classmethod
    def from_options(cls, values, text_field):
        return cls(values["where"], text_field) if values.get("where") else None

    def score(self, table, text):
        return table, mask_of(self.connection, self.where, table)
