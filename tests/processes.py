"""Test helpers: find and end the processes of a Ray instance the tests started themselves.

By pid and by a marker in their command line (the instance's own temp dir), never
`ray stop --force`, which would end every Ray instance on the machine.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path


def processes_mentioning(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def end_processes(marker: str, rounds: int = 10, remove: bool = False) -> None:
    """Kill the processes whose command line mentions ``marker``; optionally remove it."""
    for _ in range(rounds):
        pids = processes_mentioning(marker)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.3)
    if remove:
        shutil.rmtree(marker, ignore_errors=True)
