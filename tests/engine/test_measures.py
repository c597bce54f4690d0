"""Each measure of a deal declared once (`measures.MEASURES`), and what carries one holds to
the declaration: a deal's record, the reference engine's result, the kernel's arrays, the
records' schema, docs/results.md's table of columns, and the values a sweep records (each in
its range where defined, null exactly where not)."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import polars as pl
import pytest

from pipeline.engine import kernel, measures, reference
from pipeline.engine.record import DealRecord
from pipeline.records import schema
from pipeline.sweep import config as sweep_config

DOCS = Path(__file__).resolve().parents[2] / "docs" / "results.md"


def test_a_deal_record_has_a_field_per_measure_in_their_order():
    assert tuple(f.name for f in fields(DealRecord)) == measures.NAMES


def test_the_engines_give_every_measure():
    given = {f.name for f in fields(reference.DealResult)} | set(dir(reference.DealResult))
    assert set(measures.NAMES) <= given
    arrays = {name for measure in measures.MEASURES for name in measure.kernel}
    assert arrays <= set(kernel.RESULT_FIELDS)


def test_the_schema_has_a_column_per_measure_of_its_type_and_nullability():
    for measure in measures.MEASURES:
        field = schema.DEAL_WRITE_SCHEMA.field(measure.name)
        assert str(field.type) == {"float32": "float"}.get(measure.dtype, measure.dtype)
        assert field.nullable == measure.nullable, measure.name


def test_the_docs_table_of_columns_says_what_the_declarations_say():
    rows = re.findall(r"^\| `(\w+)` \| (\w+) \| (yes|no) \|", DOCS.read_text(), re.MULTILINE)
    documented = {name: (dtype, nullable == "yes") for name, dtype, nullable in rows}
    for measure in measures.MEASURES:
        assert documented[measure.name] == (measure.dtype, measure.nullable), measure.name


@pytest.fixture(scope="module")
def rows():
    """The kernel's rows of 2,000 deals of every built-in cell, as the records hold them."""
    config = sweep_config.from_dict(
        {"name": "m", "seed": 5, "deals": 2000, "grid": sweep_config.FULL_GRID, "output": "x"}
    )
    cells = list(config.cells)
    results = kernel.play(config.seed, config.first, config.deals, cells)
    return pl.from_arrow(schema.deal_table(config.seed, config.first, results, cells))


@pytest.mark.parametrize("measure", measures.MEASURES, ids=lambda m: m.name)
def test_a_measure_is_in_its_range_where_defined_and_null_elsewhere(rows, measure):
    rescue = pl.col("variant").is_in(["watch", "one_swap", "exchange"])
    defined = {
        measures.EVERY: pl.lit(True),
        measures.RESCUE: rescue & (pl.col("down_at_stop") > 0),  # a rescue needs cards down
        measures.PLAY_OUT: pl.col("variant") == "play_out",
    }[measure.defined]
    column = pl.col(measure.name).cast(pl.Float64)
    checked = rows.select(
        wrongly_null=(defined & column.is_null()).sum(),
        wrongly_set=(~defined & column.is_not_null()).sum(),
        low=column.min(),
        high=column.max(),
    ).row(0, named=True)
    assert checked["wrongly_null"] == 0 and checked["wrongly_set"] == 0, checked
    assert measure.low <= checked["low"] and checked["high"] <= measure.high, checked
