"""`clocksweep report RESULTS`: a results directory read into tables, intervals, tests, claims and plots.

Reading. Only shards the manifest lists, and whose files still verify (size, rows, schema,
config hash, sha256: `records.shard_problem`), are read; the rest are named in the report.
Both record modes end in the same summary tables (`pipeline.summary`):

- ``summary`` records are already counts: Polars scans each table's committed files lazily
  and sums the counts over equal keys (`summary.TABLES`).
- ``deals`` records (one row per deal x cell) are counted shard by shard, a row group at a
  time (memory stays bounded by the shard size, never the sweep), by the same counting code
  the sweep's summary mode runs (`summary.ShardSummary`), then summed in Polars. Shards are
  checked and counted in parallel threads (pyarrow decodes and numba counts without the GIL).
  The per-row pass is not a Polars group-by, by measurement on this two-core machine: Polars
  decodes the dictionary label columns as Categoricals at ~25 ns a row each, and a hash
  group-by over 10^8 rows took 15-20 s, while the pair and block tables need the rows
  aligned by deal anyway. Here a label column costs one vectorised comparison per batch (its
  runs), and a record one pass of numba (~20 ns).
- The deal facts two claims need (kings at the bottom, hours unvisited at the third king)
  are counted on standard cells, in each shard's ``facts`` table in both record modes; a
  sweep without a standard cell gets a replay of its first ``--replay`` deals by the kernel
  instead (`claims.replay_standard`).

Figures (all from the summed tables): per-cell win rates with Wilson intervals, and the
exact value, difference and z-score where `odds.exact_win_of` has one (|z| > 4 flagged);
paired comparisons (the difference with Newcombe's interval, exact McNemar); distributions
(cards turned against the Score Four law with a chi-square, cards left at the first death,
`play_out` restarts and stray deaths, rescue win rate by cards left against its exact value);
the hint's calibration; the claims of SPEC section 7 (`pipeline.claims`); provenance.

Writing: RESULTS/report/ gets report.md, a self-contained report.html (plots inline as
base64 PNG, no external reference), the plots as PNG, the tables as CSV, and report.json
(SPEC section 8: ``cells``, ``comparisons``, ``claims``, plus the rest).
"""

from __future__ import annotations

import base64
import csv
import html
import json
import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pipeline import __version__
from pipeline.report import claims as claim_rules
from pipeline.engine import odds, rules
from pipeline.report import plots, stats
from pipeline.store import files, layout, location, records, validate
from pipeline.records import summary
from pipeline.engine.rules import Cell

REPORT_VERSION = "clocksweep-report/1"
DEFAULT_REPLAY = 100_000
Z_FLAG = 4.0


# Exact values are rationals computed by counting: compute each once per process.
exact_win_of = lru_cache(maxsize=None)(odds.exact_win_of)
rescue_win_given_down = lru_cache(maxsize=None)(odds.rescue_win_given_down)


class ReportError(ValueError):
    """RESULTS is not a results directory the report can read; the message says why."""


# --- Reading ------------------------------------------------------------------------------


@dataclass
class Loaded:
    """What the report read: the run record, the shards, the summed summary tables."""

    where: str
    location: location.Location
    run: dict
    mode: str
    cells: list[Cell]
    shards_read: list[dict]
    problems: list[str]
    tables: dict[str, pl.DataFrame]
    head_won: dict[Cell, tuple[int, np.ndarray]] = field(default_factory=dict)


def run_cells(run: dict) -> list[Cell]:
    try:
        return [Cell(c["variant"], c.get("strategy"), c["finale"], c["order"], c.get("depth"))
                for c in run.get("cells", [])]
    except (KeyError, TypeError, rules.RuleError) as error:
        raise ReportError(f"run.json: its cells are not cells of the rules ({error})") from None


def load(where: str, head: int = 0, workers: int | None = None) -> Loaded:
    """Read a results directory into summed summary tables (see the module docstring).

    ``head``: in per-deal mode, keep the recorded wins of the first ``head`` deals of each
    standard cell, for the replay check.
    """
    try:
        results = validate.open_results(where)
    except layout.ResultsError as error:
        raise ReportError(str(error)) from None
    location, run = results.location, results.run
    mode = run.get("record") or run["config"].get("record")
    if mode not in ("deals", "summary"):
        raise ReportError(f"{where}: run.json names no record mode this report reads ({mode!r})")
    if results.unusable:  # run.json or the whole manifest: nothing in it can be trusted
        raise ReportError(f"{where}: {results.unusable}")
    if results.manifest_missing:
        raise ReportError(f"{where}: no manifest.json, so no committed shard to read")
    cells = run_cells(run)
    config_hash = run["config_hash"]
    schemas = files.expected_schemas(mode)
    plan = results.plan
    committed = [results.entries[index] for index in sorted(results.entries)]

    def verified(entry: dict) -> str | None:
        return records.shard_problem(location, entry, plan[entry["index"]], config_hash, schemas)

    workers = workers or min(len(committed), os.cpu_count() or 1) or 1
    decode_threads = workers < (os.cpu_count() or 1)  # else the shards read fill the cores
    head_won: dict[Cell, tuple[int, np.ndarray]] = {}
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            if mode == "summary":
                problems_found = list(pool.map(verified, committed))
                entries = [e for e, problem in zip(committed, problems_found) if not problem]
                results_read = None
            else:
                # Each worker checks its shard, then counts it: sha256 and decoding side by side.
                def verified_shard(entry):
                    problem = verified(entry)
                    if problem:
                        return problem, None
                    try:
                        return None, _deal_shard(location, entry, cells, head, decode_threads)
                    except (ValueError, pa.ArrowException) as error:
                        return f"unreadable records: {error}", None

                outcome = list(pool.map(verified_shard, committed))
                problems_found = [problem for problem, _ in outcome]
                entries = [e for e, (problem, _) in zip(committed, outcome) if not problem]
                results_read = [result for problem, result in outcome if not problem]
        problems = [problem if index is None else f"shard {index} not read: {problem}"
                    for index, problem in results.problems if index not in results.entries]
        problems += [f"shard {index}: {problem}" for index, problem in results.problems
                     if index in results.entries]  # listed twice, identically: read once
        problems += [f"shard {e['index']} not read: {p}" for e, p in zip(committed, problems_found) if p]
        if not entries:
            raise ReportError(f"{where}: no committed shard verifies, nothing to report"
                              + (f" ({problems[0]})" if problems else ""))
        if mode == "summary":
            tables = _summed_summary(location, entries)
        else:
            tables, head_won = _summed_deals(results_read)
            tables.update(_summed_summary(location, entries, [layout.FACTS_TABLE]))
    except (OSError, pl.exceptions.PolarsError) as error:
        # The files changed under the report (a run started over there, or a disk failed).
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ReportError(f"{where}: the results changed or failed while being read "
                          f"({first_line}); rerun the report once no run is writing there") from None
    return Loaded(where, location, run, mode, cells, entries, problems, tables, head_won)


