"""`clocksweep report RESULTS`: the report as a document (report.json's content) and its files.

Writing: RESULTS/report/ gets report.md, a self-contained report.html (plots inline as
base64 PNG, no external reference), the plots as PNG, the tables as CSV, and report.json
(docs/results.md: ``cells``, ``comparisons``, ``claims``, plus the rest).
"""

from __future__ import annotations

import csv
import json
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pipeline import __version__
from pipeline.engine import rules
from pipeline.inference import stats
from pipeline.inference.claims import Claim
from pipeline.records import summary
from pipeline.report import claims as claim_rules
from pipeline.report import distributions, plots
from pipeline.report.figures import Z_FLAG, Figures, make_replay
from pipeline.report.reading import Loaded, ReportError, load
from pipeline.report.render import document_blocks, to_html, to_markdown
from pipeline.store import credentials, layout
from pipeline.store.location import os_error_text

REPORT_VERSION = "clocksweep-report/1"
DEFAULT_REPLAY = 100_000


# --- The report ---------------------------------------------------------------------------

DOCUMENT_KEYS = (
    "report_version",
    "provenance",
    "stopping",
    "cells",
    "comparisons",
    "best_strategies",
    "own_strategies",
    "claims",
    "laws_disagree",
    "distributions",
    "hint_calibration",
    "notes",
)


@dataclass
class Report:
    loaded: Loaded
    figures: Figures
    claims: list[claim_rules.Checked]
    document: dict
    directory: str | None  # where it is written (RESULTS/report unless given; None on a store)
    timings: dict = field(default_factory=dict)  # seconds per phase
    finish_plots: object = None  # waits for the plots (`plots.Plotter.start`); None: none


def shown_config(config: dict) -> dict:
    """A run record's config as the report shows it: its output's credentials as *** (a
    run.json written by an earlier clocksweep may hold them; one written now never does)."""
    output = config.get("output") if isinstance(config, dict) else None
    return {**config, "output": credentials.shown(output)} if isinstance(output, str) else config


def provenance(loaded: Loaded) -> dict:
    run = loaded.run
    ranges = []
    for entry in sorted(loaded.shards_read, key=lambda e: e.first):
        first, last = entry.first, entry.last
        if ranges and ranges[-1][1] + 1 == first:
            ranges[-1][1] = last
        else:
            ranges.append([first, last])
    runs = []
    for record in run.runs:
        ray = record.get("ray") or {}
        runs.append(
            {
                "started": record.get("started"),
                "finished": record.get("finished"),
                "status": record.get("status"),
                "host": record.get("host"),
                "clocksweep": record.get("clocksweep"),
                "executor": record.get("executor"),
                "cluster": ray.get("kind"),
                "ray_version": ray.get("ray_version"),
                "cpus": ray.get("cpus"),
                "nodes": len(ray.get("nodes") or []),
            }
        )
    return {
        "results": loaded.location.where,
        "record_mode": loaded.mode,
        "config": shown_config(run.config),
        "config_hash": run.config_hash,
        "config_source": run.config_source,
        "seed": run.settings.seed,
        "deal_ranges_read": [f"{a}-{b}" for a, b in ranges],
        "deals_read": sum(e.last - e.first + 1 for e in loaded.shards_read),
        "deal_scheme": run.deal_scheme,
        "result_schema": run.result_schema,
        "sweep_code_version": run.clocksweep,
        "runs": runs,
        "shards_planned": (run.shards or {}).get("count"),
        "shards_read": len(loaded.shards_read),
        "shard_files_read": [r.path for e in loaded.shards_read for r in e.files],
        "shards_not_read": loaded.problems,
        "shards_not_read_count": loaded.not_read,
        "in_progress": loaded.in_progress,
        "report_version": REPORT_VERSION,
        "summary_schema": summary.SUMMARY_SCHEMA_VERSION,
        "report_code_version": __version__,
    }


class Laps:
    """Seconds per phase of making a report (`Report.timings`), as benchmarks read them."""

    def __init__(self):
        self.timings: dict[str, float] = {}
        self.clock = time.perf_counter()

    def lap(self, phase: str) -> None:
        now = time.perf_counter()
        self.timings[phase] = round(now - self.clock, 3)
        self.clock = now


