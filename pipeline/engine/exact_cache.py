"""The exact totals of strategies of the user's, kept on disk once enumerated.

A counts-only strategy's exact value comes from playing it over every count vector
(`custom.count_totals`): a few seconds, or a minute or more for one that reads `rand` (46
calls a vector), which `clocksweep report` and `clocksweep odds` would otherwise spend on
every run. The totals are kept in the user's cache directory (`directory`), one JSON file per
strategy and deck, named by the sha256 of what decides them (the strategy's source digest,
the digest of the helpers it reaches, its name and what it sees, the deck, and `rand`'s law),
so a changed function is never given another's totals. A file is written whole or not at all
(a temporary file renamed over it), and one that does not hold what its name promises is not
trusted: the totals are enumerated again, the file replaced, and the process keeps why
(`recomputed`), for the report to say beside the value. What it promises is its checksum,
which a disk's or a crash's damage breaks, and totals that are what the enumeration makes
them (`consistent`), which an edit breaks too: the checksum is an unkeyed sha256, which
whoever edits the totals can make again.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from functools import cache
from math import comb
from pathlib import Path

from pipeline.engine import rules

# Of the files and of what the enumeration sums; a new one makes new names, and the files
# of an old one are left unread. 2: the weight by the size of the pile chosen (1: its sums).
FORMAT = 2
ENVIRONMENT = "CLOCKSWEEP_CACHE"  # a directory to keep them in instead of the default
# Why this process did not trust the copy it found of the totals, by file (`recomputed`).
_recomputed: dict[Path, str] = {}


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


@cache
def _weights(ranks: int, suits: int, sizes: tuple[int, ...]) -> tuple[int, ...]:
    """For each U: the sum of prod C(suits, d_q) over the vectors d of ``ranks`` piles each
    holding one of ``sizes`` cards with sum U (the coefficients of (sum of C(suits, j) x^j
    over j in sizes) ** ranks)."""
    weights = [1] + [0] * (ranks * suits)
    for _ in range(ranks):
        weights = [
            sum(comb(suits, j) * weights[u - j] for j in sizes if 0 <= u - j)
            for u in range(ranks * suits + 1)
        ]
    return tuple(weights)


def consistent(totals, ranks: int, suits: int, reads_rand: bool) -> str | None:
    """The first way ``totals`` are not what `custom.count_totals` makes them for a strategy
    (reading `rand` or not) on a deck of ``ranks`` x ``suits``; None if none. By their
    making, row k - 1 at U sums prod C(suits, d_q) * P(d_p = k) * RAND_GRID over the vectors
    d with sum U, p a pile holding cards (a vector with none has none); so at U = 0 it is 0,
    else at least the weight of the vectors whose piles holding cards all hold k, at most
    that of those with a pile of k; a multiple of RAND_GRID, all of rand's chance, if the
    strategy does not read it; and the rows at U sum to RAND_GRID x C(ranks x suits, U),
    the weight of every vector with sum U (Vandermonde's identity)."""
    n, grid = ranks * suits, rules.RAND_GRID
    if not (
        isinstance(totals, (list, tuple))
        and len(totals) == suits
        and all(isinstance(row, (list, tuple)) and len(row) == n + 1 for row in totals)
        and all(type(t) is int and t >= 0 for row in totals for t in row)
    ):
        return f"the totals are not {suits} rows of {n + 1} whole numbers >= 0"
    every = _weights(ranks, suits, tuple(range(suits + 1)))
    for k, row in enumerate(totals, 1):
        if row[0]:
            return f"piles of {k} chosen at U = 0 weigh {row[0]}, not 0: no vector is played"
        without = _weights(ranks, suits, tuple(j for j in range(suits + 1) if j != k))
        only = _weights(ranks, suits, (0, k))  # every pile that holds cards holds k
        for u in range(1, n + 1):
            low, high = grid * only[u], grid * (every[u] - without[u])
            if not low <= row[u] <= high:
                return f"piles of {k} chosen at U = {u} weigh {row[u]}, not in {low}..{high}"
            if not reads_rand and row[u] % grid:
                return (
                    f"piles of {k} chosen at U = {u} weigh {row[u]}, not a multiple of "
                    f"RAND_GRID ({grid}), for a strategy that does not read rand"
                )
    for u in range(1, n + 1):
        weight = sum(row[u] for row in totals)
        if weight != grid * every[u]:
            return f"at U = {u} the totals weigh {weight}, not RAND_GRID x C({n}, {u})"
    return None


def _read(path: Path, identity: dict, strategy: rules.Custom) -> tuple[tuple | None, str | None]:
    """The totals the file keeps, and None; or None, and why they are not trusted (None too
    if there is no file)."""
    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
        totals, checksum = kept["totals"], kept["checksum"]
        if kept["identity"] != identity:
            return None, "it holds another strategy's or deck's"
    except FileNotFoundError:
        return None, None
    except OSError:
        return None, "it cannot be read"
    except (ValueError, KeyError, TypeError):
        return None, "it is not a file of totals"
    if checksum != _checksum(identity, totals):
        return None, "its checksum does not match"
    reads_rand = "rand" in strategy.sees
    broken = consistent(totals, identity["ranks"], identity["suits"], reads_rand)
    if broken is not None:
        return None, broken
    return tuple(tuple(row) for row in totals), None


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


def recomputed(strategy: rules.Custom, ranks: int, suits: int) -> str | None:
    """Why the copy found on disk of these totals was not trusted, if this process found one
    and enumerated them again (`count_totals`); else None."""
    return _recomputed.get(path_of(strategy, ranks, suits))


def count_totals(strategy: rules.Custom, ranks: int, suits: int) -> tuple[tuple[int, ...], ...]:
    """`custom.count_totals`, read from the file that keeps them if it holds them; else
    enumerated (saying so in one line, with how long it should take, and why the copy kept
    was not trusted, if there was one) and kept."""
    from pipeline.engine import custom

    path = path_of(strategy, ranks, suits)
    identity = _identity(strategy, ranks, suits)
    kept, distrusted = _read(path, identity, strategy)
    if kept is not None:
        return kept
    rand_values = len(custom.rand_law(strategy)[0])

    def started(seconds: float) -> None:
        played = f"{(suits + 1) ** ranks:,} count vectors" + (
            f" x {rand_values} values of rand" if rand_values > 1 else ""
        )
        say(
            f"exact value of {strategy.name}: enumerating {played}, "
            + (f"about {seconds:,.0f} s" if seconds >= 1 else "under a second")
            + f", once; kept in {path.parent}"
            + (f" (the copy kept there was damaged: {distrusted})" if distrusted else "")
        )

    totals = custom.count_totals(strategy, ranks, suits, started)
    if distrusted is not None:
        _recomputed[path] = distrusted
    _write(path, identity, totals)
    return totals
