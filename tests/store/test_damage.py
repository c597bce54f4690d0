"""Regression tests of issue 16: damaged results directories, hostile layouts and bad input.

Each test damages a real results directory (real Parquet, real symlinks) the way the issue
describes and checks what the fixed code promises: nothing committed is lost, nothing is
counted twice, and every user error ends as one line. Runs play on the thread executor
(two threads, no Ray); a results directory is written once per record mode and copied for each
test, so only the shards a test damages are played again.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import clocksweep, report_cli, validate_cli
from helpers import config_file as write_file
from processes import end_processes
from rows import kernel_rows, read_rows

from pipeline import ERROR_PREFIX
from pipeline.report import document as reporting
from pipeline.store import validate

SEED = 424242
N_DEALS = 20_000
SHARD_SIZE = 4000
N_SHARDS = N_DEALS // SHARD_SIZE
CONFIG = f"""
name = "t"
seed = {SEED}
deals = {N_DEALS}
shard_size = {SHARD_SIZE}
[grid]
variant = ["standard", "watch", "exchange"]
strategy = ["random"]
finale = ["up"]
depth = ["top"]
[run]
executor = "threads"  # damaged results, not Ray, are what is tested here
"""


def stem(index: int) -> str:
    first = index * SHARD_SIZE
    return f"shard-{index:06d}_deals-{first}-{first + SHARD_SIZE - 1}"


def shard_path(index: int, table: str = "deals") -> str:
    return f"shards/{table}/{stem(index)}.parquet"


# --- Fixtures and helpers -------------------------------------------------------------------


@pytest.fixture
def config_file(tmp_path) -> Path:
    return write_file(tmp_path, CONFIG)


def run_into(config_file: Path, out: Path, *extra: str):
    return clocksweep("run", config_file, f"--set=output={out}", *extra)


def run_ok(config_file: Path, out: Path, *extra: str):
    result = run_into(config_file, out, *extra)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert result.exit_code == 0, result.output
    return result


def one_line_error(result, *phrases: str) -> str:
    """The run's one-line error (exit 2, one stderr line, no traceback), holding ``phrases``."""
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{type(result.exception).__name__}: {result.exception} (exit {result.exit_code})"
    )
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2, f"exit {result.exit_code}: {result.stderr[-1500:]}"
    assert len(lines) == 1 and lines[0].startswith(ERROR_PREFIX), lines
    for phrase in phrases:
        assert phrase in lines[0], (phrase, lines[0])
    return lines[0]


def content(out: Path, committed_only: bool = False) -> pl.DataFrame:
    """Every per-deal row of a results directory, sorted: read by Polars over shards/deals,
    or (``committed_only``) over the committed files the manifest lists."""
    return read_rows(
        validate.committed_files(str(out)) if committed_only else out / "shards" / "deals"
    )


@pytest.fixture(scope="module")
def expected() -> pl.DataFrame:
    """The kernel's results for the test config, converted by the schema's own function."""
    return kernel_rows(CONFIG)


def make_base(root: Path, *sets: str) -> Path:
    config = root / "t.toml"
    config.write_text(CONFIG)
    out = root / "R"
    run_ok(config, out, *(f"--set={s}" for s in sets))
    return out


@pytest.fixture(scope="module")
def base_deals(tmp_path_factory) -> Path:
    """A whole run in record mode deals (5 shards x 3 cells), copied by each test."""
    return make_base(tmp_path_factory.mktemp("base_deals"))


@pytest.fixture(scope="module")
def base_summary(tmp_path_factory) -> Path:
    return make_base(tmp_path_factory.mktemp("base_summary"), "record=summary")


def copy_of(base: Path, tmp_path: Path) -> Path:
    out = tmp_path / "R"
    shutil.copytree(base, out, symlinks=True)
    return out


@pytest.fixture
def results(base_deals, tmp_path) -> Path:
    return copy_of(base_deals, tmp_path)


def read_manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def write_manifest(out: Path, manifest: dict) -> None:
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def committed_files_now(out: Path) -> dict[str, tuple[str, int, int]]:
    """Every committed file (relative path, as the manifest lists them) with its sha256, inode
    and mtime: a file deleted and written again, even byte-identical, shows."""
    files = {}
    for entry in read_manifest(out)["shards"]:
        for record in entry["files"]:
            path = out / record["path"]
            files[record["path"]] = (record["sha256"], path.stat().st_ino, path.stat().st_mtime_ns)
    return files


