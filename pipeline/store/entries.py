"""The typed records of a results directory: a committed file and a shard's entry (the
manifest's), and a run record (run.json), each read from JSON by `from_json`, which names what
is wrong in one line, and written back by `to_json`."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline import echoed


class RecordError(ValueError):
    """A manifest or run record that is not one; the message says what is wrong, in one line."""


def is_count(value, least: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def is_tally(tally: dict, deals: int) -> bool:
    wins, pairs = tally.get("wins"), tally.get("pairs")
    return (
        set(tally) == {"wins", "pairs"}
        and isinstance(wins, list)
        and all(is_count(w) and w <= deals for w in wins)
        and isinstance(pairs, list)
        and all(
            isinstance(p, list) and len(p) == 2 and all(is_count(c) for c in p) and sum(p) <= deals
            for p in pairs
        )
    )


@dataclass(frozen=True)
class FileRecord:
    """One committed file of a shard, as the manifest lists it."""

    table: str
    path: str
    rows: int
    bytes: int
    sha256: str

    def to_json(self) -> dict:
        return {
            "table": self.table,
            "path": self.path,
            "rows": self.rows,
            "bytes": self.bytes,
            "sha256": self.sha256,
        }

    @classmethod
    def from_json(cls, value) -> FileRecord:
        if not (
            isinstance(value, dict)
            and all(isinstance(value.get(key), str) for key in ("table", "path", "sha256"))
            and is_count(value.get("rows"))
            and is_count(value.get("bytes"))
        ):
            raise RecordError("one of its files is malformed")
        return cls(value["table"], value["path"], value["rows"], value["bytes"], value["sha256"])


@dataclass(frozen=True)
class ShardEntry:
    """A committed shard, as the manifest lists it: its deal range, cells, rows and files, and
    how it was played. ``staged`` (where a task left its local files for the driver to put in
    place, as (staged, final) paths) travels from the task to the driver and is not recorded."""

    index: int
    first: int
    last: int
    deals: int
    cells: int
    rows: int
    files: tuple[FileRecord, ...]
    seconds: float | None = None
    kernel_seconds: float | None = None
    node: str | None = None
    node_id: str | None = None
    attempts: int | None = None
    # For a stop rule: each cell's wins, and (a_only, b_only) of each paired comparison.
    tally: dict | None = None
    staged: tuple[tuple[str, str], ...] = ()

    COUNTS = ("index", "first", "last", "deals", "cells", "rows")
    OPTIONAL = ("seconds", "kernel_seconds", "node", "node_id", "attempts", "tally")

    def to_json(self) -> dict:
        out = {key: getattr(self, key) for key in self.COUNTS}
        out["files"] = [record.to_json() for record in self.files]
        out.update(
            (key, getattr(self, key)) for key in self.OPTIONAL if getattr(self, key) is not None
        )
        return out

    @classmethod
    def from_json(cls, value) -> ShardEntry:
        if not isinstance(value, dict):
            raise RecordError("not an object")
        for key in cls.COUNTS:
            if not is_count(value.get(key)):
                raise RecordError(f"its {key} is {echoed(value.get(key))}, not a count")
        if value["last"] < value["first"]:
            raise RecordError("its range ends before it starts")
        files = value.get("files")
        if not isinstance(files, list) or not files:
            raise RecordError("it lists no files")
        extra = sorted(set(value) - set(cls.COUNTS) - set(cls.OPTIONAL) - {"files"})
        if extra:
            raise RecordError(f"it has keys no clocksweep writes ({', '.join(extra)})")
        for key, kinds in (
            ("seconds", (int, float)),
            ("kernel_seconds", (int, float)),
            ("node", (str,)),
            ("node_id", (str,)),
            ("attempts", (int,)),
            ("tally", (dict,)),
        ):
            if value.get(key) is not None and (
                isinstance(value[key], bool) or not isinstance(value[key], kinds)
            ):
                raise RecordError(f"its {key} is {echoed(value[key])}")
        tally = value.get("tally")
        if tally is not None and not is_tally(tally, value["deals"]):
            raise RecordError("its tally is not each cell's wins and each pair's (a_only, b_only)")
        return cls(
            **{key: value[key] for key in cls.COUNTS},
            files=tuple(FileRecord.from_json(record) for record in files),
            **{key: value.get(key) for key in cls.OPTIONAL},
        )

    def files_of(self, table: str) -> list[FileRecord]:
        return [record for record in self.files if record.table == table]


@dataclass(frozen=True)
class PageRecord:
    """A page of the manifest, as the manifest lists it: the file that holds the entries of
    shards ``first`` to ``last`` (every one of them committed), its size and sha256."""

    path: str
    first: int
    last: int
    bytes: int
    sha256: str

    def to_json(self) -> dict:
        return {
            "path": self.path,
            "first": self.first,
            "last": self.last,
            "bytes": self.bytes,
            "sha256": self.sha256,
        }

    @classmethod
    def from_json(cls, value) -> PageRecord:
        if not (
            isinstance(value, dict)
            and set(value) == {"path", "first", "last", "bytes", "sha256"}
            and all(isinstance(value[key], str) for key in ("path", "sha256"))
            and all(is_count(value[key]) for key in ("first", "last", "bytes"))
            and value["first"] <= value["last"]
        ):
            raise RecordError(f"a page record is malformed ({value!r:.80})")
        return cls(**value)


@dataclass(frozen=True)
class RecordedConfig:
    """The keys of a run record's config that its readers rely on (the deal plan's, the
    record mode, the grid), typed and checked once (`of`); the rest stays as recorded, in
    `RunRecord.config`, for a report to show."""

    seed: int
    first: int
    deals: int
    shard_size: int
    record: str
    grid: dict

    @classmethod
    def of(cls, config) -> RecordedConfig:
        """The typed keys of ``config``; RecordError naming the first that is not what a
        sweep's config holds."""
        if not isinstance(config, dict):
            raise RecordError("it has no config")
        for key, least in (("seed", 0), ("first", 0), ("deals", 1), ("shard_size", 1)):
            if not is_count(config.get(key), least):
                raise RecordError(
                    f"config.{key} is {echoed(config.get(key))}, not a count of at least {least}"
                )
        if config.get("record") not in ("deals", "summary"):
            raise RecordError(
                f"config.record is {echoed(config.get('record'))}, not deals or summary"
            )
        if not isinstance(config.get("grid"), dict):
            raise RecordError(
                f"config.grid is {echoed(config.get('grid'))}, not a table of the grid's axes"
            )
        return cls(
            *(config[key] for key in ("seed", "first", "deals", "shard_size", "record", "grid"))
        )


