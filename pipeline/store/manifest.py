"""The driver's `Manifest`: the committed shards of a sweep, their entries and the pages they
are sealed in, written atomically; and `CommittedPaths`, the paths it lists, asked one at a
time. What a stop rule reads of it, the prefix of committed shards, is a `RulePrefix`; the
moves of staged files at a commit are the store's (`Location.put_in_place`)."""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass, replace

from pipeline.store.entries import PageRecord, ShardEntry
from pipeline.store.layout import (
    DEALS_TABLE,
    MANIFEST_FILE,
    PAGE_FILE_NAME,
    PAGES_DIR,
    SHARD_FILE_NAME,
    SHARDS_DIR,
    ResultsError,
    page_path,
)
from pipeline.store.location import Location, os_error_text
from pipeline.store.plan import ShardPlan
from pipeline.store.prefix import RulePrefix
from pipeline.store.records import (
    checked_entries,
    page_shards_setting,
    read_pages,
    shard_problem,
)

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


@dataclass
class Pacing:
    """When the manifest is written: once changed, and not so often that writing it takes
    more than a tenth of the time (`WRITE_SHARE_LIMIT`)."""

    dirty: bool = True
    last_write: float = 0.0
    write_seconds: float = 0.0  # how long the last write took

    def due(self, at_most_every: float) -> bool:
        if at_most_every:
            at_most_every = max(at_most_every, WRITE_SHARE_LIMIT * self.write_seconds)
        return self.dirty and time.monotonic() - self.last_write >= at_most_every

    def wrote(self, started: float) -> None:
        self.dirty = False
        self.last_write = time.monotonic()
        self.write_seconds = self.last_write - started


@dataclass
class Verifying:
    """What a resumed manifest's entries are checked against: the tables, the plan and the
    expected schemas of their files."""

    tables: set
    plan: ShardPlan | None
    schemas: dict


