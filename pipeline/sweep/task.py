"""The Ray tasks: one shard played under every cell of a cell group by the kernel, in
sub-batches that bound its memory, and written to its own Parquet file(s) (see `store.files`).
A task returns only small metadata, its manifest entry, which the driver commits; results
never pass through the driver. A group added to a grown sweep (`store.groups`) reads the wins
of the groups before it from their committed files, to pair its cells with theirs.

A shard is played whole (`play_shard`), or in pieces, runs of its batches (`play_piece`),
whose results a last task writes (`assemble_shard`): the driver splits the shards at a sweep's
end, so that the workers finish together. Every batch is played and counted the same way in
both (`play_batches`), and the files are written from the batches in order (`write_played`),
so a shard's files are the same bytes however it was cut.
"""

from __future__ import annotations

import copy
import os
import threading
import time
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numpy as np

from pipeline.engine import pairing
from pipeline.engine.rules import Cell
from pipeline.store.entries import FileRecord, ShardEntry
from pipeline.store.files import ShardFileWriter, encode_deals, file_metadata, read_wins
from pipeline.store.layout import DEALS_TABLE, FACTS_TABLE, WINS_TABLE
from pipeline.store.location import Location
from pipeline.store.plan import Shard

# A task plays at most this many rows (deals x cells) at once. Per-deal records: few enough
# that the allocator reuses the same pages batch after batch (larger batches are fresh pages
# every time, and cost more per row). Summary records: few enough that a batch's results
# (11 bytes a row) are still in the cache when they are counted, but no fewer deals than
# MIN_SUMMARY_DEALS, below which a batch's own costs (a kernel call, its tallies' calls)
# grow with many cells: measured in strategies.toml's and published-odds.toml's tasks.
# `benchmarks/sweep_bench.py` measures a sweep's split of time.
ROWS_PER_BATCH = {"deals": 500_000, "summary": 250_000}
MIN_SUMMARY_DEALS = 30_000
# Seconds a Ray worker whose strategy did not return lives on after its task raised: the
# error is on its way to the driver within them (`worker_ended_if_overdue`).
WORKER_EXIT_SECONDS = 3.0


