"""Helpers the test modules share: `clocksweep` in this process as a user types it, a config
file, a free port on loopback, a file of exact totals forged."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from click.testing import CliRunner, Result

from pipeline.cli import cli


def clocksweep(*args, task=None, stdin: str | None = None) -> Result:
    """`clocksweep ARGS` in this process; ``task``: what each shard runs (faults.py)."""
    obj = {"task": task} if task is not None else None
    return CliRunner().invoke(cli, [*map(str, args)], obj=obj, input=stdin)


def sweep_cli(config_file, out, *sets: str, task=None, fresh: bool = False) -> Result:
    """`clocksweep run CONFIG --set output=OUT --set SET...` (and --fresh)."""
    overrides = [f"--set=output={out}", *(f"--set={item}" for item in sets)]
    return clocksweep("run", config_file, *overrides, *(["--fresh"] if fresh else []), task=task)


def validate_cli(results) -> Result:
    return clocksweep("validate", results)


def report_cli(results, *options: str) -> Result:
    """`clocksweep report RESULTS` (by default without plots or replayed deals: quicker)."""
    return clocksweep("report", results, *(options or ("--no-plots", "--replay", "0")))


def config_file(directory: Path, text: str, name: str = "t.toml") -> Path:
    path = Path(directory) / name
    path.write_text(text)
    return path


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def forge_exact_total(path: Path) -> None:
    """A file of exact totals (`exact_cache`) forged as a probe forged one (issue 45): its
    first row's largest total raised by about 1%, by a multiple of RAND_GRID (as a total of
    a strategy that does not read rand is), and its checksum made again as the cache makes
    it (an unkeyed sha256, which anyone can recompute)."""
    from pipeline.engine import exact_cache, rules

    kept = json.loads(path.read_text())
    row = kept["totals"][0]
    down = max(range(len(row)), key=row.__getitem__)
    row[down] += max(1, row[down] // 100 // rules.RAND_GRID) * rules.RAND_GRID
    kept["checksum"] = exact_cache._checksum(kept["identity"], kept["totals"])
    path.write_text(json.dumps(kept))
