"""Tests of the summary records (pipeline/records/summary/) against the kernel's own arrays.

Every table is recomputed here the plain way (numpy over the kernel's (cells, deals)
arrays, one cell or pair at a time) and compared with `summarise`; per-deal rows in any order
(the report's path for `deals` records) must give the same tables as kernel batches; tables
of parts must add up to the tables of the whole.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from pipeline.engine import custom, kernel, pairing, row_tallies, rules
from pipeline.engine.rules import Cell
from pipeline.records import schema, summary

SEED = 97
COUNT = 2600  # 200 blocks of 13
CELLS = rules.all_cells()


@pytest.fixture(scope="module")
def results():
    return kernel.play(SEED, 1000, COUNT, CELLS)


@pytest.fixture(scope="module")
def tables(results):
    return summary.summarise(results, CELLS)


def frame(table: pa.Table) -> pl.DataFrame:
    return pl.from_arrow(table)


def rows_of(table: pa.Table, cell: Cell) -> list[dict]:
    out = []
    for row in frame(table).iter_rows(named=True):
        if all(row[name] == getattr(cell, name) for name in summary.LABEL_COLUMNS):
            out.append(row)
    return out


def hint_values(results, c):
    """The hint as the per-deal schema stores it: float32 num / den, None with no rescue."""
    num, den, pile = results["hint_num"][c], results["hint_den"][c], results["rescue_pile"][c]
    return [
        float(np.float32(n) / np.float32(d)) if p > 0 else None for n, d, p in zip(num, den, pile)
    ]


def test_schemas_and_enum_labels(tables):
    assert set(tables) == set(summary.TABLES)
    for name, table in tables.items():
        assert table.schema.equals(summary.SCHEMAS[name], check_metadata=False), name
    counts = frame(tables["counts"])
    assert counts.schema["variant"] == pl.Enum(list(rules.VARIANTS))
    assert counts.schema["hint"] == pl.Float32 and counts.schema["n"] == pl.Int64


@pytest.mark.parametrize("name", summary.LABEL_COLUMNS)
def test_label_fields_are_polars_own_export_of_an_enum(name):
    """The label fields are made without Polars (a worker is spared importing it): they must
    be the field Polars exports for an Enum of the rules' names, metadata and all."""
    exported = (
        pl.DataFrame({name: pl.Series([], dtype=pl.Enum(list(rules.AXES[name])))})
        .to_arrow()
        .schema.field(name)
    )
    assert summary.label_field(name).equals(exported, check_metadata=True)
    assert pl.from_arrow(
        pa.table({name: pa.array([], summary.label_field(name).type)}).cast(
            pa.schema([summary.label_field(name)])
        )
    ).schema[name] == pl.Enum(list(rules.AXES[name]))


def test_counts_match_the_kernel_cell_by_cell(results, tables):
    for c, cell in enumerate(CELLS):
        expected = Counter(
            zip(
                results["won"][c].astype(bool).tolist(),
                results["down_at_stop"][c].tolist(),
                hint_values(results, c),
                [r if r >= 0 else None for r in results["restarts"][c].tolist()],
                [s if s >= 0 else None for s in results["stray_deaths"][c].tolist()],
            )
        )
        got = Counter(
            {
                (r["won"], r["down_at_stop"], r["hint"], r["restarts"], r["stray_deaths"]): r["n"]
                for r in rows_of(tables["counts"], cell)
            }
        )
        assert got == expected, cell.label


def test_turned_and_piles_match_the_kernel(results, tables):
    for c, cell in enumerate(CELLS):
        won = results["won"][c].astype(bool).tolist()
        turned = Counter(zip(won, results["cards_turned"][c].tolist()))
        assert (
            Counter(
                {(r["won"], r["cards_turned"]): r["n"] for r in rows_of(tables["turned"], cell)}
            )
            == turned
        )
        piles = Counter(
            zip(won, [p if p > 0 else None for p in results["rescue_pile"][c].tolist()])
        )
        assert (
            Counter({(r["won"], r["rescue_pile"]): r["n"] for r in rows_of(tables["piles"], cell)})
            == piles
        )


