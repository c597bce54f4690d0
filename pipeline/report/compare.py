"""Runs compared (`clocksweep compare A B [C ...]`): the config keys that differ, and each cell
the runs share side by side, each run's deals, win rate and interval, and the first run's
rate minus each other's, with its interval.

The difference is **paired** where the two runs play the same deals: the same seed and deal
scheme, and deal numbers both have committed. A deal's result depends on the seed, the deal
number and the cell alone, so there the two runs' wins are compared deal by deal on the deals
they share (the 2 x 2 table of their wins, Newcombe's paired interval, exact McNemar). Both
record modes keep a cell's wins deal by deal: per-deal rows their ``won``, summary records
their ``wins`` table (`records.wins`). Runs of other seeds or deal schemes, or whose deals do
not overlap, are **independent** samples (Newcombe's interval for independent proportions).

Each run's committed shards are read once, in deal order, a shard at a time (the wins of one
shard of each run in memory at once), each file checked against the manifest's sha256 as it
is read (`files.read_wins`); a shard whose file does not verify is not read, and named.
"""

from __future__ import annotations

import math
import string
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pipeline.engine import rules
from pipeline.engine.rules import Cell
from pipeline.inference import stats
from pipeline.report.document import shown_config
from pipeline.report.reading import ReportError, opened, run_cells
from pipeline.store import files, layout, validate

PAIRED, INDEPENDENT = "paired", "independent"
LETTERS = string.ascii_uppercase  # the runs' names in a comparison, in the order given
# Config keys not compared: the sources of strategies of the user's, by digest (the
# ``custom`` keys' digests say whether they differ, in a line each).
NOT_COMPARED = ("custom_source",)


@dataclass
class Run:
    """One run of a comparison: its letter, where it is, its results as `validate` opens
    them, its cells."""

    letter: str
    results: validate.Results
    cells: list[Cell]

    @property
    def where(self) -> str:
        return self.results.location.where

    @property
    def seed(self) -> int:
        return self.results.run.settings.seed

    def describe(self) -> dict:
        run = self.results.run
        return {
            "run": self.letter,
            "where": self.where,
            "name": run.config.get("name"),
            "seed": self.seed,
            "record": run.mode,
            "deals": sum(entry.deals for entry in self.results.entries.values()),
            "cells": len(self.cells),
            "config_hash": run.config_hash,
            "clocksweep": run.clocksweep,
        }


@dataclass
class Comparison:
    """What `compare` found: the runs, the config keys that differ, how each run after the
    first is compared with it, one row a shared cell, and the cells some runs lack."""

    runs: list[Run]
    config_differences: list[dict]
    pairing: list[dict]
    rows: list[dict]
    not_shared: list[dict]
    not_read: list[str] = field(default_factory=list)

    def document(self) -> dict:
        """compare.json's content."""
        return {
            "runs": [run.describe() for run in self.runs],
            "config_differences": self.config_differences,
            "pairing": self.pairing,
            "cells": self.rows,
            "cells_not_shared": self.not_shared,
            "not_read": self.not_read,
        }


def compare(wheres: Sequence[str]) -> Comparison:
    """The runs at ``wheres`` (two or more) compared; ReportError if fewer are given, or one
    is not results the report can read."""
    if len(wheres) < 2:
        raise ReportError("compare: give two results directories or more (A B [C ...])")
    if len(wheres) > len(LETTERS):
        raise ReportError(f"compare: {len(wheres)} results given; at most {len(LETTERS)}")
    runs = []
    for letter, where in zip(LETTERS, wheres):
        results = opened(where)
        runs.append(Run(letter, results, run_cells(results.run)))
    labels = shared_labels(runs)
    cursors = [Cursor(run, labels) for run in runs]
    pairing = [pairing_of(runs[0], run) for run in runs[1:]]
    merge(cursors[0], [c for c, p in zip(cursors[1:], pairing) if p["method"] == PAIRED])
    for cursor in cursors[1:]:  # what the first run's deals did not reach, for the counts
        cursor.drain()
    for cursor, paired in zip(cursors[1:], pairing):
        settle(paired, cursor)
    return Comparison(
        runs,
        config_differences([run.results.run.config for run in runs]),
        pairing,
        cell_rows(runs, labels, cursors, pairing),
        not_shared(runs),
        [problem for cursor in cursors for problem in cursor.not_read],
    )


# --- The configs ------------------------------------------------------------------------------


