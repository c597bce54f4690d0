"""Claims about the game's odds as data: what a claim measures, on which cells, and the rule
that decides it, each stated once (docs/claims.md).

A claim (`Claim`) is a sentence someone published, its sources as a reader names them, a
measure (`MEASURES`: what is measured, on which cells, from which records) and an assertion
(`ASSERTIONS`: what the sentence says of the figure). `claim_file` reads a claims file into
these terms; the rule pages' own claims are such a file, shipped with the package.

Verdicts. A claim is decided on an interval at the claims' confidence
(`stats.CLAIM_CONFIDENCE`) by its assertion's rule: ``confirmed``, ``refuted`` or
``inconclusive``. A claim the sweep's cells or records cannot answer is ``not measured``. A
figure that is the best (or worst) of several cells, or the spread between them, can only
move one way with a cell the sweep did not play: a verdict drawn from some of them stands
only if it would stand with that end of the interval moved as far as it goes (`withheld`).

The measures that read win counts alone (a cell's win rate, a paired difference, the spread
of several cells) are decided here (`Claim.decide`), through an `Evidence`: the report's
fixed-n intervals (report/claims.py) or a stop rule's confidence sequences
(sweep/stopping.py), so that both decide the same thing. The other measures read deal
facts, runs of deals, cards turned or deaths, which only the report reads; the same
assertions decide them.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from itertools import product
from typing import ClassVar, Protocol

from pipeline.engine import rules
from pipeline.engine.rules import Cell
from pipeline.inference import stats

CONFIRMED, REFUTED, INCONCLUSIVE = "confirmed", "refuted", "inconclusive"
NOT_MEASURED = "not measured"
VERDICTS = (CONFIRMED, REFUTED, INCONCLUSIVE, NOT_MEASURED)
TOLERANCE = 0.005  # half a percentage point: "exact" and "no difference" are this close
LEVEL = stats.CLAIM_LEVEL  # the claims' confidence, as the rules print it ("99.9%")
# The records count wins in blocks of this many consecutive deals ("thirteen straight
# losses"): the only run length a claim can ask about (records.summary counts them).
RUN_BLOCK = 13

Interval = tuple[float, float]
SHARE, DIFFERENCE = (0.0, 1.0), (-1.0, 1.0)  # what a share and a paired difference span


def pct(x: float | None, digits: int = 2) -> str:
    """A share as a percentage, "n/a" for none."""
    if x is None or x != x:
        return "n/a"
    return f"{100 * x:.{digits}f}%"


@dataclass(frozen=True)
class Value:
    """A number a claim names, and the way its file wrote it ("1/13", or a share as "25%")."""

    number: float
    text: str

    @classmethod
    def of(cls, written: Fraction | float) -> Value:
        if isinstance(written, Fraction):
            return cls(float(written), f"{written.numerator}/{written.denominator}")
        return cls(float(written), f"{100 * written:.10g}%")


# --- Assertions: what a sentence says of its figure ------------------------------------------


@dataclass(frozen=True)
class Equals:
    """The figure is this value: confirmed once the interval holds it and is narrow."""

    value: Value
    tolerance: Value = Value.of(TOLERANCE)
    name: ClassVar[str] = "equals"

    def verdict(self, interval: Interval) -> str:
        low, high = interval
        if not low <= self.value.number <= high:
            return REFUTED
        return CONFIRMED if (high - low) / 2 <= self.tolerance.number else INCONCLUSIVE

    def aim(self, estimate: float) -> float:
        return self.tolerance.number

    def text(self) -> str:
        return (
            f"confirmed if {self.value.text} lies inside the {LEVEL} interval and its "
            f"half-width is at most {self.tolerance.text}; refuted if {self.value.text} lies "
            "outside it; otherwise inconclusive"
        )


@dataclass(frozen=True)
class Above:
    """The figure is more than this bound (strictly): an interval ending on the bound
    decides nothing."""

    bound: Value
    name: ClassVar[str] = "above"
    words: ClassVar[str] = "lies above"

    def verdict(self, interval: Interval) -> str:
        low, high = interval
        if low > self.bound.number:
            return CONFIRMED
        return REFUTED if high < self.bound.number else INCONCLUSIVE

    def aim(self, estimate: float) -> float:
        return max(abs(estimate - self.bound.number), TOLERANCE / 2)

    def text(self) -> str:
        opposite = "below" if self.name in ("above", "at_least") else "above"
        return (
            f"confirmed if the {LEVEL} interval {self.words} {self.bound.text}; refuted if it "
            f"lies {opposite} {self.bound.text}; otherwise inconclusive"
        )


@dataclass(frozen=True)
class AtLeast(Above):
    """The figure is at least this bound: an interval whose lower end is on it confirms."""

    name: ClassVar[str] = "at_least"
    words: ClassVar[str] = "starts at or above"

    def verdict(self, interval: Interval) -> str:
        low, high = interval
        if low >= self.bound.number:
            return CONFIRMED
        return REFUTED if high < self.bound.number else INCONCLUSIVE


@dataclass(frozen=True)
class Below(Above):
    """The figure is less than this bound (strictly)."""

    name: ClassVar[str] = "below"
    words: ClassVar[str] = "lies below"

    def verdict(self, interval: Interval) -> str:
        low, high = interval
        if high < self.bound.number:
            return CONFIRMED
        return REFUTED if low > self.bound.number else INCONCLUSIVE


@dataclass(frozen=True)
class AtMost(Above):
    """The figure is at most this bound: an interval whose upper end is on it confirms."""

    name: ClassVar[str] = "at_most"
    words: ClassVar[str] = "ends at or below"

    def verdict(self, interval: Interval) -> str:
        low, high = interval
        if high <= self.bound.number:
            return CONFIRMED
        return REFUTED if low > self.bound.number else INCONCLUSIVE


@dataclass(frozen=True)
class Between:
    """The figure lies between two values (both included)."""

    low: Value
    high: Value
    name: ClassVar[str] = "between"

    def verdict(self, interval: Interval) -> str:
        low, high = interval
        if high < self.low.number or low > self.high.number:
            return REFUTED
        inside = self.low.number <= low and high <= self.high.number
        return CONFIRMED if inside else INCONCLUSIVE

    def aim(self, estimate: float) -> float:
        nearest = min(abs(estimate - self.low.number), abs(estimate - self.high.number))
        return max(nearest, min(TOLERANCE, self.high.number - self.low.number) / 4)

    def text(self) -> str:
        span = f"{self.low.text} to {self.high.text}"
        return (
            f"confirmed if the {LEVEL} interval lies within {span}; refuted if it lies "
            f"wholly outside {span}; otherwise inconclusive"
        )


SIDES = ("both", "above", "below")


@dataclass(frozen=True)
class NoDifference:
    """A paired difference is nil: confirmed within +-tolerance, refuted when the interval
    excludes 0 (on ``side``: "both", or only "above" or "below" 0, when a difference the
    other way is not what the sentence denies)."""

    tolerance: Value = Value.of(TOLERANCE)
    side: str = "both"
    name: ClassVar[str] = "no_difference"

    def verdict(self, interval: Interval) -> str:
        low, high = interval
        if (self.side != "below" and low > 0) or (self.side != "above" and high < 0):
            return REFUTED
        within = -self.tolerance.number <= low and high <= self.tolerance.number
        return CONFIRMED if within else INCONCLUSIVE

    def aim(self, estimate: float) -> float:  # within the tolerance, or away from 0
        if abs(estimate) < self.tolerance.number / 2:
            return self.tolerance.number - abs(estimate)
        return abs(estimate)

    def text(self) -> str:
        excludes = {"both": "excludes 0", "above": "lies above 0", "below": "lies below 0"}
        return (
            f"refuted if the {LEVEL} paired interval {excludes[self.side]}; confirmed if it "
            f"lies within +-{self.tolerance.text}; otherwise inconclusive"
        )


@dataclass(frozen=True)
class Every:
    """A share is 0 (``never``) or 1 (``always``), or (``holds`` false) is not: decided on
    the exceptions counted, with the exact (Clopper-Pearson) interval. One exception refutes
    "never"/"always"; none confirms it once there were ``chances`` of them, or once the
    exact interval ends within ``tolerance`` of the asserted share."""

    share: int  # 0: never; 1: always
    holds: bool = True
    chances: int | None = None
    tolerance: Value | None = None
    name: ClassVar[str] = "never/always"

    @property
    def word(self) -> str:
        return "never" if self.share == 0 else "always"

    def exceptions(self, part: int, whole: int) -> int:
        """The counted deals (or wins, or deaths) that are not what never/always says."""
        return part if self.share == 0 else whole - part

    def enough(self, chances: int, interval: Interval | None) -> bool:
        """Whether no exception among these says "none": enough chances, or an exact
        interval within the tolerance of the asserted share."""
        if self.chances is not None:
            return chances >= self.chances
        if interval is None:
            return False
        far = interval[1] if self.share == 0 else 1 - interval[0]
        return far < self.tolerance.number

    def decide(self, part: int, whole: int, chances: int, interval, counts: bool = True) -> str:
        """The verdict on ``part`` of ``whole``; ``counts``: whether an exception can be
        taken at its word (a measure whose exceptions point at the records says not)."""
        if self.exceptions(part, whole):
            if not counts:
                return INCONCLUSIVE
            return REFUTED if self.holds else CONFIRMED
        if whole and self.enough(chances, interval):
            return CONFIRMED if self.holds else REFUTED
        return INCONCLUSIVE

    def verdict(self, interval: Interval) -> str:  # only ever decided on counts
        return INCONCLUSIVE

    def text(self) -> str:
        enough = (
            f"among at least {self.chances:,} chances"
            if self.chances is not None
            else f"and the exact {LEVEL} interval ends within {self.tolerance.text} of "
            + ("0" if self.share == 0 else "100%")
        )
        if self.holds:
            return (
                f"{self.word}: refuted by a single exception; confirmed if there is none, "
                f"{enough}; otherwise inconclusive"
            )
        return (
            f"not {self.word}: confirmed by an exception; refuted if there is none, {enough}; "
            "otherwise inconclusive"
        )


ASSERTIONS = {
    kind.name: kind for kind in (Equals, Above, AtLeast, Below, AtMost, Between, NoDifference)
}
ASSERTIONS.update(never=Every, always=Every)
Assertion = Equals | Above | Between | NoDifference | Every


def withheld(asserts: Assertion, interval: Interval, moves: int, span: Interval) -> bool:
    """Whether a verdict drawn from some of a claim's cells cannot stand for all of them: a
    cell not played could move the figure up (``moves`` +1: the best of them, their spread)
    or down (-1), so the verdict stands only if it holds with that end of the interval
    moved as far as it goes."""
    low, high = interval
    moved = (low, span[1]) if moves > 0 else (span[0], high)
    return asserts.verdict(moved) != asserts.verdict(interval)


# --- Which cells a claim reads ------------------------------------------------------------

# The axes of a claim's cells, in the order its lists expand (alternatives: first the
# variants, then within each its strategies, depths, finales and deal orders).
SPEC_AXES = ("variant", "strategy", "depth", "finale", "order")


@dataclass(frozen=True)
class Pattern:
    """One cell a claim names. A finale or deal order it leaves open (None) is filled by
    the rules' preference (`find`): round-robin before packets; finale down, with up
    standing in for a strategy that plays alike under both (none, or a counts-only one),
    and up for `informed`, which reads the face-up bottoms. An exchange's depth left open is
    the bottom."""

    variant: str
    strategy: str | None = None
    depth: str | None = None
    finale: str | None = None
    order: str | None = None

    def finales(self) -> tuple[str, ...]:
        if self.finale is not None:
            return (self.finale,)
        if self.strategy == "informed":
            return ("up",)
        if self.strategy is None or self.strategy in rules.COUNT_STRATEGIES:
            return ("down", "up")
        return ("down",)

    def cell(self, finale: str, order: str) -> Cell:
        """The cell of this pattern in that finale and order (RuleError if the rules refuse it)."""
        return Cell(self.variant, self.strategy, finale, order, self.depth)

    def find(self, cells: Collection[Cell]) -> Cell | None:
        """The sweep's cell of this pattern, by the rules' preference; None if it has none."""
        orders = (self.order,) if self.order else rules.ORDERS
        for finale in self.finales():
            for order in orders:
                try:
                    cell = self.cell(finale, order)
                except rules.RuleError:
                    return None
                if cell in cells:
                    return cell
        return None

    def matches(self, cell: Cell) -> bool:
        """Whether ``cell`` is of this pattern, whatever its finale and order if left open."""
        named = {axis: getattr(self, axis) for axis in SPEC_AXES}
        if self.variant == "exchange" and self.depth is None:
            named["depth"] = "bottom"
        return all(v is None or getattr(cell, a) == v for a, v in named.items()) and (
            cell.strategy == self.strategy
        )

    @property
    def text(self) -> str:
        parts = [self.variant, self.strategy, self.depth and f"depth={self.depth}"]
        parts += [self.finale and f"finale={self.finale}", self.order and f"order={self.order}"]
        return " ".join(part for part in parts if part)


def expand(spec: dict[str, tuple[str, ...]]) -> list[Pattern]:
    """Every cell a claim's table of axes names, in the order it lists them: strategies
    apply to the rescue variants only and depths to `exchange` only, as in a config's grid."""
    out = []
    for variant in spec["variant"]:
        strategies = spec.get("strategy", (None,)) if variant in rules.RESCUE_VARIANTS else (None,)
        depths = spec.get("depth", (None,)) if variant == "exchange" else (None,)
        finales, orders = spec.get("finale", (None,)), spec.get("order", (None,))
        for strategy, depth, finale, order in product(strategies, depths, finales, orders):
            pattern = Pattern(variant, strategy, depth, finale, order)
            if pattern not in out:
                out.append(pattern)
    return out


