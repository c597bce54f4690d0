"""The per-deal Parquet encoder against the schema's own table, read back by three readers.

`dealfile` writes the rows of `schema.deal_table` without building them. Each test writes a
file with it and reads it back with pyarrow, Polars and DuckDB; every reader must give the rows
`schema.deal_table` gives for the same results, and pyarrow the stored schema and metadata.
Results come from the kernel (every kind of cell) and, to reach what the kernel rarely gives
(negative and full-range int8 values, hundreds of distinct hints, batches of 1 to 130 rows
about the encodings' block edges, deal numbers up to 2**64 - 1 and across 2**63), from a seeded
generator that keeps the kernel's conventions.
"""

from __future__ import annotations

import io
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.engine import kernel, rules
from pipeline.engine.rules import Cell
from pipeline.records import dealfile, parquet_encodings, parquet_format, schema
from pipeline.store import files
from pipeline.sweep import config as sweep_config

SEED = 424242
QUICK_CELLS = list(
    sweep_config.load(str(Path(__file__).parents[2] / "configs" / "quick.toml")).cells
)
METADATA = files.file_metadata({"config_hash": "h", "shard": {"index": 0}})
KINDS_OF_CELLS = {
    "standard": [Cell()],
    "play_out": [Cell("play_out")],
    "watch": [Cell("watch", "most")],
    "exchange-top": [Cell("exchange", "informed", finale="up", depth="top")],
    "standard+play_out": [Cell(), Cell("play_out", order="packets")],
    "one_swap+exchange": [Cell("one_swap", "random"), Cell("exchange", "fewest", depth="bottom")],
    "quick.toml": QUICK_CELLS,
}


def encoded(seed: int, batches: list[tuple[int, dict]], cells) -> bytes:
    """A file of ``batches`` of (first deal, results), one row group each."""
    sink = io.BytesIO()
    encoder = dealfile.DealFileEncoder(sink, schema.DEAL_WRITE_SCHEMA, rules.AXES, METADATA)
    for first, results in batches:
        encoder.write_batch(seed, first, results, cells)
    encoder.close()
    return sink.getvalue()


def reference(seed: int, batches: list[tuple[int, dict]], cells) -> pa.Table:
    """The same rows by `schema.deal_table`, batch by batch."""
    return pa.concat_tables(
        [schema.deal_table(seed, first, results, cells) for first, results in batches]
    )


def plain(frame: pl.DataFrame) -> pl.DataFrame:
    """Labels as strings (DuckDB gives strings, the others dictionaries), rows in file order."""
    return frame.with_columns(pl.col(list(schema.LABEL_COLUMNS)).cast(pl.String))


def assert_read_back(data: bytes, want: pa.Table, tmp_path: Path) -> None:
    table = pq.read_table(io.BytesIO(data))
    assert table.schema == files.expected_schemas("deals")["deals"]
    assert table.schema.metadata == METADATA
    assert table.num_rows == want.num_rows
    expected = plain(pl.from_arrow(want))
    assert plain(pl.from_arrow(table)).equals(expected)
    # Polars' own reader and DuckDB's, neither of which shares pyarrow's code.
    assert plain(pl.read_parquet(io.BytesIO(data))).equals(expected)
    path = tmp_path / "deals.parquet"
    path.write_bytes(data)
    from_duckdb = pl.from_arrow(duckdb.sql(f"select * from '{path}'").to_arrow_table())
    assert plain(from_duckdb).equals(expected)
    for field in table.schema:
        if not field.nullable:
            assert table.column(field.name).null_count == 0, field.name


@pytest.mark.parametrize("cells", KINDS_OF_CELLS.values(), ids=KINDS_OF_CELLS.keys())
def test_kernel_results_read_back_as_the_schema_says(cells, tmp_path):
    """Cell lists where some columns are filled by every cell, by some, or by none."""
    batches = [
        (1000, kernel.play(SEED, 1000, 3000, cells)),
        (4000, kernel.play(SEED, 4000, 17, cells)),
    ]
    assert_read_back(encoded(SEED, batches, cells), reference(SEED, batches, cells), tmp_path)


