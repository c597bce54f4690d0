"""The manifest and run records: their shapes checked in one place (what is wrong named in one
line), the entries of a manifest checked against the plan, and the driver's `Manifest`."""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections import Counter
from dataclasses import dataclass, replace

import pyarrow as pa

from pipeline.engine import rules
from pipeline.store.entries import PageRecord, RecordError, RunRecord, ShardEntry, is_count
from pipeline.store.files import file_problem
from pipeline.store.layout import (
    DEALS_TABLE,
    MANIFEST_FILE,
    PAGE_FILE_NAME,
    PAGES_DIR,
    RUN_FILE,
    SHARD_FILE_NAME,
    SHARDS_DIR,
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
        f"{read}; rerun the config with --fresh to write them again"
    )


def run_record_mismatch(run: RunRecord) -> str | None:
    """Where a well-formed run record disagrees with itself: its config must give its
    config_hash, its cells, its shard plan and the deal scheme it names (an edited run.json
    would otherwise be read as the sweep it no longer describes)."""
    from pipeline.records import identity

    config = run.config
    try:
        cells = rules.expand({axis: tuple(config["grid"][axis]) for axis in rules.AXES})
        recorded = identity.sweep_identity(
            seed=config["seed"],
            first=config["first"],
            shard_size=config["shard_size"],
            record=config["record"],
            cells=cells,
        )
    except (KeyError, TypeError, rules.RuleError) as error:
        return f"{RUN_FILE}: its config is not a sweep's config ({type(error).__name__}: {error})"
    from pipeline.store.groups import recorded_groups

    try:
        cell_groups = recorded_groups(run)
    except ResultsError as error:
        return str(error)
    # A grown sweep lists its cells group by group (`store.groups`): the grid's cells, in
    # the order they were added, each group's hash its own.
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
    checks = [
        ("config_hash", run.config_hash, hashes[0]),
        ("cell_groups", [group.config_hash for group in cell_groups], hashes),
        ("deal_scheme", run.deal_scheme, recorded["deal_scheme"]),
        ("record", run.mode, config["record"]),
        ("cells", cells_listed, grouped),
        ("cells", in_grid_order, recorded["cells"]),
    ]
    if run.shards is not None:
        planned = plan_shards(config["first"], config["deals"], config["shard_size"])
        checks.append(
            (
                "shards",
                [run.shards["count"], run.shards["size"]],
                [planned.count, config["shard_size"]],
            )
        )
    for name, found, expected in checks:
        if found != expected:
            return (
                f"{RUN_FILE}: its {name} is not what its config gives "
                "(edited, or written by another clocksweep)"
            )
    return None


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
            with location.fs.open_input_stream(location.full(page.path)) as stream:
                data = stream.read()
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


# A manifest write may take at most one part in this many of the time between writes.
WRITE_SHARE_LIMIT = 10.0


@dataclass
class Totals:
    """What the committed shards hold, counted as they are committed or kept."""

    shards: int = 0
    deals: int = 0
    rows: int = 0
    bytes: int = 0
    row_bytes: int = 0  # of the per-deal files

    def add(self, entry: ShardEntry, sign: int = 1) -> None:
        self.shards += sign
        self.deals += sign * entry.deals
        self.rows += sign * entry.rows
        self.bytes += sign * sum(record.bytes for record in entry.files)
        self.row_bytes += sign * sum(record.bytes for record in entry.files_of(DEALS_TABLE))


