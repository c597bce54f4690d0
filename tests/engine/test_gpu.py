"""The CUDA kernel (`pipeline.engine.gpu`) against the CPU kernel, under numba-cuda's simulator.

The simulator (``NUMBA_ENABLE_CUDASIM=1``, read when numba.cuda is first imported) runs the
CUDA kernel's own code on the CPU, so each of these runs in a process of its own started
with it set: the deals of every cell compared row by row, and a sweep on ``device = "cuda"``
whose shard files must be the CPU sweep's byte for byte. Without it, and with no GPU, a run
on the device is refused in one line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

from pipeline.engine import deals
from pipeline.sweep import config as sweep_config
from pipeline.sweep import device
from tests.helpers import config_file, sweep_cli

pytestmark = pytest.mark.skipif(
    find_spec("numba_cuda") is None, reason="numba-cuda (the cuda extra) is not installed"
)

SIMULATED = {**os.environ, device.SIMULATOR_ENV: "1"}
ON_THE_HOST = {k: v for k, v in os.environ.items() if k != device.SIMULATOR_ENV}

# Rows of both kernels for every cell, as `compare` prints them: (seed, first deal, deals).
COMPARE = """
import json, sys
import numpy as np
from pipeline.engine import gpu, kernel, rules
cells = rules.all_cells()
seed, first, count = map(int, sys.argv[1:])
on_gpu, on_cpu = gpu.play(seed, first, count, cells), kernel.play(seed, first, count, cells)
differ = {
    name: [cells[c].label, int(d)]
    for name in kernel.RESULT_ROWS
    for c, d in np.argwhere(on_gpu[name] != on_cpu[name])[:1]
}
print(json.dumps({"device": gpu.device_name(), "cells": len(cells), "differ": differ}))
"""


def simulated(script: str, *arguments: str) -> dict:
    """What ``script`` prints last, as JSON, run under the simulator in a process of its own."""
    done = subprocess.run(
        [sys.executable, "-c", script, *arguments],
        env=SIMULATED,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def rejecting(seed: int, deals_from: range) -> list[int]:
    """The deals of a range whose shuffle rejects a word (about 1 in 500): the scheme's
    slow path, which the range compared must hold."""

    def words_used(deal: int) -> int:
        used = []
        words = deals.random_words(seed, deal, deals.STREAM_DEAL)
        drawn = (used.append(word) or word for word in words)
        for ranges in deals.SHUFFLE_BATCHES:
            deals.bounded_batch(drawn, ranges)
        return len(used)

    return [deal for deal in deals_from if words_used(deal) > len(deals.SHUFFLE_BATCHES)]


@pytest.mark.parametrize(
    ("seed", "first", "count"),
    [(7, 1200, 200), (2**63 + 5, 2**40 + 1100, 40)],
    ids=["deals-1200-1399", "high-seed-and-deal"],
)
def test_the_cuda_kernel_plays_the_cpu_kernels_rows(seed, first, count):
    # Every cell of the rules (96: each variant, strategy, finale, order and depth), deal by
    # deal and row by row; each range holds a deal whose shuffle rejects a word, and the
    # second has a deal number past 32 bits and a seed past 63.
    assert rejecting(seed, range(first, first + count))
    said = simulated(COMPARE, str(seed), str(first), str(count))
    assert "simulator" in said["device"]
    assert said["cells"] == 96 and said["differ"] == {}


# Strategies of your own on both kernels: rows for every thing a strategy may see (counts,
# seen, bottoms, rand), then the error of each that breaks the rules, as each kernel says it.
MINE = Path(__file__).parent / "more_strategies.py"
COMPARE_MINE = f"""
import json
import numpy as np
from pipeline.engine import custom, gpu, kernel, rules
names = ["least_seen", "died_at_centre", "no_king_below", "coin_among_most"]
mine = [custom.read("{MINE}:" + name) for name in names]
grid = {{**rules.AXES, "variant": rules.RESCUE_VARIANTS, "finale": ("up",), "strategy": ("most", *names)}}
cells = rules.expand(grid, tuple(mine))
on_gpu, on_cpu = gpu.play(7, 1200, 150, cells), kernel.play(7, 1200, 150, cells)
differ = {{
    name: [cells[c].label, int(d)]
    for name in kernel.RESULT_ROWS
    for c, d in np.argwhere(on_gpu[name] != on_cpu[name])[:1]
}}
errors = {{}}
for name in ("raises_on_three", "empty_hour", "past_twelve"):
    cell = rules.Cell("one_swap", name, custom=custom.read("{MINE}:" + name))
    for engine in (kernel, gpu):
        try:
            engine.play(7, 0, 2000, [cell])
        except rules.StrategyError as error:
            errors.setdefault(name, []).append(str(error))
