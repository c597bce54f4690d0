"""Time to first result, and throughput, as a user meets them: `clocksweep run`'s wall time.

    python benchmarks/first_result_bench.py [--runs 3] [--skip-large] [--without-early]
        [--without-split]

Each figure is measured in this one run, each command in a process of its own, nothing else
meant to run beside it:

- **Ray's own start and stop**: a process that imports Ray, starts a local instance as
  `ray.init()` does by default, and stops it; run just before each sweep, and paired with it
  (this machine's speed drifts by tens of percent from minute to minute).
- **The kernel's rates**: its single-core rate on standard deals and on `strategies.toml`'s
  cells (`kernel.play` in batches of 200,000 deals, 5 s), and the same in two processes side
  by side: the machine's real ceiling for two workers. Measured again in every round, and
  each sweep's ratios taken against its own round's rates.
- **The task's rate** for the two large sweeps: the sweep's own task (`task.write_shard`,
  records, tables, files and stop tally, as a worker plays a shard) in two processes side by
  side, without Ray, each after a small first shard. What the records themselves cost over
  the kernel (two tasks over two kernel processes) is then told apart from what the sweep
  loses to Ray, its workers' start and its tail (the sweep less Ray over two tasks).
- **The sweeps**, wall time: 2,000,000 standard deals in per-deal records (quick.toml's shard
  size); 10^8 standard deals in per-deal records in 5,000,000-deal shards; `strategies.toml`
  at 10^8 deals. For each: the wall time less the Ray start and stop run just before it, its
  rate against the two-process ceiling, and its end-to-end rate against twice the
  single-core rate.
  With ``--without-early``, each sweep also runs, in turn, with every shard left to Ray's
  workers (none played by the driver while Ray starts); with ``--without-split``, with every
  shard played whole (none in pieces at the sweep's end).
- **The fixed cost split** of the 2,000,000-deal sweep, from one more run in a process that
  times the driver's phases (`phases`): before Ray, Ray's start (the driver plays meanwhile),
  playing once Ray is up, Ray's stop.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from pipeline.sweep.driver import SPLIT_TAIL_ENV
from pipeline.sweep.early import ENABLED_ENV

ROOT = Path(__file__).resolve().parent.parent
# The installed command, as a user runs it (its console script, beside this Python).
COMMAND = str(Path(sys.executable).with_name("clocksweep"))

RAY_ALONE = """
import time
started = time.monotonic()
import ray
# A new local instance, as the sweep starts it: never one `ray start` left on this machine.
ray.init(address="local", include_dashboard=False, logging_level="warning")
up = time.monotonic()
ray.shutdown()
print(up - started, time.monotonic() - up)
"""

# The driver's phases, timed by wrapping the functions that begin them (in this child only).
PHASES = """
import json, sys, time
started = time.monotonic()
marks = {}
from pipeline.sweep import cluster, driver
real_connect, real_play, real_shutdown = driver.connect, driver.play_and_record, driver.shut_down
def connect(*args, **kwargs):
    marks["before_ray"] = time.monotonic() - started
    out = real_connect(*args, **kwargs)
    marks["ray_up"] = time.monotonic() - started
    return out
def play(*args, **kwargs):
    marks["play_from"] = time.monotonic() - started
    out = real_play(*args, **kwargs)
    marks["play_to"] = time.monotonic() - started
    return out
def shutdown(*args, **kwargs):
    marks["stop_from"] = time.monotonic() - started
    out = real_shutdown(*args, **kwargs)
    marks["stop_to"] = time.monotonic() - started
    return out
driver.connect, driver.play_and_record, driver.shut_down = connect, play, shutdown
from pipeline.sweep import config
cfg = config.load(sys.argv[1], sys.argv[2:])
import io
driver.run(cfg, fresh=True, stream=io.StringIO())
marks["end"] = time.monotonic() - started
print(json.dumps(marks))
"""

KERNEL = """
import sys, time
from pipeline.engine import kernel
from pipeline.sweep import config
cfg = config.load(sys.argv[1], sys.argv[2:])
cells = list(cfg.cells)
batch = 200_000
kernel.play(1, 0, 1000, cells)
deals, first, began = 0, 0, time.perf_counter()
while time.perf_counter() - began < 5:
    kernel.play(cfg.seed, first, batch, cells)
    first += batch
    deals += batch