def test_facts_match_the_kernel_on_standard_cells(results, tables):
    facts = frame(tables["facts"])
    assert set(facts["variant"].cast(pl.String).to_list()) == {"standard"}
    for c, cell in enumerate(CELLS):
        if cell.variant != "standard":
            continue
        expected = Counter(
            zip(
                results["won"][c].astype(bool).tolist(),
                results["kings_at_bottom"][c].tolist(),
                results["unvisited_at_third_king"][c].tolist(),
            )
        )
        got = Counter(
            {
                (r["won"], r["kings_at_bottom"], r["unvisited_at_third_king"]): r["n"]
                for r in rows_of(tables["facts"], cell)
            }
        )
        assert got == expected, cell.label
        # SPEC section 6: no standard win without a king at the bottom of an hour pile.
        assert not any(won and kings == 0 for won, kings, _ in got)


def test_pairs_match_the_kernel(results, tables):
    won = results["won"].astype(bool)
    pairs = frame(tables["pairs"])
    expected_pairs = pairing.pairs(CELLS)
    assert pairs.height == len(expected_pairs)
    index = {cell: i for i, cell in enumerate(CELLS)}
    for row in pairs.iter_rows(named=True):
        a = index[
            Cell(
                row["a_variant"], row["a_strategy"], row["a_finale"], row["a_order"], row["a_depth"]
            )
        ]
        b = index[
            Cell(
                row["b_variant"], row["b_strategy"], row["b_finale"], row["b_order"], row["b_depth"]
            )
        ]
        assert (a, b) in expected_pairs
        assert row["both"] == int(np.sum(won[a] & won[b]))
        assert row["a_only"] == int(np.sum(won[a] & ~won[b]))
        assert row["b_only"] == int(np.sum(~won[a] & won[b]))
        assert row["neither"] == int(np.sum(~won[a] & ~won[b]))


def test_pairs_are_same_layout_or_same_deal_numbers():
    pairs = pairing.pairs(CELLS)
    for a, b in pairs:
        x, y = CELLS[a], CELLS[b]
        assert a < b
        same_rules = (x.variant, x.strategy, x.finale, x.depth) == (
            y.variant,
            y.strategy,
            y.finale,
            y.depth,
        )
        assert x.order == y.order or same_rules
    per_order = sum(c.order == "round-robin" for c in CELLS)
    assert len(pairs) == 2 * per_order * (per_order - 1) // 2 + per_order


