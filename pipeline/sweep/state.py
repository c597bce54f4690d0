"""What a run finds in its results directory, read with the lock held and before it changes
anything there: the run record and manifest already there, the cell groups, each group's
committed shards that still verify, and what else lies in its directories."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass

import pyarrow as pa

from pipeline.store import groups, layout, records, validate
from pipeline.store.entries import RunRecord
from pipeline.store.files import expected_schemas
from pipeline.store.layout import MANIFEST_FILE, RUN_FILE, START_OVER
from pipeline.store.location import Location
from pipeline.store.manifest import Manifest
from pipeline.store.plan import ShardPlan, plan_shards
from pipeline.sweep.cluster import deadline
from pipeline.sweep.config import SweepConfig
from pipeline.sweep.stopping import Stopping


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
            notes = lost_record(previous, listed, fresh)
            parts, grown = read_parts(
                location, config, fresh, shards, cell_groups, listed, stopping, notes
            )
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
            f"({location.scrubbed((str(error).strip().splitlines() or [''])[0])})"
        ) from None
    for part in parts:
        if part.found.blocking:
            path, what = part.found.blocking[0]
            raise layout.ResultsError(
                f"output: {config.output}: {part.group.path(path)} is {what} where clocksweep "
                "keeps its own files; move it away"
            )
    return State(previous, parts, notes, grown, stopping)


def read_parts(
    location: Location,
    config: SweepConfig,
    fresh: bool,
    shards: ShardPlan,
    cell_groups: list[groups.CellGroup],
    listed: dict | None,
    stopping: Stopping | None,
    notes: list,
) -> tuple[list[Part], set[tuple[int, int]]]:
    """Each cell group's part, its manifest loaded (the first group's is ``listed``; the
    last group's tells ``stopping`` of its prefix); what was not kept added to ``notes``.
    Gives the parts and (shard, group) of the notes that are the sweep's growth."""
    parts, grown = [], set()
    n_cells = len(groups.sweep_cells(cell_groups))
    for group in cell_groups:
        place = group.location(location)
        if group.index:
            listed = None if fresh else readable_manifest(place, config, fresh)
        part = Part(group, place, None)
        rule = stopping if group is cell_groups[-1] else None
        for index, problem in load_part(part, listed, config, fresh, shards, rule, n_cells):
            notes.append((index, f"{group.path('')}{problem}", group.index))
            if isinstance(problem, records.Growth):
                grown.add((index, group.index))
        parts.append(part)
    return parts, grown


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
            f"in {config.output}; raise deals to grow the sweep, or use {START_OVER} to start over"
        )


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
            advice = f"; use {START_OVER} to start over there" if ours else ""
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
                    f"{listed['config_hash'][:12]}) and its {RUN_FILE} is missing; use {START_OVER} "
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
