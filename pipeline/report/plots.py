"""The report's plots, drawn with matplotlib's Agg backend (no display), as PNG bytes.

Each function takes the report's plain records (see `pipeline.report`) and gives PNG bytes,
or None when there is nothing to draw. PNGs carry no software or time stamp, so the same
figures give the same bytes.
"""

from __future__ import annotations

import io

from pipeline.engine import rules
from pipeline.inference import stats

COLOURS = {"down": "#1f5fa8", "up": "#d0641c"}
MARKERS = {"round-robin": "o", "packets": "s"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def warm_up() -> None:
    """Import matplotlib and draw a small figure with text, so that the fonts and text caches
    are loaded once, in the report's process, and the plots' forked processes inherit them
    (each would otherwise spend a tenth of a second on its first plot)."""
    fig, ax = _figure(2, 1.5)
    _title(ax, "0123456789 abcdefghijklmnopqrstuvwxyz", fontsize=9)
    ax.plot([0, 1], [0, 1], "o-", label="x")
    ax.legend(fontsize=7)
    _png(fig)


def _figure(
    width: float,
    height: float,
    left: float = 0.75,
    bottom: float = 0.55,
    top: float = 0.4,
    right: float = 0.15,
):
    """A one-panel figure with fixed margins, in inches. A constrained layout finds about the
    same margins, but searching for them is a large part of the drawing time."""
    fig, ax = _pyplot().subplots(figsize=(width, height))
    fig.subplots_adjust(
        left=left / width, right=1 - right / width, bottom=bottom / height, top=1 - top / height
    )
    return fig, ax


def _title(ax, text: str, fontsize: float) -> None:
    """An axes title at the top edge. With the position given, matplotlib does not measure
    the axes' tick labels to clear those above it (there are none here): on the six-panel
    win_rates of an earlier version that search was a third of the drawing; on one panel it
    is a small share."""
    ax.set_title(text, fontsize=fontsize, y=1.0)


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
    _pyplot().close(fig)
    return buffer.getvalue()


ROW_SLOTS = 16  # strategy slots a row of the win-rate plot holds: 1280 px wide, readable


def win_rates(cells: list[dict]) -> bytes | None:
    """Win rate with its interval (at `stats.CONFIDENCE`) per strategy, a group per rescue
    rule; exact values marked. The groups wrap into rows of at most ROW_SLOTS strategies,
    so that the plot is about 1,000 px wide and its labels readable where a page shows it
    at 1280 px (one row of every group was 1,670 px, scaled down to a blur).

    A row is one axes, its rules side by side: six panels sharing a y axis drew the same look
    with six times the ticks and axes, half the drawing time.
    """
    groups = _rule_groups(cells)
    if not groups:
        return None
    rows = _wrapped(groups)
    slots = max(_slots(row) for row in rows)
    width, row_height = max(5.0, 0.5 * slots + 1.4), 3.4
    height = row_height * len(rows) + 1.3
    fig, axes = _pyplot().subplots(
        len(rows), 1, figsize=(width, height), sharey=True, squeeze=False
    )
    fig.subplots_adjust(
        left=0.95 / width,
        right=1 - 0.15 / width,
        bottom=1.15 / height,
        top=1 - 0.55 / height,
        hspace=1.0 / row_height,
    )
    series = sorted(
        {(c["finale"], c["order"]) for c in cells},
        key=lambda s: (rules.FINALES.index(s[0]), rules.ORDERS.index(s[1])),
    )
    for ax, row in zip(axes[:, 0], rows):
        _draw_row(ax, row, series, slots)
        ax.set_ylabel(f"win rate ({stats.LEVEL} Wilson;\nbar = exact)", fontsize=9)
    _legend_once(fig, axes[0, 0])
    fig.suptitle("Win rate per cell (dotted line: 1/13)", fontsize=10)
    return _png(fig)


def _slots(groups: list) -> int:
    """The slots a row of ``groups`` takes: a strategy each, a gap between groups."""
    return sum(len(names) for _, _, names in groups) + len(groups) - 1


def _wrapped(groups: list) -> list[list]:
    """``groups`` in rows of at most ROW_SLOTS slots (a group larger than that alone)."""
    rows: list[list] = [[]]
    for group in groups:
        if rows[-1] and _slots(rows[-1] + [group]) > ROW_SLOTS:
            rows.append([])
        rows[-1].append(group)
    return rows


def _draw_row(ax, groups: list, series: list, slots: int) -> None:
    """One row's groups on ``ax``, ``slots`` wide (the widest row's, so that rows align)."""
    ticks, tick_labels, start = [], [], 0
    for title, rows, names in groups:
        for k, (finale, order) in enumerate(series):
            offset = (k - (len(series) - 1) / 2) * 0.15
            picked = [
                (start + i, r)
                for i, strategy in enumerate(names)
                for r in rows
                if r["strategy"] == strategy and r["finale"] == finale and r["order"] == order
            ]
            if picked:
                _plot_series(
                    ax, [x + offset for x, _ in picked], [r for _, r in picked], finale, order
                )
        ticks += range(start, start + len(names))
        tick_labels += [s or "-" for s in names]
        _title_group(ax, title, start, len(names))
        start += len(names) + 1
    ax.set_xlim(-0.6, slots - 0.4)
    ax.set_xticks(ticks)
    ax.set_xticklabels(tick_labels, rotation=30, ha="right", fontsize=9)
    ax.axhline(1 / 13, color="grey", lw=0.6, ls=":")
    ax.grid(axis="y", alpha=0.3)


def _rule_groups(cells: list[dict]) -> list[tuple[str, list[dict], list]]:
    """The cells by rescue rule (an exchange's depths apart): (title, cells, strategies)."""
    groups = []
    for variant in rules.VARIANTS:
        for depth in rules.DEPTHS if variant == "exchange" else (None,):
            rows = [c for c in cells if c["variant"] == variant and c["depth"] == depth]
            if rows:
                # The built-in strategies in the rules' order, then the user's as they come.
                played = dict.fromkeys(r["strategy"] for r in rows if r["strategy"])
                names = [s for s in rules.STRATEGIES if s in played]
                names += [s for s in played if s not in rules.STRATEGIES]
                groups.append((variant + (f" ({depth})" if depth else ""), rows, names or [None]))
    return groups


def _plot_series(ax, xs: list[float], rows: list[dict], finale: str, order: str) -> None:
    """One finale and deal order's cells of a group: intervals, rates, exact values."""
    # Interval lines and markers drawn as two artists (errorbar makes four per series, and a
    # report can hold a hundred cells).
    colour = COLOURS.get(finale, "k")
    ax.vlines(xs, [r["ci_low"] for r in rows], [r["ci_high"] for r in rows], color=colour, lw=1)
    ax.plot(
        xs,
        [r["win_rate"] for r in rows],
        ls="none",
        marker=MARKERS.get(order, "o"),
        ms=4,
        color=colour,
        label=f"finale {finale}, {order}",
    )
    exact = [(x, r["exact_value"]) for x, r in zip(xs, rows) if r["exact_value"] is not None]
    if exact:
        ax.plot(
            [x for x, _ in exact],
            [y for _, y in exact],
            ls="none",
            marker="_",
            ms=9,
            mew=1.5,
            color="k",
            zorder=3,
        )


def _title_group(ax, title: str, start: int, count: int) -> None:
    """A group's title above its slots, and a rule between it and the group before."""
    middle = start + (count - 1) / 2
    ax.text(
        middle,
        1.01,
        title,
        transform=ax.get_xaxis_transform(),
        ha="center",
        va="bottom",
        fontsize=9,
    )
    if start:
        ax.axvline(start - 1, color="grey", lw=0.6)


def _legend_once(fig, ax) -> None:
    """One legend entry a series, however many groups drew it."""
    handles, labels = [], []
    for h, lab in zip(*ax.get_legend_handles_labels()):
        if lab not in labels:
            handles.append(h)
            labels.append(lab)
    if handles:
        fig.legend(
            handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=8, frameon=False
        )


def cards_turned(distribution: dict) -> bytes | None:
    """Observed share of each cards_turned value in standard play against the exact law."""
    from pipeline.inference.stats import (
        p_text,  # here: the plots' process is forked before numpy loads
    )

    rows = distribution.get("rows") or []
    if not rows:
        return None
    fig, ax = _figure(7, 3.4)
    xs = [r["cards_turned"] for r in rows]
    ax.bar(xs, [r["observed_share"] for r in rows], color="#9bb7d4", label="observed")
    ax.plot(xs, [r["exact"] for r in rows], color="k", lw=1.2, label="exact: C(t-1,3)/C(52,4)")
    ax.set_xlabel("cards turned (standard play)")
    ax.set_ylabel("share of deals")
    _title(
        ax,
        f"{distribution['cell']}: chi-square {distribution['chi2']:.1f} on "
        f"{distribution['dof']} df, p {p_text(distribution['p_value'])}",
        fontsize=9,
    )
    ax.legend(fontsize=8)
    return _png(fig)


def hint_calibration(calibration: list[dict]) -> bytes | None:
    """Predicted chance (binned) against observed win rate, one line per rescue cell."""
    rows = [
        c
        for c in calibration
        if c["rows"]
        and "finale=down" in c["cell"]
        and c["cell"].split()[0] in ("watch", "exchange")
    ] or [c for c in calibration if c["rows"]]
    if not rows:
        return None
    plt = _pyplot()
    fig, ax = _figure(5.6, 5.2)
    ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls="--", label="perfect calibration")
    cmap = plt.get_cmap("tab10")
    for k, cell in enumerate(rows[:10]):
        xs = [r["predicted"] for r in cell["rows"]]
        ys = [r["observed"] for r in cell["rows"]]
        colour = cmap(k % 10)
        ax.vlines(
            xs,
            [r["ci_low"] for r in cell["rows"]],
            [r["ci_high"] for r in cell["rows"]],
            color=colour,
            lw=0.8,
        )  # as in `win_rates`: fewer artists than errorbar
        ax.plot(xs, ys, "o-", ms=3, lw=0.8, color=colour, label=cell["cell"])
    ax.set_xlabel("hint's chance (mean over the bin)")
    ax.set_ylabel(f"observed win rate ({stats.LEVEL} interval)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    _title(
        ax,
        "Hint calibration (face-down finales)"
        if "finale=down" in rows[0]["cell"]
        else "Hint calibration",
        fontsize=10,
    )
    ax.legend(fontsize=6, loc="upper left")
    return _png(fig)


