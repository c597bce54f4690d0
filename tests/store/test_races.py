"""Races and limits, with real parts: real Ray processes, real signals, a real tmpfs, real
Parquet. A second driver while one runs, readers after a driver is killed, a disk that fills,
a report while its results are replaced, plans too large to list (docs/operations.md, "Ownership").

In-process runs use the tests' local Ray instance (CliRunner, as in test_sweep.py); a
run that must be interrupted or raced is a driver subprocess with its own Ray, whose processes
are found by their temp dir (RAY_TMPDIR) and ended by pid. Each test gathers what it found
wrong in a list and fails once at the end, naming every defect it saw.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import polars as pl
import pytest
import rows
from faults import driver
from helpers import config_file, sweep_cli, validate_cli
from processes import end_processes, processes_mentioning
from rows import kernel_rows, read_rows

from pipeline import ERROR_PREFIX
from pipeline.store import layout, validate
from pipeline.sweep import config as sweep_config

SEED = 424242
TWO_GB = 2 << 30


def config_text(deals: int, shard_size: int, seed: int = SEED) -> str:
    """A small sweep: the standard cell (face-up finale) alone, one row per deal."""
    return f"""
name = "t"
seed = {seed}
deals = {deals}
shard_size = {shard_size}
[grid]
variant = ["standard"]
finale = ["up"]
"""


pytestmark = pytest.mark.usefixtures("local_ray")  # conftest.py: one local Ray instance


def write_config(tmp_path: Path, deals: int, shard_size: int) -> Path:
    return config_file(tmp_path, config_text(deals, shard_size))


def raised(result) -> str | None:
    """The exception a CliRunner run ended in (a traceback outside the test), if any."""
    error = result.exception
    if error is None or isinstance(error, SystemExit):
        return None
    return f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"


def one_line_problem(
    code: int, stdout: str, stderr: str, error: str | None = None, status: int = 2
) -> str | None:
    """What keeps an outcome from being a one-line error (exit ``status``: 2 for bad input,
    1 for a failure of the storage; one stderr line starting 'clocksweep: error: ', no
    traceback), or None."""
    if error:
        return f"raised {error}"
    if "Traceback" in stdout + stderr:
        return f"traceback: {stderr.strip()[-400:]!r}"
    lines = stderr.strip().splitlines()
    if code != status or len(lines) != 1 or not lines[0].startswith(ERROR_PREFIX):
        return f"exit {code}, stderr {stderr.strip()[-400:]!r}"
    return None


def cli_one_line_problem(result, status: int = 2) -> str | None:
    return one_line_problem(result.exit_code, result.stdout, result.stderr, raised(result), status)


def content(out: Path) -> pl.DataFrame:
    """The committed per-deal rows of a results directory (the documented way), sorted."""
    return read_rows(validate.committed_files(str(out)))


def manifest_entries(out: Path) -> list[dict]:
    try:
        return rows.manifest_entries(out)
    except (OSError, ValueError, KeyError, TypeError):
        return []


def files_under(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and not p.is_symlink()}


def end_ray(marker: str) -> None:
    """End, by pid, every process of the Ray instance started with RAY_TMPDIR=marker."""
    end_processes(marker, remove=True)


def stop(proc: subprocess.Popen | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait(timeout=30)


def marker(name: str) -> str:
    # Short: Ray's socket paths under RAY_TMPDIR must fit in 107 bytes.
    return f"/tmp/csr{name}{os.getpid()}"


# --- 1. The lock is taken before the state is read ------------------------------------------


def test_second_driver_refused_while_first_runs(tmp_path):
    """Driver A (its own Ray, paused mid-shard) on R; driver B (in-process) on R with another
    seed, first while A is still starting Ray (before run.json), then mid-sweep, then after A:
    B is refused each time and deletes nothing; A completes with its own rows."""
    text = config_text(2000, 500)
    config_file = write_config(tmp_path, 2000, 500)
    out, pids, ray_tmp = tmp_path / "R", tmp_path / "pids", marker("lk")
    pids.mkdir()
    problems: list[str] = []
    proc = None
    try:
        proc = driver(config_file, out, fault=f"pause=2.0:{pids}", env={"RAY_TMPDIR": ray_tmp})
        # B while A starts its Ray: A has read the directory (empty), has not written run.json.
        deadline = time.monotonic() + 120
        while (
            not processes_mentioning(ray_tmp)
            and proc.poll() is None
            and time.monotonic() < deadline
        ):
            time.sleep(0.01)
        if (out / "run.json").exists() or proc.poll() is not None:
            problems.append(
                "the window was missed: A's run.json existed (or A had ended) when its "
                "Ray was first seen"
            )
        else:
            race = sweep_cli(config_file, out, "seed=7")
            if race.exit_code == 0:
                problems.append(
                    "B (seed 7), started while A was starting Ray, was not refused: it "
                    "ran in A's output (" + race.stderr.strip()[-200:] + ")"
                )
            elif (
                cli_one_line_problem(race) or "in use by another clocksweep run" not in race.stderr
            ):
                problems.append(
                    f"B while A started Ray: {cli_one_line_problem(race) or race.stderr.strip()!r}"
                )

        # B while A is mid-sweep (its tasks paused with a shard half written).
        while not list(pids.glob("*.pid")) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        if proc.poll() is not None:
            problems.append("A ended before any task paused")
        else:
            before = {
                p: data
                for p, data in files_under(out).items()
                if p.name not in ("manifest.json", ".lock")
                and not p.name.endswith(".tmp")
                and ".partial" not in p.relative_to(out).parts
            }
            mid = sweep_cli(config_file, out, "seed=7")
            problem = cli_one_line_problem(mid)
            if problem or "in use by another clocksweep run" not in mid.stderr:
                problems.append(
                    f"B mid-sweep not refused as 'in use by another clocksweep run': "
                    f"{problem or mid.stderr.strip()!r}"
                )
            lost = [
                str(p.relative_to(out))
                for p, data in before.items()
                if not p.exists() or p.read_bytes() != data
            ]
            if lost:
                problems.append(f"B mid-sweep removed or changed A's files: {lost}")
            # validate mid-sweep: A's files in flight are A's work, not problems of R.
            checked = validate_cli(out)
            if checked.exit_code != 0 or f"run (pid {proc.pid}) is writing here" not in (
                checked.output
            ):
                problems.append(f"validate mid-sweep: {checked.output.strip()[-300:]!r}")
        _, a_stderr = proc.communicate(timeout=150)
    finally:
        stop(proc)
        end_ray(ray_tmp)

    if proc.returncode != 0:
        problems.append(f"A exited {proc.returncode}: {a_stderr.strip()[-300:]!r}")
    try:
        runs = json.loads((out / "run.json").read_text())["runs"]
        if runs[-1]["status"] != "complete":
            problems.append(f"A's run record ends {runs[-1]['status']!r}, not 'complete'")
    except (OSError, ValueError, KeyError, IndexError) as error:
        problems.append(f"run.json after A: {error!r}")
    checked = validate_cli(out)
    if checked.exit_code != 0:
        problems.append(f"R does not validate after A: {checked.output.strip()[-300:]!r}")
    else:
        if not content(out).equals(kernel_rows(text)):
            problems.append("R does not hold A's rows (the kernel's for A's config)")

        # After A: another seed is refused, nothing changes; the same config resumes.
        before = {p: data for p, data in files_under(out).items() if p.name != ".lock"}
        after_a = sweep_cli(config_file, out, "seed=7")
        problem = cli_one_line_problem(after_a)
        if problem or "another config" not in after_a.stderr:
            problems.append(
                f"B after A not refused as 'another config': {problem or after_a.stderr!r}"
            )
        if before != {p: data for p, data in files_under(out).items() if p.name != ".lock"}:
            problems.append("B after A changed A's files")
        same = sweep_cli(config_file, out)
        if same.exit_code != 0 or "0 played" not in same.stderr:
            problems.append(
                f"the same config after A did not resume with '0 played': {same.output!r}"
            )
    assert not problems, "\n".join(problems)


# --- Layout: readers see only committed files ----------------------------------------------


def test_a_lock_file_removed_between_open_and_lock_is_taken_again(tmp_path, monkeypatch):
    """A run refused in a directory it made removes the lock file it made. Another driver that
    opened that file just before, and locks it just after, holds a file no path names: it
    takes the lock again, so that a third is refused rather than holding the directory too."""
    import fcntl

    from pipeline.store.layout import ResultsError
    from pipeline.store.location import Location

    where = str(tmp_path / "new")
    refused = Location(where).lock()
    real_flock, removed = fcntl.flock, []

    def flock_after_the_refusal(descriptor, operation):
        if not removed:  # B has opened the lock file; A, refused, removes it first
            removed.append(True)
            refused.release(refused=True)
        return real_flock(descriptor, operation)

    monkeypatch.setattr(fcntl, "flock", flock_after_the_refusal)
    held = Location(where).lock()
    monkeypatch.setattr(fcntl, "flock", real_flock)
    assert removed and os.path.exists(os.path.join(where, ".lock"))
    with pytest.raises(ResultsError, match="in use by another clocksweep run"):
        Location(where).lock()
    held.release()


def test_readers_see_only_committed_files_after_driver_kill(tmp_path):
    """SIGKILL of the driver while tasks are paused mid-shard, >= 1 shard committed: the
    directory scan and the committed files give exactly the manifest's rows."""
    text = config_text(8000, 1000)
    config_file = write_config(tmp_path, 8000, 1000)
    out, pids, ray_tmp = tmp_path / "R", tmp_path / "pids", marker("kl")
    pids.mkdir()
    problems: list[str] = []
    proc = None
    killed = False
    try:
        proc = driver(config_file, out, fault=f"pause=2.0:{pids}", env={"RAY_TMPDIR": ray_tmp})
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and proc.poll() is None:
            done = {e.get("index") for e in manifest_entries(out)}
            paused = [
                p
                for p in pids.glob("shard-*.pid")
                if int(p.name.split(".")[0].removeprefix("shard-")) not in done
                and time.time() - p.stat().st_mtime < 1.0
            ]
            if done and paused:
                os.kill(proc.pid, signal.SIGKILL)
                killed = True
                break
            time.sleep(0.02)
        proc.wait(timeout=30)
        # Until every process of the instance has ended (the watchdog ends them): a task
        # that outlived its driver could write nothing more after that, on any load. (A
        # fixed wait let one still playing, slowed by load, write after the look.)
        deadline = time.monotonic() + 60
        while processes_mentioning(ray_tmp) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop(proc)
        end_ray(ray_tmp)
    assert killed, (
        f"no moment with a shard committed and a task paused: {proc.stderr.read()[-500:]!r}"
    )

    entries = manifest_entries(out)
    assert 1 <= len(entries) < 8, entries
    listed = {out / r["path"] for e in entries for r in e["files"] if r["table"] == "deals"}
    rows = sum(r["rows"] for e in entries for r in e["files"] if r["table"] == "deals")
    try:
        scanned = pl.scan_parquet(out / "shards" / "deals").collect().height
        if scanned != rows:
            problems.append(
                f"pl.scan_parquet(R/shards/deals) gives {scanned} rows, the manifest lists {rows}"
            )
    except Exception as error:  # noqa: BLE001 - the reader's failure is the finding
        problems.append(
            f"pl.scan_parquet(R/shards/deals) fails: {type(error).__name__}: "
            f"{str(error).splitlines()[0]}"
        )
    others = sorted(
        str(p.relative_to(out)) for p in (out / "shards" / "deals").rglob("*") if p not in listed
    )
    if others:
        problems.append(f"files under shards/deals/ the manifest does not list: {others}")
    committed = validate.committed_files(str(out))
    if {Path(p) for p in committed} != listed:
        problems.append(f"committed_files {committed} are not the manifest's {sorted(listed)}")
    height = pl.scan_parquet(committed).collect().height
    if height != rows:
        problems.append(f"pl.scan_parquet(committed_files) gives {height} rows, not {rows}")
    ((count,),) = duckdb.sql(f"select count(*) from read_parquet({committed!r})").fetchall()
    if count != rows:
        problems.append(f"DuckDB reads {count} rows of the committed files, not {rows}")

    rerun = sweep_cli(config_file, out)
    if rerun.exit_code != 0:
        problems.append(f"rerun: exit {rerun.exit_code}: {rerun.output[-300:]!r}")
    elif validate_cli(out).exit_code != 0 or not content(out).equals(kernel_rows(text)):
        problems.append("the rerun's results are not those of an uninterrupted run")
    assert not problems, "\n".join(problems)


