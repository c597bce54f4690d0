"""Sweeps on Ray: a config becomes shards, each a Ray task that plays and writes its deals.

The driver plans shards (consecutive deal ranges), skips those already committed whose files
still verify, and keeps a bounded number of tasks in flight. Each task plays its whole deal
range under every cell with the kernel, in sub-batches that bound its memory, and writes its
own Parquet file(s) (see `task`); it returns only small metadata, which the driver commits
to the manifest. Results never pass through the driver, so its memory does not grow with the
number of deals.

Retries are the driver's: a task that raises, or whose worker process dies, is resubmitted up
to ``ray.max_retries`` more times, each attempt reported as it happens and counted in the
manifest, after a pause that doubles with each attempt (`retry_delay`), so that a store
or node that fails for a moment does not use up a shard's attempts in it. A rerun after any
interruption (even SIGKILL of the driver) redoes exactly the shards that were not committed;
shard files are byte-identical wherever they are made.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections import deque
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import pyarrow as pa

from pipeline import __version__
from pipeline.records import identity
from pipeline.store import groups, layout, records, validate
from pipeline.store.entries import RunRecord, ShardEntry
from pipeline.store.files import expected_schemas
from pipeline.store.layout import MANIFEST_FILE, RUN_FILE
from pipeline.store.location import Location, is_disk_full
from pipeline.store.manifest import Manifest
from pipeline.store.plan import Shard, ShardPlan, plan_shards
from pipeline.sweep.cluster import (
    connect,
    connect_seconds,
    deadline,
    error_line,
    shut_down,
    starts_local,
)
from pipeline.sweep.config import SweepConfig
from pipeline.sweep.early import EarlyPlayer, Partial, Stopped
from pipeline.sweep.early import enabled as early_enabled
from pipeline.sweep.early import threads_for as early_threads
from pipeline.sweep.progress import PROGRESS_INTERVAL, Progress, format_rate, format_seconds
from pipeline.sweep.signals import HANDLER as SIGNALS
from pipeline.sweep.signals import end_process_after, raise_if_stopped, stopped_by_signals
from pipeline.sweep.stopping import Stopping, tally_pairs
from pipeline.sweep.task import (
    SPLIT_BYTES_MAX,
    PlayedGroup,
    ShardJob,
    assemble_shard,
    batch_starts,
    kept_bytes,
    piece_bounds,
    play_piece,
    play_shard,
)
from pipeline.sweep.watchdog import Watchdog

MANIFEST_INTERVAL = 1.0  # seconds between manifest writes while shards complete
EARLY_POLL = 0.05  # seconds between looks at the early player's last unit
CANCEL_WAIT = 5.0  # seconds the end of a run waits for the tasks it cancelled to end
STOP_AHEAD = 2  # under a stop rule, shards started past the prefix: at most this x in flight
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


class Resting:
    """Failed units (shard, cell group) waiting out their pause before their next attempt."""

    def __init__(self):
        self.units: list[tuple[float, tuple[Shard, int]]] = []  # (when it may start, unit)

    def add(self, unit: tuple[Shard, int], tried: int) -> None:
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


@dataclass
class Outcome:
    shards: int = 0
    skipped: int = 0
    played: int = 0
    played_deals: int = 0
    failed: list[int] = field(default_factory=list)
    redone: list[int] = field(default_factory=list)
    deals: int = 0
    rows: int = 0
    bytes: int = 0
    row_bytes: int = 0  # of the per-deal files alone: what bytes per row counts
    seconds: float = 0.0
    play_seconds: float = 0.0  # from the first shard started (here, or on Ray) to the end
    stop: dict | None = None  # how a run with a stop rule stopped (`Stopping.record`)
    beyond_stop: int = 0  # shards committed past the stopping point, and removed
    committed_here: set[tuple[int, int]] = field(default_factory=set)  # (shard, group) this run
    # (shard, cell group) of the units in flight when the run stopped
    cancelled: list[tuple[int, int]] = field(default_factory=list)
    committed: int = 0
    cells: int = 0  # every cell group's
    groups: int = 1  # cell groups: played and skipped count each group's shards


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGINT stopped the run (a scheduler or a user): raised by `run` once the
    run has let everything go, its message saying what was kept and how to resume."""

    def __init__(self, message: str, signal_number: int):
        super().__init__(message)
        self.signal_number = signal_number


@dataclass
class Part:
    """A cell group of the sweep as a run plays it: its directory and committed shards."""

    group: groups.CellGroup
    location: Location
    manifest: Manifest
    found: validate.Survey | None = None  # what else lies in its directory

    @property
    def cells(self) -> int:
        return len(self.group.cells)


@dataclass
class State:
    """What a run found in its results directory, before it changes anything there."""

    previous: RunRecord | None  # the run record, if there is one this run keeps
    parts: list[Part]  # its cell groups (one but for a sweep grown by cells)
    notes: list[tuple[int | None, str, int]]  # (shard or None, why, group) of what was not kept
    grown: set[tuple[int, int]]  # (shard, group) of the notes that are the sweep's growth
    stopping: Stopping | None  # the stop rule, over every group's cells

    @property
    def manifest(self) -> Manifest:
        """The last group's committed shards: a stop rule reads its prefix (its tallies
        count every cell), and a shard is committed in every group once it is there."""
        return self.parts[-1].manifest

    @property
    def cells(self) -> list:
        return groups.sweep_cells([part.group for part in self.parts])


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


