"""The manifest and run records read and checked in one place (what is wrong named in one
line): run.json against its own config, the manifest's shape, its pages, and its entries
against the plan and their files. The driver's `Manifest` is `store.manifest`'s."""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter

import pyarrow as pa

from pipeline.engine import rules
from pipeline.store.entries import PageRecord, RecordError, RunRecord, ShardEntry, is_count
from pipeline.store.files import file_problem
from pipeline.store.layout import (
    DEALS_TABLE,
    MANIFEST_FILE,
    RUN_FILE,
    START_OVER,
    ResultsError,
    article,
    group_of,
    page_path,
)
from pipeline.store.location import Location, os_error_text
from pipeline.store.plan import Shard, ShardPlan, plan_shards


def entry_shape_problem(entry) -> str | None:
    """What keeps one manifest entry from being read as one, or None."""
    try:
        ShardEntry.from_json(entry)
    except RecordError as error:
        return str(error)
    return None


class Growth(str):
    """Why a committed shard is not kept when nothing about it is wrong: it was its plan's
    short last shard, and the sweep has grown past it (played again, whole)."""


class Pending(str):
    """Why a shard of the plan is not read when nothing about it is wrong: a cell group
    added to the sweep has not committed it yet (a run has it to play)."""


def entry_problem(entry: ShardEntry, shard: Shard, n_cells: int, tables) -> str | None:
    """What is wrong with a well-formed manifest entry for ``shard`` of the plan: its range,
    deals, cells and rows as the plan makes them, and each of ``tables`` once, at the shard's
    own path (a file of another shard, or one listed twice, would be read as this one's)."""
    if entry.first == shard.first and entry.last < shard.last:
        return Growth(
            f"{shard.stem}: holds deals {entry.first}-{entry.last}, and the sweep now runs to "
            f"{shard.last}: a run plays it again, whole"
        )
    if (entry.first, entry.last) != (shard.first, shard.last):
        return (
            f"{shard.stem}: manifest range {entry.first}-{entry.last} is not the "
            f"plan's {shard.first}-{shard.last}"
        )
    if entry.deals != shard.count or entry.cells != n_cells:
        return (
            f"{shard.stem}: the manifest says {entry.deals} deals x {entry.cells} "
            f"cells, the plan {shard.count} x {n_cells}"
        )
    listed = [record.table for record in entry.files]
    for table in sorted(set(tables) | set(listed)):
        if table not in tables:
            return f"{shard.stem}: a file of table {table}, which this record mode does not write"
        if listed.count(table) == 0:
            return f"{shard.stem}: no file of table {table} in the manifest"
        if listed.count(table) > 1:
            return f"{shard.stem}: {listed.count(table)} files of table {table} in the manifest"
    for record in entry.files:
        if record.path != shard.path(record.table):
            return f"{shard.stem}: its {record.table} file is listed as {record.path}"
    rows = sum(record.rows for record in entry.files if record.table == DEALS_TABLE)
    if entry.rows != rows or (DEALS_TABLE in tables and rows != shard.count * n_cells):
        return (
            f"{shard.stem}: the manifest says {entry.rows} rows in {rows} of its files, "
            f"expected {shard.count * n_cells} ({shard.count} deals x {n_cells} cells)"
            if DEALS_TABLE in tables
            else f"{shard.stem}: the manifest says {entry.rows} per-deal rows, expected 0"
        )
    return None


def times(count: int) -> str:
    return "twice" if count == 2 else f"{count} times"


