"""The manifest and run records: their shapes checked in one place (what is wrong named in one
line), the entries of a manifest checked against the plan, and the driver's `Manifest`."""

from __future__ import annotations

import os
from dataclasses import replace

import pyarrow as pa

from pipeline.engine import rules
from pipeline.store.entries import RecordError, RunRecord, ShardEntry, is_count
from pipeline.store.files import file_problem
from pipeline.store.layout import DEALS_TABLE, MANIFEST_FILE, RUN_FILE, ResultsError, article
from pipeline.store.location import Location, os_error_text
from pipeline.store.plan import Shard, ShardPlan, plan_shards


def entry_shape_problem(entry) -> str | None:
    """What keeps one manifest entry from being read as one, or None."""
    try:
        ShardEntry.from_json(entry)
    except RecordError as error:
        return str(error)
    return None


def entry_problem(entry: ShardEntry, shard: Shard, n_cells: int, tables) -> str | None:
    """What is wrong with a well-formed manifest entry for ``shard`` of the plan: its range,
    deals, cells and rows as the plan makes them, and each of ``tables`` once, at the shard's
    own path (a file of another shard, or one listed twice, would be read as this one's)."""
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
            times = "twice" if len(copies) == 2 else f"{len(copies)} times"
            problems.append(
                (
                    index,
                    f"{shard.stem}: listed {times} in {MANIFEST_FILE}"
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
    config_hash: str,
    schemas: dict[str, pa.Schema],
) -> str | None:
    """The first problem of any file of a checked manifest entry (see `checked_entries`)."""
    for record in entry.files:
        problem = file_problem(location, record, config_hash, schemas.get(record.table), shard)
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
            deals_count=config["deals"],
            shard_size=config["shard_size"],
            record=config["record"],
            cells=cells,
        )
    except (KeyError, TypeError, rules.RuleError) as error:
        return f"{RUN_FILE}: its config is not a sweep's config ({type(error).__name__}: {error})"
    cells_listed = [
        {key: value for key, value in cell.items() if key != "label"} for cell in run.cells
    ]
    checks = [
        ("config_hash", run.config_hash, identity.identity_hash(recorded)),
        ("deal_scheme", run.deal_scheme, recorded["deal_scheme"]),
        ("record", run.mode, config["record"]),
        ("cells", cells_listed, recorded["cells"]),
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


def read_manifest(location: Location) -> dict | None:
    """manifest.json, checked as a manifest (its entries one by one are `checked_entries`'
    affair); None if there is none; ResultsError naming the problem if it is not one."""
    manifest = _read_record(location, MANIFEST_FILE, "a manifest")
    if manifest is not None and not (
        isinstance(manifest, dict)
        and isinstance(manifest.get("shards"), list)
        and isinstance(manifest.get("config_hash"), str)
    ):
        raise ResultsError(
            f"{location.where}: {MANIFEST_FILE} is not a clocksweep manifest "
            "(an object with a config_hash and a list of shards)"
        )
    return manifest


# A manifest write may take at most one part in this many of the time between writes.
WRITE_SHARE_LIMIT = 10.0


class Manifest:
    """The committed shards of a sweep, by index; written by the driver, atomically.

    A shard is committed when the manifest that lists it is written; its local files are
    renamed into place from PARTIAL_DIR just before (and back, if that write fails), so that
    a table's directory holds committed files only but for the moment between the two. A
    shard whose files cannot be put in place is not committed: `flush` gives it back.
    """

    def __init__(self, location: Location, config_hash: str):
        self.location, self.config_hash = location, config_hash
        self.entries: dict[int, ShardEntry] = {}
        self.staged: dict[int, list[tuple[str, str]]] = {}  # (staged, final), not yet in place
        self.dirty = True
        self.last_write = 0.0
        self.write_seconds = 0.0  # how long the last write took

    def load_verified(
        self, listed: list, plan: ShardPlan, n_cells: int, schemas: dict
    ) -> list[tuple[int | None, str]]:
        """Keep the entries of ``listed`` (a manifest's shards) whose files still verify:
        (index or None, problem) for the rest, and for what was listed wrongly."""
        entries, problems = checked_entries(listed, plan, n_cells, schemas)
        for index, entry in sorted(entries.items()):
            problem = shard_problem(self.location, entry, plan[index], self.config_hash, schemas)
            if problem:
                problems.append((index, problem))
            else:
                self.entries[index] = entry
        return problems

    def commit(self, entry: ShardEntry) -> None:
        if entry.staged:
            self.staged[entry.index] = list(entry.staged)
        self.entries[entry.index] = replace(entry, staged=())
        self.dirty = True

    def as_dict(self) -> dict:
        return {
            "config_hash": self.config_hash,
            "shards": [self.entries[index].to_json() for index in sorted(self.entries)],
        }

    def committed_paths(self) -> set[str]:
        return {record.path for entry in self.entries.values() for record in entry.files}

    def _move(self, pairs, back: bool = False) -> None:
        for staged, final in reversed(pairs) if back else pairs:
            source, target = (final, staged) if back else (staged, final)
            if not back:
                os.makedirs(os.path.dirname(self.location.full(target)), exist_ok=True)
            os.replace(self.location.full(source), self.location.full(target))

    def flush(self, at_most_every: float = 0.0) -> list[tuple[int, str]]:
        """Put staged files in place and write the manifest, if it changed and not more often
        than ``at_most_every`` seconds, nor, when that is not 0, than keeps its writing under
        a tenth of the time (a manifest of many shards takes long to write, and every write
        rewrites it whole). Gives (index, why) of the shards whose files could not be put in
        place, which are not committed; ResultsError if the manifest cannot be written (a full
        disk), the files then back where they were."""
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
                del self.entries[index], self.staged[index]
                rejected.append(
                    (index, f"its files could not be put in place ({os_error_text(error)})")
                )
        try:
            self.location.write_json(MANIFEST_FILE, self.as_dict())
        except BaseException:
            for _, pairs in reversed(moved):  # not committed: not in place either
                try:
                    self._move(pairs, back=True)
                except OSError:
                    pass
            raise
        self.staged.clear()
        self.dirty = False
        self.last_write = time.monotonic()
        self.write_seconds = self.last_write - started
        return rejected