def found(patterns: Sequence[Pattern], cells: Collection[Cell]) -> list[Cell]:
    """The sweep's cells of ``patterns`` (`Pattern.find`), in their order, each once."""
    out = []
    for pattern in patterns:
        cell = pattern.find(cells)
        if cell is not None and cell not in out:
            out.append(cell)
    return out


def one_finale(cells: list[Cell]) -> list[Cell]:
    """Cells of one finale only: the finale changes only what `informed` reads, so standard
    and play_out cells of both finales play the very same deals, which must not count twice."""
    if not cells:
        return []
    first = min(cell.finale for cell in cells)
    return [cell for cell in cells if cell.finale == first]


def spec_text(patterns: Sequence[Pattern]) -> str:
    """The cells a claim names, for a reader: "one_swap {clockwise, most}, standard", the
    strategies of cells alike in all else in braces."""
    groups: dict[Pattern, list[str]] = {}
    for pattern in patterns:
        groups.setdefault(replace(pattern, strategy=None), []).append(pattern.strategy)
    out = []
    for rest, strategies in groups.items():
        text = rest.text.split(" ", 1)
        if strategies != [None]:
            named = strategies[0] if len(strategies) == 1 else "{" + ", ".join(strategies) + "}"
            text.insert(1, named)
        out.append(" ".join(text))
    return ", ".join(out)