def compose(
    where: str,
    replay: int = DEFAULT_REPLAY,
    workers: int | None = None,
    start_plots=None,
    laps: Laps | None = None,
    claims: Sequence[Claim] | None = None,
) -> Report:
    """Read RESULTS and compute every figure of its report; nothing is written (``directory``
    is where `build` would write it). ``start_plots(document)``: called as soon as what the
    plots show is known, so that they are drawn while the rest is computed. ``claims``: the
    claims to check (`claim_file.read_all`; default the rule pages')."""
    laps = laps or Laps()
    # scipy (for the figures) first: imported beside the reading, it would hold the reading
    # threads back for longer than it takes.
    import scipy.special  # noqa: F401

    laps.lap("import scipy")
    loaded = load(where, head=replay, workers=workers)
    laps.lap("read")
    replayed, note = None, ""
    if loaded.tables["facts"].is_empty():
        # No deal facts in the records (no standard cell): replay the first deals instead.
        replayed, note = make_replay(loaded, replay)
        laps.lap("replay")
    figures = Figures(loaded, replayed, note)
    every = figures.every_distribution()
    document = {
        "report_version": REPORT_VERSION,
        "provenance": provenance(loaded),
        "cells": figures.cell_records(),
        "distributions": {
            **distributions.standard_views(every),
            "restarts": figures.restarts(),
            "rescue_by_down_at_stop": figures.rescue_by_down(),
            "every": every,
        },
        "hint_calibration": figures.hint_calibration(),
    }
    document["laws_disagree"] = distributions.off_their_laws(every)
    finish_plots = start_plots(document) if start_plots is not None else None
    laps.lap("figures")
    checked = claim_rules.assess(figures, claims)
    document.update(
        comparisons=figures.comparisons(),
        best_strategies=figures.best_strategies(),
        own_strategies=figures.own_strategies(),
        claims=[claim.record() for claim in checked],
        stopping=stopping(loaded, figures, checked),
        notes=notes(loaded, figures),
    )
    document = {key: document[key] for key in DOCUMENT_KEYS}  # report.json's order
    laps.lap("claims and comparisons")
    directory = loaded.location.local_path(layout.REPORT_DIR)
    return Report(loaded, figures, checked, document, directory, laps.timings, finish_plots)


def build(
    where: str,
    replay: int = DEFAULT_REPLAY,
    out: str | None = None,
    plots_enabled: bool = True,
    workers: int | None = None,
    plotter: plots.Plotter | None = None,
    claims: Sequence[Claim] | None = None,
    out_named: str = "--out",
) -> Report:
    """Read RESULTS, compute every figure and write RESULTS/report/ (or ``out``, which
    errors call ``out_named``: the CLI's option, or the API's parameter).

    ``plotter``: a `plots.Plotter` made by the caller, best before it imported this module
    (see `plots.Plotter`); by default the report makes its own. ``claims``: as `compose`.
    """
    if plotter is None:
        with plots.Plotter((os.cpu_count() or 1) if plots_enabled else 1) as plotter:
            return build(where, replay, out, plots_enabled, workers, plotter, claims, out_named)
    if out is not None and ("://" in out or not out.strip()):
        raise ReportError(f"{out_named}: {out!r}: expected a local directory path")
    laps = Laps()
    # The plots' process, started by now, imports matplotlib while the shards are read.
    start_plots = (lambda document: plotter.start(_plot_jobs(document))) if plots_enabled else None
    made = compose(where, replay, workers, start_plots, laps, claims)
    if out is None and made.directory is None:
        raise ReportError(
            f"{made.loaded.location.where}: the report is written locally; pass an output directory"
        )
    made.directory = out or made.directory
    write(made, out_named if out is not None else None)
    laps.lap("write")
    return made