def flattened(config: dict, prefix: str = "") -> dict:
    """A run record's config as dotted keys (``grid.strategy``, ``run.executor``) and their
    values, its output's credentials shown as ***."""
    flat = {}
    for key, value in (shown_config(config) if not prefix else config).items():
        if key in NOT_COMPARED and not prefix:
            continue
        if isinstance(value, dict) and value:
            flat.update(flattened(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def config_differences(configs: list[dict]) -> list[dict]:
    """Each config key whose value is not the same in every run (missing in one counts as
    differing): ``key`` and ``values``, one a run (None where a run has no such key)."""
    flats = [flattened(config) for config in configs]
    keys = list(dict.fromkeys(key for flat in flats for key in flat))
    differing = []
    for key in keys:
        values = [flat.get(key) for flat in flats]
        present = [key in flat for flat in flats]
        if not all(present) or any(value != values[0] for value in values):
            differing.append({"key": key, "values": values})
    return differing


# --- The cells --------------------------------------------------------------------------------


def shared_labels(runs: list[Run]) -> list[str]:
    """The labels of the cells every run has, in the first run's order."""
    others = [{cell.label for cell in run.cells} for run in runs[1:]]
    return [cell.label for cell in runs[0].cells if all(cell.label in o for o in others)]


def not_shared(runs: list[Run]) -> list[dict]:
    """Each cell some run lacks: its label, and the runs that have it."""
    having: dict[str, list[str]] = {}
    for run in runs:
        for cell in run.cells:
            having.setdefault(cell.label, []).append(run.letter)
    return [{"label": label, "in": ins} for label, ins in having.items() if len(ins) < len(runs)]


# --- Reading the wins -------------------------------------------------------------------------


class Cursor:
    """A run's wins, cells x deals, a committed shard at a time in deal order (``chunk``:
    its first deal and its wins; None past the last), counted into each cell's deals and
    wins as each is read."""

    def __init__(self, run: Run, labels: list[str]):
        self.run = run
        self.table = layout.wins_table_of(run.results.run.mode)
        # Where each label's row is, in each cell group's wins.
        self.rows = [
            [
                (labels.index(cell.label), at)
                for at, cell in enumerate(group.cells)
                if cell.label in labels
            ]
            for group in run.results.cell_groups
        ]
        self.n = np.zeros(len(labels), dtype=np.int64)
        self.wins = np.zeros(len(labels), dtype=np.int64)
        self.not_read: list[str] = []
        # With the first run, where this one is paired with it (`merge`).
        self.table_with_first: Table | None = None
        self.shards = iter(sorted(run.results.entries.values(), key=lambda entry: entry.first))
        self.chunk: tuple[int, np.ndarray] | None = None
        self.advance()

    @property
    def end(self) -> int:
        """The deal after the chunk's last."""
        first, won = self.chunk
        return first + won.shape[1]

    def advance(self) -> None:
        """The next shard that verifies, counted (None past the last)."""
        for entry in self.shards:
            try:
                won = self.shard_wins(entry)
            except ValueError as error:
                self.not_read.append(f"{self.run.letter}: shard {entry.index} not read: {error}")
                continue
            self.n += won.shape[1]
            self.wins += won.sum(axis=1)
            self.chunk = (entry.first, won)
            return
        self.chunk = None

    def shard_wins(self, entry) -> np.ndarray:
        """The shared cells' wins over a shard's deals, from each cell group's file."""
        results = self.run.results
        won = np.zeros((len(self.n), entry.deals), dtype=bool)
        records = {layout.group_of(record.path): record for record in entry.files_of(self.table)}
        for group, rows in zip(results.cell_groups, self.rows):
            if not rows:
                continue
            if group.index not in records:
                raise ValueError(f"no {self.table} file of cell group {group.index}")
            group_won = files.read_wins(
                results.location, records[group.index], group.cells, entry.first, entry.deals
            )
            for row, at in rows:
                won[row] = group_won[at]
        return won

    def drain(self) -> None:
        while self.chunk is not None:
            self.advance()


@dataclass
class Table:
    """Each shared cell's 2 x 2 table of two runs' wins on the deals both played."""

    both: np.ndarray
    a_only: np.ndarray
    b_only: np.ndarray
    deals: int = 0  # the deals both played

    @classmethod
    def empty(cls, cells: int) -> Table:
        return cls(*(np.zeros(cells, dtype=np.int64) for _ in range(3)))

    def add(self, a: np.ndarray, b: np.ndarray) -> None:
        self.both += (a & b).sum(axis=1)
        self.a_only += (a & ~b).sum(axis=1)
        self.b_only += (~a & b).sum(axis=1)
        self.deals += a.shape[1]

    def paired(self, cell: int) -> stats.Paired:
        both, a_only, b_only = self.both[cell], self.a_only[cell], self.b_only[cell]
        return stats.paired_difference(both, a_only, b_only, self.deals - both - a_only - b_only)


def merge(first: Cursor, paired: list[Cursor]) -> None:
    """Read every run once, in deal order: the first run's shards one by one, each paired
    run's as far as they overlap it, each overlap added to that run's `Table`
    (``cursor.table_with_first``)."""
    for cursor in paired:
        cursor.table_with_first = Table.empty(len(first.n))
    while first.chunk is not None:
        start, won = first.chunk
        end = first.end
        for cursor in paired:
            while cursor.chunk is not None and cursor.end <= start:
                cursor.advance()
            while cursor.chunk is not None and cursor.chunk[0] < end:
                theirs, their_won = cursor.chunk
                low, high = max(start, theirs), min(end, cursor.end)
                cursor.table_with_first.add(
                    won[:, low - start : high - start], their_won[:, low - theirs : high - theirs]
                )
                if cursor.end > end:
                    break
                cursor.advance()
        first.advance()


def pairing_of(first: Run, other: Run) -> dict:
    """How ``other`` is compared with the first run, before any deal is read: paired where
    both play the same deals (`settle` finds whether they share any), else independent."""
    record = {"a": first.letter, "b": other.letter, "method": PAIRED, "deals": None}
    a, b = first.results.run, other.results.run
    if first.seed != other.seed:
        why = f"seeds differ ({first.seed}, {other.seed}): independent samples"
    elif a.deal_scheme != b.deal_scheme:
        why = f"deal schemes differ ({a.deal_scheme}, {b.deal_scheme}): independent samples"
    else:
        return record | {"why": f"same seed ({first.seed}) and deal scheme"}
    return record | {"method": INDEPENDENT, "why": why}


def settle(pairing: dict, cursor: Cursor) -> None:
    """A paired comparison's deals in common, or, where it found none, independent."""
    if pairing["method"] != PAIRED:
        return
    deals = cursor.table_with_first.deals
    if deals:
        pairing.update(
            deals=deals, why=f"{pairing['why']}: paired on the {deals:,} deals both hold"
        )
    else:
        pairing.update(
            method=INDEPENDENT,
            why=f"{pairing['why']}, but no deal committed in both: independent samples",
        )


# --- The rows ---------------------------------------------------------------------------------


def cell_rows(runs: list[Run], labels: list[str], cursors: list[Cursor], pairing) -> list[dict]:
    """One row a shared cell: its axes, each run's n, wins, rate and interval (``a_n``,
    ``b_win_rate``, ...), and the first run's rate minus each other's with its interval
    (``a_minus_b``, ``a_minus_b_low``, ``a_minus_b_high``, ``..._method``, and where paired
    the deals both hold and McNemar's p)."""
    by_label = {cell.label: cell for cell in runs[0].cells}
    rows = []
    for index, label in enumerate(labels):
        cell = by_label[label]
        row = {"label": label, **{axis: getattr(cell, axis) for axis in rules.AXES}}
        for run, cursor in zip(runs, cursors):
            row.update(rate_columns(run.letter.lower(), cursor, index))
        first = cursors[0]
        for cursor, paired in zip(cursors[1:], pairing):
            row.update(difference_columns(first, cursor, paired, index))
        rows.append(row)
    return rows


def rate_columns(letter: str, cursor: Cursor, index: int) -> dict:
    n, wins = int(cursor.n[index]), int(cursor.wins[index])
    low, high = stats.wilson(wins, n)
    return {
        f"{letter}_n": n,
        f"{letter}_wins": wins,
        f"{letter}_win_rate": wins / n if n else math.nan,
        f"{letter}_ci_low": low,
        f"{letter}_ci_high": high,
    }


def difference_columns(first: Cursor, other: Cursor, pairing: dict, index: int) -> dict:
    name = f"{pairing['a']}_minus_{pairing['b']}".lower()
    if pairing["method"] == PAIRED:
        paired = other.table_with_first.paired(index)
        difference, low, high = paired.difference, paired.low, paired.high
        deals, p_value = paired.n, paired.p_value
    else:
        difference, low, high = stats.independent_difference(
            int(first.wins[index]), int(first.n[index]), int(other.wins[index]), int(other.n[index])
        )
        deals = p_value = None
    return {
        name: difference,
        f"{name}_low": low,
        f"{name}_high": high,
        f"{name}_method": pairing["method"],
        f"{name}_deals": deals,
        f"{name}_mcnemar_p": p_value,
    }
