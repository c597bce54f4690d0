"""A driver's first shards (local output), played in threads of its own while the local Ray
instance it starts comes up: `ray.init` spends seconds waiting on the processes it starts,
with cores to spare, and the kernel releases the GIL.

This is the thread executor (`executors.ThreadExecutor`) fed with the units the scheduler
would start first, a thread for each CPU the instance will have, at the lowest priority
until Ray is up. No unit is taken once the driver has Ray (`close`); each being played then
ends at its next kernel batch, and what it played is given to the scheduler (`Partial`),
which has the rest of the shard's batches played on Ray as pieces and its files assembled
from all of them: so the threads are soon off the cores Ray's workers need. (A shard whose
pieces would keep too much in memory, a thread's share of `task.SPLIT_BYTES_MAX`, is played
whole and finished here.) Nothing is committed by the threads: they leave their entries for
the scheduler, whose manifest alone says what is committed.

CLOCKSWEEP_PLAY_WHILE_RAY_STARTS=0 turns it off (to measure what it gives).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from pipeline.sweep.executors import Partial, Stopped, ThreadExecutor, Unit, threads_for
from pipeline.sweep.task import ShardJob

__all__ = ["EarlyPlayer", "Partial", "Stopped", "Unit", "enabled", "threads_for"]

ENABLED_ENV = "CLOCKSWEEP_PLAY_WHILE_RAY_STARTS"
NICE_WHILE_RAY_STARTS = 19


def enabled() -> bool:
    return os.environ.get(ENABLED_ENV, "1") != "0"


class EarlyPlayer(ThreadExecutor):
    """Plays ``units`` ((unit, job) pairs, made as they are asked for) in ``threads`` threads,
    until `close`. `take` gives what they finished: (unit, ShardEntry, Partial or the
    exception raised)."""

    def __init__(self, units: Iterator[tuple[Unit, ShardJob]], threads: int = 1):
        super().__init__(threads, feed=units, nice=NICE_WHILE_RAY_STARTS, hand_over=True)

    def take(self) -> list:
        """What was finished since the last look."""
        return self.results(0)

    def drop(self, unit) -> None:
        """End ``unit`` at its next batch, if it is being played (it ends in `Stopped`)."""
        self.cancel(unit)