def write(made: Report, chosen: str | None) -> None:
    """Write a composed report into its directory (``chosen``: the option or parameter that
    gave it, named in an error; None: RESULTS/report, removed again if it cannot be written
    whole)."""
    try:
        os.makedirs(made.directory, exist_ok=True)
    except OSError as error:
        raise ReportError(
            f"{f'{chosen}: ' if chosen else ''}{made.directory}: cannot write a "
            f"report there ({error.strerror or error})"
        ) from None
    try:
        write_all(made.directory, made.document, made.figures, made.finish_plots)
    except OSError as error:
        if not chosen:  # RESULTS/report is ours: no half-written report is left to be read
            made.loaded.location.delete(layout.REPORT_DIR)
        raise ReportError(
            f"{f'{chosen}: ' if chosen else ''}{made.directory}: cannot write "
            f"the report ({os_error_text(error)})"
        ) from None


def stopping(loaded: Loaded, figures: Figures, claims: list) -> dict | None:
    """How a run with a stop rule stopped (run.json's record of it), each interval the rule
    read beside the fixed-n one of the same confidence on the same deals (for a claim, the
    report's own interval of it); None without one."""
    stop = loaded.run.stop
    if not isinstance(stop, dict) or not isinstance(stop.get("targets"), list):
        return None
    confidence = stop["rule"]["confidence"]
    by_label = {cell.label: cell for cell in figures.cells}
    claimed = {claim.id: claim for claim in claims}
    targets = []
    for target in stop["targets"]:
        cells = [by_label.get(label) for label in target["cells"]]
        fixed = None
        if target["kind"] == "claim":
            claim = claimed.get(target.get("claim"))
            fixed = claim.interval if claim is not None else None
        elif None not in cells and target["kind"] == "cell":
            figure = figures.cells[cells[0]]
            fixed = stats.wilson(figure.wins, figure.n, confidence)
        elif None not in cells:
            paired = figures.paired(cells[0], cells[1], confidence)
            fixed = None if paired is None else (paired.low, paired.high)
        targets.append({**target, "fixed_n_interval": None if fixed is None else list(fixed)})
    return {
        "rule": stop.get("rule_text"),
        "confidence": confidence,
        "met": stop["met"],
        "stopped_at_shard": stop["stopped_at_shard"],
        "deals": stop["deals"],
        "deals_still_needed": stop.get("deals_still_needed"),
        "targets": targets,
    }


def notes(loaded: Loaded, figures: Figures) -> list[str]:
    out = [
        f"Win rates carry {stats.LEVEL} Wilson intervals; claims' verdicts use "
        f"{stats.CLAIM_LEVEL} intervals.",
        "Paired comparisons: a's win rate minus b's on the same deals, Newcombe's hybrid score "
        "interval, exact McNemar test on the discordant deals.",
        f"z-scores are against the exact value with its own standard error; |z| > {Z_FLAG:g} is flagged.",
    ]
    if loaded.mode == "summary":
        out.append(
            "Summary records: runs of consecutive deals are counted within each summarised "
            "batch (blocks of 13); a partial block at a batch's end is left out."
        )
    if figures.replay is None and figures.replay_note:
        out.append(figures.replay_note)
    recomputed = {f.cell.strategy: f.recomputed for f in figures.cells.values() if f.recomputed}
    for strategy, why in recomputed.items():
        out.append(
            f"The exact value of {strategy} was recomputed: the copy of its totals kept in the "
            f"cache was not trusted ({why}), so every count vector was played again."
        )
    return out


# --- Writing ------------------------------------------------------------------------------


def clean(value):
    """JSON-safe: NaN and infinities as null, numpy scalars as Python numbers."""
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    return value


def write_csv(path: str, rows: list[dict]) -> None:
    with open(path, "w", newline="") as file:
        if not rows:
            return
        writer = csv.DictWriter(file, fieldnames=list(rows[0]), extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if v is None else v) for k, v in clean(row).items()})


FIT = ("chi2", "dof", "p_value")  # a distribution's fit to its exact law, on each of its rows


def flatten(groups: list[dict], key: str = "cell") -> list[dict]:
    """Rows of nested distributions, each with its group's name (and its fit to an exact
    law, where it has one)."""
    return [
        {key: group[key], **row, **{name: group[name] for name in FIT if name in group}}
        for group in groups
        for row in group["rows"]
    ]


def claim_rows(document: dict) -> list[dict]:
    """The claims as rows of a table: the interval's ends in columns of their own, the
    detail in one text, the sources as the text that names them."""
    return [
        {k: v for k, v in c.items() if k not in ("sources", "detail")}
        | {
            "interval_low": (c["interval"] or [None, None])[0],
            "interval_high": (c["interval"] or [None, None])[1],
            "detail": "; ".join(c["detail"]),
        }
        for c in document["claims"]
    ]


