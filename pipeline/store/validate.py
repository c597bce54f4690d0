"""A results directory read as `validate` and the report read it, and `validate` itself: the
run record, the manifest's entries against the plan, every committed file, and what else lies
there (`survey`: what is ours to clean up, and what is not)."""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field, replace

from pipeline.store.entries import RunRecord, ShardEntry
from pipeline.store.files import expected_schemas
from pipeline.store.groups import recorded_groups
from pipeline.store.layout import (
    DEALS_TABLE,
    LOG_FILE,
    MANIFEST_FILE,
    PAGES_DIR,
    RUN_FILE,
    SHARDS_DIR,
    ResultsError,
    StoreError,
)
from pipeline.store.location import Location
from pipeline.store.plan import ShardPlan, plan_shards
from pipeline.store.records import (
    Pending,
    checked_entries,
    entry_shape_problem,
    listed_entries,
    read_manifest,
    read_run,
    run_record_mismatch,
    shard_problem,
    version_problem,
)


@dataclass
class Survey:
    """What `survey` found under a results directory besides the committed files (paths
    relative to it): files of ours to remove, and things of others to name and leave."""

    uncommitted: list[str]  # shard files and pages of our naming that the manifest does not list
    partial: list[str]  # files under PARTIAL_DIR: unfinished or uncommitted attempts
    stale: list[str]  # temporary files of run.json, the manifest or its pages
    foreign: list[tuple[str, str]]  # (path, what it is): not ours, left alone
    blocking: list[tuple[str, str]]  # (path, what it is): where a file of ours must go
    groups: int = 0  # the sweep's cell groups (see `survey`)

    @property
    def removable(self) -> list[str]:
        return self.uncommitted + self.partial + self.stale


def survey(
    location: Location, committed: Container[str], partial_only: bool = False, groups: int = 0
) -> Survey:
    """Everything in the results directory that is not in ``committed`` (`Location.survey`:
    never following a symbolic link, so that nothing outside the results directory, and no
    committed file under another name, is ever counted as ours). ``partial_only``: what
    lies under PARTIAL_DIR alone (what a run's end removes, without listing every committed
    file). ``groups``: the sweep's cell groups, whose directories
    (`layout.group_directory`, surveyed on their own) are not counted here."""
    found = Survey([], [], [], [], [])
    found.groups = groups
    location.survey(found, committed, partial_only)
    return found


def leftovers_only(location: Location) -> bool:
    """Whether all a directory holds is files of clocksweep's naming where it puts them
    (shard files, pages, temporary files, the runs' log; no run.json, manifest or report):
    what a run leaves whose records its store lost, and a rerun may take up (it removes them)."""
    found = survey(location, set())
    names = set(location.entries()) - set(found.stale)
    return names <= {SHARDS_DIR, PAGES_DIR, LOG_FILE} and not found.foreign and not found.blocking


@dataclass
class Results:
    """A results directory as read for `validate` and the report: its run record, its plan,
    the manifest entries that describe planned shards (files not yet opened), what is wrong
    with the rest (by shard index, or None), and what is wrong with the run record or the
    manifest as a whole (then no entry is read)."""

    location: Location
    run: RunRecord
    plan: ShardPlan
    entries: dict[int, ShardEntry]
    problems: list[tuple[int | None, str]]
    unusable: str | None = None
    manifest_missing: bool = False
    listed_paths: frozenset[str] = frozenset()  # every file path the manifest lists
    cell_groups: list = field(default_factory=list)  # `store.groups`: one, unless grown

    @property
    def hashes(self) -> tuple[str, ...]:
        """The config hash each cell group's files carry, by group (`layout.group_of`)."""
        return tuple(group.config_hash for group in self.cell_groups) or (self.run.config_hash,)


def stopped_deals(run: RunRecord) -> int:
    """The deals a run's results hold: its config's, or as many as its stop rule kept (the
    shards up to the one it stopped at)."""
    settings = run.settings
    at = (run.stop or {}).get("stopped_at_shard")
    if not isinstance(at, int) or isinstance(at, bool) or at < 0:
        return settings.deals
    return min(settings.deals, (at + 1) * settings.shard_size)


def first_look(where: str) -> Location:
    """``where``, its store asked once whether it is there (a caller can bound that wait: an
    object store's client retries for minutes where nothing answers); StoreError if the
    store cannot be reached."""
    location = Location(where)
    try:
        location.exists()
    except OSError as error:
        raise unreachable(location, error) from None
    return location


