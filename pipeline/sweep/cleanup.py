"""The clean-up of a results directory: before a run plays (what could not be kept, files of
earlier runs no committed shard lists), at a stopping point (shards committed past it), and
at the run's end (files of attempts that did not end in a commit)."""

from __future__ import annotations

from pipeline.store import layout, validate
from pipeline.store.layout import MANIFEST_FILE, RUN_FILE
from pipeline.store.location import Location
from pipeline.store.plan import ShardPlan
from pipeline.sweep.outcome import Outcome
from pipeline.sweep.progress import Progress
from pipeline.sweep.state import Part, State, old_groups


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


def after_play(shards: ShardPlan, parts: list[Part], progress: Progress, outcome: Outcome) -> None:
    """The end of play, however it ended: shards past the stopping point removed, what is
    left to commit committed (interrupted: what cannot be, said), and a report made while
    the run played removed (it tells of fewer shards than the run leaves)."""
    if parts[-1].manifest.stop_at is not None:
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
