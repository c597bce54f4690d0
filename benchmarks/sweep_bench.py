"""Sweep benchmark: the pipeline's rate against the kernel's, bytes per row, driver memory.

    python benchmarks/sweep_bench.py                    # 100M standard deals, deals mode
    python benchmarks/sweep_bench.py --strategies 1e9   # and configs/strategies.toml

Figures, not assertions (the machine may be shared; the load average is printed):

- kernel: the kernel's single-core rate on standard deals (`bench.kernel_rate`), measured
  before and after the sweeps, in this process (best of its batches); its sustained rate
  over 10 s in the sweep's batch size; and that summed over ``--cpus`` processes at once,
  which shows what the machine gives when every core is busy (on a VM whose vCPUs share a
  core, much less than twice one core).
- sweep: `sweep.run` on a fresh local Ray instance in its own driver process, over
  ``--cpus`` CPUs; the rate counts from the first task submitted to the last shard committed
  (Ray's start excluded; the total wall time is given too). ratio = sweep rate / (kernel
  rate x CPUs): 1.0 would mean Ray, table building and Parquet cost nothing.
- the sweep's rate against the kernel's within it (deals over seconds in `kernel.play`, in the
  tasks after each worker's first): the one ratio that the VM's drift does not move.
- the split of the sweep's CPU time (CPUs x its duration), from the manifest's per-shard
  seconds: the kernel and the rest of the tasks at their steady per-deal cost (shards after
  each worker's first), the workers' start (the first shards' excess: imports, numba's cache)
  and idling. Taken within the one run, it does not move with the VM's speed, which the
  ratios to kernel rates measured before and after do (this VM drifts by 15-30%).
- bytes per row of the Parquet written, and the driver's peak RSS for a small and a large
  sweep with the same shard size: flat memory means the driver holds no rows.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def driver(args: argparse.Namespace) -> None:
    """One sweep in this process (run as a child of the benchmark): prints its figures as JSON."""
    from pipeline.store import validate
    from pipeline.sweep import config
    from pipeline.sweep import driver as sweep

    samples = []

    def sample_rss():
        page = os.sysconf("SC_PAGE_SIZE")
        while True:
            with open("/proc/self/statm") as statm:
                samples.append(int(statm.read().split()[1]) * page)
            time.sleep(0.5)

    threading.Thread(target=sample_rss, daemon=True).start()
    cfg = config.load(args.config, args.set)
    started = time.monotonic()
    outcome = sweep.run(cfg, fresh=True, stream=open(os.devnull, "w"))
    shards = [e.to_json() for e in validate.open_results(cfg.output).entries.values()]
    # A local run submits shards in index order, so shards 0..cpus-1 are each worker's first:
    # their excess over the steady per-deal cost is the workers' start (imports, numba's cache).
    cpus = int(cfg.ray.get("num_cpus") or os.cpu_count())
    steady = [entry for entry in shards if entry["index"] >= cpus] or shards
    steady_per_deal = sum(e["seconds"] for e in steady) / sum(e["deals"] for e in steady)
    print(
        json.dumps(
            {
                "task_seconds": sum(entry["seconds"] for entry in shards),
                "kernel_seconds": sum(entry["kernel_seconds"] for entry in shards),
                "steady_task_seconds": sum(entry["seconds"] for entry in steady),
                "steady_kernel_seconds": sum(entry["kernel_seconds"] for entry in steady),
                "steady_deals": sum(entry["deals"] for entry in steady),
                "warmup_seconds": sum(
                    e["seconds"] - steady_per_deal * e["deals"] for e in shards if e["index"] < cpus
                ),
                "deals": outcome.deals,
                "cells": len(cfg.cells),
                "rows": outcome.rows,
                "bytes": outcome.row_bytes,
                "failed": outcome.failed,
                "wall_seconds": time.monotonic() - started,
                "play_seconds": outcome.play_seconds,
                "rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "rss_quartiles_mb": [
                    samples[int(q * (len(samples) - 1))] / 2**20 for q in (0, 0.25, 0.5, 0.75, 1)
                ]
                if samples
                else [],
            }
        )
    )


def sweep_once(config: str, sets: list[str]) -> dict:
    command = [sys.executable, __file__, "--driver", config, *[f"--set={s}" for s in sets]]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"sweep failed: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def kernel_rate(seconds: float) -> float:
    """The kernel's best standard rate on one core (`pipeline.engine.bench`'s measure)."""
    from pipeline.engine import bench
    from pipeline.engine.rules import Cell

    return bench.kernel_rate([Cell()], seconds)


def kernel_sustained(seconds: float) -> float:
    """The kernel's standard rate on one core over ``seconds``, in the sweep's batch size."""
    from pipeline.engine import kernel
    from pipeline.engine.rules import Cell
    from pipeline.sweep import task as shard_task

    batch = shard_task.ROWS_PER_BATCH["deals"]

    kernel.play(1, 0, 1000, [Cell()])
    played, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        kernel.play(1, played, batch, [Cell()])
        played += batch
    return played / (time.perf_counter() - started)


def kernel_concurrent(processes: int, seconds: float) -> float:
    """The kernel's sustained standard rate summed over ``processes`` processes at once."""
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        return sum(pool.map(kernel_sustained, [seconds] * processes))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deals", type=float, default=100e6)
    parser.add_argument("--small", type=float, default=10e6, help="deals of the RSS comparison run")
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--shard-size", type=float, default=5e6)
    parser.add_argument(
        "--strategies",
        type=float,
        default=0,
        help="also run configs/strategies.toml on this many deals (0: skip)",
    )
    parser.add_argument("--out", default="/tmp/clocksweep-bench")
    parser.add_argument("--driver", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--set", action="append", default=[], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.driver:
        args.config = args.driver
        driver(args)
        return

    figures = {"load_average_before": os.getloadavg()}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    config_path = out / "standard.toml"
    config_path.write_text('name = "bench"\nseed = 1\ndeals = 1\nrecord = "deals"\n')
    common = [f"ray.num_cpus={args.cpus}", f"shard_size={int(args.shard_size)}"]

    figures["kernel_before"] = kernel_rate(5)
    figures["kernel_sustained"] = kernel_sustained(10)
    figures["kernel_concurrent"] = kernel_concurrent(args.cpus, 10)
    small = sweep_once(
        str(config_path), [*common, f"deals={int(args.small)}", f"output={out / 'small'}"]
    )
    large = sweep_once(
        str(config_path), [*common, f"deals={int(args.deals)}", f"output={out / 'large'}"]
    )
    figures["kernel_after"] = kernel_rate(5)
    figures["kernel_concurrent_after"] = kernel_concurrent(args.cpus, 10)
    kernel = (figures["kernel_before"] + figures["kernel_after"]) / 2
    concurrent = (figures["kernel_concurrent"] + figures["kernel_concurrent_after"]) / 2
    rate = large["deals"] / large["play_seconds"]
    figures.update(
        standard_small=small,
        standard_large=large,
        sweep_rate=rate,
        kernel_rate=kernel,
        ratio=rate / (kernel * args.cpus),
        ratio_to_sustained=rate / (figures["kernel_sustained"] * args.cpus),
        ratio_to_concurrent_kernel=rate / concurrent,
        bytes_per_row=large["bytes"] / large["rows"],
    )
    shutil.rmtree(out / "small", ignore_errors=True)
    shutil.rmtree(out / "large", ignore_errors=True)

    if args.strategies:
        result = sweep_once(
            str(ROOT / "configs" / "strategies.toml"),
            [
                f"ray.num_cpus={args.cpus}",
                f"deals={int(args.strategies)}",
                f"output={out / 'strategies'}",
            ],
        )
        result["projected_seconds_1e9"] = result["play_seconds"] * 1e9 / result["deals"]
        figures["strategies"] = result
        shutil.rmtree(out / "strategies", ignore_errors=True)
    figures["load_average_after"] = os.getloadavg()

    print(json.dumps(figures, indent=1))
    print(
        f"\nkernel, standard, one core: {kernel:,.0f} deals/s "
        f"(before {figures['kernel_before']:,.0f}, after {figures['kernel_after']:,.0f})"
    )
    print(
        f"sweep of {large['deals']:,} standard deals on {args.cpus} CPUs: {rate:,.0f} deals/s "
        f"from the first shard on ({large['play_seconds']:.1f} s; {large['wall_seconds']:.1f} s "
        "in all)"
    )
    print(
        f"kernel sustained on one core: {figures['kernel_sustained']:,.0f} deals/s; in "
        f"{args.cpus} processes at once: {concurrent:,.0f} deals/s (before "
        f"{figures['kernel_concurrent']:,.0f}, after {figures['kernel_concurrent_after']:,.0f}; "
        f"{figures['kernel_concurrent'] / (figures['kernel_sustained'] * args.cpus):.2f} of "
        f"one core's x {args.cpus})"
    )
    print(
        f"sweep rate / (kernel best x {args.cpus}): {figures['ratio']:.2f}; / (kernel sustained "
        f"x {args.cpus}): {figures['ratio_to_sustained']:.2f}; / kernel in {args.cpus} "
        f"processes at once: {figures['ratio_to_concurrent_kernel']:.2f}"
    )
    # The kernel's rate in the sweep's own tasks, on the same cores at the same time: the ratio
    # to it is what Ray, Parquet, the workers' start and idling leave, whatever the VM's speed.
    in_run_kernel = large["steady_deals"] / large["steady_kernel_seconds"]
    print(
        f"sweep rate / (the kernel's rate in this sweep's tasks, {in_run_kernel:,.0f} deals/s, "
        f"x {args.cpus}): {rate / (in_run_kernel * args.cpus):.2f}"
    )
    print(
        f"inside the tasks: {large['kernel_seconds']:.1f} s in the kernel of "
        f"{large['task_seconds']:.1f} s ({large['kernel_seconds'] / large['task_seconds']:.2f}); "
        f"tasks busy {large['task_seconds'] / (args.cpus * large['play_seconds']):.2f} of "
        f"{args.cpus} CPUs x {large['play_seconds']:.1f} s; after each worker's first shard, "
        f"{large['steady_kernel_seconds'] / large['steady_task_seconds']:.2f} in the kernel"
    )
    # The sweep's CPU time, at the steady per-deal costs, plus the workers' start and idling.
    budget = args.cpus * large["play_seconds"]
    scale = large["deals"] / large["steady_deals"]
    kernel_part = large["steady_kernel_seconds"] * scale
    rest_part = (large["steady_task_seconds"] - large["steady_kernel_seconds"]) * scale
    print(
        f"the sweep's {budget:.1f} CPU-seconds: kernel {kernel_part / budget:.1%}, table + "
        f"facts + Parquet + Ray in the tasks {rest_part / budget:.1%}, workers' start "
        f"{large['warmup_seconds'] / budget:.1%}, idle {(budget - large['task_seconds']) / budget:.1%}"
    )
    print(f"bytes per row: {figures['bytes_per_row']:.3f}")
    print(
        f"driver peak RSS: {small['rss_peak_mb']:.0f} MB at {small['deals']:,} deals, "
        f"{large['rss_peak_mb']:.0f} MB at {large['deals']:,} deals"
    )
    if args.strategies:
        s = figures["strategies"]
        print(
            f"strategies.toml on {s['deals']:,} deals: {s['play_seconds']:.1f} s "
            f"({s['deals'] / s['play_seconds']:,.0f} deals/s); a billion deals: "
            f"{s['projected_seconds_1e9'] / 60:.1f} min projected"
        )
    print(
        f"load average before {figures['load_average_before']}, after {figures['load_average_after']}"
    )


if __name__ == "__main__":
    main()