def assert_files_kept(out: Path, files: dict[str, tuple[str, int, int]]) -> None:
    missing = [path for path in files if not (out / path).is_file()]
    assert not missing, f"{len(missing)} committed file(s) gone: {missing[:3]}"
    changed = [
        path
        for path, (sha, ino, mtime) in files.items()
        if (sha256(out / path), (out / path).stat().st_ino, (out / path).stat().st_mtime_ns)
        != (sha, ino, mtime)
    ]
    assert not changed, f"{len(changed)} committed file(s) changed or written again: {changed[:3]}"


def fix_record(out: Path, record: dict) -> None:
    """Make a manifest record match the file now at its path (bytes, sha256, rows)."""
    path = out / record["path"]
    record.update(
        bytes=path.stat().st_size, sha256=sha256(path), rows=pq.read_metadata(path).num_rows
    )


def problem_lines(result) -> list[str]:
    return [line for line in result.output.splitlines() if line.startswith("problem: ")]


def report_provenance(out: Path) -> dict:
    reporting.build(str(out), replay=0, plots_enabled=False)
    return json.loads((out / "report" / "report.json").read_text())["provenance"]


# --- Symbolic links and foreign files under shards/ -----------------------------------


def _alias(out: Path, other: Path):
    os.symlink("deals", out / "shards" / "alias")
    return ["shards/alias"], []


def _loop(out: Path, other: Path):
    os.symlink("..", out / "shards" / "deals" / "loop")
    return ["shards/deals/loop"], []


def _outside(out: Path, other: Path):
    other.mkdir()
    (other / "keep.txt").write_text("not clocksweep's\n")
    os.symlink(other, out / "shards" / "deals" / "x")
    return ["shards/deals/x"], [other / "keep.txt"]


def _foreign_file(out: Path, other: Path):
    (out / "shards" / "deals" / "notes.txt").write_text("my notes\n")
    return ["shards/deals/notes.txt"], [out / "shards" / "deals" / "notes.txt"]


def _partial_link(out: Path, other: Path):
    other.mkdir()
    (other / "theirs.txt").write_text("another tool's file\n")
    os.symlink(other, out / "shards" / ".partial")
    return ["shards/.partial"], [other / "theirs.txt"]


def _partial_file(out: Path, other: Path):
    (out / "shards" / ".partial").write_text("not a directory\n")
    return ["shards/.partial"], [out / "shards" / ".partial"]


def _shards_link(out: Path, other: Path):
    other.mkdir()
    shutil.move(out / "shards", other / "shards")
    (other / "shards" / "extra.txt").write_text("another tool's file\n")
    os.symlink(other / "shards", out / "shards")
    return ["shards"], [other / "shards" / "extra.txt"]


@pytest.mark.parametrize(
    "damage",
    [_alias, _loop, _outside, _foreign_file],
    ids=["alias", "loop", "outside", "foreign_file"],
)
def test_cleanup_follows_no_link_and_deletes_nothing_committed(
    damage, results, config_file, tmp_path, expected
):
    shas = committed_files_now(results)
    named, kept = damage(results, tmp_path / "other")
    rerun = run_ok(config_file, results)
    assert_files_kept(results, shas)
    for path in kept:
        assert path.is_file(), f"{path} was deleted"
    for relative in named:
        assert os.path.lexists(results / relative), f"{relative} was removed"
        said = [
            line for line in rerun.stderr.splitlines() if "left alone" in line and relative in line
        ]
        assert said, f"{relative} not named as left alone: {rerun.stderr}"
    assert f"{N_SHARDS} already committed" in rerun.stderr and "0 played" in rerun.stderr
    assert content(results, committed_only=True).equals(expected)


