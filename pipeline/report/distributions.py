"""Every distribution the report counts, each beside its exact law: one record for each
measure of a deal (`laws.DISTRIBUTED`) and each cell it has a value on, with the counts, the
law (or why none is known), the means, and the chi-square of fit (`stats.chisquare_gof`).

The report's first screen flags a distribution off its law (`off_their_laws`); its
distributions.csv holds every record's rows; its table shows each distinct distribution once
(every cell of a deal order has the same deals, so the same first deaths).
"""

from __future__ import annotations

import math

import polars as pl

from pipeline.engine import laws, odds
from pipeline.engine.rules import Cell
from pipeline.inference import stats
from pipeline.records import summary

# A distribution whose counts fit its exact law with a chi-square p below this is flagged on
# the report's first screen: a fault of the engine or of the law, not chance (at a million
# deals and the suite's seeds, a right law gives p above it but once in a million).
P_FLAG = 1e-6


# Each verdict of a distribution on its law.
FITS, OFF, NO_LAW = "fits its law", "OFF its law", "no law known"


def verdict_of(p_value: float | None) -> str:
    if p_value is None:
        return NO_LAW
    return OFF if p_value < P_FLAG else FITS


def table_of(measure: str) -> str:
    """The summary table whose keys hold ``measure``."""
    return next(name for name, (keys, _) in summary.TABLES.items() if measure in keys)


def counted(tables: dict[str, pl.DataFrame], measure: str) -> dict[tuple, dict[int, int]]:
    """The deals of each cell (by its labels) at each value of ``measure``, nulls left out."""
    frame = (
        tables[table_of(measure)]
        .filter(pl.col(measure).is_not_null())
        .group_by(*summary.LABEL_COLUMNS, measure)
        .agg(pl.col("n").sum())
    )
    by_cell: dict[tuple, dict[int, int]] = {}
    for row in frame.iter_rows(named=True):
        labels = tuple(
            None if row[name] is None else str(row[name]) for name in summary.LABEL_COLUMNS
        )
        by_cell.setdefault(labels, {})[int(row[measure])] = int(row["n"])
    return by_cell


def labels_of(cell: Cell) -> tuple:
    return tuple(getattr(cell, name) for name in summary.LABEL_COLUMNS)


def distribution(measure: str, cell: Cell, observed: dict[int, int], law: laws.Law) -> dict:
    """One measure's counts on one cell beside its law, and their fit."""
    total = sum(observed.values())
    chances = law.chances or {}
    mean = law.mean()
    record = {
        "measure": measure,
        "cell": cell.label,
        "variant": cell.variant,
        "order": cell.order,
        "n": total,
        "mean": sum(v * n for v, n in observed.items()) / total if total else math.nan,
        "law": law.source,
        "law_known": law.known,
        "exact_mean": None if mean is None else float(mean),
        "exact_mean_fraction": None if mean is None else odds.fraction_text(mean),
        "chi2": None,
        "dof": None,
        "p_value": None,
        "bins": None,
    }
    if law.known:
        fit = stats.chisquare_gof(observed, {v: float(p) for v, p in chances.items()})
        record.update(chi2=fit.statistic, dof=fit.dof, p_value=fit.p_value, bins=len(fit.bins))
    record["verdict"] = verdict_of(record["p_value"])
    record["rows"] = [
        {
            measure: value,
            "observed": observed.get(value, 0),
            "observed_share": observed.get(value, 0) / total if total else 0.0,
            "exact": float(chances[value]) if value in chances else (0.0 if law.known else None),
            "exact_fraction": odds.fraction_text(chances[value]) if value in chances else None,
        }
        for value in sorted(set(observed) | {v for v, p in chances.items() if p})
    ]
    return record


def every_distribution(tables: dict[str, pl.DataFrame], cells: list[Cell]) -> list[dict]:
    """A record (`distribution`) for each measure of `laws.DISTRIBUTED` and each of ``cells``
    it has a value on, measure by measure, the cells in the sweep's order."""
    out = []
    for measure in laws.DISTRIBUTED:
        by_cell = counted(tables, measure)
        for cell in cells:
            law = laws.law_of(measure, cell)
            if law is not None:
                out.append(distribution(measure, cell, by_cell.get(labels_of(cell), {}), law))
    return out


def standard_views(records: list[dict]) -> dict[str, list[dict]]:
    """report.json's ``cards_turned`` (standard play's cells) and ``down_at_stop`` (the
    first cell of each deal order: every cell of an order has the same first deaths)."""
    orders = {}
    for d in records:
        if d["measure"] == "down_at_stop":
            orders.setdefault(d["order"], d)
    return {
        "cards_turned": [
            d for d in records if d["measure"] == "cards_turned" and d["variant"] == "standard"
        ],
        "down_at_stop": list(orders.values()),
    }


def off_their_laws(records: list[dict]) -> list[dict]:
    """The distributions whose counts disagree with their exact law (p below P_FLAG)."""
    return [
        {"distribution": d["measure"], "cell": d["cell"], "n": d["n"], "p_value": d["p_value"]}
        for d in records
        if d["verdict"] == OFF
    ]


def flattened(records: list[dict]) -> list[dict]:
    """distributions.csv's rows: one for each value of each record, with its record's cell,
    law and fit; the value in one column, ``value``, whatever the measure."""
    heads = ("measure", "cell", "n", "law", "chi2", "dof", "p_value", "verdict")
    return [
        {
            **{name: d[name] for name in heads},
            "value": row[d["measure"]],
            **{k: v for k, v in row.items() if k != d["measure"]},
        }
        for d in records
        for row in d["rows"]
    ]


def distinct(records: list[dict]) -> list[tuple[dict, int]]:
    """Each distinct distribution once, with how many cells have it (the same measure, counts
    and law: every cell of a deal order has the same first deaths), in the records' order."""
    seen: dict[tuple, list] = {}
    for d in records:
        key = (d["measure"], d["law"], tuple((r["observed"], r["exact"]) for r in d["rows"]))
        seen.setdefault(key, [d, 0])[1] += 1
    return [(d, count) for d, count in seen.values()]
