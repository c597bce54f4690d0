"""The content of a sweep and its report as three digests: what a change that must not change
behaviour (a refactor) shows to be equal before and after.

    python benchmarks/content_digest.py [--deals N] [--out DIR]

Runs `clocksweep run configs/quick.toml` (every variant and strategy) with N deals into DIR,
then `clocksweep report --no-plots`, and prints the sha256 of the per-deal rows (sorted, as
CSV), of report.json's `cells` and of its `claims`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parent.parent
SORT_KEY = ["order", "variant", "strategy", "finale", "depth", "deal"]


def clocksweep(*args: str) -> None:
    subprocess.run(
        [sys.executable, "-c", "from pipeline.cli import cli; cli()", *args],
        check=True,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
    )


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deals", type=int, default=200_000)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="clocksweep-digest-")) / "quick"
    clocksweep(
        "run",
        "configs/quick.toml",
        f"--set=deals={args.deals}",
        "--set=shard_size=50000",
        f"--set=output={out}",
        "--fresh",
    )
    clocksweep("report", str(out), "--no-plots")
    from pipeline.store.validate import committed_files

    rows = pl.scan_parquet(committed_files(str(out))).collect()
    labels = [name for name in SORT_KEY if name != "deal"]
    rows = rows.with_columns(pl.col(labels).cast(pl.String)).sort(SORT_KEY, nulls_last=True)
    document = json.loads((out / "report" / "report.json").read_text())
    print(
        json.dumps(
            {
                "deals": args.deals,
                "rows": rows.height,
                "rows_sha256": digest(rows.write_csv().encode()),
                "cells_sha256": digest(json.dumps(document["cells"], sort_keys=True).encode()),
                "claims_sha256": digest(json.dumps(document["claims"], sort_keys=True).encode()),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