def write_all(directory: str, document: dict, figures: Figures, finish_plots=None) -> None:
    """report.json, the CSV and Parquet tables, report.md and report.html, and the PNG plots
    that ``finish_plots`` (from `plots.Plotter.start`; None: no plots) waits for."""
    dist = document["distributions"]
    with open(os.path.join(directory, "report.json"), "w") as file:
        # json.dumps with no indentation: only then does json use its C encoder (json.dump
        # never does), and a 100-cell report is 1.5 MB.
        file.write(json.dumps(clean(document), separators=(",", ":")) + "\n")
    claims_rows = claim_rows(document)
    for name, rows in {
        "cells": document["cells"],
        "comparisons": document["comparisons"],
        "best_strategies": document["best_strategies"],
        "own_strategies": document["own_strategies"],
        "claims": [{k: v for k, v in r.items() if k != "interval"} for r in claims_rows],
        "cards_turned": flatten(dist["cards_turned"]),
        "down_at_stop": flatten(dist["down_at_stop"], "order"),
        "restarts": flatten(dist["restarts"]),
        "rescue_by_down_at_stop": dist["rescue_by_down_at_stop"],
        "distributions": distributions.flattened(dist["every"]),
        "hint_calibration": flatten(document["hint_calibration"]),
    }.items():
        write_csv(os.path.join(directory, f"{name}.csv"), rows)
    for table, frame in figures.tables.items():
        frame.write_parquet(os.path.join(directory, f"summary_{table}.parquet"))

    images = []
    if finish_plots is not None:
        for filename, png in finish_plots():
            if png:
                with open(os.path.join(directory, filename), "wb") as file:
                    file.write(png)
                images.append((filename, PLOT_TITLES[filename], png))
    blocks = document_blocks(document, images)
    with open(os.path.join(directory, "report.md"), "w") as file:
        file.write(to_markdown(blocks))
    with open(os.path.join(directory, "report.html"), "w") as file:
        file.write(to_html(blocks))


PLOT_TITLES = {
    "win_rates.png": f"Win rate per cell with {stats.LEVEL} intervals",
    "cards_turned.png": "Cards turned in standard play against the exact law",
    "hint_calibration.png": "The hint's chance against the observed win rate",
    "restarts.png": "Play it out: restarts",
    "rescue_by_down.png": "Rescue win rate by cards left at the first death",
}


def _plot_jobs(document: dict) -> list[tuple[str, str, tuple]]:
    """The plots of a report, as `plots.Plotter.start` takes them."""
    dist = document["distributions"]
    standard = next(
        (d for d in dist["cards_turned"] if "order=round-robin" in d["cell"]),
        dist["cards_turned"][0] if dist["cards_turned"] else None,
    )
    jobs = [  # the slowest first, so that the drawing processes finish together
        ("win_rates.png", "win_rates", (document["cells"],)),
        ("hint_calibration.png", "hint_calibration", (document["hint_calibration"],)),
        ("cards_turned.png", "cards_turned", (standard,)),
        (
            "rescue_by_down.png",
            "rescue_by_down",
            (dist["rescue_by_down_at_stop"], _plotted_rescues(document["cells"])),
        ),
        ("restarts.png", "restarts", (dist["restarts"],)),
    ]
    return [job for job in jobs if job[2][0] is not None]


def _plotted_rescues(cells: list[dict]) -> list[str]:
    """Cells of one rescue variant (watch if present), face down, counts-only strategies."""
    for variant in rules.RESCUE_VARIANTS:
        for finale in rules.FINALES:
            chosen = [
                c["label"]
                for c in cells
                if c["variant"] == variant
                and c["finale"] == finale
                and c["strategy"] in rules.COUNT_STRATEGIES
                and c["depth"] in (None, "bottom")
            ]
            orders = [c["order"] for c in cells if c["label"] in chosen]
            if chosen:
                first = "round-robin" if "round-robin" in orders else orders[0]
                return [c for c, o in zip(chosen, orders) if o == first]
    return []
