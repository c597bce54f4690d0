"""A driver's first shards (local output), played in a thread of its own while the local Ray
instance it starts comes up: `ray.init` spends seconds waiting on the processes it starts, with a core to
spare, and the kernel releases the GIL.

The thread plays the units (shard, cell group) it is given in order, with the production
task's own code (`task.play_batches`, `task.assemble`), so its files are the bytes a Ray
worker would write. It takes no new unit once the driver has Ray (`close`); the one it is
playing then ends at its next kernel batch, and what it played is given to the driver
(`Partial`), which has the rest of the shard's batches played on Ray as pieces and its files
assembled from all of them: so the thread is soon off the cores Ray's workers need. (A shard
whose pieces would keep too much in memory, `task.SPLIT_BYTES_MAX`, is played whole and
finished here.) Nothing it plays is committed by the thread: it leaves its entries for the
driver, whose manifest alone says what is committed.

CLOCKSWEEP_PLAY_WHILE_RAY_STARTS=0 turns it off (to measure what it gives).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from pipeline.store.entries import ShardEntry
from pipeline.sweep.task import (
    SPLIT_BYTES_MAX,
    Played,
    ShardJob,
    assemble,
    batch_starts,
    kept_bytes,
    play_batches,
    write_shard,
)

ENABLED_ENV = "CLOCKSWEEP_PLAY_WHILE_RAY_STARTS"

Unit = tuple[object, int]  # (Shard, group number), as the driver schedules them


NICE_WHILE_RAY_STARTS = 19


def _set_nice(tid: int, value: int) -> int | None:
    """Set a thread's nice value (Linux: per thread); gives the one it had, None if refused."""
    try:
        before = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, value)
    except (OSError, AttributeError):
        return None
    return before


def enabled() -> bool:
    return os.environ.get(ENABLED_ENV, "1") != "0"


class Stopped(Exception):
    """The driver stopped the thread mid-shard (interrupted, or past a stopping point)."""


@dataclass(frozen=True)
class Partial:
    """The unit being played when the driver had Ray: its first batches, played here."""

    job: ShardJob
    played: Played


class EarlyPlayer:
    """Plays ``units`` ((unit, job) pairs, made as they are asked for) in a thread, until
    `close`. `take` gives what it finished: (unit, ShardEntry, Partial or the exception
    raised)."""

    def __init__(self, units: Iterator[tuple[Unit, ShardJob]]):
        self._units = units
        self._lock = threading.Lock()  # the units are made under it: they read manifests
        self._closed = False
        self._stop = threading.Event()
        self._playing: Unit | None = None
        self.started = 0  # units taken
        self.began = time.monotonic()
        self._finished: list[tuple[Unit, ShardEntry | Partial | BaseException]] = []
        self._tid, self._niceness = None, None
        self._thread = threading.Thread(target=self._run, name="clocksweep-early", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        # Ray's start is on the critical path: its processes take the cores first, and this
        # thread what they leave. Once Ray is up, `close` gives it its share again.
        self._tid = threading.get_native_id()
        self._niceness = _set_nice(self._tid, NICE_WHILE_RAY_STARTS)
        while True:
            with self._lock:
                if self._closed:
                    return
                unit, job = next(self._units, (None, None))
                if unit is None:
                    return
                self._playing = unit
                self.started += 1
            try:
                result = self._play(job)
            except BaseException as error:  # noqa: BLE001 (the driver reports or retries it)
                result = error
            with self._lock:
                self._finished.append((unit, result))
                self._playing = None

    def _play(self, job: ShardJob) -> ShardEntry | Partial:
        if kept_bytes(job) > SPLIT_BYTES_MAX:
            return write_shard(job, after_batch=self._check)
        batches = len(batch_starts(job))
        played = play_batches(
            job, (0, batches), after_batch=self._check, until=lambda: self._closed
        )
        if played.batches[1] < batches:
            return Partial(job, played)
        return assemble(job, [played])

    def _check(self, _job: ShardJob, _start: int) -> None:
        if self._stop.is_set():
            raise Stopped

    def close(self) -> Unit | None:
        """Take no new unit, and end the one being played at its next batch: gives that
        unit, if any. After this the driver alone reads and writes the manifests."""
        with self._lock:
            self._closed = True
            if self._niceness is not None:  # back to the process's own (allowed: root, or
                _set_nice(self._tid, self._niceness)  # within RLIMIT_NICE); else it stays low
                self._niceness = None
            return self._playing

    def take(self) -> list[tuple[Unit, ShardEntry | Partial | BaseException]]:
        """What was finished since the last look."""
        with self._lock:
            finished, self._finished = self._finished, []
            return finished

    def wait(self, seconds: float) -> None:
        """Until the thread ends (its last unit finished), or ``seconds`` have passed."""
        self._thread.join(seconds)

    def stop(self) -> None:
        """End the unit being played at its next batch (its files are removed) and wait."""
        self.close()
        self._stop.set()
        self._thread.join()