@pytest.mark.parametrize(
    "damage",
    [_shards_link, _partial_link, _partial_file],
    ids=["shards_link", "partial_link", "partial_file"],
)
def test_links_where_files_of_ours_go_are_refused(damage, results, config_file, tmp_path):
    """`shards` or `shards/.partial` a link (to another disk, say) or a file: what lies behind
    a link could be neither cleaned up nor checked, so the run refuses in one line, and
    deletes nothing, there or behind the link."""
    shas = committed_files_now(results) if damage is not _shards_link else None
    manifest = read_manifest(results)
    manifest["shards"] = manifest["shards"][:-1]  # a shard to play, so a task would write
    write_manifest(results, manifest)
    named, kept = damage(results, tmp_path / "other")
    before = {p: p.read_bytes() for p in kept}
    line = one_line_error(run_into(config_file, results), named[0])
    assert "move it away" in line
    assert before == {p: p.read_bytes() for p in kept}
    assert os.path.lexists(results / named[0])
    if shas is not None:
        assert_files_kept(results, {path: shas[path] for path in committed_files_now(results)})


# --- A directory where a shard file goes ---------------------------------------------


def test_directory_at_a_shard_path_refused(results, config_file):
    manifest = read_manifest(results)
    manifest["shards"] = [e for e in manifest["shards"] if e["index"] != 3]
    write_manifest(results, manifest)
    for table in ("deals", "facts"):
        (results / shard_path(3, table)).unlink()
    (results / shard_path(3)).mkdir()
    before = {name: (results / name).read_bytes() for name in ("run.json", "manifest.json")}
    line = one_line_error(run_into(config_file, results), f"{stem(3)}.parquet")
    assert "deals" in line
    assert (results / shard_path(3)).is_dir()
    assert before == {name: (results / name).read_bytes() for name in before}


# --- manifest.json a directory ------------------------------------------------------------


@pytest.mark.parametrize("fresh", [False, True], ids=["resume", "fresh"])
def test_manifest_a_directory(fresh, results, config_file):
    shas = committed_files_now(results)
    (results / "manifest.json").unlink()
    (results / "manifest.json").mkdir()
    refused = run_into(config_file, results, *(["--fresh"] if fresh else []))
    assert_files_kept(results, shas)
    one_line_error(refused, "manifest.json")
    checked = validate_cli(results)
    assert checked.exit_code == 1, checked.output
    assert any("manifest.json" in line for line in problem_lines(checked)), checked.output


# --- A malformed manifest entry, a manifest of another config --------------------------------


def _files_not_a_list(entry: dict) -> None:
    entry["files"] = 3


def _missing_key(entry: dict) -> None:
    del entry["deals"]


@pytest.mark.parametrize("damage", [_files_not_a_list, _missing_key], ids=["files_3", "no_deals"])
def test_malformed_entry_redoes_only_that_shard(damage, results, config_file, expected):
    manifest = read_manifest(results)
    damage(manifest["shards"][2])
    write_manifest(results, manifest)
    others = {
        p: p.stat().st_mtime_ns
        for p in (results / "shards").rglob("*.parquet")
        if stem(2) not in p.name
    }
    assert len(others) == 2 * (N_SHARDS - 1)
    redo = run_ok(config_file, results)
    assert f"{N_SHARDS - 1} already committed" in redo.stderr and "1 played" in redo.stderr, (
        redo.stderr
    )
    assert any(
        "redoing" in line and ("shard 2" in line or stem(2) in line)
        for line in redo.stderr.splitlines()
    ), redo.stderr
    assert others == {p: p.stat().st_mtime_ns for p in others}
    assert validate_cli(results).exit_code == 0
    assert content(results).equals(expected)


def test_manifest_of_another_config_named_and_redone(results, config_file, expected):
    manifest = read_manifest(results)
    manifest["config_hash"] = "0" * 64
    write_manifest(results, manifest)
    checked = validate_cli(results)
    assert checked.exit_code == 1 and "belongs to another config" in checked.output
    redo = run_ok(config_file, results)
    assert "manifest.json belongs to another config" in redo.stderr, redo.stderr
    assert f"{N_SHARDS} played" in redo.stderr and "0 already committed" in redo.stderr
    assert validate_cli(results).exit_code == 0
    assert content(results).equals(expected)