def unreachable(location: Location, error: OSError) -> StoreError:
    return StoreError(f"{location.where}: cannot be read ({location.scrubbed(_first_line(error))})")


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def open_results(where: str | Location) -> Results:
    """A results directory's run record and manifest, checked; ResultsError if it is not a
    results directory whose record can be read (an unreadable manifest is a problem of it),
    StoreError if its store cannot be reached."""
    location = where if isinstance(where, Location) else Location(where)
    try:
        return _open_results(location)
    except OSError as error:
        raise unreachable(location, error) from None


def _open_results(location: Location) -> Results:
    if not location.exists():
        raise ResultsError(f"{location.where}: no such directory")
    if not location.is_directory():
        raise ResultsError(
            f"{location.where}: a file, not a results directory (a directory with {RUN_FILE})"
        )
    run = read_run(location)
    if run is None:
        raise no_run_record(location)
    plan = plan_shards(run.settings.first, stopped_deals(run), run.settings.shard_size)
    unusable = version_problem(run) or run_record_mismatch(run)
    try:
        manifest = read_manifest(location)
    except ResultsError as error:
        return Results(
            location, run, plan, {}, [], unusable or str(error).removeprefix(f"{location.where}: ")
        )
    if manifest is None:
        return Results(location, run, plan, {}, [], unusable, manifest_missing=True)
    if manifest["config_hash"] != run.config_hash:
        return Results(
            location,
            run,
            plan,
            {},
            [],
            unusable
            or (
                f"{MANIFEST_FILE}: belongs to another config (hash {manifest['config_hash'][:12]}, "
                f"{RUN_FILE} has {run.config_hash[:12]})"
            ),
        )
    try:
        cell_groups = recorded_groups(run)
    except ResultsError as error:
        return Results(location, run, plan, {}, [], unusable or str(error))
    mode = run.mode
    schemas = expected_schemas(mode) if mode in ("deals", "summary") else {}
    entries, problems, listed, _ = group_entries(location, manifest, plan, cell_groups[0], schemas)
    for group in cell_groups[1:]:
        listed |= add_group(location, group, plan, schemas, entries, problems)
    return Results(
        location,
        run,
        plan,
        entries,
        problems,
        unusable,
        listed_paths=frozenset(listed),
        cell_groups=cell_groups,
    )


def add_group(location: Location, group, plan: ShardPlan, schemas, entries, problems) -> set:
    """Read a later cell group's manifest into ``entries`` (the shards every group before it
    has committed: those it lacks are taken out, the rest given its files) and its problems
    into ``problems``; gives the paths it lists (relative to the results directory)."""
    place = group.location(location)
    try:
        theirs = read_manifest(place)
    except ResultsError as error:
        theirs, why = None, str(error).removeprefix(f"{place.where}: ")
    else:
        why = Pending(f"{MANIFEST_FILE}: missing (none of its shards committed)")
    if theirs is not None and theirs["config_hash"] != group.config_hash:
        theirs, why = None, f"{MANIFEST_FILE}: belongs to another cell group or config"
    if theirs is None:
        problems.append((None, type(why)(group.path(why))))
        found, group_problems, listed, unread = {}, [], frozenset(), []
    else:
        found, group_problems, listed, unread = group_entries(place, theirs, plan, group, schemas)
    # Each problem keeps its kind (`records.Growth`, `Pending`: nothing wrong) in the results'.
    problems += [(index, type(problem)(group.path(problem))) for index, problem in group_problems]
    # A shard its problems name already (one by one, or by a page) is not named again.
    named = {index for index, _ in group_problems}
    for index in sorted(entries):
        mine = found.get(index)
        if mine is None:
            if theirs is not None and index not in named and not any(index in r for r in unread):
                problems.append(
                    (
                        index,
                        Pending(f"{group.directory}: shard {index} of its cells is not committed"),
                    )
                )
            del entries[index]
            continue
        entries[index] = merged(entries[index], mine, group)
    return {group.path(path) for path in listed}


def no_run_record(location: Location) -> ResultsError:
    """Why a directory with no run.json cannot be read as results, and what to do."""
    holder = location.held_by()
    if holder is not None:
        return ResultsError(
            f"{location.where}: a clocksweep run (pid {holder}) is starting "
            f"there and has not written {RUN_FILE} yet; try again shortly"
        )
    if location.kind(MANIFEST_FILE) == "file":  # a store that lost what a run wrote
        return ResultsError(
            f"{location.where}: {MANIFEST_FILE} is there but not {RUN_FILE}, which was "
            "lost; rerun the sweep's command (clocksweep run CONFIG) into it: it checks "
            "what the manifest lists and redoes what is missing"
        )
    return ResultsError(f"{location.where}: not a clocksweep results directory (no {RUN_FILE})")