def first_text(patterns: Sequence[Pattern]) -> str:
    """Cells of which the first the sweep has is read: "standard (else play_out)"."""
    rest = f" (else {spec_text(patterns[1:])})" if len(patterns) > 1 else ""
    return patterns[0].text + rest


# --- Measures: what is measured, on which cells -----------------------------------------------

Read = tuple[Cell, ...]  # one cell (its win rate) or two (a's win rate minus b's)
PICKS = ("first", "best", "worst")


class Evidence(Protocol):
    """What a claim is decided on: fixed-n intervals (the report) or confidence sequences (a
    stop rule), both at the claims' confidence."""

    def rate(self, cell: Cell) -> float:
        """The cell's win rate as measured so far (it ranks candidates)."""

    def interval(self, read: Read) -> Interval | None:
        """The interval of a cell's win rate, or of a's minus b's; None with no deals yet."""


def chosen(candidates: list[Cell], pick: str, rate) -> Cell:
    """The first candidate, or the one with the highest rate (the first of equals) or the
    lowest (the last of equals): the two ends of the candidates ranked by rate."""
    if pick == "first":
        return candidates[0]
    ranked = sorted(candidates, key=rate, reverse=True)
    return ranked[0] if pick == "best" else ranked[-1]


@dataclass(frozen=True)
class WinRate:
    """A cell's win rate: the first of ``cells`` the sweep has (the others stand in, in
    order), or the best or worst of them by win rate. Any record mode."""

    cells: tuple[Pattern, ...]
    pick: str = "first"
    name: ClassVar[str] = "win_rate"
    span: ClassVar[Interval] = SHARE
    tallied: ClassVar[bool] = True  # a stop rule's tallies carry what it reads

    @property
    def moves(self) -> int:
        """How the figure moves with a cell not played: +1 up, -1 down, 0 not at all."""
        return {"first": 0, "best": 1, "worst": -1}[self.pick]

    def candidates(self, cells: Collection[Cell]) -> list[Cell]:
        return found(self.cells, cells)

    def complete(self, candidates: list) -> bool:
        return len(candidates) == len(self.cells)

    def reads(self, candidates: list[Cell]) -> list[Read]:
        return [(cell,) for cell in candidates]

    def pick_read(self, candidates: list[Cell], rate) -> Read | None:
        return (chosen(candidates, self.pick, rate),) if candidates else None

    def describe(self) -> str:
        if self.pick == "first":
            return f"the win rate of {first_text(self.cells)}"
        return f"the win rate of the {self.pick} of {spec_text(self.cells)}"

    def needs(self) -> str:
        return f"a cell of {spec_text(self.cells)}"


