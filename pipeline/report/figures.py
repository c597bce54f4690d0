"""The report's figures, all from the summed tables, and the replay for the claims the records cannot answer.

Figures (all from the summed tables): per-cell win rates with Wilson intervals, and the
exact value, difference and z-score where `odds.exact_win_of` has one (|z| > 4 flagged);
paired comparisons (the difference with Newcombe's interval, exact McNemar); distributions
(every measure on every cell against its exact law, `distributions`; `play_out`'s restarts
with their stray deaths; rescue win rate by cards left against its exact value);
the hint's calibration; the claims (`claims`, docs/claims.md); provenance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache, lru_cache

import polars as pl

from pipeline.engine import laws, odds, pairing, rules
from pipeline.engine.rules import Cell
from pipeline.inference import stats
from pipeline.records import summary
from pipeline.report import claims as claim_rules
from pipeline.report import distributions
from pipeline.report.reading import Loaded, run_cells
from pipeline.store.entries import RunRecord, ShardEntry

Z_FLAG = 4.0
# Exact values are rationals computed by counting: compute each once per process.
exact_win_of = lru_cache(maxsize=None)(odds.exact_win_of)
exact_win_given_down_of = lru_cache(maxsize=None)(odds.exact_win_given_down_of)


# --- Figures ------------------------------------------------------------------------------


@dataclass
class CellFigure:
    cell: Cell
    n: int
    wins: int
    low: float
    high: float
    exact: odds.Fraction | None = None
    z: float | None = None
    recomputed: str | None = None  # why its exact value was enumerated again, if it was

    @property
    def rate(self) -> float:
        return self.wins / self.n if self.n else math.nan

    def record(self) -> dict:
        exact = self.exact
        return {
            "label": self.cell.label,
            "variant": self.cell.variant,
            "strategy": self.cell.strategy,
            "finale": self.cell.finale,
            "order": self.cell.order,
            "depth": self.cell.depth,
            "n": self.n,
            "wins": self.wins,
            "win_rate": self.rate,
            "ci_low": self.low,
            "ci_high": self.high,
            "exact": odds.fraction_text(exact) if exact is not None else None,
            "exact_value": float(exact) if exact is not None else None,
            "exact_recomputed": self.recomputed,
            "difference": self.rate - float(exact) if exact is not None else None,
            "z": self.z,
            "flag": bool(self.z is not None and abs(self.z) > Z_FLAG),
        }


def cell_of(row: dict, prefix: str = "", customs: dict | None = None) -> Cell:
    """The cell a table row's labels name; ``customs``: the sweep's strategies of the
    user's, by name."""
    strategy = row[f"{prefix}strategy"]
    return _cell(
        row[f"{prefix}variant"],
        strategy,
        row[f"{prefix}finale"],
        row[f"{prefix}order"],
        row[f"{prefix}depth"],
        (customs or {}).get(strategy),
    )


@cache
def _cell(*labels) -> Cell:
    """A cell by its labels, checked once: tables name the same few cells row after row."""
    return Cell(*labels)


def _label_filter(cell: Cell, prefix: str = "") -> pl.Expr:
    expr = pl.lit(True)
    for name in summary.LABEL_COLUMNS:
        value = getattr(cell, name)
        column = pl.col(f"{prefix}{name}")
        expr = expr & (column.is_null() if value is None else (column.cast(pl.String) == value))
    return expr