def group_entries(location: Location, manifest: dict, plan: ShardPlan, group, schemas):
    """A cell group's manifest entries checked against the plan, (index or None, problem) of
    the rest, every path its manifest lists (relative to the group's directory), and the
    shards of its pages that could not be read (ranges)."""
    shards, pages, page_problems, unread = listed_entries(location, manifest, plan)
    entries, problems = checked_entries(shards, plan, len(group.cells), schemas)
    listed = set(
        [
            record["path"]
            for entry in shards
            if not entry_shape_problem(entry)
            for record in entry["files"]
        ]
        + pages
    )  # raw JSON
    return entries, page_problems + problems, listed, unread


def merged(entry: ShardEntry, more: ShardEntry, group) -> ShardEntry:
    """A shard's entry with a later cell group's files (paths relative to the results
    directory) and cells; the later group's tally counts every cell up to it."""
    return replace(
        entry,
        cells=entry.cells + more.cells,
        rows=entry.rows + more.rows,
        files=entry.files
        + tuple(replace(record, path=group.path(record.path)) for record in more.files),
        tally=more.tally,
    )


def survey_groups(results: Results) -> Survey:
    """`survey` of the results directory and of each cell group's, paths relative to the
    results directory."""
    location, cell_groups = results.location, results.cell_groups
    found = survey(location, set(results.listed_paths), groups=len(cell_groups))
    for group in cell_groups[1:]:
        place = group.location(location)
        if not place.exists():
            continue
        prefix = group.path("")
        theirs = survey(
            place, {p.removeprefix(prefix) for p in results.listed_paths if p.startswith(prefix)}
        )
        found.uncommitted += [group.path(path) for path in theirs.uncommitted]
        found.partial += [group.path(path) for path in theirs.partial]
        found.stale += [group.path(path) for path in theirs.stale]
        found.foreign += [(group.path(path), what) for path, what in theirs.foreign]
        found.blocking += [(group.path(path), what) for path, what in theirs.blocking]
    return found


def committed_files(where: str | Location, table: str = DEALS_TABLE) -> list[str]:
    """Paths (or URIs) of the committed files of ``table``, in deal order: exactly what
    readers should read (``pl.scan_parquet(committed_files("results/quick"))``). Files are
    not re-hashed here: `validate` checks them."""
    results = open_results(where)
    return [results.location.uri(path) for path in _committed(results, table)]


def committed_paths(where: str | Location, table: str = DEALS_TABLE) -> list[str]:
    """As `committed_files`, the paths relative to the results directory (for
    `Location.scan_parquet`)."""
    return _committed(open_results(where), table)


def _committed(results: Results, table: str) -> list[str]:
    return [
        record.path
        for index in sorted(results.entries)
        for record in results.entries[index].files_of(table)
    ]


def listed_shards(results: Results) -> set[int]:
    """The shards the manifest lists, well or not (those it names a problem of)."""
    return {index for index, _ in results.problems if index is not None} | set(results.entries)


def missing_problem(results: Results) -> str | None:
    """The line naming the shards of the plan that the manifest neither lists nor names a
    problem of (a page not read, a cell group that lacks them, a run that has not played
    them), or None if there are none."""
    plan = results.plan
    missing, shown = plan.missing(listed_shards(results))
    if not missing:
        return None
    more = f" and {missing - len(shown)} more" if missing > len(shown) else ""
    return (
        f"shards missing: {missing} of {plan.count}: "
        + ", ".join(f"{s.index} ({s.first}-{s.last})" for s in shown)
        + more
    )


def not_committed_yet(results: Results, writer: str | None) -> str | None:
    """The shards of the plan not committed yet, in a line, where a run (``writer``, what
    `Location.held_by` gives) is writing them now: its work in flight, not a problem of the
    directory. None where no run holds it, or it lacks none."""
    missing = results.plan.missing(listed_shards(results))[0]
    if not missing or writer is None:
        return None
    return f"{missing} of {results.plan.count} shards not committed yet"


def validate(where: str | Location) -> tuple[list[str], dict]:
    """Check every shard against the manifest: (problems found, figures of what is there).
    StoreError if a file vanishes or a read fails while it checks (a run rewriting the
    directory, a store that failed): what it found so far says nothing sure."""
    results = open_results(where)
    try:
        return _checked(results)
    except OSError as error:
        raise StoreError(
            f"{results.location.where}: the results changed or failed while validate read "
            f"them ({_first_line(error)}); validate again once no run is writing there"
        ) from None