@dataclass(frozen=True)
class Spread:
    """The paired difference of the two of ``cells`` with the highest and the lowest win
    rate (best minus worst), on the deals both played. Any record mode."""

    cells: tuple[Pattern, ...]
    name: ClassVar[str] = "spread"
    span: ClassVar[Interval] = DIFFERENCE
    tallied: ClassVar[bool] = True
    moves: ClassVar[int] = 1  # a cell not played can only widen the spread

    def candidates(self, cells: Collection[Cell]) -> list[Cell]:
        return found(self.cells, cells)

    def complete(self, candidates: list) -> bool:
        return len(candidates) == len(self.cells)

    def reads(self, candidates: list[Cell]) -> list[Read]:
        return [(a, b) for i, a in enumerate(candidates) for b in candidates[i + 1 :]]

    def pick_read(self, candidates: list[Cell], rate) -> Read | None:
        if len(candidates) < 2:
            return None
        return chosen(candidates, "best", rate), chosen(candidates, "worst", rate)

    def describe(self) -> str:
        return f"the best minus the worst win rate of {spec_text(self.cells)}, paired deal by deal"

    def needs(self) -> str:
        return f"at least two cells of {spec_text(self.cells)}, in one deal order"


@dataclass(frozen=True)
class Difference:
    """a's win rate minus b's on the same deals: for each of ``cells`` in turn (the others
    stand in, in order), the cell that adds ``a``'s axes, and the cells that add ``b``'s,
    in a's finale and deal order where b leaves them open; of b's, the first, best or worst
    by win rate. Cells on different deal orders are paired only when they differ in the
    order alone. Any record mode."""

    cells: tuple[Pattern, ...]
    a: tuple[tuple[str, str], ...]
    b: tuple[tuple[str, tuple[str, ...]], ...]
    pick: str = "first"
    name: ClassVar[str] = "difference"
    span: ClassVar[Interval] = DIFFERENCE
    tallied: ClassVar[bool] = True

    @property
    def moves(self) -> int:  # a's minus the best of b's can only fall with another b
        return {"first": 0, "best": -1, "worst": 1}[self.pick]

    def a_cell(self, shared: Pattern, cells: Collection[Cell]) -> Cell | None:
        return replace(shared, **dict(self.a)).find(cells)

    def b_cells(self, a: Cell, cells: Collection[Cell]) -> list[Cell]:
        """b's cells beside ``a``: a's axes, with b's own in their listed order."""
        names, lists = zip(*self.b)
        out = []
        for values in product(*lists):
            try:
                cell = replace(a, **dict(zip(names, values)))
            except rules.RuleError:
                continue
            if cell in cells and cell not in out:
                out.append(cell)
        return out

    def alternatives(self, cells: Collection[Cell]) -> list[tuple[Pattern, Cell, list[Cell]]]:
        """Each of ``cells`` the sweep can pair: (it, a's cell, b's cells), in order."""
        out = []
        for shared in self.cells:
            a = self.a_cell(shared, cells)
            bs = self.b_cells(a, cells) if a is not None else []
            if bs:
                out.append((shared, a, bs))
        return out

    def candidates(self, cells: Collection[Cell]) -> list[tuple[Pattern, Cell, list[Cell]]]:
        return self.alternatives(cells)[:1]

    def complete(self, candidates: list) -> bool:
        return bool(candidates) and len(candidates[0][2]) == len(
            list(product(*dict(self.b).values()))
        )

    def reads(self, candidates: list) -> list[Read]:
        return [(a, b) for _, a, bs in candidates for b in bs]

    def pick_read(self, candidates: list, rate) -> Read | None:
        if not candidates:
            return None
        _, a, bs = candidates[0]
        return a, chosen(bs, self.pick, rate)

    def side_text(self, side) -> str:
        return " ".join(
            f"{axis}={value if isinstance(value, str) else '|'.join(value)}" for axis, value in side
        )

    def describe(self) -> str:
        which = {"first": "", "best": "the best of ", "worst": "the worst of "}[self.pick]
        return (
            f"the win rate of {self.side_text(self.a)} minus that of {which}{self.side_text(self.b)}, "
            f"paired on the same deals, in {first_text(self.cells)}"
        )

    def needs(self) -> str:
        return (
            f"two cells of {first_text(self.cells)} played on the same deals, one with "
            f"{self.side_text(self.a)} and one with {self.side_text(self.b)}"
        )