def run(
    config: SweepConfig,
    *,
    fresh: bool = False,
    address: str | None = None,
    stream=None,
    task=play_shard,
) -> Outcome:
    """Run (or resume) a sweep into its results directory; gives what happened.

    ``task(job)`` is what a Ray task runs for each shard: `task.play_shard`, or a test's
    wrapper of it (one that stops or fails some attempts).

    User errors (another config's results in the directory, a directory that is not ours, a
    Ray address that does not answer) raise ConfigError or layout.ResultsError before
    anything is written.
    """
    stream = stream or sys.stderr
    clock = time.monotonic()
    connect_seconds()  # a malformed setting is named before anything else happens
    location = Location(config.output)
    shards = plan(config)
    outcome = Outcome(shards=shards.count)
    # The lock first: what is read below stays true while it is held. An object store's
    # lease is its first word with the store, which may never answer.
    with (
        nullcontext()
        if not location.may_stall
        else deadline(f"output: {config.output} did not answer within {{seconds}} s", status=1)
    ):
        lock = location.lock(answer_within=connect_seconds())
    if location.may_stall and SIGNALS.deadline:  # the command's own process
        # The main thread stops as soon as it sees the lease lost (`Lease.check`); should a
        # call to a store that stopped answering keep it waiting, the process ends anyway.
        lock.on_lost = lambda message: end_process_after(connect_seconds(), message, 1)
    started_ray, refused, early, playing, interrupted = False, True, None, False, None
    signals, watchdog = ExitStack(), None
    # What a run's counts count: shards, or shards x cell groups.
    units, total = "shards", shards.count
    try:
        signals.enter_context(stopped_by_signals())  # again once Ray is up: see below
        state = read_state(location, config, fresh, shards)
        if len(state.parts) > 1:
            outcome.groups = len(state.parts)
            units = f"shards x {outcome.groups} cell groups"
            total = shards.count * outcome.groups
        if lock is not None:
            lock.claim()
        parts, stopping = state.parts, state.stopping
        manifest = state.manifest
        if manifest.stop_at is not None:
            for part in parts:
                part.manifest.stop_at = manifest.stop_at
        todo = tasks_left(parts, shards)
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
        progress = Progress(
            stream,
            shards.count * len(parts),
            config.deals * len(parts),
            outcome.skipped,
            sum(part.manifest.totals.deals for part in parts),
        )

        def prepare(cluster: dict | None) -> RunRecord:
            """What comes before the first shard: the clean-up, the run record, the
            manifests as they stand."""
            clean_up(location, state, fresh, progress)
            record = start_run_record(
                config,
                state.previous if not fresh else None,
                cluster,
                todo,
                outcome.skipped,
                [part.group for part in parts],
            )
            location.write_json(RUN_FILE, record.to_json())
            if stopping is not None:
                progress.target = stopping.status
                progress.still_needed = stopping.deals_still_needed
            if manifest.stop_at is not None:  # a run stopped before, or killed after its stop
                drop_beyond_stop(shards, parts, progress, outcome)
                record.runs[-1]["shards_already_committed"] = outcome.skipped
                location.write_json(RUN_FILE, record.to_json())
            for part in parts:
                part.manifest.flush()
            return record

        cluster = None
        # A local instance to start, for local output: its first shards are played here while
        # it starts, once all that comes before them is done (its Ray recorded when it is up).
        # A test's task is left to Ray's workers.
        if (
            todo
            and task is play_shard
            and not location.may_stall
            and early_enabled()
            and starts_local(config, address)
        ):
            run_record = prepare(None)
            threads = early_threads(config.ray.get("num_cpus"))
            early = EarlyPlayer(early_units(config, shards, parts, threads), threads)
        if todo:
            undo = None if lock is None else (lambda: lock.release(refused=True))
            if starts_local(config, address):
                watchdog = Watchdog.start()
            started_ray, cluster = connect(config, address, undo)  # StoppedWhileStarting:
            # a KeyboardInterrupt, the signal noted
            signals.enter_context(stopped_by_signals())
            raise_if_stopped()
            if watchdog is not None:
                watchdog.up()
        refused = False
        if early is None:
            run_record = prepare(cluster)
        else:
            run_record.runs[-1]["ray"] = cluster
            location.write_json(RUN_FILE, run_record.to_json())
        if todo:
            progress.say(
                f"{'up to ' if config.stop else ''}{todo:,} of {total:,} {units} to play "
                f"({outcome.skipped} already committed) on "
                f"{cluster['cpus']:.0f} CPUs, {len(cluster['nodes'])} node(s)"
            )
            playing = True
            play_and_record(
                config,
                location,
                shards,
                parts,
                progress,
                outcome,
                task,
                run_record,
                stopping,
                early,
            )
        else:
            run_record.stop = stopping.record(manifest.stop_at) if stopping else None
            run_record.runs[-1].update(finished=now(), status="complete")
            location.write_json(RUN_FILE, run_record.to_json())
    except KeyboardInterrupt:  # ours, or Ctrl-C before Ray was up (Python's own)
        number = SIGNALS.seen.number or signal.SIGINT
        committed = outcome.skipped + outcome.played
        interrupted = Interrupted(
            f"interrupted by {signal.Signals(number).name}: {committed:,} of {total:,} "
            f"{units} committed, and kept; rerun the same command to resume",
            number,
        )
    else:
        interrupted = None
    finally:
        try:
            if early is not None:
                early.stop()  # play_all has, unless it never began
                if not playing:  # nothing it played is committed
                    for part in state.parts:
                        remove_partial_files(part.location)
                    run_record.runs[-1].update(
                        finished=now(), status="failed" if interrupted is None else "interrupted"
                    )
                    location.write_json(RUN_FILE, run_record.to_json())
            if lock is not None:
                lock.release(refused=refused)
            if started_ray:
                shut_down()
        finally:
            if watchdog is not None:
                watchdog.release(ended=True)
            signals.close()
    if interrupted is not None:
        raise interrupted

    outcome.seconds = time.monotonic() - clock
    every = [part.manifest.totals for part in parts]
    outcome.committed = min(totals.shards for totals in every)
    outcome.stop = run_record.stop  # as run.json records it
    outcome.deals = min(totals.deals for totals in every)
    outcome.rows = sum(totals.rows for totals in every)
    outcome.bytes = sum(totals.bytes for totals in every)
    outcome.row_bytes = sum(totals.row_bytes for totals in every)
    outcome.cells = len(state.cells)
    return outcome


