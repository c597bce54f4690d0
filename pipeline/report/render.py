"""The report's document rendered: Markdown, a self-contained HTML page, and the terminal's summary.

Every rendering is made from the same blocks (`document_blocks`), so the Markdown and the HTML say the same things.
"""

from __future__ import annotations

import base64
import html
import json
import math

from pipeline.inference import stats
from pipeline.report import claims as claim_rules
from pipeline.report.distributions import P_FLAG, distinct
from pipeline.report.figures import Z_FLAG


def fmt(value, kind: str = "") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    if kind == "pct":
        return f"{100 * value:.2f}%"
    if kind == "pts":
        return f"{100 * value:+.2f}"
    if kind == "p":
        return f"{value:.3g}"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def document_blocks(doc: dict, images: list[tuple[str, str, bytes]]) -> list[tuple]:
    """The report as a list of blocks, rendered alike to Markdown and HTML."""
    prov = doc["provenance"]
    config = prov["config"] or {}
    image = {name: (title, png) for name, title, png in images}
    blocks: list[tuple] = [
        ("h1", f"Clock Patience sweep report: {config.get('name', prov['results'])}")
    ]
    blocks.append(
        (
            "p",
            f"{prov['record_mode']} records, {prov['deals_read']:,} deals "
            f"({', '.join(prov['deal_ranges_read'])}), seed {prov['seed']}, "
            f"{len(doc['cells'])} cells, {prov['shards_read']} of "
            f"{prov['shards_planned']} planned shards read.",
        )
    )
    blocks += [("p", line) for line in laws_disagree_lines(doc)]
    blocks += _stopping_blocks(doc, image)
    # The user's questions first: which strategy wins, are the pages' claims right; then
    # the plots; each claim's detail after them.
    blocks += _best_strategies_blocks(doc, image)
    blocks += _claims_blocks(doc, image)
    blocks += _own_strategies_blocks(doc, image)
    blocks += _win_rates_blocks(doc, image)
    blocks += _comparisons_blocks(doc, image)
    blocks += _distributions_blocks(doc, image)
    blocks += _hint_calibration_blocks(doc, image)
    blocks += _claim_detail_blocks(doc, image)
    blocks += _provenance_blocks(doc, image)
    blocks += _notes_blocks(doc, image)
    return blocks


def laws_disagree_lines(doc: dict) -> list[str]:
    """The report's first warning, where a distribution disagrees with its exact law."""
    off = doc["laws_disagree"]
    if not off:
        return []
    return [
        f"{len(off)} distribution(s) off their exact law (chi-square p < {P_FLAG:g}: the "
        "engine or the law is wrong): "
        + "; ".join(
            f"{d['distribution']} of {d['cell']} (p {stats.p_text(d['p_value'])})" for d in off[:5]
        )
    ]


def _stopping_blocks(doc: dict, image: dict) -> list[tuple]:
    stop = doc.get("stopping")
    if not stop:
        return []
    level = f"{stop['confidence']:.0%}"
    if stop["stopped_at_shard"] is not None:
        how = (
            f"The run stopped after shard {stop['stopped_at_shard']}, at {stop['deals']:,} deals, "
            f"once its rule held: {stop['rule']}."
        )
    else:
        how = (
            f"The rule ({stop['rule']}) was not met in {stop['deals']:,} deals, the most the "
            f"config allows; about {stop['deals_still_needed'] or 0:,} more deals would meet it."
        )
    rows = []
    for t in stop["targets"]:
        kind = "pct" if len(t["cells"]) == 1 else "pts"
        low, high = t["interval"]
        fixed = t["fixed_n_interval"]
        what = " - ".join(t["cells"])
        if t["kind"] == "claim":
            what = f"claim {t['claim']} ({t['verdict']}, {t['confidence']:.1%}): {what}"
        rows.append(
            [
                what,
                fmt(t["estimate"], kind),
                f"{fmt(low, kind)} to {fmt(high, kind)}",
                fmt(t["half_width"], "pts").lstrip("+"),
                f"{fmt(fixed[0], kind)} to {fmt(fixed[1], kind)}" if fixed else "",
                "met" if t["met"] else "NOT MET",
            ]
        )
    return [
        ("h2", "How the run stopped"),
        ("p", how),
        (
            "p",
            f"Each target's anytime-valid interval ({level} confidence sequence, valid at every "
            f"look the run made) beside the fixed-n {level} interval on the same deals (valid "
            "only had the number of deals been fixed in advance). Rates in percent, "
            "differences and half-widths in points.",
        ),
        (
            "table",
            ["target", "estimate", f"anytime-valid {level}", "half-width", f"fixed-n {level}", ""],
            rows,
        ),
    ]


