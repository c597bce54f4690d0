"""The summary's counters: each table's columns, and the dense tallies that the records of
a run of deals are counted into, a value to a digit, and read back as the ``counts``,
``turned`` and ``piles`` tables. The one module of the records that names the measures of a
deal (`measures.MEASURES`) one by one: the tables' keys are a choice of them.

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
- ``pairs``, ``blocks`` and ``facts``: `pairs`, `blocks` and `facts`; their wins are a
  shard's ``won`` column, cell by cell, and ``facts`` is keyed by won too.

Every range is small and fixed by the rules (2 x 49 x 125 records per cell, plus restart
digits for `play_out`), so the tallies are dense, and the tables their nonzero entries.
Rows from elsewhere than the kernel's own counting (per-deal files, a kernel batch's arrays)
are counted by one numba pass that checks every value (`Counters.add`).
"""

from __future__ import annotations

from fractions import Fraction
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from pipeline.engine import rules
from pipeline.engine.measures import BY_NAME, NO_COUNT, NO_PILE
from pipeline.engine.record import Tallies
from pipeline.records import schema
from pipeline.records.compiling import compiled_on_first_call
from pipeline.records.summary.labels import LABEL_COLUMNS

OUTCOME = "won"  # the measure the pairs, blocks and wins are of: a win, deal by deal
PAIR_LABELS = tuple(f"a_{name}" for name in LABEL_COLUMNS) + tuple(
    f"b_{name}" for name in LABEL_COLUMNS
)
# table -> (key columns after the labels, count columns)
TABLES = {
    "counts": (("won", "down_at_stop", "hint", "restarts", "stray_deaths"), ("n",)),
    "turned": (("won", "cards_turned"), ("n",)),
    "piles": (("won", "rescue_pile"), ("n",)),
    "pairs": (PAIR_LABELS, ("both", "a_only", "b_only", "neither")),
    "blocks": (("wins",), ("n",)),
    "facts": (("won", "kings_at_bottom", "unvisited_at_third_king"), ("n",)),
}
COUNTED = ("counts", "turned", "piles")  # the tables of `Counters`
if {key for table in COUNTED for key in TABLES[table][0]} != set(BY_NAME):
    raise AssertionError("a measure no summary table counts (`measures.MEASURES`)")