def deals_per_batch(count: int, n_cells: int, multiple: int = 1, record: str = "deals") -> int:
    """Sub-batch size: even batches of at most ROWS_PER_BATCH[record] rows (summary records:
    at least MIN_SUMMARY_DEALS deals), a multiple of ``multiple``."""
    n_batches = -(-count * n_cells // ROWS_PER_BATCH[record])
    if record == "summary":
        n_batches = min(n_batches, -(-count // MIN_SUMMARY_DEALS))
    size = max(1, -(-count // max(1, n_batches)))
    if multiple > 1 and size < count:  # a shard of fewer deals than ``multiple``: one batch
        size = max(multiple, size - size % multiple)
    return size


@dataclass
class StopTally:
    """What a stop rule reads of a shard (its entry's ``tally``), counted batch by batch:
    each cell's wins, and each pair's deals won by a alone and by b alone. The cells are the
    earlier groups' and then the job's."""

    pairs: tuple[tuple[int, int], ...]
    wins: np.ndarray  # per cell
    sums: np.ndarray  # per pair: both, a_only, b_only, neither (`summary.add_pair_sums`)

    @classmethod
    def empty(cls, n_cells: int, pairs: Sequence[tuple[int, int]]) -> StopTally:
        pairs = tuple(tuple(pair) for pair in pairs)
        return cls(pairs, np.zeros(n_cells, np.int64), np.zeros((len(pairs), 4), np.int64))

    def add(self, won: np.ndarray) -> None:
        """Add a batch's wins (cells x deals, nonzero: won)."""
        from pipeline.records import bits, summary

        words = bits.packed_rows(won)  # 64 deals a word: popcounts, not a pass a byte
        self.wins += bits.popcount_rows(words)
        summary.add_word_pair_sums(words, won.shape[1], self.pairs, self.sums)

    def __add__(self, other: StopTally) -> StopTally:
        return StopTally(self.pairs, self.wins + other.wins, self.sums + other.sums)

    def entry(self) -> dict:
        return {
            "wins": self.wins.tolist(),
            "pairs": [[int(a_only), int(b_only)] for _, a_only, b_only, _ in self.sums],
        }


@dataclass(frozen=True)
class PlayedGroup:
    """A cell group whose shard is committed: where its wins are (a file of its shard)."""

    location: Location
    cells: tuple[Cell, ...]
    record: FileRecord


@dataclass(frozen=True)
class ShardJob:
    """Everything a task needs to play and write one shard (small: it travels to the worker)."""

    location: Location
    shard: Shard
    seed: int
    cells: tuple[Cell, ...]
    record: str
    provenance: dict
    attempt: int
    # The comparisons to tally, over the cells of ``earlier`` and then ``cells``.
    tally_pairs: tuple[tuple[int, int], ...] | None = None
    earlier: tuple[PlayedGroup, ...] = ()  # the groups before this one, whose wins it reads
    # The bound on a batch of a strategy of the user's (`bounded`); None: unbounded.
    strategy_seconds: float | None = None
    device: str = "cpu"  # `config.DEVICES`: the kernel that plays it


def play_shard(job: ShardJob, after_batch=None) -> ShardEntry:
    """The Ray task: `write_shard`'s manifest entry, with the node that played the shard."""
    with worker_ended_if_overdue():
        return on_this_node(write_shard(job, after_batch))


@contextmanager
def worker_ended_if_overdue():
    """A Ray task in which a strategy did not return: its worker process ends itself a few
    seconds after the task has raised (time for Ray to take the error to the driver), since
    the strategy's thread can be ended with nothing less (`bounded`)."""
    from pipeline.engine import bounded

    try:
        yield
    except bounded.StrategyTimeout:
        timer = threading.Timer(WORKER_EXIT_SECONDS, os._exit, (1,))
        timer.daemon = True
        timer.start()
        raise


def on_this_node(entry: ShardEntry) -> ShardEntry:
    import ray

    return replace(
        entry,
        node=ray.util.get_node_ip_address(),
        node_id=ray.get_runtime_context().get_node_id(),
    )


def batch_starts(job: ShardJob) -> range:
    """Where each of the shard's kernel batches starts (deals after the shard's first)."""
    multiple = summary_batch_multiple() if job.record == "summary" else 1
    count = job.shard.count
    return range(0, count, deals_per_batch(count, len(job.cells), multiple, job.record))


def summary_batch_multiple() -> int:
    """Summary batches are whole blocks (runs of deals are counted per batch) and whole
    bytes of the wins' bits (each batch's are packed on their own, then laid side by side)."""
    from math import lcm

    from pipeline.records import summary

    return lcm(summary.BLOCK, 8)


def piece_bounds(job: ShardJob, pieces: int, after: int = 0) -> list[tuple[int, int]]:
    """The shard's batches from batch ``after`` on, cut into at most ``pieces`` runs of whole
    batches, as (first batch, batch after the last): a piece's results are those batches' as
    the whole shard plays them, so the files assembled from pieces are the bytes of the shard
    played whole."""
    left = len(batch_starts(job)) - after
    pieces = max(1, min(pieces, left))
    return [(after + left * k // pieces, after + left * (k + 1) // pieces) for k in range(pieces)]


# A shard played in pieces (the end of a sweep, the early player's last shard) keeps their
# results until its files are written; one that would keep more is played whole.
SPLIT_BYTES_MAX = 512 * 2**20


def kept_bytes(job: ShardJob) -> int:
    """What a shard's pieces keep until its files are written (`Played`), at most: per-deal
    records their row groups encoded (under a byte a row and field: each an int8 or less, in
    deltas of at most nine bits), summary records their wins (a byte a deal and cell)."""
    from pipeline.engine.kernel import RESULT_FIELDS

    per_row = len(RESULT_FIELDS) if job.record == "deals" else 1
    return job.shard.count * len(job.cells) * per_row


@dataclass
class Played:
    """What a run of a shard's batches came to: everything its files and its tally are made
    of, kept until they are written. Pieces of one shard add up (`write_played`) in order."""

    counts: object | None  # summary records: `summary.KernelBatches`
    facts: object | None  # per-deal records: `summary.FactCounts`
    own_bits: np.ndarray | None  # summary records: the batches' wins packed to bits
    tally: StopTally | None  # the stop rule's counts, over the earlier groups' cells too
    cross_counts: np.ndarray | None  # summary records of a later group: its cross pairs
    rows: list  # per-deal records not yet written: each batch's row group, encoded
    seconds: float
    kernel_seconds: float
    batches: tuple[int, int]  # the shard's batches played: first, and the one after the last


def earlier_wins(job: ShardJob) -> np.ndarray | None:
    """The wins of the groups before the job's (cells x the shard's deals), None if none."""
    if not job.earlier:
        return None
    shard = job.shard
    return np.concatenate(
        [
            read_wins(group.location, group.record, group.cells, shard.first, shard.count)
            for group in job.earlier
        ]
    )


def cross_pairs(job: ShardJob) -> tuple[list, list]:
    """Summary records of a later group: every cell so far, and the pairs of an earlier
    group's cell with one of this group's, which its tables count here."""
    if not job.earlier or job.record != "summary":
        return list(job.cells), []
    before = [cell for group in job.earlier for cell in group.cells]
    every = before + list(job.cells)
    return every, [(a, b) for a, b in pairing.pairs(every) if a < len(before) <= b]


def label_strategies(job: ShardJob) -> tuple[str, ...]:
    """The strategy label's names in the job's tables (`summary.strategy_names`): those of
    its cells and of the groups' before it, whose cells its pairs name too."""
    from pipeline.records import summary

    before = [cell for group in job.earlier for cell in group.cells]
    return summary.strategy_names(before + list(job.cells))


def play_batches(
    job: ShardJob, batches: tuple[int, int], rows_to=None, after_batch=None, until=None
) -> Played:
    """Play the shard's batches ``batches`` (first, after last), or up to the first batch
    after which ``until()`` is true; per-deal rows go to the writer ``rows_to`` as they
    come, or are kept in what this gives."""
    started = time.perf_counter()
    from pipeline.engine import kernel
    from pipeline.records import summary

    shard, cells = job.shard, list(job.cells)
    starts = batch_starts(job)
    played, begin = nothing_played(job, batches)
    counts, facts = played.counts, played.facts
    earlier_won = earlier_wins(job)
    _, cross = cross_pairs(job)
    step = starts.step
    metadata = shard_metadata(job) if rows_to is not None else None
    # Results are used up within their batch: every batch is played into one array. A
    # summary shard's records are counted by the kernel itself, which gives only the wins.
    fields = 1 if counts is not None else len(kernel.RESULT_ROWS)
    scratch = results_array((fields, len(cells), step))
    for start in starts[batches[0] : batches[1]]:
        first = shard.first + start
        count = min(step, shard.count - start)
        began = time.perf_counter()
        into = scratch if count == step else None
        tallies = counts.kernel_tallies() if counts is not None else None
        results = kernel_batch(job, first, count, into, tallies)
        played.kernel_seconds += time.perf_counter() - began
        won = results["won"]
        if earlier_won is not None:
            won = np.concatenate([earlier_won[:, start : start + count], won.astype(bool)])
        if played.tally is not None:
            played.tally.add(won)
        if counts is not None:
            counts.add_wins(results["won"])
            at = (start - begin) // 8  # batches start on a byte (`batch_multiple`)
            played.own_bits[:, at : at + -(-count // 8)] = np.packbits(results["won"], axis=1)
            if cross:
                played.cross_counts += summary.pair_counts(won, None, cross)
        else:
            facts.add_results(results)
            if rows_to is not None:
                rows_to.write_deals(job.seed, first, results, cells, metadata)
            else:
                played.rows.append(encode_deals(job.seed, first, results, cells))
        del results
        if after_batch is not None:
            after_batch(job, start)
        played.batches = (batches[0], played.batches[1] + 1)
        if until is not None and until():
            break
    if counts is not None and played.batches[1] < batches[1]:  # ended early (`until`)
        played_to = starts[played.batches[1]]
        played.own_bits = played.own_bits[:, : (played_to - begin) // 8]
    played.seconds = time.perf_counter() - started
    return played


_held = threading.local()


def kernel_batch(job: ShardJob, first: int, count: int, into, tallies) -> dict:
    """One batch of the shard played by the kernel (`kernel.play`), a strategy of the user's
    under the job's bound; by the CUDA kernel (`gpu.play`) on that device."""
    from pipeline.engine import bounded, kernel

    if job.device == "cuda":
        from pipeline.engine import gpu

        return gpu.play(job.seed, first, count, list(job.cells), None, tallies)
    try:
        return kernel.play(
            job.seed, first, count, list(job.cells), into, tallies, job.strategy_seconds
        )
    except bounded.StrategyTimeout:
        _held.results = None  # the strategy's thread still writes into it: not to be reused
        raise


def results_array(shape: tuple[int, ...]) -> np.ndarray:
    """An int8 array for a batch's results, kept by this thread from shard to shard: a fresh
    one each shard is tens of MB of fresh pages, which a VM that backs its memory lazily
    faults in at up to a tenth of the kernel's time."""
    held = getattr(_held, "results", None)
    if held is None or held.shape != shape:
        _held.results = held = None  # let the old one go first
        _held.results = held = np.empty(shape, dtype=np.int8)
    return held


def nothing_played(job: ShardJob, batches: tuple[int, int]) -> tuple[Played, int]:
    """What playing the shard's ``batches`` starts from (its counts empty), and the deal
    (after the shard's first) it starts at."""
    from pipeline.records import summary

    shard, cells, starts = job.shard, list(job.cells), batch_starts(job)
    strategies = label_strategies(job)
    if job.record == "summary":
        counts, facts = summary.KernelBatches(cells, strategies), None
    else:  # the deal facts, counted beside the per-deal rows
        counts, facts = None, summary.FactCounts(cells, strategies)
    _, cross = cross_pairs(job)
    tally_cells = sum(len(group.cells) for group in job.earlier) + len(cells)
    tally = None if job.tally_pairs is None else StopTally.empty(tally_cells, job.tally_pairs)
    played = Played(counts, facts, None, tally, None, [], 0.0, 0.0, (batches[0], batches[0]))
    if cross:
        played.cross_counts = np.zeros((len(cross), 4), dtype=np.int64)
    begin = starts[batches[0]] if batches[0] < len(starts) else shard.count
    if counts is not None:
        end = starts[batches[1]] if batches[1] < len(starts) else shard.count
        played.own_bits = np.empty((len(cells), -(-(end - begin) // 8)), dtype=np.uint8)
    return played, begin


def shard_metadata(job: ShardJob) -> dict:
    shard = job.shard
    return file_metadata(
        {
            **job.provenance,
            "shard": {"index": shard.index, "first": shard.first, "last": shard.last},
        }
    )


def write_shard(job: ShardJob, after_batch=None) -> ShardEntry:
    """Play a shard under every cell and write its file(s): the manifest entry, less attempts
    and node. ``after_batch(job, start)`` is called once each batch is written (a test's way
    in: to stop a worker mid-shard)."""
    whole = (0, len(batch_starts(job)))
    return written(job, lambda deals: [play_batches(job, whole, deals, after_batch)])


def written(job: ShardJob, play) -> ShardEntry:
    """The shard's files and entry: ``play(deals)`` gives its batches played (`Played`, in
    order), their per-deal rows written to ``deals`` (None for summary records); every file
    is removed if anything fails."""
    writers: dict[str, ShardFileWriter] = {}
    try:
        if job.record != "summary":
            writers[DEALS_TABLE] = ShardFileWriter(
                job.location, job.shard.path(DEALS_TABLE), DEALS_TABLE
            )
        return write_played(job, play(writers.get(DEALS_TABLE)), writers)
    except BaseException:
        for writer in writers.values():
            writer.abort()
        raise


def play_piece(job: ShardJob, batches: tuple[int, int]) -> Played:
    """A Ray task: one piece of a shard split across tasks (the end of a sweep, where a
    shard played whole would keep one worker busy while the others idle)."""
    with worker_ended_if_overdue():
        return play_batches(job, batches)


def assemble_shard(job: ShardJob, *pieces: Played) -> ShardEntry:
    """A Ray task: `assemble`'s entry, with the node that wrote the files."""
    return on_this_node(assemble(job, pieces))


def assemble(job: ShardJob, pieces: Sequence[Played]) -> ShardEntry:
    """The shard's files from its pieces (`play_piece`, in order): the bytes `write_shard`
    writes, and its entry."""
    ends = [piece.batches for piece in pieces]
    if [a for a, _ in ends] != [0] + [b for _, b in ends[:-1]] or ends[-1][1] != len(
        batch_starts(job)
    ):
        raise ValueError(f"shard {job.shard.index}: pieces of batches {ends} do not make it up")

    def rows_written(deals: ShardFileWriter | None) -> list[Played]:
        if deals is not None:
            metadata = shard_metadata(job)
            for group in (group for piece in pieces for group in piece.rows):
                deals.write_encoded(group, metadata)
        return list(pieces)

    return written(job, rows_written)


def write_played(
    job: ShardJob, pieces: list[Played], writers: dict[str, ShardFileWriter]
) -> ShardEntry:
    """The shard's other files, from its batches played (in order), and its entry; the
    per-deal rows are in ``writers`` already."""
    started = time.perf_counter()
    shard, cells = job.shard, list(job.cells)
    metadata = shard_metadata(job)
    from pipeline.records import summary

    first = pieces[0]
    if first.counts is not None:
        from pipeline.records import wins

        counts = copy.deepcopy(first.counts)  # a piece from Ray's object store is read-only
        for piece in pieces[1:]:
            counts.merge(piece.counts)
        parts = [counts.tables()]
        every, cross = cross_pairs(job)
        strategies = counts.strategies
        if cross:
            cross_counts = sum(piece.cross_counts for piece in pieces)
            parts.append({"pairs": summary.pair_table_of(every, cross, cross_counts, strategies)})
        tables = summary.combine(parts, strategies)  # in the order of its keys
        bits = [piece.own_bits for piece in pieces]
        bits = bits[0] if len(bits) == 1 else np.concatenate(bits, axis=1)
        tables[WINS_TABLE] = wins.wins_table(cells, bits, shard.count, strategies)
    else:
        facts = copy.deepcopy(first.facts)
        for piece in pieces[1:]:
            facts.merge(piece.facts)
        tables = {FACTS_TABLE: facts.table()}
    for name, table in tables.items():
        table = table.replace_schema_metadata(metadata)
        writers[name] = ShardFileWriter(job.location, shard.path(name), name)
        writers[name].write(table)
    files = tuple(writer.commit() for writer in writers.values())
    tallies = [piece.tally for piece in pieces if piece.tally is not None]
    return ShardEntry(
        index=shard.index,
        first=shard.first,
        last=shard.last,
        deals=shard.count,
        cells=len(cells),
        rows=sum(record.rows for record in files if record.table == DEALS_TABLE),
        files=files,
        seconds=round(sum(p.seconds for p in pieces) + time.perf_counter() - started, 3),
        kernel_seconds=round(sum(p.kernel_seconds for p in pieces), 3),
        tally=sum(tallies[1:], tallies[0]).entry() if tallies else None,
        staged=tuple(
            (writer.staged, writer.relative)
            for writer in writers.values()
            if writer.staged is not None
        ),
    )