def _claims_blocks(doc: dict, image: dict) -> list[tuple]:
    blocks: list[tuple] = []
    blocks.append(("h2", "Claims"))
    blocks.append(
        (
            "p",
            "Each claim (docs/claims.md), measured on this sweep. "
            f"Intervals are {stats.CLAIM_LEVEL}; the rule under each claim decides its verdict "
            "(each claim's rule and measure: Claims in detail, below the plots). A claim the "
            "sweep's cells cannot answer is not measured, and says what it needs.",
        )
    )
    blocks.append(
        (
            "table",
            ["claim", "source", "verdict", "figure", f"{stats.CLAIM_LEVEL} interval"],
            [
                [
                    c["claim"],
                    c["source"],
                    c["verdict"].upper(),
                    c["figure_text"] or "-",
                    claim_rules.interval_text(c["interval"]) or "-",
                ]
                for c in doc["claims"]
            ],
        )
    )
    return blocks


def _claim_detail_blocks(doc: dict, image: dict) -> list[tuple]:
    """Each claim's rule, basis, exact value and detail, under its id."""
    blocks: list[tuple] = [("h2", "Claims in detail")] if doc["claims"] else []
    for c in doc["claims"]:
        items = [
            f"Claim: {c['claim']}",
            f"Source: {c['source']}",
            f"Rule: {c['rule']}",
            f"Measured on: {c['basis']}",
        ]
        if c["exact"]:
            items.append(f"Exact value: {c['exact']}")
        if c["needs"]:
            items.append(f"Needs: {c['needs']}")
        items += c["detail"]
        blocks.append(("h3", f"{c['id']}: {c['verdict']}"))
        blocks.append(("list", items))
    return blocks


def _best_strategies_blocks(doc: dict, image: dict) -> list[tuple]:
    blocks: list[tuple] = []
    blocks.append(("h2", "Best strategy per variant"))
    blocks.append(("list", [b["line"] for b in doc["best_strategies"]] or ["no rescue cells"]))
    return blocks


def _own_strategies_blocks(doc: dict, image: dict) -> list[tuple]:
    """Strategies of the user's, each against what it can reach (`odds.bound_of`)."""
    if not doc["own_strategies"]:
        return []
    return [
        ("h2", "Strategies of your own"),
        (
            "p",
            "With the bottoms face down, the chance a rescue at pile p wins, given all a player "
            "sees, is d_p / U (at the top of the exchange, [d_p = 1] / U): so no strategy that "
            "does not peek beats most (fewest at the top), whatever it reads of the cards "
            "turned; one that reads the face-up bottoms sees what the oracle peeks at. Each "
            f"strategy of your own is checked against that bound's exact value with its "
            f"{stats.CLAIM_LEVEL} interval.",
        ),
        ("list", [record["line"] for record in doc["own_strategies"]]),
    ]


def _win_rates_blocks(doc: dict, image: dict) -> list[tuple]:
    blocks: list[tuple] = []
    blocks.append(("h2", "Win rates"))
    if "win_rates.png" in image:
        blocks.append(("img", "win_rates.png", *image["win_rates.png"]))
    blocks.append(
        (
            "table",
            [
                "cell",
                "n",
                "wins",
                "win rate",
                f"{stats.LEVEL} CI",
                "exact",
                "difference",
                "z",
                "flag",
            ],
            [
                [
                    c["label"],
                    fmt(c["n"]),
                    fmt(c["wins"]),
                    fmt(c["win_rate"], "pct"),
                    f"{fmt(c['ci_low'], 'pct')} - {fmt(c['ci_high'], 'pct')}",
                    _exact_text(c),
                    fmt(c["difference"], "pts"),
                    fmt(c["z"]),
                    "|z|>4" if c["flag"] else "",
                ]
                for c in doc["cells"]
            ],
        )
    )
    return blocks


def _exact_text(cell: dict) -> str:
    """A cell's exact value in the table, marked where it was enumerated again (the notes
    say why)."""
    if not cell["exact"]:
        return ""
    recomputed = " (recomputed)" if cell["exact_recomputed"] else ""
    return f"{cell['exact']} = {fmt(cell['exact_value'], 'pct')}{recomputed}"