def _group_columns(table: str) -> list[str]:
    keys, _ = summary.TABLES[table]
    return list(keys) if table == "pairs" else list(summary.LABEL_COLUMNS) + list(keys)


def _sum_frames(table: str, frame: pl.LazyFrame) -> pl.DataFrame:
    group = _group_columns(table)
    counts = list(summary.TABLES[table][1])
    return (frame.group_by(group).agg(pl.col(counts).sum())
            .sort(group, nulls_last=False).collect())


def _summed_summary(location: location.Location, entries: list[dict],
                    names=tuple(summary.TABLES)) -> dict[str, pl.DataFrame]:
    """Summary tables ``names`` summed over the shards' files of them."""
    tables = {}
    for table in names:
        uris = [location.uri(r["path"]) for e in entries for r in e["files"] if r["table"] == table]
        if not uris:
            tables[table] = pl.from_arrow(summary.SCHEMAS[table].empty_table())
            continue
        tables[table] = _sum_frames(table, pl.scan_parquet(uris))
    return tables


def _summed_deals(results):
    """Per-shard summary tables (and recorded head wins) of per-deal shards, summed."""
    tables = {}
    for table in summary.TABLES:
        frame = pl.concat([pl.from_arrow(part[table]) for part, _ in results], how="vertical")
        tables[table] = _sum_frames(table, frame.lazy())
    head_won: dict[Cell, tuple[int, np.ndarray]] = {}
    for _, heads in results:
        for cell, (first, won) in heads.items():
            if cell in head_won:
                start, have = head_won[cell]
                if start + len(have) == first:
                    head_won[cell] = (start, np.concatenate([have, won]))
            else:
                head_won[cell] = (first, won)
    return tables, head_won


def _label_codes(column: pa.Array, name: str) -> tuple[np.ndarray, np.ndarray]:
    """A label column of a row batch: (dictionary index per row, index in the rules' names
    per dictionary entry, then the names' count for null)."""
    names = rules.AXES[name]
    n = len(column)
    if column.null_count == n:
        return np.zeros(n, dtype=np.int8), np.array([len(names)])
    if not pa.types.is_dictionary(column.type):
        column = pc.dictionary_encode(column)
    dictionary = column.dictionary.to_pylist()
    unknown = [v for v in dictionary if v not in names]
    if unknown:
        raise ValueError(f"{name}: {unknown[0]!r} is not a name of the rules")
    indices = column.indices
    if column.null_count:
        indices = pc.fill_null(indices, len(dictionary))
    return (indices.to_numpy(zero_copy_only=False),
            np.array([names.index(v) for v in dictionary] + [len(names)]))


