"""The Ray task: one shard played under every cell of a cell group by the kernel, in
sub-batches that bound its memory, and written to its own Parquet file(s) (see `store.files`).
It returns only small metadata, its manifest entry, which the driver commits; results never
pass through the driver. A group added to a grown sweep (`store.groups`) reads the wins of the
groups before it from their committed files, to pair its cells with theirs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from pipeline.engine.rules import Cell
from pipeline.store.entries import FileRecord, ShardEntry
from pipeline.store.files import ShardFileWriter, file_metadata
from pipeline.store.layout import DEALS_TABLE, FACTS_TABLE, WINS_TABLE
from pipeline.store.location import Location
from pipeline.store.plan import Shard

# A task plays at most this many rows (deals x cells) at once. Per-deal records: few enough
# that the allocator reuses the same pages batch after batch (larger batches are fresh pages
# every time, and cost more per row); summary records: more, since each batch ends in its own
# small tables. `benchmarks/sweep_bench.py` measures a sweep's split of time.
ROWS_PER_BATCH = {"deals": 500_000, "summary": 4_000_000}


def deals_per_batch(count: int, n_cells: int, multiple: int = 1, record: str = "deals") -> int:
    """Sub-batch size: even batches of at most ROWS_PER_BATCH[record] rows, a multiple of
    ``multiple``."""
    n_batches = -(-count * n_cells // ROWS_PER_BATCH[record])
    size = max(1, -(-count // max(1, n_batches)))
    if multiple > 1 and size > multiple:
        size -= size % multiple
    return size


def tally_of(packed: np.ndarray, pairs: list[tuple[int, int]]) -> dict:
    """What a stop rule reads of a shard, from its cells' wins packed to bits (cells x uint64
    words, `summary.as_words`; batches packed one by one side by side, since the zero bits
    that pad each count nothing): each cell's wins, and each pair's deals won by a alone and
    by b alone."""
    from pipeline.records import summary

    wins = summary.popcount_rows(packed).tolist()
    if not pairs:
        return {"wins": wins, "pairs": []}
    a = packed[np.array([pair[0] for pair in pairs])]
    b = packed[np.array([pair[1] for pair in pairs])]
    a_only = summary.popcount_rows(a & ~b).tolist()
    b_only = summary.popcount_rows(b & ~a).tolist()
    return {"wins": wins, "pairs": [[x, y] for x, y in zip(a_only, b_only)]}


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


def play_shard(job: ShardJob, after_batch=None) -> ShardEntry:
    """The Ray task: `write_shard`'s manifest entry, with the node that played the shard."""
    import ray

    return replace(
        write_shard(job, after_batch),
        node=ray.util.get_node_ip_address(),
        node_id=ray.get_runtime_context().get_node_id(),
    )


def write_shard(job: ShardJob, after_batch=None) -> ShardEntry:
    """Play a shard under every cell and write its file(s): the manifest entry, less attempts
    and node. ``after_batch(job, start)`` is called once each batch is written (a test's way
    in: to stop a worker mid-shard)."""
    started = time.perf_counter()
    from pipeline.engine import kernel

    shard, cells = job.shard, list(job.cells)
    metadata = file_metadata(
        {
            **job.provenance,
            "shard": {"index": shard.index, "first": shard.first, "last": shard.last},
        }
    )
    from pipeline.records import summary

    multiple = 1
    facts = counts = None
    if job.record == "summary":
        multiple = summary.BLOCK  # batches of whole blocks: runs of deals are counted per batch
        counts = summary.KernelBatches(cells)
    else:
        facts = summary.FactCounts(cells)  # the deal facts, counted beside the per-deal rows
    writers: dict[str, ShardFileWriter] = {}
    pairs = None if job.tally_pairs is None else list(job.tally_pairs)
    packed_wins = []  # each batch's wins packed to bits, for the shard's tally
    own_wins = []  # a summary shard's wins, batch by batch, for its wins table
    playing = 0.0  # seconds in the kernel, so that the manifest shows what the rest cost
    earlier_won, cross, cross_counts, every = None, [], None, cells
    if job.earlier:
        from pipeline.records import wins

        earlier_won = np.concatenate(
            [
                wins.read_wins(group.location, group.record, group.cells, shard.first, shard.count)
                for group in job.earlier
            ]
        )
        if facts is None:  # summary tables pair the new cells with the earlier ones here
            before = [cell for group in job.earlier for cell in group.cells]
            every = before + cells
            cross = [(a, b) for a, b in summary.comparable_pairs(every) if a < len(before) <= b]
            cross_counts = np.zeros((len(cross), 4), dtype=np.int64)
    try:
        batch = deals_per_batch(shard.count, len(cells), multiple, job.record)
        for start in range(0, shard.count, batch):
            first = shard.first + start
            count = min(batch, shard.count - start)
            began = time.perf_counter()
            results = kernel.play(job.seed, first, count, cells)
            playing += time.perf_counter() - began
            won = results["won"]
            if earlier_won is not None:
                won = np.concatenate([earlier_won[:, start : start + count], won.astype(bool)])
            if pairs is not None:
                packed_wins.append(np.packbits(won, axis=1))  # nonzero: a 1 bit
            if facts is None:
                counts.add_matrix(results)
                own_wins.append(results["won"].astype(bool))
                if cross:
                    cross_counts += summary.pair_counts(won, None, cross)
            else:
                facts.add_results(results)
                if DEALS_TABLE not in writers:
                    writers[DEALS_TABLE] = ShardFileWriter(
                        job.location, shard.path(DEALS_TABLE), DEALS_TABLE
                    )
                writers[DEALS_TABLE].write_deals(job.seed, first, results, cells, metadata)
            del results
            if after_batch is not None:
                after_batch(job, start)
        # One file per summary table, each the shard's counts summed over its batches.
        if facts is None:
            from pipeline.records import wins

            parts = [counts.tables()]
            if cross:
                parts.append({"pairs": summary.pair_table_of(every, cross, cross_counts)})
            tables = summary.combine(parts)  # in the order of its keys
            tables[WINS_TABLE] = wins.wins_table(cells, np.concatenate(own_wins, axis=1))
        else:
            tables = {FACTS_TABLE: facts.table()}
        for name, table in tables.items():
            table = table.replace_schema_metadata(metadata)
            writers[name] = ShardFileWriter(job.location, shard.path(name), name)
            writers[name].write(table)
        files = tuple(writer.commit() for writer in writers.values())
    except BaseException:
        for writer in writers.values():
            writer.abort()
        raise
    return ShardEntry(
        index=shard.index,
        first=shard.first,
        last=shard.last,
        deals=shard.count,
        cells=len(cells),
        rows=sum(record.rows for record in files if record.table == DEALS_TABLE),
        files=files,
        seconds=round(time.perf_counter() - started, 3),
        kernel_seconds=round(playing, 3),
        tally=None
        if pairs is None
        else tally_of(summary.as_words(np.concatenate(packed_wins, axis=1)), pairs),
        staged=tuple(
            (writer.staged, writer.relative)
            for writer in writers.values()
            if writer.staged is not None
        ),
    )
