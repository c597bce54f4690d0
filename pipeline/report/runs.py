"""The runs kept under a directory, one record each, as `clocksweep runs` lists them: its
name, its state, the deals committed of those planned, its cells, seed and record mode, its
size and when its records were last written.

A run is a directory holding ``run.json`` (or a ``manifest.json`` whose run record was lost),
at the directory given or below it. Everything here only reads: the run record and the
manifest as `validate` opens them, one listing of the run's files (which gives its size and
finds a committed file gone or of another size, the cheap half of `validate`), and who holds
the run now (`holder`). No file is opened but the records, and nothing is written or taken.
"""

from __future__ import annotations

import json
import os

import pyarrow.fs as pafs

from pipeline.report.render import aligned
from pipeline.store import validate
from pipeline.store.layout import MANIFEST_FILE, PAGES_DIR, RUN_FILE, ResultsError, StoreError
from pipeline.store.location import Location
from pipeline.store.records import Growth, Pending

# What a run's results are, as `runs` names it.
COMPLETE, STOPPED, INTERRUPTED, RUNNING, DAMAGED = (
    "complete",
    "stopped by its rule",
    "interrupted",
    "running",
    "damaged",
)
# A run's record: its columns, in order, and the type of their values (None where a run's
# records cannot tell): `runs --json`'s keys, `api.runs`' columns.
COLUMNS = {
    "name": str,
    "state": str,
    "deals": int,  # committed: in every cell group's shards
    "planned": int,  # the config's
    "shards": int,
    "shards_planned": int,
    "cells": int,
    "seed": int,
    "record": str,
    "bytes": int,  # every file of the run's directory
    "last_written": str,  # the latest of its records' times, ISO 8601
    "last_run": str,  # the status of its last run in run.json
    "holder": str,  # the run holding it now (pid, and host on S3)
    "problem": str,  # the first problem found, where it is damaged
    "where": str,
}
# How far below the directory given runs are looked for (a run's own directory is not
# looked into: its cell groups and shards are not runs).
MAX_DEPTH = 4


def runs_under(where: str) -> list[dict]:
    """A record (`COLUMNS`) of each run at ``where`` or below it, in the order of their
    paths; ResultsError if ``where`` is not a directory or holds no run, StoreError if its
    store cannot be read."""
    top = Location(where)
    try:
        if not top.is_directory():
            what = "no such directory" if not top.exists() else "a file, not a directory"
            raise ResultsError(f"{top.where}: {what}")
        found = [described(place, shown) for place, shown in run_directories(top, where)]
    except OSError as error:
        raise validate.unreachable(top, error) from None
    if not found:
        raise ResultsError(
            f"{top.where}: holds no clocksweep runs (no directory with {RUN_FILE} in it "
            f"or up to {MAX_DEPTH} levels below)"
        )
    return found


def run_directories(top: Location, shown: str, depth: int = MAX_DEPTH):
    """(location, as the user names it) of each run at or below ``top``."""
    entries = top.fs.get_file_info(pafs.FileSelector(top.root, allow_not_found=True))
    names = {info.base_name: info.type for info in entries}
    if RUN_FILE in names or MANIFEST_FILE in names:
        yield top, shown
        return
    for name in sorted(names):
        if depth and names[name] == pafs.FileType.Directory and not name.startswith("."):
            place = top.child(name)
            named = place.where if "://" in shown else os.path.join(shown, name)
            yield from run_directories(place, named, depth - 1)


def described(place: Location, shown: str) -> dict:
    """The record of the run at ``place``: damaged, with why, where its records cannot be
    read as a run's."""
    record = dict.fromkeys(COLUMNS)
    record.update(name=os.path.basename(place.root.rstrip("/")), where=shown)
    files = {place.relative(info.path): info for info in place.files("")}
    record["bytes"] = sum(info.size for info in files.values())
    record["last_written"] = last_written(files)
    try:
        results = validate.open_results(place)
    except StoreError:
        raise
    except ResultsError as error:
        return record | {"state": DAMAGED, "problem": without(place, str(error))}
    run, settings = results.run, results.run.settings
    record.update(
        name=run.config.get("name") or record["name"],
        deals=sum(entry.deals for entry in results.entries.values()),
        planned=settings.deals,
        shards=len(results.entries),
        shards_planned=results.plan.count,
        cells=len(run.cells),
        seed=settings.seed,
        record=run.mode,
        last_run=run.runs[-1].get("status") if run.runs else None,
        holder=holder(place),
    )
    record["problem"] = problem_of(results, files)
    record["state"] = state_of(results, record)
    return record