def read_state(
    location: Location,
    config: SweepConfig,
    fresh: bool,
    shards: ShardPlan,
) -> State:
    """Read the results directory (the lock held): refuse one that is not ours, or not this
    sweep's unless ``fresh``; find its cell groups (one more if the config adds cells); keep
    each group's committed shards that still verify, the last group's telling the stop rule
    of the prefix they make, in order."""
    waiting = (
        nullcontext()
        if not location.may_stall
        else deadline(f"output: {config.output} did not answer within {{seconds}} s", status=1)
    )
    try:
        with waiting:
            previous, listed = read_previous(location, config, fresh)
            if previous is None or fresh:
                cell_groups = [groups.first_group(config.identity(), config.cells)]
            else:
                cell_groups = groups.grown_groups(
                    config.identity(),
                    config.cells,
                    groups.recorded_groups(previous),
                    config.output,
                )
            cells = groups.sweep_cells(cell_groups)
            stopping = Stopping(config.stop, cells, config.deals) if config.stop else None
            parts, notes, grown = [], lost_record(previous, listed, fresh), set()
            for group in cell_groups:
                place = group.location(location)
                if group.index:
                    listed = None if fresh else readable_manifest(place, config, fresh)
                part = Part(group, place, None)
                rule = stopping if group is cell_groups[-1] else None
                for index, problem in load_part(
                    part, listed, config, fresh, shards, rule, len(cells)
                ):
                    notes.append((index, f"{group.path('')}{problem}", group.index))
                    if isinstance(problem, records.Growth):
                        grown.add((index, group.index))
                parts.append(part)
            # With --fresh, the old groups' directories are the clean-up's to remove, not
            # another's to leave alone.
            replaced = len(old_groups(previous)) if fresh else 0
            for part in parts:
                part.found = validate.survey(
                    part.location,
                    set() if fresh else part.manifest.committed_paths(),
                    groups=max(len(parts), replaced) if part.group.index == 0 else 0,
                )
    except (OSError, pa.ArrowException) as error:  # e.g. an object store that refuses us
        raise layout.StoreError(
            f"output: {config.output}: cannot be read "
            f"({(str(error).strip().splitlines() or [''])[0]})"
        ) from None
    for part in parts:
        if part.found.blocking:
            path, what = part.found.blocking[0]
            raise layout.ResultsError(
                f"output: {config.output}: {part.group.path(path)} is {what} where clocksweep "
                "keeps its own files; move it away"
            )
    return State(previous, parts, notes, grown, stopping)


def lost_record(previous: RunRecord | None, listed: dict | None, fresh: bool) -> list:
    """The note (as `State.notes` has them) of a manifest taken up without its run record."""
    if previous is not None or listed is None or fresh:
        return []
    why = (
        f"{RUN_FILE} is missing (the store lost it?): the shards {MANIFEST_FILE} lists are "
        "checked, and those that do not verify played again"
    )
    return [(None, why, 0)]


def old_groups(previous: RunRecord | None) -> list[groups.CellGroup]:
    """The cell groups a run record names, for --fresh to remove: none if it names none it
    can read (its cells are not the rules' cells today, say)."""
    try:
        return groups.recorded_groups(previous) if previous else []
    except layout.ResultsError:
        return []


def readable_manifest(place: Location, config: SweepConfig, fresh: bool) -> dict | None:
    """A cell group's manifest (None if there is none, or --fresh replaces one that cannot be
    read); ResultsError naming what is wrong with it."""
    try:
        return records.read_manifest(place)
    except layout.ResultsError as error:
        if fresh:
            return None
        raise layout.ResultsError(
            f"output: {config.output}: {str(error).removeprefix(place.where + ': ')}"
        ) from None