def checked_entries(
    listed: list, plan: ShardPlan, n_cells: int, tables
) -> tuple[dict[int, ShardEntry], list[tuple[int | None, str]]]:
    """The manifest entries that describe a shard of ``plan`` as it is planned, once each,
    by index; and (index or None, problem) for the rest. A shard listed twice is kept once if
    its entries are identical (and named either way). Its files are not opened here."""
    entries: dict[int, ShardEntry] = {}
    problems: list[tuple[int | None, str]] = []
    seen: dict[int, list[dict]] = {}
    for entry in listed:
        shape = entry_shape_problem(entry)
        index = entry.get("index") if isinstance(entry, dict) else None
        index = index if is_count(index) else None
        if shape:
            problems.append(
                (
                    index if index in plan else None,
                    f"{MANIFEST_FILE}: shard entry {index if index is not None else entry!r} "
                    f"is malformed ({shape})",
                )
            )
            continue
        if index not in plan:
            problems.append(
                (None, f"{MANIFEST_FILE}: shard {index} is not in the plan of {plan.count} shards")
            )
            continue
        seen.setdefault(index, []).append(entry)
    malformed = {index for index, _ in problems if index is not None}
    for index, copies in seen.items():
        shard = plan[index]
        if len(copies) > 1:
            same = all(copy == copies[0] for copy in copies)
            problems.append(
                (
                    index,
                    f"{shard.stem}: listed {times(len(copies))} in {MANIFEST_FILE}"
                    + (" (identically; read once)" if same else ", with different files"),
                )
            )
            if not same:
                continue
        if index in malformed:
            continue
        entry = ShardEntry.from_json(copies[0])
        problem = entry_problem(entry, shard, n_cells, tables)
        if problem:
            problems.append((index, problem))
        else:
            entries[index] = entry
    return entries, problems


def shard_problem(
    location: Location,
    entry: ShardEntry,
    shard: Shard,
    config_hash: str | tuple[str, ...],
    schemas: dict[str, pa.Schema],
) -> str | None:
    """The first problem of any file of a checked manifest entry (see `checked_entries`);
    ``config_hash``: the hash its files carry, or one per cell group (`layout.group_of`)."""
    for record in entry.files:
        expected = (
            config_hash if isinstance(config_hash, str) else config_hash[group_of(record.path)]
        )
        problem = file_problem(location, record, expected, schemas.get(record.table), shard)
        if problem:
            return problem
    return None


def version_problem(run: RunRecord) -> str | None:
    """Results written in another version of their record schema than this clocksweep reads."""
    from pipeline.records.identity import result_schema_version

    written, read = run.result_schema, result_schema_version(run.mode)
    if written == read:
        return None
    return (
        f"{RUN_FILE}: the results are in record schema {written}, this clocksweep reads "
        f"{read}; rerun the config with {START_OVER} to write them again"
    )


def run_record_mismatch(run: RunRecord) -> str | None:
    """Where a well-formed run record disagrees with itself: its config must give its
    config_hash, its cells, its shard plan and the deal scheme it names (an edited run.json
    would otherwise be read as the sweep it no longer describes)."""
    try:
        recorded = _recorded_identity(run)
    except (KeyError, TypeError, ValueError) as error:
        return f"{RUN_FILE}: its config is not a sweep's config ({type(error).__name__}: {error})"
    from pipeline.store.groups import recorded_groups

    try:
        cell_groups = recorded_groups(run)
    except ResultsError as error:
        return str(error)
    checks = _group_checks(run, recorded, cell_groups)
    if run.shards is not None:
        settings = run.settings
        planned = plan_shards(settings.first, settings.deals, settings.shard_size)
        checks.append(
            (
                "shards",
                [run.shards["count"], run.shards["size"]],
                [planned.count, settings.shard_size],
            )
        )
    for name, found, expected in checks:
        if found != expected:
            return (
                f"{RUN_FILE}: its {name} is not what its config gives "
                "(edited, or written by another clocksweep)"
            )
    return None


def _recorded_identity(run: RunRecord) -> dict:
    """The sweep identity a run record's config gives."""
    from pipeline.records import identity

    settings = run.settings
    grid = {axis: tuple(settings.grid[axis]) for axis in rules.AXES}
    cells = rules.expand(grid, identity.customs_of(run.config))
    return identity.sweep_identity(
        seed=settings.seed,
        first=settings.first,
        shard_size=settings.shard_size,
        record=settings.record,
        cells=cells,
    )