def made_up_results(generator: np.random.Generator, cells, count: int) -> dict[str, np.ndarray]:
    """Results in the kernel's form with values it rarely or never gives, under its conventions:
    rescue fields are 0 but for cells with a rescue (and null where the pile is not positive),
    play_out's fields -1 but for play_out (and null where negative)."""
    shape = (len(cells), count)

    def int8(low: int, high: int) -> np.ndarray:
        return generator.integers(low, high, size=shape, endpoint=True).astype(np.int8)

    results = {
        "won": int8(0, 1),
        "cards_turned": int8(-128, 127),
        "down_at_stop": int8(0, 52),
        "rescue_pile": int8(-3, 12),
        "hint_num": int8(0, 127),
        "hint_den": int8(1, 127),
        "restarts": int8(-1, 127),
        "stray_deaths": int8(-1, 3),
    }
    for index, cell in enumerate(cells):
        if not cell.has_rescue:
            for name in ("rescue_pile", "hint_num", "hint_den"):
                results[name][index] = 0
        if cell.variant != "play_out":
            results["restarts"][index] = -1
            results["stray_deaths"][index] = -1
    return results


@pytest.mark.parametrize(
    "sizes, first",
    [
        ([1], 0),
        ([7, 8, 9], 2**64 - 24),  # up to the last deal number
        ([31, 32, 33], 2**63 - 40),  # across 2**63, where a signed view of the numbers wraps
        ([127, 128, 129, 130], 12345),
        ([5000, 1], 2**64 - 5001),
    ],
)
def test_made_up_results_at_block_edges(sizes, first, tmp_path):
    generator = np.random.default_rng(sum(sizes))
    cells = [
        Cell(),
        Cell("one_swap", "oracle"),
        Cell("play_out"),
        Cell("exchange", "most", depth="top"),
    ]
    batches = []
    for size in sizes:
        batches.append((first, made_up_results(generator, cells, size)))
        first += size
    assert_read_back(
        encoded(2**64 - 1, batches, cells), reference(2**64 - 1, batches, cells), tmp_path
    )


def test_hundreds_of_distinct_hints_and_equal_fractions(tmp_path):
    """The hint's dictionary holds each value once (1/2 and 2/4 are one entry), and its codes
    need more than 8 bits when there are more than 256 values."""
    generator = np.random.default_rng(7)
    cells = [Cell("one_swap", "random")]
    results = made_up_results(generator, cells, 20_000)
    results["rescue_pile"][:] = np.where(results["rescue_pile"] > 0, results["rescue_pile"], 1)
    results["hint_num"][0, :2] = (1, 2)
    results["hint_den"][0, :2] = (2, 4)
    batches = [(0, results)]
    data = encoded(SEED, batches, cells)
    assert_read_back(data, reference(SEED, batches, cells), tmp_path)
    # (pyarrow reads a float column's dictionary as values only; the encoder gives its own.)
    levels = np.ones(20_000, dtype=np.uint8)
    codes, numerators, denominators = parquet_encodings.fraction_codes(
        results["hint_num"][0], results["hint_den"][0], levels, 20_000
    )
    dictionary = numerators.astype(np.float32) / denominators.astype(np.float32)
    assert len(dictionary) == len(np.unique(dictionary)) > 256
    assert codes[0] == codes[1] and dictionary[codes[0]] == 0.5


def test_the_rules_names_are_each_label_dictionary():
    """A label column's dictionary is every name the rules have, in their order: the same
    codes in every file, whatever cells it holds."""
    cells = [Cell("exchange", "oracle", finale="up", depth="bottom", order="packets")]
    data = encoded(SEED, [(0, kernel.play(SEED, 0, 10, cells))], cells)
    table = pq.read_table(io.BytesIO(data), read_dictionary=list(schema.LABEL_COLUMNS))
    for name, names in rules.AXES.items():
        assert table.column(name).chunk(0).dictionary.to_pylist() == list(names)
    assert rules.AXES["variant"] == rules.VARIANTS