print(deals / (time.perf_counter() - began))
"""

# The sweep's own task (`task.write_shard`, its stop tally included), without Ray: process k
# of n plays shards k, k + n, ... of the config's plan for 5 s (at least one shard), after a
# small shard that loads what a worker's first shard loads.
TASKS = """
import sys, tempfile, time
from pipeline.store.location import Location
from pipeline.store.plan import Shard
from pipeline.sweep import config, driver, task
from pipeline.sweep.stopping import tally_pairs
process, processes = int(sys.argv[1]), int(sys.argv[2])
cfg = config.load(sys.argv[3], sys.argv[4:])
plan, cells = driver.plan(cfg), tuple(cfg.cells)
with tempfile.TemporaryDirectory() as where:
    common = dict(
        location=Location(where), seed=cfg.seed, cells=cells, record=cfg.record,
        provenance=driver.provenance(cfg), attempt=1, tally_pairs=tuple(tally_pairs(cells)),
    )
    job = lambda shard: task.ShardJob(shard=shard, **common)
    task.write_shard(job(Shard(index=0, first=0, count=26_000)))
    deals, index, began = 0, process, time.perf_counter()
    while index < plan.count and (deals == 0 or time.perf_counter() - began < 5):
        task.write_shard(job(plan[index]))
        deals += plan[index].count
        index += processes
