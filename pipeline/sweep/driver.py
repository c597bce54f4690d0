"""Sweeps: a config becomes shards, each played under every cell and written to its own
Parquet file(s) by an executor: Ray's tasks (a local instance or a cluster; the default), or
threads of this process (``[run] executor = "threads"``: one machine, no Ray).

The driver takes the results directory's lock, reads what is there (`state`), cleans up
(`cleanup`), writes the run record (`run_record`), and has the scheduler (`schedule`) keep
the executor busy with the units left; each unit returns only small metadata, which the
driver commits to the manifest. Results never pass through the driver, so its memory does
not grow with the number of deals. A rerun after any interruption (even SIGKILL of the
driver) redoes exactly the shards that were not committed; shard files are byte-identical
wherever, and by whichever executor, they are made.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from contextlib import ExitStack

from pipeline.engine import rules
from pipeline.store.layout import LOG_FILE
from pipeline.store.location import Location
from pipeline.store.plan import ShardPlan, plan_shards
from pipeline.sweep import device
from pipeline.sweep.cleanup import after_play, clean_up, drop_beyond_stop, remove_partial_files
from pipeline.sweep.cluster import (
    connect,
    connect_seconds,
    ray_logs_to,
    shut_down,
    starts_local,
)
from pipeline.sweep.config import SweepConfig
from pipeline.sweep.early import EarlyPlayer
from pipeline.sweep.early import enabled as early_enabled
from pipeline.sweep.executors import executor_for, threads_for
from pipeline.sweep.hold import take_output
from pipeline.sweep.jobs import STOP_AHEAD, early_units, in_flight_for, provenance, tasks_left
from pipeline.sweep.outcome import Interrupted, Outcome, summary_line
from pipeline.sweep.progress import Progress
from pipeline.sweep.run_record import RunLog, now, start_run_record
from pipeline.sweep.schedule import SPLIT_TAIL_ENV, Scheduler, split_tail_enabled
from pipeline.sweep.signals import HANDLER as SIGNALS
from pipeline.sweep.signals import leave_strategy_threads, raise_if_stopped, stopped_by_signals
from pipeline.sweep.state import read_state
from pipeline.sweep.task import play_shard
from pipeline.sweep.watchdog import Watchdog

# What callers (the CLI, tests, benchmarks) take from here, whichever module is their home.
__all__ = [
    "SPLIT_TAIL_ENV",
    "STOP_AHEAD",
    "Interrupted",
    "Outcome",
    "describe_plan",
    "in_flight_for",
    "now",
    "plan",
    "play_shard",
    "provenance",
    "run",
    "start_run_record",
    "summary_line",
]


# --- The plan -----------------------------------------------------------------------------


def plan(config: SweepConfig) -> ShardPlan:
    return plan_shards(config.first, config.deals, config.shard_size)


def describe_plan(config: SweepConfig) -> str:
    """The dry run: the cells, the shards and the total deals, as text."""
    shards = plan(config)
    lines = [
        f"sweep {config.name} (config hash {config.hash[:12]})",
        f"seed {config.seed}; deals {config.first}-{config.first + config.deals - 1} "
        f"({config.deals:,} deals); record {config.record}; output {config.output}",
        f"{len(config.cells)} cells:",
    ]
    lines += [f"  {cell.label}" for cell in config.cells]
    count = shards.count
    shown = [shards[index].stem for index in range(min(3, count))]
    if count > 4:
        shown.append("...")
    if count > 3:
        shown.append(shards[-1].stem)
    lines.append(f"{count} shards of up to {config.shard_size:,} deals: {', '.join(shown)}")
    lines.append(
        f"total: {config.deals:,} deals x {len(config.cells)} cells = "
        f"{config.deals * len(config.cells):,} deal results" + (" at most" if config.stop else "")
    )
    if config.stop:
        lines.append(f"stop rule: {config.stop.describe()}")
    return "\n".join(lines)


# --- The run ------------------------------------------------------------------------------


def run(
    config: SweepConfig,
    *,
    fresh: bool = False,
    address: str | None = None,
    stream=None,
    task=play_shard,
    executor=None,
    verbose: bool = False,
) -> Outcome:
    """Run (or resume) a sweep into its results directory; gives what happened.

    ``task(job)`` is what a Ray task runs for each shard: `task.play_shard`, or a test's
    wrapper of it (one that stops or fails some attempts). ``executor``: the executor to play
    on instead of the config's (a test's; no Ray is started). ``verbose``: how the sweep is
    played (the run's log, RESULTS/run.log) said on ``stream`` too.

    User errors (another config's results in the directory, a directory that is not ours, a
    Ray address that does not answer) raise ConfigError or layout.ResultsError before
    anything is written.
    """
    clock = time.monotonic()
    connect_seconds()  # a malformed setting is named before anything else happens
    sweep = SweepRun(config, fresh, address, stream or sys.stderr, task, executor)
    sweep.verbose = verbose
    return sweep.run(clock)


# Deals each strategy of the user's is tried on before anything is written: dozens of its
# calls, on the sweep's own deals, in well under a second.
TRIED_DEALS = 64


def try_strategies(config: SweepConfig, on_gpu: bool = False) -> None:
    """Each strategy of the user's played on the sweep's first deals under its bound, before
    anything is written: one that does not return in time, or breaks the rules, stops the
    run here, in one line (`rules.StrategyError`), not in its first shard. ``on_gpu``: by
    the CUDA kernel too, which compiles it for the device (`custom.CustomError` if it
    cannot)."""
    from pipeline.engine import bounded, kernel

    engines = [kernel]
    if on_gpu:
        from pipeline.engine import gpu

        engines.append(gpu)
    first_cells = {cell.custom: cell for cell in reversed(config.cells) if cell.custom}
    for cell, engine in (
        (cell, engine) for cell in reversed(first_cells.values()) for engine in engines
    ):
        try:
            engine.play(
                config.seed,
                config.first,
                min(TRIED_DEALS, config.deals),
                [cell],
                None,
                None,
                config.strategy_bound,
            )
        except bounded.StrategyTimeout:
            leave_strategy_threads()
            raise


class SweepRun:
    """One run of a sweep, from the lock to its outcome: what its steps share."""

    def __init__(self, config: SweepConfig, fresh: bool, address, stream, task, executor):
        self.config, self.fresh, self.address, self.stream = config, fresh, address, stream
        self.task, self.executor = task, executor
        self.on_ray = executor is None and config.executor == "ray"
        self.location = Location(config.output_given)
        self.shards = plan(config)
        self.outcome = Outcome(shards=self.shards.count)
        self.lock = self.state = self.progress = self.log = None
        self.started_ray, self.refused, self.playing = False, True, False
        self.early: EarlyPlayer | None = None
        self.cluster: dict | None = None
        self.signals, self.watchdog = ExitStack(), None
        # What a run's counts count: shards, or shards x cell groups.
        self.units, self.total, self.todo = "shards", self.shards.count, 0
        self.verbose = False

    def run(self, clock: float) -> Outcome:
        here = not self.on_ray or starts_local(self.config, self.address)  # played here
        if here:
            device.check_here(self.config)
        try_strategies(self.config, on_gpu=here and self.config.device == "cuda")
        self.lock = take_output(self.location, self.config, self.stream)
        interrupted = None
        try:
            self.signals.enter_context(stopped_by_signals())  # again once Ray is up
            self.read()
            self.begin()
            self.play_or_finish()
        except KeyboardInterrupt:  # ours, or Ctrl-C before Ray was up (Python's own)
            interrupted = self.interrupted()
        finally:
            self.let_go(interrupted)
        if interrupted is not None:
            raise interrupted
        return self.totals(clock)

    def read(self) -> None:
        """What is in the results directory, and what is left to play."""
        state = self.state = read_state(self.location, self.config, self.fresh, self.shards)
        parts, outcome = state.parts, self.outcome
        if len(parts) > 1:
            outcome.groups = len(parts)
            self.units = f"shards x {outcome.groups} cell groups"
            self.total = self.shards.count * outcome.groups
        if self.lock is not None:
            self.lock.claim()
        if state.manifest.stop_at is not None:
            for part in parts:
                part.manifest.stop_at = state.manifest.stop_at
        self.todo = tasks_left(parts, self.shards)
        outcome.skipped = sum(len(part.manifest) for part in parts)
        outcome.redone = sorted(
            {
                index
                for index, _, group in state.notes
                if index is not None
                and index not in parts[group].manifest
                and (index, group) not in state.grown
            }
        )
        # The bar counts what this run plays: a resumed or grown sweep's committed shards
        # are said once, in the line before it, not counted as done (a sweep of 2,000,000
        # deals grown by a cell was "deals 4,000,000/4,000,000").
        committed_deals = sum(part.manifest.totals.deals for part in parts)
        self.progress = Progress(
            self.stream,
            self.shards.count * len(parts) - outcome.skipped,
            self.config.deals * len(parts) - committed_deals,
            0,
            0,
        )
        self.progress.verbose = self.verbose

    def open_log(self) -> None:
        """The run's log, once the run writes to the directory (not before: a run refused
        writes nothing)."""
        log_path = self.location.local_path(LOG_FILE)  # (a store cannot append)
        if log_path is not None and self.progress.log_file is None:
            self.progress.open_log(
                log_path, f"{self.config.source or 'a config'}: run, pid {os.getpid()}"
            )

    def begin(self) -> None:
        """Ray started or joined, if the run plays on it: a local instance's first shards
        are played here while it starts, once all that comes before them is done (its Ray
        recorded when it is up). A test's task is left to Ray's workers."""
        if self.todo and self.plays_while_ray_starts():
            self.prepare(None)
            threads = threads_for(self.config.ray.get("num_cpus"))
            units = early_units(self.config, self.shards, self.state.parts, threads)
            self.early = EarlyPlayer(units, threads)
        if self.todo and self.on_ray:
            self.connect()
        self.refused = False
        if self.early is None:
            self.prepare(self.cluster)
        else:
            self.log.ray_up(self.cluster)

    def plays_while_ray_starts(self) -> bool:
        return (
            self.on_ray
            and self.task is play_shard
            and not self.location.may_stall
            and early_enabled()
            and starts_local(self.config, self.address)
        )

    def connect(self) -> None:
        lock = self.lock
        undo = None if lock is None else (lambda: lock.release(refused=True))
        if starts_local(self.config, self.address):
            # Ray's start takes seconds in which nothing else is said: say what is happening.
            meanwhile = ", the first shards played here meanwhile" if self.early else ""
            self.progress.say(
                f"starting a local Ray instance (5-15 s{meanwhile}; "
                '[run] executor = "threads" plays without Ray)'
            )
            self.watchdog = Watchdog.start()
        # Ray's own messages (its start, its warnings) go to the run's log, not the terminal.
        self.signals.enter_context(ray_logs_to(self.progress.log))
        self.started_ray, self.cluster = connect(self.config, self.address, undo)
        # (StoppedWhileStarting: a KeyboardInterrupt, the signal noted.) Ray sets its own
        # SIGTERM handler as it starts: ours again.
        self.signals.enter_context(stopped_by_signals())
        raise_if_stopped()
        if self.watchdog is not None:
            self.watchdog.up()

    def prepare(self, cluster: dict | None) -> None:
        """What comes before the first shard: the clean-up, the run record, the manifests
        as they stand."""
        state, progress, outcome = self.state, self.progress, self.outcome
        clean_up(self.location, state, self.fresh, progress)
        previous = state.previous if not self.fresh else None
        groups = [part.group for part in state.parts]
        self.log = RunLog.started(
            self.location, self.config, previous, cluster, self.todo, outcome.skipped, groups
        )
        self.open_log()
        if state.stopping is not None:
            progress.target = state.stopping.status
            progress.still_needed = state.stopping.deals_still_needed
        if state.manifest.stop_at is not None:  # a run stopped before, or killed after its stop
            drop_beyond_stop(self.shards, state.parts, progress, outcome)
            self.log.recounted(outcome.skipped)
        for part in state.parts:
            part.manifest.flush()

    def play_or_finish(self) -> None:
        if not self.todo:
            self.log.finished("complete", self.stop_record())
            return
        if self.executor is None:
            num_cpus = self.config.ray.get("num_cpus")
            gpus = device.gpus_per_task(self.config)
            self.executor = executor_for(self.on_ray, num_cpus, self.task, gpus)
            if self.on_ray:
                device.check_cluster(self.config, self.executor.resources)
        if self.cluster is not None:
            where = f"{self.cluster['cpus']:.0f} CPUs, {len(self.cluster['nodes'])} node(s)"
        else:
            where = f"{self.executor.cpus} threads of this process"
        self.progress.say(
            f"{'up to ' if self.config.stop else ''}{self.todo:,} of {self.total:,} "
            f"{self.units} to play ({self.outcome.skipped} already committed) on {where}"
        )
        self.playing = True
        play_and_record(self)

    def scheduler(self) -> Scheduler:
        return Scheduler(
            self.config,
            self.shards,
            self.state.parts,
            self.progress,
            self.outcome,
            self.executor,
            # A test's own task plays every unit whole, through that task.
            split_tail=self.task is play_shard and split_tail_enabled(),
            early=self.early,
            node_lost=self.log.node_lost,
        )

    def stop_record(self) -> dict | None:
        """How the stop rule stopped (`Stopping.record`), None without one."""
        stopping = self.state.stopping
        return stopping.record(self.state.manifest.stop_at) if stopping else None

    def record_end(self, status: str) -> None:
        """The run's end, however it ends: what is left to commit, and the run record."""
        try:
            after_play(self.shards, self.state.parts, self.progress, self.outcome)
            outcome = self.outcome
            self.log.finished(
                status,
                self.stop_record(),
                shards_played=outcome.played,
                shards_failed=outcome.failed,
            )
        finally:
            for part in self.state.parts:
                remove_partial_files(part.location)

    def interrupted(self) -> Interrupted:
        number = SIGNALS.seen.number or signal.SIGINT
        committed = self.outcome.skipped + self.outcome.played
        return Interrupted(
            f"interrupted by {signal.Signals(number).name}: {committed:,} of {self.total:,} "
            f"{self.units} committed, and kept; rerun the same command to resume",
            number,
        )

    def let_go(self, interrupted: Interrupted | None) -> None:
        """Whatever happened: the early player stopped (and, if nothing it played was
        committed, its files), the lock released, Ray stopped if this run started it."""
        try:
            if self.early is not None:
                self.early.stop()  # the scheduler has, unless it never began
                if not self.playing:  # nothing it played is committed
                    for part in self.state.parts:
                        remove_partial_files(part.location)
                    self.log.stopped("failed" if interrupted is None else "interrupted")
            if self.lock is not None:
                self.lock.release(refused=self.refused)
            if self.started_ray:
                shut_down()
        finally:
            if self.watchdog is not None:
                self.watchdog.release(ended=True)
            self.signals.close()
            if self.progress is not None:
                self.progress.close_log()

    def totals(self, clock: float) -> Outcome:
        outcome = self.outcome
        outcome.seconds = time.monotonic() - clock
        every = [part.manifest.totals for part in self.state.parts]
        outcome.committed = min(totals.shards for totals in every)
        outcome.stop = self.log.record.stop  # as run.json records it
        outcome.deals = min(totals.deals for totals in every)
        outcome.rows = sum(totals.rows for totals in every)
        outcome.bytes = sum(totals.bytes for totals in every)
        outcome.row_bytes = sum(totals.row_bytes for totals in every)
        outcome.cells = len(self.state.cells)
        return outcome


def play_and_record(sweep: SweepRun) -> None:
    """Play what is left, then record how the run ended, however it ends."""
    status = "interrupted"
    playing = time.monotonic()
    early = sweep.early
    # Deals per second from the first shard started (Ray's start is not play), here or on Ray.
    sweep.progress.started = early.began if early is not None and early.started else playing
    try:
        sweep.scheduler().run()
        status = "failed" if sweep.outcome.failed else "complete"
    except rules.StrategyError:  # a strategy of the user's broke the rules: the run failed
        status = "failed"
        raise
    finally:
        if early is not None and early.started:
            playing = early.began
        sweep.outcome.play_seconds = time.monotonic() - playing
        sweep.record_end(status)
