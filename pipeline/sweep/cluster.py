"""Joining or starting Ray, and the deadlines of waits that Ray or an object store's client
would not end by themselves."""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
import warnings
from contextlib import contextmanager, nullcontext

from pipeline.sweep.config import ConfigError, SweepConfig
from pipeline.sweep.processes import alive, command_line, descendants, descendants_of, kill, running
from pipeline.sweep.signals import HANDLER as SIGNALS
from pipeline.sweep.signals import end_process_after

# How long a cluster address that accepts connections may take to answer as Ray, and an
# object store to answer the first look at the output, before the run gives up (Ray retries
# without end when something else listens at its address; an object store's client retries
# for minutes); a healthy one answers in seconds. The environment variable overrides it.
CONNECT_SECONDS = 60.0
CONNECT_SECONDS_ENV = "CLOCKSWEEP_CONNECT_SECONDS"


class StoppedWhileStarting(KeyboardInterrupt):
    """SIGTERM while ``ray.init`` ran: Ray's own handler, which it sets as it starts, exits the
    process with none of the run's cleanup; this is raised in its place, once what Ray had
    started is ended, so that the run stops as on any signal."""

    signal_number = signal.SIGTERM


def connect(config: SweepConfig, address: str | None, before_exit=None) -> tuple[bool, dict]:
    """Join or start Ray: (whether we started it, what the cluster is).

    The address comes from --address, else RAY_ADDRESS (set by `ray job submit`), else the
    config; with none, a new local instance ("local", never a cluster that happens to run
    on this machine). Ray's token authentication is left as Ray sets it up.
    """
    import ray

    started = False
    if address is not None and not address.strip():
        raise ConfigError(
            "--address: empty; expected HOST:PORT of a Ray cluster's head, ray://HOST:PORT or auto"
        )
    if ray.is_initialized():
        kind = "the Ray session already open in this process"
    else:
        source, value = ray_address(config, address)
        if source is not None:
            check_reachable(source, value)
        start_or_join(config, source, value, before_exit)
        started = True
        kind = "local instance" if value == "local" else "cluster"
    return started, cluster_record(kind)


def start_or_join(config: SweepConfig, source: str | None, value: str, before_exit) -> None:
    """`ray.init` at ``value`` (said by ``source``; None: a new local instance), within the
    connect deadline where it is a cluster's address; a signal while it runs ends what it
    started; its failure is one line (ConfigError)."""
    import ray

    options = {
        "address": value,
        "ignore_reinit_error": True,
        "log_to_driver": True,
        # Ray's logger keeps the handler `ray_logs_to` gives it (the run's log), not a
        # terminal's that ray.init would add.
        "configure_logging": False,
    }
    if value == "local":
        options["num_cpus"] = config.ray.get("num_cpus")
        options["include_dashboard"] = False
    waiting = (
        nullcontext()
        if source is None
        else deadline(
            f"{source}: {value} accepts connections, but no Ray cluster answered there within "
            "{seconds} s; expected the address of a Ray cluster's head (`ray start --head`)",
            before_exit,
        )
    )
    try:
        # Ray warns before it raises (e.g. "Ray Client connection timed out"): the error's
        # one line says it; on success its warnings are shown as usual, through the filters
        # (what other threads warned meanwhile is caught too: the kernel's compile, say).
        with warnings.catch_warnings(record=True) as caught, waiting:
            warnings.simplefilter("always")
            already = descendants()
            try:
                ray.init(**options)
            except (SystemExit, KeyboardInterrupt) as stopped:
                if isinstance(stopped, SystemExit):  # Ray's SIGTERM handler: ours again,
                    SIGNALS.note(StoppedWhileStarting.signal_number)  # as if it saw it
                end_started(already)  # a second signal is ignored: it cuts nothing short
                if isinstance(stopped, SystemExit):
                    raise StoppedWhileStarting("SIGTERM") from None
                raise
        for warning in caught:
            warnings.warn_explicit(
                warning.message, warning.category, warning.filename, warning.lineno
            )
    except (ConnectionError, ValueError, RuntimeError) as error:
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        if source is None:
            raise ConfigError(f"ray: cannot start a local Ray instance: {first_line}") from None
        raise ConfigError(
            f"{source}: cannot connect to Ray at {value!r}: {first_line} (a cluster with "
            "token authentication also needs RAY_AUTH_MODE=token and its token here)"
        ) from None


def cluster_record(kind: str) -> dict:
    """What the cluster Ray is connected to is, as the run record keeps it."""
    import ray

    nodes = [node for node in ray.nodes() if node.get("Alive")]
    return {
        "ray_version": ray.__version__,
        "kind": kind,
        "gcs_address": ray.get_runtime_context().gcs_address,
        "cpus": ray.cluster_resources().get("CPU", 0),
        "nodes": [
            {
                "host": node.get("NodeManagerHostname"),
                "ip": node.get("NodeManagerAddress"),
                "cpus": node.get("Resources", {}).get("CPU", 0),
            }
            for node in nodes
        ],
    }


