"""The scheduler: hands a sweep's units (a shard of a cell group) to an executor and handles
what comes back, until every unit is committed, out of attempts, or past the stopping point.

Its state is held in its fields, and each event has a method of its own: a unit done
(`on_done`), failed (`on_failed`), a node lost (`on_node_lost`), the stopping point found
(`on_stopping_point`), the sweep's end (`submit`, which splits units there). A group's shard
waits for the groups before it to commit theirs (it reads their wins). Retries are the
scheduler's: a unit that fails is resubmitted up to ``max_retries`` more times, each attempt
reported as it happens and counted in the manifest, after a pause that doubles with each
attempt (`retry_delay`), so that a store or node that fails for a moment does not use up a
unit's attempts in it. A full disk stops the run (layout.StoreError): every attempt would
fail the same way.

Units played while Ray started (`early.EarlyPlayer`) are taken over first (`take_over`): what
it finished is committed here, what it was still playing finishes on the executor.
"""

from __future__ import annotations

import os
import time
from collections import deque
from dataclasses import replace

from pipeline.engine import bounded, rules
from pipeline.store import layout
from pipeline.store.entries import ShardEntry
from pipeline.store.location import is_disk_full
from pipeline.store.plan import ShardPlan
from pipeline.sweep.cluster import error_line
from pipeline.sweep.config import SweepConfig
from pipeline.sweep.executors import Executor, Partial, Stopped, Unit
from pipeline.sweep.jobs import (
    STOP_AHEAD,
    Part,
    group_jobs,
    in_flight_for,
    played_before,
    tasks_left,
    units_left,
    wins_table_of,
)
from pipeline.sweep.progress import PROGRESS_INTERVAL, Progress
from pipeline.sweep.signals import leave_strategy_threads, raise_if_stopped
from pipeline.sweep.task import (
    SPLIT_BYTES_MAX,
    PlayedGroup,
    ShardJob,
    batch_starts,
    kept_bytes,
    piece_bounds,
)

MANIFEST_INTERVAL = 1.0  # seconds between manifest writes while shards complete
EARLY_POLL = 0.05  # seconds between looks at the early player's last unit
# What `on_error` raises to stop the run: a strategy's fault, its time, a full disk.
RUN_STOPPING = (rules.StrategyError, layout.StoreError)  # StrategyTimeout is a StrategyError

# The end of a sweep: a unit handed to Ray with fewer units than the cluster has CPUs left
# after it is played in this many pieces (`task.play_piece`), so that no worker idles long
# while another plays a whole shard; a shard's pieces are kept (in Ray's object store) until
# its files are written, so a unit whose pieces would keep too much is
# played whole (`task.SPLIT_BYTES_MAX`). CLOCKSWEEP_SPLIT_TAIL=0 plays every unit whole (to
# measure what it gives).
TAIL_PIECES = 4
SPLIT_TAIL_ENV = "CLOCKSWEEP_SPLIT_TAIL"
# A failed unit's next attempt waits RETRY_BACKOFF seconds, doubled for each attempt after
# (1, 2, 4 s for the three retries by default), up to RETRY_BACKOFF_MAX: a store that fails
# every request for a second would otherwise fail the shards in flight for good, their
# attempts used up within it. Only when an attempt runs changes: never its result.
RETRY_BACKOFF = 1.0
RETRY_BACKOFF_MAX = 30.0


def retry_delay(tried: int) -> float:
    """Seconds to wait after a unit's ``tried``-th failed attempt before its next."""
    return min(RETRY_BACKOFF_MAX, RETRY_BACKOFF * 2 ** (tried - 1))


def split_tail_enabled() -> bool:
    return os.environ.get(SPLIT_TAIL_ENV, "1") != "0"


class Resting:
    """Failed units waiting out their pause before their next attempt."""

    def __init__(self):
        self.units: list[tuple[float, Unit]] = []  # (when it may start, unit)

    def add(self, unit: Unit, tried: int) -> None:
        self.units.append((time.monotonic() + retry_delay(tried), unit))

    def over(self, retries: deque) -> float:
        """Units whose pause is over, to ``retries``; the seconds until the next one's is
        (inf: none is resting)."""
        clock = time.monotonic()
        retries.extendleft(unit for when, unit in self.units if when <= clock)
        self.units = [(when, unit) for when, unit in self.units if when > clock]
        return min((when - clock for when, _ in self.units), default=float("inf"))

    def __iter__(self):
        return (unit for _, unit in self.units)

    def __bool__(self) -> bool:
        return bool(self.units)