def _comparisons_blocks(doc: dict, image: dict) -> list[tuple]:
    blocks: list[tuple] = []
    blocks.append(("h2", "Paired comparisons"))
    blocks.append(
        (
            "p",
            f"a minus b on the same deals, in percentage points, with the {stats.LEVEL} interval "
            "and the exact McNemar p-value on the deals where they differ.",
        )
    )
    blocks.append(
        (
            "table",
            ["kind", "a", "b", "n", "a rate", "b rate", "a - b", f"{stats.LEVEL} CI", "McNemar p"],
            [
                [
                    r["kind"],
                    r["a"],
                    r["b"],
                    fmt(r["n"]),
                    fmt(r["a_rate"], "pct"),
                    fmt(r["b_rate"], "pct"),
                    fmt(r["difference"], "pts"),
                    f"{fmt(r['ci_low'], 'pts')} to {fmt(r['ci_high'], 'pts')}",
                    fmt(r["mcnemar_p"], "p"),
                ]
                for r in doc["comparisons"]
                if r["kind"] != "rescue_vs_standard"
            ],
        )
    )
    return blocks


def _restarts_blocks(dist: dict, image: dict) -> list[tuple]:
    """`play_out`'s restarts against their exact law."""
    blocks: list[tuple] = []
    blocks.append(("h3", "Play it out"))
    if "restarts.png" in image:
        blocks.append(("img", "restarts.png", *image["restarts.png"]))
    blocks.append(
        (
            "table",
            [
                "cell",
                "deals",
                "mean restarts",
                "exact mean",
                "chi-square vs exact law",
                "df",
                "p",
                "later deaths",
                "deaths away from the predicted pile",
            ],
            [
                [
                    d["cell"],
                    fmt(d["n"]),
                    fmt(d["mean_restarts"]),
                    f"{d['exact_mean_fraction']} = {fmt(d['exact_mean'])}",
                    fmt(d["chi2"]),
                    fmt(d["dof"]),
                    fmt(d["p_value"], "p"),
                    fmt(d["later_deaths"]),
                    fmt(d["stray_deaths"]),
                ]
                for d in dist["restarts"]
            ],
        )
    )
    return blocks


def _distributions_blocks(doc: dict, image: dict) -> list[tuple]:
    blocks: list[tuple] = []
    dist = doc["distributions"]
    blocks.append(("h2", "Distributions"))
    blocks.append(("h3", "Cards turned in standard play"))
    if "cards_turned.png" in image:
        blocks.append(("img", "cards_turned.png", *image["cards_turned.png"]))
    blocks.append(
        (
            "table",
            ["cell", "deals", "chi-square", "df", "p"],
            [
                [d["cell"], fmt(d["n"]), fmt(d["chi2"]), fmt(d["dof"]), fmt(d["p_value"], "p")]
                for d in dist["cards_turned"]
            ],
        )
    )
    blocks.append(("h3", "Cards face down at the first death"))
    blocks.append(
        (
            "table",
            ["order", "deals", "chi-square vs exact law", "df", "p"],
            [
                [d["order"], fmt(d["n"]), fmt(d["chi2"]), fmt(d["dof"]), fmt(d["p_value"], "p")]
                for d in dist["down_at_stop"]
            ],
        )
    )
    blocks += _restarts_blocks(dist, image)
    blocks.append(("h3", "Rescues by cards left at the first death"))
    if "rescue_by_down.png" in image:
        blocks.append(("img", "rescue_by_down.png", *image["rescue_by_down.png"]))
    blocks.append(("p", "Per cell and number of cards left: rescue_by_down_at_stop.csv."))
    blocks += _every_law_blocks(dist["every"])
    return blocks


def _every_law_blocks(every: list[dict]) -> list[tuple]:
    """Each distinct distribution of every measure and cell against its exact law, and the
    measures and cells with none known, each reason once."""
    rows, unknown = [], {}
    for d, cells in distinct(every):
        if not d["law_known"]:
            unknown.setdefault((d["measure"], d["law"]), []).append((d["cell"], cells))
            continue
        more = f" (and {cells - 1} more cell(s) with the same counts)" if cells > 1 else ""
        rows.append(
            [
                d["measure"],
                d["cell"] + more,
                fmt(d["n"]),
                f"{d['mean']:.4f}",
                f"{d['exact_mean']:.4f}",
                f"{fmt(d['chi2'])} on {d['dof']} df",
                fmt(d["p_value"], "p"),
                d["verdict"],
            ]
        )
    header = ["measure", "cell", "deals", "mean", "exact mean", "chi-square", "p", "verdict"]
    blocks: list[tuple] = [
        ("h3", "Every distribution against its exact law"),
        (
            "p",
            f"Each measure on each cell, beside its exact law (docs/rules.md, Exact laws): "
            f"a p below {P_FLAG:g} means the engine or the law is wrong. Every value's count "
            "and chance: distributions.csv.",
        ),
        ("table", header, rows),
    ]
    for (measure, why), cells in unknown.items():
        count = sum(n for _, n in cells)
        blocks.append(("p", f"{measure}, {count} cell(s) (as {cells[0][0]}): {why}."))
    return blocks