class Figures:
    """Every figure of the report, computed from the summed summary tables."""

    def __init__(
        self, loaded: Loaded, replay: claim_rules.Replay | None = None, replay_note: str = ""
    ):
        self.loaded = loaded
        self.mode = loaded.mode
        self.tables = loaded.tables
        self.replay = replay
        self.replay_note = replay_note
        self.customs = {c.strategy: c.custom for c in loaded.cells if c.custom is not None}
        order = {cell: i for i, cell in enumerate(loaded.cells)}
        per_cell = (
            self.tables["counts"]
            .group_by(list(summary.LABEL_COLUMNS))
            .agg(n=pl.col("n").sum(), wins=pl.col("n").filter(pl.col("won")).sum())
        )
        cells = {}
        for row in per_cell.iter_rows(named=True):
            cell = cell_of(row, "", self.customs)
            n, wins = int(row["n"]), int(row["wins"] or 0)
            low, high = stats.wilson(wins, n)
            exact = exact_win_of(cell)
            z = stats.z_against(wins, n, float(exact)) if exact is not None and n else None
            recomputed = odds.custom_recomputed_of(cell) if exact is not None else None
            cells[cell] = CellFigure(cell, n, wins, low, high, exact, z, recomputed)
        self.cells: dict[Cell, CellFigure] = dict(
            sorted(cells.items(), key=lambda item: order.get(item[0], len(order)))
        )
        self._pairs = {}
        for row in self.tables["pairs"].iter_rows(named=True):
            a, b = cell_of(row, "a_", self.customs), cell_of(row, "b_", self.customs)
            self._pairs[(a, b)] = (row["both"], row["a_only"], row["b_only"], row["neither"])

    # --- lookups used by the claims ------------------------------------------------------

    def paired(self, a: Cell, b: Cell, confidence: float = stats.CONFIDENCE) -> stats.Paired | None:
        """a's win rate minus b's on the deals both played, or None if they were not paired."""
        if (a, b) in self._pairs:
            both, a_only, b_only, neither = self._pairs[(a, b)]
        elif (b, a) in self._pairs:
            both, b_only, a_only, neither = self._pairs[(b, a)]
        else:
            return None
        return stats.paired_difference(both, a_only, b_only, neither, confidence)

    def deal_facts(self) -> tuple[Cell, list[tuple[bool, int, int, int]]] | None:
        """The primary standard cell's (won, kings_at_bottom, unvisited_at_third_king, n), if recorded."""
        facts = self.tables["facts"]
        if facts.is_empty():
            return None
        cells = sorted(
            {
                cell_of(row, "", self.customs)
                for row in facts.select(summary.LABEL_COLUMNS).unique().iter_rows(named=True)
            },
            key=lambda c: (rules.ORDERS.index(c.order), rules.FINALES.index(c.finale)),
        )
        cell = cells[0]
        rows = facts.filter(_label_filter(cell)).sort(
            "won", "kings_at_bottom", "unvisited_at_third_king"
        )
        return cell, [
            (r["won"], r["kings_at_bottom"], r["unvisited_at_third_king"], r["n"])
            for r in rows.iter_rows(named=True)
        ]

    def near_misses(self, cell: Cell, low: int, high: int) -> tuple[int, int]:
        frame = self.tables["counts"].filter(
            _label_filter(cell) & pl.col("down_at_stop").is_between(low, high)
        )
        n = int(frame["n"].sum())
        wins = int(frame.filter(pl.col("won"))["n"].sum())
        return n, wins

    def loss_blocks(self, cell: Cell) -> tuple[int, int]:
        frame = self.tables["blocks"].filter(_label_filter(cell))
        return int(frame["n"].sum()), int(frame.filter(pl.col("wins") == 0)["n"].sum())

    def won_turned(self, cells: list[Cell], cards: int = rules.N_CARDS) -> tuple[int, int]:
        frame = self.tables["turned"].filter(pl.col("won"))
        frame = frame.filter(pl.any_horizontal([_label_filter(c) for c in cells]))
        return int(frame["n"].sum()), int(frame.filter(pl.col("cards_turned") == cards)["n"].sum())

    def rescue_win_turned(self) -> list[str]:
        frame = (
            self.tables["turned"]
            .filter(
                pl.col("won") & pl.col("variant").cast(pl.String).is_in(list(rules.RESCUE_VARIANTS))
            )
            .group_by("variant", "cards_turned")
            .agg(pl.col("n").sum())
            .sort("variant", "cards_turned")
        )
        return [
            f"{row['variant']} {row['n']:,} wins at {row['cards_turned']} cards"
            for row in frame.iter_rows(named=True)
        ]

    def play_out_deaths(self, cells: list[Cell]) -> tuple[int, int, int]:
        frame = self.tables["counts"].filter(pl.any_horizontal([_label_filter(c) for c in cells]))
        deals = int(frame["n"].sum())
        later = int((frame["restarts"].cast(pl.Int64) * frame["n"]).sum() or 0)
        stray = int((frame["stray_deaths"].cast(pl.Int64) * frame["n"]).sum() or 0)
        return deals, later, stray

    # --- tables of the report ------------------------------------------------------------

    def cell_records(self) -> list[dict]:
        return [figure.record() for figure in self.cells.values()]

    def comparisons(self) -> list[dict]:
        """Paired differences: strategies under one variant, and the rules' other axes."""
        out = []
        for a, b in self._pairs:
            kind = pairing.kind(a, b)
            if kind is None:
                continue
            if kind == "foresight" and a.strategy != "informed":
                a, b = b, a
            paired = self.paired(a, b)
            out.append(
                {
                    "kind": kind,
                    "a": a.label,
                    "b": b.label,
                    "variant": a.variant
                    if a.variant == b.variant
                    else f"{a.variant} vs {b.variant}",
                    "a_strategy": a.strategy,
                    "b_strategy": b.strategy,
                    "finale": a.finale if a.finale == b.finale else f"{a.finale} vs {b.finale}",
                    "order": a.order if a.order == b.order else f"{a.order} vs {b.order}",
                    "depth": a.depth if a.depth == b.depth else f"{a.depth} vs {b.depth}",
                    "n": paired.n,
                    "a_rate": paired.a_rate,
                    "b_rate": paired.b_rate,
                    "difference": paired.difference,
                    "ci_low": paired.low,
                    "ci_high": paired.high,
                    "a_only": paired.a_only,
                    "b_only": paired.b_only,
                    "mcnemar_p": paired.p_value,
                }
            )
        kinds = ("strategy", "foresight", "order", "finale", "rescue_vs_standard")
        order = {cell.label: i for i, cell in enumerate(self.cells)}
        out.sort(key=lambda r: (kinds.index(r["kind"]), order.get(r["a"], 0), order.get(r["b"], 0)))
        return out

    def best_strategies(self) -> list[dict]:
        """Per variant x finale x order x depth: the best strategy a player can use, and its margin."""
        groups: dict[tuple, list[Cell]] = {}
        for cell in self.cells:
            if cell.strategy and cell.strategy not in rules.PEEKING_STRATEGIES:
                groups.setdefault((cell.variant, cell.finale, cell.order, cell.depth), []).append(
                    cell
                )
        out = []
        for (variant, finale, order, depth), cells in groups.items():
            ranked = sorted(cells, key=lambda c: self.cells[c].rate, reverse=True)
            best = ranked[0]
            record = {
                "variant": variant,
                "finale": finale,
                "order": order,
                "depth": depth,
                "best": best.strategy,
                "win_rate": self.cells[best].rate,
                "ci_low": self.cells[best].low,
                "ci_high": self.cells[best].high,
                "runner_up": None,
                "margin": None,
                "margin_low": None,
                "margin_high": None,
                "mcnemar_p": None,
                "oracle": None,
            }
            oracle = Cell(variant, "oracle", finale, order, depth)
            if oracle in self.cells:
                record["oracle"] = self.cells[oracle].rate
            if len(ranked) > 1:
                paired = self.paired(best, ranked[1])
                record.update(runner_up=ranked[1].strategy)
                if paired is not None:
                    record.update(
                        margin=paired.difference,
                        margin_low=paired.low,
                        margin_high=paired.high,
                        mcnemar_p=paired.p_value,
                    )
            record["line"] = best_line(record)
            out.append(record)
        return out

    def own_strategies(self) -> list[dict]:
        """Each cell of a strategy of the user's: its win rate and claims-level interval, its
        exact value and z where it reads only the counts, and the check of what it can reach
        (`odds.bound_of`): the interval against the bound's exact value, with a verdict."""
        out = []
        for cell, figure in self.cells.items():
            if cell.custom is None:
                continue
            bound_name, bound = odds.bound_of(cell)
            low, high = stats.wilson(figure.wins, figure.n, stats.CLAIM_CONFIDENCE)
            verdict = "below" if high < bound else "above" if low > bound else "level"
            record = {
                "label": cell.label,
                "strategy": cell.strategy,
                "sees": list(cell.custom.sees),
                "n": figure.n,
                "wins": figure.wins,
                "win_rate": figure.rate,
                "ci_low": low,
                "ci_high": high,
                "exact": None if figure.exact is None else odds.fraction_text(figure.exact),
                "exact_value": None if figure.exact is None else float(figure.exact),
                "exact_recomputed": figure.recomputed,
                "z": figure.z,
                "bound": bound_name,
                "bound_exact": odds.fraction_text(bound),
                "bound_value": float(bound),
                "verdict": verdict,
            }
            record["line"] = own_strategy_line(record)
            out.append(record)
        return out

    def every_distribution(self) -> list[dict]:
        """Every measure's counts on every cell it has a value on, beside its exact law
        (`distributions.every_distribution`)."""
        return distributions.every_distribution(self.tables, list(self.cells))

    def restarts(self) -> list[dict]:
        """`play_out`'s restarts per cell against their exact law (`laws.law_of`)."""
        out = []
        for cell in self.cells:
            if cell.variant != "play_out":
                continue
            law = laws.law_of("restarts", cell)
            chances = law.chances
            frame = (
                self.tables["counts"]
                .filter(_label_filter(cell))
                .group_by("restarts")
                .agg(
                    pl.col("n").sum(),
                    stray=(pl.col("stray_deaths").cast(pl.Int64) * pl.col("n")).sum(),
                )
            )
            seen = {int(r["restarts"]): r for r in frame.iter_rows(named=True)}
            rows = [
                {
                    "restarts": k,
                    "n": int(seen[k]["n"]) if k in seen else 0,
                    "stray_deaths": int(seen[k]["stray"] or 0) if k in seen else 0,
                    "exact": float(chances[k]) if k in chances else 0.0,
                    "exact_fraction": odds.fraction_text(chances.get(k, odds.Fraction(0))),
                }
                for k in sorted(set(chances) | set(seen))
            ]
            out.append(_restarts_record(cell, rows, law))
        return out

    def rescue_by_down(self) -> list[dict]:
        """Rescue win rate by cards face down at the first death, with the exact value where known."""
        frame = (
            self.tables["counts"]
            .filter(
                pl.col("variant").cast(pl.String).is_in(list(rules.RESCUE_VARIANTS))
                & (pl.col("down_at_stop") > 0)
            )
            .group_by(*summary.LABEL_COLUMNS, "down_at_stop")
            .agg(n=pl.col("n").sum(), wins=pl.col("n").filter(pl.col("won")).sum())
        )
        out = []
        rows = list(frame.iter_rows(named=True))
        lows, highs = stats.wilson_arrays([r["wins"] or 0 for r in rows], [r["n"] for r in rows])
        for row, low, high in zip(rows, lows, highs):
            cell = cell_of(row, "", self.customs)
            n, wins, down = int(row["n"]), int(row["wins"] or 0), int(row["down_at_stop"])
            exact = exact_win_given_down_of(cell, down)
            exact = None if exact is None else float(exact)
            out.append(
                {
                    "cell": cell.label,
                    "down_at_stop": down,
                    "n": n,
                    "wins": wins,
                    "win_rate": wins / n,
                    "ci_low": float(low),
                    "ci_high": float(high),
                    "exact": exact,
                }
            )
        order = {cell.label: i for i, cell in enumerate(self.cells)}
        out.sort(key=lambda r: (order.get(r["cell"], 0), r["down_at_stop"]))
        return out

    def hint_calibration(self, bins: int = 10) -> list[dict]:
        """Per rescue cell: the hint's chance, binned, against the observed win rate, and a test.

        The hint is the chance given what the player sees, so `oracle`, which peeks, is left out.
        """
        frame = (
            self.tables["counts"]
            .filter(pl.col("hint").is_not_null())
            .group_by(*summary.LABEL_COLUMNS, "hint")
            .agg(n=pl.col("n").sum(), wins=pl.col("n").filter(pl.col("won")).sum())
        )
        per_cell: dict[Cell, list[tuple[float, int, int]]] = {}
        for row in frame.iter_rows(named=True):
            if row["strategy"] in rules.PEEKING_STRATEGIES:
                continue  # oracle peeks, so the player's chance does not describe its picks
            per_cell.setdefault(cell_of(row, "", self.customs), []).append(
                (float(row["hint"]), int(row["n"]), int(row["wins"] or 0))
            )
        out = []
        for cell in self.cells:
            if cell not in per_cell:
                continue
            groups = sorted(per_cell[cell])  # a fixed order: float sums independent of row order
            statistic, dof, p_value = stats.calibration_test(groups)
            rows = []
            for b in range(bins):
                lo, hi = b / bins, (b + 1) / bins
                inside = [
                    (p, n, w) for p, n, w in groups if lo <= p < hi or (b == bins - 1 and p == 1.0)
                ]
                n = sum(g[1] for g in inside)
                if not n:
                    continue
                wins = sum(g[2] for g in inside)
                predicted = sum(p * m for p, m, _ in inside) / n
                low, high = stats.wilson(wins, n)
                rows.append(
                    {
                        "bin": f"{lo:.1f}-{hi:.1f}",
                        "n": n,
                        "predicted": predicted,
                        "observed": wins / n,
                        "ci_low": low,
                        "ci_high": high,
                    }
                )
            out.append(
                {
                    "cell": cell.label,
                    "chi2": statistic,
                    "dof": dof,
                    "p_value": p_value,
                    "rows": rows,
                }
            )
        return out