class Scheduler:
    """Keeps ``executor`` busy with the units of ``parts`` left to play (see the module).

    ``split_tail``: the sweep's end is played in pieces, where the executor can; ``early``:
    the executor that played while Ray started, taken over first; ``node_lost(node)``: told
    of each node the cluster loses (a dict of node_id, address and when it was lost)."""

    def __init__(
        self,
        config: SweepConfig,
        shards: ShardPlan,
        parts: list[Part],
        progress: Progress,
        outcome,
        executor: Executor,
        *,
        split_tail: bool = True,
        early=None,
        node_lost=None,
    ):
        self.config, self.shards, self.parts = config, shards, parts
        self.progress, self.outcome = progress, outcome
        self.executor, self.early, self.node_lost = executor, early, node_lost
        self.in_flight = in_flight_for(executor.cpus)
        self.split_tail = split_tail and executor.pieces
        self.pieces_said = False  # the first unit split, once said
        self.manifest = parts[-1].manifest  # the stop rule's
        self.hold = parts[0].location.hold  # its lock, or an object store's lease
        self.common = group_jobs(config, parts)
        self.wins_table = wins_table_of(config)
        # Under a stop rule, shards past the point are played for nothing: while some are in
        # flight, none is started more than this far past the prefix the rule has read.
        self.ahead = STOP_AHEAD * self.in_flight if config.stop else None
        self.waiting: list[Unit] = []  # next in order, not ready yet
        self.given_up: set[int] = set()  # shards out of attempts in some group
        self.retries: deque[Unit] = deque()
        self.resting = Resting()  # failed, to be retried after a pause
        self.attempts: dict[Unit, int] = {}  # a unit with attempts is in hand
        self.upcoming = units_left(shards, parts, taken=self.attempts)
        self.unhanded = 0  # units ``upcoming`` has yet to give (at most: a stop rule may cut)
        self.pending: dict[Unit, object] = {}  # in flight, and on which executor
        self.cancelled: list[Unit] = []  # past the stopping point, or in flight at the end
        self.report_removed = False
        self.allowed = 1 + config.max_retries

    # --- The loop ---------------------------------------------------------------------

    def run(self) -> None:
        """Play until every unit is committed or out of attempts (or past the stopping
        point); whatever ends it, what is still in flight is cancelled."""
        try:
            self.unhanded = tasks_left(self.parts, self.shards)
            if self.early is not None:
                self.take_over()
            while self.step():
                pass
            self.progress.tick(force=True)
        finally:
            self.end()

    def step(self) -> bool:
        """One turn of the loop: start what may start, take what came back; whether to go on."""
        if self.hold is not None:  # a lease lost stops the run now, not at its next commit
            self.hold.check()
        pause = self.resting.over(self.retries)
        self.fill()
        if not self.pending:
            return self.idle(pause)
        held = any(executor is self.early for executor in self.pending.values())
        # While the early player is on its last unit, its end is looked for often.
        self.take(self.results(min(EARLY_POLL if held else PROGRESS_INTERVAL, pause)))
        self.flush(at_most_every=MANIFEST_INTERVAL)
        if self.manifest.stop_at is not None and self.on_stopping_point():
            return False
        for node in self.executor.lost_nodes():
            self.on_node_lost(node)
        self.progress.tick()
        raise_if_stopped()
        return True

    def idle(self, pause: float) -> bool:
        """Nothing in flight: the manifests written, then whether anything is left to do
        (retries, units whose earlier groups now have their shard, units resting)."""
        self.flush()
        if self.retries or any(
            self.needed(unit) and self.earlier(unit) is not None for unit in self.waiting
        ):
            return True
        if not self.resting:
            return False
        time.sleep(min(pause, PROGRESS_INTERVAL))
        self.progress.tick()
        return True

    def fill(self) -> None:
        """Start units until as many as the executor should have are in flight on it."""
        while self.in_flight_here() < self.in_flight:
            unit, reads = self.next_unit()
            if unit is None:
                return
            self.attempts[unit] = self.attempts.get(unit, 0) + 1
            job = ShardJob(
                shard=unit.shard,
                attempt=self.attempts[unit],
                earlier=reads,
                **self.common[unit.group],
            )
            self.submit(unit, job)

    def in_flight_here(self) -> int:
        return sum(1 for executor in self.pending.values() if executor is self.executor)

    def results(self, seconds: float) -> list:
        """(executor, unit, result) of what came back, waiting up to ``seconds`` on the
        first executor with units in flight: the scheduler's own, then the early player."""
        executors = [self.executor] + ([self.early] if self.early is not None else [])
        busy = [e for e in executors if any(held is e for held in self.pending.values())]
        came = []
        for executor in executors:
            wait = seconds if busy and executor is busy[0] else 0.0
            came += [(executor, unit, result) for unit, result in executor.results(wait)]
        return came

    def flush(self, at_most_every: float = 0.0) -> None:
        for number, part in enumerate(self.parts):
            self.on_rejected(part.manifest.flush(at_most_every=at_most_every), number)

    # --- What to start next ------------------------------------------------------------

    def next_unit(self) -> tuple[Unit | None, tuple[PlayedGroup, ...] | None]:
        """The next unit ready to start (the groups before it have its shard), and what it
        reads of theirs: retries first, then those waiting, then new ones."""
        self.waiting[:0] = self.retries  # first, and ready as any other once they can read
        self.retries.clear()
        self.waiting[:] = [unit for unit in self.waiting if self.needed(unit)]
        for position, unit in enumerate(self.waiting):
            reads = self.earlier(unit)
            if reads is not None:
                del self.waiting[position]
                return unit, reads
        while len(self.waiting) < self.in_flight:
            unit = next(self.upcoming, None)
            if unit is None:  # a stop rule may have cut what was counted
                self.unhanded = 0
                return None, None
            self.unhanded -= 1
            if not self.needed(unit):
                continue
            reads = self.earlier(unit)
            if reads is not None:
                return unit, reads
            self.waiting.append(unit)
        return None, None

    def earlier(self, unit: Unit) -> tuple[PlayedGroup, ...] | None:
        """The groups before the unit's, whose wins it reads: None until each has committed
        the shard, and put its files in place (or, under a stop rule, while the unit is too
        far past the prefix the rule has read)."""
        index = unit.shard.index
        if self.ahead and self.in_flight_here() and index >= self.manifest.prefix + self.ahead:
            return None
        for before, part in enumerate(self.parts[: unit.group]):
            if index in part.manifest.unwritten:  # committed, but not yet written
                self.on_rejected(part.manifest.flush(), before)
        return played_before(self.parts, index, unit.group, self.wins_table)

    def needed(self, unit: Unit) -> bool:
        """Not past the stopping point, nor of a shard that a group before gave up on."""
        stop = self.manifest.stop_at
        index = unit.shard.index
        return index not in self.given_up and (stop is None or index <= stop)

    def in_tail(self) -> bool:
        """Fewer units left to hand over than the executor has CPUs."""
        left = self.unhanded + len(self.waiting) + len(self.retries)
        return self.split_tail and left < self.executor.cpus

    def submit(self, unit: Unit, job: ShardJob) -> None:
        """The unit to the executor; at the sweep's end, in pieces."""
        bounds = None
        if self.in_tail() and kept_bytes(job) <= SPLIT_BYTES_MAX:
            bounds = piece_bounds(job, TAIL_PIECES)
            if len(bounds) == 1:
                bounds = None
            elif not self.pieces_said:
                self.progress.log(
                    f"the sweep's end: shards from {job.shard.index} on are played in up "
                    f"to {TAIL_PIECES} pieces each, across the workers"
                )
                self.pieces_said = True
        self.executor.submit(unit, job, bounds)
        self.pending[unit] = self.executor

    # --- Events ------------------------------------------------------------------------

    def take_over(self) -> None:
        """Ray is up: the early player takes no new unit; what it finished is taken in, and
        the units it is still playing are in flight (each handed over at its next batch)."""
        early = self.early
        held = early.close()
        for unit in held:
            self.attempts[unit] = 1
            self.pending[unit] = early
        if early.started:
            self.progress.log(
                f"{early.started - len(held)} shard(s) played while Ray started"
                + (f", {len(held)} more begun" if held else "")
            )
        early.node = self.executor.here()
        # Nothing the early player played is committed yet: each is one of the units left.
        self.unhanded -= early.started
        for unit, result in early.results(0):
            self.on_result(early, unit, result)

    def take(self, came: list) -> None:
        """Each result that came back; an error that stops the run is raised once the others
        are taken, so that shards played beside the one that failed are committed, not lost."""
        stopping = None
        for executor, unit, result in came:
            try:
                self.on_result(executor, unit, result)
            except RUN_STOPPING as error:
                stopping = stopping or error
        if stopping is not None:
            raise stopping

    def on_result(self, executor, unit: Unit, result) -> None:
        """What came back for ``unit``: an entry, the exception that ended its attempt, or
        (from the early player) the first batches of a unit Ray is to finish."""
        self.pending.pop(unit, None)
        self.attempts.setdefault(unit, 1)  # the early player's first attempts
        if isinstance(result, Partial):
            if self.needed(unit):  # not stopped past the stopping point meanwhile
                self.on_partial(unit, result)
        elif isinstance(result, Stopped):  # let go of, past the stopping point
            return
        elif isinstance(result, BaseException):
            self.on_error(unit, result)
        else:
            if result.node_id is None and executor.node:  # played by threads of this process
                result = replace(result, **executor.node)
            self.on_done(unit, result)

    def on_partial(self, unit: Unit, partial: Partial) -> None:
        """The early player's last unit: the rest of its batches played by the executor (in
        pieces at the end of the sweep), its files assembled from them and what was played."""
        job, played = partial.job, partial.played
        played_to, batches = played.batches[1], len(batch_starts(job))
        which = "batch 1" if played_to == 1 else f"batches 1-{played_to}"
        self.progress.log(
            f"shard {unit.shard.index}: {which} of {batches} played here, the rest on Ray"
        )
        pieces = TAIL_PIECES if self.in_tail() else 1
        self.executor.submit(unit, job, piece_bounds(job, pieces, after=played_to), played)
        self.pending[unit] = self.executor

    def on_done(self, unit: Unit, entry: ShardEntry) -> None:
        """An attempt ended in an entry: committed."""
        part = self.parts[unit.group]
        part.manifest.commit(replace(entry, attempts=self.attempts.pop(unit)))
        self.outcome.committed_here.add(unit.key)
        if not self.report_removed:
            # The results now differ from what a report of them said: remove it.
            self.parts[0].location.delete(layout.REPORT_DIR)
            self.report_removed = True
        self.count_played(unit, +1)

    def count_played(self, unit: Unit, sign: int) -> None:
        count = unit.shard.count
        self.outcome.played += sign
        self.outcome.played_deals += sign * count
        self.progress.done_shards += sign
        self.progress.done_deals += sign * count

    def on_error(self, unit: Unit, error: BaseException) -> None:
        """An attempt ended in an exception: a full disk, or a strategy of the user's that
        broke the rules (it would on every attempt), stops the run; else it failed."""
        cause = getattr(error, "cause", None)
        failure = cause if isinstance(cause, BaseException) else error
        if isinstance(failure, bounded.StrategyTimeout):
            shard = unit.shard
            leave_strategy_threads()
            raise bounded.StrategyTimeout(
                f"shard {shard.index} (deals {shard.first}-{shard.last}): {failure}"
            ) from None
        if isinstance(failure, rules.StrategyError):
            self.progress.log(f"shard {unit.shard.index}: {failure}; the run stops")
            raise rules.StrategyError(str(failure)) from None
        if is_disk_full(failure):
            committed = min(len(part.manifest) for part in self.parts)
            raise layout.StoreError(
                f"output: {self.config.output}: the disk is full (No space left on device) "
                f"while shard {unit.shard.index} was written; the {committed} "
                "shard(s) committed are kept: free space and rerun the same command"
            ) from None
        self.on_failed(unit, error_line(error))

    def on_failed(self, unit: Unit, why: str) -> None:
        """An attempt that did not end in a commit: reported, then retried while it may be."""
        shard, number = unit.shard, unit.group
        self.progress.failures += 1
        tried = self.attempts[unit]
        again = tried < self.allowed
        where = f" of {self.parts[number].group.directory}" if number else ""
        self.progress.say(
            f"shard {shard.index} ({shard.first}-{shard.last}){where} failed, attempt {tried} "
            f"of {self.allowed}: {why}; "
            + (f"retrying in {retry_delay(tried):g} s" if again else "giving up")
        )
        if again:
            self.resting.add(unit, tried)
        elif shard.index not in self.given_up:
            self.given_up.add(shard.index)  # the groups after it cannot play it either
            self.outcome.failed.append(shard.index)

    def on_rejected(self, rejected: list[tuple[ShardEntry, str]], number: int) -> None:
        """Units the manifest could not commit (their files could not be put in place)."""
        for entry, why in rejected:
            unit = Unit(self.shards[entry.index], number)
            self.attempts[unit] = entry.attempts
            self.outcome.committed_here.discard(unit.key)
            self.count_played(unit, -1)
            self.on_failed(unit, why)

    def on_stopping_point(self) -> bool:
        """The rule holds on the prefix: what runs past it is not needed (a group before the
        last may still be playing a shard of its own up to it). Whether the run is over."""
        for unit in list(self.pending):
            if unit.shard.index > self.manifest.stop_at:
                self.cancel(unit)
        if self.pending or self.retries:
            return False
        return not any(self.needed(unit) for unit in self.resting)

    def on_node_lost(self, node: dict) -> None:
        self.progress.say(
            f"node {node['node_id'][:12]} at {node['address']} was lost; its shards are "
            f"played again on the {self.executor.alive_count} node(s) left"
        )
        if self.node_lost is not None:
            self.node_lost(node)

    def cancel(self, unit: Unit) -> None:
        self.pending.pop(unit).cancel(unit)
        self.cancelled.append(unit)

    def end(self) -> None:
        """Interrupted, or stopped: stop what is still running, and let it end, so that no
        file of theirs appears after the clean-up."""
        for unit in list(self.pending):
            self.cancel(unit)
        if self.early is not None:
            self.early.stop()
        if not self.executor.stop():
            self.progress.log("threads still waiting in a shard's play or write were left")
        self.outcome.cancelled = [unit.key for unit in self.cancelled]