class Manifest:
    """The committed shards of a sweep; written by the driver, atomically.

    A shard is committed when the manifest that lists it is written; its local files are
    renamed into place from PARTIAL_DIR just before (and back, if that write fails), so that
    a table's directory holds committed files only but for the moment between the two. A
    shard whose files cannot be put in place is not committed: `flush` gives it back.

    The driver holds the entries of pages not yet full (``open``), and of full ones only their
    page record: its memory and each write stay the size of a page or two, however many
    shards the sweep has. A page is sealed (its file written, then listed by the manifest in
    place of its entries) in the flush after its last shard is committed.
    """

    def __init__(self, location: Location, config_hash: str, page_shards: int | None = None):
        self.location, self.config_hash = location, config_hash
        self.page_shards = page_shards or page_shards_setting()
        self.open: dict[int, ShardEntry] = {}  # committed, in no page yet
        self.pages: dict[int, PageRecord] = {}  # sealed, by page number
        self.open_per_page: dict[int, int] = {}
        self.tables: set[str] = set()  # the tables and plan of the entries kept at a resume
        self.plan: ShardPlan | None = None
        self.schemas: dict = {}
        # The contiguous prefix of committed shards (0 .. prefix - 1), told shard by shard in
        # order to ``on_prefix(entry)``, which answers whether the run stops at that shard.
        self.prefix = 0
        self.on_prefix = None
        self.stop_at: int | None = None
        self.tally_shape: tuple[int, int] | None = None  # (cells, pairs) a stop rule reads
        self.totals = Totals()
        self.staged: dict[int, list[tuple[str, str]]] = {}  # (staged, final), not yet in place
        self.dirty = True
        self.last_write = 0.0
        self.write_seconds = 0.0  # how long the last write took
        self.dropped_pages: list[str] = []  # page files listed until the next flush removes them
        self.unwritten: set[int] = set()  # committed since the manifest was last written
        self._read_page: tuple[int, dict[int, ShardEntry]] | None = None

    def __contains__(self, index) -> bool:
        return index in self.open or index // self.page_shards in self.pages

    def __len__(self) -> int:
        return self.totals.shards

    def _keep(self, entry: ShardEntry) -> None:
        self.open[entry.index] = entry
        page = entry.index // self.page_shards
        self.open_per_page[page] = self.open_per_page.get(page, 0) + 1
        self.totals.add(entry)
        self.dirty = True
        self._advance()

    def _drop(self, index: int) -> ShardEntry:
        entry = self.open.pop(index)
        self.open_per_page[index // self.page_shards] -= 1
        self.totals.add(entry, -1)
        return entry

    def load_verified(
        self, listed: dict, plan: ShardPlan, n_cells: int, schemas: dict
    ) -> list[tuple[int | None, str]]:
        """Keep the entries of ``listed`` (a manifest as `read_manifest` gives it) whose files
        still verify, and its pages whose every shard does: (index or None, problem) for the
        rest, and for what was listed wrongly. Entries are taken in shard order (so that
        `on_prefix` sees the prefix in order), one page in memory at a time; a page after a
        shard that is not kept is opened again, to be sealed once the prefix reaches it."""
        self.tables, self.plan, self.schemas = set(schemas), plan, schemas
        entries, problems = checked_entries(listed["shards"], plan, n_cells, schemas)
        problems += [(None, note) for note in listed["page_notes"]]
        paged = {page.first // self.page_shards for page in listed["pages"]}
        inline = []
        for index, entry in sorted(entries.items()):
            if index // self.page_shards in paged:
                problems.append((None, f"{MANIFEST_FILE}: shard {index} is listed in a page too"))
            elif not self._note(problems, index, self._problem(entry)):
                inline.append(entry)
        inline.reverse()  # taken from the end, lowest index first

        def keep_inline(below: float) -> None:
            while inline and inline[-1].index < below:
                self._keep(inline.pop())

        for page, raw, problem in read_pages(self.location, listed, plan):
            keep_inline(page.first)
            if problem:
                problems.append(
                    (None, f"{problem}; its shards {page.first}-{page.last} are redone")
                )
                continue
            entries, page_problems = checked_entries(raw, plan, n_cells, schemas)
            problems += page_problems
            good = {
                index: entry
                for index, entry in sorted(entries.items())
                if not self._note(problems, index, self._problem(entry))
            }
            if len(good) == self.page_shards and self.prefix == page.first and self.stop_at is None:
                self._advance(good)
                if self.stop_at is None or self.stop_at >= page.last:
                    self.pages[page.first // self.page_shards] = page
                    for entry in good.values():
                        self.totals.add(entry)
                    continue
            # Committed again, in the manifest's own list, until it is sealed again (or, past
            # a stopping point, until `discard_beyond_stop` takes it out).
            self._open_again(page, problems)
            for entry in good.values():
                self._keep(entry)
        keep_inline(math.inf)
        return problems

    def _open_again(self, page: PageRecord, problems: list) -> None:
        """A page read whole whose entries go back to the manifest's own list: its file is the
        manifest's until the next flush, which removes it. A stopping point before its end is
        said here, as what removes it: it is no file an earlier run left unlisted."""
        self.dropped_pages.append(page.path)
        stop = self.stop_at
        if stop is None or stop >= page.last:
            return
        kept = (
            f"; shards {page.first}-{stop} are listed in {MANIFEST_FILE} instead"
            if stop >= page.first
            else ""
        )
        problems.append(
            (
                None,
                f"{page.path}: cut at the stopping point (shard {stop}): its shards past it "
                f"are removed, and this page with them{kept}",
            )
        )

    def _problem(self, entry: ShardEntry) -> str | None:
        plan = self.plan[entry.index]
        if self.tally_shape is not None and (
            entry.tally is None
            or (len(entry.tally["wins"]), len(entry.tally["pairs"])) != self.tally_shape
        ):
            return f"{plan.stem}: no tally of the stop rule's cells and comparisons"
        return shard_problem(self.location, entry, plan, self.config_hash, self.schemas)

    def _advance(self, sealed: dict[int, ShardEntry] | None = None) -> None:
        """Extend the contiguous prefix of committed shards over what is now committed
        (``sealed``: the entries of a page being loaded), telling `on_prefix` of each shard
        in order; stop extending it where `on_prefix` says to stop."""
        while self.stop_at is None:
            entry = self.open.get(self.prefix) or (sealed or {}).get(self.prefix)
            if entry is None:
                return
            self.prefix += 1
            if self.on_prefix is not None and self.on_prefix(entry):
                self.stop_at = entry.index

    def discard_beyond_stop(self) -> list[ShardEntry]:
        """The committed shards past the stopping point, taken out of the manifest (written at
        the next flush, which removes the pages in ``dropped_pages``; their files are the
        caller's to remove after it). A sealed page past it is opened again first (a cell
        group's pages can be: only the last group's prefix is the rule's)."""
        for page in sorted(self.pages):
            if (page + 1) * self.page_shards - 1 > self.stop_at:
                self._reopen(page)
        beyond = sorted(index for index in self.open if index > self.stop_at)
        for index in beyond:
            self.staged.pop(index, None)
        self.dirty = self.dirty or bool(beyond)
        return [self._drop(index) for index in beyond]

    def _page_entries(self, page: PageRecord) -> list[ShardEntry]:
        """A sealed page's entries, its bytes checked against its record first."""
        with self.location.fs.open_input_file(self.location.full(page.path)) as file:
            data = file.read()
        if len(data) != page.bytes or hashlib.sha256(data).hexdigest() != page.sha256:
            raise ResultsError(f"{page.path}: differs from the manifest (altered since sealed)")
        return [ShardEntry.from_json(raw) for raw in json.loads(data)["shards"]]

    def _reopen(self, page: int) -> None:
        record = self.pages.pop(page)
        entries = self._page_entries(record)
        for entry in entries:
            self.totals.add(entry, -1)
        for entry in entries:
            self._keep(entry)
        self.dropped_pages.append(record.path)

    def entry(self, index: int) -> ShardEntry | None:
        """A committed shard's entry: from the open entries, or read from its page (the last
        page read is kept: a run reads them in shard order)."""
        if index in self.open:
            return self.open[index]
        page = index // self.page_shards
        if page not in self.pages:
            return None
        if self._read_page is None or self._read_page[0] != page:
            entries = self._page_entries(self.pages[page])
            self._read_page = (page, {entry.index: entry for entry in entries})
        return self._read_page[1].get(index)

    @staticmethod
    def _note(problems: list, index: int, problem: str | None) -> str | None:
        if problem:
            problems.append((index, problem))
        return problem

    def commit(self, entry: ShardEntry) -> None:
        if entry.staged:
            self.staged[entry.index] = list(entry.staged)
        self.unwritten.add(entry.index)
        self._keep(replace(entry, staged=()))

    def written(self, index: int) -> bool:
        """Whether shard ``index`` is committed by a manifest written (its files in place)."""
        return index in self and index not in self.unwritten

    def as_dict(self) -> dict:
        return {
            "config_hash": self.config_hash,
            "page_shards": self.page_shards,
            "pages": [self.pages[page].to_json() for page in sorted(self.pages)],
            "shards": [
                self.open[index].to_json()
                for index in sorted(self.open)
                if index // self.page_shards not in self.pages  # sealed in this flush
            ],
        }

    def _written(self, sealed: list[int]) -> None:
        """Once the manifest is written: the entries of the pages it sealed out of memory, and
        the page files it no longer lists removed (but one sealed again, written anew). One
        that cannot be removed is left: unlisted, the next run removes it."""
        size = self.page_shards
        for page in sealed:
            for index in range(page * size, page * size + size):
                del self.open[index]
            del self.open_per_page[page]
        paths = {record.path for record in self.pages.values()}
        for path in self.dropped_pages:
            if path not in paths:
                try:
                    self.location.delete(path)
                except OSError:
                    pass
        self.dropped_pages = []

    def committed_paths(self) -> CommittedPaths:
        return CommittedPaths(self)

    def _move(self, pairs, back: bool = False) -> None:
        for staged, final in reversed(pairs) if back else pairs:
            source, target = (final, staged) if back else (staged, final)
            if not back:
                os.makedirs(os.path.dirname(self.location.full(target)), exist_ok=True)
            os.replace(self.location.full(source), self.location.full(target))

    def _seal(self) -> list[int]:
        """Write a page file for each full page of open entries; gives their page numbers."""
        size, sealed = self.page_shards, []
        full = (p for p, count in self.open_per_page.items() if count == size)
        # Only pages inside the prefix: a page's shards are told to `on_prefix` from `open`.
        for page in sorted(p for p in full if (p + 1) * size <= self.prefix):
            first, last = page * size, page * size + size - 1
            entries = [self.open[index].to_json() for index in range(first, last + 1)]
            path = page_path(first, last)
            data = self.location.write_json(
                path,
                {"config_hash": self.config_hash, "first": first, "last": last, "shards": entries},
            )
            self.pages[page] = PageRecord(
                path, first, last, len(data), hashlib.sha256(data).hexdigest()
            )
            sealed.append(page)
        return sealed

    def flush(self, at_most_every: float = 0.0) -> list[tuple[ShardEntry, str]]:
        """Put staged files in place, seal the pages that are full, and write the manifest, if
        it changed and not more often than ``at_most_every`` seconds, nor, when that is not 0,
        than keeps its writing under a tenth of the time. Gives (entry, why) of the shards
        whose files could not be put in place (their entries), which are not committed; ResultsError if the
        manifest or a page cannot be written (a full disk), the files then back where they
        were and the pages unsealed."""
        import time

        if at_most_every:
            at_most_every = max(at_most_every, WRITE_SHARE_LIMIT * self.write_seconds)
        if not self.dirty or time.monotonic() - self.last_write < at_most_every:
            return []
        started = time.monotonic()
        rejected, moved = [], []
        for index, pairs in list(self.staged.items()):
            try:
                self._move(pairs)
                moved.append((index, pairs))
            except OSError as error:
                try:
                    self._move(
                        [
                            pair
                            for pair in pairs
                            if os.path.lexists(self.location.full(pair[1]))
                            and not os.path.lexists(self.location.full(pair[0]))
                        ],
                        back=True,
                    )
                except OSError:
                    pass
                del self.staged[index]
                self.unwritten.discard(index)
                rejected.append(
                    (
                        self._drop(index),
                        f"its files could not be put in place ({os_error_text(error)})",
                    )
                )
        sealed: list[int] = []
        try:
            sealed = self._seal()
            self.location.write_json(MANIFEST_FILE, self.as_dict())
        except BaseException:
            for page in sealed:  # still open: the manifest that would list the page is not written
                del self.pages[page]
            for _, pairs in reversed(moved):  # not committed: not in place either
                try:
                    self._move(pairs, back=True)
                except OSError:
                    pass
            raise
        self._written(sealed)
        self.staged.clear()
        self.unwritten.clear()
        self.dirty = False
        self.last_write = time.monotonic()
        self.write_seconds = self.last_write - started
        return rejected


class CommittedPaths:
    """The paths of a `Manifest`'s committed files and pages, asked one at a time (a set of
    them would hold every path of the sweep)."""

    def __init__(self, manifest: Manifest):
        self.manifest = manifest
        # A page opened again is listed by the manifest written until the next flush.
        self.page_paths = {page.path for page in manifest.pages.values()}
        self.page_paths |= set(manifest.dropped_pages)

    def __contains__(self, path) -> bool:
        parts = path.split("/")
        if len(parts) == 2 and parts[0] == PAGES_DIR and PAGE_FILE_NAME.fullmatch(parts[1]):
            return path in self.page_paths
        name = SHARD_FILE_NAME.fullmatch(parts[-1])
        if len(parts) != 3 or parts[0] != SHARDS_DIR or name is None:
            return False
        index, manifest = int(name[1]), self.manifest
        if index in manifest.open:
            return any(record.path == path for record in manifest.open[index].files)
        if index // manifest.page_shards not in manifest.pages or parts[1] not in manifest.tables:
            return False
        return manifest.plan is not None and path == manifest.plan[index].path(parts[1])
