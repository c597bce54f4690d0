"""Record mode ``summary``: a shard's results as counts, from which every report figure follows.

Version ``SUMMARY_SCHEMA_VERSION``; a change of tables, columns or meaning is a new version.

A per-deal sweep writes one row per deal x cell; a summary sweep writes, per batch of
deals, the counts of identical records instead, so that a billion-deal sweep stays a few
megabytes. `summarise(results, cells)` turns the kernel's arrays (``kernel.RESULT_FIELDS``,
shaped (cells, deals)) into six tables; the report reads per-deal results by turning each
shard's rows into the same tables (`ShardSummary`; the ``facts`` table it reads as written),
so both record modes give the same figures by construction. Tables of several batches or
shards simply add up: sum ``n`` (and the pair counts) over equal keys (`combine`).

Label columns, in every table (in ``pairs`` twice, prefixed ``a_`` and ``b_``): ``order``,
``variant``, ``strategy``, ``finale``, ``depth``, as in the per-deal schema (null where the
rules have none). They are dictionary-encoded with uint8 indices over the rules' names, in
the form Polars writes an Enum, so Polars reads them back as Enums without decoding strings.

| table    | key columns (besides the labels)                  | count columns                 |
|----------|---------------------------------------------------|-------------------------------|
| counts   | won, down_at_stop, hint, restarts, stray_deaths   | n                             |
| turned   | won, cards_turned                                 | n                             |
| piles    | won, rescue_pile                                  | n                             |
| pairs    | the labels of cell a and of cell b                | both, a_only, b_only, neither |
| blocks   | wins                                              | n                             |
| facts    | won, kings_at_bottom, unvisited_at_third_king     | n                             |

- ``counts``: deals per cell with each (won, down_at_stop, hint, restarts, stray_deaths),
  the per-deal columns of the same names and types (hint float32, null with no rescue;
  restarts and stray_deaths null outside `play_out`). Win rates, the cards left at the first
  death, win rate by cards left, hint calibration and `play_out` restarts come from here.
- ``turned``: deals per cell with each (won, cards_turned). Kept apart from ``counts``
  because after a rescue cards_turned multiplies the number of distinct records tenfold.
- ``piles``: deals per cell with each (won, rescue_pile); rescue_pile null with no rescue.
- ``pairs``: for two cells played on the same deals, the 2x2 table of their outcomes:
  ``both`` won, ``a_only``, ``b_only``, ``neither``. Pairs: every two cells of one deal order
  (the same layouts), and every two cells that differ only in the deal order (the same deal
  numbers). Cell a comes before cell b in the sweep's cell list.
- ``blocks``: the deals are cut into blocks of ``BLOCK`` consecutive deal numbers from the
  start of each summarised batch (a kernel batch of a summary sweep, whose batches the sweep
  keeps to multiples of 13; a whole shard when the report reads per-deal rows); a partial
  block at a batch's end is left out; ``n``
  blocks of a cell had ``wins`` wins (0..13). Runs of losses come from here, since
  consecutive deals are gone once counted.
- ``facts``: for `standard` cells only, deals with each (won, kings_at_bottom,
  unvisited_at_third_king): facts of the deal (hour piles with a king at the bottom; hours
  not yet taken from when the third king was placed) that two claims of the seeds are about.
  A per-deal sweep writes this table too, one file per shard beside its per-deal file
  (`FactCounts`): the facts belong to the deal rather than to a cell, and the claims need
  only these counts.

Records are counted into dense per-cell tallies (every range is small and fixed by the
rules: 2 x 49 x 125 records per cell, plus restart digits for `play_out`); the tables are
the tallies' nonzero entries. A summary sweep's kernel counts each record where it makes it
(`KernelBatches.kernel_tallies`, `record.Tallies`) and gives only the wins: a pass over its
rows written and read back cost a seventh of a task. Rows from elsewhere (per-deal files, a
kernel batch's arrays) are counted by one numba pass that checks every value. Pair tables
are popcounts over bit-packed win vectors.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.engine import pairing, rules
from pipeline.engine.record import NO_COUNT, NO_PILE, Tallies
from pipeline.engine.rules import Cell
from pipeline.inference.claims import RUN_BLOCK
from pipeline.records import schema


def _compiled_on_first_call(function):
    """numba-compile ``function`` (from the on-disk cache) when it is first called: a report
    over summary records never calls it, and is spared importing numba (a tenth of a second).
    Threads that call it first at once (the report reads shards in threads) compile it once."""
    compiled = None
    compiling = threading.Lock()

    @functools.wraps(function)
    def call(*args):
        nonlocal compiled
        if compiled is None:
            with compiling:
                if compiled is None:
                    import numba as nb

                    compiled = nb.njit(cache=True, nogil=True)(function)
        return compiled(*args)

    return call


SUMMARY_SCHEMA_VERSION = "clocksweep-summary/2"

BLOCK = RUN_BLOCK  # deals per block: "thirteen straight losses" (a losing_runs claim)

LABEL_COLUMNS = schema.LABEL_COLUMNS

# table -> (key columns after the labels, count columns)
TABLES = {
    "counts": (("won", "down_at_stop", "hint", "restarts", "stray_deaths"), ("n",)),
    "turned": (("won", "cards_turned"), ("n",)),
    "piles": (("won", "rescue_pile"), ("n",)),
    "pairs": (
        tuple(f"a_{name}" for name in LABEL_COLUMNS) + tuple(f"b_{name}" for name in LABEL_COLUMNS),
        ("both", "a_only", "b_only", "neither"),
    ),
    "blocks": (("wins",), ("n",)),
    "facts": (("won", "kings_at_bottom", "unvisited_at_third_king"), ("n",)),
}
# Deal facts: counted on standard play's deals only (every cell plays the same deals).
FACT_RANGE = rules.N_HOURS + 1  # 0..12 hour piles

# The key columns' types: a per-deal column's own, and the counts' small integers.
VALUE_TYPES = {
    **{
        name: schema.DEAL_SCHEMA.field(name).type
        for name in (
            "won",
            "down_at_stop",
            "hint",
            "restarts",
            "stray_deaths",
            "cards_turned",
            "rescue_pile",
        )
    },
    "wins": pa.int8(),
    "kings_at_bottom": pa.int8(),
    "unvisited_at_third_king": pa.int8(),
}

# Every chance the hint can give: d_p / U (d_p <= 4 cards, U <= 48 face-down cards), and the
# certain 0 or 1 (face-up finales, exchange at the top). Code 0 is "no hint" (no rescue);
# code i + 1 is HINT_VALUES[i]. Values are float32 num / den, as the per-deal schema stores.
MAX_DOWN = rules.N_CARDS - rules.PILE_SIZE
_HINT_FRACTIONS = sorted(
    {Fraction(0), Fraction(1)}
    | {Fraction(num, den) for den in range(1, MAX_DOWN + 1) for num in range(1, min(den, 4) + 1)}
)
HINT_VALUES = np.array(
    [np.float32(f.numerator) / np.float32(f.denominator) for f in _HINT_FRACTIONS], dtype=np.float32
)
if np.any(np.diff(HINT_VALUES) <= 0):  # distinct fractions must stay distinct in float32
    raise AssertionError("hint values collide in float32")


def _hint_lut() -> np.ndarray:
    """Hint code by (numerator, denominator) as the kernel gives them; 0 where den = 0."""
    lut = np.zeros((5, MAX_DOWN + 1), dtype=np.int16)
    for den in range(1, MAX_DOWN + 1):
        for num in range(0, min(den, 4) + 1):
            value = np.float32(num) / np.float32(den)
            lut[num, den] = np.searchsorted(HINT_VALUES, value) + 1
    return lut


HINT_CODE = _hint_lut()
_HINT_ONE = int(np.searchsorted(HINT_VALUES, np.float32(1))) + 1


# --- Arrow types: labels as Polars writes an Enum ------------------------------------------


# Polars' own field metadata of an Enum (its categories, each as "<bytes>;<name>"), as its
# export writes it: tests/records/test_summary.py checks that Polars still exports this field.
POLARS_ENUM_KEY = b"_PL_ENUM_VALUES2"


def strategy_names(cells: Sequence[Cell]) -> tuple[str, ...]:
    """The names of the strategy label in tables of ``cells``: the built-in strategies, then
    the user's among ``cells`` in the order they come (a sweep of built-ins only: the
    rules' names, as before there were others)."""
    mine = (cell.strategy for cell in cells if cell.custom is not None)
    return rules.STRATEGIES + tuple(dict.fromkeys(mine))