def restarts(play_out: list[dict]) -> bytes | None:
    """`play_out`: how many deals needed each number of restarts."""
    play_out = [c for c in play_out if "finale=down" in c["cell"]] or play_out
    if not play_out:
        return None
    fig, ax = _figure(6, 3.2)
    width = 0.8 / len(play_out)
    for k, cell in enumerate(play_out):
        xs = [r["restarts"] + (k - (len(play_out) - 1) / 2) * width for r in cell["rows"]]
        ax.bar(xs, [r["n"] / cell["n"] for r in cell["rows"]], width=width, label=cell["cell"])
    exact = play_out[0]["rows"]
    ax.plot(
        [r["restarts"] for r in exact],
        [r["exact"] for r in exact],
        "k_",
        ms=14,
        mew=1.5,
        label="exact: c(13, k+1)/13!",
    )
    ax.set_xlabel("restarts (0 = a standard win)")
    ax.set_ylabel("share of deals")
    _title(ax, "Play it out: restarts per deal", fontsize=10)
    ax.legend(fontsize=7)
    return _png(fig)


def rescue_by_down(rows: list[dict], cells: list[str]) -> bytes | None:
    """Rescue win rate by cards face down at the first death, with the exact value where known."""
    chosen = [c for c in cells if any(r["cell"] == c for r in rows)][:6]
    if not chosen:
        return None
    plt = _pyplot()
    fig, ax = _figure(7, 3.6)
    cmap = plt.get_cmap("tab10")
    for k, cell in enumerate(chosen):
        mine = [r for r in rows if r["cell"] == cell and r["n"] >= 20]
        if not mine:
            continue
        xs = [r["down_at_stop"] for r in mine]
        ax.plot(xs, [r["win_rate"] for r in mine], "o", ms=3, color=cmap(k), label=cell)
        exact = [(r["down_at_stop"], r["exact"]) for r in mine if r["exact"] is not None]
        if exact:
            ax.plot([x for x, _ in exact], [y for _, y in exact], "-", lw=0.8, color=cmap(k))
    ax.set_xlabel("cards face down at the first death")
    ax.set_ylabel("win rate (line: exact)")
    _title(ax, "Rescues: win rate by cards left", fontsize=10)
    ax.legend(fontsize=6)
    return _png(fig)