# --- A shard listed twice ----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["deals", "summary"])
def test_shard_listed_twice_read_once(
    mode, base_deals, base_summary, tmp_path, config_file, expected
):
    out = copy_of(base_deals if mode == "deals" else base_summary, tmp_path)
    manifest = read_manifest(out)
    manifest["shards"].append(json.loads(json.dumps(manifest["shards"][1])))
    write_manifest(out, manifest)

    provenance = report_provenance(out)
    assert provenance["deals_read"] == N_DEALS, provenance["deals_read"]
    assert any("listed twice" in line for line in provenance["shards_not_read"]), provenance[
        "shards_not_read"
    ]

    checked = validate_cli(out)
    assert checked.exit_code == 1 and "listed twice" in checked.output, checked.output

    run_ok(config_file, out, *([] if mode == "deals" else ["--set=record=summary"]))
    assert sorted(e["index"] for e in read_manifest(out)["shards"]) == list(range(N_SHARDS))
    assert validate_cli(out).exit_code == 0
    if mode == "deals":
        assert content(out).equals(expected)


# --- Edits validate must catch ------------------------------------------------------------


def _deals_huge(out: Path):
    manifest = read_manifest(out)
    manifest["shards"][2]["deals"] = 10**9
    write_manifest(out, manifest)
    return lambda line: "shard 2" in line or stem(2) in line


def _run_json_edit(field: str, value):
    def damage(out: Path):
        run = json.loads((out / "run.json").read_text())
        if field == "seed":
            run["config"]["seed"] = value
        else:
            run[field] = value
        (out / "run.json").write_text(json.dumps(run, indent=1))
        return lambda line: "run.json" in line and ("config_hash" in line or field in line)

    return damage


def _shard_4_over_3(out: Path):
    manifest = read_manifest(out)
    by_index = {e["index"]: e for e in manifest["shards"]}
    for table in ("deals", "facts"):
        shutil.copyfile(out / shard_path(4, table), out / shard_path(3, table))
    for record in by_index[3]["files"]:
        fix_record(out, record)
    write_manifest(out, manifest)
    return lambda line: (
        ("shard 3" in line or stem(3) in line)
        and ("belongs to shard 4" in line or "written for deals" in line)
    )


@pytest.mark.parametrize(
    "damage",
    [
        _deals_huge,
        _run_json_edit("seed", 7),
        _run_json_edit("deal_scheme", "clocksweep-deals-scheme/0"),
        _shard_4_over_3,
    ],
    ids=["deals_1e9", "seed", "deal_scheme", "shard4_over_3"],
)
def test_validate_catches_edits(damage, results, config_file, expected):
    names_it = damage(results)
    checked = validate_cli(results)
    assert checked.exit_code == 1, checked.output
    assert any(names_it(line) for line in problem_lines(checked)), checked.output

    redo = run_into(config_file, results)
    if redo.exit_code == 2 and "--fresh" in redo.stderr:  # run.json edits: may ask for --fresh
        one_line_error(redo, "run.json")
        redo = run_into(config_file, results, "--fresh")
    assert redo.exception is None or isinstance(redo.exception, SystemExit), repr(redo.exception)
    assert redo.exit_code == 0, redo.output
    assert validate_cli(results).exit_code == 0
    assert all(e["deals"] == SHARD_SIZE for e in read_manifest(results)["shards"])
    assert content(results).equals(expected)


# --- Provenance in a footer corrupted ------------------------------------------------------


def _corrupt_plain(data: bytes, path: Path) -> bytes:
    """One byte of the footer's `clocksweep` key-value (plain JSON text) changed."""
    value = pq.read_metadata(path).metadata[b"clocksweep"]
    at = data.index(value)
    assert data.count(value) == 1 and value.startswith(b"{")
    return data[:at] + b"x" + data[at + 1 :]


def _corrupt_arrow_schema(data: bytes, path: Path) -> bytes:
    """One byte of the `clocksweep` JSON inside the base64 ARROW:schema value changed (the copy
    pyarrow's schema metadata comes from), re-encoded at the same length."""
    encoded = pq.read_metadata(path).metadata[b"ARROW:schema"]
    at = data.index(encoded)
    raw = bytearray(base64.b64decode(encoded))
    brace = raw.index(b'{"clocksweep"')
    raw[brace] = ord("x")
    again = base64.b64encode(bytes(raw))
    assert len(again) == len(encoded)
    return data[:at] + again + data[at + len(encoded) :]