class Manifest:
    """The committed shards of a sweep; written by the driver, atomically.

    A shard is committed when the manifest that lists it is written (step 3 of the commit
    protocol: `location`); its staged files are put in place just before (and taken back, if
    that write fails). A shard whose files cannot be put in place is not committed: `flush`
    gives it back.

    The driver holds the entries of pages not yet full (``open``), and of full ones only their
    page record: its memory and each write stay the size of a page or two, however many
    shards the sweep has. A page is sealed (its file written, then listed by the manifest in
    place of its entries) in the flush after its last shard is committed, once the stop
    rule's prefix (`RulePrefix`) has read its shards.
    """

    def __init__(self, location: Location, config_hash: str, page_shards: int | None = None):
        self.location, self.config_hash = location, config_hash
        self.page_shards = page_shards or page_shards_setting()
        self.open: dict[int, ShardEntry] = {}  # committed, in no page yet
        self.pages: dict[int, PageRecord] = {}  # sealed, by page number
        self.open_per_page: dict[int, int] = {}
        self.verifying = Verifying(set(), None, {})  # at a resume (`load_verified`)
        self.rule_prefix = RulePrefix()
        self.totals = Totals()
        # Committed since the manifest was last written: their staged files, as (staged,
        # final) pairs, to put in place before it is.
        self.unwritten: set[int] = set()
        self.staged: dict[int, list[tuple[str, str]]] = {}
        self.pacing = Pacing()
        self.dropped_pages: list[str] = []  # page files listed until the next flush removes them
        self._read_page: tuple[int, dict[int, ShardEntry]] | None = None

    # The stop rule's prefix, as the driver asks for it.
    @property
    def prefix(self) -> int:
        return self.rule_prefix.end

    @property
    def stop_at(self) -> int | None:
        return self.rule_prefix.stop_at

    @stop_at.setter
    def stop_at(self, index: int | None) -> None:
        self.rule_prefix.stop_at = index

    @property
    def on_prefix(self):
        return self.rule_prefix.on_shard

    @on_prefix.setter
    def on_prefix(self, tell) -> None:
        self.rule_prefix.on_shard = tell

    @property
    def tally_shape(self) -> tuple[int, int] | None:
        return self.rule_prefix.tally_shape

    @tally_shape.setter
    def tally_shape(self, shape: tuple[int, int] | None) -> None:
        self.rule_prefix.tally_shape = shape

    @property
    def tables(self) -> set:
        return self.verifying.tables

    @property
    def plan(self) -> ShardPlan | None:
        return self.verifying.plan

    def __contains__(self, index) -> bool:
        return index in self.open or index // self.page_shards in self.pages

    def __len__(self) -> int:
        return self.totals.shards

    def _keep(self, entry: ShardEntry) -> None:
        self.open[entry.index] = entry
        page = entry.index // self.page_shards
        self.open_per_page[page] = self.open_per_page.get(page, 0) + 1
        self.totals.add(entry)
        self.pacing.dirty = True
        self._advance()

    def _drop(self, index: int) -> ShardEntry:
        entry = self.open.pop(index)
        self.open_per_page[index // self.page_shards] -= 1
        self.totals.add(entry, -1)
        return entry

    def _advance(self, sealed: dict[int, ShardEntry] | None = None) -> None:
        """Extend the stop rule's prefix over what is now committed (``sealed``: the entries
        of a page being loaded)."""
        self.rule_prefix.extend(lambda index: self.open.get(index) or (sealed or {}).get(index))

    # --- A resume: the entries listed that still verify -----------------------------------

    def load_verified(
        self, listed: dict, plan: ShardPlan, n_cells: int, schemas: dict
    ) -> list[tuple[int | None, str]]:
        """Keep the entries of ``listed`` (a manifest as `read_manifest` gives it) whose files
        still verify, and its pages whose every shard does: (index or None, problem) for the
        rest, and for what was listed wrongly. Entries are taken in shard order (so that
        the stop rule's prefix sees them in order), one page in memory at a time; a page after
        a shard that is not kept is opened again, to be sealed once the prefix reaches it."""
        self.verifying = Verifying(set(schemas), plan, schemas)
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
            self._load_page(page, entries, problems)
        keep_inline(math.inf)
        return problems

    def _load_page(self, page: PageRecord, entries: dict, problems: list) -> None:
        """A page read at a resume: sealed again if every shard of it verifies and the
        prefix reaches through it, else its entries back in the manifest's own list."""
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
                return
        # Committed again, in the manifest's own list, until it is sealed again (or, past
        # a stopping point, until `discard_beyond_stop` takes it out).
        self._open_again(page, problems)
        for entry in good.values():
            self._keep(entry)

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
        shard = self.verifying.plan[entry.index]
        return self.rule_prefix.tally_problem(entry, shard.stem) or shard_problem(
            self.location, entry, shard, self.config_hash, self.verifying.schemas
        )

    @staticmethod
    def _note(problems: list, index: int, problem: str | None) -> str | None:
        if problem:
            problems.append((index, problem))
        return problem

    # --- The stopping point ---------------------------------------------------------------

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
        self.pacing.dirty = self.pacing.dirty or bool(beyond)
        return [self._drop(index) for index in beyond]

    def _page_entries(self, page: PageRecord) -> list[ShardEntry]:
        """A sealed page's entries, its bytes checked against its record first."""
        data = self.location.read_bytes(page.path)
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

    # --- Committing and writing -----------------------------------------------------------

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

    def committed_paths(self) -> CommittedPaths:
        return CommittedPaths(self)

    def flush(self, at_most_every: float = 0.0) -> list[tuple[ShardEntry, str]]:
        """Put staged files in place, seal the pages that are full, and write the manifest, if
        it changed and not more often than ``at_most_every`` seconds, nor, when that is not 0,
        than keeps its writing under a tenth of the time. Gives (entry, why) of the shards
        whose files could not be put in place (their entries), which are not committed;
        ResultsError if the manifest or a page cannot be written (a full disk), the files
        then back where they were and the pages unsealed."""
        if not self.pacing.due(at_most_every):
            return []
        started = time.monotonic()
        rejected, moved = self._put_in_place()
        sealed: list[int] = []
        try:
            sealed = self._seal()
            self.location.write_json(MANIFEST_FILE, self.as_dict())
        except BaseException:
            for page in sealed:  # still open: the manifest that would list the page is not written
                del self.pages[page]
            for pairs in reversed(moved):  # not committed: not in place either
                try:
                    self.location.take_back(pairs)
                except OSError:
                    pass
            raise
        self._written(sealed)
        self.staged.clear()
        self.unwritten.clear()
        self.pacing.wrote(started)
        return rejected

    def _put_in_place(self) -> tuple[list[tuple[ShardEntry, str]], list]:
        """The staged files of the shards to commit, in place: (entry, why) of those whose
        files could not be (no longer committed), and the pairs moved."""
        rejected, moved = [], []
        for index, pairs in list(self.staged.items()):
            try:
                self.location.put_in_place(pairs)
                moved.append(pairs)
            except OSError as error:
                del self.staged[index]
                self.unwritten.discard(index)
                why = f"its files could not be put in place ({os_error_text(error)})"
                rejected.append((self._drop(index), why))
        return rejected, moved

    def _seal(self) -> list[int]:
        """Write a page file for each full page of open entries; gives their page numbers."""
        size, sealed = self.page_shards, []
        full = (p for p, count in self.open_per_page.items() if count == size)
        # Only pages inside the prefix: a page's shards are told to the rule from `open`.
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