def best_line(record: dict) -> str:
    where = (
        f"{record['variant']}{' depth=' + record['depth'] if record['depth'] else ''} "
        f"(finale {record['finale']}, {record['order']})"
    )
    line = f"{where}: {record['best']} is best at {claim_rules.pct(record['win_rate'])}"
    if record["runner_up"] and record["margin"] is not None:
        line += (
            f", {claim_rules.points(record['margin'])} over {record['runner_up']} "
            f"({stats.LEVEL} CI {100 * record['margin_low']:+.2f} to {100 * record['margin_high']:+.2f}, "
            f"McNemar p {stats.p_text(record['mcnemar_p'], 2)})"
        )
    if record["oracle"] is not None:
        line += f"; oracle (peeks, not a way to play) {claim_rules.pct(record['oracle'])}"
    return line


# Each verdict of `own_strategy_line`: where the interval lies against the bound's exact value.
OWN_VERDICTS = {
    "below": "below {bound}'s exact value, {value}",
    "level": "level with {bound}'s exact value, {value}, which lies within the interval",
    "above": "ABOVE {bound}'s exact value, {value}, which it cannot beat: a fault of the "
    "engine, or a strategy that sees more than it says",
}


def _restarts_record(cell: Cell, rows: list[dict], law: laws.Law) -> dict:
    """A `play_out` cell's restarts: the counts, their mean against the exact one, and the
    fit of the counts to the law (`stats.chisquare_gof`)."""
    total = sum(r["n"] for r in rows)
    later = sum(r["restarts"] * r["n"] for r in rows)
    fit = stats.chisquare_gof(
        {r["restarts"]: r["n"] for r in rows if r["n"]},
        {k: float(p) for k, p in law.chances.items()},
    )
    return {
        "cell": cell.label,
        "n": total,
        "mean_restarts": later / total if total else math.nan,
        "exact_mean": float(law.mean()),
        "exact_mean_fraction": odds.fraction_text(law.mean()),
        "chi2": fit.statistic,
        "dof": fit.dof,
        "p_value": fit.p_value,
        "later_deaths": later,
        "stray_deaths": sum(r["stray_deaths"] for r in rows),
        "rows": rows,
    }


