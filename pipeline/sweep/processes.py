"""This machine's processes as Linux's /proc shows them: what a process started, and theirs,
found by parent; a process named by its pid and its start time, so that a pid reused by a
later process is never taken for it. Nothing here imports more than the standard library:
the watchdog (`pipeline.sweep.watchdog`) is a process of its own that must start at once."""

from __future__ import annotations

import os
import signal

Process = tuple[int, int]  # (pid, start time in clock ticks since boot)


def stat_fields(pid: str | int) -> list[bytes] | None:
    """The fields of /proc/PID/stat after the name (read as bytes: a name is any bytes), or
    None if there is no such process: state, parent, ..., utime and stime (the 12th and
    13th), ..., start time (the 20th)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None


def command_line(pid: int) -> bytes:
    """A process's command line, its words separated by NUL (b"" if there is none)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read()
    except OSError:
        return b""


def parents() -> dict[Process, int]:
    """Every process running (not a zombie), with its parent's pid."""
    found = {}
    for entry in os.scandir("/proc") if os.path.isdir("/proc") else ():
        if entry.name.isdigit() and (fields := stat_fields(entry.name)) and fields[0] != b"Z":
            found[int(entry.name), int(fields[19])] = int(fields[1])
    return found


def descendants_of(root: int) -> set[Process]:
    """The processes ``root`` started, and theirs, still running (none known but on Linux)."""
    by_parent = parents()
    found: set[Process] = set()
    frontier = {root}
    while frontier:
        children = {process for process, parent in by_parent.items() if parent in frontier}
        children -= found
        found |= children
        frontier = {pid for pid, _ in children}
    return found


def descendants() -> set[int]:
    """The pids of the processes this one started, and theirs, still running."""
    return {pid for pid, _ in descendants_of(os.getpid())}


def running(pid: int) -> bool:
    """Whether process ``pid`` is running (not ended, nor ended and unreaped)."""
    fields = stat_fields(pid)
    return fields is not None and fields[0] != b"Z"


def alive(process: Process) -> bool:
    """Whether ``process`` runs still: its pid running, and not reused since."""
    fields = stat_fields(process[0])
    return fields is not None and fields[0] != b"Z" and int(fields[19]) == process[1]


def kill(processes: set[Process], number: int = signal.SIGKILL) -> None:
    """Send ``number`` to each of ``processes`` still running as itself."""
    for process in processes:
        if alive(process):
            try:
                os.kill(process[0], number)
            except OSError:
                pass
