"""A comparison of runs (`compare.Comparison`) rendered: the text `clocksweep compare` prints,
and with ``--out DIR`` the files the report's formats make of it: compare.html (its plot
inline), compare.json, compare.csv and the plot, differences.png.

Rates are in percent, differences and their intervals in points, as the report has them.
"""

from __future__ import annotations

import json
import os

from pipeline.inference import stats
from pipeline.report import plots
from pipeline.report.compare import PAIRED, Comparison, compare
from pipeline.report.document import clean, write_csv
from pipeline.report.reading import ReportError
from pipeline.report.render import aligned, fmt, to_html
from pipeline.store.location import os_error_text

FILES = ("compare.html", "compare.json", "compare.csv", "differences.png")


def value_text(value) -> str:
    """A config value as a line shows it."""
    if value is None:
        return "-"
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value)


def run_lines(comparison: Comparison) -> list[list[str]]:
    return [
        [
            run.letter,
            run.where,
            f"{described['name']}: {described['record']} records, {described['deals']:,} "
            f"deals, {described['cells']} cells, seed {described['seed']}",
        ]
        for run in comparison.runs
        for described in [run.describe()]
    ]


def key_rows(comparison: Comparison) -> tuple[list[str], list[list[str]]]:
    """The config keys that differ, a column a run."""
    headings = ["key", *(run.letter for run in comparison.runs)]
    rows = [
        [difference["key"], *map(value_text, difference["values"])]
        for difference in comparison.config_differences
    ]
    return headings, rows


def pairing_lines(comparison: Comparison) -> list[str]:
    return [f"{p['a']} - {p['b']}: {p['method']}: {p['why']}" for p in comparison.pairing]


def difference_names(comparison: Comparison) -> list[str]:
    """The rows' difference columns, ``a_minus_b``, ... a run after the first."""
    return [f"{p['a']}_minus_{p['b']}".lower() for p in comparison.pairing]


def cell_table(comparison: Comparison) -> tuple[list[str], list[list[str]]]:
    """The shared cells side by side: each run's deals, rate and interval, then each
    difference with its interval and how it was measured."""
    letters = [run.letter for run in comparison.runs]
    headings = ["cell"]
    for letter in letters:
        headings += [f"{letter} deals", f"{letter} win rate", stats.LEVEL]
    for pairing in comparison.pairing:
        headings += [f"{pairing['a']} - {pairing['b']}", stats.LEVEL, ""]
    rows = []
    for row in comparison.rows:
        line = [row["label"]]
        for letter in map(str.lower, letters):
            line += [
                fmt(row[f"{letter}_n"]),
                fmt(row[f"{letter}_win_rate"], "pct"),
                f"{fmt(row[f'{letter}_ci_low'], 'pct')} to {fmt(row[f'{letter}_ci_high'], 'pct')}",
            ]
        for name in difference_names(comparison):
            line += [
                fmt(row[name], "pts"),
                f"{fmt(row[f'{name}_low'], 'pts')} to {fmt(row[f'{name}_high'], 'pts')}",
                method_text(row, name),
            ]
        rows.append(line)
    return headings, rows


def method_text(row: dict, name: str) -> str:
    if row[f"{name}_method"] != PAIRED:
        return row[f"{name}_method"]
    return f"paired, {row[f'{name}_deals']:,} deals, McNemar p {stats.p_text(row[f'{name}_mcnemar_p'], 2)}"


def not_shared_lines(comparison: Comparison) -> list[str]:
    return [f"{cell['label']}: only in {', '.join(cell['in'])}" for cell in comparison.not_shared]


def text(comparison: Comparison) -> str:
    """What `clocksweep compare` prints."""
    lines = [f"clocksweep compare: {len(comparison.runs)} runs"]
    lines += aligned(["run", "where", "what"], run_lines(comparison), "  ")[1:]
    if comparison.config_differences:
        lines.append("config keys that differ:")
        lines += aligned(*key_rows(comparison), "  ")
    else:
        lines.append("config keys that differ: none")
    lines += pairing_lines(comparison)
    lines += [f"not read: {problem}" for problem in comparison.not_read]
    lines.append(
        f"cells in every run ({len(comparison.rows)}): win rates in percent, differences in "
        f"points, {stats.LEVEL} intervals"
    )
    lines += aligned(*cell_table(comparison), "  ")
    if comparison.not_shared:
        lines.append("cells not in every run:")
        lines += [f"  {line}" for line in not_shared_lines(comparison)]
    return "\n".join(lines)


def blocks(comparison: Comparison, png: bytes | None) -> list[tuple]:
    """The HTML page's blocks (`render.to_html`)."""
    out: list[tuple] = [
        ("h1", "Runs compared: " + ", ".join(run.letter for run in comparison.runs)),
        ("table", ["run", "where", "what"], run_lines(comparison)),
        ("h2", "Config keys that differ"),
    ]
    headings, rows = key_rows(comparison)
    out.append(("table", headings, rows) if rows else ("p", "None."))
    out += [("h2", "How the runs are compared"), ("list", pairing_lines(comparison))]
    if comparison.not_read:
        out.append(("list", [f"not read: {problem}" for problem in comparison.not_read]))
    out += [
        ("h2", f"Cells in every run ({len(comparison.rows)})"),
        (
            "p",
            f"Win rates in percent, differences in points, {stats.LEVEL} intervals. A paired "
            "difference is measured on the deals both runs hold, an independent one on each "
            "run's own deals.",
        ),
        ("table", *cell_table(comparison)),
    ]
    if png:
        out.append(("img", FILES[3], "Differences per shared cell", png))
    if comparison.not_shared:
        out += [("h2", "Cells not in every run"), ("list", not_shared_lines(comparison))]
    return out


def write(comparison: Comparison, directory: str, out_named: str = "--out") -> str:
    """Write compare.html, compare.json, compare.csv and the plot into ``directory``
    (``out_named``: what errors call it); gives the directory."""
    if "://" in directory or not directory.strip():
        raise ReportError(f"{out_named}: {directory!r}: expected a local directory path")
    png = plots.differences(comparison.rows, difference_names(comparison))
    try:
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "compare.json"), "w") as file:
            file.write(json.dumps(clean(comparison.document()), separators=(",", ":")) + "\n")
        write_csv(os.path.join(directory, "compare.csv"), comparison.rows)
        with open(os.path.join(directory, "compare.html"), "w") as file:
            file.write(to_html(blocks(comparison, png)))
        if png:
            with open(os.path.join(directory, FILES[3]), "wb") as file:
                file.write(png)
    except OSError as error:
        raise ReportError(
            f"{out_named}: {directory}: cannot write the comparison ({os_error_text(error)})"
        ) from None
    return directory


def printed(wheres: list[str], out: str | None = None) -> str:
    """What `clocksweep compare A B [C ...]` prints; with ``out``, the files written there
    first (`write`), and where they are."""
    comparison = compare(wheres)
    if out is None:
        return text(comparison)
    written = write(comparison, out)
    return f"{text(comparison)}\nwritten to {written}/ ({', '.join(FILES)})"
