"""Sweeps on Ray: a config becomes shards, each a Ray task that plays and writes its deals.

The driver plans shards (consecutive deal ranges), skips those already committed whose files
still verify, and keeps a bounded number of tasks in flight. Each task plays its whole deal
range under every cell with the kernel, in sub-batches that bound its memory, and writes its
own Parquet file(s) (see `storage`); it returns only small metadata, which the driver commits
to the manifest. Results never pass through the driver, so its memory does not grow with the
number of deals.

Retries are the driver's: a task that raises, or whose worker process dies, is resubmitted up
to ``ray.max_retries`` more times, each attempt reported as it happens and counted in the
manifest. A rerun after any interruption (even SIGKILL of the driver) redoes exactly the
shards that were not committed; shard files are byte-identical wherever they are made.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from collections import deque
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timezone

import pyarrow as pa

from pipeline import ERROR_PREFIX, __version__
from pipeline.records import identity
from pipeline.store import layout, records, validate
from pipeline.store.plan import ShardPlan, plan_shards
from pipeline.store.files import ShardFileWriter, expected_schemas, file_metadata
from pipeline.store.location import is_disk_full
from pipeline.sweep.config import ConfigError, SweepConfig
from pipeline.engine.rules import Cell
from pipeline.store.layout import DEALS_TABLE, FACTS_TABLE, MANIFEST_FILE, RUN_FILE
from pipeline.store.location import Location
from pipeline.store.plan import Shard

# A task plays at most this many rows (deals x cells) at once. Per-deal records: half a
# million rows (5 MB of kernel results, ~20 MB with their table), which the allocator reuses
# batch after batch; 4 million rows (40 MB, ~160 MB) are fresh pages each batch and cost
# 15-20 ns more per row (table building doubles). Summary records: 4 million rows (40 MB of
# kernel results), since each batch ends in its own small tables.
ROWS_PER_BATCH = {"deals": 500_000, "summary": 4_000_000}
PROGRESS_INTERVAL = 1.0  # seconds between progress refreshes on a terminal
PROGRESS_INTERVAL_LOG = 10.0  # ... and between progress lines when stderr is a file
MANIFEST_INTERVAL = 1.0  # seconds between manifest writes while shards complete
# How long a cluster address that accepts connections may take to answer as Ray, and an
# object store to answer the first look at the output, before the run gives up (Ray retries
# without end when something else listens at its address; an object store's client retries
# for minutes); a healthy one answers in seconds. The environment variable overrides it.
CONNECT_SECONDS = 60.0
CONNECT_SECONDS_ENV = "CLOCKSWEEP_CONNECT_SECONDS"

# Test hook, read by the driver and passed to tasks: "SECONDS:DIRECTORY" makes every task,
# once its first batch is written (a temporary file exists), write its pid to
# DIRECTORY/shard-N.attempt-K.pid and wait SECONDS, so that a test can kill a worker, or the
# driver, mid-shard.
TEST_PAUSE_ENV = "CLOCKSWEEP_TEST_PAUSE"
# Test hook: "N" makes every attempt at shard N raise, to exercise retries and failed runs.
TEST_FAIL_ENV = "CLOCKSWEEP_TEST_FAIL_SHARD"


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
    lines.append(f"total: {config.deals:,} deals x {len(config.cells)} cells = "
                 f"{config.deals * len(config.cells):,} deal results")
    return "\n".join(lines)


def deals_per_batch(count: int, n_cells: int, multiple: int = 1, record: str = "deals") -> int:
    """Sub-batch size: even batches of at most ROWS_PER_BATCH[record] rows, a multiple of
    ``multiple``."""
    n_batches = -(-count * n_cells // ROWS_PER_BATCH[record])
    size = max(1, -(-count // max(1, n_batches)))
    if multiple > 1 and size > multiple:
        size -= size % multiple
    return size


# --- The task -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ShardJob:
    """Everything a task needs to play and write one shard (small: it travels to the worker)."""

    location: Location
    shard: Shard
    seed: int
    cells: tuple[Cell, ...]
    record: str
    provenance: dict
    attempt: int
    pause: tuple[float, str] | None = None
    fail: bool = False


def play_shard(job: ShardJob) -> dict:
    """The Ray task: `write_shard`'s manifest entry, with the node that played the shard."""
    import ray

    entry = write_shard(job)
    entry["node"] = ray.util.get_node_ip_address()
    entry["node_id"] = ray.get_runtime_context().get_node_id()
    return entry