def _hint_calibration_blocks(doc: dict, image: dict) -> list[tuple]:
    blocks: list[tuple] = []
    blocks.append(("h2", "The hint's calibration"))
    blocks.append(
        (
            "p",
            "With only the counts visible, rescuing at pile p wins with "
            "chance d_p / U. Each distinct chance is tested against its observed win rate "
            "(chi-square over the chances).",
        )
    )
    if "hint_calibration.png" in image:
        blocks.append(("img", "hint_calibration.png", *image["hint_calibration.png"]))
    blocks.append(
        (
            "table",
            ["cell", "chi-square", "df", "p"],
            [
                [h["cell"], fmt(h["chi2"]), fmt(h["dof"]), fmt(h["p_value"], "p")]
                for h in doc["hint_calibration"]
            ],
        )
    )
    return blocks


def _provenance_blocks(doc: dict, image: dict) -> list[tuple]:
    blocks: list[tuple] = []
    prov = doc["provenance"]
    config = doc["provenance"]["config"] or {}
    blocks.append(("h2", "Provenance"))
    runs = "; ".join(_run_text(r) for r in prov["runs"])
    blocks.append(
        (
            "list",
            [
                f"results: {prov['results']}",
                # The sources of strategies of the user's are in report.json, not here.
                f"config: {json.dumps({k: v for k, v in config.items() if k != 'custom_source'}, sort_keys=True)}",
                f"config hash: {prov['config_hash']}",
                f"deal scheme: {prov['deal_scheme']}; result schema: {prov['result_schema']}",
                f"deal ranges read: {', '.join(prov['deal_ranges_read'])}",
                f"runs: {runs or 'none recorded'}",
                f"shards read: {prov['shards_read']} ({len(prov['shard_files_read'])} files)",
                f"shards not read: {prov['shards_not_read_count']:,}"
                + "".join(f"; {problem}" for problem in prov["shards_not_read"])
                + (f"; in progress: {prov['in_progress']}" if prov["in_progress"] else ""),
                f"report: {prov['report_version']}, summary tables {prov['summary_schema']}, "
                f"clocksweep {prov['report_code_version']}",
            ],
        )
    )
    return blocks


def _notes_blocks(doc: dict, image: dict) -> list[tuple]:
    blocks: list[tuple] = []
    blocks.append(("h2", "Notes"))
    blocks.append(("list", doc["notes"]))
    return blocks


def _md_text(text) -> str:
    """Text as Markdown shows it and no more: Markdown viewers render inline HTML, so what a
    user wrote (a claim's words, a title, a strategy's name) is HTML-escaped (`&lt;` shows as
    `<`), never passed through as markup."""
    return html.escape(str(text), quote=False)


def _md_cell(text) -> str:
    """A table cell's text: escaped, and with nothing that would end the cell or the row."""
    return _md_text(text).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def to_markdown(blocks: list[tuple]) -> str:
    out = []
    for block in blocks:
        kind = block[0]
        if kind in ("h1", "h2", "h3"):
            out.append("#" * int(kind[1]) + " " + _md_cell(block[1]))
        elif kind == "p":
            out.append(_md_text(block[1]))
        elif kind == "list":
            out.append("\n".join(f"- {_md_cell(item)}" for item in block[1]))
        elif kind == "table":
            headers, rows = block[1], block[2]
            lines = ["| " + " | ".join(map(_md_cell, headers)) + " |", "|" + "---|" * len(headers)]
            lines += ["| " + " | ".join(_md_cell(v) for v in row) + " |" for row in rows]
            out.append("\n".join(lines))
        elif kind == "img":
            out.append(f"![{_md_cell(block[2]).replace(']', chr(92) + ']')}]({block[1]})")
    return "\n\n".join(out) + "\n"


STYLE = """body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#222}table{border-collapse:collapse;font-size:12px;margin:0.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}th{background:#f0f0f0}
img{max-width:100%}h3{margin-bottom:0.2em}.confirmed{color:#17702a;font-weight:bold}
.refuted{color:#a8231b;font-weight:bold}.inconclusive{color:#8a6d00;font-weight:bold}"""