def load_part(
    part: Part,
    listed: dict | None,
    config: SweepConfig,
    fresh: bool,
    shards: ShardPlan,
    stopping: Stopping | None = None,
    n_cells: int = 0,
) -> list[tuple[int | None, str]]:
    """Give ``part`` its manifest: the committed shards of ``listed`` that still verify
    (``stopping``: told of their prefix, over ``n_cells`` cells); (shard or None, why) of the
    rest."""
    group = part.group
    resumed = listed is not None and not fresh and listed["config_hash"] == group.config_hash
    if resumed:
        refuse_shrinking(config, listed, part.location)
    manifest = Manifest(
        part.location, group.config_hash, listed["page_shards"] if resumed else None
    )
    part.manifest = manifest
    if stopping is not None:
        manifest.on_prefix = lambda entry: stopping.add(
            entry.deals, entry.tally["wins"], entry.tally["pairs"]
        )
        manifest.tally_shape = (n_cells, len(stopping.tally_pairs))
    if listed is None or fresh:
        return []
    if listed["config_hash"] != group.config_hash:
        return [
            (
                None,
                f"{MANIFEST_FILE} belongs to another config (hash "
                f"{listed['config_hash'][:12]}), so every shard is redone",
            )
        ]
    return manifest.load_verified(listed, shards, len(group.cells), expected_schemas(config.record))


def refuse_shrinking(config: SweepConfig, listed: dict, location: Location) -> None:
    """A config with fewer deals than its directory has committed would delete some: refused
    (raise deals, or start over with --fresh). More deals grow the sweep."""
    ends = [entry.get("last") for entry in listed["shards"] if isinstance(entry, dict)]
    last = config.first + config.deals - 1
    if listed["pages"]:
        # A page's shards are whole but perhaps its last, the end of the plan it was sealed
        # in: that one's entry says where it ends, when it decides.
        final = listed["pages"][-1]
        end = config.first + (final.last + 1) * config.shard_size - 1
        if end > last:
            one_page, plan = (
                {**listed, "pages": [final]},
                plan_shards(config.first, end - config.first + 1, config.shard_size),
            )
            for _, entries, _ in records.read_pages(location, one_page, plan):
                lasts = [entry.get("last") for entry in entries or [] if isinstance(entry, dict)]
                end = max((e for e in lasts if isinstance(e, int)), default=end)
        ends.append(end)
    committed = max((end for end in ends if isinstance(end, int)), default=-1) - config.first + 1
    if committed > config.deals:
        raise layout.ResultsError(
            f"deals: {config.deals:,} is fewer than the {committed:,} deals already committed "
            f"in {config.output}; raise deals to grow the sweep, or use --fresh to start over"
        )


def clean_up(location: Location, state: State, fresh: bool, progress: Progress) -> None:
    """Say what could not be kept; remove what is ours and not committed (with --fresh, the
    old results too); name what is not ours, and leave it."""
    for index, problem, group in state.notes:
        kept = index is not None and index in state.parts[group].manifest
        plain = index is None or kept or (index, group) in state.grown
        progress.say(problem if plain else f"shard {index}: {problem}; redoing it")
    if fresh and "file" in (location.kind(RUN_FILE), location.kind(MANIFEST_FILE)):
        # The results are replaced: their manifest, and the report, which went with them; and
        # the cell groups the old run record names.
        for name in (MANIFEST_FILE, layout.PAGES_DIR, layout.REPORT_DIR):
            location.delete(name)
        for group in old_groups(state.previous)[1:]:
            location.delete(group.directory)
    removed, foreign = 0, []
    for part in state.parts:
        found = part.found
        for path in found.removable:
            part.location.delete(path)
        part.location.prune_partial()
        removed += len(found.removable)
        foreign += [(part.group.path(path), what) for path, what in found.foreign]
    if removed:
        progress.say(f"removed {removed} file(s) of an earlier run that no committed shard lists")
    for path, what in foreign[:5]:
        progress.say(f"left alone: {path} ({what}; not written by clocksweep)")
    if len(foreign) > 5:
        progress.say(f"left alone: {len(foreign) - 5} more paths not written by clocksweep")


def play_and_record(
    config: SweepConfig,
    location: Location,
    shards: ShardPlan,
    parts: list[Part],
    progress: Progress,
    outcome: Outcome,
    task,
    run_record: RunRecord,
    stopping: Stopping | None = None,
    early: EarlyPlayer | None = None,
) -> None:
    """Play what is left, then record how the run ended, however it ends."""
    status = "interrupted"
    playing = time.monotonic()
    manifest = parts[-1].manifest
    # Deals per second from the first shard started (Ray's start is not play), here or on Ray.
    progress.started = early.began if early is not None and early.started else playing

    def node_lost(node: dict) -> None:  # recorded as it happens, not only at the end
        run_record.runs[-1].setdefault("nodes_lost", []).append(node)
        location.write_json(RUN_FILE, run_record.to_json())

    try:
        play_all(config, shards, parts, progress, outcome, task, node_lost, early)
        status = "failed" if outcome.failed else "complete"
    finally:
        if early is not None and early.started:
            playing = early.began
        outcome.play_seconds = time.monotonic() - playing
        try:
            if manifest.stop_at is not None:
                drop_beyond_stop(shards, parts, progress, outcome)
            for part in parts:
                for entry, why in part.manifest.flush():  # interrupted: what is left to commit
                    progress.say(f"shard {entry.index}: {why}; not committed")
                    outcome.played -= 1
                    outcome.played_deals -= entry.deals
            if outcome.committed_here:
                # Removed at the first commit; a report made while the run played since
                # tells of fewer shards than it leaves.
                parts[0].location.delete(layout.REPORT_DIR)
            progress.close()
            run_record.stop = stopping.record(manifest.stop_at) if stopping else None
            run_record.runs[-1].update(
                finished=now(),
                status=status,
                shards_played=outcome.played,
                shards_failed=outcome.failed,
            )
            location.write_json(RUN_FILE, run_record.to_json())
        finally:
            for part in parts:
                remove_partial_files(part.location)