def write_shard(job: ShardJob) -> dict:
    """Play a shard under every cell and write its file(s): the manifest entry, less attempts
    and node."""
    started = time.perf_counter()
    if job.fail:
        raise RuntimeError(f"test hook {TEST_FAIL_ENV}: shard {job.shard.index} fails")
    from pipeline.engine import kernel

    shard, cells = job.shard, list(job.cells)
    metadata = file_metadata(
        {**job.provenance, "shard": {"index": shard.index, "first": shard.first, "last": shard.last}}
    )
    from pipeline.records import summary

    multiple = 1
    facts = None
    if job.record == "summary":
        multiple = summary.BLOCK  # batches of whole blocks: runs of deals are counted per batch
    else:
        facts = summary.FactCounts(cells)  # the deal facts, counted beside the per-deal rows
    writers: dict[str, ShardFileWriter] = {}
    parts = []
    playing = 0.0  # seconds in the kernel, so that the manifest shows what the rest cost
    try:
        batch = deals_per_batch(shard.count, len(cells), multiple, job.record)
        for start in range(0, shard.count, batch):
            first = shard.first + start
            count = min(batch, shard.count - start)
            began = time.perf_counter()
            results = kernel.play(job.seed, first, count, cells)
            playing += time.perf_counter() - began
            if facts is None:
                parts.append(summary.summarise(results, cells))
            else:
                facts.add_results(results)
                if DEALS_TABLE not in writers:
                    writers[DEALS_TABLE] = ShardFileWriter(
                        job.location, shard.path(DEALS_TABLE), DEALS_TABLE
                    )
                writers[DEALS_TABLE].write_deals(job.seed, first, results, cells, metadata)
            del results
            if job.pause and start == 0:
                hold_for_test(job)
        # One file per summary table, each the shard's counts summed over its batches.
        tables = summary.combine(parts) if facts is None else {FACTS_TABLE: facts.table()}
        for name, table in tables.items():
            table = table.replace_schema_metadata(metadata)
            writers[name] = ShardFileWriter(job.location, shard.path(name), name)
            writers[name].write(table)
        files = [writer.commit() for writer in writers.values()]
    except BaseException:
        for writer in writers.values():
            writer.abort()
        raise
    return {
        "index": shard.index,
        "first": shard.first,
        "last": shard.last,
        "deals": shard.count,
        "cells": len(cells),
        "rows": sum(record["rows"] for record in files if record["table"] == DEALS_TABLE),
        "files": files,
        "seconds": round(time.perf_counter() - started, 3),
        "kernel_seconds": round(playing, 3),
    }


def hold_for_test(job: ShardJob) -> None:
    """The test hook (see TEST_PAUSE_ENV): say which process this is, then wait."""
    seconds, directory = job.pause
    path = f"{directory}/shard-{job.shard.index}.attempt-{job.attempt}.pid"
    with open(path + ".tmp", "w") as file:
        file.write(str(os.getpid()))
    os.replace(path + ".tmp", path)
    time.sleep(seconds)


# --- Progress -----------------------------------------------------------------------------