def own_strategy_line(record: dict) -> str:
    """A strategy of the user's against what it can reach, in a sentence."""
    reads = "reads the face-up bottoms" if "bottoms" in record["sees"] else "does not peek"
    exact = (
        f"; exact {claim_rules.pct(record['exact_value'])}"
        + (" (recomputed)" if record["exact_recomputed"] else "")
        + f", z {record['z']:+.2f}"
        if record["exact"]
        else ""
    )
    verdict = OWN_VERDICTS[record["verdict"]].format(
        bound=record["bound"], value=claim_rules.pct(record["bound_value"])
    )
    return (
        f"{record['label']}: {claim_rules.pct(record['win_rate'])} ({stats.CLAIM_LEVEL} "
        f"interval {claim_rules.pct(record['ci_low'])} to {claim_rules.pct(record['ci_high'])}"
        f"{exact}) is {verdict} (it {reads}: no such strategy beats {record['bound']})"
    )


# --- The replay for claims the columns cannot answer ----------------------------------------


def plan_replay(run: RunRecord, entries: list[ShardEntry], count: int) -> tuple[tuple | None, str]:
    """(seed, first deal, count, order) of the replay, or None and why not.

    The replay covers the sweep's first committed deals (consecutive shards from the lowest),
    in the deal order of its standard cell (round-robin if it has both).
    """
    from pipeline.engine import deals

    if count <= 0:
        return None, "no replay (--replay 0)"
    scheme = run.deal_scheme
    if scheme != deals.SCHEME_VERSION:
        return None, (
            f"no replay: the sweep used deal scheme {scheme!r}, this code has "
            f"{deals.SCHEME_VERSION!r}, so its layouts cannot be rebuilt here"
        )
    seed = run.settings.seed
    if not entries:
        return None, "no replay: run.json names no seed, or no shard is committed"
    cells = run_cells(run)
    standard = [c for c in cells if c.variant == "standard"]
    order = next(
        (c.order for c in standard if c.order == "round-robin"),
        standard[0].order if standard else "round-robin",
    )
    ordered = sorted(entries, key=lambda e: e.first)
    first = end = ordered[0].first
    for entry in ordered:
        if entry.first != end:
            break
        end = entry.last + 1
    return (int(seed), first, min(count, end - first), order), ""


def check_replay(replay: claim_rules.Replay, loaded: Loaded) -> None:
    """Compare the replay's wins with the sweep's own records of the same deals (per-deal mode)."""
    recorded = next(
        (
            won
            for cell, (start, won) in sorted(
                loaded.head_won.items(), key=lambda item: item[0].variant != "standard"
            )
            if cell.order == replay.order and start == replay.first
        ),
        None,
    )
    if recorded is not None:
        checked = min(len(recorded), replay.count)
        replay.checked = checked
        replay.mismatches = int((recorded[:checked] != replay.won[:checked]).sum())


def make_replay(loaded: Loaded, count: int) -> tuple[claim_rules.Replay | None, str]:
    """The replay of the sweep's first deals, checked against its records where it has them."""
    plan, note = plan_replay(loaded.run, loaded.shards_read, count)
    if plan is None:
        return None, note
    replay = claim_rules.replay_standard(*plan)
    check_replay(replay, loaded)
    return replay, ""