def drop_beyond_stop(
    shards: ShardPlan, parts: list[Part], progress: Progress, outcome: Outcome
) -> None:
    """Shards committed past the stopping point (in flight when it was found, and done first;
    or, in a group before the last, played by an earlier run) are not part of the results:
    out of the manifest first, then their files; and the files the tasks cancelled at the
    stop may have left. A report of the results as they were goes with them."""
    stop_at = parts[-1].manifest.stop_at
    removed = before = 0
    for number, part in enumerate(parts):
        manifest, location = part.manifest, part.location
        manifest.stop_at = stop_at
        dropped = manifest.discard_beyond_stop()
        if dropped or manifest.dropped_pages:
            manifest.flush()
        for entry in dropped:
            before += (entry.index, number) not in outcome.committed_here
            for record in entry.files:
                location.delete(record.path)  # nothing there if it was never put in place
        # A task cancelled at the stop may have written its files: at their final keys on an
        # object store (locally they are under PARTIAL_DIR, which the run's end empties).
        for index, group in outcome.cancelled:
            if group == number and index > stop_at and index not in manifest:
                for table in layout.table_names():
                    location.delete(shards[index].path(table))
        removed += len(dropped)
    outcome.cancelled = []
    if not removed:
        return
    outcome.beyond_stop += removed
    outcome.skipped -= before  # those this run found committed
    parts[0].location.delete(layout.REPORT_DIR)
    by_whom = [
        f"{count} {whom}"
        for count, whom in ((removed - before, "played by this run"), (before, "committed before"))
        if count
    ]
    progress.say(
        f"{removed} shard(s) past the stopping point (shard {stop_at}) were removed "
        f"({', '.join(by_whom)}): the results are the shards up to it"
    )


def remove_partial_files(location: Location) -> None:
    """Files of attempts that did not end in a commit (a worker that died, a task cancelled
    when the run stopped, a manifest that could not be written): readers never see them, but
    validate names them."""
    for path in validate.survey(location, set(), partial_only=True).partial:
        try:
            location.delete(path)
        except OSError:
            pass
    location.prune_partial()


def read_previous(
    location: Location, config: SweepConfig, fresh: bool
) -> tuple[RunRecord | None, dict | None]:
    """The run record and the manifest already in the output directory (None where there is
    none, or where --fresh replaces one that cannot be read); refuse a directory that is not
    ours, or not this config's unless ``fresh``."""
    where = config.output

    def readable(read, name: str):
        try:
            return read(location)
        except layout.ResultsError as error:
            ours = location.kind(name) == "file"  # not a directory or link, which is not ours
            if fresh and ours:
                return None
            advice = "; use --fresh to start over there" if ours else ""
            raise layout.ResultsError(
                f"output: {where}: {str(error).removeprefix(location.where + ': ')}{advice}"
            ) from None

    previous = readable(records.read_run, RUN_FILE)
    listed = readable(records.read_manifest, MANIFEST_FILE)
    if previous is None:
        if location.kind(RUN_FILE) == "file":  # one --fresh replaces
            return None, listed
        if listed is not None:  # ours, its run record lost (a store that lost its state)
            ours = groups.first_group(config.identity(), config.cells).config_hash
            if listed["config_hash"] != ours and not fresh:
                raise layout.ResultsError(
                    f"output: {where}: its {MANIFEST_FILE} is another config's (hash "
                    f"{listed['config_hash'][:12]}) and its {RUN_FILE} is missing; use --fresh "
                    "to start over there"
                )
            return None, listed
        if location.exists() and location.entries() and not validate.leftovers_only(location):
            raise layout.ResultsError(
                f"output: {where} exists, is not empty and is not a clocksweep results "
                f"directory (no {RUN_FILE}); choose a new or empty directory"
            )
        return None, listed
    version = records.version_problem(previous)
    if version and not fresh:
        raise layout.ResultsError(f"output: {where}: {version}")
    return previous, listed


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
            "shards_to_play": todo,
            "shards_already_committed": skipped,
            "ray": cluster,
        }
    )
    return record


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
            }
        )
    return common


def wins_table_of(config: SweepConfig) -> str:
    """The table whose files hold a shard's wins, which a later cell group reads."""
    return layout.DEALS_TABLE if config.record == "deals" else layout.WINS_TABLE


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
    """(shard, group) not committed, in shard order, up to the stopping point (as it is when
    each is asked for), less those in ``taken`` (as (shard index, group)); made as they are
    asked for: a plan can hold more shards than memory."""
    for shard in shards:
        stop = parts[-1].manifest.stop_at  # the stop rule's
        if stop is not None and shard.index > stop:
            return
        for number, part in enumerate(parts):
            if shard.index not in part.manifest and (shard.index, number) not in taken:
                yield shard, number


