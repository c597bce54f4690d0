"""A driver's first shards (local output), played in a thread of its own while the local Ray
instance it starts comes up: `ray.init` spends seconds waiting on the processes it starts, with a core to
spare, and the kernel releases the GIL.

The thread plays the units (shard, cell group) it is given in order, with the production
task's own `write_shard`, so its files are the bytes a Ray worker would write. It takes no new
unit once the driver has Ray (`close`); the one it is playing then is finished and committed
like a task's, or, if it fails, retried on Ray. Nothing it plays is committed by the thread:
it leaves its entries for the driver, whose manifest alone says what is committed.

CLOCKSWEEP_PLAY_WHILE_RAY_STARTS=0 turns it off (to measure what it gives).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

from pipeline.store.entries import ShardEntry
from pipeline.sweep.task import ShardJob, write_shard

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


class EarlyPlayer:
    """Plays ``units`` ((unit, job) pairs, made as they are asked for) in a thread, until
    `close`. `take` gives what it finished: (unit, ShardEntry or the exception raised)."""

    def __init__(self, units: Iterator[tuple[Unit, ShardJob]]):
        self._units = units
        self._lock = threading.Lock()  # the units are made under it: they read manifests
        self._closed = False
        self._stop = threading.Event()
        self._playing: Unit | None = None
        self.started = 0  # units taken
        self.began = time.monotonic()
        self._finished: list[tuple[Unit, ShardEntry | BaseException]] = []
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
                result = write_shard(job, after_batch=self._check)
            except BaseException as error:  # noqa: BLE001 (the driver reports or retries it)
                result = error
            with self._lock:
                self._finished.append((unit, result))
                self._playing = None

    def _check(self, _job: ShardJob, _start: int) -> None:
        if self._stop.is_set():
            raise Stopped

    def close(self) -> Unit | None:
        """Take no new unit: gives the one still being played, if any. After this the driver
        alone reads and writes the manifests."""
        with self._lock:
            self._closed = True
            if self._niceness is not None:  # back to the process's own (allowed: root, or
                _set_nice(self._tid, self._niceness)  # within RLIMIT_NICE); else it stays low
                self._niceness = None
            return self._playing

    def take(self) -> list[tuple[Unit, ShardEntry | BaseException]]:
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