def label_names(name: str, strategies: tuple[str, ...] = rules.STRATEGIES) -> tuple[str, ...]:
    """The names of a label column (``name``, an axis): the rules', and for the strategy,
    ``strategies`` (`strategy_names`)."""
    return strategies if name == "strategy" else rules.AXES[name]


@functools.cache
def label_field(name: str, strategies: tuple[str, ...] = rules.STRATEGIES) -> pa.Field:
    """The Arrow field of a label column: Polars' export of an Enum over its names
    (`label_names`), made here, so that a worker writing a shard need not import Polars (a
    tenth of a second and more of each worker's first shard)."""
    values = "".join(f"{len(value.encode())};{value}" for value in label_names(name, strategies))
    return pa.field(
        name,
        pa.dictionary(pa.uint8(), pa.large_string(), ordered=True),
        metadata={POLARS_ENUM_KEY: values.encode()},
    )


def _label_name(column: str) -> str:
    return column[2:] if column[:2] in ("a_", "b_") else column


@functools.cache
def label_column_field(column: str, strategies: tuple[str, ...] = rules.STRATEGIES) -> pa.Field:
    base = label_field(_label_name(column), strategies)
    return pa.field(column, base.type, nullable=True, metadata=base.metadata)


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


def _label_array(
    column: str, values: list[str | None], index: np.ndarray, strategies: tuple[str, ...]
) -> pa.Array:
    """A label column for rows whose cell is ``index`` (into ``values``, one per cell)."""
    field = label_column_field(column, strategies)
    names = label_names(_label_name(column), strategies)
    codes = np.array([names.index(v) if v is not None else 0 for v in values], dtype=np.uint8)
    null = np.array([v is None for v in values], dtype=bool)
    row_codes = codes[index] if len(values) else np.zeros(0, dtype=np.uint8)
    mask = null[index] if null.any() else None
    return pa.DictionaryArray.from_arrays(
        pa.array(row_codes, type=pa.uint8(), mask=mask),
        pa.array(list(names), type=field.type.value_type),
        ordered=field.type.ordered,
    )


def cell_labels(
    cells: Sequence[Cell], prefix: str, index: np.ndarray, strategies: tuple[str, ...]
) -> dict[str, pa.Array]:
    """The label columns of rows whose cell is ``index`` (into ``cells``)."""
    return {
        f"{prefix}{name}": _label_array(
            f"{prefix}{name}", [getattr(cell, name) for cell in cells], index, strategies
        )
        for name in LABEL_COLUMNS
    }


