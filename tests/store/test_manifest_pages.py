"""The manifest's pages: once a page of consecutive shards is all committed, its entries move
to a page file the manifest lists by sha256. Pages change where entries are kept, never which
shards are committed: a paged run has the rows, files and `validate` of an unpaged one, and a
page damaged between runs is named by `validate` and its shards redone by `run`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from rows import manifest_entries, read_rows

from pipeline.cli import cli
from pipeline.store.records import PAGE_ENV

SHARDS, PAGE = 7, 2  # pages of shards 0-1, 2-3 and 4-5; shard 6 stays in the manifest
CONFIG = """
name = "pages"
seed = 77
deals = 3500
shard_size = 500
[grid]
variant = ["standard", "watch"]
strategy = ["random"]
[run]
executor = "threads"  # the manifest's pages, not Ray, are what is tested here
"""


def run(config: Path, out: Path, *extra: str):
    return CliRunner().invoke(cli, ["run", str(config), f"--set=output={out}", *extra])


def check(out: Path):
    return CliRunner().invoke(cli, ["validate", str(out)])


def committed_as(entries: list[dict]) -> list[dict]:
    """What an entry says of its shard and files (not how or where it was played)."""
    kept = ("index", "first", "last", "deals", "cells", "rows", "files")
    return [{k: e[k] for k in kept} for e in entries]


@pytest.fixture(scope="module")
def unpaged(tmp_path_factory) -> tuple[Path, Path]:
    work = tmp_path_factory.mktemp("unpaged")
    config = work / "pages.toml"
    config.write_text(CONFIG)
    result = run(config, work / "res")
    assert result.exit_code == 0, result.output
    return config, work / "res"


@pytest.fixture
def paged(unpaged, tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(PAGE_ENV, str(PAGE))
    out = tmp_path / "res"
    result = run(unpaged[0], out)
    assert result.exit_code == 0, result.output
    return out


def test_a_paged_run_is_the_unpaged_run(unpaged, paged):
    manifest = json.loads((paged / "manifest.json").read_text())
    assert [(p["first"], p["last"]) for p in manifest["pages"]] == [(0, 1), (2, 3), (4, 5)]
    assert [e["index"] for e in manifest["shards"]] == [6]
    assert committed_as(manifest_entries(paged)) == committed_as(manifest_entries(unpaged[1]))
    assert read_rows(paged / "shards" / "deals").equals(read_rows(unpaged[1] / "shards" / "deals"))
    checked = check(paged)
    assert checked.exit_code == 0, checked.output
    assert f"{SHARDS} of {SHARDS} shards committed" in checked.output or "7/7" in checked.output


def damage_page(out: Path, how: str) -> None:
    page = out / "manifest" / "shards-000002-000003.json"
    if how == "altered":
        text = json.loads(page.read_text())
        text["shards"][0]["rows"] += 1
        page.write_text(json.dumps(text, indent=1) + "\n")
    elif how == "deleted":
        page.unlink()
    elif how == "a directory":
        page.unlink()
        page.mkdir()
    elif how == "truncated":
        page.write_bytes(page.read_bytes()[:100])
    elif how == "misplaced":  # the manifest lists the page under a name not of its range
        manifest = json.loads((out / "manifest.json").read_text())
        manifest["pages"][1]["path"] = "manifest/shards-000004-000005.json"
        (out / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize("how", ["altered", "deleted", "a directory", "truncated", "misplaced"])
def test_a_damaged_page_is_named_and_its_shards_redone(unpaged, paged, monkeypatch, how):
    damage_page(paged, how)
    checked = check(paged)
    assert checked.exit_code != 0
    assert "shards missing: 2 of 7: 2 (1000-1499), 3 (1500-1999)" in checked.output, checked.output
    assert "shards-000002-000003.json" in checked.output or how == "misplaced", checked.output
    report = CliRunner().invoke(cli, ["report", str(paged), "--out", str(paged.parent / "rep")])
    assert "its shards 2-3 are not read" in report.output, report.output

    monkeypatch.setenv(PAGE_ENV, str(PAGE))
    if how == "a directory":  # not ours to remove: named, and left to the user
        refused = run(unpaged[0], paged)
        assert refused.exit_code == 2 and "shards-000002-000003.json" in refused.output
        (paged / "manifest" / "shards-000002-000003.json").rmdir()
    redone = run(unpaged[0], paged)
    assert redone.exit_code == 0, redone.output
    assert "its shards 2-3 are redone" in redone.output or how == "a directory", redone.output
    assert "5 already committed" in redone.output and "2 played" in redone.output, redone.output
    assert check(paged).exit_code == 0
    assert read_rows(paged / "shards" / "deals").equals(read_rows(unpaged[1] / "shards" / "deals"))
    assert committed_as(manifest_entries(paged)) == committed_as(manifest_entries(unpaged[1]))


def test_a_page_the_manifest_does_not_list_is_named_and_removed(unpaged, paged, monkeypatch):
    stray = paged / "manifest" / "shards-000006-000007.json"
    stray.write_text((paged / "manifest" / "shards-000000-000001.json").read_text())
    checked = check(paged)
    assert checked.exit_code != 0
    assert "manifest/shards-000006-000007.json: not committed in the manifest" in checked.output
    monkeypatch.setenv(PAGE_ENV, str(PAGE))
    again = run(unpaged[0], paged)
    assert again.exit_code == 0, again.output
    assert not stray.exists()
    assert check(paged).exit_code == 0


def test_a_resumed_run_keeps_the_page_size_it_was_begun_with(unpaged, paged, monkeypatch):
    manifest = json.loads((paged / "manifest.json").read_text())
    manifest["shards"] = []  # shard 6 to play again, now with another page size set
    (paged / "manifest.json").write_text(json.dumps(manifest))
    monkeypatch.setenv(PAGE_ENV, "5")
    again = run(unpaged[0], paged)
    assert again.exit_code == 0, again.output
    after = json.loads((paged / "manifest.json").read_text())
    assert after["page_shards"] == PAGE and after["pages"] == manifest["pages"]
    assert check(paged).exit_code == 0


def test_a_run_whose_last_page_ends_in_a_short_shard_resumes_and_grows(
    unpaged, tmp_path, monkeypatch
):
    # 3,800 deals: shards 0-7, the last of 300 deals, every one on a sealed page.
    monkeypatch.setenv(PAGE_ENV, str(PAGE))
    config, out = unpaged[0], tmp_path / "res"
    assert run(config, out, "--set=deals=3800").exit_code == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["shards"] == [] and manifest["pages"][-1]["last"] == 7

    again = run(config, out, "--set=deals=3800")
    assert again.exit_code == 0, again.output
    assert "(0 played, 8 already committed)" in again.stderr, again.stderr

    fewer = run(config, out, "--set=deals=3799")
    assert fewer.exit_code == 2
    assert "deals: 3,799 is fewer than the 3,800 deals already committed" in fewer.stderr

    grown = run(config, out, "--set=deals=4000")  # shard 7 is played again, whole
    assert grown.exit_code == 0, grown.output
    assert "(1 played, 7 already committed)" in grown.stderr, grown.stderr
    assert check(out).exit_code == 0


def report_of(out: Path):
    """`clocksweep report` of ``out`` (no plots), and its report.json's provenance."""
    result = CliRunner().invoke(cli, ["report", str(out), "--no-plots", "--replay", "0"])
    assert result.exit_code == 0, result.output
    document = json.loads((out / "report" / "report.json").read_text())
    return result, document["provenance"]