class ReportedShare:
    """What the measures only the report reads have in common: their figure is a share, no
    tally of a stop rule carries it, and it needs one of the claim's cells."""

    cells: tuple[Pattern, ...]
    span: ClassVar[Interval] = SHARE
    tallied: ClassVar[bool] = False

    def needs(self) -> str:
        return f"a cell of {spec_text(self.cells)}"


# The deal facts a claim can select deals by: (lowest, highest value, whether only the
# standard cells' facts table keeps them).
FACTS = {
    "down_at_stop": (0, rules.N_CARDS - rules.PILE_SIZE, False),  # face down at the first death
    "kings_at_bottom": (0, rules.PILE_SIZE, True),  # hour piles with a king at the bottom
    "unvisited_at_third_king": (0, rules.N_HOURS, True),  # hour piles not yet taken from
}


@dataclass(frozen=True)
class WinRateWhere(ReportedShare):
    """The win rate of the first of ``cells`` the sweep has, among its deals whose ``fact``
    lies in ``low``..``high``. ``down_at_stop``: every cell, any record mode (the counts
    table). ``kings_at_bottom``, ``unvisited_at_third_king``: standard play only, counted on
    the sweep's first standard cell in both record modes (the facts table), or replayed from
    its first deals when it has none."""

    cells: tuple[Pattern, ...]
    fact: str
    low: int
    high: int
    name: ClassVar[str] = "win_rate_where"

    @property
    def selection(self) -> str:
        if self.low == self.high:
            return f"{self.fact} = {self.low}"
        return f"{self.low} <= {self.fact} <= {self.high}"

    def describe(self) -> str:
        return f"the win rate of {first_text(self.cells)} among the deals with {self.selection}"

    def needs(self) -> str:
        if FACTS[self.fact][2]:
            return (
                f"a standard cell (the shards count its {self.fact}), or a replay of the "
                "sweep's deals (report --replay N, with the deal scheme the sweep used)"
            )
        return super().needs()


