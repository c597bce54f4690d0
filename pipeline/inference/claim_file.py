"""A claims file: claims about the game's odds written as data (docs/claims.md), read and checked.

    [[claim]]
    id = "watch_roughly_25_to_30"
    says = "With the Watch, win rates climb to roughly 25-30%"
    source = { title = "a Clock solitaire strategy page" }   # and url = "..." where there is one
    measure = "win_rate"
    cells = { variant = "watch", strategy = "random" }
    asserts = { between = [0.25, 0.30] }

`parse` turns a file's text into `claims.Claim` values and checks every one against the
vocabulary of `pipeline.inference.claims`: each mistake is a `ClaimFileError` whose message
is one line naming the file, the claim, what was wrong and what is allowed. Parsing reads
nothing and writes nothing; `read` reads a file, and `RULE_PAGES` is the file of the rule
pages' claims shipped with the package.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import replace
from fractions import Fraction
from importlib import resources
from typing import Any

from pipeline import RULE_PAGES, echoed
from pipeline.engine import rules
from pipeline.inference import claims as vocabulary
from pipeline.inference.claims import (
    FACTS,
    PICKS,
    RUN_BLOCK,
    SIDES,
    SPEC_AXES,
    Claim,
    Every,
    Pattern,
    Source,
    Value,
)

ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
FRACTION = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")
URL_SCHEMES = ("http://", "https://")
CLAIM_KEYS = ("id", "says", "source", "measure", "cells", "asserts")
# Each measure's own keys, beside the claim's.
MEASURE_KEYS = {
    "win_rate": ("pick",),
    "difference": ("a", "b", "pick"),
    "spread": (),
    "win_rate_where": ("fact", "range"),
    "losing_runs": ("n",),
    "wins_turning": ("cards",),
    "deaths_as_predicted": (),
}
# Each assertion's own keys, beside its name; the measures of a share take every assertion
# but no_difference, those of a paired difference every one but never and always.
ASSERTION_KEYS = {
    "equals": ("tolerance",),
    "above": (),
    "at_least": (),
    "below": (),
    "at_most": (),
    "between": (),
    "no_difference": ("tolerance", "side"),
    "never": ("tolerance", "chances"),
    "always": ("tolerance", "chances"),
}
SHARE_ONLY, DIFFERENCE_ONLY = ("never", "always"), ("no_difference",)
MAX_CARDS = rules.N_CARDS + 1  # a rescued win under one_swap or exchange turns 53
# Bounds on what a report is asked to check: a file of claims is a page of sentences, not a
# data set (the shipped files hold 11 and 14). A file at the cap is read and its claims
# settled in a few seconds; past them the report would be no one's to read.
MAX_FILE_MIB = 1
MAX_FILE_BYTES = MAX_FILE_MIB * 2**20
MAX_CLAIMS = 1000  # over every file read together


def toml_table(axes: dict) -> str:
    """A table of axes as a claims file writes it: { order = "packets", strategy = "most" }."""

    def value(names):
        return (
            f'"{names[0]}"' if len(names) == 1 else "[" + ", ".join(f'"{n}"' for n in names) + "]"
        )

    return "{ " + ", ".join(f"{axis} = {value(names)}" for axis, names in axes.items()) + " }"


class ClaimFileError(ValueError):
    """A claims file that cannot be read; the message is one line naming what and why."""


def rule_pages_path() -> str:
    """The shipped file of the rule pages' claims (package data: pipeline/claims/)."""
    return str(resources.files("pipeline").joinpath("claims", "rule-pages.toml"))


