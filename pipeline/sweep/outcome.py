"""What a run did (`Outcome`), how it says so in its closing line, and how it ends when a
signal stops it (`Interrupted`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline import html_fields
from pipeline.sweep.config import SweepConfig
from pipeline.sweep.progress import format_rate, format_seconds


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

    def fields(self) -> list[tuple[str, object]]:
        """What a notebook shows of what the run did."""
        failed = ", ".join(map(str, self.failed[:10])) or "none"
        return [
            ("shards", f"{self.committed:,} of {self.shards:,} committed"),
            ("played", f"{self.played:,} shard(s), {self.played_deals:,} deals"),
            ("already committed", f"{self.skipped:,} shard(s)"),
            ("deals", f"{self.deals:,} x {self.cells} cells"),
            ("bytes", f"{self.bytes:,}"),
            ("seconds", format_seconds(self.seconds)),
            ("failed shards", failed),
        ]

    def __repr__(self) -> str:
        # The dataclass's own repr lists every shard this run committed, as (shard, group).
        return "Outcome\n" + "\n".join(f"  {name}: {value}" for name, value in self.fields())

    def _repr_html_(self) -> str:
        return html_fields("Outcome of the run", self.fields())


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGINT stopped the run (a scheduler or a user): raised by `run` once the
    run has let everything go, its message saying what was kept and how to resume."""

    def __init__(self, message: str, signal_number: int):
        super().__init__(message)
        self.signal_number = signal_number


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
