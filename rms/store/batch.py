"""The one form of a batch statement: the rows come in as one array parameter per column and
are turned back into rows by ``unnest``, so a batch of any size is one statement and one
commit. PostgreSQL plans each execution for the arrays it is given (``plan_cache_mode`` of
every RMS connection, :func:`rms.store.database.create_engine`), never with a cached generic
plan that assumes ten rows per array.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ARRAY, CTE, bindparam, column, func, select

# (column name, PostgreSQL type) for SQL text; (column name, SQLAlchemy type) for Core
TextColumns = Sequence[tuple[str, str]]
CoreColumns = Sequence[tuple[str, Any]]


def unnest_sql(columns: TextColumns, alias: str = "u", first: int = 1) -> str:
    """``SELECT * FROM unnest($1::<type>[], ...) AS <alias>(<names>)``: parameters ``$1..$n``
    (from ``$<first>`` when told) are the columns' arrays, in order."""
    arrays = ", ".join(f"${n}::{kind}[]" for n, (_, kind) in enumerate(columns, start=first))
    names = ", ".join(name for name, _ in columns)
    return f"SELECT * FROM unnest({arrays}) AS {alias}({names})"


def unnest_cte(columns: CoreColumns, cte_name: str = "batch") -> CTE:
    """The same rows for a Core statement: binds ``rows_<column>``, one array each (no bind is
    named after a column: Core would read it as a SET value of an UPDATE)."""
    arrays = [bindparam(f"rows_{name}", type_=ARRAY(kind)) for name, kind in columns]
    rows = (func.unnest(*arrays)
            .table_valued(*(column(name, kind) for name, kind in columns))
            .render_derived(name="rows"))
    return select(rows).cte(cte_name)


def batch_params(columns: CoreColumns, rows: Sequence[Sequence[Any]]) -> dict[str, list[Any]]:
    """The binds of :func:`unnest_cte` for ``rows`` (each a value per column, in order)."""
    return {f"rows_{name}": [row[index] for row in rows]
            for index, (name, _) in enumerate(columns)}
