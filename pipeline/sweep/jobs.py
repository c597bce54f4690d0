"""A sweep's units of work (a shard of a cell group) as a run plays them: those left, in the
order they start, and the job each is played by."""

from __future__ import annotations

from pipeline import __version__
from pipeline.records import identity
from pipeline.store import groups, layout
from pipeline.store.plan import ShardPlan
from pipeline.sweep.config import SweepConfig
from pipeline.sweep.executors import Unit
from pipeline.sweep.state import Part
from pipeline.sweep.stopping import tally_pairs
from pipeline.sweep.task import PlayedGroup, ShardJob

STOP_AHEAD = 2  # under a stop rule, shards started past the prefix: at most this x in flight


def tasks_left(parts: list[Part], shards: ShardPlan) -> int:
    """Shards of every group not committed (to the stopping point, if the rule has one)."""
    stop = parts[-1].manifest.stop_at
    planned = shards.count if stop is None else stop + 1
    left = 0
    for part in parts:
        manifest, beyond = part.manifest, 0
        if stop is not None:
            beyond = sum(1 for index in manifest.open if index > stop)
            for page in manifest.pages:  # past the stop, to be opened and cut
                first = page * manifest.page_shards
                beyond += max(0, first + manifest.page_shards - max(first, stop + 1))
        left += planned - (len(manifest) - beyond)
    return left


def provenance(
    config: SweepConfig, group: groups.CellGroup | None = None, grows: str | None = None
) -> dict:
    """What every shard file of a cell group (by default the config's cells, one group)
    carries in its Parquet metadata (no host, no time: see store.files)."""
    group = group or groups.first_group(config.identity(), config.cells)
    return {
        "clocksweep": __version__,
        "name": config.name,
        "config_hash": group.config_hash,
        "sweep": identity.group_identity(config.identity(), group.cells, grows),
    }


def group_jobs(config: SweepConfig, parts: list[Part]) -> list[dict]:
    """What every job of each cell group has in common (`ShardJob`'s other fields)."""
    common = []
    for number, part in enumerate(parts):
        cells = groups.sweep_cells([p.group for p in parts[: number + 1]])
        common.append(
            {
                "location": part.location,
                "seed": config.seed,
                "cells": part.group.cells,
                "record": config.record,
                "provenance": provenance(
                    config, part.group, parts[number - 1].group.config_hash if number else None
                ),
                # Tallied whether or not this run has a stop rule: a later run may add one.
                "tally_pairs": tuple(tally_pairs(cells)),
                "strategy_seconds": config.strategy_bound,
                "device": config.device,
            }
        )
    return common


def wins_table_of(config: SweepConfig) -> str:
    """The table whose files hold a shard's wins, which a later cell group reads."""
    return layout.wins_table_of(config.record)


def played_before(
    parts: list[Part], index: int, number: int, wins_table: str
) -> tuple[PlayedGroup, ...] | None:
    """The groups before group ``number`` whose wins its shard ``index`` reads: None until
    each has committed the shard in a written manifest."""
    played = []
    for part in parts[:number]:
        entry = part.manifest.entry(index)
        if entry is None or not part.manifest.written(index):
            return None
        played.append(PlayedGroup(part.location, part.group.cells, entry.files_of(wins_table)[0]))
    return tuple(played)


def units_left(shards: ShardPlan, parts: list[Part], taken=()):
    """The units not committed, in shard order, up to the stopping point (as it is when
    each is asked for), less those in ``taken``; made as they are asked for: a plan can
    hold more shards than memory."""
    for shard in shards:
        stop = parts[-1].manifest.stop_at  # the stop rule's
        if stop is not None and shard.index > stop:
            return
        for number, part in enumerate(parts):
            unit = Unit(shard, number)
            if shard.index not in part.manifest and unit not in taken:
                yield unit


def in_flight_for(cpus: int) -> int:
    """Tasks kept in flight on ``cpus`` CPUs: two each, so that none waits on the driver."""
    return max(2, 2 * cpus)


def early_units(config: SweepConfig, shards: ShardPlan, parts: list[Part], threads: int):
    """The units the early player may play, in the order the driver would start them: those
    left whose earlier groups have the shard, with their jobs. Under a stop rule, none
    past the bound the scheduler keeps to (`Scheduler.ahead`): the rule reads nothing
    until Ray is up, so the prefix it has read is the one committed before."""
    common, wins_table = group_jobs(config, parts), wins_table_of(config)
    ahead = STOP_AHEAD * in_flight_for(threads)  # the threads standing for Ray's CPUs
    bound = parts[-1].manifest.prefix + ahead if config.stop else None
    for unit in units_left(shards, parts):
        if bound is not None and unit.shard.index >= bound:
            return
        reads = played_before(parts, unit.shard.index, unit.group, wins_table)
        if reads is not None:
            job = ShardJob(shard=unit.shard, attempt=1, earlier=reads, **common[unit.group])
            yield unit, job