def _masked(values: np.ndarray, null: np.ndarray, type_: pa.DataType) -> pa.Array:
    return pa.array(
        values.astype(type_.to_pandas_dtype()), type=type_, mask=null if null.any() else None
    )


# --- Counting -----------------------------------------------------------------------------
#
# One pass of numba over the rows adds each record to dense per-cell tallies (the ranges
# are small and fixed by the rules); the tables are their nonzero entries. `play_out` cells,
# the only ones with restarts, get a tally of their own with the restart digits.

# The tallies index by digits: rescue_pile - NO_PILE (0 for none, then the hour) and
# restarts - NO_COUNT, stray_deaths - NO_COUNT (0 for none, then the count plus one). The
# sentinels reach the compiled pass as arguments, not globals: numba's cache is keyed to this
# file alone and would keep a stale constant.
RESTART_RANGE = 52  # restarts (<= 49: a restart turns a card) and stray_deaths (<= 50), + 1
TURNED_RANGE = 64  # cards_turned 0..53
PILE_RANGE = rules.N_HOURS + 1  # none, hours 1..12
DOWN_RANGE = MAX_DOWN + 1
N_HINT_CODES = len(HINT_VALUES) + 1
COUNT_SIZE = 2 * DOWN_RANGE * N_HINT_CODES  # (won, down_at_stop, hint code)
RESTART_SIZE = 2 * DOWN_RANGE * RESTART_RANGE * RESTART_RANGE  # (won, down, restarts+1, stray+1)
_HINT_VALUE_OF_CODE = np.concatenate(([np.float32(-1)], HINT_VALUES)).astype(np.float32)

# Errors the counting pass reports by number (the row is reported with it).
_ERRORS = {
    1: "a value out of the rules' range (down_at_stop, cards_turned, rescue_pile, restarts)",
    2: "a hint that is not a chance the hint can give (d/U, U <= 48)",
    3: "restarts outside a play_out cell",
    4: "a deal outside the shard's range",
    5: "a row of a cell the sweep does not list",
}


@_compiled_on_first_call
def _tally_facts(won, kings, unvisited, tally):
    """Count deals by (won, kings, unvisited) into ``tally``; the first deal out of range, or -1.
    (One pass, rather than numpy's bincount over keys built first.)"""
    for i in range(len(won)):
        k, u = kings[i], unvisited[i]
        if k < 0 or k >= FACT_RANGE or u < 0 or u >= FACT_RANGE:
            return i
    for i in range(len(won)):
        tally[((won[i] != 0) * FACT_RANGE + kings[i]) * FACT_RANGE + unvisited[i]] += 1
    return -1


@_compiled_on_first_call
def _count(
    no_pile,
    no_count,
    run_cells,
    starts,
    ends,
    deal_offset,
    won,
    turned,
    down,
    pile,
    restarts,
    stray,
    hint_float,
    hint_num,
    hint_den,
    restart_slot,
    counts,
    restart_counts,
    turned_pile_counts,
    won_matrix,
    present,
    fill,
):
    """Add every row to the tallies and, if ``fill``, to the win matrix; gives (error number,
    row) or (0, -1).

    Rows come in runs of one cell: rows starts[r]..ends[r]-1 are cell run_cells[r]. A row's
    deal is deal_offset[i] (per-deal rows) or, with ``deal_offset`` empty, its place in its
    run (kernel results: each run is a cell's deals 0, 1, ...). Hints come as floats
    (``hint_float``, per-deal rows) or as the kernel's numerator and denominator.
    """
    from_float = hint_float.shape[0] > 0
    by_deal = deal_offset.shape[0] > 0
    n_deals = won_matrix.shape[1]
    for r in range(starts.shape[0]):
        c = run_cells[r]
        slot = restart_slot[c]
        # The run's own rows, the cell's own tallies, and ranges checked as unsigned (one
        # compare for both ends): what lets the compiler keep the loop tight.
        cell_counts, cell_turned_piles = counts[c], turned_pile_counts[c]
        a, b = starts[r], ends[r]
        won_r, turned_r, down_r, pile_r = won[a:b], turned[a:b], down[a:b], pile[a:b]
        restarts_r, stray_r = restarts[a:b], stray[a:b]
        num_r, den_r = hint_num[a:b], hint_den[a:b]
        for j in range(b - a):
            i = a + j
            w = np.int64(won_r[j] != 0)
            d = np.int64(down_r[j])
            t = np.int64(turned_r[j])
            p = np.int64(pile_r[j]) - no_pile
            if (
                (np.uint64(d) >= DOWN_RANGE)
                | (np.uint64(t) >= TURNED_RANGE)
                | (np.uint64(p) >= PILE_RANGE)
            ):
                return 1, i
            hint = 0
            if p > 0:
                if from_float:
                    h = hint_float[i]
                    num = np.int64(np.rint(h * d))
                    if num < 0 or num > 4:
                        num = 0
                    hint = HINT_CODE[num, d]
                    hint = _HINT_ONE if h == 1.0 else hint
                    if _HINT_VALUE_OF_CODE[hint] != h:
                        return 2, i
                else:
                    num = np.int64(num_r[j])
                    den = np.int64(den_r[j])
                    if (np.uint64(num) > 4) | (np.uint64(den) >= DOWN_RANGE):
                        return 2, i
                    hint = HINT_CODE[num, den]
                    if hint == 0:
                        return 2, i
            rs = np.int64(restarts_r[j]) - no_count
            st = np.int64(stray_r[j]) - no_count
            if (rs | st) != 0:
                if slot < 0:
                    return 3, i
                if (np.uint64(rs) >= RESTART_RANGE) | (np.uint64(st) >= RESTART_RANGE):
                    return 1, i
                restart_counts[
                    slot, ((w * DOWN_RANGE + d) * RESTART_RANGE + rs) * RESTART_RANGE + st
                ] += 1
            else:
                cell_counts[(w * DOWN_RANGE + d) * N_HINT_CODES + hint] += 1
            # One tally of (won, cards_turned, rescue_pile), whose sums are the turned and
            # piles tables: one count a row rather than two.
            cell_turned_piles[(w * TURNED_RANGE + t) * PILE_RANGE + p] += 1
            if fill:
                k = deal_offset[i] if by_deal else j
                if k < 0 or k >= n_deals:
                    return 4, i
                won_matrix[c, k] = won[i]
                present[c, k] = True
    return 0, -1


