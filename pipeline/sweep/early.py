"""A driver's first shards (local output), played in threads of its own while the local Ray
instance it starts comes up: `ray.init` spends seconds waiting on the processes it starts,
with cores to spare, and the kernel releases the GIL.

There is a thread for each CPU the instance will have, each playing the units (shard, cell
group) it takes, in order, with the production task's own code (`task.play_batches`,
`task.assemble`), so its files are the bytes a Ray worker would write. No unit is taken once
the driver has Ray (`close`); each being played then ends at its next kernel batch, and what
it played is given to the driver (`Partial`), which has the rest of the shard's batches
played on Ray as pieces and its files assembled from all of them: so the threads are soon
off the cores Ray's workers need. (A shard whose pieces would keep too much in memory, a
thread's share of `task.SPLIT_BYTES_MAX`, is played whole and finished here.) Nothing is
committed by the threads: they leave their entries for the driver, whose manifest alone
says what is committed.

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
STOP_WAIT = 10.0  # seconds `stop` waits for the threads: a batch takes well under one


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


def threads_for(num_cpus: int | None) -> int:
    """A thread for each CPU the local instance will have: ``ray.num_cpus``, else those
    this process may run on (as Ray counts them by default)."""
    return num_cpus or len(os.sched_getaffinity(0))


class Stopped(Exception):
    """The driver stopped a unit mid-shard (interrupted, or past a stopping point)."""


@dataclass(frozen=True)
class Partial:
    """The unit being played when the driver had Ray: its first batches, played here."""

    job: ShardJob
    played: Played


class EarlyPlayer:
    """Plays ``units`` ((unit, job) pairs, made as they are asked for) in ``threads`` threads,
    until `close`. `take` gives what they finished: (unit, ShardEntry, Partial or the
    exception raised)."""

    def __init__(self, units: Iterator[tuple[Unit, ShardJob]], threads: int = 1):
        self._units = units
        self._lock = threading.Lock()  # the units are made under it: they read manifests
        self._closed = False
        self._stop = threading.Event()
        self._dropped: set[Unit] = set()  # to be ended at their next batch (`drop`)
        self._playing: dict[int, Unit] = {}  # by thread
        self._kept_max = SPLIT_BYTES_MAX // threads  # what a thread may keep of a shard
        self.started = 0  # units taken
        self.began = time.monotonic()
        self._finished: list[tuple[Unit, ShardEntry | Partial | BaseException]] = []
        self._niceness: dict[int, int] = {}  # by thread id: the nice value each had
        self._threads = [
            threading.Thread(
                target=self._run, args=(number,), name=f"clocksweep-early-{number}", daemon=True
            )
            for number in range(threads)
        ]
        for thread in self._threads:
            thread.start()

    def _run(self, number: int) -> None:
        # Ray's start is on the critical path: its processes take the cores first, and these
        # threads what they leave. Once Ray is up, `close` gives them their share again.
        tid = threading.get_native_id()
        niceness = _set_nice(tid, NICE_WHILE_RAY_STARTS)
        with self._lock:
            if niceness is not None and not self._closed:
                self._niceness[tid] = niceness
            elif niceness is not None:
                _set_nice(tid, niceness)
        while True:
            with self._lock:
                if self._closed:
                    return
                unit, job = next(self._units, (None, None))
                if unit is None:
                    return
                self._playing[number] = unit
                self.started += 1
            try:
                result = self._play(unit, job)
            except BaseException as error:  # noqa: BLE001 (the driver reports or retries it)
                result = error
            with self._lock:
                self._finished.append((unit, result))
                del self._playing[number]

    def _play(self, unit: Unit, job: ShardJob) -> ShardEntry | Partial:
        def check(_job: ShardJob, _start: int) -> None:
            if self._stop.is_set() or unit in self._dropped:
                raise Stopped

        if kept_bytes(job) > self._kept_max:
            return write_shard(job, after_batch=check)
        batches = len(batch_starts(job))
        played = play_batches(job, (0, batches), after_batch=check, until=lambda: self._closed)
        if played.batches[1] < batches:
            return Partial(job, played)
        return assemble(job, [played])

    def close(self) -> list[Unit]:
        """Take no new unit, and end those being played at their next batch: gives those
        units. After this the driver alone reads and writes the manifests."""
        with self._lock:
            self._closed = True
            for tid, niceness in self._niceness.items():  # back to the process's own (allowed:
                _set_nice(tid, niceness)  # root, or within RLIMIT_NICE); else they stay low
            self._niceness.clear()
            return list(self._playing.values())  # in the order they were taken

    def drop(self, unit: Unit) -> None:
        """End ``unit`` at its next batch, if it is being played (it ends in `Stopped`)."""
        with self._lock:
            self._dropped.add(unit)

    def take(self) -> list[tuple[Unit, ShardEntry | Partial | BaseException]]:
        """What was finished since the last look."""
        with self._lock:
            finished, self._finished = self._finished, []
            return finished

    def wait(self, seconds: float) -> None:
        """Until the threads end (their last units finished), or ``seconds`` have passed."""
        until = time.monotonic() + seconds
        for thread in self._threads:
            thread.join(max(0.0, until - time.monotonic()))

    def stop(self, seconds: float = STOP_WAIT) -> bool:
        """End the units being played at their next batch (their files are removed), and
        wait for the threads, at most ``seconds``: whether they ended. (A thread can
        wait on a lock for ever: an import cut short in the main thread by a signal may
        leave its module's lock held; its unit is then left, as one of a run killed.)"""
        self.close()
        self._stop.set()
        self.wait(seconds)
        return not any(thread.is_alive() for thread in self._threads)