# --- 8. A full disk -----------------------------------------------------------------------


@pytest.fixture
def tmpfs(tmp_path):
    """A mount point for tmpfs mounts the test makes; unmounted (by path) afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    point = tmp_path / "disk"
    point.mkdir()
    mounted = []

    def mount(size: str, remount: bool = False) -> Path:
        options = f"remount,size={size}" if remount else f"size={size}"
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs: {done.stderr.strip()}")
        if not remount:
            mounted.append(point)
        return point

    yield mount
    for _ in mounted:
        if subprocess.run(["umount", str(point)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(point)], capture_output=True)


def pages(root: Path) -> int:
    return sum(-(-p.stat().st_size // 4096) for p in root.rglob("*") if p.is_file())


def disk_full_problem(result) -> str | None:
    """A run on a full disk: non-zero, the error said in a line ('No space left' or 'disk is
    full'), no traceback."""
    if raised(result):
        return f"raised {raised(result)} (a traceback outside the test runner)"
    if result.exit_code == 0:
        return "exit 0 on a full disk"
    if "Traceback" in result.output:
        return f"traceback: {result.output[-400:]!r}"
    said = [
        line
        for line in result.stderr.splitlines()
        if "No space left" in line or "disk is full" in line
    ]
    if not said:
        return f"no line says 'No space left' / 'disk is full': {result.stderr[-400:]!r}"
    return None


def stray_temporaries(out: Path) -> list[str]:
    return sorted(
        str(p.relative_to(out))
        for p in out.rglob("*.tmp")
        if ".partial" not in p.relative_to(out).parts
    )


def test_disk_full_mid_sweep_cli(tmp_path, tmpfs):
    """A tmpfs of 3/5 of the pages the run takes: the run stops in a line, what it committed
    stays valid, and after the disk grows a rerun gives the rows of an uninterrupted run."""
    config_file = write_config(tmp_path, 20_000, 2000)
    reference = tmp_path / "reference"
    assert sweep_cli(config_file, reference).exit_code == 0
    needed = pages(reference)
    disk = tmpfs(f"{4 * (needed * 3 // 5)}k")  # room for the first tasks' files, not for all
    out = disk / "R"
    problems: list[str] = []

    full = sweep_cli(config_file, out)
    problem = disk_full_problem(full)
    if problem:
        problems.append(f"the run on a full disk: {problem}")
    left = stray_temporaries(out)
    if left:
        problems.append(f"temporary files left outside shards/.partial: {left}")
    try:
        found, figures = validate.validate(str(out))
        # Missing shards, and leftovers kept out of readers' way in shards/.partial/, are
        # what a full disk may leave; anything else is a committed shard damaged or a file
        # readers of shards/<table>/ would see.
        other = [
            p
            for p in found
            if not p.startswith("shards missing") and not p.startswith("shards/.partial/")
        ]
        if other:
            problems.append(f"validate after the full disk: {other}")
        # (Usually about half the shards are committed; none when the disk filled while the
        # manifest was written, which is allowed.)
        assert figures["committed"] < figures["shards"], "the tmpfs held the whole run"
    except layout.ResultsError as error:
        problems.append(f"validate after the full disk: {error}")

    tmpfs(f"{4 * needed * 4}k", remount=True)
    rerun = sweep_cli(config_file, out)
    if rerun.exit_code != 0 or raised(rerun):
        problems.append(
            f"rerun with space: exit {rerun.exit_code} {raised(rerun) or ''}: "
            f"{rerun.output[-300:]!r}"
        )
    elif validate_cli(out).exit_code != 0 or not content(out).equals(content(reference)):
        problems.append("the rerun's results are not those of an uninterrupted run")
    assert not problems, "\n".join(problems)


def test_disk_full_while_run_json_written(tmp_path, tmpfs):
    """A tmpfs all but full before the run (one page left, for the lock): run.json cannot be
    written: one line, non-zero, no temporary JSON left; with the space back a rerun works."""
    config_file = write_config(tmp_path, 1000, 500)
    disk = tmpfs("64k")
    out = disk / "R"
    filler = disk / "filler"
    stats = os.statvfs(disk)
    filler.write_bytes(b"\0" * (stats.f_bavail * stats.f_frsize - 4096))
    problems: list[str] = []

    full = sweep_cli(config_file, out)
    problem = disk_full_problem(full)
    if problem:
        problems.append(f"the run on a full disk: {problem}")
    elif cli_one_line_problem(full, status=1):  # a full disk is no input error
        problems.append(f"not a one-line error: {cli_one_line_problem(full, status=1)}")
    left = sorted(p.name for p in out.glob(".*.tmp")) + stray_temporaries(out)
    if left:
        problems.append(f"temporary files left: {sorted(set(left))}")

    filler.unlink()
    rerun = sweep_cli(config_file, out)
    if rerun.exit_code != 0 or raised(rerun):
        problems.append(
            f"rerun with space: exit {rerun.exit_code} {raised(rerun) or ''}: "
            f"{rerun.stderr.strip()[-300:]!r}"
        )
    elif not content(out).equals(kernel_rows(config_text(1000, 500))):
        problems.append("the rerun's results are not those of an uninterrupted run")
    assert not problems, "\n".join(problems)


# --- 9. A report while a --fresh run deletes its files ---------------------------------------


def report_process(results: Path) -> subprocess.Popen:
    command = [
        sys.executable,
        "-c",
        "from pipeline.cli import cli; cli()",
        "report",
        str(results),
        "--no-plots",
    ]
    environment = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    return subprocess.Popen(
        command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def reading(proc: subprocess.Popen, under: Path, timeout: float = 60) -> bool:
    """Wait until the process has a file under ``under`` open; False if it ended first."""
    deadline = time.monotonic() + timeout
    prefix = str(under)
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            for fd in Path(f"/proc/{proc.pid}/fd").iterdir():
                try:
                    if os.readlink(fd).startswith(prefix):
                        return True
                except OSError:
                    pass
        except OSError:
            pass
        time.sleep(0.002)
    return False


def test_report_while_fresh_run_deletes(tmp_path):
    """`clocksweep report` while the results are deleted or replaced (a --fresh run of another
    seed, in-process; or the files removed as --fresh removes them), at several moments: each
    report exits 0 or with a one-line error, never a traceback."""
    config_file = write_config(tmp_path, 20_000, 2000)
    pristine, out = tmp_path / "pristine", tmp_path / "R"
    assert sweep_cli(config_file, pristine).exit_code == 0

    def delete_like_fresh() -> None:
        shutil.rmtree(out / "shards", ignore_errors=True)
        (out / "manifest.json").unlink(missing_ok=True)
        shutil.rmtree(out / "report", ignore_errors=True)

    # (wait until the report has a shard file open?, then seconds, then what to do): the
    # report verifies and decodes the first shards for a second or so before the others.
    trials = [
        (True, 0.0, "delete"),
        (True, 0.3, "delete"),
        (True, 0.3, "fresh"),
        (False, 0.5, "fresh"),
        (False, 1.1, "delete"),
        (False, 1.7, "fresh"),
    ]
    problems: list[str] = []
    for number, (after_open, delay, action) in enumerate(trials):
        when = f"{delay} s after {'it opened a shard' if after_open else 'its start'}"
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(pristine, out, symlinks=True)
        proc = report_process(out)
        try:
            if after_open:
                reading(proc, out / "shards")
            time.sleep(delay)
            if action == "delete":
                delete_like_fresh()
            else:
                fresh = sweep_cli(config_file, out, f"seed={7 + number}", fresh=True)
                if fresh.exit_code != 0:
                    problems.append(
                        f"trial {number}: the --fresh run failed: {fresh.output[-300:]!r}"
                    )
            stdout, stderr = proc.communicate(timeout=120)
        finally:
            stop(proc)
        if proc.returncode != 0:
            problem = one_line_problem(proc.returncode, stdout, stderr)
            if problem:
                problems.append(f"trial {number} ({action}, {when}): report {problem}")
    assert not problems, "\n".join(problems)


# --- 12. Plans are ranges -----------------------------------------------------------------


def limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (TWO_GB, TWO_GB))


def cli_process(*args: str, cwd: Path) -> subprocess.Popen:
    command = [sys.executable, "-c", "from pipeline.cli import cli; cli()", *args]
    environment = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    return subprocess.Popen(
        command,
        env=environment,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=limited,
    )


def shards_said(count: int) -> re.Pattern:
    digits = str(count)
    groups = [digits[max(0, i - 3) : i] for i in range(len(digits), 0, -3)][::-1]
    return re.compile(",?".join(groups) + " shards")


def test_plans_are_ranges(tmp_path):
    """Under a 2 GB address-space limit, within 60 s: dry runs of 2**64 and 10**9 shards, and
    validate of a run.json planning 2**64 shards; a deal range past 2**64 is refused in a line."""
    config_file = write_config(tmp_path, 1000, 500)
    results = tmp_path / "R"
    made = sweep_cli(config_file, results)
    assert made.exit_code == 0, made.output
    run = json.loads((results / "run.json").read_text())
    run["config"]["deals"], run["config"]["shard_size"] = 2**64, 1
    run["config_hash"] = sweep_config.from_dict(run["config"]).hash
    (results / "run.json").write_text(json.dumps(run))
    strategies = Path(__file__).resolve().parents[2] / "configs" / "strategies.toml"

    commands = {
        "dry run of 2**64 shards": [
            "run",
            str(config_file),
            "--dry-run",
            "--set",
            "deals=18446744073709551616",
            "--set",
            "shard_size=1",
        ],
        "dry run of strategies.toml, shard_size=1": [
            "run",
            str(strategies),
            "--set",
            "shard_size=1",
            "--dry-run",
        ],
        "validate of a 2**64-shard plan": ["validate", str(results)],
        "deals=2**64+1": [
            "run",
            str(config_file),
            "--dry-run",
            "--set",
            "deals=18446744073709551617",
        ],
    }
    started = time.monotonic()
    procs = {name: cli_process(*args, cwd=tmp_path) for name, args in commands.items()}
    answers = {}
    try:
        for name, proc in procs.items():
            try:
                stdout, stderr = proc.communicate(
                    timeout=max(1.0, 60 - (time.monotonic() - started))
                )
                answers[name] = (proc.returncode, stdout, stderr)
            except subprocess.TimeoutExpired:
                answers[name] = None
    finally:
        for proc in procs.values():
            stop(proc)

    problems: list[str] = []

    def last(text: str) -> str:
        return (text.strip().splitlines() or [""])[-1][:300]

    for name, answer in answers.items():
        if answer is None:
            problems.append(f"{name}: no answer within 60 s")
    for name, count in (
        ("dry run of 2**64 shards", 2**64),
        ("dry run of strategies.toml, shard_size=1", 10**9),
    ):
        if answers[name] is None:
            continue
        code, stdout, stderr = answers[name]
        if code != 0 or not shards_said(count).search(stdout):
            problems.append(
                f"{name}: exit {code}, want {count} shards said: {last(stdout) or last(stderr)!r}"
            )
    if answers["validate of a 2**64-shard plan"] is not None:
        code, stdout, stderr = answers["validate of a 2**64-shard plan"]
        if code != 1 or "shards missing" not in stdout:
            problems.append(
                f"validate of a 2**64-shard plan: exit {code}: {last(stderr) or last(stdout)!r}"
            )
    if answers["deals=2**64+1"] is not None:
        code, stdout, stderr = answers["deals=2**64+1"]
        problem = one_line_problem(code, stdout, stderr)
        if problem or "2**64" not in stderr:
            problems.append(f"deals=2**64+1: {problem or 'no mention of 2**64'}: {last(stderr)!r}")
    assert not problems, "\n".join(problems)