class LabelLut(NamedTuple):
    """Which cell a row's labels name (`label_code_lut`): ``strategies``, the strategy
    label's names; ``radices``, each label column's names, null and a name of none of them
    (a strategy of the user's that other cells play); ``cells``, the cell index by label
    code, -1 for labels of no cell."""

    strategies: tuple[str, ...]
    radices: np.ndarray
    cells: np.ndarray


def label_code(cell: Cell, strategies: tuple[str, ...] = rules.STRATEGIES) -> int:
    """A cell's labels as one integer: mixed radix over LABEL_COLUMNS, each digit a name's
    index, the names' count for null (and one more for a name of none: `label_codes`)."""
    code = 0
    for name in reversed(LABEL_COLUMNS):
        names, value = label_names(name, strategies), getattr(cell, name)
        code = code * (len(names) + 2) + (names.index(value) if value is not None else len(names))
    return code


def label_code_lut(cells: Sequence[Cell]) -> LabelLut:
    """The cell index of each label code (`label_code`) of ``cells``' labels."""
    strategies = strategy_names(cells)
    radices = np.array(
        [len(label_names(name, strategies)) + 2 for name in LABEL_COLUMNS], dtype=np.int64
    )
    lut = np.full(int(np.prod(radices)), -1, dtype=np.int64)
    for index, cell in enumerate(cells):
        lut[label_code(cell, strategies)] = index
    return LabelLut(strategies, radices, lut)


def label_codes(
    column: pa.Array, name: str, strategies: tuple[str, ...] = rules.STRATEGIES
) -> tuple[np.ndarray, np.ndarray]:
    """A label column of a row batch: (dictionary index per row, index in the label's names
    per dictionary entry, then the names' count for null). An entry of none of the names (a
    strategy of the user's that cells of another group play, in that group's files) has
    the count plus one: rows of it are of no cell of ``strategies``'."""
    names = label_names(name, strategies)
    n = len(column)
    if column.null_count == n:
        return np.zeros(n, dtype=np.int8), np.array([len(names)])
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    dictionary = column.dictionary.to_pylist()
    indices = column.indices
    if column.null_count:
        indices = pc.fill_null(indices, len(dictionary))
    return (
        indices.to_numpy(zero_copy_only=False),
        np.array(
            [names.index(v) if v in names else len(names) + 1 for v in dictionary] + [len(names)]
        ),
    )