def differences(rows: list[dict], names: list[str]) -> bytes | None:
    """`compare`: the first run's win rate minus each other's per shared cell (``rows``, as
    `compare.cell_rows` gives them), in points with its interval (at `stats.CONFIDENCE`),
    one series a run compared (``names``: the rows' difference columns, ``a_minus_b``...).
    The cells down the side, so that their labels read level however many there are."""
    if not rows or not names:
        return None
    plt = _pyplot()
    longest = max(len(r["label"]) for r in rows)
    height = 0.3 * len(rows) * max(1, len(names) / 2) + 1.3
    left = 0.25 + 0.06 * longest
    fig, ax = _figure(left + 4.5, height, left=left, bottom=0.6, top=0.35)
    cmap = plt.get_cmap("tab10")
    for k, name in enumerate(names):
        offset = ((len(names) - 1) / 2 - k) * 0.2
        ys = [len(rows) - 1 - i + offset for i in range(len(rows))]
        colour = cmap(k % 10)
        # As in `win_rates`: the intervals and the markers as two artists, not errorbar's four.
        ax.hlines(
            ys,
            [100 * r[f"{name}_low"] for r in rows],
            [100 * r[f"{name}_high"] for r in rows],
            color=colour,
            lw=1,
        )
        ax.plot(
            [100 * r[name] for r in rows],
            ys,
            ls="none",
            marker="o",
            ms=4,
            color=colour,
            label=name.upper().replace("_MINUS_", " - "),
        )
    ax.axvline(0, color="grey", lw=0.6, ls=":")
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r["label"] for r in reversed(rows)], fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    ax.set_xlabel(f"difference in win rate, points ({stats.LEVEL} interval)")
    ax.legend(fontsize=8, loc="best")
    _title(ax, "The first run's win rate minus each other's, per shared cell", fontsize=10)
    return _png(fig)


