"""Benchmark of `clocksweep report` (figures, not assertions): time and peak memory.

Builds results directories with the sweep's own shard writer (`shard_task.write_shard`), manifest
(`manifest.Manifest`) and run record (`sweep.start_run_record`), playing the shards in a
process pool instead of Ray, then runs
`clocksweep report` in a fresh process and reports its wall time and peak resident memory.

    python benchmarks/report_bench.py                     # both benchmarks, default sizes
    python benchmarks/report_bench.py deals --deals 1041667 --shard-size 52084
    python benchmarks/report_bench.py summary --deals 20000000 --shard-size 1000000
    python benchmarks/report_bench.py summarise           # summary.summarise alone
    python benchmarks/report_bench.py summary --no-plots  # the report without its five plots

Targets (issue 4): a report over 1e8 per-deal rows in under 10 s with under 2 GB; over
summary records in under 2 s. ``--keep DIR`` keeps (and reuses) the generated data.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor

from pipeline.sweep.config import FULL_GRID  # every name the rules know, from their one definition


def _play_shard(args):
    """One shard played and written by the sweep's own `shard_task.write_shard`: its manifest entry."""
    where, raw, index = args
    from dataclasses import replace

    from pipeline.store import location
    from pipeline.sweep import config as sweep_config
    from pipeline.sweep import driver as sweep
    from pipeline.sweep import task as shard_task

    config = sweep_config.from_dict(raw)
    job = shard_task.ShardJob(
        location=location.Location(where),
        shard=sweep.plan(config)[index],
        seed=config.seed,
        cells=tuple(config.cells),
        record=config.record,
        provenance=sweep.provenance(config),
        attempt=1,
    )
    return replace(shard_task.write_shard(job), node="local", attempts=1)


def write_results(where: str, raw: dict, workers: int = 2) -> dict:
    """A results directory for the config ``raw`` (a dict as TOML gives), built without Ray."""
    from pipeline.store import layout, location
    from pipeline.store.manifest import Manifest
    from pipeline.sweep import config as sweep_config
    from pipeline.sweep import driver as sweep

    raw = {**raw, "output": where}
    config = sweep_config.from_dict(raw)
    location = location.Location(where)
    shards = sweep.plan(config)
    record = sweep.start_run_record(config, None, None, shards.count, 0)
    location.write_json(layout.RUN_FILE, record.to_json())
    manifest = Manifest(location, config.hash)
    jobs = [(where, raw, shard.index) for shard in shards]
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            entries = list(pool.map(_play_shard, jobs))
    else:
        entries = [_play_shard(job) for job in jobs]
    for entry in entries:
        manifest.commit(entry)
    manifest.flush()
    record.runs[-1].update(finished=sweep.now(), status="complete")
    location.write_json(layout.RUN_FILE, record.to_json())
    return record.to_json()


_REPORT = """
import json, sys, time
start = time.perf_counter()
from pipeline.cli import build_report
made = build_report(sys.argv[1], int(sys.argv[2]), plots_enabled=sys.argv[3] == "1")
from pipeline.report import render
print(json.dumps({"phases": made.timings, "inside": round(time.perf_counter() - start, 2),
                  "summary": render.terminal_summary(made.document, made.directory).splitlines()[0]}))
"""


def timed_report(where: str, replay: int, plots: bool = True) -> dict:
    """The report (as `clocksweep report` makes it) in a fresh process: wall seconds, CPU
    seconds and peak memory (MB) of that process, and the seconds of each phase."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", _REPORT, where, str(replay), "1" if plots else "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate()
    seconds = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # fallback if wait4 found nothing
    if proc.returncode:
        raise SystemExit(f"report failed: {err}")
    usage = _usage_of(proc) or usage
    inside = json.loads(out.splitlines()[-1])
    return {
        "seconds": round(seconds, 2),
        "peak_mb": round(usage.ru_maxrss / 1024, 1),
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
        "plots": plots,
        **inside,
    }


_USAGE = {}


def _usage_of(proc):
    return _USAGE.get(proc.pid)


def _install_wait4():
    """Record each child's own resource usage (os.wait4) as subprocess reaps it."""
    original = os.waitpid

    def waitpid(pid, options):
        if pid > 0 and options == 0:
            reaped, status, usage = os.wait4(pid, 0)
            _USAGE[reaped] = usage
            return reaped, status
        return original(pid, options)

    subprocess.os.waitpid = waitpid  # only subprocess's own reference to os is patched


def rows_of(where: str) -> tuple[int, int]:
    from pipeline.store import validate

    entries = validate.open_results(where).entries.values()
    files = [f.to_json() for e in entries for f in e.files]
    import pyarrow.parquet as pq

    rows = sum(pq.read_metadata(os.path.join(where, f["path"])).num_rows for f in files)
    return rows, sum(f["bytes"] for f in files)


def bench(
    kind: str,
    deals: int,
    shard_size: int,
    keep: str | None,
    replay: int,
    workers: int,
    plots: bool = True,
) -> dict:
    where = os.path.join(keep or tempfile.mkdtemp(prefix="report-bench-"), kind)
    raw = {
        "name": f"bench-{kind}",
        "seed": 7,
        "deals": deals,
        "shard_size": shard_size,
        "record": kind,
        "grid": FULL_GRID,
    }
    built = None
    if not os.path.exists(os.path.join(where, "manifest.json")):
        start = time.perf_counter()
        write_results(where, raw, workers)
        built = round(time.perf_counter() - start, 1)
    rows, size = rows_of(where)
    figures = {
        "kind": kind,
        "deals": deals,
        "shards": -(-deals // shard_size),
        "rows_read": rows,
        "bytes": size,
        "built_seconds": built,
        **timed_report(where, replay, plots),
    }
    if not keep:
        shutil.rmtree(os.path.dirname(where))
    return figures


def bench_summarise(deals: int = 41_667) -> dict:
    """summary.summarise alone on one kernel batch of every cell (4M deal-cells by default)."""
    from pipeline.engine import kernel, rules
    from pipeline.records import summary

    cells = rules.all_cells()
    results = kernel.play(3, 0, deals, cells)
    summary.summarise(results, cells)
    best = min(_time(lambda: summary.summarise(results, cells)) for _ in range(5))
    return {
        "kind": "summarise",
        "deal_cells": deals * len(cells),
        "seconds": round(best, 4),
        "deal_cells_per_second": round(deals * len(cells) / best),
    }


def _time(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "which",
        nargs="*",
        default=["summarise", "deals", "summary"],
        choices=["summarise", "deals", "summary"],
    )
    parser.add_argument(
        "--deals",
        type=int,
        default=None,
        help="deals per benchmark (default: 1,041,667 for deals = 1e8 rows of 96 "
        "cells; 20,000,000 for summary)",
    )
    parser.add_argument("--shard-size", type=int, default=None)
    parser.add_argument(
        "--keep", default=None, help="keep the generated results here (and reuse them)"
    )
    parser.add_argument("--replay", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--no-plots", action="store_true", help="time the report without its plots")
    args = parser.parse_args()
    _install_wait4()
    for kind in args.which:
        if kind == "summarise":
            figures = bench_summarise()
        elif kind == "deals":
            figures = bench(
                "deals",
                args.deals or 1_041_667,
                args.shard_size or 52_084,
                args.keep,
                args.replay,
                args.workers,
                not args.no_plots,
            )
        else:
            figures = bench(
                "summary",
                args.deals or 20_000_000,
                args.shard_size or 1_000_000,
                args.keep,
                args.replay,
                args.workers,
                not args.no_plots,
            )
        print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main()
