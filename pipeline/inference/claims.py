"""The claims' verdict rules, and the claims a win count decides, each declared once.

A claim is decided on an interval at the claims' confidence (`stats.CLAIM_CONFIDENCE`) by a
stated rule: ``confirmed``, ``refuted`` or ``inconclusive``. The rules are stated here once
(`ExactValue`, `Above`, `Below`, `NoDifference`, with the tolerance `TOLERANCE`), and so are
the claims that a sweep's win counts alone answer (`DECLARED`): what each measures, on which
cells, and which rule decides it. Each declaration is data, not a function: the report
evaluates it on fixed-n intervals (report/claims.py) and a stop rule on confidence sequences
(sweep/stopping.py), each through an `Evidence` of its own, so both decide the same thing.
The other claims read deal facts, runs of deals or turned cards, which only the report
reads; their rules are those stated here all the same.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol

from pipeline.engine import rules
from pipeline.engine.rules import Cell

CONFIRMED, REFUTED, INCONCLUSIVE = "confirmed", "refuted", "inconclusive"
TOLERANCE = 0.005  # half a percentage point: "exact" and "no difference" are this close
# The variants whose deals are won exactly when standard play wins them, standard first: a
# claim about standard play reads the first of these the sweep has.
STANDARD_PLAY = tuple(variant for variant in rules.VARIANTS if rules.wins_as_standard(variant))

Interval = tuple[float, float]


# --- Verdict rules ------------------------------------------------------------------------


def exact_value_verdict(value: float, interval: Interval) -> str:
    low, high = interval
    if not low <= value <= high:
        return REFUTED
    return CONFIRMED if (high - low) / 2 <= TOLERANCE else INCONCLUSIVE


def above_verdict(interval: Interval, threshold: float) -> str:
    low, high = interval
    if low > threshold:
        return CONFIRMED
    return REFUTED if high < threshold else INCONCLUSIVE


def below_verdict(interval: Interval, threshold: float) -> str:
    low, high = interval
    if high < threshold:
        return CONFIRMED
    return REFUTED if low > threshold else INCONCLUSIVE


def no_difference_verdict(interval: Interval) -> str:
    low, high = interval
    if low > 0 or high < 0:
        return REFUTED
    return CONFIRMED if -TOLERANCE <= low and high <= TOLERANCE else INCONCLUSIVE


def over_some_strategies(verdict: str, present: int, needs_all: str) -> str:
    """``verdict`` drawn from ``present`` of the counts-only strategies: the one verdict only
    all of them can support (``needs_all``: that none beats a bound, or that none differs) is
    inconclusive while any is missing; the other holds on what is there."""
    if verdict == needs_all and present < len(rules.COUNT_STRATEGIES):
        return INCONCLUSIVE
    return verdict


# Each assertion gives its verdict on an interval and, for a stop rule, the half-width worth
# aiming at given the current estimate (how far it lies from where the verdict would turn).


@dataclass(frozen=True)
class ExactValue:
    value: float

    def verdict(self, interval: Interval) -> str:
        return exact_value_verdict(self.value, interval)

    def aim(self, estimate: float) -> float:
        return TOLERANCE


@dataclass(frozen=True)
class Above:
    threshold: float

    def verdict(self, interval: Interval) -> str:
        return above_verdict(interval, self.threshold)

    def aim(self, estimate: float) -> float:
        return max(abs(estimate - self.threshold), TOLERANCE / 2)


@dataclass(frozen=True)
class Below(Above):
    def verdict(self, interval: Interval) -> str:
        return below_verdict(interval, self.threshold)


@dataclass(frozen=True)
class NoDifference:
    def verdict(self, interval: Interval) -> str:
        return no_difference_verdict(interval)

    def aim(self, estimate: float) -> float:  # within the tolerance, or away from 0
        if abs(estimate) < TOLERANCE / 2:
            return TOLERANCE - abs(estimate)
        return abs(estimate)


# --- Which cells a claim reads ------------------------------------------------------------


def primary(
    cells: Collection[Cell],
    variant: str,
    strategy: str | None = None,
    finale: str = "down",
    depth: str | None = None,
) -> Cell | None:
    """The sweep's cell of a variant/strategy/finale, round-robin first, else packets.

    A strategy that never reads the bottom cards (or no strategy) plays the same deals the
    same way whichever the finale, so with finale "down" missing, "up" stands in for it.
    """
    finales = [finale]
    if finale == "down" and (strategy is None or strategy in rules.COUNT_STRATEGIES):
        finales.append("up")
    for candidate in finales:
        for order in rules.ORDERS:
            try:
                cell = Cell(variant, strategy, candidate, order, depth)
            except rules.RuleError:
                return None
            if cell in cells:
                return cell
    return None


@dataclass(frozen=True)
class Choice:
    """The cells a claim chooses among: those of the first of ``variants`` the sweep has, one
    per strategy of ``strategies`` (`primary`)."""

    variants: tuple[str, ...]
    strategies: tuple[str | None, ...] = (None,)

    def candidates(self, cells: Collection[Cell]) -> list[Cell]:
        for variant in self.variants:
            found = [c for s in self.strategies if (c := primary(cells, variant, s))]
            if found:
                return found
        return []


Read = tuple[Cell, ...]  # one cell (its win rate) or two (a's win rate minus b's)

# A measure gives the cells a claim chooses among in a sweep (`candidates`), every read it may
# take of them (`reads`: what a stop rule keeps a sequence for), and the one it takes given
# the win rates measured so far (`pick`).


@dataclass(frozen=True)
class BestRate:
    """The win rate of the candidate with the highest one (the first of equals)."""

    choice: Choice

    def candidates(self, cells: Collection[Cell]) -> list[Cell]:
        return self.choice.candidates(cells)

    def reads(self, candidates: list[Cell]) -> list[Read]:
        return [(cell,) for cell in candidates]

    def pick(self, candidates: list[Cell], rate) -> Read | None:
        return (max(candidates, key=rate),) if candidates else None


@dataclass(frozen=True)
class BestMinusWorst:
    """The paired difference of the candidates with the highest and the lowest win rate."""

    choice: Choice

    def candidates(self, cells: Collection[Cell]) -> list[Cell]:
        return self.choice.candidates(cells)

    def reads(self, candidates: list[Cell]) -> list[Read]:
        return [(a, b) for i, a in enumerate(candidates) for b in candidates[i + 1 :]]

    def pick(self, candidates: list[Cell], rate) -> Read | None:
        if len(candidates) < 2:
            return None
        ranked = sorted(candidates, key=rate, reverse=True)
        return ranked[0], ranked[-1]


@dataclass(frozen=True)
class OrderDifference:
    """Round-robin minus packets, finale down, in the first variant of ``variants`` the sweep
    plays in both deal orders."""

    variants: tuple[str, ...]

    def candidates(self, cells: Collection[Cell]) -> list[Cell]:
        for variant in self.variants:
            a, b = (
                next((c for c in cells if (c.variant, c.order, c.finale) == key), None)
                for key in ((variant, "round-robin", "down"), (variant, "packets", "down"))
            )
            if a and b:
                return [a, b]
        return []

    def reads(self, candidates: list[Cell]) -> list[Read]:
        return [tuple(candidates)] if candidates else []

    def pick(self, candidates: list[Cell], rate) -> Read | None:
        return tuple(candidates) or None


# --- The claims a win count decides ---------------------------------------------------------


class Evidence(Protocol):
    """What a claim is decided on: fixed-n intervals (the report) or confidence sequences (a
    stop rule), both at the claims' confidence."""

    def rate(self, cell: Cell) -> float:
        """The cell's win rate as measured so far (it ranks candidates)."""

    def interval(self, read: Read) -> Interval | None:
        """The interval of a cell's win rate, or of a's minus b's; None with no deals yet."""


