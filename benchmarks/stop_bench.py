"""What a stop rule costs, and what growing a sweep (by deals, by a cell) costs.

    python benchmarks/stop_bench.py [--config configs/strategies.toml] [--deals 1e8]
                                    [--grow 20000000]

- **The rule's cost.** Per shard a task tallies its cells' wins and its paired strategy
  comparisons' discordant deals, and the driver feeds the tally to the confidence sequences.
  Both are timed here, in this process, against the kernel's time for the same deals and
  cells (a 10^8-deal sweep of the config, in its shards of `shard_size`): the share
  (tally + check) / kernel is what the rule adds to a sweep's work.
- **Growing.** `clocksweep run` (wall time, Ray's start included, each in its own process):
  the config at ``--grow`` deals, then grown to twice that, against a fresh run of twice
  that: the grown run's wall time against the fresh run's less the first's.
- **Growing by a cell.** The config without its last strategy at ``--grow`` deals, then
  grown by that strategy's `one_swap` cell (a cell group of one: it reads the other cells'
  wins of each shard), against a sweep of that cell alone on the same deals: its tasks' time
  against the lone cell's kernel time and tasks' time (each worker's first task includes its
  start: imports, numba's cache), and the two runs' wall times.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def rule_cost(config_path: str, deals: int) -> dict:

    from pipeline.engine import kernel
    from pipeline.sweep import config, task
    from pipeline.sweep.stopping import Stopping, StopRule, strategy_pairs

    cfg = config.load(config_path, [f"deals={deals}"])
    cells, pairs = list(cfg.cells), strategy_pairs(cfg.cells)
    multiple = task.summary_batch_multiple()
    batch = task.deals_per_batch(cfg.shard_size, len(cells), multiple, cfg.record)
    warm = kernel.play(cfg.seed, 0, 1000, cells)["won"]  # compiled and imported
    task.StopTally.empty(len(cells), pairs).add(warm)
    kernel_seconds = tally_seconds = 0.0
    sample_deals, shard_tally, tally = 0, task.StopTally.empty(len(cells), pairs), None
    started = time.perf_counter()
    while time.perf_counter() - started < 20 or sample_deals < cfg.shard_size:
        count = min(batch, cfg.shard_size - sample_deals % cfg.shard_size)
        began = time.perf_counter()
        results = kernel.play(cfg.seed, sample_deals, count, cells)
        kernel_seconds += time.perf_counter() - began
        began = time.perf_counter()  # what a task adds: each batch counted
        shard_tally.add(results["won"])
        sample_deals += count
        if sample_deals % cfg.shard_size == 0:
            tally = shard_tally.entry()
            shard_tally = task.StopTally.empty(len(cells), pairs)
        tally_seconds += time.perf_counter() - began
    shards = -(-deals // cfg.shard_size)
    rule = StopRule(win_rate=1e-9, comparisons="decided" if pairs else None)  # never met
    stopping = Stopping(rule, cells, deals)
    began = time.perf_counter()
    for _ in range(shards):  # the driver's part: each shard fed to the sequences
        stopping.add(cfg.shard_size, tally["wins"], tally["pairs"])
    check_seconds = time.perf_counter() - began
    scale = deals / sample_deals
    return {
        "config": config_path,
        "cells": len(cells),
        "comparisons": len(pairs),
        "deals": deals,
        "shards": shards,
        "kernel_seconds": round(kernel_seconds * scale, 2),
        "tally_seconds": round(tally_seconds * scale, 3),
        "check_seconds": round(check_seconds, 4),
        "share": round((tally_seconds * scale + check_seconds) / (kernel_seconds * scale), 5),
    }


def timed_run(config: Path, *sets: str) -> float:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", "from pipeline.cli import cli; cli()", "run", str(config)]
        + [f"--set={s}" for s in sets],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise SystemExit(done.stderr[-2000:])
    return time.monotonic() - started


def grow_cost(config_path: str, deals: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="clocksweep-grow-") as work:
        grown, fresh = Path(work) / "grown", Path(work) / "fresh"
        first = timed_run(config_path, f"deals={deals}", f"output={grown}")
        grow = timed_run(config_path, f"deals={2 * deals}", f"output={grown}")
        whole = timed_run(config_path, f"deals={2 * deals}", f"output={fresh}")
    return {
        "first_seconds": round(first, 2),
        "grow_seconds": round(grow, 2),
        "fresh_seconds": round(whole, 2),
        "grow_over_fresh_less_first": round(grow / (whole - first), 3) if whole > first else None,
    }


def entries_of(directory: Path) -> list[dict]:
    manifest = json.loads((directory / "manifest.json").read_text())
    entries = list(manifest["shards"])
    for page in manifest["pages"]:
        entries += json.loads((directory / page["path"]).read_text())["shards"]
    return entries


def grow_cell_cost(config_path: str, deals: int) -> dict:
    import tomllib

    strategies = tomllib.loads(Path(config_path).read_text())["grid"]["strategy"]
    fewer = ",".join(strategies[:-1])
    with tempfile.TemporaryDirectory(prefix="clocksweep-grow-cell-") as work:
        grown, alone = Path(work) / "grown", Path(work) / "alone"
        common = [f"deals={deals}"]
        first = timed_run(config_path, *common, f"grid.strategy={fewer}", f"output={grown}")
        grow = timed_run(config_path, *common, f"output={grown}")
        lone = timed_run(
            config_path,
            *common,
            "grid.variant=one_swap",
            f"grid.strategy={strategies[-1]}",
            f"output={alone}",
        )
        added = entries_of(grown / "cells-1")
        single = entries_of(alone)
    task_seconds = sum(entry["seconds"] for entry in added)
    kernel_alone = sum(entry["kernel_seconds"] for entry in single)
    return {
        "cell": f"one_swap {strategies[-1]}",
        "deals": deals,
        "first_seconds": round(first, 2),
        "grow_seconds": round(grow, 2),
        "alone_seconds": round(lone, 2),
        "grow_tasks_seconds": round(task_seconds, 2),
        "grow_kernel_seconds": round(sum(entry["kernel_seconds"] for entry in added), 2),
        "alone_kernel_seconds": round(kernel_alone, 2),
        "alone_tasks_seconds": round(sum(entry["seconds"] for entry in single), 2),
        "grow_tasks_over_alone_kernel": round(task_seconds / kernel_alone, 3),
        "grow_tasks_over_alone_tasks": round(
            task_seconds / sum(entry["seconds"] for entry in single), 3
        ),
        "grow_wall_over_alone_wall": round(grow / lone, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "configs" / "strategies.toml"))
    parser.add_argument("--deals", type=float, default=1e8)
    parser.add_argument("--grow", type=float, default=2e7, help="0: skip the growing runs")
    parser.add_argument("--cell-only", action="store_true", help="growing by a cell alone")
    args = parser.parse_args()
    if not args.cell_only:
        print(json.dumps(rule_cost(args.config, int(args.deals))))
        if args.grow:
            print(json.dumps(grow_cost(args.config, int(args.grow))))
    if args.grow:
        print(json.dumps(grow_cell_cost(args.config, int(args.grow))))


if __name__ == "__main__":
    main()