@dataclass(frozen=True)
class LosingRuns(ReportedShare):
    """The share of blocks of ``n`` consecutive deal numbers without a win, in the first of
    ``cells`` the sweep has; n is 13, the blocks the records count (both record modes: per
    summarised batch, or per shard of per-deal rows; a partial block at the end is left
    out)."""

    cells: tuple[Pattern, ...]
    n: int = RUN_BLOCK
    name: ClassVar[str] = "losing_runs"

    def describe(self) -> str:
        return (
            f"the share of blocks of {self.n} consecutive deal numbers without a win, in "
            f"{first_text(self.cells)}"
        )


@dataclass(frozen=True)
class WinsTurning(ReportedShare):
    """The share of the won deals that turned exactly ``cards`` cards, over every cell of
    ``cells`` the sweep has, of one finale (both finales play the same deals). Any record
    mode (the turned table)."""

    cells: tuple[Pattern, ...]
    cards: int = rules.N_CARDS
    name: ClassVar[str] = "wins_turning"

    def describe(self) -> str:
        return (
            f"the share of the won deals of {spec_text(self.cells)} (one finale, every deal "
            f"order) that turned exactly {self.cards} cards"
        )


@dataclass(frozen=True)
class DeathsAsPredicted(ReportedShare):
    """The share of the deaths of the play_out cells the sweep has (one finale) that came
    where the rules predict (the first at the centre, each later one at the pile its chain
    restarted from); its chances are the later deaths. The rules rule out a death anywhere
    else, and the records (``stray_deaths``) do not tell a first death from a later one, so
    one decides nothing: it is named, and the claim is inconclusive. Any record mode."""

    cells: tuple[Pattern, ...]
    name: ClassVar[str] = "deaths_as_predicted"

    def describe(self) -> str:
        return (
            f"the share of the deaths of {spec_text(self.cells)} (one finale) where the rules "
            "predict them, the later deaths counted as its chances"
        )