@dataclass
class RunRecord:
    """run.json: the resolved config and its hash, the versions that wrote the results, the
    cells, the shard plan, and one record per run (``runs``, the last one this run's)."""

    config: dict
    config_hash: str
    cells: list[dict]
    runs: list[dict] = field(default_factory=list)
    clocksweep: str | None = None
    config_source: str | None = None
    deal_scheme: str | None = None
    result_schema: str | None = None
    record: str | None = None
    shards: dict | None = None
    stop: dict | None = None  # how a run with a stop rule stopped: see sweep.stopping
    # The cell groups of a sweep grown by cells (`store.groups`): absent while it has one.
    cell_groups: list[dict] | None = None

    ORDER = (
        "clocksweep",
        "config_hash",
        "config",
        "config_source",
        "deal_scheme",
        "result_schema",
        "record",
        "cells",
        "cell_groups",
        "shards",
        "stop",
        "runs",
    )

    @property
    def settings(self) -> RecordedConfig:
        """The config's keys that readers rely on, typed (checked as the record was read)."""
        return RecordedConfig.of(self.config)

    @property
    def mode(self) -> str:
        """The record mode: ``deals`` or ``summary``."""
        return self.record or self.settings.record

    def to_json(self) -> dict:
        return {key: getattr(self, key) for key in self.ORDER if getattr(self, key) is not None}

    @classmethod
    def from_json(cls, run) -> RunRecord:
        """The record in ``run``; RecordError naming the first field `validate`, the report or
        a resumed run could not rely on."""
        if not isinstance(run, dict):
            raise RecordError(f"it holds a JSON {type(run).__name__}, not an object")
        RecordedConfig.of(run.get("config"))
        if not isinstance(run.get("cells"), list) or not all(
            isinstance(c, dict) for c in run["cells"]
        ):
            raise RecordError("it has no list of cells")
        if not isinstance(run.get("config_hash"), str):
            raise RecordError("it has no config_hash")
        runs = run.get("runs", [])
        if not isinstance(runs, list) or not all(isinstance(record, dict) for record in runs):
            raise RecordError(f"runs is {echoed(runs)}, not a list of run records")
        for record in runs:
            ray = record.get("ray")
            if ray is not None and not (
                isinstance(ray, dict) and isinstance(ray.get("nodes", []), list)
            ):
                raise RecordError(f"a run's ray is {echoed(ray)}, not a record of a Ray cluster")
        shards = run.get("shards", {"count": 1, "size": 1})
        if not isinstance(shards, dict) or not all(
            is_count(shards.get(k), 1) for k in ("count", "size")
        ):
            raise RecordError(f"shards is {echoed(shards)}, not an object with a count and a size")
        groups = run.get("cell_groups")
        if groups is not None and not (
            isinstance(groups, list)
            and groups
            and all(
                isinstance(g, dict)
                and is_count(g.get("cells"), 1)
                and isinstance(g.get("config_hash"), str)
                for g in groups
            )
            and sum(g["cells"] for g in groups) == len(run["cells"])
        ):
            raise RecordError(
                f"cell_groups is {echoed(groups)}, not groups of cells (a count and a config hash "
                "each) that add up to its cells"
            )
        return cls(**{key: run.get(key) for key in cls.ORDER if key in run})
