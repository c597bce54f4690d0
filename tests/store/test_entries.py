"""The manifest's typed records: JSON in and out, and one line naming what is wrong."""

from __future__ import annotations

import json

import pytest

from pipeline.store.entries import FileRecord, RecordError, ShardEntry

FILE = {
    "table": "deals",
    "path": "shards/deals/shard-000000_deals-0-9.parquet",
    "rows": 20,
    "bytes": 1234,
    "sha256": "ab" * 32,
}
ENTRY = {
    "index": 0,
    "first": 0,
    "last": 9,
    "deals": 10,
    "cells": 2,
    "rows": 20,
    "files": [FILE],
    "seconds": 0.5,
    "kernel_seconds": 0.25,
    "node": "127.0.0.1",
    "node_id": "n1",
    "attempts": 1,
}


def test_round_trip_is_the_json_a_manifest_holds():
    entry = ShardEntry.from_json(json.loads(json.dumps(ENTRY)))
    assert entry.files == (FileRecord(**FILE),)
    assert entry.to_json() == ENTRY and list(entry.to_json()) == list(
        ENTRY
    )  # same keys, same order
    assert entry.files_of("deals") == [entry.files[0]] and entry.files_of("facts") == []


def test_optional_fields_are_left_out_when_absent():
    bare = {
        key: ENTRY[key] for key in ("index", "first", "last", "deals", "cells", "rows", "files")
    }
    assert ShardEntry.from_json(bare).to_json() == bare


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda e: e.update(index=-1), "its index is -1, not a count"),
        (lambda e: e.update(deals=True), "its deals is True, not a count"),
        (lambda e: e.pop("rows"), "its rows is None, not a count"),
        (lambda e: e.update(first=5, last=4), "its range ends before it starts"),
        (lambda e: e.update(files=[]), "it lists no files"),
        (lambda e: e.update(files=3), "it lists no files"),
        (lambda e: e.update(files=[{**FILE, "rows": "x"}]), "one of its files is malformed"),
        (lambda e: e.update(files=[{**FILE, "sha256": None}]), "one of its files is malformed"),
        (lambda e: e.update(attempts="2"), "its attempts is '2'"),
        (lambda e: e.update(colour="red"), "keys no clocksweep writes (colour)"),
    ],
)
def test_malformed_entries_are_named(change, words):
    entry = json.loads(json.dumps(ENTRY))
    change(entry)
    with pytest.raises(RecordError, match=words.replace("(", r"\(").replace(")", r"\)")):
        ShardEntry.from_json(entry)
    assert "\n" not in str(pytest.raises(RecordError, ShardEntry.from_json, entry).value)


def test_not_an_object():
    with pytest.raises(RecordError, match="not an object"):
        ShardEntry.from_json([ENTRY])


def test_run_record_round_trip(tmp_path):
    """run.json as a run writes it reads back as the same record, keys in the same order."""
    from pipeline.store.entries import RunRecord
    from pipeline.sweep import config, driver

    made = config.from_dict(
        {
            "name": "t",
            "seed": 1,
            "deals": 10,
            "shard_size": 4,
            "output": str(tmp_path / "R"),
            "grid": {"variant": ["watch"]},
        }
    )
    record = driver.start_run_record(made, None, None, 3, 0)
    text = json.loads(json.dumps(record.to_json()))
    assert RunRecord.from_json(text) == record and list(
        RunRecord.from_json(text).to_json()
    ) == list(text)
    assert (
        record.mode == "deals"
        and record.shards["count"] == 3
        and record.runs[-1]["status"] == "running"
    )
    again = driver.start_run_record(made, record, None, 0, 3)
    assert [run["status"] for run in again.runs] == ["died", "running"]  # the first never ended


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda r: r.pop("config"), "it has no config"),
        (lambda r: r["config"].update(seed=-1), "config.seed is -1"),
        (lambda r: r.update(runs=5), "runs is 5, not a list of run records"),
        (lambda r: r.update(shards="x"), "shards is 'x'"),
    ],
)
def test_malformed_run_records_are_named(change, words, tmp_path):
    from pipeline.store.entries import RunRecord
    from pipeline.sweep import config, driver

    made = config.from_dict({"name": "t", "seed": 1, "deals": 10, "output": str(tmp_path / "R")})
    text = json.loads(json.dumps(driver.start_run_record(made, None, None, 1, 0).to_json()))
    change(text)
    with pytest.raises(RecordError, match=words):
        RunRecord.from_json(text)
