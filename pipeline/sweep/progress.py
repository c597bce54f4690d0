"""Progress on stderr while a sweep runs: shards and deals done, deals per second, time left,
failures, and a stop rule's target; a bar refreshed in place on a terminal, a line now and
then elsewhere. How the sweep is played (threads, pieces, Ray) goes to the run's log file
(`log`), and to stderr as well with --verbose.

The bar is click's own (`click.progressbar`): click is already the command line's library,
and its bar draws in place and hides itself where the stream is not a terminal. Its figures
(rate, time left) are this module's: a resumed run starts part-way, and click's estimate
would count the shards found done as played at once.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import click

PROGRESS_INTERVAL = 1.0  # seconds between progress refreshes on a terminal
PROGRESS_INTERVAL_LOG = 10.0  # ... and between progress lines when stderr is a file


class Progress:
    """Progress on stderr: refreshed in place on a terminal, occasional lines in a log."""

    def __init__(
        self, stream, total_shards: int, total_deals: int, done_shards: int, done_deals: int
    ):
        self.stream = stream
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self.interval = PROGRESS_INTERVAL if self.tty else PROGRESS_INTERVAL_LOG
        self.total_shards, self.total_deals = total_shards, total_deals
        self.done_shards, self.done_deals = done_shards, done_deals
        self.start_deals = done_deals
        self.failures = 0
        self.target = None  # a stop rule's status (a callable), shown after the rest
        self.still_needed = None  # ... and the deals it still needs (a callable; None: unknown)
        self.started = time.monotonic()
        self.last_shown = self.started
        self.line_open = False
        self.verbose = False  # the log's lines on stderr too
        self.log_file = None  # an open text file the log's lines go to (`open_log`)
        self.unlogged: list[str] = []  # lines said before the log was opened
        self.bar = None  # click's bar, drawn on a terminal from the first tick
        self.drawn_deals = 0  # deals the bar has been moved by

    def rate(self) -> float:
        elapsed = time.monotonic() - self.started
        return (self.done_deals - self.start_deals) / elapsed if elapsed > 0 else 0.0

    def status(self) -> str:
        rate = self.rate()
        left = self.total_deals - self.done_deals
        needed = self.still_needed() if self.still_needed is not None else None
        if needed is not None:  # a stop rule that holds sooner ends the run sooner
            left = min(left, needed)
        eta = format_seconds(left / rate) if rate > 0 else "?"
        line = (
            f"shards {self.done_shards}/{self.total_shards}, "
            f"deals {self.done_deals:,}/{self.total_deals:,}, {format_rate(rate)} deals/s, "
            f"ETA {eta}, failures {self.failures}"
        )
        return line if self.target is None else f"{line}; {self.target()}"

    def details(self) -> str:
        """What the bar shows beside it: today's progress line, its shards' count left out
        (the bar and its percentage say how far the run is)."""
        return self.status().split(", ", 1)[1]

    def tick(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last_shown < self.interval:
            return
        self.last_shown = now
        if self.tty:
            self.draw()
        else:
            self.stream.write(f"clocksweep: {self.status()}\n")
        self.stream.flush()

    def draw(self) -> None:
        if self.bar is None:
            self.bar = click.progressbar(
                length=max(self.total_deals, 1),
                file=self.stream,
                show_eta=False,
                show_percent=True,
                item_show_func=lambda _: self.details(),
                bar_template="clocksweep: [%(bar)s]  %(info)s",
                width=24,
            )
        moved, self.drawn_deals = self.done_deals - self.drawn_deals, self.done_deals
        self.bar.update(moved)  # draws it, if it moved on
        if moved <= 0:  # still, or back by a shard redone (drawn only if the line changed)
            self.bar.render_progress()
        self.line_open = True

    def say(self, message: str) -> None:
        """A message of its own (an error as it happens), on its own line."""
        if self.line_open:
            self.stream.write("\r\x1b[K")
            self.line_open = False
        self.stream.write(f"clocksweep: {message}\n")
        self.stream.flush()
        self.write_log(message)

    def log(self, message: str) -> None:
        """How the sweep is played, not what it gives: to the log file (and, verbose, here)."""
        if self.verbose:
            self.say(message)
        else:
            self.write_log(message)

    def write_log(self, message: str) -> None:
        if self.log_file is None:
            self.unlogged.append(stamped(message))
            return
        try:
            self.log_file.write(stamped(message))
            self.log_file.flush()
        except OSError:  # a full disk: the log is a record, not the run's work
            self.close_log()

    def open_log(self, path: str, heading: str) -> None:
        """Append the log's lines to the file at ``path``, after a line that says which run
        they are of."""
        try:
            self.log_file = open(path, "a", encoding="utf-8")
        except OSError:  # a full disk, say: the run goes on, unlogged
            return
        lines, self.unlogged = self.unlogged, []
        self.log_file.write(stamped(heading) + "".join(lines))
        self.log_file.flush()

    def close_log(self) -> None:
        if self.log_file is not None:
            self.log_file.close()
            self.log_file = None

    def close(self) -> None:
        if self.line_open and self.bar is not None:
            self.bar.render_finish()  # the bar's line ended, the cursor shown again
        elif self.line_open:
            self.stream.write("\n")
        self.line_open = False
        self.stream.flush()


def stamped(message: str) -> str:
    """A line of the log: the time (UTC, to the millisecond), then the message."""
    return f"{datetime.now(UTC).isoformat(timespec='milliseconds')} {message}\n"


def format_rate(rate: float) -> str:
    if rate >= 1e6:
        return f"{rate / 1e6:.2f}M"
    if rate >= 1e3:
        return f"{rate / 1e3:.1f}k"
    return f"{rate:.0f}"


def format_seconds(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
