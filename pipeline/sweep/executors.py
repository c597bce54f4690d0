"""Where units of work are played: the executors a sweep's scheduler (`schedule`) hands them to.

A unit is one shard of one cell group (`Unit`). An executor takes a unit with its job
(`submit`), gives what came of the units it finished (`results`: an entry, the exception that
ended the attempt, or what the threads handing over to Ray played of it), and lets go of a
unit no longer needed (`cancel`); `stop` ends what it still plays. Two of them:

- `RayExecutor`: each unit a Ray task (a local instance or a cluster), at the end of a sweep
  in pieces assembled by a last task (`task.play_piece`, `task.assemble_shard`); it also
  watches for nodes the cluster loses.
- `ThreadExecutor`: threads of this process (the kernel and the Parquet encoders release the
  GIL), each unit played whole by the production task's code, so its files are the bytes a
  Ray worker writes. No Ray is imported. While a local Ray instance starts, a thread executor
  fed with the first units plays them (`early.EarlyPlayer`), and hands over to Ray.

The contract is `Executor`, which both implement; `executor_for` is the one place a run's
executor is chosen.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from pipeline.store.entries import ShardEntry
from pipeline.store.plan import Shard
from pipeline.sweep.run_record import now
from pipeline.sweep.signals import leave_threads
from pipeline.sweep.task import (
    SPLIT_BYTES_MAX,
    Played,
    ShardJob,
    assemble,
    assemble_shard,
    batch_starts,
    kept_bytes,
    play_batches,
    play_piece,
    play_shard,
    write_shard,
)

CANCEL_WAIT = 5.0  # seconds the end of a run waits for the tasks it cancelled to end
STOP_WAIT = 10.0  # seconds a thread executor's `stop` waits for its threads: a batch takes < 1


@dataclass(frozen=True)
class Unit:
    """A unit of work: shard ``shard`` of cell group ``group``."""

    shard: Shard
    group: int

    @property
    def key(self) -> tuple[int, int]:
        """(shard index, group), as the run's outcome names units."""
        return self.shard.index, self.group


class Stopped(Exception):
    """A unit ended mid-shard by its executor (the run interrupted, or past a stopping point)."""


@dataclass(frozen=True)
class Partial:
    """The unit being played when the threads handed over to Ray: its first batches."""

    job: ShardJob
    played: Played


@runtime_checkable
class Executor(Protocol):
    """Where a scheduler plays units (see the module): ``cpus`` units at a time, in pieces at
    a sweep's end where ``pieces``; ``node`` is what an entry it gives lacks of where it was
    played (empty where each names its own)."""

    cpus: int
    pieces: bool
    node: dict

    def submit(self, unit: Unit, job: ShardJob, bounds=None, played=None) -> None:
        """Play ``unit`` (given ``bounds``, as those pieces of its batches, after what was
        ``played`` already)."""

    def results(self, seconds: float = 0.0) -> list:
        """(unit, entry or `Partial` or the exception that ended it) of the units finished
        since the last look, waiting up to ``seconds`` for one."""

    def cancel(self, unit: Unit) -> None:
        """Let go of ``unit``: it is not needed any more."""

    def lost_nodes(self) -> list[dict]:
        """The nodes lost since the last look."""

    @property
    def alive_count(self) -> int:
        """The nodes it plays on."""

    def here(self) -> dict:
        """What an entry played by this process's threads says of where."""

    def stop(self) -> bool:
        """End what it still plays; whether all of it ended."""


def executor_for(
    on_ray: bool, num_cpus: int | None, task=play_shard, gpus: float = 0.0
) -> Executor:
    """A run's executor: Ray's tasks of ``task`` where it plays on Ray (connected by now),
    each asking for ``gpus``, else ``num_cpus`` threads of this process (`threads_for`)
    playing it, the production task as `write_shard` (a test's task, from faults.py, as it
    is)."""
    if on_ray:
        return RayExecutor(task, gpus)
    return ThreadExecutor(threads_for(num_cpus), write_shard if task is play_shard else task)


def threads_for(num_cpus: int | None) -> int:
    """A thread for each CPU: ``ray.num_cpus``, else those this process may run on (as Ray
    counts them by default)."""
    return num_cpus or len(os.sched_getaffinity(0))


def _set_nice(tid: int, value: int) -> int | None:
    """Set a thread's nice value (Linux: per thread); gives the one it had, None if refused."""
    try:
        before = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, value)
    except (OSError, AttributeError):
        return None
    return before