def _not_an_object(data: bytes, path: Path) -> bytes:
    """The file rewritten by pyarrow, its schema metadata `clocksweep` the JSON `1`."""
    table = pq.read_table(path).replace_schema_metadata({b"clocksweep": b"1"})
    buffer = pa.BufferOutputStream()
    pq.write_table(table, buffer)
    return buffer.getvalue().to_pybytes()


@pytest.mark.parametrize(
    "corrupt",
    [_corrupt_plain, _corrupt_arrow_schema, _not_an_object],
    ids=["plain_json_byte", "arrow_schema_byte", "json_1"],
)
def test_footer_provenance_corrupted(corrupt, results, config_file, expected):
    path = results / shard_path(2)
    path.write_bytes(corrupt(path.read_bytes(), path))
    manifest = read_manifest(results)
    (entry,) = [e for e in manifest["shards"] if e["index"] == 2]
    fix_record(results, entry["files"][0])
    write_manifest(results, manifest)

    checked = validate_cli(results)
    assert checked.exception is None or isinstance(checked.exception, SystemExit), (
        f"validate: {type(checked.exception).__name__}: {checked.exception}"
    )
    assert checked.exit_code == 1, checked.output
    assert any(path.name in line and "provenance" in line for line in problem_lines(checked)), (
        checked.output
    )

    provenance = report_provenance(results)
    assert provenance["deals_read"] == N_DEALS - SHARD_SIZE
    assert any(path.name in line or "shard 2" in line for line in provenance["shards_not_read"])

    redo = run_ok(config_file, results)
    assert "1 played" in redo.stderr, redo.stderr
    assert validate_cli(results).exit_code == 0
    assert content(results).equals(expected)


# --- run.json that is no run record --------------------------------------------------------


@pytest.mark.parametrize("fresh", [False, True], ids=["resume", "fresh"])
def test_run_json_a_directory(fresh, results, config_file):
    shas = committed_files_now(results)
    (results / "run.json").unlink()
    (results / "run.json").mkdir()
    refused = run_into(config_file, results, *(["--fresh"] if fresh else []))
    line = one_line_error(refused, "run.json")
    assert "--fresh" not in line
    assert_files_kept(results, shas)


def _set_run(field: str, value):
    def damage(out: Path):
        run = json.loads((out / "run.json").read_text())
        run[field] = value
        (out / "run.json").write_text(json.dumps(run, indent=1))

    return damage


@pytest.mark.parametrize(
    "damage",
    [_set_run("runs", 5), _set_run("runs", [1]), _set_run("shards", "x")],
    ids=["runs_5", "runs_list_of_1", "shards_x"],
)
def test_run_json_fields_malformed(damage, results, config_file, expected):
    damage(results)
    one_line_error(validate_cli(results), "run.json")
    one_line_error(report_cli(results), "run.json")
    one_line_error(run_into(config_file, results), "run.json", "--fresh")
    run_ok(config_file, results, "--fresh")
    assert validate_cli(results).exit_code == 0
    assert content(results).equals(expected)


# --- A config of deeply nested arrays ------------------------------------------------------


def test_deeply_nested_config(tmp_path):
    path = tmp_path / "deep.toml"
    path.write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    one_line_error(clocksweep("run", path), str(path))


# --- Stale temporary files at the top of the results -----------------------------------------


def test_stale_temporary_files(results, config_file, expected):
    stale = [results / ".run.json.123.tmp", results / ".manifest.json.123.tmp"]
    for path in stale:
        path.write_text('{"half": ')
    checked = validate_cli(results)
    assert checked.exit_code == 1, checked.output
    for path in stale:
        assert any(path.name in line for line in problem_lines(checked)), checked.output
    rerun = run_ok(config_file, results)
    for path in stale:
        assert not path.exists(), f"{path.name} left"
    assert all(path.name in rerun.stderr for path in stale) or "removed" in rerun.stderr, (
        rerun.stderr
    )
    assert validate_cli(results).exit_code == 0
    assert content(results).equals(expected)


