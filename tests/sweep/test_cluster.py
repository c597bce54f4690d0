"""A sweep on a two-node Ray cluster on loopback, started here with `ray start`.

The head and a second node (one CPU each) share a temp dir of their own; the driver is
`clocksweep run --address` in its own process. Its results must be the kernel's, row for row,
as on a local instance (tests/sweep/test_sweep.py), with shards played on both nodes.

Token authentication stays on, as Ray sets it up: a node or driver joining by explicit
address needs RAY_AUTH_MODE=token (Ray enables it by itself only for the head), and the
token Ray keeps in ~/.ray/auth_token (generated here if missing, its output discarded).
Teardown kills, by pid, only the processes that mention this test's temp dir; never
`ray stop`, which would stop every Ray instance on the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import faults
import polars as pl
import pytest
from helpers import free_port
from processes import end_processes, processes_mentioning

from pipeline.engine import kernel
from pipeline.records import schema
from pipeline.sweep import config as sweep_config

SEED = 99
N_DEALS = 12_000
# Strategies of your own beside the built-ins: their source travels in the jobs, and every
# node compiles it (one reads the cards turned, one rand).
MINE = Path(__file__).resolve().parents[1] / "engine" / "more_strategies.py"
CONFIG = f"""
name = "cluster"
seed = {SEED}
deals = {N_DEALS}
shard_size = 1500
[grid]
variant = ["standard", "one_swap", "play_out"]
strategy = ["most", "oracle", "{MINE}:least_seen", "{MINE}:coin_among_most"]
finale = ["down"]
order = ["round-robin", "packets"]
"""
SORT_KEY = ["order", "variant", "strategy", "finale", "depth", "deal"]
STEP_TIMEOUT = 180  # seconds for any one step; the test as a whole stays within a few minutes


def ray_command(*args: str, env: dict) -> None:
    ray = shutil.which("ray") or str(Path(sys.executable).parent / "ray")
    done = subprocess.run(
        [ray, *args], env=env, capture_output=True, text=True, timeout=STEP_TIMEOUT
    )
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])


PORT_TRIES = 3  # a port found free may be taken before Ray binds it (other Ray instances start)


def start_nodes(temp_dir: str, env: dict) -> tuple[int, int]:
    """The head and a second node, on ports found free: (the head's port, its dashboard's,
    the job server that `ray job submit` talks to). Each node's agent on a port of its own:
    another Ray instance on the machine (the suite runs several processes) holds the default
    one, and `ray job submit` needs the head's agent. A start that lost a port to another
    process is ended and made again on fresh ports."""
    common = ["--num-cpus=1", "--disable-usage-stats", "--node-ip-address=127.0.0.1"]
    for attempt in range(1, PORT_TRIES + 1):
        port, dashboard = free_port(), free_port()
        head = [
            "start",
            "--head",
            f"--port={port}",
            f"--temp-dir={temp_dir}",
            "--include-dashboard=true",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={dashboard}",
            f"--dashboard-agent-listen-port={free_port()}",
            *common,
        ]
        node = [
            "start",
            f"--address=127.0.0.1:{port}",
            f"--dashboard-agent-listen-port={free_port()}",
        ]
        try:
            ray_command(*head, env=env)
            ray_command(*node, *common, env=env)
            return port, dashboard
        except AssertionError as failed:
            if "address already in use" not in str(failed) or attempt == PORT_TRIES:
                raise
            end_processes(temp_dir)
    raise AssertionError("unreachable")


def cluster_temp_dir() -> str:
    return f"/tmp/csc{os.getpid()}"  # short: Ray's socket paths must fit in 107 bytes


@pytest.fixture(scope="module")
def cluster():
    """A head and a second node on 127.0.0.1: gives (address, environment for its clients).
    One for the module, each start costing seconds: the test that loses a node comes last."""
    temp_dir = cluster_temp_dir()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["RAY_AUTH_MODE"] = "token"
    has_token = (
        "RAY_AUTH_TOKEN" in env
        or "RAY_AUTH_TOKEN_PATH" in env
        or (Path.home() / ".ray" / "auth_token").exists()
    )
    if not has_token:  # Ray prints the token it makes: keep it out of every log
        subprocess.run(
            [shutil.which("ray") or "ray", "get-auth-token", "--generate"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=60,
            check=True,
        )
    try:
        port, dashboard = start_nodes(temp_dir, env)
        env["CLOCKSWEEP_TEST_DASHBOARD"] = f"http://127.0.0.1:{dashboard}"
        yield f"127.0.0.1:{port}", env
    finally:
        end_processes(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)


def as_sorted_strings(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(pl.col(list(schema.LABEL_COLUMNS)).cast(pl.String)).sort(
        SORT_KEY, nulls_last=True
    )


def test_two_node_cluster(cluster, tmp_path):
    address, env = cluster
    config_file, out = tmp_path / "cluster.toml", tmp_path / "res"
    config_file.write_text(CONFIG)
    pids = tmp_path / "pids"
    pids.mkdir()
    # A short pause per shard keeps both single-CPU nodes busy at once.
    command = faults.driver_command(
        f"pause=0.3:{pids}", "run", str(config_file), f"--set=output={out}", "--address", address
    )
    done = subprocess.run(
        command, env=faults.driver_env(env), capture_output=True, text=True, timeout=STEP_TIMEOUT
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "on 2 CPUs, 2 node(s)" in done.stderr

    run = json.loads((out / "run.json").read_text())
    cluster_info = run["runs"][-1]["ray"]
    assert cluster_info["kind"] == "cluster" and len(cluster_info["nodes"]) == 2
    entries = json.loads((out / "manifest.json").read_text())["shards"]
    assert len(entries) == 8
    assert len({entry["node_id"] for entry in entries}) == 2, "every shard ran on one node"

    cfg = sweep_config.from_dict(tomllib.loads(CONFIG))
    cells = list(cfg.cells)
    assert sum(cell.custom is not None for cell in cells) == 4
    expected = pl.from_arrow(
        schema.deal_table(SEED, 0, kernel.play(SEED, 0, N_DEALS, cells), cells)
    )
    got = pl.scan_parquet(out / "shards" / "deals").collect()
    assert got.height == N_DEALS * len(cells)
    assert as_sorted_strings(got).equals(as_sorted_strings(expected))
    # The same rows as a run of this process's threads.
    local = tmp_path / "local"
    done = subprocess.run(
        [sys.executable, "-c", "from pipeline.cli import cli; cli()", "run", str(config_file),
         f"--set=output={local}", "--set=run.executor=threads"],
        capture_output=True, text=True, timeout=STEP_TIMEOUT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    here = pl.scan_parquet(local / "shards" / "deals").collect()
    assert as_sorted_strings(here).equals(as_sorted_strings(got))

    checked = subprocess.run(
        [sys.executable, "-c", "from pipeline.cli import cli; cli()", "validate", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode == 0, checked.stdout


def raylets(temp_dir: str) -> dict[int, list[str]]:
    """The raylet processes of the cluster under ``temp_dir``: pid -> argument list."""
    found = {}
    for pid in processes_mentioning(temp_dir):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        except OSError:
            continue
        if argv and argv[0].endswith("/raylet"):
            found[pid] = argv
    return found


def parent_of(pid: int) -> int | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1])


def test_a_sweep_submitted_as_a_ray_job(cluster, tmp_path):
    """`ray job submit --working-dir . -- clocksweep run CONFIG`, as docs/operations.md says: the
    driver runs on the cluster (its head), token authentication on, the results on storage
    every node reaches (here a path on the one machine)."""
    _, env = cluster
    job_dir, out = tmp_path / "job", tmp_path / "res"
    job_dir.mkdir()
    # The strategies' file in the job's working directory, named relative to its config.
    shutil.copy(MINE, job_dir / "mine.py")
    text = CONFIG.replace(str(MINE), "mine.py")
    (job_dir / "cluster.toml").write_text(text.replace("[grid]", f'output = "{out}"\n[grid]'))
    ray = shutil.which("ray") or str(Path(sys.executable).parent / "ray")
    done = subprocess.run(
        [
            ray,
            "job",
            "submit",
            "--address",
            env["CLOCKSWEEP_TEST_DASHBOARD"],
            "--working-dir",
            str(job_dir),
            "--",
            "clocksweep",
            "run",
            "cluster.toml",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT,
    )
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    assert "on 2 CPUs, 2 node(s)" in done.stdout + done.stderr
    record = json.loads((out / "run.json").read_text())["runs"][-1]
    assert record["status"] == "complete" and record["ray"]["kind"] == "cluster"
    assert json.loads((out / "run.json").read_text())["config"]["custom"]["least_seen"]["spec"] == (
        "mine.py:least_seen"
    )
    cfg = sweep_config.from_dict(tomllib.loads(CONFIG))
    cells = list(cfg.cells)
    expected = pl.from_arrow(
        schema.deal_table(SEED, 0, kernel.play(SEED, 0, N_DEALS, cells), cells)
    )
    got = pl.scan_parquet(out / "shards" / "deals").collect()
    assert as_sorted_strings(got).equals(as_sorted_strings(expected))


def test_a_node_lost_mid_sweep(cluster, tmp_path):
    """The second node's raylet killed (by pid) while it plays a shard: the sweep completes on
    the head, with every row once; the loss is reported as it happens and kept in run.json."""
    address, env = cluster
    temp_dir = cluster_temp_dir()
    config_file, out = tmp_path / "cluster.toml", tmp_path / "res"
    config_file.write_text(CONFIG)
    pids = tmp_path / "pids"
    pids.mkdir()
    second = [pid for pid, argv in raylets(temp_dir).items() if "--head" not in argv]
    assert len(second) == 1, raylets(temp_dir)
    (raylet,) = second
    node_id = next(a for a in raylets(temp_dir)[raylet] if a.startswith("--node_id=")).split("=")[1]

    command = faults.driver_command(
        f"pause=3:{pids}", "run", str(config_file), f"--set=output={out}", "--address", address
    )
    proc = subprocess.Popen(
        command,
        env=faults.driver_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + STEP_TIMEOUT
        killed = False
        while time.monotonic() < deadline and proc.poll() is None and not killed:
            for pid_file in pids.glob("*.pid"):
                worker = int(pid_file.read_text())
                if parent_of(worker) == raylet:  # a shard paused on the second node
                    # The node goes down whole: its raylet and what the raylet started.
                    node = [raylet] + [
                        pid for pid in processes_mentioning(temp_dir) if parent_of(pid) == raylet
                    ]
                    for pid in node:
                        os.kill(pid, signal.SIGKILL)
                    killed = True
                    break
            time.sleep(0.05)
        assert killed, "no shard ran on the second node"
        _, stderr = proc.communicate(timeout=STEP_TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr[-3000:]
    lost_lines = [line for line in stderr.splitlines() if "was lost" in line]
    assert lost_lines and f"node {node_id[:12]} at " in lost_lines[0], stderr
    assert "played again on the 1 node(s) left" in lost_lines[0]
    record = json.loads((out / "run.json").read_text())["runs"][-1]
    assert [node["node_id"] for node in record["nodes_lost"]] == [node_id]
    assert record["status"] == "complete"

    cfg = sweep_config.from_dict(tomllib.loads(CONFIG))
    cells = list(cfg.cells)
    expected = pl.from_arrow(
        schema.deal_table(SEED, 0, kernel.play(SEED, 0, N_DEALS, cells), cells)
    )
    got = pl.scan_parquet(out / "shards" / "deals").collect()
    assert got.height == N_DEALS * len(cells)  # no row missing, none twice
    assert as_sorted_strings(got).equals(as_sorted_strings(expected))