class Plotter:
    """Draws the report's plots in other processes (with more than one CPU) while the report
    goes on. Made at the start of a report (by `clocksweep report` before it even imports the
    report, whose imports take half a second), it forks one process, which imports matplotlib
    and draws a first figure (loading the fonts) while the report reads the shards and computes
    its figures; the report's own process never imports matplotlib, so its threads do not
    wait on that import. Given the plots, that process forks one drawing process per CPU,
    which inherit matplotlib warm, and the report writes its tables meanwhile. Processes, not
    threads: matplotlib is not thread-safe. With one CPU, or no fork, it draws when asked.
    """

    def __init__(self, workers: int = 1):
        self.workers, self.pool = workers, None
        if workers > 1:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            try:
                context = multiprocessing.get_context("fork")
            except ValueError:  # no fork here: draw in this process
                return
            self.pool = ProcessPoolExecutor(1, mp_context=context, initializer=warm_up)
            self.pool.submit(int)  # fork now, so that the import starts now

    def start(self, jobs: list[tuple[str, str, tuple]]):
        """Start drawing ``jobs``, each (file name, function name in this module, arguments);
        the function returned waits for them and gives (file name, PNG bytes or None) in the
        order of ``jobs``."""
        if self.pool is None:
            return lambda: [(job[0], _draw(job)) for job in jobs]
        drawn = self.pool.submit(_draw_all, jobs, self.workers)
        return lambda: list(zip([job[0] for job in jobs], drawn.result()))

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)
            self.pool = None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _draw_all(jobs: list[tuple[str, str, tuple]], workers: int) -> list[bytes | None]:
    """In the plotting process: every job's PNG, drawn by ``workers`` forked processes."""
    if workers < 2 or len(jobs) < 2:
        return [_draw(job) for job in jobs]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(min(workers, len(jobs)), mp_context=context) as pool:
        return list(pool.map(_draw, jobs))


def _draw(job) -> bytes | None:
    _, function, args = job
    return globals()[function](*args)
