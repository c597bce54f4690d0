"""Progress on stderr while a sweep runs: shards and deals done, deals per second, time left,
failures; refreshed in place on a terminal, a line now and then in a log."""

from __future__ import annotations

import time

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