def described(problems: list[str], figures: dict) -> str:
    """What `clocksweep validate` prints of what `validate` found: each problem and note in
    a line, then a line of the figures."""
    per_row = figures["bytes_per_row"]
    broken = f", {figures['broken']} with problems" if figures["broken"] else ""
    return "\n".join(
        [f"problem: {problem}" for problem in problems]
        + [f"note: {note}" for note in figures.get("notes", [])]
        + [
            f"{figures['committed']}/{figures['shards']} shards committed{broken}; verified: "
            f"{figures['deals']:,} deals x {figures['cells']} cells in {figures['files']} "
            f"files, {figures['bytes']:,} bytes"
            + (f" ({per_row:.2f} bytes per deal row)" if per_row else "")
            + (f"; {len(problems)} problem(s)" if problems else "; valid")
        ]
    )


def _checked(results: Results) -> tuple[list[str], dict]:
    location, run, plan = results.location, results.run, results.plan
    # A run writing there now: what it has not committed yet is its work in flight, not a
    # problem of the directory.
    writer = location.held_by()
    problems = [results.unusable] if results.unusable else []
    problems += [problem for _, problem in results.problems]
    if results.manifest_missing:
        problems.append(f"{MANIFEST_FILE}: missing (no shard committed)")
    n_cells = len(run.cells)
    listed = listed_shards(results)
    if version_problem(run):
        # Every file would differ from this version's schemas: the one line says it all.
        return problems, {
            "shards": plan.count,
            "committed": len(listed),
            "broken": len(listed),
            "deals": 0,
            "cells": n_cells,
            "files": 0,
            "rows": 0,
            "bytes": 0,
            "bytes_per_row": None,
        }
    good, broken, sizes = _verified_shards(results, problems)
    pending = not_committed_yet(results, writer)
    in_flight = [pending] if pending else []
    if pending is None and (missing := missing_problem(results)):
        problems.append(missing)
    notes = _what_else_lies_there(results, writer, in_flight, problems)
    rows, row_bytes, size, files = sizes
    figures = {
        "shards": plan.count,
        "committed": len(listed),
        "broken": len(broken - good),
        "deals": sum(results.entries[index].deals for index in good),
        "cells": n_cells,
        "files": files,
        "rows": rows,
        "bytes": size,
        "bytes_per_row": row_bytes / rows if rows else None,  # of the per-deal files
        "notes": notes,
    }
    return problems, figures


def _verified_shards(results: Results, problems: list[str]):
    """Every file of every entry checked (what is wrong added to ``problems``): the shards
    that verify, those that do not (their entries' problems' too), and (per-deal rows, their
    bytes, bytes, files) of those that do."""
    schemas = expected_schemas(results.run.mode)
    broken = {index for index, _ in results.problems if index is not None}
    good: set[int] = set()
    rows = size = row_bytes = files = 0
    for index in sorted(results.entries):
        entry = results.entries[index]
        problem = shard_problem(
            results.location, entry, results.plan[index], results.hashes, schemas
        )
        if problem:
            problems.append(problem)
            broken.add(index)
            continue
        good.add(index)
        for record in entry.files:
            if record.table == DEALS_TABLE:
                rows += record.rows
                row_bytes += record.bytes
            size += record.bytes
            files += 1
    return good, broken, (rows, row_bytes, size, files)


def _what_else_lies_there(
    results: Results, writer: str | None, in_flight: list[str], problems: list[str]
) -> list[str]:
    """What the directory holds besides the committed files, as problems (added to
    ``problems``) or notes (given): files left by a run, unless ``writer`` (a run's pid) is
    writing there now; things not clocksweep's, named."""
    found = survey_groups(results)
    if writer is not None:
        uncommitted = len(found.uncommitted) + len(found.partial) + len(found.stale)
        if uncommitted:
            in_flight.append(f"{uncommitted} file(s) it has not committed")
    else:
        for path in found.uncommitted:
            problems.append(
                f"{path}: not committed in the manifest (readers of the directory "
                "would see it; rerun to clean up)"
            )
        for path in found.partial + found.stale:
            problems.append(f"{path}: left by an interrupted run (rerun to clean up)")
    notes = []
    if writer is not None:
        notes.append(
            f"a clocksweep run (pid {writer}) is writing here; what is verified is what it "
            "has committed so far" + (f" ({'; '.join(in_flight)})" if in_flight else "")
        )
    for path, what in found.foreign + found.blocking:
        line = f"{path}: {what}, not written by clocksweep (runs leave it alone)"
        # Under shards/ a reader of a table's directory may meet it; at the top, no reader does.
        (problems if path.startswith(SHARDS_DIR + "/") or path == SHARDS_DIR else notes).append(
            line
        )
    return notes