def test_same_results_same_bytes():
    """A file's bytes depend on its rows and their batches alone."""
    cells = QUICK_CELLS[:5]
    batches = [(7, kernel.play(SEED, 7, 500, cells))]
    assert encoded(SEED, batches, cells) == encoded(SEED, batches, cells)


def test_thrift_compact_encoding():
    """Field ids by delta (and long form past 15), zigzag varints, and long lists."""
    assert parquet_format.struct((1, "i32", 1)) == bytes([0x15, 0x02, 0x00])
    assert parquet_format.struct((1, "i32", -1), (20, "i64", 300)) == bytes(
        [0x15, 0x01, 0x06, 0x28, 0xD8, 0x04, 0x00]
    )
    assert parquet_format.struct((1, "bool", True), (2, "bool", False)) == bytes([0x11, 0x12, 0x00])
    long_list = parquet_format.struct((1, "list", ("i32", list(range(16)))))
    assert long_list[:3] == bytes([0x19, 0xF5, 0x10]) and long_list[-1] == 0


@pytest.mark.parametrize("spread", [0, 1, 2**20, 2**40, 2**62])
def test_delta_encoding_of_any_int64_sequence(spread):
    """The integer encoding on its own, for sequences the per-deal columns never hold (deltas
    of up to 64 bits, wrapping), in a one-column file that pyarrow reads back."""
    generator = np.random.default_rng(spread)
    values = generator.integers(-(2**63), 2**63 - 1, size=1, dtype=np.int64)
    steps = (
        generator.integers(-spread, spread, size=999, endpoint=True, dtype=np.int64)
        if spread
        else np.zeros(999, np.int64)
    )
    values = np.concatenate([values, steps]).cumsum(dtype=np.int64)  # wraps at 64 bits
    one_column = pa.schema([pa.field("v", pa.int64(), nullable=False)])
    sink = io.BytesIO()
    encoder = dealfile.DealFileEncoder(sink, one_column, {}, {})
    for part in np.array_split(values, [1, 3, 36, 165, 435]):  # blocks whole, short, of one delta
        encoder.write_row_group(
            [dealfile._integer_chunk(part, len(part), parquet_format.INT64)], len(part)
        )
    encoder.close()
    assert (
        pq.read_table(io.BytesIO(sink.getvalue())).column("v").to_numpy().tolist()
        == values.tolist()
    )


@pytest.mark.parametrize(
    "first, period, n",
    [
        (0, 1, 1),
        (2**64 - 1, 1, 300),  # a seed: one value over and over
        (12345, 250, 500),  # a batch's deal numbers for two cells
        (2**63 - 40, 129, 3 * 129),  # across 2**63, where the signed view wraps
        (2**64 - 33, 33, 4 * 33),  # up to the last deal number
        (7, 1000, 1000),
    ],
)
def test_counting_columns_are_encoded_as_if_made(first, period, n):
    """The seed and deal columns are encoded without making them: the bytes of the values
    made and encoded (whose blocks, deltas alone, are shared by every first)."""
    cycle = (np.uint64(first) + np.arange(period, dtype=np.uint64)).astype(np.uint64)
    made = parquet_encodings.delta_values(cycle, n)
    assert parquet_encodings.counting_values(first, period, n) == bytes(made)


def test_results_not_as_the_kernel_gives_them_are_refused():
    """The encoder trusts the kernel's conventions; what it can check cheaply, it refuses."""
    cells = [Cell(), Cell("watch", "most")]
    results = kernel.play(SEED, 0, 50, cells)
    encoder = dealfile.DealFileEncoder(io.BytesIO(), schema.DEAL_WRITE_SCHEMA, rules.AXES, METADATA)
    with pytest.raises(ValueError, match="results for 2 cells, but 1 cells given"):
        encoder.write_batch(SEED, 0, results, cells[:1])
    with pytest.raises(ValueError, match="not int8.*hint_den"):
        encoder.write_batch(
            SEED, 0, {**results, "hint_den": results["hint_den"].astype(np.uint8)}, cells
        )