def problem_of(results: validate.Results, files: dict) -> str | None:
    """The first thing `validate` would name as wrong that a look at the records and the
    listing finds: a record that cannot be used, a manifest entry or page that is not one,
    a committed file gone or of another size than committed. Shards not committed yet (by a
    run that stopped, or a cell group still to play them) are no problem."""
    if results.unusable:
        return results.unusable
    for _, problem in results.problems:
        if not isinstance(problem, Growth | Pending):
            return problem
    for index in sorted(results.entries):
        for committed in results.entries[index].files:
            info = files.get(committed.path)
            if info is None:
                return f"{committed.path}: missing (shard {index} is committed)"
            if info.size != committed.bytes:
                return f"{committed.path}: {info.size:,} bytes, committed as {committed.bytes:,}"
    return None


def state_of(results: validate.Results, record: dict) -> str:
    if record["holder"] is not None:
        return RUNNING  # whatever it finds, the run there now has it to mend
    if record["problem"] is not None:
        return DAMAGED
    if results.manifest_missing or len(results.entries) < results.plan.count:
        return INTERRUPTED
    return STOPPED if (results.run.stop or {}).get("met") else COMPLETE


def holder(place: Location) -> str | None:
    """The run that holds ``place`` now, read and never taken (`Location.held_by`: a local
    directory's lock, an S3 prefix's lease while it is renewed); None where none does."""
    pid = place.held_by()
    return None if pid is None else f"pid {pid}"


def last_written(files: dict) -> str | None:
    """When the run's records (run.json, a manifest or its pages, of any cell group) were
    last written, ISO 8601; None if it has none."""
    times = [
        info.mtime
        for path, info in files.items()
        if os.path.basename(path) in (RUN_FILE, MANIFEST_FILE)
        or path.split("/")[-2:-1] == [PAGES_DIR]
    ]
    return max(times).isoformat(timespec="seconds") if times else None


def without(place: Location, message: str) -> str:
    """A message about ``place`` without the name of it the record carries already."""
    return message.removeprefix(f"{place.where}: ")


def size_text(count: int | None) -> str:
    """A size in bytes as people read it: 3.16 GB, 118 kB, 512 B."""
    if count is None:
        return ""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if count >= scale:
            return f"{count / scale:.3g} {unit}"
    return f"{count} B"


def deals_text(record: dict) -> str:
    if record["deals"] is None:
        return ""
    return f"{record['deals']:,}/{record['planned']:,}"


TEXT_COLUMNS = (  # (heading, the record's text)
    ("name", lambda r: r["name"]),
    ("state", lambda r: r["state"]),
    ("deals", deals_text),
    ("cells", lambda r: "" if r["cells"] is None else str(r["cells"])),
    ("seed", lambda r: "" if r["seed"] is None else str(r["seed"])),
    ("record", lambda r: r["record"] or ""),
    ("size", lambda r: size_text(r["bytes"])),
    ("last written", lambda r: r["last_written"] or ""),
    ("where", lambda r: r["where"]),
)


def table_text(records: list[dict]) -> str:
    """The runs as `clocksweep runs` prints them: a line of headings, then a line a run
    (and under a damaged or running one, what is wrong, or who holds it)."""
    rows = [[text(record) for _, text in TEXT_COLUMNS] for record in records]
    heading, *lines = aligned([heading for heading, _ in TEXT_COLUMNS], rows)
    out = [heading]
    for record, line in zip(records, lines):
        out.append(line)
        if record["state"] == RUNNING:
            out.append(f"  held by {record['holder']}")
        if record["problem"] is not None:
            out.append(f"  problem: {record['problem']}")
    return "\n".join(out)


def json_lines(records: list[dict]) -> str:
    """The runs as `clocksweep runs --json` prints them: one JSON object a line."""
    return "\n".join(json.dumps(record) for record in records)


def printed(wheres: list[str], as_json: bool = False) -> str:
    """What `clocksweep runs DIR` prints (``wheres``: [DIR]): the table, or JSON lines."""
    found = runs_under(wheres[0])
    return json_lines(found) if as_json else table_text(found)