@dataclass(frozen=True)
class Decision:
    read: Read
    interval: Interval | None
    verdict: str
    withheld: bool  # the measured verdict needs a counts-only strategy the sweep lacks


@dataclass(frozen=True)
class Declaration:
    """One claim: what it measures on which cells (``measure``), the rule that decides it
    (``asserts``), and the verdict only every counts-only strategy can support, if any."""

    id: str
    measure: BestRate | BestMinusWorst | OrderDifference
    asserts: ExactValue | Above | Below | NoDifference
    needs_all: str | None = None

    def verdict(self, interval: Interval, present: int) -> str:
        """The rule's verdict on the measured interval, with ``present`` of the counts-only
        strategies among the claim's cells."""
        verdict = self.asserts.verdict(interval)
        if self.needs_all is None:
            return verdict
        return over_some_strategies(verdict, present, self.needs_all)

    def decide(self, cells: Collection[Cell], evidence: Evidence) -> Decision | None:
        """The verdict on a sweep's ``cells`` (None if they cannot answer the claim)."""
        return self.decide_among(self.measure.candidates(cells), evidence)

    def decide_among(self, candidates: list[Cell], evidence: Evidence) -> Decision | None:
        """`decide`, given the claim's candidates in the sweep (`measure.candidates`)."""
        read = self.measure.pick(candidates, evidence.rate)
        if read is None:
            return None
        interval = evidence.interval(read)
        if interval is None:
            return Decision(read, None, INCONCLUSIVE, False)
        measured = self.asserts.verdict(interval)
        verdict = self.verdict(interval, len(candidates))
        return Decision(read, interval, verdict, verdict != measured)


DECLARED = {
    declaration.id: declaration
    for declaration in (
        Declaration("one_in_13", BestRate(Choice(STANDARD_PLAY)), ExactValue(1 / 13)),
        Declaration(
            "better_than_one_in_three",
            BestRate(Choice(("one_swap",), rules.COUNT_STRATEGIES)),
            Above(1 / 3),
            needs_all=REFUTED,  # a strategy not played may beat 1/3
        ),
        Declaration(
            "pick_makes_no_difference",
            BestMinusWorst(Choice(("watch",), rules.COUNT_STRATEGIES)),
            NoDifference(),
            needs_all=CONFIRMED,  # no difference among some is not none among all
        ),
        Declaration("deal_order_no_change", OrderDifference(STANDARD_PLAY), NoDifference()),
    )
}