def in_flight_for(cpus: int) -> int:
    """Tasks kept in flight on ``cpus`` CPUs: two each, so that none waits on the driver."""
    return max(2, 2 * cpus)


def early_units(config: SweepConfig, shards: ShardPlan, parts: list[Part], threads: int):
    """The units the early player may play, in the order the driver would start them: those
    left whose earlier groups have the shard, with their jobs. Under a stop rule, none
    past the bound the driver keeps to (`play_all`'s ``ahead``): the rule reads nothing
    until Ray is up, so the prefix it has read is the one committed before."""
    common, wins_table = group_jobs(config, parts), wins_table_of(config)
    ahead = STOP_AHEAD * in_flight_for(threads)  # the threads standing for Ray's CPUs
    bound = parts[-1].manifest.prefix + ahead if config.stop else None
    for shard, number in units_left(shards, parts):
        if bound is not None and shard.index >= bound:
            return
        reads = played_before(parts, shard.index, number, wins_table)
        if reads is not None:
            job = ShardJob(shard=shard, attempt=1, earlier=reads, **common[number])
            yield (shard, number), job


def play_all(
    config: SweepConfig,
    shards: ShardPlan,
    parts: list[Part],
    progress: Progress,
    outcome: Outcome,
    task,
    node_lost=None,
    early: EarlyPlayer | None = None,
) -> None:
    """Keep tasks in flight until every shard of every cell group is committed or out of
    attempts; ``early``, what the driver played while Ray started, is taken in first. A task
    plays one shard of one group; a group's shard waits for the groups before it to commit
    theirs (it reads their wins). A full disk stops the run
    (layout.ResultsError): every attempt would fail the same way. A node the cluster loses is
    reported as Ray finds it dead and passed to ``node_lost`` (a dict of node_id, address and
    when it was lost); its shards fail and are played again on the other nodes."""
    import ray

    remote = ray.remote(num_cpus=1, max_retries=0)(task)
    cpus = int(ray.cluster_resources().get("CPU", 1))
    in_flight = in_flight_for(cpus)
    # A test's own task plays every unit whole, through that task.
    split_tail = task is play_shard and os.environ.get(SPLIT_TAIL_ENV, "1") != "0"
    piece_remote = ray.remote(num_cpus=1, max_retries=0)(play_piece)
    assemble_remote = ray.remote(num_cpus=1, max_retries=0)(assemble_shard)
    pieces_of = {}  # a split unit's assembly -> its pieces
    pieces_said = False  # the first shard split, once said
    manifest = parts[-1].manifest  # the stop rule's
    hold = parts[0].location.hold  # its lock, or an object store's lease
    common = group_jobs(config, parts)
    wins_table = wins_table_of(config)
    held = set()  # the units the early player is still playing, as (shard index, group)
    here = {}  # the node of what it played: this machine's, where the local instance runs

    # Under a stop rule, shards past the point are played for nothing: while some are in
    # flight, none is started more than this far past the prefix the rule has read.
    ahead = STOP_AHEAD * in_flight if config.stop else None
    waiting: list[tuple[Shard, int]] = []  # next in order, not ready yet
    given_up: set[int] = set()  # shards out of attempts in some group
    retries: deque[tuple[Shard, int]] = deque()
    resting = Resting()  # failed, to be retried after a pause
    attempts: dict[tuple[int, int], int] = {}
    # A unit with attempts is in hand (the early player's, or retried).
    upcoming = units_left(shards, parts, taken=attempts)
    unhanded = 0  # units ``upcoming`` has yet to give (at most: a stop rule may cut them)
    pending = {}
    cancelled = {}  # past the stopping point: cancelled, to be waited for
    stopped_here: list[tuple[Shard, int]] = []  # the early player's unit, likewise
    report_removed = False
    allowed = 1 + config.max_retries
    watch = NodeWatch(ray)

    def failed(unit: tuple[Shard, int], why: str) -> None:
        """An attempt that did not end in a commit: reported, then retried while it may be."""
        shard, number = unit
        progress.failures += 1
        tried = attempts[shard.index, number]
        again = tried < allowed
        where = f" of {parts[number].group.directory}" if number else ""
        progress.say(
            f"shard {shard.index} ({shard.first}-{shard.last}){where} failed, attempt {tried} "
            f"of {allowed}: {why}; "
            + (f"retrying in {retry_delay(tried):g} s" if again else "giving up")
        )
        if again:
            resting.add(unit, tried)
        elif shard.index not in given_up:
            given_up.add(shard.index)  # the groups after it cannot play it either
            outcome.failed.append(shard.index)

    def settle(rejected: list[tuple[ShardEntry, str]], number: int) -> None:
        """Shards the manifest could not commit (their files could not be put in place)."""
        for entry, why in rejected:
            shard = shards[entry.index]
            attempts[shard.index, number] = entry.attempts
            outcome.committed_here.discard((shard.index, number))
            outcome.played -= 1
            outcome.played_deals -= shard.count
            progress.done_shards -= 1
            progress.done_deals -= shard.count
            failed((shard, number), why)

    def finish(unit: tuple[Shard, int], result) -> None:
        """A unit's attempt ended: its entry committed, or its failure reported and retried
        (a full disk stops the run: every attempt would fail the same way)."""
        nonlocal report_removed
        shard, number = unit
        if isinstance(result, BaseException):
            cause = getattr(result, "cause", None)
            if is_disk_full(cause if isinstance(cause, BaseException) else result):
                committed = min(len(part.manifest) for part in parts)
                raise layout.StoreError(
                    f"output: {config.output}: the disk is full (No space left on device) "
                    f"while shard {shard.index} was written; the {committed} "
                    "shard(s) committed are kept: free space and rerun the same command"
                ) from None
            failed(unit, error_line(result))
            return
        if result.node_id is None:  # played by the early player, on this machine
            result = replace(result, **here)
        parts[number].manifest.commit(replace(result, attempts=attempts.pop((shard.index, number))))
        outcome.committed_here.add((shard.index, number))
        if not report_removed:
            # The results now differ from what a report of them said: remove it.
            parts[0].location.delete(layout.REPORT_DIR)
            report_removed = True
        outcome.played += 1
        outcome.played_deals += shard.count
        progress.done_shards += 1
        progress.done_deals += shard.count

    def from_early() -> None:
        """What the early player finished: committed, or failed and retried on Ray."""
        for (shard, number), result in early.take():
            held.discard((shard.index, number))
            attempts.setdefault((shard.index, number), 1)
            if isinstance(result, Partial):
                if not needed((shard, number)):  # stopped past the stopping point meanwhile
                    continue
                played_to, batches = result.played.batches[1], len(batch_starts(result.job))
                which = "batch 1" if played_to == 1 else f"batches 1-{played_to}"
                progress.say(
                    f"shard {shard.index}: {which} of {batches} played here, the rest on Ray"
                )
                pending[submit_rest(result)] = shard, number
            elif not isinstance(result, Stopped):  # stopped past the stopping point
                finish((shard, number), result)

    def earlier(unit: tuple[Shard, int]) -> tuple[PlayedGroup, ...] | None:
        """The groups before the unit's, whose wins it reads: None until each has committed
        the shard, and put its files in place."""
        shard, number = unit
        if ahead and pending and shard.index >= manifest.prefix + ahead:
            return None
        for before, part in enumerate(parts[:number]):
            if shard.index in part.manifest.unwritten:  # committed, but not yet written
                settle(part.manifest.flush(), before)
        return played_before(parts, shard.index, number, wins_table)

    def needed(unit: tuple[Shard, int]) -> bool:
        """Not past the stopping point, nor of a shard that a group before gave up on."""
        shard, _ = unit
        stop = manifest.stop_at
        return shard.index not in given_up and (stop is None or shard.index <= stop)

    def in_tail() -> bool:
        """Fewer units left to hand to Ray than it has CPUs."""
        return split_tail and unhanded + len(waiting) + len(retries) < cpus

    def submit(job: ShardJob):
        """The unit's task; at the end of the sweep, its pieces' and their assembly's."""
        nonlocal pieces_said
        if in_tail() and kept_bytes(job) <= SPLIT_BYTES_MAX:
            bounds = piece_bounds(job, TAIL_PIECES)
            if len(bounds) > 1:
                if not pieces_said:
                    progress.say(
                        f"the sweep's end: shards from {job.shard.index} on are played in up "
                        f"to {TAIL_PIECES} pieces each, across the workers"
                    )
                    pieces_said = True
                return in_pieces(job, bounds)
        return remote.remote(job)

    def in_pieces(job: ShardJob, bounds: list[tuple[int, int]], *played_here):
        """The pieces' tasks, and their assembly's (after what was ``played_here``)."""
        pieces = [piece_remote.remote(job, batches) for batches in bounds]
        ref = assemble_remote.remote(job, *played_here, *pieces)
        pieces_of[ref] = pieces
        return ref

    def submit_rest(partial: Partial):
        """The early player's last unit: the rest of its batches played on Ray (in pieces at
        the end of the sweep), its files assembled from them and what the player played."""
        job, played = partial.job, partial.played
        bounds = piece_bounds(job, TAIL_PIECES if in_tail() else 1, after=played.batches[1])
        return in_pieces(job, bounds, ray.put(played))

    def cancel(ref) -> None:
        for piece in pieces_of.pop(ref, ()):
            ray.cancel(piece, force=True)
        ray.cancel(ref, force=True)

    def next_unit():
        waiting[:0] = retries  # first, and ready as any other once what they read is there
        retries.clear()
        waiting[:] = [unit for unit in waiting if needed(unit)]
        for position, unit in enumerate(waiting):
            reads = earlier(unit)
            if reads is not None:
                del waiting[position]
                return unit, reads
        nonlocal unhanded
        while len(waiting) < in_flight:
            unit = next(upcoming, None)
            if unit is None:  # a stop rule may have cut what was counted
                unhanded = 0
                return None, None
            unhanded -= 1
            if not needed(unit):
                continue
            reads = earlier(unit)
            if reads is not None:
                return unit, reads
            waiting.append(unit)
        return None, None

    try:
        if early is not None:
            held = {(shard.index, number) for shard, number in early.close()}
            for unit in held:
                attempts[unit] = 1
            if early.started:
                progress.say(
                    f"{early.started - len(held)} shard(s) played while Ray started"
                    + (f", {len(held)} more begun" if held else "")
                )
            here.update(
                node=ray.util.get_node_ip_address(),
                node_id=ray.get_runtime_context().get_node_id(),
            )
        # Nothing the early player played is committed yet: each is one of the units left.
        unhanded = tasks_left(parts, shards) - (early.started if early is not None else 0)
        if early is not None:
            from_early()
        while True:
            if hold is not None:  # a lease lost stops the run now, not at its next commit
                hold.check()
            pause = resting.over(retries)
            while len(pending) < in_flight:
                unit, reads = next_unit()
                if unit is None:
                    break
                shard, number = unit
                attempts[shard.index, number] = attempts.get((shard.index, number), 0) + 1
                job = ShardJob(
                    shard=shard,
                    attempt=attempts[shard.index, number],
                    earlier=reads,
                    **common[number],
                )
                pending[submit(job)] = unit
            if not pending and not held:
                for number, part in enumerate(parts):
                    settle(part.manifest.flush(), number)
                if retries or any(needed(u) and earlier(u) is not None for u in waiting):
                    continue
                if not resting:
                    break
                time.sleep(min(pause, PROGRESS_INTERVAL))
                progress.tick()
                continue
            # While the early player is on its last unit, its end is looked for often.
            wait = min(EARLY_POLL if held else PROGRESS_INTERVAL, pause)
            ready = []
            if pending:
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=wait)
            else:
                early.wait(wait)
            if ready:
                done = set(ready)
                rest = [ref for ref in pending if ref not in done]
                if rest:
                    ready += ray.wait(rest, num_returns=len(rest), timeout=0)[0]
            for ref in ready:
                unit = pending.pop(ref)
                pieces_of.pop(ref, None)
                try:
                    entry = ray.get(ref)
                except Exception as error:  # a task's failure is reported, then retried
                    finish(unit, error)
                    continue
                finish(unit, entry)
            if early is not None:
                from_early()
            for number, part in enumerate(parts):
                settle(part.manifest.flush(at_most_every=MANIFEST_INTERVAL), number)
            if manifest.stop_at is not None:
                # The rule holds on the prefix: what runs past it is not needed (a group
                # before the last may still be playing a shard of its own up to it).
                for ref, (shard, _) in list(pending.items()):
                    if shard.index > manifest.stop_at:
                        cancel(ref)
                        cancelled[ref] = pending.pop(ref)
                for index, number in sorted(held):
                    if index > manifest.stop_at:
                        early.drop((shards[index], number))
                        stopped_here.append((shards[index], number))
                        held.discard((index, number))
                if not pending and not held and not retries:
                    if not any(needed(unit) for unit in resting):
                        break
            for node in watch.lost():
                progress.say(
                    f"node {node['node_id'][:12]} at {node['address']} was lost; its shards are "
                    f"played again on the {watch.alive_count} node(s) left"
                )
                if node_lost is not None:
                    node_lost(node)
            progress.tick()
            raise_if_stopped()
        progress.tick(force=True)
    finally:
        for ref in pending:  # interrupted, or stopped: stop what is still running
            cancel(ref)
        cancelled.update(pending)
        if early is not None:
            early.stop()
        stopped_here += [(shards[index], number) for index, number in sorted(held)]
        if cancelled:  # and let them end, so that no file of theirs appears after the clean-up
            ray.wait(list(cancelled), num_returns=len(cancelled), timeout=CANCEL_WAIT)
        outcome.cancelled = [
            (shard.index, number) for shard, number in [*cancelled.values(), *stopped_here]
        ]


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