def _group_checks(run: RunRecord, recorded: dict, cell_groups) -> list[tuple[str, object, object]]:
    """(what, as recorded, as the config gives it) of the run record's cells and hashes. A
    grown sweep lists its cells group by group (`store.groups`): the grid's cells, in the
    order they were added, each group's hash its own."""
    from pipeline.records import identity

    grouped, hashes, grows = [], [], None
    for group in cell_groups:
        grouped += [identity.cell_record(cell) for cell in group.cells]
        hashes.append(identity.identity_hash(identity.group_identity(recorded, group.cells, grows)))
        grows = hashes[-1]
    in_grid_order = (
        sorted(grouped, key=recorded["cells"].index)
        if all(cell in recorded["cells"] for cell in grouped)
        else grouped
    )
    cells_listed = [
        {key: value for key, value in cell.items() if key != "label"} for cell in run.cells
    ]
    return [
        ("config_hash", run.config_hash, hashes[0]),
        ("cell_groups", [group.config_hash for group in cell_groups], hashes),
        ("deal_scheme", run.deal_scheme, recorded["deal_scheme"]),
        ("record", run.mode, run.settings.record),
        ("cells", cells_listed, grouped),
        ("cells", in_grid_order, recorded["cells"]),
    ]


def _read_record(location: Location, name: str, what: str):
    """The JSON in ``name`` (None if there is none); ResultsError if it is not a file of JSON."""
    kind = location.kind(name)
    if kind == "missing":
        return None
    if kind != "file":
        raise ResultsError(
            f"{location.where}: {name} is {article(kind)}, not {what}; it is "
            "not clocksweep's to remove: move it away"
        )
    try:
        return location.read_json(name)
    except (ValueError, UnicodeDecodeError):
        raise ResultsError(f"{location.where}: {name} is not valid JSON") from None
    except RecursionError:
        raise ResultsError(
            f"{location.where}: {name} is not a record of ours (nested too deeply)"
        ) from None
    except OSError as error:
        raise ResultsError(
            f"{location.where}: {name} cannot be read ({os_error_text(error)})"
        ) from None


def read_run(location: Location) -> RunRecord | None:
    """run.json, checked as a run record; None if there is none; ResultsError naming the
    problem if it is not one."""
    run = _read_record(location, RUN_FILE, "a run record")
    try:
        return None if run is None else RunRecord.from_json(run)
    except RecordError as error:
        raise ResultsError(
            f"{location.where}: {RUN_FILE} is not a clocksweep run record: {error}"
        ) from None


PAGE_ENV = "CLOCKSWEEP_MANIFEST_PAGE"  # shards per page of a new manifest (tests set it low)
DEFAULT_PAGE_SHARDS = 1000


def page_shards_setting() -> int:
    text = os.environ.get(PAGE_ENV)
    if text is None:
        return DEFAULT_PAGE_SHARDS
    if not (text.isdigit() and 1 <= int(text) <= 10**6):
        raise ResultsError(f"{PAGE_ENV}: {text!r}; expected a count of shards from 1 to 1000000")
    return int(text)


def read_manifest(location: Location) -> dict | None:
    """manifest.json, checked as a manifest (its entries one by one are `checked_entries`'
    affair, its pages `read_pages`'); None if there is none; ResultsError naming the problem
    if it is not one. A manifest of before pages gets none, and the default page size."""
    manifest = _read_record(location, MANIFEST_FILE, "a manifest")
    if manifest is None:
        return None
    if not (
        isinstance(manifest, dict)
        and isinstance(manifest.get("shards"), list)
        and isinstance(manifest.get("config_hash"), str)
    ):
        raise ResultsError(
            f"{location.where}: {MANIFEST_FILE} is not a clocksweep manifest "
            "(an object with a config_hash and a list of shards)"
        )
    manifest.setdefault("page_shards", DEFAULT_PAGE_SHARDS)
    pages = manifest.setdefault("pages", [])
    try:
        if not is_count(manifest["page_shards"], 1):
            raise RecordError(f"its page_shards is {manifest['page_shards']!r}, not a count")
        if not isinstance(pages, list):
            raise RecordError(f"its pages are {pages!r:.40}, not a list")
        pages = [PageRecord.from_json(page) for page in pages]
    except RecordError as error:
        raise ResultsError(
            f"{location.where}: {MANIFEST_FILE} is not a clocksweep manifest: {error}"
        ) from None
    manifest["pages"], manifest["page_conflicts"], manifest["page_notes"] = checked_pages(pages)
    return manifest