def relist_pages(out: Path, how: str) -> None:
    """Edit the manifest's list of pages (the page files stay as they are)."""
    manifest = json.loads((out / "manifest.json").read_text())
    pages = manifest["pages"]
    if how == "twice":  # the first page listed again, identically
        pages.append(dict(pages[0]))
    elif how == "conflicting":  # pages 2-3 listed again, as other bytes
        pages.append({**pages[1], "sha256": "0" * 64})
    elif how == "out of order":
        pages.reverse()
    (out / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize("how", ["twice", "out of order"])
def test_a_page_listed_twice_or_out_of_order_is_named_and_read_once(
    unpaged, paged, monkeypatch, how
):
    relist_pages(paged, how)
    checked = check(paged)
    assert checked.exit_code == 1, checked.output
    named = {
        "twice": "manifest.json: page manifest/shards-000000-000001.json listed twice "
        "(identically; read once)",
        "out of order": "manifest.json: its pages are not listed in shard order (read in order)",
    }[how]
    assert checked.output.count("problem:") == 1 and named in checked.output, checked.output
    assert f"{SHARDS}/{SHARDS} shards committed" in checked.output, checked.output
    report, provenance = report_of(paged)
    assert f"  0 shard(s) not read; 1 problem(s): {named}" in report.output, report.output
    assert provenance["deals_read"] == 3500 and provenance["shards_read"] == SHARDS
    assert provenance["shards_not_read_count"] == 0, provenance

    monkeypatch.setenv(PAGE_ENV, str(PAGE))
    again = run(unpaged[0], paged)
    assert again.exit_code == 0, again.output
    assert named in again.stderr and "to play" not in again.stderr, again.stderr
    assert f"{SHARDS}/{SHARDS} shards (0 played, {SHARDS} already committed)" in again.stderr
    last = json.loads((paged / "run.json").read_text())["runs"][-1]
    assert (last["shards_to_play"], last["shards_already_committed"]) == (0, SHARDS), last
    assert last["ray"] is None  # nothing to play: no Ray started
    pages = json.loads((paged / "manifest.json").read_text())["pages"]
    assert [(p["first"], p["last"]) for p in pages] == [(0, 1), (2, 3), (4, 5)]
    assert check(paged).exit_code == 0


def test_pages_listed_with_shards_in_common_are_not_read_and_redone(unpaged, paged, monkeypatch):
    relist_pages(paged, "conflicting")
    checked = check(paged)
    assert checked.exit_code == 1
    conflict = (
        "manifest.json: page manifest/shards-000002-000003.json shares shards with another page "
        "record of the manifest (manifest/shards-000002-000003.json, shards 2-3)"
    )
    assert checked.output.count(conflict) == 2, checked.output  # each record, neither read
    assert "shards missing: 2 of 7: 2 (1000-1499), 3 (1500-1999)" in checked.output
    report, provenance = report_of(paged)
    assert "  2 shard(s) not read; " in report.output, report.output
    assert provenance["shards_read"] == SHARDS - 2 and provenance["shards_not_read_count"] == 2

    monkeypatch.setenv(PAGE_ENV, str(PAGE))
    redone = run(unpaged[0], paged)
    assert redone.exit_code == 0, redone.output
    assert f"{conflict}; its shards 2-3 are redone" in redone.stderr, redone.stderr
    assert "(2 played, 5 already committed)" in redone.stderr, redone.stderr
    assert check(paged).exit_code == 0
    assert committed_as(manifest_entries(paged)) == committed_as(manifest_entries(unpaged[1]))


@pytest.mark.parametrize("how", ["deleted", "altered"])
def test_the_report_counts_the_shards_of_a_damaged_page(paged, how):
    damage_page(paged, how)
    report, provenance = report_of(paged)
    assert f"  {PAGE} shard(s) not read; " in report.output, report.output
    assert provenance["shards_read"] == SHARDS - PAGE
    assert provenance["shards_not_read_count"] == PAGE, provenance