def read(path: str) -> tuple[Claim, ...]:
    """The claims of the file at ``path`` (`RULE_PAGES`: the shipped one), checked."""
    where = rule_pages_path() if path == RULE_PAGES else path
    try:
        with open(where, "rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)  # no more, whatever the file (a pipe, say)
        if len(data) > MAX_FILE_BYTES:
            raise ClaimFileError(
                f"{path}: over {MAX_FILE_MIB} MiB; a claims file holds at most "
                f"{MAX_FILE_BYTES:,} bytes (and {MAX_CLAIMS:,} claims over every file read)"
            )
        text = data.decode("utf-8")
    except OSError as error:
        raise ClaimFileError(f"{path}: cannot read: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise ClaimFileError(f"{path}: not valid TOML: not UTF-8 text") from None
    return parse(text, path)


def read_all(paths: list[str] | tuple[str, ...]) -> tuple[Claim, ...]:
    """The claims of several files, in order; an id may appear once over all of them."""
    out: list[Claim] = []
    ids: set[str] = set()  # (a set: a list's look-up made a large file's read quadratic)
    for path in paths:
        for claim in read(path):
            if len(out) == MAX_CLAIMS:
                raise ClaimFileError(
                    f"{path}: claims past the {MAX_CLAIMS:,}th of the files read; "
                    f"expected at most {MAX_CLAIMS:,} claims over every file read together"
                )
            if claim.id in ids:
                raise ClaimFileError(
                    f"{path}: claim {echoed(claim.id)}: id already used by an earlier claims file; "
                    "expected an id unique over every file"
                )
            out.append(claim)
            ids.add(claim.id)
    return tuple(out)


def parse(text: str, where: str) -> tuple[Claim, ...]:
    """The claims of a claims file's ``text`` (``where``: its name, for the messages)."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ClaimFileError(f"{where}: not valid TOML: {error}") from None
    except RecursionError:
        raise ClaimFileError(f"{where}: not valid TOML: nested too deeply") from None
    unknown = [key for key in raw if key != "claim"]
    if unknown:
        raise ClaimFileError(
            f"{where}: {echoed(unknown[0])}: unknown key; a claims file holds [[claim]] tables only"
        )
    tables = raw.get("claim")
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise ClaimFileError(f"{where}: no claim; expected one or more [[claim]] tables")
    if len(tables) > MAX_CLAIMS:
        raise ClaimFileError(
            f"{where}: {len(tables):,} claims; a claims file holds at most {MAX_CLAIMS:,}"
        )
    out: list[Claim] = []
    ids: set[str] = set()
    for number, table in enumerate(tables, 1):
        claim = _Reader(where, number, table).claim()
        if claim.id in ids:
            raise ClaimFileError(
                f"{where}: claim {echoed(claim.id)}: duplicated id; expected each id once"
            )
        out.append(claim)
        ids.add(claim.id)
    return tuple(out)


class _Reader:
    """One [[claim]] table read into a `Claim`: a method per part, each failing in one line."""

    def __init__(self, where: str, number: int, table: dict):
        self.where, self.table = where, table
        self.name = f"claim {number}"

    def fail(self, what: str) -> ClaimFileError:
        return ClaimFileError(f"{self.where}: {self.name}: {what}")

    def claim(self) -> Claim:
        claim_id = self.text("id")
        if not ID_PATTERN.fullmatch(claim_id):
            raise self.fail(
                f"id: {echoed(claim_id)} is not allowed; expected letters, digits, '_', '.', '-'"
            )
        self.name = f"claim {echoed(claim_id)}"
        measure_name = self.text("measure")
        if measure_name not in MEASURE_KEYS:
            raise self.fail(
                f"measure: {echoed(measure_name)} is not known; allowed: {', '.join(MEASURE_KEYS)}"
            )
        allowed = CLAIM_KEYS + MEASURE_KEYS[measure_name]
        for key in self.table:
            if key not in allowed:
                raise self.fail(
                    f"{key}: unknown key for measure {measure_name}; allowed: {', '.join(allowed)}"
                )
        for key in CLAIM_KEYS:
            if key not in self.table:
                raise self.fail(f"{key}: missing; every claim has {', '.join(CLAIM_KEYS)}")
        measure = getattr(self, measure_name)()
        asserts = self.assertion(measure)
        return Claim(claim_id, self.text("says"), self.sources(), measure, asserts)

    # --- plain values ----------------------------------------------------------------------

    def text(self, key: str, table: dict | None = None, name: str | None = None) -> str:
        table = self.table if table is None else table
        name = name or key
        if key not in table:
            raise self.fail(f"{name}: missing; expected a text")
        value = table[key]
        if not isinstance(value, str) or not value.strip():
            raise self.fail(f"{name}: {echoed(value)} is not a text; expected a non-empty string")
        return value.strip()

    def integer(self, key: str, low: int, high: int) -> int:
        value = self.table.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise self.fail(
                f"{key}: {echoed(value)} is not allowed; expected an integer from {low} to {high}"
            )
        return value

    def number(self, value: Any, name: str, low: float, high: float) -> Value:
        """A number in [low, high]: a TOML number, or a fraction written "a/b"."""
        written: Fraction | float | None = None
        if isinstance(value, str) and (match := FRACTION.fullmatch(value)):
            if int(match[2]):
                written = Fraction(int(match[1]), int(match[2]))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            written = float(value)
        if written is None or not low <= written <= high:  # also refuses nan
            raise self.fail(
                f"{name}: {echoed(value)} is out of range; expected a number from {low:g} to {high:g} "
                '(e.g. 0.25, or a fraction as "1/13")'
            )
        return Value.of(written)

    def sources(self) -> tuple[Source, ...]:
        raw = self.table["source"]
        tables = raw if isinstance(raw, list) else [raw]
        out = []
        for table in tables:
            if not isinstance(table, dict) or not table:
                raise self.fail(
                    "source: expected a table { title = ..., url = ... } or a list of them"
                )
            for key in table:
                if key not in ("title", "url"):
                    raise self.fail(f"source.{key}: unknown key; allowed: source.title, source.url")
            url = self.text("url", table, "source.url") if "url" in table else None
            if url is not None and not url.startswith(URL_SCHEMES):
                raise self.fail(
                    f"source.url: {echoed(url)} is not a web address; expected http:// or https://"
                )
            out.append(Source(self.text("title", table, "source.title"), url))
        return tuple(out)

    # --- cells -----------------------------------------------------------------------------

    def axes(self, raw: Any, name: str, required=("variant",)) -> dict[str, tuple[str, ...]]:
        """A table of axes, each a name or a list of names the rules know."""
        if not isinstance(raw, dict):
            raise self.fail(f"{name}: expected a table of axes ({', '.join(SPEC_AXES)})")
        out = {}
        for axis, value in raw.items():
            if axis not in SPEC_AXES:
                raise self.fail(f"{name}.{axis}: unknown axis; allowed: {', '.join(SPEC_AXES)}")
            names = tuple(value) if isinstance(value, list) else (value,)
            allowed = rules.AXES[axis]
            if not names or any(v not in allowed for v in names):
                raise self.fail(
                    f"{name}.{axis}: {echoed(value)} is not known; allowed: a name or a list of: "
                    + ", ".join(allowed)
                )
            out[axis] = tuple(dict.fromkeys(names))
        for axis in required:
            if axis not in out:
                raise self.fail(f"{name}.{axis}: missing; name the variant(s) the claim reads")
        return out

    def patterns(self, spec: dict, name: str = "cells", check: bool = True) -> tuple[Pattern, ...]:
        """The cells a table of axes names, each one the rules allow (``check``: else a
        difference's a and b complete them)."""
        patterns = vocabulary.expand(spec)
        for axis, applies in (("strategy", rules.RESCUE_VARIANTS), ("depth", ("exchange",))):
            if axis in spec and not any(v in applies for v in spec["variant"]):
                raise self.fail(
                    f"{name}.{axis}: no variant named has one; {axis} applies to "
                    f"{', '.join(applies)} only"
                )
        for pattern in patterns if check else ():
            self.allowed(pattern, name)
        return tuple(patterns)

    def allowed(self, pattern: Pattern, name: str) -> None:
        if pattern.variant in rules.RESCUE_VARIANTS and pattern.strategy is None:
            raise self.fail(
                f"{name}.strategy: variant {echoed(pattern.variant)} needs a strategy; allowed: "
                + ", ".join(rules.STRATEGIES)
            )
        try:
            pattern.cell(pattern.finales()[0], pattern.order or rules.ORDERS[0])
        except rules.RuleError as refusal:
            raise self.fail(f"{name}: {pattern.text} is no cell of the rules ({refusal})") from None

    def cells(self, check: bool = True) -> tuple[Pattern, ...]:
        return self.patterns(self.axes(self.table["cells"], "cells"), check=check)

    def pick(self, default: str = "first") -> str:
        pick = self.table.get("pick", default)
        if pick not in PICKS:
            raise self.fail(f"pick: {echoed(pick)} is not known; allowed: {', '.join(PICKS)}")
        return pick

    # --- measures (one method per measure, named as it) ----------------------------------

    def win_rate(self):
        return vocabulary.WinRate(self.cells(), self.pick())

    def spread(self):
        cells = self.cells()
        if len(cells) < 2:
            raise self.fail("cells: spread compares cells; expected at least two cells")
        return vocabulary.Spread(cells)

    def difference(self):
        for side in ("a", "b"):
            if side not in self.table:
                raise self.fail(f"{side}: missing; a difference reads a's cells minus b's")
        cells = self.cells(check=False)
        a = self.axes(self.table["a"], "a", required=())
        b = self.axes(self.table["b"], "b", required=())
        if not a or not b or any(len(names) > 1 for names in a.values()):
            raise self.fail(
                "a, b: expected a table of axes each (a one name per axis, b one or a list), "
                'e.g. a = { strategy = "informed", finale = "up" }'
            )
        self.paired(a, b)
        measure = vocabulary.Difference(
            cells, tuple((k, v[0]) for k, v in a.items()), tuple(b.items()), self.pick()
        )
        for pattern in cells:
            with_a = replace(pattern, **dict(measure.a))
            self.allowed(with_a, "a")
            first_b = {axis: names[0] for axis, names in measure.b}
            self.allowed(
                replace(with_a, **{**first_b, "order": first_b.get("order", with_a.order)}), "b"
            )
        return measure

    def paired(self, a: dict, b: dict) -> None:
        """a and b compared deal by deal: cells of one deal order (the same layouts), or cells
        that differ in the deal order alone (two layouts of the same deal numbers)."""
        if a == b:
            raise self.fail("a, b: name the same cells; expected cells that differ")
        orders = set(a.get("order", ())) | set(b.get("order", ()))
        if (
            not orders
            or set(a) | set(b) == {"order"}
            or (len(orders) == 1 and "order" in a and "order" in b)
        ):
            return
        raise self.fail(
            f"a, b: {toml_table(a)} and {toml_table(b)} are not played on the same deals; cells on different deal "
            "orders are paired only when a and b differ in the order alone "
            '(a = { order = "round-robin" }, b = { order = "packets" })'
        )

    def win_rate_where(self):
        fact = self.table.get("fact")
        if fact not in FACTS:
            raise self.fail(
                f"fact: {echoed(fact)} is not a fact the records keep; allowed: {', '.join(FACTS)}"
            )
        lowest, highest, standard_only = FACTS[fact]
        bounds = self.table.get("range")
        if (
            not isinstance(bounds, list)
            or len(bounds) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in bounds)
            or not lowest <= bounds[0] <= bounds[1] <= highest
        ):
            raise self.fail(
                f"range: {echoed(bounds)} is not allowed; expected [low, high], integers with "
                f"{lowest} <= low <= high <= {highest}"
            )
        cells = self.cells()
        if standard_only and cells != (Pattern("standard"),):
            raise self.fail(
                f"cells: the records keep {fact} for standard play only (the facts table of "
                'the first standard cell); expected cells = { variant = "standard" }'
            )
        return vocabulary.WinRateWhere(cells, fact, bounds[0], bounds[1])

    def losing_runs(self):
        n = self.table.get("n", RUN_BLOCK)
        if n != RUN_BLOCK or isinstance(n, bool):
            raise self.fail(
                f"n: {echoed(n)} is not kept by the records; expected {RUN_BLOCK} (they count wins "
                f"in blocks of {RUN_BLOCK} consecutive deals)"
            )
        return vocabulary.LosingRuns(self.cells(), n)

    def wins_turning(self):
        cards = self.integer("cards", 1, MAX_CARDS) if "cards" in self.table else rules.N_CARDS
        return vocabulary.WinsTurning(self.cells(), cards)

    def deaths_as_predicted(self):
        cells = self.cells()
        if any(pattern.variant != "play_out" for pattern in cells):
            raise self.fail(
                'cells: deaths_as_predicted reads play_out cells only; expected variant = "play_out"'
            )
        return vocabulary.DeathsAsPredicted(cells)

    # --- the assertion -------------------------------------------------------------------

    def assertion(self, measure):
        raw = self.table["asserts"]
        if not isinstance(raw, dict):
            raw = {}
        named = [key for key in raw if key in ASSERTION_KEYS]
        modifiers = sorted({key for keys in ASSERTION_KEYS.values() for key in keys})
        unknown = [k for k in raw if k not in ASSERTION_KEYS and k not in modifiers]
        if unknown:
            raise self.fail(
                f"asserts.{unknown[0]}: unknown; allowed: {', '.join(ASSERTION_KEYS)} (with "
                f"{', '.join(modifiers)})"
            )
        if len(named) != 1:
            raise self.fail(
                "asserts: expected a table with one of: "
                + ", ".join(ASSERTION_KEYS)
                + " (e.g. asserts = { between = [0.25, 0.30] })"
            )
        (kind,) = named
        for key in raw:
            if key != kind and key not in ASSERTION_KEYS[kind]:
                extra = ASSERTION_KEYS[kind]
                raise self.fail(
                    f"asserts.{key}: unknown key for {kind}; allowed: "
                    + (", ".join(f"asserts.{k}" for k in extra) if extra else "none")
                )
        difference = measure.span == vocabulary.DIFFERENCE
        if kind in (SHARE_ONLY if difference else DIFFERENCE_ONLY):
            allowed = [
                k
                for k in ASSERTION_KEYS
                if k not in (SHARE_ONLY if difference else DIFFERENCE_ONLY)
            ]
            raise self.fail(
                f"asserts.{kind}: not for measure {measure.name} (a "
                f"{'paired difference' if difference else 'share'}); allowed: {', '.join(allowed)}"
            )
        return getattr(self, f"asserts_{kind}", self.asserts_bound)(raw, kind, measure.span)

    def tolerance(self, raw: dict, default: float | None) -> Value | None:
        if "tolerance" not in raw:
            return None if default is None else Value.of(default)
        value = self.number(raw["tolerance"], "asserts.tolerance", 0, 0.5)
        if value.number <= 0:
            raise self.fail(
                "asserts.tolerance: 0 is out of range; expected a number above 0, at most 0.5"
            )
        return value

    def asserts_equals(self, raw, kind, span):
        value = self.number(raw[kind], f"asserts.{kind}", *span)
        return vocabulary.Equals(value, self.tolerance(raw, vocabulary.TOLERANCE))

    def asserts_bound(self, raw, kind, span):
        return vocabulary.ASSERTIONS[kind](self.number(raw[kind], f"asserts.{kind}", *span))

    def asserts_between(self, raw, kind, span):
        bounds = raw[kind]
        if not isinstance(bounds, list) or len(bounds) != 2:
            raise self.fail(
                f"asserts.between: {echoed(bounds)} is not allowed; expected [low, high]"
            )
        low, high = (self.number(v, "asserts.between", *span) for v in bounds)
        if low.number >= high.number:
            raise self.fail(
                f"asserts.between: {echoed(bounds)}: low is not below high; expected [low, high]"
            )
        return vocabulary.Between(low, high)

    def asserts_no_difference(self, raw, kind, span):
        if raw[kind] is not True:
            raise self.fail(f"asserts.no_difference: {echoed(raw[kind])}; expected true")
        side = raw.get("side", "both")
        if side not in SIDES:
            raise self.fail(
                f"asserts.side: {echoed(side)} is not known; allowed: {', '.join(SIDES)}"
            )
        return vocabulary.NoDifference(self.tolerance(raw, vocabulary.TOLERANCE), side)

    def asserts_never(self, raw, kind, span):
        if not isinstance(raw[kind], bool):
            raise self.fail(f"asserts.{kind}: {echoed(raw[kind])}; expected true or false")
        if ("chances" in raw) == ("tolerance" in raw):
            raise self.fail(
                f"asserts.{kind}: say when none is enough: one of asserts.chances (at least "
                "that many counted) or asserts.tolerance (the exact interval within it of the share)"
            )
        chances = None
        if "chances" in raw:
            chances = raw["chances"]
            if isinstance(chances, bool) or not isinstance(chances, int) or chances < 1:
                raise self.fail(
                    f"asserts.chances: {echoed(chances)} is not allowed; expected an integer, at least 1"
                )
        share = 0 if kind == "never" else 1
        return Every(share, raw[kind], chances, self.tolerance(raw, None))

    asserts_always = asserts_never