def test_blocks_match_the_kernel(results, tables):
    won = results["won"].astype(bool)
    for c, cell in enumerate(CELLS):
        wins = won[c][: COUNT // 13 * 13].reshape(-1, 13).sum(axis=1)
        expected = Counter(wins.tolist())
        assert Counter({r["wins"]: r["n"] for r in rows_of(tables["blocks"], cell)}) == expected


def deal_rows(results, first: int, order: np.ndarray):
    """The kernel's results as per-deal rows (via schema.deal_table), in the given row order."""
    table = schema.deal_table(SEED, first, results, CELLS).take(pa.array(order))
    cell_of = {cell: i for i, cell in enumerate(CELLS)}
    df = pl.from_arrow(table)
    labels = df.select(
        pl.concat_str(
            [pl.col(c).cast(pl.String).fill_null("-") for c in summary.LABEL_COLUMNS], separator="|"
        ).alias("key")
    )["key"]
    key_of = {
        "|".join(getattr(cell, c) or "-" for c in summary.LABEL_COLUMNS): i
        for cell, i in cell_of.items()
    }
    cells = labels.replace_strict(key_of, return_dtype=pl.Int64).to_numpy()
    fill = lambda name, value: df[name].fill_null(value).to_numpy()  # noqa: E731
    by_measure = {
        "won": df["won"].to_numpy(),
        "cards_turned": fill("cards_turned", 0),
        "down_at_stop": fill("down_at_stop", 0),
        "rescue_pile": fill("rescue_pile", 0),
        "hint": fill("hint", 0.0).astype(np.float32),
        "restarts": fill("restarts", -1),
        "stray_deaths": fill("stray_deaths", -1),
    }
    return cells, schema.DealColumns(df["deal"].to_numpy().astype(np.int64) - first, by_measure)


@pytest.mark.parametrize("shuffled", [False, True])
def test_per_deal_rows_give_the_same_tables(results, tables, shuffled):
    rows = len(CELLS) * COUNT
    order = np.random.default_rng(3).permutation(rows) if shuffled else np.arange(rows)
    cells, columns = deal_rows(results, 1000, order)
    shard = summary.ShardSummary(CELLS, 1000, COUNT)
    half = rows // 2  # in two pieces, as row batches come
    shard.add_rows(cells[:half], columns.taken(slice(None, half)))
    shard.add_rows(cells[half:], columns.taken(slice(half, None)))
    from_rows = shard.tables()
    # Per-deal rows do not carry the deal facts: a per-deal sweep counts them as it plays, with
    # the FactCounts that summarise uses (so that part only shows the two paths are one; the
    # facts themselves are held to the kernel by test_facts_match_the_kernel_on_standard_cells).
    assert from_rows.pop("facts").num_rows == 0
    facts = summary.FactCounts(CELLS)
    facts.add_results(results)
    for name, table in {**from_rows, "facts": facts.table()}.items():
        assert table.equals(tables[name]), name


def counted_by_the_kernel(cells, batches: int) -> dict[str, pa.Table]:
    """The tables of COUNT deals counted by the kernel as it plays them (a summary sweep's
    way), in ``batches`` equal batches."""
    counted = summary.KernelBatches(cells)
    size = COUNT // batches
    for b in range(batches):
        tallies = counted.kernel_tallies()
        won = kernel.play(SEED, 1000 + b * size, size, cells, None, tallies)["won"]
        assert won.shape == (len(cells), size)
        counted.add_wins(won)
    return counted.tables()


@pytest.mark.parametrize("batches", [1, 2])
def test_the_kernel_counts_what_its_rows_say(tables, batches):
    # Every cell of the rules (play_out's restarts, every hint, the facts), in one batch and
    # in two (whose tallies add up and whose blocks meet at a block's boundary).
    counted = counted_by_the_kernel(CELLS, batches)
    for name in summary.TABLES:
        assert counted[name].equals(tables[name]), name


def test_rows_counted_on_the_host_are_what_the_kernel_counts(tables):
    # `row_tallies`, which counts the CUDA kernel's rows into a summary shard's tallies, on
    # the CPU kernel's rows of every cell: the tables the kernel's own counting makes.
    counted = summary.KernelBatches(CELLS)
    codes = np.array([cell.codes() for cell in CELLS], dtype=np.int64)
    for b in range(2):
        tallies = counted.kernel_tallies()
        rows = kernel.play(SEED, 1000 + b * COUNT // 2, COUNT // 2, CELLS)
        row_tallies.count(codes, np.stack([rows[name] for name in kernel.RESULT_ROWS]), tallies)
        counted.add_wins(rows["won"])
    tables_counted = counted.tables()
    for name in summary.TABLES:
        assert tables_counted[name].equals(tables[name]), name


def test_the_kernel_counts_strategies_of_your_own_as_their_rows_say():
    here = Path(__file__).parent.parent / "engine"
    mine = [
        custom.read(f"builtins_as_functions.py:{name}", str(here))
        for name in ("most_mine", "random_mine")
    ]
    cells = [Cell("one_swap", s.name, finale, custom=s) for s in mine for finale in ("down", "up")]
    cells += [Cell("standard"), Cell("exchange", "most", "down", depth="top")]
    counted = counted_by_the_kernel(cells, 1)
    from_rows = summary.summarise(kernel.play(SEED, 1000, COUNT, cells), cells)
    for name in summary.TABLES:
        assert counted[name].equals(from_rows[name]), name


def test_parts_add_up_to_the_whole(results, tables):
    cut = 13 * 100  # at a block boundary, so the blocks agree too
    first = {name: array[:, :cut] for name, array in results.items()}
    second = {name: array[:, cut:] for name, array in results.items()}
    combined = summary.combine([summary.summarise(first, CELLS), summary.summarise(second, CELLS)])
    for name in summary.TABLES:
        expected = frame(tables[name]).sort(pl.all())
        got = frame(combined[name]).sort(pl.all())
        assert got.equals(expected), name
        assert combined[name].schema.equals(summary.SCHEMAS[name], check_metadata=False)


def test_bad_records_are_refused():
    shard = summary.ShardSummary(CELLS[:1], 0, 4)
    good = {
        "won": np.array([True]),
        "cards_turned": np.array([52], np.int8),
        "down_at_stop": np.array([0], np.int8),
        "rescue_pile": np.array([0], np.int8),
        "hint": np.array([0.0], np.float32),
        "restarts": np.array([-1], np.int8),
        "stray_deaths": np.array([-1], np.int8),
    }
    shard.add_rows(np.array([0]), schema.DealColumns(np.array([0]), good))
    for cell, offset, bad, message in [
        (0, 0, {"down_at_stop": np.array([60], np.int8)}, "range"),  # down_at_stop past 48
        # with a rescue pile and cards down, a hint that is not a d/U
        (0, 0, {"hint": [0.31], "rescue_pile": [3], "down_at_stop": [10]}, "hint"),
        (0, 0, {"restarts": np.array([2], np.int8)}, "restarts"),  # restarts outside play_out
        (0, 9, {}, "deal"),  # outside the shard's deals
        (5, 0, {}, "cell"),  # no such cell
    ]:
        row = {**good, **{name: np.asarray(v, good[name].dtype) for name, v in bad.items()}}
        with pytest.raises(ValueError, match=message):
            shard.add_rows(np.array([cell]), schema.DealColumns(np.array([offset]), row))


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("down_at_stop", 60, "range"),  # past 48
        ("cards_turned", 70, "range"),
        ("rescue_pile", 13, "range"),
        ("hint_den", 0, "hint"),  # a rescue with no chance given
        ("restarts", 2, "restarts"),  # outside play_out
    ],
)
def test_a_bad_kernel_batch_is_refused_at_its_record(results, field, value, message):
    """A kernel batch is checked as its per-deal rows are: the record named is the bad one,
    counting the cells' deals end to end."""
    rescued = results["rescue_pile"] > 0
    cell = next(c for c, one in enumerate(CELLS) if one.variant != "play_out" and rescued[c].any())
    deal = int(np.flatnonzero(rescued[cell])[0])  # a deal with a rescue
    bad = {name: array.copy() for name, array in results.items()}
    bad[field][cell, deal] = value
    with pytest.raises(ValueError, match=rf"record {cell * COUNT + deal}: .*{message}"):
        summary.summarise(bad, CELLS)


def test_hint_values_cover_every_kernel_hint(results):
    rescued = results["rescue_pile"] > 0
    values = np.float32(results["hint_num"][rescued]) / np.float32(results["hint_den"][rescued])
    assert np.isin(values, summary.HINT_VALUES).all()
    assert len(summary.HINT_VALUES) == len(set(summary.HINT_VALUES.tolist()))


def test_a_deal_fact_out_of_range_is_refused():
    facts = summary.FactCounts(CELLS)
    ok = np.array([0, 1, 12], dtype=np.int8)
    facts.add(0, [True, False, True], ok, ok)
    for kings, unvisited in [([0, 13, 0], ok), (ok, [0, 0, -1])]:
        with pytest.raises(ValueError, match="deal 1 of the batch|deal 2 of the batch"):
            facts.add(
                0,
                [True, False, True],
                np.array(kings, dtype=np.int8),
                np.array(unvisited, dtype=np.int8),
            )
    assert facts.tally.sum() == 3  # nothing of a refused batch was counted
