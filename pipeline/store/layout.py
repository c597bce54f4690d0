"""Where things live in a results directory (a local path or any `pyarrow.fs` URI), and the
error of a directory that is not one this run may use.

- ``run.json``: the resolved config and its hash, the code, deal-scheme and result-schema
  versions, the cells, the shard plan, and one record per run (the Ray cluster it ran on).
- ``manifest.json``: the committed shards, each with its deal range, cells, rows, attempts
  and its files (path, rows, bytes, sha256). Only the driver writes it, after a task reports
  success; readers use only the files it lists. Once every shard of a page of
  ``page_shards`` consecutive shards is committed, their entries move to a page file,
  ``manifest/shards-<first>-<last>.json``, written once, which the manifest then lists (path,
  bytes, sha256) in place of them: so each write of the manifest, and the driver's memory,
  stay the size of a page or two however many shards the sweep has.
- ``run.log``: how each run played (threads while Ray started, pieces at the sweep's end,
  Ray's own messages), appended run after run; only in a local directory (an object store
  cannot append), and never read back.
- ``report/``: what `clocksweep report` wrote; a run removes it when it commits a shard, or
  starts over (``--fresh``), since it no longer describes the results.
- ``shards/``: one file per shard and table,
  ``shards/<table>/shard-000012_deals-120000-129999.parquet``, so that each directory holds
  one schema and any Parquet reader can scan it whole. Record mode ``deals`` writes the
  per-deal rows (``shards/deals/``) and the deal facts counted (``shards/facts/``, the
  summary table of that name); ``summary`` writes the six summary tables and each cell's wins
  deal by deal (``shards/wins/``, what a cell added later is paired with).
- ``shards/.partial/``: files being written, or written and not yet committed (local paths).
- ``cells-<k>/``: the cells a grown sweep added in its k-th growth (`store.groups`), with a
  manifest, pages and shards of their own, laid out as above; run.json lists the groups.

Clean-up is conservative: a run deletes only what it owns (files of its own naming in its own
directories, reached without following a link, and not listed in the manifest); anything else
it finds is named and left alone (`validate.survey`).
"""

from __future__ import annotations

import functools
import re

RUN_FILE = "run.json"
MANIFEST_FILE = "manifest.json"
PAGES_DIR = "manifest"  # the manifest's pages: see the module docstring
LOCK_FILE = ".lock"
SHARDS_DIR = "shards"
PARTIAL_DIR = f"{SHARDS_DIR}/.partial"  # files being written, or written and not yet committed
REPORT_DIR = "report"
# How an error line names the way to start a sweep over: the command line's flag. The API
# says its own keyword in its place (`api.as_error`).
START_OVER = "--fresh"
LOG_FILE = "run.log"  # how each run played, appended (a local directory's only)
DEALS_TABLE = "deals"
FACTS_TABLE = "facts"  # written beside the per-deal rows: see summary.FactCounts
WINS_TABLE = "wins"  # a summary shard's wins, deal by deal: see records.wins
METADATA_KEY = "clocksweep"
TEMP_SUFFIX = ".tmp"
# A committed shard file's name (see Shard.stem), a page of the manifest's (of shards first
# to last), and a temporary file of run.json, the manifest or a page left by a process that
# died while writing it.
SHARD_FILE_NAME = re.compile(r"shard-(\d{6,})_deals-(\d+)-(\d+)\.parquet")
PAGE_FILE_NAME = re.compile(r"shards-(\d{6,})-(\d{6,})\.json")
STALE_TEMP_NAME = re.compile(
    rf"\.({re.escape(RUN_FILE)}|{re.escape(MANIFEST_FILE)}|{PAGE_FILE_NAME.pattern})"
    rf"\.\d+(-[0-9a-f]+)?{re.escape(TEMP_SUFFIX)}"
)


# A cell group added to a grown sweep (see `store.groups`): a directory of its own, laid out as
# the results directory is (its manifest, pages and shards), but for run.json.
GROUP_DIR_NAME = re.compile(r"cells-([1-9]\d*)")


def group_directory(group: int) -> str:
    """Where cell group ``group`` keeps its files, relative to the results directory ("" for
    the first group: the results directory itself)."""
    return f"cells-{group}" if group else ""


def group_of(path: str) -> int:
    """The cell group a path relative to the results directory belongs to."""
    name = GROUP_DIR_NAME.fullmatch(path.split("/", 1)[0])
    return int(name[1]) if name and "/" in path else 0


def wins_table_of(record: str) -> str:
    """The table whose files hold a shard's wins deal by deal in record mode ``record``: the
    per-deal rows (``won``), or a summary shard's ``wins``."""
    return DEALS_TABLE if record == "deals" else WINS_TABLE


def page_path(first: int, last: int) -> str:
    """The manifest's page of shards ``first`` to ``last``, relative to the results directory."""
    return f"{PAGES_DIR}/shards-{first:06d}-{last:06d}.json"


class ResultsError(ValueError):
    """A path that is not a results directory, or one this run may not write into."""


class StoreError(ResultsError):
    """The output's storage failed the command, not its input: a store that cannot be
    reached or stops answering, a lease lost, a full disk, results that changed while being
    read. The command line ends it with the status of a failure (1), not of bad input (2)."""


@functools.cache
def table_names() -> tuple[str, ...]:
    """Every table a shard can have a directory of, in either record mode (asked for only
    where a shards directory is there to look into: the summary module imports Polars)."""
    from pipeline.records import summary

    return tuple(dict.fromkeys([DEALS_TABLE, FACTS_TABLE, *summary.TABLES, WINS_TABLE]))


def article(kind: str) -> str:
    """A `Location.kind` as a message names it."""
    return {
        "link": "a symbolic link",
        "directory": "a directory",
        "file": "a file",
        "other": "not a regular file",
    }.get(kind, kind)
