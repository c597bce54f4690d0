"""Helpers the test modules share: `clocksweep` in this process as a user types it, a config
file, a free port on loopback."""

from __future__ import annotations

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