@contextmanager
def ray_logs_to(write):
    """Ray's own log records (its start, its warnings) to ``write``, one line each, in place
    of the terminal, while the context lasts.

    ray.init leaves the "ray" logger with no handler and not propagating, so its records
    (the token-auth warning among them) reach the logging module's handler of last resort,
    which prints to stderr: that handler (`logging.lastResort`, public) is this one for the
    run, as is the "ray" logger's own until ray.init clears it."""
    import ray  # noqa: F401 (its import sets its logger's handler: this one goes in after)

    logger = logging.getLogger("ray")
    forward = ForwardedLog(write)
    kept, propagates, last_resort = list(logger.handlers), logger.propagate, logging.lastResort
    for handler in kept:
        logger.removeHandler(handler)
    logger.addHandler(forward)
    logger.propagate = False
    logging.lastResort = forward
    try:
        yield
    finally:
        logging.lastResort = last_resort
        logger.removeHandler(forward)
        for handler in kept:
            logger.addHandler(handler)
        logger.propagate = propagates


class ForwardedLog(logging.Handler):
    def __init__(self, write):
        super().__init__()
        self.write = write

    def emit(self, record: logging.LogRecord) -> None:
        self.write(f"ray: {record.levelname.lower()}: {record.getMessage()}")


def ray_address(config: SweepConfig, address: str | None) -> tuple[str | None, str]:
    """Where Ray is: (what said so, the address); (None, "local") for a new local instance."""
    for source, value in (
        ("--address", address),
        ("RAY_ADDRESS", os.environ.get("RAY_ADDRESS")),
        ("ray.address", config.ray.get("address")),
    ):
        if value:
            return source, value
    return None, "local"


def starts_local(config: SweepConfig, address: str | None) -> bool:
    """Whether `connect` would start a new local instance (on this machine, seconds long)."""
    if address is not None and not address.strip():
        return False  # refused by `connect`
    if "ray" in sys.modules and sys.modules["ray"].is_initialized():
        return False
    return ray_address(config, address)[1] == "local"


def end_started(already: set[int], grace: float = 5.0) -> None:
    """End what a cut-short ``ray.init`` started (Ray's shutdown, then by pid what it did not
    know of: the processes started since ``already`` was taken), SIGTERM and then SIGKILL."""
    started = descendants() - already  # before Ray's stop, while its agents have parents
    try:
        shut_down()
    except Exception:  # noqa: BLE001 (a node half made: its processes are ended below)
        pass
    for number in (signal.SIGTERM, signal.SIGKILL):
        for pid in started:
            try:
                os.kill(pid, number)
            except OSError:
                pass
        waited = time.monotonic() + grace
        while started and time.monotonic() < waited:
            time.sleep(0.05)
            started = {pid for pid in started if running(pid)}  # orphaned ones too
        if not started:
            return


# Ray's stop asks a local instance's autoscaler monitor (idle on one machine) to end after
# the control store it reports to, and waits a second for it to give up: so it is ended
# first, by pid, found among this process's children by its command line. (Should Ray name
# it otherwise, none is found and Ray's stop takes that second.)
AUTOSCALER_MONITOR = b"autoscaler/_private/monitor.py"


def shut_down() -> None:
    """`ray.shutdown()`, which also ends a local instance this process started, its
    autoscaler monitor first."""
    import ray

    monitors = {
        process
        for process in descendants_of(os.getpid())
        if AUTOSCALER_MONITOR in command_line(process[0])
    }
    kill(monitors)
    until = time.monotonic() + 5
    while any(alive(process) for process in monitors) and time.monotonic() < until:
        time.sleep(0.01)
    ray.shutdown()


@contextmanager
def deadline(message: str, before_exit=None, status: int = 2):
    """Unless the block ends within CONNECT_SECONDS (or CLOCKSWEEP_CONNECT_SECONDS), end the
    process with the one-line error ``message`` (``{seconds}`` in it replaced by the seconds)
    and exit ``status`` (2: an address that is not what it was said to be; 1: an object
    store that stopped answering): for a wait inside Ray or an object store's client that
    cannot be interrupted otherwise. Only used before anything is written; ``before_exit``
    undoes what was made to get there (the lock file)."""
    seconds = connect_seconds()
    text = message.replace("{seconds}", f"{seconds:g}")
    timer = end_process_after(seconds, text, status, before=before_exit)
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
        raise ConfigError(
            f"{CONNECT_SECONDS_ENV}: {text!r} is not a number of seconds; "
            "expected a positive number, such as 60"
        )
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
            + (
                "ray://HOST:PORT of a Ray client server (`ray start --head` serves one on 10001)"
                if client
                else "the HOST:PORT of a Ray cluster's head (`ray start --head`)"
            )
        ) from None


def error_line(error: BaseException) -> str:
    """One line for a task's failure: the original exception where Ray wraps one."""
    cause = getattr(error, "cause", None)
    if isinstance(cause, BaseException):
        error = cause
    text = (str(error).strip().splitlines() or [""])[0]
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
