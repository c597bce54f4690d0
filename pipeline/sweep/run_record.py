"""The run record (run.json): what each run of a sweep did, written by one writer."""

from __future__ import annotations

import os
from datetime import UTC, datetime

from pipeline import __version__
from pipeline.records import identity
from pipeline.store import groups
from pipeline.store.entries import RunRecord
from pipeline.store.layout import RUN_FILE
from pipeline.store.location import Location
from pipeline.sweep.config import SweepConfig


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def start_run_record(
    config: SweepConfig,
    previous: RunRecord | None,
    cluster: dict | None,
    todo: int,
    skipped: int,
    cell_groups: list[groups.CellGroup] | None = None,
) -> RunRecord:
    sweep = config.identity()
    cell_groups = cell_groups or [groups.first_group(sweep, config.cells)]
    record = RunRecord(
        clocksweep=__version__,
        config_hash=cell_groups[0].config_hash,
        config=config.resolved(),
        config_source=config.source,
        deal_scheme=sweep["deal_scheme"],
        result_schema=sweep["result_schema"],
        record=config.record,
        cells=[
            {**identity.cell_record(cell), "label": cell.label}
            for cell in groups.sweep_cells(cell_groups)
        ],
        cell_groups=[group.to_json() for group in cell_groups] if len(cell_groups) > 1 else None,
        shards={
            "count": config.n_shards,
            "size": config.shard_size,
            "naming": "shards/<table>/shard-<index>_deals-<first>-<last>.parquet",
        },
        # A run still "running" ended without a word (its driver was killed): this driver holds
        # the directory's lock, so that run is over.
        runs=[
            {**run, "status": "died"} if run.get("status") == "running" else run
            for run in (previous.runs if previous else [])
        ],
    )
    record.runs.append(
        {
            "started": now(),
            "finished": None,
            "status": "running",
            "host": os.uname().nodename,
            "clocksweep": __version__,
            "executor": config.executor,
            "shards_to_play": todo,
            "shards_already_committed": skipped,
            "ray": cluster,
        }
    )
    return record


class RunLog:
    """This run's entry in the run record, and run.json written at each of its events: the
    only writer of run.json while a sweep runs."""

    def __init__(self, location: Location, record: RunRecord):
        self.location, self.record = location, record
        self.write()

    @classmethod
    def started(cls, location: Location, config: SweepConfig, *details) -> RunLog:
        """A run begun: its entry (`start_run_record`'s, of ``details``) written."""
        return cls(location, start_run_record(config, *details))

    @property
    def run(self) -> dict:
        return self.record.runs[-1]

    def write(self) -> None:
        self.location.write_json(RUN_FILE, self.record.to_json())

    def recounted(self, skipped: int) -> None:
        """Shards found committed before, once those past a stopping point are removed."""
        self.run["shards_already_committed"] = skipped
        self.write()

    def ray_up(self, cluster: dict) -> None:
        self.run["ray"] = cluster
        self.write()

    def node_lost(self, node: dict) -> None:  # recorded as it happens, not only at the end
        self.run.setdefault("nodes_lost", []).append(node)
        self.write()

    def stopped(self, status: str) -> None:
        """The run ended before it played (failed, or interrupted)."""
        self.run.update(finished=now(), status=status)
        self.write()

    def finished(self, status: str, stop: dict | None, **counts) -> None:
        """The run ended: how (``status``), how its stop rule stopped, and ``counts`` of what
        it played (shards_played, shards_failed)."""
        self.record.stop = stop
        self.run.update(finished=now(), status=status, **counts)
        self.write()