def checked_pages(listed: list[PageRecord]):
    """The manifest's page records in shard order, each once; those that share a shard with
    another record (none of them is read: which one holds the shard is not known), with why;
    and notes of what is listed wrongly but read all the same (a record listed again,
    identically; records out of order). The driver lists each page once, in order: any other
    list was edited or damaged, and a shard read from two records would count twice."""
    copies = Counter(listed)
    order = list(copies)  # each record once, in the order first listed
    notes = []
    if any(a.first > b.first for a, b in zip(order, order[1:])):
        notes.append(f"{MANIFEST_FILE}: its pages are not listed in shard order (read in order)")
    notes += [
        f"{MANIFEST_FILE}: page {page.path} listed {times(count)} (identically; read once)"
        for page, count in copies.items()
        if count > 1
    ]
    pages = sorted(order, key=lambda page: (page.first, page.last))
    conflicts: dict[PageRecord, str] = {}
    cluster: list[PageRecord] = []  # records whose ranges overlap, one after another
    end = -1  # the last shard they hold
    for page in [*pages, None]:
        if page is not None and page.first <= end:
            cluster.append(page)
            end = max(end, page.last)
            continue
        for one in cluster if len(cluster) > 1 else []:
            other = next(p for p in cluster if p is not one)
            conflicts[one] = (
                f"shares shards with another page record of the manifest "
                f"({other.path}, shards {other.first}-{other.last})"
            )
        cluster, end = [page], page.last if page is not None else -1
    return pages, conflicts, notes


def read_pages(location: Location, manifest: dict, plan: ShardPlan):
    """Each page the manifest lists, read and checked (its place in the plan, its bytes
    against the manifest's sha256, its config and its entries' range): (page, its raw
    entries, None), or (page, None, what is wrong with it), one page in memory at a time."""
    size, config_hash = manifest["page_shards"], manifest["config_hash"]
    for page in manifest["pages"]:
        count = page.last - page.first + 1
        where = f"{MANIFEST_FILE}: page {page.path}"
        if page in manifest["page_conflicts"]:
            yield page, None, f"{where} {manifest['page_conflicts'][page]}"
            continue
        if page.path != page_path(page.first, page.last) or page.first % size or count != size:
            yield page, None, f"{where} is not a page of {size} shards of the plan"
            continue
        if page.last not in plan:
            yield page, None, f"{where} is not in the plan of {plan.count} shards"
            continue
        kind = location.kind(page.path)
        if kind != "file":
            yield page, None, f"{page.path}: {article(kind)}, not the page the manifest lists"
            continue
        try:
            data = location.read_bytes(page.path)
        except OSError as error:
            yield page, None, f"{page.path}: cannot be read ({os_error_text(error)})"
            continue
        if len(data) != page.bytes or hashlib.sha256(data).hexdigest() != page.sha256:
            yield page, None, f"{page.path}: not the page the manifest lists (altered)"
            continue
        try:
            content = json.loads(data)
        except (ValueError, RecursionError):
            yield page, None, f"{page.path}: not valid JSON"
            continue
        if not (
            isinstance(content, dict)
            and content.get("config_hash") == config_hash
            and isinstance(content.get("shards"), list)
            and len(content["shards"]) == count
        ):
            yield page, None, f"{page.path}: not a page of this manifest's {count} shards"
            continue
        indices = [
            entry.get("index") if isinstance(entry, dict) else None for entry in content["shards"]
        ]
        if sorted(i for i in indices if is_count(i)) != list(range(page.first, page.last + 1)):
            yield (
                page,
                None,
                f"{page.path}: does not list shards {page.first}-{page.last} once each",
            )
            continue
        yield page, content["shards"], None


def listed_entries(location: Location, manifest: dict, plan: ShardPlan):
    """Every entry the manifest lists, its own and its pages' (raw JSON), the paths of the
    pages that could be read, (None, problem) for each page that could not and for what is
    listed wrongly, and the shards of the pages that could not (ranges: not listed)."""
    listed, paths, unread = list(manifest["shards"]), [], []
    problems: list[tuple[int | None, str]] = [(None, note) for note in manifest["page_notes"]]
    for page, entries, problem in read_pages(location, manifest, plan):
        if problem:
            problems.append((None, f"{problem}; its shards {page.first}-{page.last} are not read"))
            unread.append(range(page.first, page.last + 1))
        else:
            listed += entries
            paths.append(page.path)
    return listed, paths, problems, unread