# --- Clearer answers -----------------------------------------------------------------------


@pytest.mark.parametrize("fresh", [False, True], ids=["resume", "fresh"])
def test_output_with_nul_byte(fresh, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "nul.toml"
    path.write_text(
        CONFIG.replace('name = "t"\n', f'name = "t"\noutput = "{tmp_path}/a\\u0000b"\n')
    )
    assert "\x00" in tomllib.loads(path.read_text())["output"]
    line = one_line_error(clocksweep("run", path, *(["--fresh"] if fresh else [])), "output")
    assert "run.json" not in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nul.toml"]


@pytest.mark.parametrize("fresh", [False, True], ids=["resume", "fresh"])
def test_output_s3_without_bucket(fresh, config_file, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = clocksweep("run", config_file, "--set=output=s3://", *(["--fresh"] if fresh else []))
    line = one_line_error(result, "output")
    assert "run.json" not in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.toml"]


def test_connect_seconds_not_a_number(config_file, tmp_path, monkeypatch):
    """A cluster address that accepts connections (a socket the test listens on) makes the run
    read CLOCKSWEEP_CONNECT_SECONDS; a value that is no number is named as such."""
    monkeypatch.setenv("CLOCKSWEEP_CONNECT_SECONDS", "abc")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    ray_tmp = f"/tmp/csdmg{os.getpid()}"
    environment = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    environment["RAY_TMPDIR"] = ray_tmp
    command = [
        sys.executable,
        "-c",
        "from pipeline.cli import cli; cli()",
        "run",
        str(config_file),
        f"--set=output={tmp_path / 'R'}",
        "--address",
        f"127.0.0.1:{port}",
    ]
    try:
        proc = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=120)
    finally:
        listener.close()
        end_processes(ray_tmp, remove=True)
    assert "Traceback" not in proc.stderr and proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(ERROR_PREFIX), lines
    assert "CLOCKSWEEP_CONNECT_SECONDS" in lines[0], lines[0]


def test_report_dir_a_file_without_out(results):
    (results / "report").write_text("not a directory\n")
    line = one_line_error(report_cli(results), "report")
    assert "--out" not in line


def test_report_link_removed_not_followed(results, config_file, tmp_path, expected):
    """A `report` that is a link to a directory of the user's: when the results change, the
    run removes the link (the report no longer describes them), never what it points to."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "keep.txt").write_text("the user's\n")
    os.symlink(theirs, results / "report")
    manifest = read_manifest(results)
    manifest["shards"] = [e for e in manifest["shards"] if e["index"] != 1]
    write_manifest(results, manifest)
    run_ok(config_file, results)
    assert not os.path.lexists(results / "report")
    assert (theirs / "keep.txt").read_text() == "the user's\n"
    assert content(results).equals(expected)


# --- Found by probing the fixes: links planted where clocksweep writes, more damaged records ---


@pytest.mark.parametrize("plant", ["symlink", "hardlink", "directory"])
def test_a_lock_file_not_ours_is_refused_and_untouched(plant, results, config_file, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's\n")
    (results / ".lock").unlink()
    if plant == "symlink":
        os.symlink(victim, results / ".lock")
    elif plant == "hardlink":
        os.link(victim, results / ".lock")
    else:
        (results / ".lock").mkdir()
    one_line_error(run_into(config_file, results), ".lock", "move it away")
    assert victim.read_text() == "the user's\n"


def test_a_foreign_directory_keeps_its_own_lock_file(config_file, tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / ".lock").write_text("keep\n")
    (theirs / "data.csv").write_text("1,2\n")
    one_line_error(run_into(config_file, theirs), "not a clocksweep results directory")
    assert (theirs / ".lock").read_text() == "keep\n"
    assert sorted(p.name for p in theirs.iterdir()) == [".lock", "data.csv"]


def test_links_at_temporary_names_are_not_written_through(results, config_file, tmp_path, expected):
    """run.json and the manifest are written to a new temporary name of their own: a link
    planted at a name a driver of this pid used to take is not followed."""
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's\n")
    for name in ("run.json", "manifest.json"):
        os.symlink(victim, results / f".{name}.{os.getpid()}.tmp")
    manifest = read_manifest(results)
    manifest["shards"] = manifest["shards"][:-1]
    write_manifest(results, manifest)
    rerun = run_ok(config_file, results)
    assert victim.read_text() == "the user's\n"
    assert "left alone" in rerun.stderr and f".run.json.{os.getpid()}.tmp" in rerun.stderr
    assert content(results).equals(expected)


def test_a_shard_whose_file_cannot_be_put_in_place_is_not_committed(
    results, config_file, tmp_path, expected
):
    """A directory appears at a shard's path mid-run: that shard fails (named, retried, given
    up), every other shard is committed, and a rerun once it is gone completes the sweep."""
    import threading

    import faults

    manifest = read_manifest(results)
    manifest["shards"] = [e for e in manifest["shards"] if e["index"] not in (1, 3)]
    write_manifest(results, manifest)
    for index in (1, 3):
        for table in ("deals", "facts"):
            (results / shard_path(index, table)).unlink()
    pids = tmp_path / "pids"
    pids.mkdir()
    blocker = results / shard_path(3)

    def block_when_shard_3_runs():
        for _ in range(1200):
            if list(pids.glob("shard-3.attempt-1.pid")):
                blocker.mkdir()
                return
            threading.Event().wait(0.05)

    thread = threading.Thread(target=block_when_shard_3_runs)
    thread.start()
    failed = clocksweep(
        "run",
        config_file,
        f"--set=output={results}",
        "--set=ray.max_retries=1",
        task=faults.pausing(0.3, str(pids)),
    )
    thread.join()
    assert failed.exit_code == 1, failed.output
    assert (
        "shard 3 (12000-15999) failed, attempt 2 of 2: its files could not be put in place"
        in failed.stderr
        and "giving up" in failed.stderr
    )
    assert sorted(e["index"] for e in read_manifest(results)["shards"]) == [0, 1, 2, 4]
    assert not list((results / "shards").glob(".partial/**/*.tmp"))
    blocker.rmdir()
    run_ok(config_file, results)
    assert validate_cli(results).exit_code == 0
    assert content(results).equals(expected)


@pytest.mark.parametrize("name", ["run.json", "manifest.json"])
def test_deeply_nested_records_are_one_line(name, results):
    (results / name).write_text("[" * 100_000 + "]" * 100_000)
    for command in ("validate", "report"):
        result = clocksweep(command, results)
        if name == "manifest.json" and command == "validate":
            assert result.exit_code == 1 and "nested too deeply" in result.output, result.output
            continue
        one_line_error(result, name, "nested too deeply")


@pytest.mark.parametrize(
    "damage",
    [
        ("config.record deleted", lambda run: run["config"].pop("record")),
        ("a run's ray a string", lambda run: run["runs"][0].update(ray="x")),
        # (a run on Ray records its nodes as a list; these runs played on threads)
        ("a run's nodes a number", lambda run: run["runs"][0].update(ray={"nodes": 3})),
    ],
    ids=lambda d: d[0] if isinstance(d, tuple) else d,
)
def test_more_malformed_run_records(damage, results):
    run = json.loads((results / "run.json").read_text())
    damage[1](run)
    (results / "run.json").write_text(json.dumps(run))
    for command in ("validate", "report"):
        one_line_error(clocksweep(command, results), "run.json")


def test_foreign_things_at_the_top_are_named_and_left(results, config_file):
    (results / "notes.txt").write_text("mine\n")
    os.symlink("/etc", results / "etc-link")
    rerun = run_ok(config_file, results)
    assert "left alone: notes.txt" in rerun.stderr and "left alone: etc-link" in rerun.stderr
    checked = validate_cli(results)
    assert checked.exit_code == 0, checked.output
    assert "note: notes.txt" in checked.output and "note: etc-link" in checked.output
    assert (results / "notes.txt").read_text() == "mine\n" and os.path.islink(results / "etc-link")


def test_validate_while_a_run_starts(tmp_path):
    """A run holds the lock but has not written run.json yet: validate says so."""
    import fcntl

    out = tmp_path / "R"
    out.mkdir()
    with open(out / ".lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("4242")
        held.flush()
        one_line_error(validate_cli(out), "pid 4242", "has not written run.json yet")