class Progress:
    """Progress on stderr: refreshed in place on a terminal, occasional lines in a log."""

    def __init__(self, stream, total_shards: int, total_deals: int, done_shards: int, done_deals: int):
        self.stream = stream
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self.interval = PROGRESS_INTERVAL if self.tty else PROGRESS_INTERVAL_LOG
        self.total_shards, self.total_deals = total_shards, total_deals
        self.done_shards, self.done_deals = done_shards, done_deals
        self.start_deals = done_deals
        self.failures = 0
        self.started = time.monotonic()
        self.last_shown = self.started
        self.line_open = False

    def rate(self) -> float:
        elapsed = time.monotonic() - self.started
        return (self.done_deals - self.start_deals) / elapsed if elapsed > 0 else 0.0

    def status(self) -> str:
        rate = self.rate()
        left = self.total_deals - self.done_deals
        eta = format_seconds(left / rate) if rate > 0 else "?"
        return (f"shards {self.done_shards}/{self.total_shards}, "
                f"deals {self.done_deals:,}/{self.total_deals:,}, {format_rate(rate)} deals/s, "
                f"ETA {eta}, failures {self.failures}")

    def tick(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last_shown < self.interval:
            return
        self.last_shown = now
        if self.tty:
            self.stream.write(f"\r\x1b[Kclocksweep: {self.status()}")
            self.line_open = True
        else:
            self.stream.write(f"clocksweep: {self.status()}\n")
        self.stream.flush()

    def say(self, message: str) -> None:
        """A message of its own (an error as it happens), on its own line."""
        if self.line_open:
            self.stream.write("\r\x1b[K")
            self.line_open = False
        self.stream.write(f"clocksweep: {message}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.line_open:
            self.stream.write("\n")
            self.line_open = False
        self.stream.flush()


def format_rate(rate: float) -> str:
    if rate >= 1e6:
        return f"{rate / 1e6:.2f}M"
    if rate >= 1e3:
        return f"{rate / 1e3:.1f}k"
    return f"{rate:.0f}"


def format_seconds(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


# --- Ray ----------------------------------------------------------------------------------


def connect(config: SweepConfig, address: str | None, before_exit=None) -> tuple[bool, dict]:
    """Join or start Ray: (whether we started it, what the cluster is).

    The address comes from --address, else RAY_ADDRESS (set by `ray job submit`), else the
    config; with none, a new local instance ("local", never a cluster that happens to run
    on this machine). Ray's token authentication is left as Ray sets it up.
    """
    import ray

    started = False
    if address is not None and not address.strip():
        raise ConfigError("--address: empty; expected HOST:PORT of a Ray cluster's head, "
                          "ray://HOST:PORT or auto")
    if ray.is_initialized():
        kind = "the Ray session already open in this process"
    else:
        for source, value in (("--address", address), ("RAY_ADDRESS", os.environ.get("RAY_ADDRESS")),
                              ("ray.address", config.ray.get("address")), (None, "local")):
            if value:
                break
        if source is not None:
            check_reachable(source, value)
        options = {"address": value, "ignore_reinit_error": True, "log_to_driver": True,
                   "logging_level": "warning"}
        if value == "local":
            options["num_cpus"] = config.ray.get("num_cpus")
            options["include_dashboard"] = False
        waiting = nullcontext() if source is None else deadline(
            f"{source}: {value} accepts connections, but no Ray cluster answered there within "
            "{seconds} s; expected the address of a Ray cluster's head (`ray start --head`)",
            before_exit)
        try:
            # Ray warns before it raises (e.g. "Ray Client connection timed out"): the error's
            # one line says it; on success its warnings are shown as usual.
            with warnings.catch_warnings(record=True) as caught, waiting:
                warnings.simplefilter("always")
                ray.init(**options)
            for warning in caught:
                warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)
        except (ConnectionError, ValueError, RuntimeError) as error:
            first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
            if source is None:
                raise ConfigError(f"ray: cannot start a local Ray instance: {first_line}") from None
            raise ConfigError(
                f"{source}: cannot connect to Ray at {value!r}: {first_line} (a cluster with "
                "token authentication also needs RAY_AUTH_MODE=token and its token here)"
            ) from None
        started = True
        kind = "local instance" if value == "local" else "cluster"
    nodes = [node for node in ray.nodes() if node.get("Alive")]
    cluster = {
        "ray_version": ray.__version__,
        "kind": kind,
        "gcs_address": ray.get_runtime_context().gcs_address,
        "cpus": ray.cluster_resources().get("CPU", 0),
        "nodes": [
            {"host": node.get("NodeManagerHostname"), "ip": node.get("NodeManagerAddress"),
             "cpus": node.get("Resources", {}).get("CPU", 0)}
            for node in nodes
        ],
    }
    return started, cluster


@contextmanager
def deadline(message: str, before_exit=None):
    """Unless the block ends within CONNECT_SECONDS (or CLOCKSWEEP_CONNECT_SECONDS), end the
    process with the one-line error ``message`` (``{seconds}`` in it replaced by the seconds)
    and exit status 2: for a wait inside Ray or an object store's client that cannot be
    interrupted otherwise. Only used before anything is written; ``before_exit`` undoes
    what was made to get there (the lock file)."""
    import threading

    seconds = connect_seconds()

    def give_up() -> None:
        if before_exit is not None:
            before_exit()
        sys.stderr.write(f"{ERROR_PREFIX}{message.replace('{seconds}', f'{seconds:g}')}\n")
        sys.stderr.flush()
        os._exit(2)

    timer = threading.Timer(seconds, give_up)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def connect_seconds() -> float:
    """CONNECT_SECONDS, or CLOCKSWEEP_CONNECT_SECONDS if set; ConfigError if that is no number
    of seconds."""
    text = os.environ.get(CONNECT_SECONDS_ENV)
    if text is None:
        return CONNECT_SECONDS
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds < float("inf"):
        raise ConfigError(f"{CONNECT_SECONDS_ENV}: {text!r} is not a number of seconds; "
                          "expected a positive number, such as 60")
    return seconds


def check_reachable(source: str, address: str) -> None:
    """Fail fast, in one line, when nothing listens at a HOST:PORT address (ray.init would
    retry for minutes; Ray's client, half a minute). Other forms ('auto', ...) are left to Ray."""
    import socket

    client = address.startswith("ray://")
    host, colon, port = address.removeprefix("ray://").rpartition(":")
    if not colon or not port.isdigit() or "://" in host:
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as error:
        raise ConfigError(
            f"{source}: nothing answers at {address} ({error.strerror or error}); expected "
            + ("ray://HOST:PORT of a Ray client server (`ray start --head` serves one on 10001)"
               if client else "the HOST:PORT of a Ray cluster's head (`ray start --head`)")
        ) from None


def error_line(error: BaseException) -> str:
    """One line for a task's failure: the original exception where Ray wraps one."""
    cause = getattr(error, "cause", None)
    if isinstance(cause, BaseException):
        error = cause
    text = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


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
    play_seconds: float = 0.0


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def run(config: SweepConfig, *, fresh: bool = False, address: str | None = None,
        stream=None) -> Outcome:
    """Run (or resume) a sweep into its results directory; gives what happened.

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
    # The lock first: what is read below stays true while it is held.
    lock = location.lock()
    started_ray, refused = False, True
    try:
        waiting = nullcontext() if location.is_local else deadline(
            f"output: {config.output} did not answer within {{seconds}} s")
        try:
            with waiting:
                previous, listed = read_previous(location, config, fresh)
                manifest = records.Manifest(location, config.hash)
                notes: list[tuple[int | None, str]] = []
                if listed is not None and not fresh:
                    if listed["config_hash"] != config.hash:
                        notes.append((None, f"{MANIFEST_FILE} belongs to another config (hash "
                                            f"{listed['config_hash'][:12]}), so every shard is redone"))
                    else:
                        notes = manifest.load_verified(listed["shards"], shards, len(config.cells),
                                                       expected_schemas(config.record))
                found = validate.survey(location, set() if fresh else manifest.committed_paths())
        except (OSError, pa.ArrowException) as error:  # e.g. an object store that refuses us
            raise layout.ResultsError(f"output: {config.output}: cannot be read "
                                       f"({(str(error).strip().splitlines() or [''])[0]})") from None
        if found.blocking:
            path, what = found.blocking[0]
            raise layout.ResultsError(f"output: {config.output}: {path} is {what.removeprefix('a ')} "
                                       "where clocksweep writes its shard files; move it away")
        todo = shards.count - len(manifest.entries)
        outcome.skipped = len(manifest.entries)
        outcome.redone = sorted({index for index, _ in notes
                                 if index is not None and index not in manifest.entries})
        cluster = None
        if todo:
            undo = None if lock is None else (lambda: lock.release(refused=True))
            started_ray, cluster = connect(config, address, undo)
        refused = False

        progress = Progress(stream, shards.count, config.deals,
                            outcome.skipped, sum(e["deals"] for e in manifest.entries.values()))
        for index, problem in notes:
            kept = index is not None and index in manifest.entries
            progress.say(problem if index is None or kept else f"shard {index}: {problem}; redoing it")
        if fresh and previous is not None:
            # The report goes with the results it described.
            for name in (MANIFEST_FILE, layout.REPORT_DIR):
                location.delete(name)
        for path in found.removable:
            location.delete(path)
        location.prune_partial()
        if found.removable:
            progress.say(f"removed {len(found.removable)} uncommitted file(s) of an earlier run")
        for path, what in found.foreign[:5]:
            progress.say(f"left alone: {path} ({what}; not written by clocksweep)")
        if len(found.foreign) > 5:
            progress.say(f"left alone: {len(found.foreign) - 5} more paths not written by clocksweep")

        run_record = start_run_record(config, previous if not fresh else None, cluster,
                                      todo, outcome.skipped)
        location.write_json(RUN_FILE, run_record)
        manifest.flush()
        if todo:
            progress.say(f"{todo:,} of {shards.count:,} shards to play "
                         f"({outcome.skipped} already committed) on "
                         f"{cluster['cpus']:.0f} CPUs, {len(cluster['nodes'])} node(s)")
            status = "interrupted"
            playing = time.monotonic()
            try:
                play_all(config, location, shards, manifest, progress, outcome)
                status = "failed" if outcome.failed else "complete"
            finally:
                outcome.play_seconds = time.monotonic() - playing
                try:
                    manifest.flush()
                    progress.close()
                    run_record["runs"][-1].update(
                        finished=now(), status=status, shards_played=outcome.played,
                        shards_failed=outcome.failed,
                    )
                    location.write_json(RUN_FILE, run_record)
                finally:
                    remove_partial_files(location)
        else:
            run_record["runs"][-1].update(finished=now(), status="complete")
            location.write_json(RUN_FILE, run_record)
    finally:
        if lock is not None:
            lock.release(refused=refused)
        if started_ray:
            import ray

            ray.shutdown()

    outcome.seconds = time.monotonic() - clock
    for entry in manifest.entries.values():
        outcome.deals += entry["deals"]
        outcome.rows += entry["rows"]
        outcome.bytes += sum(record["bytes"] for record in entry["files"])
        outcome.row_bytes += sum(r["bytes"] for r in entry["files"] if r["table"] == DEALS_TABLE)
    return outcome


def remove_partial_files(location: Location) -> None:
    """Files of attempts that did not end in a commit (a worker that died, a task cancelled
    when the run stopped, a manifest that could not be written): readers never see them, but
    validate names them."""
    for path in validate.survey(location, set()).partial:
        try:
            location.delete(path)
        except OSError:
            pass
    location.prune_partial()


def read_previous(location: Location, config: SweepConfig, fresh: bool) -> tuple[dict | None, dict | None]:
    """The run record and the manifest already in the output directory (None where there is
    none; the record ``{}`` if --fresh replaces one that cannot be read); refuse a directory
    that is not ours, or not this config's unless ``fresh``."""
    where = config.output

    def readable(read, name: str):
        try:
            return read(location)
        except layout.ResultsError as error:
            ours = location.kind(name) == "file"  # not a directory or link, which is not ours
            if fresh and ours:
                return {}
            advice = "; use --fresh to start over there" if ours else ""
            raise layout.ResultsError(
                f"output: {where}: {str(error).removeprefix(location.where + ': ')}{advice}"
            ) from None

    previous = readable(records.read_run, RUN_FILE)
    listed = readable(records.read_manifest, MANIFEST_FILE) or None
    if previous is None:
        if location.exists() and location.entries():
            raise layout.ResultsError(
                f"output: {where} exists, is not empty and is not a clocksweep results "
                f"directory (no {RUN_FILE}); choose a new or empty directory"
            )
        return None, listed
    if previous == {}:
        return previous, listed
    version = records.version_problem(previous)
    if version and not fresh:
        raise layout.ResultsError(f"output: {where}: {version}")
    if previous.get("config_hash") != config.hash and not fresh:
        raise layout.ResultsError(
            f"output: {where} holds results of another config (hash "
            f"{str(previous.get('config_hash'))[:12]}, this one {config.hash[:12]}); "
            "use --fresh to replace them, or choose another output"
        )
    return previous, listed


def provenance(config: SweepConfig) -> dict:
    """What every shard file carries in its Parquet metadata (no host, no time: see storage)."""
    return {
        "clocksweep": __version__,
        "name": config.name,
        "config_hash": config.hash,
        "sweep": config.identity(),
    }


def start_run_record(config: SweepConfig, previous: dict | None, cluster: dict | None,
                     todo: int, skipped: int) -> dict:
    record = {
        "clocksweep": __version__,
        "config_hash": config.hash,
        "config": config.resolved(),
        "config_source": config.source,
        "deal_scheme": config.identity()["deal_scheme"],
        "result_schema": config.identity()["result_schema"],
        "record": config.record,
        "cells": [{**identity.cell_record(cell), "label": cell.label} for cell in config.cells],
        "shards": {"count": config.n_shards, "size": config.shard_size,
                   "naming": "shards/<table>/shard-<index>_deals-<first>-<last>.parquet"},
        "runs": list((previous or {}).get("runs", [])),
    }
    record["runs"].append({
        "started": now(),
        "finished": None,
        "status": "running",
        "host": os.uname().nodename,
        "clocksweep": __version__,
        "shards_to_play": todo,
        "shards_already_committed": skipped,
        "ray": cluster,
    })
    return record


def play_all(config: SweepConfig, location: Location, shards: ShardPlan,
             manifest: records.Manifest, progress: Progress, outcome: Outcome) -> None:
    """Keep tasks in flight until every shard is committed or out of attempts. A full disk
    stops the run (layout.ResultsError): every attempt would fail the same way."""
    import ray

    task = ray.remote(num_cpus=1, max_retries=0)(play_shard)
    in_flight = max(2, int(2 * ray.cluster_resources().get("CPU", 1)))
    pause = pause_from_env()
    common = {
        "location": location,
        "seed": config.seed,
        "cells": tuple(config.cells),
        "record": config.record,
        "provenance": provenance(config),
        "pause": pause,
    }
    # Made as they are asked for: a plan can hold more shards than memory.
    upcoming = (shard for shard in shards if shard.index not in manifest.entries)
    retries: deque[Shard] = deque()
    attempts: dict[int, int] = {}
    pending = {}
    report_removed = False
    try:
        while True:
            while len(pending) < in_flight:
                shard = retries.popleft() if retries else next(upcoming, None)
                if shard is None:
                    break
                attempts[shard.index] = attempts.get(shard.index, 0) + 1
                job = ShardJob(shard=shard, attempt=attempts[shard.index],
                               fail=str(shard.index) == os.environ.get(TEST_FAIL_ENV), **common)
                pending[task.remote(job)] = shard
            if not pending:
                break
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=PROGRESS_INTERVAL)
            if ready:
                done = set(ready)
                rest = [ref for ref in pending if ref not in done]
                if rest:
                    ready += ray.wait(rest, num_returns=len(rest), timeout=0)[0]
            for ref in ready:
                shard = pending.pop(ref)
                try:
                    entry = ray.get(ref)
                except Exception as error:  # a task's failure is reported, then retried
                    cause = getattr(error, "cause", None)
                    if is_disk_full(cause if isinstance(cause, BaseException) else error):
                        raise layout.ResultsError(
                            f"output: {config.output}: the disk is full (No space left on device) "
                            f"while shard {shard.index} was written; the {len(manifest.entries)} "
                            "shard(s) committed are kept: free space and rerun the same command"
                        ) from None
                    progress.failures += 1
                    tried = attempts[shard.index]
                    allowed = 1 + config.max_retries
                    if tried < allowed:
                        progress.say(f"shard {shard.index} ({shard.first}-{shard.last}) failed, "
                                     f"attempt {tried} of {allowed}: {error_line(error)}; retrying")
                        retries.appendleft(shard)
                    else:
                        progress.say(f"shard {shard.index} ({shard.first}-{shard.last}) failed, "
                                     f"attempt {tried} of {allowed}: {error_line(error)}; giving up")
                        outcome.failed.append(shard.index)
                    continue
                entry["attempts"] = attempts[shard.index]
                manifest.commit(entry)
                if not report_removed:
                    # The results now differ from what a report of them said: remove it.
                    location.delete(layout.REPORT_DIR)
                    report_removed = True
                outcome.played += 1
                outcome.played_deals += shard.count
                progress.done_shards += 1
                progress.done_deals += shard.count
            manifest.flush(at_most_every=MANIFEST_INTERVAL)
            progress.tick()
        progress.tick(force=True)
    finally:
        for ref in pending:  # interrupted: stop what is still running
            ray.cancel(ref, force=True)


def pause_from_env() -> tuple[float, str] | None:
    text = os.environ.get(TEST_PAUSE_ENV)
    if not text:
        return None
    seconds, _, directory = text.partition(":")
    return float(seconds), directory


def summary_line(config: SweepConfig, outcome: Outcome) -> str:
    """The closing line of a run."""
    bytes_per_row = f", {outcome.row_bytes / outcome.rows:.2f} bytes/row" if outcome.rows else ""
    rate = ""
    if outcome.played and outcome.play_seconds > 0:
        rate = (f", {format_rate(outcome.played_deals / outcome.play_seconds)} deals/s "
                "once Ray was up")
    head = (f"{len(config.cells)} cells x {outcome.deals:,} deals committed in "
            f"{outcome.shards - len(outcome.failed)}/{outcome.shards} shards "
            f"({outcome.played} played, {outcome.skipped} already committed")
    if outcome.redone:
        head += f", {len(outcome.redone)} redone after failing verification"
    head += f"), {outcome.bytes:,} bytes{bytes_per_row}, {format_seconds(outcome.seconds)}{rate}"
    return head