MEASURES = {
    kind.name: kind
    for kind in (
        WinRate,
        Difference,
        Spread,
        WinRateWhere,
        LosingRuns,
        WinsTurning,
        DeathsAsPredicted,
    )
}
Measure = (
    WinRate | Difference | Spread | WinRateWhere | LosingRuns | WinsTurning | DeathsAsPredicted
)


# --- Claims -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """Where a claim was published, as a reader names it: a title, and a URL where there is one."""

    title: str
    url: str | None = None

    @property
    def text(self) -> str:
        return f'"{self.title}"' + (f" ({self.url})" if self.url else "")

    def record(self) -> dict:
        return {"title": self.title, "url": self.url}


@dataclass(frozen=True)
class Decision:
    read: Read
    interval: Interval | None
    verdict: str
    withheld: bool  # the measured verdict needs a cell the sweep did not play


@dataclass(frozen=True)
class Claim:
    """One claim: the sentence (``says``), its sources, what it measures on which cells
    (``measure``) and what it asserts of the figure (``asserts``)."""

    id: str
    says: str
    sources: tuple[Source, ...]
    measure: Measure
    asserts: Assertion

    @property
    def source_text(self) -> str:
        return "; ".join(source.text for source in self.sources)

    @property
    def rule(self) -> str:
        return f"{self.measure.describe()}; {self.asserts.text()}."

    def decide(self, cells: Collection[Cell], evidence: Evidence) -> Decision | None:
        """The verdict of a claim on win counts (`measure.tallied`) on a sweep's ``cells``;
        None if they cannot answer it."""
        return self.decide_among(self.measure.candidates(cells), evidence)

    def decide_among(self, candidates: list, evidence: Evidence) -> Decision | None:
        """`decide`, given the claim's candidates in the sweep (`measure.candidates`)."""
        read = self.measure.pick_read(candidates, evidence.rate)
        if read is None:
            return None
        interval = evidence.interval(read)
        if interval is None:
            return Decision(read, None, INCONCLUSIVE, False)
        verdict = self.asserts.verdict(interval)
        if self.measure.moves and not self.measure.complete(candidates):
            if withheld(self.asserts, interval, self.measure.moves, self.measure.span):
                return Decision(read, interval, INCONCLUSIVE, True)
        return Decision(read, interval, verdict, False)