def batch_runs(batch, lut: LabelLut) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A row batch's rows as runs of one cell: (cell index per run, starts, ends).

    Labels come in long runs (a writer writes a cell's deals together), so each label's
    changes are found by one vectorised comparison and only run starts are looked up.
    """
    n = batch.num_rows
    labels = [
        (name, *label_codes(batch.column(name), name, lut.strategies)) for name in LABEL_COLUMNS
    ]
    change = np.unique(
        np.concatenate([np.flatnonzero(index[1:] != index[:-1]) + 1 for _, index, _ in labels])
    )
    starts = np.concatenate(([0], change)).astype(np.int64)
    ends = np.concatenate((change, [n])).astype(np.int64)
    code = np.zeros(len(starts), dtype=np.int64)
    for (_, index, names), radix in zip(reversed(labels), reversed(lut.radices)):
        code = code * int(radix) + names[index[starts].astype(np.int64)]
    return lut.cells[code], starts, ends


_EMPTY_F32 = np.zeros(0, dtype=np.float32)
_EMPTY_I8 = np.zeros(0, dtype=np.int8)
_EMPTY_I64 = np.zeros(0, dtype=np.int64)


class FactCounts:
    """The ``facts`` table of a run of deals: deals of each standard cell with each (won,
    kings_at_bottom, unvisited_at_third_king).

    Both record modes write it, one file per shard: the facts belong to the deal, not to a
    cell, and two claims need only these counts, so per-deal records do not carry them.
    """

    def __init__(self, cells: Sequence[Cell], strategies: tuple[str, ...] | None = None):
        self.cells = list(cells)
        self.strategies = strategies or strategy_names(self.cells)  # the label's names
        self.tally = np.zeros((len(self.cells), 2 * FACT_RANGE * FACT_RANGE), dtype=np.int64)

    def add(self, cell: int, won, kings_at_bottom, unvisited_at_third_king) -> None:
        """Add the deal facts of deals of one (standard) cell."""
        as8 = lambda a: np.ascontiguousarray(a, dtype=np.int8)  # noqa: E731
        bad = _tally_facts(
            as8(won), as8(kings_at_bottom), as8(unvisited_at_third_king), self.tally[cell]
        )
        if bad >= 0:
            raise ValueError(
                f"deal {bad} of the batch: a deal fact out of range "
                "(kings_at_bottom, unvisited_at_third_king: 0..12)"
            )

    def add_results(self, results: dict[str, np.ndarray]) -> None:
        """Add the standard cells' deals of kernel results (``results`` as `kernel.play` gives)."""
        for c, cell in enumerate(self.cells):
            if cell.variant == "standard":
                self.add(
                    c,
                    results["won"][c],
                    results["kings_at_bottom"][c],
                    results["unvisited_at_third_king"][c],
                )

    def merge(self, other: FactCounts) -> None:
        """Add the counts of other deals of the same cells."""
        self.tally += other.tally

    def table(self) -> pa.Table:
        cell, key = np.nonzero(self.tally)
        n = self.tally[cell, key]
        columns = {
            **cell_labels(self.cells, "", cell, self.strategies),
            "won": pa.array((key // FACT_RANGE**2).astype(bool)),
            "kings_at_bottom": pa.array((key // FACT_RANGE % FACT_RANGE).astype(np.int8)),
            "unvisited_at_third_king": pa.array((key % FACT_RANGE).astype(np.int8)),
            "n": pa.array(n.astype(np.int64)),
        }
        return pa.table(columns, schema=schemas(self.strategies)["facts"])


class ShardSummary:
    """The summary tables of one run of deals (a kernel batch, or a shard's per-deal rows).

    Rows may arrive in any order and in pieces; each deal x cell must come once. ``first``
    and ``count`` give the deal numbers covered, for the pair and block tables.
    """

    def __init__(
        self,
        cells: Sequence[Cell],
        first: int,
        count: int,
        strategies: tuple[str, ...] | None = None,
    ):
        self.cells = list(cells)
        # The strategy label's names in its tables (`strategy_names`; those of more cells
        # than these where its tables are summed with theirs).
        self.strategies = strategies or strategy_names(self.cells)
        self.first, self.count = first, count
        n_cells = len(self.cells)
        self.won = np.zeros((n_cells, count), dtype=bool)
        self.present = np.zeros((n_cells, count), dtype=bool)
        self.complete = False  # set when every deal x cell is known to be present
        replays = [i for i, cell in enumerate(self.cells) if cell.variant == "play_out"]
        self.restart_slot = np.full(n_cells, -1, dtype=np.int64)
        self.restart_slot[replays] = np.arange(len(replays))
        self.counts = np.zeros((n_cells, COUNT_SIZE), dtype=np.int64)
        self.restart_counts = np.zeros((len(replays), RESTART_SIZE), dtype=np.int64)
        # (won, cards_turned, rescue_pile): `turned` and `piles` are its sums.
        self.turned_piles = np.zeros((n_cells, 2 * TURNED_RANGE * PILE_RANGE), dtype=np.int64)
        self.facts = FactCounts(self.cells, self.strategies)

    @property
    def turned(self) -> np.ndarray:
        """Deals by (won, cards_turned), cells x (won * TURNED_RANGE + cards_turned)."""
        by_pile = self.turned_piles.reshape(len(self.cells), 2 * TURNED_RANGE, PILE_RANGE)
        return by_pile.sum(axis=2)

    @property
    def piles(self) -> np.ndarray:
        """Deals by (won, rescue_pile), cells x (won * PILE_RANGE + rescue_pile)."""
        by_turned = self.turned_piles.reshape(len(self.cells), 2, TURNED_RANGE, PILE_RANGE)
        return by_turned.sum(axis=2).reshape(len(self.cells), 2 * PILE_RANGE)

    def _tallies(self):
        return (
            self.restart_slot,
            self.counts,
            self.restart_counts,
            self.turned_piles,
            self.won,
            self.present,
        )

    @staticmethod
    def _check(error: int, row: int) -> None:
        if error:
            raise ValueError(f"record {row}: {_ERRORS[error]}")

    def add_matrix(self, results: dict[str, np.ndarray]) -> None:
        """Add kernel results for every cell and deal (``results`` as `kernel.play` gives)."""
        n_cells, count = results["won"].shape
        if (n_cells, count) != self.won.shape:
            raise ValueError(
                f"results are {n_cells} cells x {count} deals; "
                f"expected {self.won.shape[0]} x {self.won.shape[1]}"
            )
        flat = {
            name: np.ascontiguousarray(array, dtype=np.int8).reshape(-1)
            for name, array in results.items()
        }
        starts = np.arange(n_cells, dtype=np.int64) * count
        self._check(
            *_count(
                NO_PILE,
                NO_COUNT,
                np.arange(n_cells, dtype=np.int64),
                starts,
                starts + count,
                _EMPTY_I64,
                flat["won"].view(np.bool_),
                flat["cards_turned"],
                flat["down_at_stop"],
                flat["rescue_pile"],
                flat["restarts"],
                flat["stray_deaths"],
                _EMPTY_F32,
                flat["hint_num"],
                flat["hint_den"],
                *self._tallies(),
                False,  # a kernel batch's wins are its matrix already
            )
        )
        self._add_wins(flat["won"].view(np.bool_).reshape(n_cells, count))
        self.facts.add_results(results)

    def _add_wins(self, won: np.ndarray) -> None:
        self.won[...] = won
        self.present[...] = True
        self.complete = True

    def add_runs(self, run_cells, starts, ends, rows: schema.DealColumns) -> None:
        """Add per-deal rows in runs of one cell: rows starts[i]..ends[i]-1 are cell
        run_cells[i] (an index into the cell list); ``rows`` as the kernel codes them
        (`schema.DealColumns`: rescue_pile `record.NO_PILE`, restarts and stray_deaths
        `record.NO_COUNT` where they have no value, the hint any value there)."""
        as8 = lambda name: np.ascontiguousarray(rows[name], dtype=np.int8)  # noqa: E731
        won = np.ascontiguousarray(rows["won"])
        if won.dtype != np.bool_:
            won = won.astype(bool)
        self._check(
            *_count(
                NO_PILE,
                NO_COUNT,
                np.ascontiguousarray(run_cells, dtype=np.int64),
                np.ascontiguousarray(starts, dtype=np.int64),
                np.ascontiguousarray(ends, dtype=np.int64),
                np.ascontiguousarray(rows.deal_offset, dtype=np.int64),
                won,
                as8("cards_turned"),
                as8("down_at_stop"),
                as8("rescue_pile"),
                as8("restarts"),
                as8("stray_deaths"),
                np.ascontiguousarray(rows["hint"], dtype=np.float32),
                _EMPTY_I8,
                _EMPTY_I8,
                *self._tallies(),
                True,
            )
        )

    def add_rows(self, cell, rows: schema.DealColumns) -> None:
        """`add_runs` for rows in any order: ``cell`` indexes the cell list, per row."""
        cell = np.asarray(cell)
        if len(cell) == 0:
            return
        if (cell < 0).any() or (cell >= len(self.cells)).any():
            raise ValueError("a row of a cell the sweep does not list")
        change = np.flatnonzero(cell[1:] != cell[:-1]) + 1
        if len(change) > max(256, len(cell) // 1024):  # interleaved cells: group them first
            order = np.argsort(cell, kind="stable")
            cell, rows = cell[order], rows.taken(order)
            change = np.flatnonzero(cell[1:] != cell[:-1]) + 1
        starts = np.concatenate(([0], change))
        ends = np.concatenate((change, [len(cell)]))
        self.add_runs(cell[starts], starts, ends, rows)

    # --- the tables -----------------------------------------------------------------------

    def tables(self) -> dict[str, pa.Table]:
        """The six summary tables of everything added (``facts`` only from `add_matrix`:
        per-deal rows do not carry the facts)."""
        present = None if self.complete or self.present.all() else self.present
        return {
            "counts": self._counts(),
            "turned": self._simple(self.turned, TURNED_RANGE, "cards_turned", None),
            "piles": self._simple(self.piles, PILE_RANGE, "rescue_pile", 0),
            "pairs": pair_table(self.cells, self.won, present, strategies=self.strategies),
            "blocks": block_table(self.cells, self.won, present, self.strategies),
            "facts": self.facts.table(),
        }

    def _counts(self) -> pa.Table:
        cell, key = np.nonzero(self.counts)
        n = self.counts[cell, key]
        hint = key % N_HINT_CODES
        down = key // N_HINT_CODES % DOWN_RANGE
        won = key // (N_HINT_CODES * DOWN_RANGE)
        restarts = np.zeros(len(cell), dtype=np.int64)
        stray = np.zeros(len(cell), dtype=np.int64)
        slot, key = np.nonzero(self.restart_counts)
        if len(slot):
            slot_cell = np.flatnonzero(self.restart_slot >= 0)
            cell = np.concatenate([cell, slot_cell[slot]])
            n = np.concatenate([n, self.restart_counts[slot, key]])
            hint = np.concatenate([hint, np.zeros(len(slot), dtype=np.int64)])
            stray = np.concatenate([stray, key % RESTART_RANGE])
            restarts = np.concatenate([restarts, key // RESTART_RANGE % RESTART_RANGE])
            down = np.concatenate([down, key // RESTART_RANGE**2 % DOWN_RANGE])
            won = np.concatenate([won, key // (RESTART_RANGE**2 * DOWN_RANGE)])
        order = np.lexsort((stray, restarts, hint, down, won, cell))
        cell, won, down, hint, restarts, stray, n = (
            a[order] for a in (cell, won, down, hint, restarts, stray, n)
        )
        hint_value = np.concatenate(([0], HINT_VALUES))[hint].astype(np.float32)
        columns = {
            **cell_labels(self.cells, "", cell, self.strategies),
            "won": pa.array(won.astype(bool)),
            "down_at_stop": pa.array(down.astype(np.int8)),
            "hint": _masked(hint_value, hint == 0, pa.float32()),
            "restarts": _masked(restarts + NO_COUNT, restarts == 0, pa.int8()),
            "stray_deaths": _masked(stray + NO_COUNT, stray == 0, pa.int8()),
            "n": pa.array(n.astype(np.int64)),
        }
        return pa.table(columns, schema=schemas(self.strategies)["counts"])

    def _simple(self, tally: np.ndarray, value_range: int, column: str, null_value) -> pa.Table:
        cell, key = np.nonzero(tally)
        n = tally[cell, key]
        won, value = key // value_range, key % value_range
        null = value == null_value if null_value is not None else np.zeros(len(value), dtype=bool)
        columns = {
            **cell_labels(self.cells, "", cell, self.strategies),
            "won": pa.array(won.astype(bool)),
            column: _masked(value, null, pa.int8()),
            "n": pa.array(n.astype(np.int64)),
        }
        table = "turned" if column == "cards_turned" else "piles"
        return pa.table(columns, schema=schemas(self.strategies)[table])


# --- Pairs and blocks ---------------------------------------------------------------------


class KernelBatches(ShardSummary):
    """A summary shard's counts over its kernel batches, added one by one (`add_matrix`):
    the tallies summed as they come, each batch's pairs and blocks counted from its wins and
    summed, and every table made once, at the end (each batch's own tables, summed by
    `combine`, cost a twentieth of the kernel's time)."""

    def __init__(self, cells: Sequence[Cell], strategies: tuple[str, ...] | None = None):
        super().__init__(cells, 0, 0, strategies)
        self.pairs = pairing.pairs(self.cells)
        self.pair_sums = np.zeros((len(self.pairs), 4), dtype=np.int64)
        self.block_sums = np.zeros((len(self.cells), BLOCK + 1), dtype=np.int64)

    def kernel_tallies(self) -> Tallies:
        """The tallies as the kernel counts a batch into them (`kernel.play` with
        ``tallies``); then `add_wins` with the batch's wins."""
        n_cells = len(self.cells)
        return Tallies(
            counts=self.counts.reshape(n_cells, 2, DOWN_RANGE, N_HINT_CODES),
            turned_piles=self.turned_piles.reshape(n_cells, 2, TURNED_RANGE, PILE_RANGE),
            restarts=self.restart_counts.reshape(
                len(self.restart_counts), 2, DOWN_RANGE, RESTART_RANGE, RESTART_RANGE
            ),
            restart_slot=self.restart_slot,
            facts=self.facts.tally.reshape(n_cells, 2, FACT_RANGE, FACT_RANGE),
            hint_code=HINT_CODE,
        )

    def add_wins(self, won: np.ndarray) -> None:
        """Add the pairs and blocks of a batch's wins (cells x deals, nonzero: won), whose
        records are counted in the tallies."""
        add_pair_sums(won, self.pairs, self.pair_sums)
        _block_tally(won, won, False, self.block_sums)

    def add_matrix(self, results: dict[str, np.ndarray]) -> None:
        shape = results["won"].shape
        self.won = self.present = np.empty(shape, dtype=bool)  # the batch's shape; not filled
        super().add_matrix(results)

    def _add_wins(self, won: np.ndarray) -> None:
        self.add_wins(won)
        self.won = self.present = np.zeros((len(self.cells), 0), dtype=bool)

    def merge(self, other: KernelBatches) -> None:
        """Add the counts of the batches ``other`` was given (of the same cells)."""
        for mine, theirs in (
            (self.counts, other.counts),
            (self.restart_counts, other.restart_counts),
            (self.turned_piles, other.turned_piles),
            (self.pair_sums, other.pair_sums),
            (self.block_sums, other.block_sums),
        ):
            mine += theirs
        self.facts.merge(other.facts)

    def tables(self) -> dict[str, pa.Table]:
        return {
            "counts": self._counts(),
            "turned": self._simple(self.turned, TURNED_RANGE, "cards_turned", None),
            "piles": self._simple(self.piles, PILE_RANGE, "rescue_pile", 0),
            "pairs": pair_table_of(self.cells, self.pairs, self.pair_sums, self.strategies),
            "blocks": block_table_of(self.cells, self.block_sums, self.strategies),
            "facts": self.facts.table(),
        }


def packed_rows(bits: np.ndarray) -> np.ndarray:
    """Rows of booleans as rows of uint64 words (zero-padded)."""
    return as_words(np.packbits(bits, axis=1))


def as_words(packed: np.ndarray) -> np.ndarray:
    """Rows of packed bytes (`np.packbits`) as rows of uint64 words (zero-padded)."""
    rows, width = packed.shape
    if width % 8:  # (np.pad's own costs are most of a batch's)
        padded = np.zeros((rows, width + (-width) % 8), dtype=np.uint8)
        padded[:, :width] = packed
        packed = padded
    return np.ascontiguousarray(packed).view(np.uint64)


def popcount_rows(words: np.ndarray) -> np.ndarray:
    return np.bitwise_count(words).sum(axis=-1, dtype=np.int64)


def pair_counts(
    won: np.ndarray, present: np.ndarray | None, pairs: list[tuple[int, int]]
) -> np.ndarray:
    """(both, a_only, b_only, neither) per pair, on the deals both cells played."""
    out = np.zeros((len(pairs), 4), dtype=np.int64)
    if not pairs:
        return out
    wins = packed_rows(won)
    have = packed_rows(present) if present is not None else None
    by_a: dict[int, list[tuple[int, int]]] = {}
    for row, (a, b) in enumerate(pairs):
        by_a.setdefault(a, []).append((row, b))
    for a, rows_b in by_a.items():
        rows = np.array([row for row, _ in rows_b])
        bs = np.array([b for _, b in rows_b])
        both = popcount_rows(wins[a] & wins[bs])
        if have is None:
            n = np.full(len(bs), won.shape[1], dtype=np.int64)
            a_wins = np.full(len(bs), popcount_rows(wins[a]), dtype=np.int64)
            b_wins = popcount_rows(wins[bs])
        else:
            n = popcount_rows(have[a] & have[bs])
            a_wins = popcount_rows(wins[a] & have[bs])
            b_wins = popcount_rows(wins[bs] & have[a])
        out[rows, 0] = both
        out[rows, 1] = a_wins - both
        out[rows, 2] = b_wins - both
        out[rows, 3] = n - a_wins - b_wins + both
    return out


def add_pair_sums(won: np.ndarray, pairs: Sequence[tuple[int, int]], sums: np.ndarray) -> None:
    """Add each pair's (both, a_only, b_only, neither) over every deal of ``won`` (cells x
    deals, nonzero: won) to ``sums`` (pairs x 4): `pair_counts` for deals every cell played."""
    if len(pairs):
        add_word_pair_sums(packed_rows(won), won.shape[1], pairs, sums)


def add_word_pair_sums(
    words: np.ndarray, deals: int, pairs: Sequence[tuple[int, int]], sums: np.ndarray
) -> None:
    """`add_pair_sums` of wins packed to words (`packed_rows`) over ``deals`` deals: a
    popcount covers 64 deals, where a pass over the deals' bytes cost a pair a byte each."""
    if len(pairs):
        index = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        _add_word_pair_sums(words, index, deals, sums)


@_compiled_on_first_call
def _add_word_pair_sums(words, index, deals, sums):
    def popcount(x):  # the bit-counting idiom, which the compiler makes one instruction
        x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
        x = (x & np.uint64(0x3333333333333333)) + (
            (x >> np.uint64(2)) & np.uint64(0x3333333333333333)
        )
        x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
        return np.int64((x * np.uint64(0x0101010101010101)) >> np.uint64(56))

    for k in range(index.shape[0]):
        wins_a, wins_b = words[index[k, 0]], words[index[k, 1]]
        both = a_wins = b_wins = 0
        for j in range(words.shape[1]):
            x, y = wins_a[j], wins_b[j]
            both += popcount(x & y)
            a_wins += popcount(x)
            b_wins += popcount(y)
        sums[k, 0] += both
        sums[k, 1] += a_wins - both
        sums[k, 2] += b_wins - both
        sums[k, 3] += deals - a_wins - b_wins + both


def pair_table(
    cells: Sequence[Cell],
    won: np.ndarray,
    present: np.ndarray | None,
    pairs=None,
    strategies: tuple[str, ...] | None = None,
) -> pa.Table:
    """The ``pairs`` table of ``cells`` (``pairs``: those of `pairing.pairs` to count)."""
    pairs = pairing.pairs(cells) if pairs is None else pairs
    return pair_table_of(cells, pairs, pair_counts(won, present, pairs), strategies)


def pair_table_of(
    cells: Sequence[Cell], pairs, counts: np.ndarray, strategies: tuple[str, ...] | None = None
) -> pa.Table:
    """The ``pairs`` table of ``pairs`` of ``cells`` whose `pair_counts` are ``counts``
    (``strategies``: the strategy label's names, by default ``cells``')."""
    strategies = strategies or strategy_names(cells)
    a = np.array([p[0] for p in pairs], dtype=np.int64)
    b = np.array([p[1] for p in pairs], dtype=np.int64)
    columns = {**cell_labels(cells, "a_", a, strategies), **cell_labels(cells, "b_", b, strategies)}
    for i, name in enumerate(TABLES["pairs"][1]):
        columns[name] = pa.array(counts[:, i])
    return pa.table(columns, schema=schemas(strategies)["pairs"])


@_compiled_on_first_call
def _block_tally(won, present, use_present, tally):
    """tally[c, w] += 1 for each block of BLOCK consecutive deals of cell c with w wins."""
    # Four tallies taken in turn, then summed: one would make each count wait for the last
    # (runs of blocks with the same wins are the rule), at twice the time.
    tallies = np.zeros((4, BLOCK + 2), dtype=np.int64)
    for c in range(won.shape[0]):
        tallies[:] = 0
        row, have = won[c], present[c]
        for b in range(won.shape[1] // BLOCK):
            wins = 0
            for k in range(BLOCK):  # a constant count, and no branch: it unrolls
                wins += row[b * BLOCK + k]
            if use_present:
                whole = True
                for k in range(BLOCK):
                    whole &= have[b * BLOCK + k]
                wins = wins if whole else BLOCK + 1  # a block not whole: not counted
            tallies[b & 3, wins] += 1
        for turn in range(4):
            for wins in range(BLOCK + 1):
                tally[c, wins] += tallies[turn, wins]


def block_table(
    cells: Sequence[Cell],
    won: np.ndarray,
    present: np.ndarray | None,
    strategies: tuple[str, ...] | None = None,
) -> pa.Table:
    tally = np.zeros((len(cells), BLOCK + 1), dtype=np.int64)
    _block_tally(won, won if present is None else present, present is not None, tally)
    return block_table_of(cells, tally, strategies)


def block_table_of(
    cells: Sequence[Cell], tally: np.ndarray, strategies: tuple[str, ...] | None = None
) -> pa.Table:
    """The ``blocks`` table of a block tally (cells x wins 0..BLOCK)."""
    strategies = strategies or strategy_names(cells)
    cell_index, wins = np.nonzero(tally)
    columns = {
        **cell_labels(cells, "", cell_index.astype(np.int64), strategies),
        "wins": pa.array(wins.astype(np.int8)),
        "n": pa.array(tally[cell_index, wins].astype(np.int64)),
    }
    return pa.table(columns, schema=schemas(strategies)["blocks"])


# --- The sweep's entry point ----------------------------------------------------------------


def summarise(results: dict[str, np.ndarray], cells: Sequence[Cell]) -> dict[str, pa.Table]:
    """One batch of kernel results (cells x deals, as `kernel.play` gives) as summary tables."""
    count = results["won"].shape[1]
    shard = ShardSummary(cells, 0, count)
    shard.add_matrix(results)
    return shard.tables()


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