# The key columns' types: a per-deal column's own, and the counts' small integers.
VALUE_TYPES = {
    **{name: schema.DEAL_SCHEMA.field(name).type for name in BY_NAME},
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
if (DOWN_RANGE, PILE_RANGE) != tuple(
    int(BY_NAME[m].high) + 1 for m in ("down_at_stop", "rescue_pile")
):
    raise AssertionError("the tallies' ranges are not the measures' (`measures.MEASURES`)")

# Errors the counting pass reports by number (the row is reported with it).
_ERRORS = {
    1: "a value out of the rules' range (down_at_stop, cards_turned, rescue_pile, restarts)",
    2: "a hint that is not a chance the hint can give (d/U, U <= 48)",
    3: "restarts outside a play_out cell",
    4: "a deal outside the shard's range",
    5: "a row of a cell the sweep does not list",
}

_EMPTY_F32 = np.zeros(0, dtype=np.float32)
_EMPTY_I8 = np.zeros(0, dtype=np.int8)
_EMPTY_I64 = np.zeros(0, dtype=np.int64)


class Rows(NamedTuple):
    """Rows to count, as the kernel codes them, in runs of one cell: rows starts[r] ..
    ends[r] - 1 are cell run_cells[r]. A row's deal is deal_offset[i] (per-deal rows) or,
    with ``deal_offset`` empty, its place in its run (kernel results: each run is a cell's
    deals 0, 1, ...). Hints come as floats (``hint_float``, per-deal rows) or as the kernel's
    numerator and denominator. The one argument of the counting pass but its tallies."""

    no_pile: int
    no_count: int
    run_cells: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    deal_offset: np.ndarray
    won: np.ndarray
    cards_turned: np.ndarray
    down_at_stop: np.ndarray
    rescue_pile: np.ndarray
    restarts: np.ndarray
    stray_deaths: np.ndarray
    hint_float: np.ndarray
    hint_num: np.ndarray
    hint_den: np.ndarray

    @property
    def outcome(self) -> np.ndarray:
        """Each row's outcome, a bool: a win."""
        return self.won


def kernel_rows(results: dict[str, np.ndarray]) -> Rows:
    """Kernel results for every cell and deal (``results`` as `kernel.play` gives) as rows."""
    n_cells, count = results[OUTCOME].shape
    flat = {
        name: np.ascontiguousarray(array, dtype=np.int8).reshape(-1)
        for name, array in results.items()
    }
    starts = np.arange(n_cells, dtype=np.int64) * count
    as_coded = {name: flat[name] for name in Rows._fields if name in flat}
    as_coded["won"] = flat["won"].view(np.bool_)
    return Rows(
        NO_PILE,
        NO_COUNT,
        np.arange(n_cells, dtype=np.int64),
        starts,
        starts + count,
        _EMPTY_I64,
        hint_float=_EMPTY_F32,
        **as_coded,
    )


def deal_rows(run_cells, starts, ends, rows: schema.DealColumns) -> Rows:
    """Per-deal rows in runs of one cell (`Rows`; ``rows`` as `schema.DealColumns` codes
    them: each measure its sentinel where it has no value, the hint any value there)."""
    won = np.ascontiguousarray(rows["won"])
    as8 = {
        name: np.ascontiguousarray(rows[name], dtype=np.int8)
        for name in ("cards_turned", "down_at_stop", "rescue_pile", "restarts", "stray_deaths")
    }
    return Rows(
        NO_PILE,
        NO_COUNT,
        np.ascontiguousarray(run_cells, dtype=np.int64),
        np.ascontiguousarray(starts, dtype=np.int64),
        np.ascontiguousarray(ends, dtype=np.int64),
        np.ascontiguousarray(rows.deal_offset, dtype=np.int64),
        won if won.dtype == np.bool_ else won.astype(bool),
        hint_float=np.ascontiguousarray(rows["hint"], dtype=np.float32),
        hint_num=_EMPTY_I8,
        hint_den=_EMPTY_I8,
        **as8,
    )


class Into(NamedTuple):
    """What the counting pass adds rows to: `Counters`' tallies, and, where it fills them, a
    matrix of wins (cells x deals) and of the deals present."""

    restart_slot: np.ndarray
    counts: np.ndarray
    restart_counts: np.ndarray
    turned_piles: np.ndarray
    wins: np.ndarray
    present: np.ndarray


@compiled_on_first_call
def _count(rows, into, fill):
    """Add every row of ``rows`` (`Rows`) to the tallies of ``into`` (`Into`) and, if
    ``fill``, to its win matrix; gives (error number, row) or (0, -1)."""
    (no_pile, no_count, run_cells, starts, ends, deal_offset, won, turned, down, pile) = rows[:10]
    restarts, stray, hint_float, hint_num, hint_den = rows[10:]
    restart_slot, counts, restart_counts, turned_pile_counts, won_matrix, present = into
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


class Counters:
    """The records of a run of deals of ``cells``, counted by value: the dense tallies the
    ``counts``, ``turned`` and ``piles`` tables are the nonzero entries of. `play_out` cells,
    the only ones with restarts, get a tally of their own with the restart digits."""

    def __init__(self, cells):
        n_cells = len(cells)
        replays = [i for i, cell in enumerate(cells) if BY_NAME["restarts"].defined_on(cell)]
        self.restart_slot = np.full(n_cells, -1, dtype=np.int64)
        self.restart_slot[replays] = np.arange(len(replays))
        self.counts = np.zeros((n_cells, COUNT_SIZE), dtype=np.int64)
        self.restart_counts = np.zeros((len(replays), RESTART_SIZE), dtype=np.int64)
        # (won, cards_turned, rescue_pile): `turned` and `piles` are its sums.
        self.turned_piles = np.zeros((n_cells, 2 * TURNED_RANGE * PILE_RANGE), dtype=np.int64)

    def add(self, rows: Rows, wins: np.ndarray, present: np.ndarray, fill: bool) -> None:
        """Count ``rows``; if ``fill``, mark their wins and deals in ``wins`` and ``present``
        (cells x deals). ValueError naming the first row out of the rules' ranges."""
        into = Into(
            self.restart_slot, self.counts, self.restart_counts, self.turned_piles, wins, present
        )
        error, row = _count(rows, into, fill)
        if error:
            raise ValueError(f"record {row}: {_ERRORS[error]}")

    def kernel_tallies(self, facts: np.ndarray) -> Tallies:
        """These tallies shaped as the kernel counts a batch into them (`record.Tallies`),
        with the facts' tally (cells x won x kings x unvisited)."""
        n_cells = len(self.counts)
        return Tallies(
            counts=self.counts.reshape(n_cells, 2, DOWN_RANGE, N_HINT_CODES),
            turned_piles=self.turned_piles.reshape(n_cells, 2, TURNED_RANGE, PILE_RANGE),
            restarts=self.restart_counts.reshape(
                len(self.restart_counts), 2, DOWN_RANGE, RESTART_RANGE, RESTART_RANGE
            ),
            restart_slot=self.restart_slot,
            facts=facts,
            hint_code=HINT_CODE,
        )

    def merge(self, other: Counters) -> None:
        """Add the counts of other deals of the same cells."""
        self.counts += other.counts
        self.restart_counts += other.restart_counts
        self.turned_piles += other.turned_piles

    def columns(self, table: str) -> tuple[np.ndarray, dict[str, pa.Array]]:
        """The rows of ``table`` (counts, turned or piles): each row's cell index, and its
        key and count columns."""
        if table == "counts":
            return self._counts()
        n_cells = len(self.counts)
        by_value = self.turned_piles.reshape(n_cells, 2, TURNED_RANGE, PILE_RANGE)
        if table == "turned":
            tally = by_value.sum(axis=3).reshape(n_cells, 2 * TURNED_RANGE)
            return _won_and(tally, TURNED_RANGE, "cards_turned", None)
        tally = by_value.sum(axis=2).reshape(n_cells, 2 * PILE_RANGE)
        return _won_and(tally, PILE_RANGE, "rescue_pile", 0)

    def _counts(self) -> tuple[np.ndarray, dict[str, pa.Array]]:
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
        return cell, {
            "won": pa.array(won.astype(bool)),
            "down_at_stop": pa.array(down.astype(np.int8)),
            "hint": _masked(hint_value, hint == 0, pa.float32()),
            "restarts": _masked(restarts + NO_COUNT, restarts == 0, pa.int8()),
            "stray_deaths": _masked(stray + NO_COUNT, stray == 0, pa.int8()),
            "n": pa.array(n.astype(np.int64)),
        }


def _won_and(tally: np.ndarray, value_range: int, column: str, null_value):
    """The rows of a tally of (won, a value): cells x (won * value_range + value)."""
    cell, key = np.nonzero(tally)
    n = tally[cell, key]
    won, value = key // value_range, key % value_range
    null = value == null_value if null_value is not None else np.zeros(len(value), dtype=bool)
    return cell, {
        "won": pa.array(won.astype(bool)),
        column: _masked(value, null, pa.int8()),
        "n": pa.array(n.astype(np.int64)),
    }


def _masked(values: np.ndarray, null: np.ndarray, type_: pa.DataType) -> pa.Array:
    return pa.array(
        values.astype(type_.to_pandas_dtype()), type=type_, mask=null if null.any() else None
    )