class ThreadExecutor:
    """Units played in ``threads`` threads of this process, by ``play(job, after_batch)``.

    The threads take the units submitted, in order, or else those ``feed`` gives ((unit, job)
    pairs made as they are asked for, under a lock: they read manifests), until it runs out.
    With ``hand_over`` (threads standing in while Ray starts) a unit being played when the
    executor is closed (`close`) ends at its next batch as a `Partial`, for Ray to finish; the
    threads run at nice value ``nice`` until then."""

    # Its pieces would be played one after another in one thread (`submit`), for nothing:
    # the scheduler does not split its units.
    pieces = False

    def __init__(
        self,
        threads: int = 1,
        play=write_shard,
        feed: Iterator | None = None,
        nice: int | None = None,
        hand_over: bool = False,
    ):
        self.cpus = threads
        self.node: dict = {"node": os.uname().nodename}  # what its entries say played them
        self.started = 0  # units taken
        self.began = time.monotonic()
        self._play_whole, self._feed, self._nice, self._hand_over = play, feed, nice, hand_over
        self._queue: deque = deque()  # (unit, job) submitted, not taken yet
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._closed = False
        self._stop = threading.Event()
        self._dropped: set = set()  # to be ended at their next batch (`cancel`)
        self._playing: dict[int, object] = {}  # by thread
        self._kept_max = SPLIT_BYTES_MAX // threads  # what a thread may keep of a shard
        self._finished: list[tuple[object, ShardEntry | Partial | BaseException]] = []
        self._niceness: dict[int, int] = {}  # by thread id: the nice value each had
        self._threads = [
            threading.Thread(target=self._run, args=(number,), name=f"clocksweep-{number}")
            for number in range(threads)
        ]
        for thread in self._threads:
            thread.daemon = True
            thread.start()

    def _run(self, number: int) -> None:
        if self._nice is not None:
            self._lower_priority()
        while True:
            with self._lock:
                taken = self._take(number)
            if taken is None:
                return
            unit, job, bounds, played = taken
            try:
                result = self._play(unit, job, bounds, played)
            except BaseException as error:  # noqa: BLE001 (the scheduler reports or retries it)
                result = error
            with self._lock:
                self._finished.append((unit, result))
                del self._playing[number]
                self._changed.notify_all()

    def _lower_priority(self) -> None:
        # Ray's start is on the critical path: its processes take the cores first, and these
        # threads what they leave. `close` gives them their share again.
        tid = threading.get_native_id()
        niceness = _set_nice(tid, self._nice)
        with self._lock:
            if niceness is not None and not self._closed:
                self._niceness[tid] = niceness
            elif niceness is not None:
                _set_nice(tid, niceness)

    def _take(self, number: int):
        """The next unit and job for thread ``number`` (the lock held); None: it is to end."""
        while not self._closed:
            if self._queue:
                unit, job, *cut = self._queue.popleft()
            elif self._feed is not None:
                unit, job = next(self._feed, (None, None))
                if unit is None:
                    return None
                cut = (None, None)
            else:
                self._changed.wait()
                continue
            self._playing[number] = unit
            self.started += 1
            return unit, job, *cut
        return None

    def _play(self, unit, job: ShardJob, bounds, played) -> ShardEntry | Partial:
        def check(_job: ShardJob, _start: int) -> None:
            if self._stop.is_set() or unit in self._dropped:
                raise Stopped

        if bounds is not None:  # in pieces, one after another: the bytes of the whole shard
            before = [] if played is None else [played]
            pieces = [play_batches(job, batches, after_batch=check) for batches in bounds]
            return assemble(job, before + pieces)
        if not self._hand_over or kept_bytes(job) > self._kept_max:
            return self._play_whole(job, after_batch=check)
        batches = len(batch_starts(job))
        played = play_batches(job, (0, batches), after_batch=check, until=lambda: self._closed)
        if played.batches[1] < batches:
            return Partial(job, played)
        return assemble(job, [played])

    def submit(self, unit, job: ShardJob, bounds=None, played=None) -> None:
        """Play ``unit``; given ``bounds``, as those pieces of its batches (after what was
        ``played`` already), one after another in one thread."""
        with self._lock:
            self._queue.append((unit, job, bounds, played))
            self._changed.notify_all()

    def results(self, seconds: float = 0.0) -> list:
        """What was finished since the last look, waiting up to ``seconds`` for something."""
        with self._lock:
            if seconds > 0:
                self._changed.wait_for(lambda: self._finished, timeout=seconds)
            finished, self._finished = self._finished, []
            return finished

    def cancel(self, unit) -> None:
        """Let go of ``unit``: never begun if it is not yet, else ended at its next batch
        (ending in `Stopped`)."""
        with self._lock:
            queued = [item for item in self._queue if item[0] == unit]
            for item in queued:
                self._queue.remove(item)
            if not queued:
                self._dropped.add(unit)

    def lost_nodes(self) -> list[dict]:
        return []  # this process's threads: lost only with the process

    @property
    def alive_count(self) -> int:
        return 1  # this machine

    def here(self) -> dict:
        return self.node

    def close(self) -> list:
        """Take no new unit, and end those being played (at their next batch, with
        ``hand_over``): gives those units, in the order they were taken."""
        with self._lock:
            self._closed = True
            for tid, niceness in self._niceness.items():  # back to the process's own (allowed:
                _set_nice(tid, niceness)  # root, or within RLIMIT_NICE); else they stay low
            self._niceness.clear()
            self._changed.notify_all()
            return list(self._playing.values())

    def wait(self, seconds: float) -> None:
        """Until the threads end (their last units finished), or ``seconds`` have passed."""
        until = time.monotonic() + seconds
        for thread in self._threads:
            thread.join(max(0.0, until - time.monotonic()))

    def stop(self, seconds: float = STOP_WAIT) -> bool:
        """End the units being played at their next batch (their files are removed), and
        wait for the threads, at most ``seconds``: whether they ended. (A thread can wait on
        a lock for ever: an import cut short in the main thread by a signal may leave its
        module's lock held; its unit is then left, as one of a run killed.)"""
        self.close()
        self._stop.set()
        self.wait(seconds)
        left = [thread.name for thread in self._threads if thread.is_alive()]
        if left:
            leave_threads(f"{', '.join(left)} (still playing {seconds:.0f} s after its stop)")
        return not left


