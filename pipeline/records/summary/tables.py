"""The summary tables' schemas, their version, and tables of several parts added up.

Version ``SUMMARY_SCHEMA_VERSION``; a change of tables, columns or meaning is a new version.
Each table is the labels of a cell (`labels`), the keys of its counts, and the counts
(`counters.TABLES`). Tables of several batches or shards simply add up: sum ``n`` (and the
pair counts) over equal keys (`combine`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import pyarrow as pa

from pipeline.engine import rules
from pipeline.records.summary.counters import TABLES, VALUE_TYPES
from pipeline.records.summary.labels import LABEL_COLUMNS, label_column_field

SUMMARY_SCHEMA_VERSION = "clocksweep-summary/2"


def _schema(table: str, strategies: tuple[str, ...]) -> pa.Schema:
    keys, counts = TABLES[table]
    if table == "pairs":
        fields = [label_column_field(column, strategies) for column in keys]
    else:
        fields = [label_column_field(column, strategies) for column in LABEL_COLUMNS]
        fields += [pa.field(column, VALUE_TYPES[column]) for column in keys]
    fields += [pa.field(column, pa.int64()) for column in counts]
    return pa.schema(fields)


@functools.cache
def schemas(strategies: tuple[str, ...] = rules.STRATEGIES) -> dict[str, pa.Schema]:
    """The summary tables' schemas, their strategy label over ``strategies``."""
    return {table: _schema(table, strategies) for table in TABLES}


# The schemas of a sweep of the built-in strategies only.
SCHEMAS: dict[str, pa.Schema] = schemas()


def combine(
    parts: Iterable[dict[str, pa.Table]], strategies: tuple[str, ...] = rules.STRATEGIES
) -> dict[str, pa.Table]:
    """Summary tables of several batches or shards added up into one set (sums over keys),
    their strategy label over ``strategies`` (those the parts' are over)."""
    import polars as pl

    parts = list(parts)
    out = {}
    for table, (keys, counts) in TABLES.items():
        pieces = [part[table] for part in parts if table in part]
        if not pieces:
            out[table] = schemas(strategies)[table].empty_table()
            continue
        frame = pl.concat([pl.from_arrow(piece) for piece in pieces], how="vertical")
        group = list(LABEL_COLUMNS) + list(keys) if table != "pairs" else list(keys)
        summed = frame.group_by(group).agg(pl.col(list(counts)).sum()).sort(group, nulls_last=False)
        out[table] = summed.to_arrow().cast(schemas(strategies)[table])
    return out
