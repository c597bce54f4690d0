"""The exact totals of strategies of the user's, kept on disk once enumerated.

A counts-only strategy's exact value comes from playing it over every count vector
(`custom.count_totals`): a few seconds, or a minute or more for one that reads `rand` (46
calls a vector), which `clocksweep report` and `clocksweep odds` would otherwise spend on
every run. The totals are kept in the user's cache directory (`directory`), one JSON file per
strategy and deck, named by the sha256 of what decides them (the strategy's source digest,
the digest of the helpers it reaches, its name and what it sees, the deck, and `rand`'s law),
so a changed function is never given another's totals. A file is written whole or not at all
(a temporary file renamed over it), and one that does not hold what its name promises,
checksum included, is not trusted: the totals are enumerated again and the file replaced.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

from pipeline.engine import rules

FORMAT = 1  # of the files and of what the enumeration sums; a new one makes new names
ENVIRONMENT = "CLOCKSWEEP_CACHE"  # a directory to keep them in instead of the default


def directory() -> Path:
    """Where the totals are kept: $CLOCKSWEEP_CACHE, else $XDG_CACHE_HOME/clocksweep, else
    ~/.cache/clocksweep."""
    if os.environ.get(ENVIRONMENT):
        return Path(os.environ[ENVIRONMENT]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "clocksweep"


def _identity(strategy: rules.Custom, ranks: int, suits: int) -> dict:
    identity = {
        "format": FORMAT,
        "strategy": strategy.name,
        "digest": strategy.digest,
        "sees": list(strategy.sees),
        "ranks": ranks,
        "suits": suits,
        "rand_law": [[str(value), str(chance)] for value, chance in rules.RAND_LAW],
    }
    if strategy.reaches:  # its helpers' (`reach`); absent, the names made before are kept
        identity["reaches"] = strategy.reaches
    return identity


def _checksum(identity: dict, totals: list) -> str:
    text = json.dumps([identity, totals], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def path_of(strategy: rules.Custom, ranks: int, suits: int) -> Path:
    """The file that keeps the totals of ``strategy`` on a deck of ``ranks`` x ``suits``."""
    identity = json.dumps(_identity(strategy, ranks, suits), sort_keys=True)
    name = hashlib.sha256(identity.encode()).hexdigest()[:32]
    return directory() / f"{strategy.name}-{name}.json"


def _read(path: Path, identity: dict, length: int) -> tuple[tuple[int, ...], ...] | None:
    """The totals the file keeps, or None if it is missing or not exactly what it should be."""
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
        totals = kept["totals"]
        if (
            kept["identity"] != identity
            or kept["checksum"] != _checksum(identity, totals)
            or len(totals) != 2
            or any(len(row) != length for row in totals)
            or not all(type(t) is int and t >= 0 for row in totals for t in row)
        ):
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return tuple(tuple(row) for row in totals)


def _write(path: Path, identity: dict, totals: tuple[tuple[int, ...], ...]) -> None:
    """Keep the totals: a temporary file beside the final one, renamed over it. A directory
    that cannot be written only means they are enumerated again next time."""
    rows = [list(row) for row in totals]
    text = json.dumps({"identity": identity, "totals": rows, "checksum": _checksum(identity, rows)})
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as file:
                file.write(text)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, path)
        except BaseException:
            os.unlink(temporary)
            raise
    except OSError:
        pass


def say(line: str) -> None:
    """What the user is told while the totals are enumerated: one line on stderr."""
    print(f"clocksweep: {line}", file=sys.stderr, flush=True)


def count_totals(strategy: rules.Custom, ranks: int, suits: int) -> tuple[tuple[int, ...], ...]:
    """`custom.count_totals`, read from the file that keeps them if it holds them; else
    enumerated (saying so in one line, with how long it should take) and kept."""
    from pipeline.engine import custom

    path = path_of(strategy, ranks, suits)
    identity = _identity(strategy, ranks, suits)
    kept = _read(path, identity, ranks * suits + 1)
    if kept is not None:
        return kept
    damaged = path.exists()
    rand_values = len(custom.rand_law(strategy)[0])

    def started(seconds: float) -> None:
        played = f"{(suits + 1) ** ranks:,} count vectors" + (
            f" x {rand_values} values of rand" if rand_values > 1 else ""
        )
        say(
            f"exact value of {strategy.name}: enumerating {played}, "
            + (f"about {seconds:,.0f} s" if seconds >= 1 else "under a second")
            + f", once; kept in {path.parent}"
            + (" (the copy kept there was damaged)" if damaged else "")
        )

    totals = custom.count_totals(strategy, ranks, suits, started)
    _write(path, identity, totals)
    return totals