class RayExecutor:
    """Units played as Ray tasks of ``task`` (`task.play_shard`, or a test's wrapper of it);
    a unit may be given in pieces (runs of its batches, each a task) that a last task
    assembles."""

    pieces = True

    def __init__(self, task, gpus: float = 0.0):
        import ray

        self._ray = ray
        remote = ray.remote(num_cpus=1, max_retries=0)
        playing = ray.remote(num_cpus=1, num_gpus=gpus, max_retries=0) if gpus else remote
        self._whole = playing(task)
        self._piece = playing(play_piece)
        self._assemble = remote(assemble_shard)
        self.resources = ray.cluster_resources()
        self.cpus = int(self.resources.get("CPU", 1))
        self.node: dict = {}  # its entries name their node themselves
        self._units: dict = {}  # ref -> unit
        self._pieces_of: dict = {}  # a split unit's assembly -> its pieces
        self._cancelled: list = []  # refs, waited for at `stop`
        self._watch = NodeWatch(ray)

    def here(self) -> dict:
        """This machine's node, where a local instance runs."""
        return {
            "node": self._ray.util.get_node_ip_address(),
            "node_id": self._ray.get_runtime_context().get_node_id(),
        }

    @property
    def alive_count(self) -> int:
        return self._watch.alive_count

    def submit(self, unit, job: ShardJob, bounds=None, played: Played | None = None) -> None:
        """``unit``'s task; or, given ``bounds``, its pieces' and their assembly's (after what
        was ``played`` already)."""
        if bounds is None:
            ref = self._whole.remote(job)
        else:
            pieces = [self._piece.remote(job, batches) for batches in bounds]
            before = [] if played is None else [self._ray.put(played)]
            ref = self._assemble.remote(job, *before, *pieces)
            self._pieces_of[ref] = pieces
        self._units[ref] = unit

    def results(self, seconds: float = 0.0) -> list:
        if not self._units:
            return []
        ray = self._ray
        ready, _ = ray.wait(list(self._units), num_returns=1, timeout=seconds)
        if ready:
            rest = [ref for ref in self._units if ref not in set(ready)]
            if rest:
                ready += ray.wait(rest, num_returns=len(rest), timeout=0)[0]
        finished = []
        for ref in ready:
            unit = self._units.pop(ref)
            self._pieces_of.pop(ref, None)
            try:
                finished.append((unit, ray.get(ref)))
            except Exception as error:  # a task's failure is reported, then retried
                finished.append((unit, error))
        return finished

    def cancel(self, unit) -> None:
        for ref in [ref for ref, held in self._units.items() if held == unit]:
            del self._units[ref]
            for piece in self._pieces_of.pop(ref, ()):
                self._ray.cancel(piece, force=True)
            self._ray.cancel(ref, force=True)
            self._cancelled.append(ref)

    def lost_nodes(self) -> list[dict]:
        return self._watch.lost()

    def stop(self) -> bool:
        """Cancel what still runs, and let what was cancelled end (so that no file of theirs
        appears after the clean-up)."""
        for unit in list(self._units.values()):
            self.cancel(unit)
        if self._cancelled:
            self._ray.wait(self._cancelled, num_returns=len(self._cancelled), timeout=CANCEL_WAIT)
        return True


class NodeWatch:
    """The cluster's nodes, looked at every few seconds: which of those alive at the start
    (or since) Ray has since found dead."""

    EVERY = 2.0  # seconds between looks: each is a call to Ray's control store

    def __init__(self, ray):
        self.ray = ray
        self.alive = self._alive()
        self.looked = time.monotonic()

    def _alive(self) -> dict[str, str]:
        return {
            n["NodeID"]: n.get("NodeManagerAddress", "?") for n in self.ray.nodes() if n["Alive"]
        }

    @property
    def alive_count(self) -> int:
        return len(self.alive)

    def lost(self) -> list[dict]:
        if time.monotonic() - self.looked < self.EVERY:
            return []
        self.looked = time.monotonic()
        alive = self._alive()
        gone = [
            {"node_id": node, "address": address, "lost": now()}
            for node, address in self.alive.items()
            if node not in alive
        ]
        self.alive = alive
        return gone
