"""Test helpers: find and end the processes of a Ray instance the tests started themselves.

By pid, found by a marker (the instance's own temp dir, RAY_TMPDIR) in their command line or
among their open files and working directory (Ray's agents rename their command line, as
ray::DashboardAgent), never `ray stop --force`, which would end every Ray instance on the
machine.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path


def processes_mentioning(marker: str) -> list[int]:
    """Processes (other than this one) whose command line, working directory or an open file
    names ``marker``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker.encode() in (entry / "cmdline").read_bytes():
                pids.append(int(entry.name))
                continue
            links = [os.readlink(entry / "cwd")]
            links += [os.readlink(fd) for fd in (entry / "fd").iterdir()]
        except OSError:
            continue
        if any(link.startswith(marker) for link in links):
            pids.append(int(entry.name))
    return pids


def end_processes(marker: str, rounds: int = 10, remove: bool = False) -> None:
    """Kill the processes that `processes_mentioning` finds; optionally remove ``marker``."""
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
