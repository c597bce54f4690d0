"""How a run stops on SIGTERM and SIGINT (a scheduler, a user's Ctrl-C).

The first raises KeyboardInterrupt in the main thread, so that every cleanup runs (commits
flushed, tasks cancelled, the lock released, Ray stopped); later ones are ignored while it
does, so that a second Ctrl-C cuts no cleanup short. A process that must end whatever its
threads are doing (the `clocksweep` command) also sets a deadline on the first signal
(`end_by_deadline`): a cleanup stuck on a lock it can never have (a thread caught in an
import the signal cut short) ends the process anyway, within seconds.
Nothing is changed outside the main thread.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass

from pipeline import ERROR_PREFIX, cut

NAMES = (signal.SIGTERM, signal.SIGINT)

# How long a process stopped by a signal may take to end on its own before it is ended: a
# run's cleanup (cancelling tasks, the last commits, Ray's stop) takes a few seconds.
STOP_SECONDS = 20.0
STOP_SECONDS_ENV = "CLOCKSWEEP_STOP_SECONDS"


@dataclass
class SignalsSeen:
    number: int | None = None  # the first SIGTERM or SIGINT received, if any


# Code a KeyboardInterrupt must not be raised in: it would leave a lock of the process held,
# and every thread that later imports or logs waits on it for ever (importlib's module locks,
# logging's lock, as at a fork). A signal that finds the main thread there is delivered to
# it again a moment later.
IMPORT_MACHINERY = "<frozen importlib._bootstrap"  # and _bootstrap_external
LOGGING_MODULE = f"logging{os.sep}__init__.py"
REDELIVER_SECONDS = 0.05


# A fork runs the hooks registered for it (os.register_at_fork: filelock's, logging's) in the
# parent: an exception raised there is not the caller's but "ignored", its traceback printed.
FORKING = ("fork", "_execute_child")  # in a function's name: at or around a fork


def in_unsafe_code(frame) -> bool:
    """Whether ``frame``, or a frame it was called from, runs importlib's or logging's code,
    or a fork's (its hooks, or subprocess starting a child)."""
    while frame is not None:
        code = frame.f_code
        name = code.co_filename
        if name.startswith(IMPORT_MACHINERY) or name.endswith(LOGGING_MODULE):
            return True
        if any(word in code.co_name for word in FORKING):
            return True
        frame = frame.f_back
    return False


class _Handler:
    """The handler `stopped_by_signals` sets, shared by every nesting of it in a process:
    ``seen`` is the first signal of the outermost run; with ``deadline`` set
    (`end_by_deadline`), that signal also sets the process's deadline."""

    def __init__(self):
        self.deadline = False
        self.depth = 0
        self.reset()

    def reset(self) -> None:
        self.seen = SignalsSeen()
        self.raised = False  # its KeyboardInterrupt
        self.redelivering = False

    def __call__(self, number: int, frame) -> None:
        if self.raised:
            return  # the run is stopping already
        self.note(number)
        if in_unsafe_code(frame):
            self.redeliver()
            return
        self.raised = True
        raise KeyboardInterrupt(signal.Signals(self.seen.number).name)

    def redeliver(self) -> None:
        """The first signal, to the main thread again in a moment."""
        if self.redelivering:
            return
        self.redelivering = True

        def again(number: int) -> None:
            self.redelivering = False
            signal.pthread_kill(threading.main_thread().ident, number)

        timer = threading.Timer(REDELIVER_SECONDS, again, (self.seen.number,))
        timer.daemon = True
        timer.start()

    def note(self, number: int) -> None:
        """A signal that stops the run, received here or by a handler set in our place."""
        if self.seen.number is None:
            self.seen.number = number
            if self.deadline:
                seconds = stop_seconds()
                end_process_after(
                    seconds,
                    f"interrupted by {signal.Signals(number).name}, and ended: its cleanup did "
                    f"not finish within {seconds:g} s; the committed shards are kept: rerun "
                    "the same command to resume",
                    128 + number,
                )
        if threading.current_thread() is threading.main_thread():
            for name in NAMES:  # ours again, where another's was set in its place
                signal.signal(name, self)


