"""What a stop rule reads of a sweep's committed shards: their contiguous prefix, in order.

A stop rule decides on the shards 0 .. k committed without a gap (each one's tally of wins and
pairs), never on what was committed past a gap, so that its stopping point is the same
whatever order the shards were played in. The driver's `manifest.Manifest` keeps one
`RulePrefix` and extends it as shards are committed; it seals a page of the manifest only
once the prefix has passed it.
"""

from __future__ import annotations

from pipeline.store.entries import ShardEntry


class RulePrefix:
    """The contiguous prefix of committed shards (0 .. ``end`` - 1) that a stop rule reads:
    each shard told in order to ``on_shard(entry)``, which answers whether the run stops
    at it (then ``stop_at``, and the prefix is not extended past it). ``tally_shape``: the
    (cells, pairs) every entry's tally must have for the rule to read it."""

    def __init__(self):
        self.end = 0
        self.on_shard = None
        self.stop_at: int | None = None
        self.tally_shape: tuple[int, int] | None = None

    def extend(self, committed) -> None:
        """Extend the prefix over the shards ``committed(index)`` gives (None: not committed),
        telling `on_shard` of each in order; stop extending it where the rule stops."""
        while self.stop_at is None:
            entry = committed(self.end)
            if entry is None:
                return
            self.end += 1
            if self.on_shard is not None and self.on_shard(entry):
                self.stop_at = entry.index

    def tally_problem(self, entry: ShardEntry, stem: str) -> str | None:
        """Why the rule cannot read ``entry``'s tally, or None."""
        if self.tally_shape is not None and (
            entry.tally is None
            or (len(entry.tally["wins"]), len(entry.tally["pairs"])) != self.tally_shape
        ):
            return f"{stem}: no tally of the stop rule's cells and comparisons"
        return None
