"""Record mode ``summary``: a shard's results as counts, from which every report figure follows.

A per-deal sweep writes one row per deal x cell; a summary sweep writes, per batch of
deals, the counts of identical records instead, so that a billion-deal sweep stays a few
megabytes. `summarise(results, cells)` turns the kernel's arrays (``kernel.RESULT_FIELDS``,
shaped (cells, deals)) into six tables; the report reads per-deal results by turning each
shard's rows into the same tables (`ShardSummary`; the ``facts`` table it reads as written),
so both record modes give the same figures by construction. Tables of several batches or
shards simply add up (`combine`).

The package, a module an idea:

- `labels`: the label columns (a cell's axes, as Polars writes an Enum) and the cell a row
  batch's labels name;
- `counters`: each table's columns, and the dense tallies records are counted into (the one
  pass of numba that counts rows, and the tallies read back as tables);
- `tables`: the schemas, the version, and tables of several parts added up;
- `pairs`, `blocks`, `facts`: the tables of wins compared cell with cell, of wins in blocks
  of consecutive deals, and of facts of the deal;
- `shard`: a run of deals summarised, from a kernel batch or per-deal rows.

Bit packing, which the pairs share with a shard's ``wins`` table, is `records.bits`.
"""

from pipeline.records.summary.blocks import BLOCK, block_table, block_table_of
from pipeline.records.summary.counters import HINT_CODE, HINT_VALUES, OUTCOME, TABLES
from pipeline.records.summary.facts import FACT_RANGE, FactCounts
from pipeline.records.summary.labels import (
    LABEL_COLUMNS,
    POLARS_ENUM_KEY,
    LabelLut,
    batch_runs,
    cell_labels,
    label_code,
    label_code_lut,
    label_codes,
    label_column_field,
    label_field,
    label_names,
    strategy_names,
)
from pipeline.records.summary.pairs import (
    add_pair_sums,
    add_word_pair_sums,
    pair_counts,
    pair_table,
    pair_table_of,
)
from pipeline.records.summary.shard import KernelBatches, ShardSummary, summarise
from pipeline.records.summary.tables import SCHEMAS, SUMMARY_SCHEMA_VERSION, combine, schemas

__all__ = [
    "BLOCK",
    "FACT_RANGE",
    "HINT_CODE",
    "HINT_VALUES",
    "LABEL_COLUMNS",
    "OUTCOME",
    "POLARS_ENUM_KEY",
    "SCHEMAS",
    "SUMMARY_SCHEMA_VERSION",
    "TABLES",
    "FactCounts",
    "KernelBatches",
    "LabelLut",
    "ShardSummary",
    "add_pair_sums",
    "add_word_pair_sums",
    "batch_runs",
    "block_table",
    "block_table_of",
    "cell_labels",
    "combine",
    "label_code",
    "label_code_lut",
    "label_codes",
    "label_column_field",
    "label_field",
    "label_names",
    "pair_counts",
    "pair_table",
    "pair_table_of",
    "schemas",
    "strategy_names",
    "summarise",
]