HANDLER = _Handler()


@contextmanager
def stopped_by_signals():
    """Within the block, SIGTERM and SIGINT stop the run: gives the `SignalsSeen` that
    records the first. May be entered again within itself (Ray's start sets its own
    SIGTERM handler, so a run sets ours again once Ray is up); the outermost entry starts
    with no signal seen, and each exit sets back the handlers it found."""
    if threading.current_thread() is not threading.main_thread():
        yield HANDLER.seen
        return
    if HANDLER.depth == 0 and (HANDLER.raised or HANDLER.seen.number is None):
        HANDLER.reset()  # a new run in this process (not one whose signal is on its way)
    before = {number: signal.signal(number, HANDLER) for number in NAMES}
    HANDLER.depth += 1
    try:
        yield HANDLER.seen
    finally:
        HANDLER.depth -= 1
        for number, handler in before.items():
            signal.signal(number, handler)


def raise_if_stopped() -> None:
    """Raise the KeyboardInterrupt of a signal already seen, where a run goes on: the
    handler's own can be lost, raised where Python reports an exception and goes on (a
    callback at a fork, a finalizer)."""
    if HANDLER.seen.number is not None:
        raise KeyboardInterrupt(signal.Signals(HANDLER.seen.number).name)


def stop_seconds() -> float:
    """STOP_SECONDS, or CLOCKSWEEP_STOP_SECONDS where it is a positive number."""
    try:
        seconds = float(os.environ.get(STOP_SECONDS_ENV, STOP_SECONDS))
    except ValueError:
        return STOP_SECONDS
    return seconds if 0 < seconds < float("inf") else STOP_SECONDS


def end_process_after(seconds: float, message: str, status: int, before=None) -> threading.Timer:
    """Unless cancelled, end this process ``seconds`` from now, whatever its threads are
    doing: ``before()`` if given, the one-line error ``message``, then exit ``status``. (A
    local Ray instance it started is ended by its watchdog, which sees it go.)"""

    def end() -> None:
        if before is not None:
            before()
        sys.stderr.write(f"{ERROR_PREFIX}{cut(message)}\n")
        sys.stderr.flush()
        os._exit(status)

    timer = threading.Timer(seconds, end)
    timer.daemon = True
    timer.start()
    return timer


# Threads left in a call nothing can cut short (a write to a store that stopped answering),
# named by what they were doing: the command's process ends without waiting for them.
THREADS_LEFT: list[str] = []


def leave_threads(what: str) -> None:
    """Note threads left running in ``what``. The `clocksweep` command then ends without the
    interpreter's own end (`end_if_threads_left`), which would wait on them: pyarrow's S3
    finalizer waits for the calls it has in flight, for as long as the store is silent."""
    THREADS_LEFT.append(what)


def leave_strategy_threads() -> None:
    """Note the threads of strategies that did not return in this process (`bounded.LEFT`),
    if any: nothing stops them but the process's end."""
    from pipeline.engine import bounded

    if bounded.LEFT:
        leave_threads(f"{len(bounded.LEFT)} thread(s) of a strategy that did not return")


def end_if_threads_left(code: int | str | None) -> None:
    """Exit at once with ``code`` (as `sys.exit` takes it) if threads were left running;
    whatever was to be said has been."""
    if not THREADS_LEFT:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code if isinstance(code, int) else (0 if code is None else 1))


def end_by_deadline() -> None:
    """For the rest of this process (the `clocksweep` command's), its first SIGTERM or
    SIGINT is handled as `stopped_by_signals` handles it, and sets a deadline: unless the
    process has ended `stop_seconds()` later, it exits with status 128 + the signal's
    number, in one line (a local Ray instance it started is ended by its watchdog, which
    sees it go)."""
    HANDLER.deadline = True
    if threading.current_thread() is threading.main_thread():
        for number in NAMES:
            signal.signal(number, HANDLER)
