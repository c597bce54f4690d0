"""How a run takes its output for itself (`take_output`): a local directory's lock, or on S3
a lease (`store.lease`), before anything there is read.

An S3 lease another run holds is refused at once when that run is a process running on this
host; taken over at once when it was a process of this host that has ended (its driver
killed, the command run again); and otherwise waited out (`LeaseWait`): the holder may be a
driver killed on another host, whose lease lapses once it goes unrenewed for its time. The
wait shows a countdown in the user's terms and is bounded by ``[run] lease_wait`` (default:
the lease's time); a holder that keeps renewing is refused in one line as soon as its lease
cannot lapse within that bound. Each look at the store has the connect deadline of its own;
the wait between looks has none, and Ctrl-C (or SIGTERM) ends it cleanly, nothing written.
"""

from __future__ import annotations

import signal
import time
from contextlib import nullcontext

from pipeline.store.layout import ResultsError
from pipeline.store.lease import LeaseHeld, lease_seconds
from pipeline.store.location import Location
from pipeline.sweep.cluster import connect_seconds, deadline
from pipeline.sweep.config import SweepConfig
from pipeline.sweep.outcome import Interrupted
from pipeline.sweep.signals import HANDLER as SIGNALS
from pipeline.sweep.signals import end_process_after, stopped_by_signals

LOOK_SECONDS = 1.0  # between looks at the store while a lease is waited out
LINE_SECONDS = 5.0  # between countdown lines where the stream is not a terminal
# The store's clock counts whole seconds (its Date and the lease's LastModified), so a
# lease's age read twice may be a second off each way: the bound is judged with this slack.
CLOCK_SLACK = 2.0


def take_output(location: Location, config: SweepConfig, stream):
    """The results directory's lock (an object store's lease), taken before anything is read:
    what is read stays true while it is held. ResultsError if another run holds it (on S3,
    once it is known not to lapse within ``[run] lease_wait``); `Interrupted` if a signal
    ends the wait."""
    lock = LeaseWait(location, config, stream).take()
    if location.may_stall and SIGNALS.deadline:  # the command's own process
        # The main thread stops as soon as it sees the lease lost (`Lease.check`); should a
        # call to a store that stopped answering keep it waiting, the process ends anyway.
        lock.on_lost = lambda message: end_process_after(connect_seconds(), message, 1)
    return lock


def keeps_waiting(held: LeaseHeld, waited: float, bound: float) -> bool:
    """Whether a run that has waited ``waited`` s of ``bound`` waits on for ``held``'s lease:
    not for a holder running on this host, nor past the bound, nor for a lease that cannot
    lapse within it (its holder renewed it)."""
    if held.running_here or bound <= 0:
        return False
    left = bound + CLOCK_SLACK - waited
    return left > 0 and held.lapses_in <= left


class LeaseWait:
    """Taking the output, a look at the store at a time (`attempt`); while another run's
    lease may lapse within the bound, a countdown (`show`) between looks."""

    def __init__(self, location: Location, config: SweepConfig, stream):
        self.location, self.output, self.stream = location, config.output, stream
        self.bound = config.lease_wait  # None: the lease's own time
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self.began: float | None = None  # time.monotonic() of the first refusal
        self.shown = float("-inf")  # ... and of the last countdown line
        self.line_open = False
        self.waited_for: LeaseHeld | None = None

    def take(self):
        with stopped_by_signals():
            try:
                while True:
                    try:
                        lock = self.attempt()
                    except LeaseHeld as held:
                        self.held(held)
                    else:
                        self.taken()
                        return lock
            except KeyboardInterrupt:
                raise self.interrupted() from None
            finally:
                self.end_line()

    def attempt(self):
        """One try at the lock, within the connect deadline where the store may stall."""
        location = self.location
        with (
            nullcontext()
            if not location.may_stall
            else deadline(f"output: {self.output} did not answer within {{seconds}} s", status=1)
        ):
            return location.lock(answer_within=connect_seconds())

    def held(self, held: LeaseHeld) -> None:
        """Another run holds the lease: refuse, or show the countdown and look again."""
        now = time.monotonic()
        if self.began is None:
            self.began = now
        waited = now - self.began
        bound = lease_seconds() if self.bound is None else self.bound
        if not keeps_waiting(held, waited, bound):
            raise ResultsError(held.refusal(self.why_refused(held, waited, bound))) from None
        self.waited_for = held
        self.show(held.countdown(held.lapses_in), now)
        time.sleep(LOOK_SECONDS)

    def why_refused(self, held: LeaseHeld, waited: float, bound: float) -> str:
        """What came of the wait, for the refusal (nothing where none was allowed)."""
        if held.running_here or bound <= 0:
            return ""
        if self.waited_for is None:
            return (
                f"it lapses in {held.lapses_in:.0f} s at the earliest, beyond run.lease_wait "
                f"({bound:g} s)"
            )
        return f"still renewed after this run waited {waited:.0f} s (run.lease_wait: {bound:g} s)"

    def show(self, line: str, now: float) -> None:
        """The countdown: in place on a terminal, else a line every few seconds."""
        if self.tty:
            self.stream.write(f"\r\x1b[Kclocksweep: {line}")
            self.line_open = True
        elif now - self.shown >= LINE_SECONDS:
            self.stream.write(f"clocksweep: {line}\n")
            self.shown = now
        self.stream.flush()

    def taken(self) -> None:
        held = self.waited_for
        if held is not None:
            self.end_line()
            self.stream.write(
                f"clocksweep: output {self.output}: the lease of the run on {held.host} (pid "
                f"{held.pid}) lapsed; this run takes the output over\n"
            )
            self.stream.flush()

    def end_line(self) -> None:
        if self.line_open:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.line_open = False

    def interrupted(self) -> Interrupted:
        """A signal during the wait (or a look): nothing was written; what was taken, let go."""
        if self.location.hold is not None:  # taken just as the signal came
            self.location.hold.release(refused=True)
        number = SIGNALS.seen.number or signal.SIGINT
        return Interrupted(
            f"interrupted by {signal.Signals(number).name} while waiting for output "
            f"{self.output} to be free; nothing was written",
            number,
        )