def summary_line(config: SweepConfig, outcome: Outcome) -> str:
    """The closing line of a run."""
    bytes_per_row = f", {outcome.row_bytes / outcome.rows:.2f} bytes/row" if outcome.rows else ""
    rate = ""
    if outcome.played and outcome.play_seconds > 0:
        rate = (
            f", {format_rate(outcome.played_deals / outcome.play_seconds)} deals/s from the "
            "first shard on"
        )
    head = (
        f"{outcome.cells or len(config.cells)} cells x {outcome.deals:,} deals committed in "
        f"{outcome.committed}/{outcome.shards} shards "
        f"({outcome.played} played, {outcome.skipped} already committed"
    )
    if outcome.groups > 1:
        head += f" of {outcome.shards * outcome.groups} shards x {outcome.groups} cell groups"
    if outcome.redone:
        head += f", {len(outcome.redone)} redone after failing verification"
    head += f"), {outcome.bytes:,} bytes{bytes_per_row}, {format_seconds(outcome.seconds)}{rate}"
    stop = outcome.stop
    if stop is not None:
        at = stop["stopped_at_shard"]
        head += (
            f"; stopped after shard {at} ({stop['deals']:,} deals): {config.stop.describe()} met"
            if at is not None
            else f"; the stop rule ({config.stop.describe()}) was not met in "
            f"{stop['deals']:,} deals (about {stop['deals_still_needed'] or 0:,} more needed)"
        )
    return head