def to_html(blocks: list[tuple]) -> str:
    esc = html.escape
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(blocks[0][1])}</title><style>{STYLE}</style></head><body>",
    ]
    for block in blocks:
        kind = block[0]
        if kind in ("h1", "h2", "h3"):
            out.append(f"<{kind}>{esc(block[1])}</{kind}>")
        elif kind == "p":
            out.append(f"<p>{esc(block[1])}</p>")
        elif kind == "list":
            out.append(
                "<ul>" + "".join(f"<li>{esc(str(item))}</li>" for item in block[1]) + "</ul>"
            )
        elif kind == "table":
            headers, rows = block[1], block[2]
            head = "".join(f"<th>{esc(h)}</th>" for h in headers)
            body = []
            for row in rows:
                cells = []
                for value in row:
                    text = str(value)
                    css = (
                        text.lower()
                        if text.lower() in ("confirmed", "refuted", "inconclusive")
                        else ""
                    )
                    cells.append(
                        f'<td class="{css}">{esc(text)}</td>' if css else f"<td>{esc(text)}</td>"
                    )
                body.append("<tr>" + "".join(cells) + "</tr>")
            out.append(
                f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
            )
        elif kind == "img":
            data = base64.b64encode(block[3]).decode("ascii")
            out.append(
                f'<figure><img alt="{esc(block[2])}" src="data:image/png;base64,{data}">'
                f"<figcaption>{esc(block[2])}</figcaption></figure>"
            )
    out.append("</body></html>")
    return "\n".join(out) + "\n"


# --- The terminal -------------------------------------------------------------------------


def aligned(headings: list[str], rows: list[list[str]], indent: str = "") -> list[str]:
    """A table as lines of text: each column as wide as its widest value, two spaces apart."""
    widths = [max(len(row[i]) for row in [headings, *rows]) for i in range(len(headings))]
    return [
        indent + "  ".join(value.ljust(width) for value, width in zip(row, widths)).rstrip()
        for row in [headings, *rows]
    ]


def _run_text(run: dict) -> str:
    """One run of the results in words: when, how it ended (or that it has not), where."""
    when = f"{run['started']} to {run['finished']}" if run["finished"] else f"from {run['started']}"
    if run["cluster"]:
        where = f"{run['cluster']}, {fmt(run['cpus'])} CPUs, {run['nodes']} node(s)"
    elif run.get("executor") == "threads":
        where = "threads of one process"
    else:  # a run whose Ray is not up yet (it plays its first shards meanwhile), or failed
        where = "no Ray recorded"
    return f"{when} {run['status']} on {run['host']} ({where}, clocksweep {run['clocksweep']})"


def terminal_summary(doc: dict, directory: str) -> str:
    """What `clocksweep report` prints: the report's first answers, and where it is."""
    prov = doc["provenance"]
    lines = [
        f"clocksweep report: {prov['results']} ({prov['record_mode']} records, "
        f"{prov['deals_read']:,} deals, {len(doc['cells'])} cells, "
        f"{prov['shards_read']} shard(s) read)"
    ]
    problems = prov["shards_not_read"]
    if prov["in_progress"]:
        lines.append(f"  in progress: {prov['in_progress']}; this report is of those committed")
    if problems or (prov["shards_not_read_count"] and not prov["in_progress"]):
        lines.append(
            f"  {prov['shards_not_read_count']:,} shard(s) not read"
            + (f"; {len(problems)} problem(s): {problems[0]}" if problems else "")
        )
    lines += [f"  {line}" for line in laws_disagree_lines(doc)]
    flagged = [c for c in doc["cells"] if c["flag"]]
    if flagged:
        lines.append(
            f"  {len(flagged)} cell(s) off their exact value by |z| > {Z_FLAG:g}: "
            + ", ".join(c["label"] for c in flagged[:5])
        )
    best = [b for b in doc["best_strategies"]]
    if best:
        lines.append("best strategy per variant:")
        primary_order = (
            "round-robin" if any(b["order"] == "round-robin" for b in best) else best[0]["order"]
        )
        for record in best:
            if record["order"] == primary_order:
                lines.append("  " + record["line"])
    if doc["own_strategies"]:
        lines.append("strategies of your own:")
        lines += ["  " + record["line"] for record in doc["own_strategies"]]
    stop = doc.get("stopping")
    if stop:
        lines.append(
            f"stop rule: {'met' if stop['met'] else 'NOT met'} at {stop['deals']:,} deals "
            f"({stop['rule']})"
        )
    lines.append("claims:")
    width = max(len(c["id"]) for c in doc["claims"])
    for claim in doc["claims"]:
        figure = claim["figure_text"] or claim["needs"] or claim["basis"]
        lines.append(f"  {claim['verdict']:<12} {claim['id']:<{width}}  {figure}")
    lines.append(f"written to {directory}/ (report.md, report.html, report.json)")
    return "\n".join(lines)