print(json.dumps({{"cells": len(cells), "differ": differ, "errors": errors}}))
"""


def test_strategies_of_your_own_play_on_the_gpu_as_on_the_cpu():
    said = simulated(COMPARE_MINE)
    # (watch, one_swap, exchange at each of 2 depths) x 5 strategies x 2 orders
    assert said["cells"] == 4 * 5 * 2 and said["differ"] == {}
    assert set(said["errors"]) == {"raises_on_three", "empty_hour", "past_twelve"}
    for name, (on_cpu, on_gpu) in said["errors"].items():
        assert on_gpu == on_cpu and name in on_cpu and "on deal" in on_cpu


SWEEP = """
name = "on-the-gpu"
seed = 5
deals = 300
shard_size = 150

[grid]
variant = ["standard", "watch", "one_swap", "exchange", "play_out"]
finale = ["down", "up"]
order = ["round-robin", "packets"]
depth = ["bottom", "top"]

[run]
executor = "threads"
"""


def shard_digests(out: Path) -> list[str]:
    manifest = json.loads((out / "manifest.json").read_text())
    return [file["sha256"] for entry in manifest["shards"] for file in entry["files"]]


# The summary sweep adds a strategy of your own to the built-ins (compiling the CPU kernel
# with one costs seconds: once is enough).
MINE_TOO = f"grid.strategy=clockwise,random,most,fewest,informed,oracle,{MINE}:least_seen"


@pytest.mark.parametrize(
    ("record", "strategies"),
    [("deals", ()), ("summary", (MINE_TOO,))],
    ids=["deals", "summary-and-a-strategy-of-your-own"],
)
def test_a_sweep_on_cuda_writes_the_cpu_sweeps_bytes(tmp_path, record, strategies):
    # Two threads, each launching the kernel (the simulator's launches one at a time), two
    # shards, every cell and a strategy of your own (tried on both kernels first); the run
    # records its device, and its files are the CPU run's.
    config = config_file(tmp_path, SWEEP)
    on_cpu, on_gpu = tmp_path / "cpu", tmp_path / "gpu"
    assert sweep_cli(config, on_cpu, f"record={record}", *strategies).exit_code == 0
    command = [sys.executable, "-m", "pipeline.cli", "run", str(config)]
    command += [f"--set=output={on_gpu}", f"--set=record={record}", "--set=run.device=cuda"]
    command += [f"--set={item}" for item in strategies]
    done = subprocess.run(command, env=SIMULATED, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert shard_digests(on_gpu) == shard_digests(on_cpu)
    recorded = json.loads((on_gpu / "run.json").read_text())["config"]["run"]
    assert recorded == {"executor": "threads", "device": "cuda"}


def test_cuda_without_a_gpu_is_one_line_and_writes_nothing(tmp_path):
    from numba import cuda

    if cuda.is_available():
        pytest.skip("this machine has a GPU")
    config = config_file(tmp_path, SWEEP)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "pipeline.cli", "run", str(config)]
    command += [f"--set=output={out}", "--set=run.device=cuda"]
    done = subprocess.run(command, env=ON_THE_HOST, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "run.device: 'cuda': no CUDA GPU" in line and "Traceback" not in done.stderr
    assert not out.exists()
    bench = [sys.executable, "-m", "pipeline.cli", "bench", "--device", "cuda"]
    done = subprocess.run(bench, env=ON_THE_HOST, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--device cuda: no CUDA GPU" in done.stderr


def test_the_device_is_a_run_option_checked_like_the_others(tmp_path):
    with pytest.raises(
        sweep_config.ConfigError, match="run.device: 'tpu' is not known; allowed: cpu, cuda"
    ):
        sweep_config.load(config_file(tmp_path, SWEEP), ["run.device=tpu"])
    cfg = sweep_config.load(config_file(tmp_path, SWEEP), ["run.device=cuda"])
    assert (
        cfg.device == "cuda"
        and cfg.identity() == sweep_config.load(config_file(tmp_path, SWEEP)).identity()
    )  # the results do not depend on it


def test_a_ray_run_on_cuda_asks_for_a_gpu_the_cluster_must_have(monkeypatch, tmp_path):
    cfg = sweep_config.load(config_file(tmp_path, SWEEP), ["run.device=cuda"])
    monkeypatch.delenv(device.SIMULATOR_ENV, raising=False)
    assert device.gpus_per_task(cfg) == 1.0
    with pytest.raises(sweep_config.ConfigError, match="the Ray cluster has no GPU"):
        device.check_cluster(cfg, {"CPU": 2.0, "memory": 1e9})
    device.check_cluster(cfg, {"CPU": 2.0, "GPU": 1.0})
    monkeypatch.setenv(device.SIMULATOR_ENV, "1")
    assert device.gpus_per_task(cfg) == 0.0  # the simulator plays on the CPU
    cpu = sweep_config.load(config_file(tmp_path, SWEEP))
    assert device.gpus_per_task(cpu) == 0.0