def _batch_runs(batch, cell_lut: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A row batch's rows as runs of one cell: (cell index per run, starts, ends).

    Labels come in long runs (a writer writes a cell's deals together), so each label's
    changes are found by one vectorised comparison and only run starts are looked up.
    """
    n = batch.num_rows
    labels = [(name, *_label_codes(batch.column(name), name)) for name in summary.LABEL_COLUMNS]
    change = np.unique(np.concatenate(
        [np.flatnonzero(index[1:] != index[:-1]) + 1 for _, index, _ in labels]))
    starts = np.concatenate(([0], change)).astype(np.int64)
    ends = np.concatenate((change, [n])).astype(np.int64)
    code = np.zeros(len(starts), dtype=np.int64)
    for (_, index, lut), radix in zip(reversed(labels), reversed(summary.LABEL_RADICES)):
        code = code * int(radix) + lut[index[starts].astype(np.int64)]
    return cell_lut[code], starts, ends


def _filled(column: pa.Array, fill, dtype) -> np.ndarray:
    if column.null_count:
        column = pc.fill_null(column, fill)
    return column.to_numpy(zero_copy_only=False).astype(dtype, copy=False)


DEAL_COLUMNS = ["deal", *summary.LABEL_COLUMNS, "won", "cards_turned", "down_at_stop",
                "rescue_pile", "hint", "restarts", "stray_deaths"]


def _row_batches(parquet: pq.ParquetFile, columns: list[str], threads: bool):
    """The file's rows as record batches, a row group at a time (cheaper than `iter_batches`);
    decoded on Arrow's threads, or on this one (when shards are read side by side already)."""
    for group in range(parquet.num_row_groups):
        yield from parquet.read_row_group(group, columns=columns, use_threads=threads).to_batches()


def _deal_shard(location, entry, cells, head, decode_threads):
    """One per-deal shard counted into summary tables (plus the first ``head`` wins of standard cells)."""
    first, last = int(entry["first"]), int(entry["last"])
    shard = summary.ShardSummary(cells, first, last - first + 1)
    cell_lut = summary.label_code_lut(cells)
    for record in entry["files"]:
        if record["table"] != layout.DEALS_TABLE:
            continue
        with location.fs.open_input_file(location.full(record["path"])) as file:
            parquet = pq.ParquetFile(file)
            for batch in _row_batches(parquet, DEAL_COLUMNS, decode_threads):
                try:
                    run_cells, starts, ends = _batch_runs(batch, cell_lut)
                    columns = (
                        (batch.column("deal").to_numpy() - np.uint64(first)).view(np.int64),
                        batch.column("won").to_numpy(zero_copy_only=False),
                        _filled(batch.column("cards_turned"), 0, np.int8),
                        _filled(batch.column("down_at_stop"), 0, np.int8),
                        _filled(batch.column("rescue_pile"), 0, np.int8),
                        _filled(batch.column("hint"), 0.0, np.float32),
                        _filled(batch.column("restarts"), -1, np.int8),
                        _filled(batch.column("stray_deaths"), -1, np.int8),
                    )
                    if (run_cells < 0).any():
                        raise ValueError("rows of a cell the run does not list")
                    if len(starts) > max(1024, batch.num_rows // 256):  # rows not grouped by cell
                        shard.add_rows(np.repeat(run_cells, ends - starts), *columns)
                    else:
                        shard.add_runs(run_cells, starts, ends, *columns)
                except ValueError as error:
                    raise ValueError(f"{record['path']}: {error}") from None
    heads = {}
    if head:
        for index, cell in enumerate(cells):
            if rules.wins_as_standard(cell.variant):
                keep = min(head, shard.count)
                if shard.present[index, :keep].all():
                    heads[cell] = (first, shard.won[index, :keep].copy())
    return shard.tables(), heads


# --- Figures ------------------------------------------------------------------------------


@dataclass
class CellFigure:
    cell: Cell
    n: int
    wins: int
    low: float
    high: float
    exact: odds.Fraction | None = None
    z: float | None = None

    @property
    def rate(self) -> float:
        return self.wins / self.n if self.n else math.nan

    def record(self) -> dict:
        exact = self.exact
        return {
            "label": self.cell.label,
            "variant": self.cell.variant,
            "strategy": self.cell.strategy,
            "finale": self.cell.finale,
            "order": self.cell.order,
            "depth": self.cell.depth,
            "n": self.n,
            "wins": self.wins,
            "win_rate": self.rate,
            "ci_low": self.low,
            "ci_high": self.high,
            "exact": odds.fraction_text(exact) if exact is not None else None,
            "exact_value": float(exact) if exact is not None else None,
            "difference": self.rate - float(exact) if exact is not None else None,
            "z": self.z,
            "flag": bool(self.z is not None and abs(self.z) > Z_FLAG),
        }


def cell_of(row: dict, prefix: str = "") -> Cell:
    return _cell(row[f"{prefix}variant"], row[f"{prefix}strategy"], row[f"{prefix}finale"],
                 row[f"{prefix}order"], row[f"{prefix}depth"])


@lru_cache(maxsize=None)
def _cell(*labels) -> Cell:
    """A cell by its labels, checked once: tables name the same few cells row after row."""
    return Cell(*labels)


def _label_filter(cell: Cell, prefix: str = "") -> pl.Expr:
    expr = pl.lit(True)
    for name in summary.LABEL_COLUMNS:
        value = getattr(cell, name)
        column = pl.col(f"{prefix}{name}")
        expr = expr & (column.is_null() if value is None else (column.cast(pl.String) == value))
    return expr


class Figures:
    """Every figure of the report, computed from the summed summary tables."""

    def __init__(self, loaded: Loaded, replay: claim_rules.Replay | None = None, replay_note: str = ""):
        self.loaded = loaded
        self.mode = loaded.mode
        self.tables = loaded.tables
        self.replay = replay
        self.replay_note = replay_note
        order = {cell: i for i, cell in enumerate(loaded.cells)}
        per_cell = (self.tables["counts"]
                    .group_by(list(summary.LABEL_COLUMNS))
                    .agg(n=pl.col("n").sum(), wins=pl.col("n").filter(pl.col("won")).sum()))
        cells = {}
        for row in per_cell.iter_rows(named=True):
            cell = cell_of(row)
            n, wins = int(row["n"]), int(row["wins"] or 0)
            low, high = stats.wilson(wins, n)
            exact = exact_win_of(cell)
            z = stats.z_against(wins, n, float(exact)) if exact is not None and n else None
            cells[cell] = CellFigure(cell, n, wins, low, high, exact, z)
        self.cells: dict[Cell, CellFigure] = dict(
            sorted(cells.items(), key=lambda item: order.get(item[0], len(order))))
        self._pairs = {}
        for row in self.tables["pairs"].iter_rows(named=True):
            a, b = cell_of(row, "a_"), cell_of(row, "b_")
            self._pairs[(a, b)] = (row["both"], row["a_only"], row["b_only"], row["neither"])

    # --- lookups used by the claims ------------------------------------------------------

    def paired(self, a: Cell, b: Cell, confidence: float = stats.CONFIDENCE) -> stats.Paired | None:
        """a's win rate minus b's on the deals both played, or None if they were not paired."""
        if (a, b) in self._pairs:
            both, a_only, b_only, neither = self._pairs[(a, b)]
        elif (b, a) in self._pairs:
            both, b_only, a_only, neither = self._pairs[(b, a)]
        else:
            return None
        return stats.paired_difference(both, a_only, b_only, neither, confidence)

    def deal_facts(self) -> tuple[Cell, list[tuple[bool, int, int, int]]] | None:
        """The primary standard cell's (won, kings_at_bottom, unvisited_at_third_king, n), if recorded."""
        facts = self.tables["facts"]
        if facts.is_empty():
            return None
        cells = sorted({cell_of(row) for row in facts.select(summary.LABEL_COLUMNS).unique().iter_rows(named=True)},
                       key=lambda c: (rules.ORDERS.index(c.order), rules.FINALES.index(c.finale)))
        cell = cells[0]
        rows = facts.filter(_label_filter(cell)).sort("won", "kings_at_bottom", "unvisited_at_third_king")
        return cell, [(r["won"], r["kings_at_bottom"], r["unvisited_at_third_king"], r["n"])
                      for r in rows.iter_rows(named=True)]

    def near_misses(self, cell: Cell, low: int, high: int) -> tuple[int, int]:
        frame = self.tables["counts"].filter(
            _label_filter(cell) & pl.col("down_at_stop").is_between(low, high))
        n = int(frame["n"].sum())
        wins = int(frame.filter(pl.col("won"))["n"].sum())
        return n, wins

    def loss_blocks(self, cell: Cell) -> tuple[int, int]:
        frame = self.tables["blocks"].filter(_label_filter(cell))
        return int(frame["n"].sum()), int(frame.filter(pl.col("wins") == 0)["n"].sum())

    def won_turned(self, cells: list[Cell]) -> tuple[int, int]:
        frame = self.tables["turned"].filter(pl.col("won"))
        frame = frame.filter(pl.any_horizontal([_label_filter(c) for c in cells]))
        return int(frame["n"].sum()), int(frame.filter(pl.col("cards_turned") == rules.N_CARDS)["n"].sum())

    def rescue_win_turned(self) -> list[str]:
        frame = (self.tables["turned"]
                 .filter(pl.col("won") & pl.col("variant").cast(pl.String).is_in(list(rules.RESCUE_VARIANTS)))
                 .group_by("variant", "cards_turned").agg(pl.col("n").sum())
                 .sort("variant", "cards_turned"))
        return [f"{row['variant']} {row['n']:,} wins at {row['cards_turned']} cards"
                for row in frame.iter_rows(named=True)]

    def play_out_deaths(self, cells: list[Cell]) -> tuple[int, int, int]:
        frame = self.tables["counts"].filter(pl.any_horizontal([_label_filter(c) for c in cells]))
        deals = int(frame["n"].sum())
        later = int((frame["restarts"].cast(pl.Int64) * frame["n"]).sum() or 0)
        stray = int((frame["stray_deaths"].cast(pl.Int64) * frame["n"]).sum() or 0)
        return deals, later, stray

    # --- tables of the report ------------------------------------------------------------

    def cell_records(self) -> list[dict]:
        return [figure.record() for figure in self.cells.values()]

    def comparisons(self) -> list[dict]:
        """Paired differences: strategies under one variant, and the rules' other axes."""
        out = []
        for (a, b) in self._pairs:
            kind = comparison_kind(a, b)
            if kind is None:
                continue
            if kind == "foresight" and a.strategy != "informed":
                a, b = b, a
            paired = self.paired(a, b)
            out.append({
                "kind": kind,
                "a": a.label,
                "b": b.label,
                "variant": a.variant if a.variant == b.variant else f"{a.variant} vs {b.variant}",
                "a_strategy": a.strategy,
                "b_strategy": b.strategy,
                "finale": a.finale if a.finale == b.finale else f"{a.finale} vs {b.finale}",
                "order": a.order if a.order == b.order else f"{a.order} vs {b.order}",
                "depth": a.depth if a.depth == b.depth else f"{a.depth} vs {b.depth}",
                "n": paired.n,
                "a_rate": paired.a_rate,
                "b_rate": paired.b_rate,
                "difference": paired.difference,
                "ci_low": paired.low,
                "ci_high": paired.high,
                "a_only": paired.a_only,
                "b_only": paired.b_only,
                "mcnemar_p": paired.p_value,
            })
        kinds = ("strategy", "foresight", "order", "finale", "rescue_vs_standard")
        order = {cell.label: i for i, cell in enumerate(self.cells)}
        out.sort(key=lambda r: (kinds.index(r["kind"]), order.get(r["a"], 0), order.get(r["b"], 0)))
        return out

    def best_strategies(self) -> list[dict]:
        """Per variant x finale x order x depth: the best strategy a player can use, and its margin."""
        groups: dict[tuple, list[Cell]] = {}
        for cell in self.cells:
            if cell.strategy and cell.strategy not in rules.PEEKING_STRATEGIES:
                groups.setdefault((cell.variant, cell.finale, cell.order, cell.depth), []).append(cell)
        out = []
        for (variant, finale, order, depth), cells in groups.items():
            ranked = sorted(cells, key=lambda c: self.cells[c].rate, reverse=True)
            best = ranked[0]
            record = {"variant": variant, "finale": finale, "order": order, "depth": depth,
                      "best": best.strategy, "win_rate": self.cells[best].rate,
                      "ci_low": self.cells[best].low, "ci_high": self.cells[best].high,
                      "runner_up": None, "margin": None, "margin_low": None, "margin_high": None,
                      "mcnemar_p": None, "oracle": None}
            oracle = Cell(variant, "oracle", finale, order, depth)
            if oracle in self.cells:
                record["oracle"] = self.cells[oracle].rate
            if len(ranked) > 1:
                paired = self.paired(best, ranked[1])
                record.update(runner_up=ranked[1].strategy)
                if paired is not None:
                    record.update(margin=paired.difference, margin_low=paired.low,
                                  margin_high=paired.high, mcnemar_p=paired.p_value)
            record["line"] = best_line(record)
            out.append(record)
        return out

    def cards_turned(self) -> list[dict]:
        """Cards turned in standard play against the Score Four law, per standard cell."""
        law = odds.cards_turned_law()
        out = []
        for cell in self.cells:
            if cell.variant != "standard":
                continue
            frame = (self.tables["turned"].filter(_label_filter(cell))
                     .group_by("cards_turned").agg(pl.col("n").sum()))
            observed = {int(r["cards_turned"]): int(r["n"]) for r in frame.iter_rows(named=True)}
            fit = stats.chisquare_gof(observed, {t: float(p) for t, p in law.items()})
            total = sum(observed.values())
            rows = [{"cards_turned": t, "observed": observed.get(t, 0),
                     "observed_share": observed.get(t, 0) / total if total else 0.0,
                     "exact": float(law.get(t, 0))} for t in range(1, rules.N_CARDS + 1)
                    if t in law or t in observed]
            out.append({"cell": cell.label, "n": total, "chi2": fit.statistic, "dof": fit.dof,
                        "p_value": fit.p_value, "bins": len(fit.bins), "rows": rows})
        return out

    def down_at_stop(self) -> list[dict]:
        """Cards face down at the first death, per deal order (every cell of an order shares it)."""
        law = odds.down_at_stop_law()
        out = []
        seen_orders = set()
        for cell in self.cells:
            if cell.order in seen_orders:
                continue
            seen_orders.add(cell.order)
            frame = (self.tables["counts"].filter(_label_filter(cell))
                     .group_by("down_at_stop").agg(pl.col("n").sum()))
            observed = {int(r["down_at_stop"]): int(r["n"]) for r in frame.iter_rows(named=True)}
            fit = stats.chisquare_gof(observed, {u: float(p) for u, p in law.items()})
            total = sum(observed.values())
            out.append({"order": cell.order, "cell": cell.label, "n": total, "chi2": fit.statistic,
                        "dof": fit.dof, "p_value": fit.p_value,
                        "rows": [{"down_at_stop": u, "observed": observed.get(u, 0),
                                  "observed_share": observed.get(u, 0) / total if total else 0.0,
                                  "exact": float(law[u])} for u in sorted(law)]})
        return out

    def restarts(self) -> list[dict]:
        out = []
        for cell in self.cells:
            if cell.variant != "play_out":
                continue
            frame = (self.tables["counts"].filter(_label_filter(cell))
                     .group_by("restarts").agg(pl.col("n").sum(),
                                               stray=(pl.col("stray_deaths").cast(pl.Int64) * pl.col("n")).sum())
                     .sort("restarts"))
            rows = [{"restarts": int(r["restarts"]), "n": int(r["n"]), "stray_deaths": int(r["stray"] or 0)}
                    for r in frame.iter_rows(named=True)]
            total = sum(r["n"] for r in rows)
            mean = sum(r["restarts"] * r["n"] for r in rows) / total if total else math.nan
            out.append({"cell": cell.label, "n": total, "mean_restarts": mean,
                        "later_deaths": sum(r["restarts"] * r["n"] for r in rows),
                        "stray_deaths": sum(r["stray_deaths"] for r in rows), "rows": rows})
        return out

    def rescue_by_down(self) -> list[dict]:
        """Rescue win rate by cards face down at the first death, with the exact value where known."""
        frame = (self.tables["counts"]
                 .filter(pl.col("variant").cast(pl.String).is_in(list(rules.RESCUE_VARIANTS))
                         & (pl.col("down_at_stop") > 0))
                 .group_by(*summary.LABEL_COLUMNS, "down_at_stop")
                 .agg(n=pl.col("n").sum(), wins=pl.col("n").filter(pl.col("won")).sum()))
        out = []
        rows = list(frame.iter_rows(named=True))
        lows, highs = stats.wilson_arrays([r["wins"] or 0 for r in rows], [r["n"] for r in rows])
        for row, low, high in zip(rows, lows, highs):
            cell = cell_of(row)
            n, wins, down = int(row["n"]), int(row["wins"] or 0), int(row["down_at_stop"])
            exact = None
            if exact_win_of(cell) is not None and cell.strategy in rules.COUNT_STRATEGIES:
                exact = float(rescue_win_given_down(cell.strategy, down))
            out.append({"cell": cell.label, "down_at_stop": down, "n": n, "wins": wins,
                        "win_rate": wins / n, "ci_low": float(low), "ci_high": float(high),
                        "exact": exact})
        order = {cell.label: i for i, cell in enumerate(self.cells)}
        out.sort(key=lambda r: (order.get(r["cell"], 0), r["down_at_stop"]))
        return out

    def hint_calibration(self, bins: int = 10) -> list[dict]:
        """Per rescue cell: the hint's chance, binned, against the observed win rate, and a test.

        The hint is the chance given what the player sees, so `oracle`, which peeks, is left out.
        """
        frame = (self.tables["counts"].filter(pl.col("hint").is_not_null())
                 .group_by(*summary.LABEL_COLUMNS, "hint")
                 .agg(n=pl.col("n").sum(), wins=pl.col("n").filter(pl.col("won")).sum()))
        per_cell: dict[Cell, list[tuple[float, int, int]]] = {}
        for row in frame.iter_rows(named=True):
            if row["strategy"] in rules.PEEKING_STRATEGIES:
                continue  # oracle peeks, so the player's chance does not describe its picks
            per_cell.setdefault(cell_of(row), []).append(
                (float(row["hint"]), int(row["n"]), int(row["wins"] or 0)))
        out = []
        for cell in self.cells:
            if cell not in per_cell:
                continue
            groups = sorted(per_cell[cell])  # a fixed order: float sums independent of row order
            statistic, dof, p_value = stats.calibration_test(groups)
            rows = []
            for b in range(bins):
                lo, hi = b / bins, (b + 1) / bins
                inside = [(p, n, w) for p, n, w in groups if lo <= p < hi or (b == bins - 1 and p == 1.0)]
                n = sum(g[1] for g in inside)
                if not n:
                    continue
                wins = sum(g[2] for g in inside)
                predicted = sum(p * m for p, m, _ in inside) / n
                low, high = stats.wilson(wins, n)
                rows.append({"bin": f"{lo:.1f}-{hi:.1f}", "n": n, "predicted": predicted,
                             "observed": wins / n, "ci_low": low, "ci_high": high})
            out.append({"cell": cell.label, "chi2": statistic, "dof": dof, "p_value": p_value,
                        "rows": rows})
        return out


def comparison_kind(a: Cell, b: Cell) -> str | None:
    """What a pair of cells compares, for report.json, or None (kept in pairs.csv only)."""
    same = {name: getattr(a, name) == getattr(b, name) for name in summary.LABEL_COLUMNS}
    differ = [name for name, equal in same.items() if not equal]
    if differ == ["strategy"]:
        return "strategy"
    if differ == ["order"]:
        return "order"
    if differ == ["finale"]:
        return "finale"
    if sorted(differ) == ["finale", "strategy"] and "informed" in (a.strategy, b.strategy):
        informed, other = (a, b) if a.strategy == "informed" else (b, a)
        if informed.finale == "up" and other.strategy in rules.COUNT_STRATEGIES:
            return "foresight"
    if a.order == b.order and a.finale == b.finale and {a.variant, b.variant} & {"standard"} \
            and (a.has_rescue or b.has_rescue):
        return "rescue_vs_standard"
    return None


def best_line(record: dict) -> str:
    where = (f"{record['variant']}{' depth=' + record['depth'] if record['depth'] else ''} "
             f"(finale {record['finale']}, {record['order']})")
    line = f"{where}: {record['best']} is best at {claim_rules.pct(record['win_rate'])}"
    if record["runner_up"] and record["margin"] is not None:
        line += (f", {claim_rules.points(record['margin'])} over {record['runner_up']} "
                 f"(95% CI {100 * record['margin_low']:+.2f} to {100 * record['margin_high']:+.2f}, "
                 f"McNemar p {stats.p_text(record['mcnemar_p'], 2)})")
    if record["oracle"] is not None:
        line += f"; oracle (peeks, not a way to play) {claim_rules.pct(record['oracle'])}"
    return line


# --- The replay for claims the columns cannot answer ----------------------------------------


def plan_replay(run: dict, entries: list[dict], count: int) -> tuple[tuple | None, str]:
    """(seed, first deal, count, order) of the replay, or None and why not.

    The replay covers the sweep's first committed deals (consecutive shards from the lowest),
    in the deal order of its standard cell (round-robin if it has both).
    """
    from pipeline.engine import deals

    if count <= 0:
        return None, "no replay (--replay 0)"
    scheme = run.get("deal_scheme")
    if scheme != deals.SCHEME_VERSION:
        return None, (f"no replay: the sweep used deal scheme {scheme!r}, this code has "
                      f"{deals.SCHEME_VERSION!r}, so its layouts cannot be rebuilt here")
    seed = (run.get("config") or {}).get("seed")
    if seed is None or not entries:
        return None, "no replay: run.json names no seed, or no shard is committed"
    cells = run_cells(run)
    standard = [c for c in cells if c.variant == "standard"]
    order = next((c.order for c in standard if c.order == "round-robin"),
                 standard[0].order if standard else "round-robin")
    ordered = sorted(entries, key=lambda e: int(e["first"]))
    first = end = int(ordered[0]["first"])
    for entry in ordered:
        if int(entry["first"]) != end:
            break
        end = int(entry["last"]) + 1
    return (int(seed), first, min(count, end - first), order), ""


def check_replay(replay: claim_rules.Replay, loaded: Loaded) -> None:
    """Compare the replay's wins with the sweep's own records of the same deals (per-deal mode)."""
    recorded = next((won for cell, (start, won) in sorted(loaded.head_won.items(),
                                                          key=lambda item: item[0].variant != "standard")
                     if cell.order == replay.order and start == replay.first), None)
    if recorded is not None:
        checked = min(len(recorded), replay.count)
        replay.checked = checked
        replay.mismatches = int((recorded[:checked] != replay.won[:checked]).sum())


def make_replay(loaded: Loaded, count: int) -> tuple[claim_rules.Replay | None, str]:
    """The replay of the sweep's first deals, checked against its records where it has them."""
    plan, note = plan_replay(loaded.run, loaded.shards_read, count)
    if plan is None:
        return None, note
    replay = claim_rules.replay_standard(*plan)
    check_replay(replay, loaded)
    return replay, ""


# --- The report ---------------------------------------------------------------------------

DOCUMENT_KEYS = ("report_version", "provenance", "cells", "comparisons", "best_strategies",
                 "claims", "distributions", "hint_calibration", "notes")


@dataclass
class Report:
    loaded: Loaded
    figures: Figures
    claims: list[claim_rules.Claim]
    document: dict
    directory: str
    timings: dict = field(default_factory=dict)  # seconds per phase


def provenance(loaded: Loaded) -> dict:
    run = loaded.run
    ranges = []
    for entry in sorted(loaded.shards_read, key=lambda e: int(e["first"])):
        first, last = int(entry["first"]), int(entry["last"])
        if ranges and ranges[-1][1] + 1 == first:
            ranges[-1][1] = last
        else:
            ranges.append([first, last])
    runs = []
    for record in run.get("runs", []):
        ray = record.get("ray") or {}
        runs.append({
            "started": record.get("started"), "finished": record.get("finished"),
            "status": record.get("status"), "host": record.get("host"),
            "clocksweep": record.get("clocksweep"),
            "cluster": ray.get("kind"), "ray_version": ray.get("ray_version"),
            "cpus": ray.get("cpus"), "nodes": len(ray.get("nodes") or []),
        })
    return {
        "results": loaded.location.where,
        "record_mode": loaded.mode,
        "config": run.get("config"),
        "config_hash": run.get("config_hash"),
        "config_source": run.get("config_source"),
        "seed": (run.get("config") or {}).get("seed"),
        "deal_ranges_read": [f"{a}-{b}" for a, b in ranges],
        "deals_read": sum(int(e["last"]) - int(e["first"]) + 1 for e in loaded.shards_read),
        "deal_scheme": run.get("deal_scheme"),
        "result_schema": run.get("result_schema"),
        "sweep_code_version": run.get("clocksweep"),
        "runs": runs,
        "shards_planned": (run.get("shards") or {}).get("count"),
        "shards_read": len(loaded.shards_read),
        "shard_files_read": [r["path"] for e in loaded.shards_read for r in e["files"]],
        "shards_not_read": loaded.problems,
        "report_version": REPORT_VERSION,
        "summary_schema": summary.SUMMARY_SCHEMA_VERSION,
        "report_code_version": __version__,
    }


def build(where: str, replay: int = DEFAULT_REPLAY, out: str | None = None,
          plots_enabled: bool = True, workers: int | None = None,
          plotter: plots.Plotter | None = None) -> Report:
    """Read RESULTS, compute every figure and write RESULTS/report/ (or ``out``).

    ``plotter``: a `plots.Plotter` made by the caller, best before it imported this module
    (see `plots.Plotter`); by default the report makes its own.
    """
    if plotter is None:
        with plots.Plotter((os.cpu_count() or 1) if plots_enabled else 1) as plotter:
            return build(where, replay, out, plots_enabled, workers, plotter)
    import time

    if out is not None and ("://" in out or not out.strip()):
        raise ReportError(f"--out: {out!r}: expected a local directory path")
    timings, clock = {}, [time.perf_counter()]

    def lap(phase: str) -> None:
        now = time.perf_counter()
        timings[phase] = round(now - clock[0], 3)
        clock[0] = now

    # The plots' process, started by now, imports matplotlib while the shards are read.
    # scipy (for the figures) first: imported beside the reading, it would hold the
    # reading threads back for longer than it takes.
    import scipy.special  # noqa: F401

    lap("import scipy")
    loaded = load(where, head=replay, workers=workers)
    lap("read")
    replayed, note = None, ""
    if loaded.tables["facts"].is_empty():
        # No deal facts in the records (no standard cell): replay the first deals instead.
        replayed, note = make_replay(loaded, replay)
        lap("replay")
    directory = out or loaded.location.full(layout.REPORT_DIR)
    if not loaded.location.is_local and out is None:
        raise ReportError(f"{where}: the report is written locally; pass an output directory")
    figures = Figures(loaded, replayed, note)
    # What the plots show first, so that they are drawn while the rest is computed.
    document = {
        "report_version": REPORT_VERSION,
        "provenance": provenance(loaded),
        "cells": figures.cell_records(),
        "distributions": {
            "cards_turned": figures.cards_turned(),
            "down_at_stop": figures.down_at_stop(),
            "restarts": figures.restarts(),
            "rescue_by_down_at_stop": figures.rescue_by_down(),
        },
        "hint_calibration": figures.hint_calibration(),
    }
    finish_plots = plotter.start(_plot_jobs(document)) if plots_enabled else None
    lap("figures")
    claims = claim_rules.assess(figures)
    document.update(
        comparisons=figures.comparisons(),
        best_strategies=figures.best_strategies(),
        claims=[claim.record() for claim in claims],
        notes=notes(loaded, figures),
    )
    document = {key: document[key] for key in DOCUMENT_KEYS}  # report.json's order
    lap("claims and comparisons")
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as error:
        raise ReportError(f"{'--out: ' if out is not None else ''}{directory}: cannot write a "
                          f"report there ({error.strerror or error})") from None
    write_all(directory, document, figures, finish_plots)
    lap("write")
    return Report(loaded, figures, claims, document, directory, timings)


def notes(loaded: Loaded, figures: Figures) -> list[str]:
    out = [
        "Win rates carry 95% Wilson intervals; claims' verdicts use 99.9% intervals.",
        "Paired comparisons: a's win rate minus b's on the same deals, Newcombe's hybrid score "
        "interval, exact McNemar test on the discordant deals.",
        f"z-scores are against the exact value with its own standard error; |z| > {Z_FLAG:g} is flagged.",
    ]
    if loaded.mode == "summary":
        out.append("Summary records: runs of consecutive deals are counted within each summarised "
                   "batch (blocks of 13); a partial block at a batch's end is left out.")
    if figures.replay is None and figures.replay_note:
        out.append(figures.replay_note)
    return out


# --- Writing ------------------------------------------------------------------------------


def clean(value):
    """JSON-safe: NaN and infinities as null, numpy scalars as Python numbers."""
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    return value


def write_csv(path: str, rows: list[dict]) -> None:
    with open(path, "w", newline="") as file:
        if not rows:
            return
        writer = csv.DictWriter(file, fieldnames=list(rows[0]), extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if v is None else v) for k, v in clean(row).items()})


def flatten(groups: list[dict], key: str = "cell") -> list[dict]:
    """Rows of nested distributions, each with its group's name."""
    return [{key: group[key], **row} for group in groups for row in group["rows"]]


def write_all(directory: str, document: dict, figures: Figures, finish_plots=None) -> None:
    """report.json, the CSV and Parquet tables, report.md and report.html, and the PNG plots
    that ``finish_plots`` (from `plots.Plotter.start`; None: no plots) waits for."""
    dist = document["distributions"]
    with open(os.path.join(directory, "report.json"), "w") as file:
        # json.dumps with no indentation: only then does json use its C encoder (json.dump
        # never does), and a 100-cell report is 1.5 MB.
        file.write(json.dumps(clean(document), separators=(",", ":")) + "\n")
    claims_rows = [{k: v for k, v in c.items() if k not in ("seed_files", "detail")}
                   | {"interval_low": (c["interval"] or [None, None])[0],
                      "interval_high": (c["interval"] or [None, None])[1],
                      "detail": "; ".join(c["detail"])} for c in document["claims"]]
    for name, rows in {
        "cells": document["cells"],
        "comparisons": document["comparisons"],
        "best_strategies": document["best_strategies"],
        "claims": [{k: v for k, v in r.items() if k != "interval"} for r in claims_rows],
        "cards_turned": flatten(dist["cards_turned"]),
        "down_at_stop": flatten(dist["down_at_stop"], "order"),
        "restarts": flatten(dist["restarts"]),
        "rescue_by_down_at_stop": dist["rescue_by_down_at_stop"],
        "hint_calibration": flatten(document["hint_calibration"]),
    }.items():
        write_csv(os.path.join(directory, f"{name}.csv"), rows)
    for table, frame in figures.tables.items():
        frame.write_parquet(os.path.join(directory, f"summary_{table}.parquet"))

    images = []
    if finish_plots is not None:
        for filename, png in finish_plots():
            if png:
                with open(os.path.join(directory, filename), "wb") as file:
                    file.write(png)
                images.append((filename, PLOT_TITLES[filename], png))
    blocks = document_blocks(document, images)
    with open(os.path.join(directory, "report.md"), "w") as file:
        file.write(to_markdown(blocks))
    with open(os.path.join(directory, "report.html"), "w") as file:
        file.write(to_html(blocks))


PLOT_TITLES = {
    "win_rates.png": "Win rate per cell with 95% intervals",
    "cards_turned.png": "Cards turned in standard play against the exact law",
    "hint_calibration.png": "The hint's chance against the observed win rate",
    "restarts.png": "Play it out: restarts",
    "rescue_by_down.png": "Rescue win rate by cards left at the first death",
}


def _plot_jobs(document: dict) -> list[tuple[str, str, tuple]]:
    """The plots of a report, as `plots.Plotter.start` takes them."""
    dist = document["distributions"]
    standard = next((d for d in dist["cards_turned"] if "order=round-robin" in d["cell"]),
                    dist["cards_turned"][0] if dist["cards_turned"] else None)
    jobs = [  # the slowest first, so that the drawing processes finish together
        ("win_rates.png", "win_rates", (document["cells"],)),
        ("hint_calibration.png", "hint_calibration", (document["hint_calibration"],)),
        ("cards_turned.png", "cards_turned", (standard,)),
        ("rescue_by_down.png", "rescue_by_down",
         (dist["rescue_by_down_at_stop"], _plotted_rescues(document["cells"]))),
        ("restarts.png", "restarts", (dist["restarts"],)),
    ]
    return [job for job in jobs if job[2][0] is not None]


def _plotted_rescues(cells: list[dict]) -> list[str]:
    """Cells of one rescue variant (watch if present), face down, counts-only strategies."""
    for variant in rules.RESCUE_VARIANTS:
        for finale in rules.FINALES:
            chosen = [c["label"] for c in cells if c["variant"] == variant and c["finale"] == finale
                      and c["strategy"] in rules.COUNT_STRATEGIES and c["depth"] in (None, "bottom")]
            orders = [c["order"] for c in cells if c["label"] in chosen]
            if chosen:
                first = "round-robin" if "round-robin" in orders else orders[0]
                return [c for c, o in zip(chosen, orders) if o == first]
    return []


def fmt(value, kind: str = "") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    if kind == "pct":
        return f"{100 * value:.2f}%"
    if kind == "pts":
        return f"{100 * value:+.2f}"
    if kind == "p":
        return f"{value:.3g}"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def document_blocks(doc: dict, images: list[tuple[str, str, bytes]]) -> list[tuple]:
    """The report as a list of blocks, rendered alike to Markdown and HTML."""
    prov = doc["provenance"]
    config = prov["config"] or {}
    image = {name: (title, png) for name, title, png in images}
    blocks: list[tuple] = [("h1", f"Clock Patience sweep report: {config.get('name', prov['results'])}")]
    blocks.append(("p", f"{prov['record_mode']} records, {prov['deals_read']:,} deals "
                        f"({', '.join(prov['deal_ranges_read'])}), seed {prov['seed']}, "
                        f"{len(doc['cells'])} cells, {prov['shards_read']} of "
                        f"{prov['shards_planned']} planned shards read."))

    blocks.append(("h2", "Claims"))
    blocks.append(("p", "Each claim of the seeds (SPEC section 7), measured on this sweep. "
                        "Intervals are 99.9%; the rule under each claim decides its verdict."))
    blocks.append(("table", ["claim", "seed", "verdict", "figure", "99.9% interval"],
                   [[c["id"], c["seed_file"].replace("seeds/", ""), c["verdict"].upper(),
                     c["figure_text"] or "-", claim_rules.interval_text(c["interval"]) or "-"]
                    for c in doc["claims"]]))
    for c in doc["claims"]:
        items = [f"Claim: {c['claim']}", f"Rule: {c['rule']}", f"Measured on: {c['basis']}"]
        if c["exact"]:
            items.append(f"Exact value: {c['exact']}")
        if c["needs"]:
            items.append(f"Needs: {c['needs']}")
        items += c["detail"]
        blocks.append(("h3", f"{c['id']}: {c['verdict']}"))
        blocks.append(("list", items))

    blocks.append(("h2", "Best strategy per variant"))
    blocks.append(("list", [b["line"] for b in doc["best_strategies"]] or ["no rescue cells"]))

    blocks.append(("h2", "Win rates"))
    if "win_rates.png" in image:
        blocks.append(("img", "win_rates.png", *image["win_rates.png"]))
    blocks.append(("table", ["cell", "n", "wins", "win rate", "95% CI", "exact", "difference", "z", "flag"],
                   [[c["label"], fmt(c["n"]), fmt(c["wins"]), fmt(c["win_rate"], "pct"),
                     f"{fmt(c['ci_low'], 'pct')} - {fmt(c['ci_high'], 'pct')}",
                     (f"{c['exact']} = {fmt(c['exact_value'], 'pct')}" if c["exact"] else ""),
                     fmt(c["difference"], "pts"), fmt(c["z"]), "|z|>4" if c["flag"] else ""]
                    for c in doc["cells"]]))

    blocks.append(("h2", "Paired comparisons"))
    blocks.append(("p", "a minus b on the same deals, in percentage points, with the 95% interval "
                        "and the exact McNemar p-value on the deals where they differ."))
    blocks.append(("table", ["kind", "a", "b", "n", "a rate", "b rate", "a - b", "95% CI", "McNemar p"],
                   [[r["kind"], r["a"], r["b"], fmt(r["n"]), fmt(r["a_rate"], "pct"),
                     fmt(r["b_rate"], "pct"), fmt(r["difference"], "pts"),
                     f"{fmt(r['ci_low'], 'pts')} to {fmt(r['ci_high'], 'pts')}", fmt(r["mcnemar_p"], "p")]
                    for r in doc["comparisons"] if r["kind"] != "rescue_vs_standard"]))

    dist = doc["distributions"]
    blocks.append(("h2", "Distributions"))
    blocks.append(("h3", "Cards turned in standard play"))
    if "cards_turned.png" in image:
        blocks.append(("img", "cards_turned.png", *image["cards_turned.png"]))
    blocks.append(("table", ["cell", "deals", "chi-square", "df", "p"],
                   [[d["cell"], fmt(d["n"]), fmt(d["chi2"]), fmt(d["dof"]), fmt(d["p_value"], "p")]
                    for d in dist["cards_turned"]]))
    blocks.append(("h3", "Cards face down at the first death"))
    blocks.append(("table", ["order", "deals", "chi-square vs exact law", "df", "p"],
                   [[d["order"], fmt(d["n"]), fmt(d["chi2"]), fmt(d["dof"]), fmt(d["p_value"], "p")]
                    for d in dist["down_at_stop"]]))
    blocks.append(("h3", "Play it out"))
    if "restarts.png" in image:
        blocks.append(("img", "restarts.png", *image["restarts.png"]))
    blocks.append(("table", ["cell", "deals", "mean restarts", "later deaths", "deaths away from the predicted pile"],
                   [[d["cell"], fmt(d["n"]), fmt(d["mean_restarts"]), fmt(d["later_deaths"]),
                     fmt(d["stray_deaths"])] for d in dist["restarts"]]))
    blocks.append(("h3", "Rescues by cards left at the first death"))
    if "rescue_by_down.png" in image:
        blocks.append(("img", "rescue_by_down.png", *image["rescue_by_down.png"]))
    blocks.append(("p", "Per cell and number of cards left: rescue_by_down_at_stop.csv."))

    blocks.append(("h2", "The hint's calibration"))
    blocks.append(("p", "SPEC section 5: with only the counts visible, rescuing at pile p wins with "
                        "chance d_p / U. Each distinct chance is tested against its observed win rate "
                        "(chi-square over the chances)."))
    if "hint_calibration.png" in image:
        blocks.append(("img", "hint_calibration.png", *image["hint_calibration.png"]))
    blocks.append(("table", ["cell", "chi-square", "df", "p"],
                   [[h["cell"], fmt(h["chi2"]), fmt(h["dof"]), fmt(h["p_value"], "p")]
                    for h in doc["hint_calibration"]]))

    blocks.append(("h2", "Provenance"))
    runs = "; ".join(f"{r['started']} to {r['finished']} {r['status']} on {r['host']} "
                     f"({r['cluster']}, {fmt(r['cpus'])} CPUs, {r['nodes']} node(s), clocksweep {r['clocksweep']})"
                     for r in prov["runs"])
    blocks.append(("list", [
        f"results: {prov['results']}",
        f"config: {json.dumps(config, sort_keys=True)}",
        f"config hash: {prov['config_hash']}",
        f"deal scheme: {prov['deal_scheme']}; result schema: {prov['result_schema']}",
        f"deal ranges read: {', '.join(prov['deal_ranges_read'])}",
        f"runs: {runs or 'none recorded'}",
        f"shards read: {prov['shards_read']} ({len(prov['shard_files_read'])} files)",
        f"shards not read: {'; '.join(prov['shards_not_read']) or 'none'}",
        f"report: {prov['report_version']}, summary tables {prov['summary_schema']}, "
        f"clocksweep {prov['report_code_version']}",
    ]))
    blocks.append(("h2", "Notes"))
    blocks.append(("list", doc["notes"]))
    return blocks


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(blocks: list[tuple]) -> str:
    out = []
    for block in blocks:
        kind = block[0]
        if kind in ("h1", "h2", "h3"):
            out.append("#" * int(kind[1]) + " " + block[1])
        elif kind == "p":
            out.append(block[1])
        elif kind == "list":
            out.append("\n".join(f"- {item}" for item in block[1]))
        elif kind == "table":
            headers, rows = block[1], block[2]
            lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
            lines += ["| " + " | ".join(_md_cell(v) for v in row) + " |" for row in rows]
            out.append("\n".join(lines))
        elif kind == "img":
            out.append(f"![{block[2]}]({block[1]})")
    return "\n\n".join(out) + "\n"


STYLE = """body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#222}table{border-collapse:collapse;font-size:12px;margin:0.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}th{background:#f0f0f0}
img{max-width:100%}h3{margin-bottom:0.2em}.confirmed{color:#17702a;font-weight:bold}
.refuted{color:#a8231b;font-weight:bold}.inconclusive{color:#8a6d00;font-weight:bold}"""


def to_html(blocks: list[tuple]) -> str:
    esc = html.escape
    out = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
           f"<title>{esc(blocks[0][1])}</title><style>{STYLE}</style></head><body>"]
    for block in blocks:
        kind = block[0]
        if kind in ("h1", "h2", "h3"):
            out.append(f"<{kind}>{esc(block[1])}</{kind}>")
        elif kind == "p":
            out.append(f"<p>{esc(block[1])}</p>")
        elif kind == "list":
            out.append("<ul>" + "".join(f"<li>{esc(str(item))}</li>" for item in block[1]) + "</ul>")
        elif kind == "table":
            headers, rows = block[1], block[2]
            head = "".join(f"<th>{esc(h)}</th>" for h in headers)
            body = []
            for row in rows:
                cells = []
                for value in row:
                    text = str(value)
                    css = text.lower() if text.lower() in ("confirmed", "refuted", "inconclusive") else ""
                    cells.append(f"<td class=\"{css}\">{esc(text)}</td>" if css else f"<td>{esc(text)}</td>")
                body.append("<tr>" + "".join(cells) + "</tr>")
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")
        elif kind == "img":
            data = base64.b64encode(block[3]).decode("ascii")
            out.append(f"<figure><img alt=\"{esc(block[2])}\" src=\"data:image/png;base64,{data}\">"
                       f"<figcaption>{esc(block[2])}</figcaption></figure>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


# --- The terminal -------------------------------------------------------------------------


def terminal_summary(report: Report) -> str:
    doc = report.document
    prov = doc["provenance"]
    lines = [f"clocksweep report: {prov['results']} ({prov['record_mode']} records, "
             f"{prov['deals_read']:,} deals, {len(doc['cells'])} cells, "
             f"{prov['shards_read']} shard(s) read)"]
    if prov["shards_not_read"]:
        lines.append(f"  {len(prov['shards_not_read'])} shard(s) not read: {prov['shards_not_read'][0]}")
    flagged = [c for c in doc["cells"] if c["flag"]]
    if flagged:
        lines.append(f"  {len(flagged)} cell(s) off their exact value by |z| > {Z_FLAG:g}: "
                     + ", ".join(c["label"] for c in flagged[:5]))
    best = [b for b in doc["best_strategies"]]
    if best:
        lines.append("best strategy per variant:")
        primary_order = "round-robin" if any(b["order"] == "round-robin" for b in best) else best[0]["order"]
        for record in best:
            if record["order"] == primary_order:
                lines.append("  " + record["line"])
    lines.append("claims:")
    width = max(len(c["id"]) for c in doc["claims"])
    for claim in doc["claims"]:
        figure = claim["figure_text"] or claim["needs"] or claim["basis"]
        lines.append(f"  {claim['verdict']:<12} {claim['id']:<{width}}  {figure}")
    lines.append(f"written to {report.directory}/ (report.md, report.html, report.json)")
    return "\n".join(lines)