print(deals / (time.perf_counter() - began))
"""

STANDARD = ["grid.variant=standard", "record=deals"]
SWEEPS = {
    "2M standard, per-deal": ("configs/quick.toml", [*STANDARD, "deals=2000000"]),
    "1e8 standard, per-deal, 5M shards": (
        "configs/quick.toml",
        [*STANDARD, "deals=100000000", "shard_size=5000000"],
    ),
    "strategies.toml at 1e8": ("configs/strategies.toml", ["deals=100000000"]),
}


# The sweeps whose task is also timed alone (`TASKS`): those long enough to run at a rate.
TASK_CEILING = ("1e8 standard, per-deal, 5M shards", "strategies.toml at 1e8")


def timed(command: list[str], switches: dict | None = None) -> tuple[float, str]:
    env = {**os.environ, ENABLED_ENV: "1", SPLIT_TAIL_ENV: "1", **(switches or {})}
    started = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=env)
    if done.returncode:
        raise SystemExit(done.stderr[-3000:])
    return time.monotonic() - started, done.stdout


def ray_alone() -> float:
    seconds, _ = timed([sys.executable, "-c", RAY_ALONE])
    return seconds


def side_by_side(commands: list[list[str]], env: dict | None = None) -> float:
    """The rates the scripts print (``[script, *args]``, one process each, all at once), summed."""
    running = [
        subprocess.Popen(
            [sys.executable, "-c", *command],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        for command in commands
    ]
    return sum(float(proc.communicate()[0]) for proc in running)


def kernel_rate(config: str, sets: list[str], processes: int) -> float:
    return side_by_side([[KERNEL, config, *sets]] * processes)


def task_rate(
    config: str, sets: list[str], processes: int, script: str = TASKS, env: dict | None = None
) -> float:
    """`TASKS` (or a variant of it) in ``processes`` processes, each its share of the shards."""
    return side_by_side(
        [[script, str(k), str(processes), config, *sets] for k in range(processes)], env
    )


def sweep_wall(config: str, sets: list[str], output: Path, switches: dict | None = None) -> float:
    command = [COMMAND, "run", config, "--fresh", f"--set=output={output}"]
    seconds, _ = timed(command + [f"--set={s}" for s in sets], switches)
    return seconds


def phases(config: str, sets: list[str], output: Path) -> dict:
    _, out = timed([sys.executable, "-c", PHASES, config, f"output={output}", *sets])
    marks = json.loads(out.strip().splitlines()[-1])
    return {
        "before_ray": round(marks["before_ray"], 2),
        "ray_start": round(marks["ray_up"] - marks["before_ray"], 2),
        "before_play": round(marks["play_from"] - marks["ray_up"], 2),
        "play": round(marks["play_to"] - marks["play_from"], 2),
        "ray_stop": round(marks["stop_to"] - marks["stop_from"], 2),
        "total": round(marks["end"], 2),
    }


def span(values: list[float], digits: int = 2) -> str:
    low, high = min(values), max(values)
    return f"{low:.{digits}f}" if low == high else f"{low:.{digits}f}-{high:.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-large", action="store_true", help="the 2M sweep alone")
    parser.add_argument("--work", default="/tmp/clocksweep-first-result")
    parser.add_argument(
        "--without-early",
        action="store_true",
        help=f"each sweep also with {ENABLED_ENV}=0 (every shard left to Ray), in turn",
    )
    parser.add_argument(
        "--without-split",
        action="store_true",
        help=f"each sweep also with {SPLIT_TAIL_ENV}=0 (every shard played whole), in turn",
    )
    args = parser.parse_args()
    work = Path(args.work)
    sweeps = {k: v for k, v in SWEEPS.items() if not args.skip_large or k.startswith("2M")}
    # Warm numba's cache and the page cache: the first run of a tree compiles the kernel.
    sweep_wall(*SWEEPS["2M standard, per-deal"], work / "warm")
    variants = {"": {}}
    if args.without_early:
        variants[f", {ENABLED_ENV}=0"] = {ENABLED_ENV: "0"}
    if args.without_split:
        variants[f", {SPLIT_TAIL_ENV}=0"] = {SPLIT_TAIL_ENV: "0"}
    ray_seconds, walls = [], {(name, v): [] for name in sweeps for v in variants}
    for _ in range(args.runs):  # interleaved, so that a drift of the machine touches all
        rates = {}  # by the cells played: the sets other than the deals and shards
        for name, (config, sets) in sweeps.items():
            cells = (config, *(s for s in sets if not s.startswith(("deals=", "shard_size="))))
            if cells not in rates:
                rates[cells] = (kernel_rate(config, sets, 1), kernel_rate(config, sets, 2))
            tasks = task_rate(config, sets, 2) if name in TASK_CEILING else None
            for label, switches in variants.items():
                ray_seconds.append(ray_alone())
                wall = sweep_wall(config, sets, work / "sweep", switches)
                walls[name, label].append((wall, ray_seconds[-1], *rates[cells], tasks))
    ray_mid = statistics.median(ray_seconds)
    print(f"Ray's own start and stop: {span(ray_seconds)} s (median {ray_mid:.2f})")
    for (name, label), runs in walls.items():
        sets = sweeps[name][1]
        deals = next(int(s.split("=")[1]) for s in sets if s.startswith("deals="))
        task_figures = {}
        if name in TASK_CEILING:
            task_figures = {
                "task_two_processes": span([tasks for *_, tasks in runs], 0),
                "two_tasks_over_two_kernel_processes": span(
                    [tasks / two for *_, two, tasks in runs], 3
                ),
                "less_ray_over_two_tasks": span(
                    [deals / (w - ray) / tasks for w, ray, _, _, tasks in runs], 3
                ),
            }
        print(
            json.dumps(
                {
                    "sweep": name + label,
                    "wall_seconds": span([w for w, *_ in runs]),
                    "over_ray_seconds": span([w - ray for w, ray, *_ in runs]),
                    "kernel_one_core": span([one for _, _, one, _, _ in runs], 0),
                    "kernel_two_processes": span([two for _, _, _, two, _ in runs], 0),
                    "end_to_end_over_2x_one_core": span(
                        [deals / w / (2 * one) for w, _, one, _, _ in runs], 3
                    ),
                    "less_ray_over_two_processes": span(
                        [deals / (w - ray) / two for w, ray, _, two, _ in runs], 3
                    ),
                    **task_figures,
                    "runs (wall, ray, one core, two, two tasks)": [
                        [round(w, 2), round(ray, 2), round(one), round(two), tasks and round(tasks)]
                        for w, ray, one, two, tasks in runs
                    ],
                }
            )
        )
    config, sets = SWEEPS["2M standard, per-deal"]
    print(json.dumps({"fixed_cost_split": phases(config, sets, work / "phases")}))


if __name__ == "__main__":
    main()
