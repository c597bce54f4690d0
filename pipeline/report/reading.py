"""The report's reading: a results directory's committed shards summed into the summary tables.

Reading. Only shards the manifest lists, and whose files still verify (size, rows, schema,
config hash, sha256: `records.shard_problem`), are read; the rest are named in the report.
Both record modes end in the same summary tables (`pipeline.records.summary`):

- ``summary`` records are already counts: Polars scans each table's committed files lazily
  and sums the counts over equal keys (`summary.TABLES`).
- ``deals`` records (one row per deal x cell) are counted shard by shard, a row group at a
  time (memory stays bounded by the shard size, never the sweep), by the same counting code
  the sweep's summary mode runs (`summary.ShardSummary`), then summed in Polars. Shards are
  checked and counted in parallel threads (pyarrow decodes and numba counts without the GIL).
  The per-row pass is not a Polars group-by: Polars decodes the dictionary label columns as
  Categoricals row by row and hashes every row, while the pair and block tables need the
  rows aligned by deal anyway. Here a label column costs one vectorised comparison per batch
  (its runs), and a record one pass of numba (`benchmarks/report_bench.py` measures it).
- The deal facts two claims need (kings at the bottom, hours unvisited at the third king)
  are counted on standard cells, in each shard's ``facts`` table in both record modes; a
  sweep without a standard cell gets a replay of its first ``--replay`` deals by the kernel
  instead (`claims.replay_standard`).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.engine import measures, rules
from pipeline.engine.rules import Cell
from pipeline.records import schema, summary
from pipeline.store import files, groups, layout, location, records, validate
from pipeline.store.entries import RunRecord


class ReportError(ValueError):
    """RESULTS is not a results directory the report can read; the message says why."""


# --- Reading ------------------------------------------------------------------------------


@dataclass
class Loaded:
    """What the report read: the run record, the shards, the summed summary tables."""

    where: str
    location: location.Location
    run: RunRecord
    mode: str
    cells: list[Cell]
    shards_read: list[dict]
    problems: list[str]
    tables: dict[str, pl.DataFrame]
    head_won: dict[Cell, tuple[int, np.ndarray]] = field(default_factory=dict)
    not_read: int = 0  # shards of the results not read, whatever `problems` say of them
    in_progress: str | None = None  # a run writing there now, and what it has not committed


def run_cells(run: RunRecord) -> list[Cell]:
    try:
        return groups.cells_of(run)
    except layout.ResultsError as error:
        raise ReportError(str(error)) from None


def load(where: str, head: int = 0, workers: int | None = None) -> Loaded:
    """Read a results directory into summed summary tables (see the module docstring).

    ``head``: in per-deal mode, keep the recorded wins of the first ``head`` deals of each
    standard cell, for the replay check.
    """
    results = opened(where)
    location, run = results.location, results.run
    cells = run_cells(run)
    committed = [results.entries[index] for index in sorted(results.entries)]
    reader = _ShardReader(
        results, cells, head, workers or min(len(committed), os.cpu_count() or 1) or 1
    )
    head_won: dict[Cell, tuple[int, np.ndarray]] = {}
    try:
        problems_found, results_read = reader.read(committed)
        entries = [e for e, problem in zip(committed, problems_found) if not problem]
        problems, not_read, in_progress = _not_read(results, committed, problems_found, entries)
        if not entries:
            raise ReportError(
                f"{location.where}: no committed shard verifies, nothing to report"
                + (f" ({problems[0]})" if problems else "")
            )
        strategies = summary.strategy_names(cells)
        if run.mode == "summary":
            tables = _summed_summary(location, entries, strategies)
        else:
            tables, head_won = _summed_deals(results_read)
            tables.update(_summed_summary(location, entries, strategies, [layout.FACTS_TABLE]))
    except (OSError, pl.exceptions.PolarsError) as error:
        # The files changed under the report (a run started over there, or a disk failed).
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ReportError(
            f"{location.where}: the results changed or failed while being read "
            f"({location.scrubbed(first_line)}); rerun the report once no run is writing there"
        ) from None
    return Loaded(
        location.where,
        location,
        run,
        run.mode,
        cells,
        entries,
        problems,
        tables,
        head_won,
        not_read=not_read,
        in_progress=in_progress,
    )


def opened(where: str) -> validate.Results:
    """The results directory, refused in one line where the report cannot read it."""
    try:
        results = validate.open_results(where)
    except layout.ResultsError as error:
        raise ReportError(str(error)) from None
    mode, named = results.run.mode, results.location.where
    if mode not in ("deals", "summary"):
        raise ReportError(f"{named}: run.json names no record mode this report reads ({mode!r})")
    if results.unusable:  # run.json or the whole manifest: nothing in it can be trusted
        raise ReportError(f"{named}: {results.unusable}")
    if results.manifest_missing:
        raise ReportError(f"{named}: no manifest.json, so no committed shard to read")
    return results


class _ShardReader:
    """The committed shards checked, and in per-deal mode counted, by a pool of threads:
    sha256 and decoding side by side."""

    def __init__(self, results: validate.Results, cells: list[Cell], head: int, workers: int):
        self.results, self.cells, self.head, self.workers = results, cells, head, workers
        self.schemas = files.expected_schemas(results.run.mode)
        self.decode_threads = workers < (os.cpu_count() or 1)  # else the shards fill the cores

    def verified(self, entry) -> str | None:
        results = self.results
        return records.shard_problem(
            results.location, entry, results.plan[entry.index], results.hashes, self.schemas
        )

    def counted(self, entry) -> tuple[str | None, object]:
        problem = self.verified(entry)
        if problem:
            return problem, None
        try:
            read = _deal_shard(
                self.results.location, entry, self.cells, self.head, self.decode_threads
            )
            return None, read
        except (ValueError, pa.ArrowException) as error:
            return f"unreadable records: {error}", None

    def read(self, committed: list) -> tuple[list[str | None], list | None]:
        """Each shard's problem (None: it verifies), and in per-deal mode what was read of
        the shards that verify."""
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            if self.results.run.mode == "summary":
                return list(pool.map(self.verified, committed)), None
            outcome = list(pool.map(self.counted, committed))
        return [problem for problem, _ in outcome], [
            read for problem, read in outcome if not problem
        ]


def _not_read(results: validate.Results, committed, found, entries):
    """What the report names of the results (``found``: the problem, if any, of each shard
    in ``committed`` as it was verified), how many shards of the results it does not read
    (those of ``entries`` it does), whatever kept them out: a damaged entry, page or file, a
    cell group that lacks them, or a run that has not committed them; and, where a run is
    writing there now, a line saying so (what it has not committed is no problem)."""
    problems = [
        problem if index is None else f"shard {index} not read: {problem}"
        for index, problem in results.problems
        if index not in results.entries
    ]
    problems += [
        f"shard {index}: {problem}"
        for index, problem in results.problems
        if index in results.entries
    ]  # listed twice, identically: read once
    problems += [f"shard {e.index} not read: {p}" for e, p in zip(committed, found) if p]
    writer = results.location.held_by()
    pending = validate.not_committed_yet(results, writer)
    missing = validate.missing_problem(results) if pending is None else None
    problems += [missing] if missing else []
    in_progress = f"a run (pid {writer}) is writing there: {pending}" if pending else None
    return problems, results.plan.missing({entry.index for entry in entries})[0], in_progress


def _group_columns(table: str) -> list[str]:
    keys, _ = summary.TABLES[table]
    return list(keys) if table == "pairs" else list(summary.LABEL_COLUMNS) + list(keys)


def _sum_frames(table: str, frame: pl.LazyFrame) -> pl.DataFrame:
    group = _group_columns(table)
    counts = list(summary.TABLES[table][1])
    return frame.group_by(group).agg(pl.col(counts).sum()).sort(group, nulls_last=False).collect()


def _summed_summary(
    location: location.Location,
    entries: list[dict],
    strategies: tuple[str, ...],
    names=tuple(summary.TABLES),
) -> dict[str, pl.DataFrame]:
    """Summary tables ``names`` summed over the shards' files of them, the strategy label
    over ``strategies`` (the sweep's, `summary.strategy_names`: of every cell group)."""
    tables = {}
    for table in names:
        paths = [record.path for entry in entries for record in entry.files_of(table)]
        if not paths:
            tables[table] = pl.from_arrow(summary.schemas(strategies)[table].empty_table())
            continue
        tables[table] = _sum_frames(table, location.scan_cell_groups(paths))
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


DEAL_COLUMNS = ["deal", *summary.LABEL_COLUMNS, *measures.NAMES]


def _row_batches(parquet: pq.ParquetFile, columns: list[str], threads: bool):
    """The file's rows as record batches, a row group at a time (cheaper than `iter_batches`);
    decoded on Arrow's threads, or on this one (when shards are read side by side already)."""
    for group in range(parquet.num_row_groups):
        yield from parquet.read_row_group(group, columns=columns, use_threads=threads).to_batches()


def _deal_shard(location, entry, cells, head, decode_threads):
    """One per-deal shard counted into summary tables (plus the first ``head`` wins of standard cells)."""
    first, last = entry.first, entry.last
    shard = summary.ShardSummary(cells, first, last - first + 1)  # the sweep's strategies
    cell_lut = summary.label_code_lut(cells)
    for record in entry.files_of(layout.DEALS_TABLE):
        with location.open_input_file(record.path) as file:
            parquet = pq.ParquetFile(file)
            for batch in _row_batches(parquet, DEAL_COLUMNS, decode_threads):
                try:
                    run_cells, starts, ends = summary.batch_runs(batch, cell_lut)
                    rows = schema.kernel_coded(batch, first)
                    if (run_cells < 0).any():
                        raise ValueError("rows of a cell the run does not list")
                    shard.add_runs(run_cells, starts, ends, rows)
                except ValueError as error:
                    raise ValueError(f"{record.path}: {error}") from None
    heads = {}
    if head:
        for index, cell in enumerate(cells):
            if rules.wins_as_standard(cell.variant):
                keep = min(head, shard.count)
                if shard.present[index, :keep].all():
                    heads[cell] = (first, shard.wins[index, :keep].copy())
    return shard.tables(), heads
