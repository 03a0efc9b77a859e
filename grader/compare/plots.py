"""The HTML report's plots: matplotlib figures rendered as inline SVG (no files, no network).

Each function takes plain report data and returns an ``<svg>`` element as text, with the
XML prolog and DOCTYPE removed so it can sit inside HTML, fonts drawn as paths (no font
files needed), and ids salted per plot so several plots on one page never clash.
"""

from __future__ import annotations

import io
import re
from typing import Any

_PROLOG = re.compile(r"^.*?(?=<svg)", re.DOTALL)
PASS, FAIL, NEUTRAL, ACCENT = "#2e7d32", "#c62828", "#546e7a", "#1565c0"


def _svg(fig: Any, name: str) -> str:
    import matplotlib

    with matplotlib.rc_context({"svg.hashsalt": f"grade-compare-{name}", "svg.fonttype": "path"}):
        buf = io.StringIO()
        fig.savefig(buf, format="svg", bbox_inches="tight")
    text = _PROLOG.sub("", buf.getvalue(), count=1)
    return text.replace("<svg ", f'<svg role="img" aria-label="{name}" class="plot" data-plot="{name}" ', 1)


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=96)
    fig.patch.set_alpha(0)
    return fig


def _style(ax: Any, integer_y: bool = True) -> None:
    from matplotlib.ticker import MaxNLocator

    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.tick_params(labelsize=8)
    if integer_y:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def score_distribution(dist: dict[str, int], max_score: int) -> str:
    """Bar chart: how many submissions got each score."""
    fig = _figure(5.0, 2.4)
    ax = fig.add_subplot()
    scores = list(range(0, max(max_score, max((int(k) for k in dist), default=0)) + 1))
    counts = [dist.get(str(s), 0) for s in scores]
    colors = [PASS if s == max_score and max_score else ACCENT for s in scores]
    ax.bar([str(s) for s in scores], counts, color=colors)
    ax.set_xlabel(f"score (of {max_score})", fontsize=9)
    ax.set_ylabel("submissions", fontsize=9)
    _style(ax)
    return _svg(fig, "score-distribution")


def pass_rates(rows: list[dict[str, Any]]) -> str:
    """Horizontal bars: the share of graded submissions that passed each check."""
    fig = _figure(5.6, 0.42 * max(2, len(rows)) + 0.6)
    ax = fig.add_subplot()
    names = [f"{r['check']} ({r['visibility']})" for r in rows][::-1]
    rates = [(r["rate"] or 0.0) * 100 for r in rows][::-1]
    ax.barh(names, rates, color=[PASS if v >= 50 else FAIL for v in rates])
    ax.set_xlim(0, 100)
    ax.set_xlabel("passed (%)", fontsize=9)
    for y, v in enumerate(rates):
        ax.text(min(v + 1, 92), y, f"{v:.0f}%", va="center", fontsize=8)
    _style(ax, integer_y=False)
    return _svg(fig, "pass-rates")


def group_sizes(outcome: list[int], strategies: list[int], variants: list[int]) -> str:
    """Three bar charts side by side: the sizes of the outcome groups, the strategies and the variants."""
    fig = _figure(7.2, 2.4)
    panels = ((outcome, "outcome groups", ACCENT), (strategies, "strategies", PASS), (variants, "variants", NEUTRAL))
    for k, (sizes, title, color) in enumerate(panels):
        ax = fig.add_subplot(1, 3, k + 1)
        ax.bar([f"#{i}" for i in range(len(sizes))], sizes, color=color)
        ax.set_title(title, fontsize=9)
        ax.set_ylabel("submissions", fontsize=8)
        if len(sizes) > 10:
            ax.set_xticks([])
        _style(ax)
    fig.tight_layout()
    return _svg(fig, "group-sizes")


def spread(measurements: list[dict[str, Any]]) -> str | None:
    """Per measurement: compile counts (bars) and run time across the class (dots, log scale)."""
    rows = [m for m in measurements if m["compiles"] or m["seconds_by_submission"]]
    if not rows:
        return None
    fig = _figure(6.4, 2.4 * len(rows))
    for k, m in enumerate(rows):
        ax = fig.add_subplot(len(rows), 2, 2 * k + 1)
        keys = list(m["compiles"])
        ax.bar(keys, [m["compiles"][c] for c in keys], color=ACCENT)
        ax.set_title(f"{m['name']}\ncompiles per submission", fontsize=8)
        ax.set_ylabel("submissions", fontsize=8)
        _style(ax)
        ax = fig.add_subplot(len(rows), 2, 2 * k + 2)
        times = sorted(v * 1e3 for v in m["seconds_by_submission"].values())
        if times:
            ax.plot(times, range(len(times)), "o", markersize=3, color=NEUTRAL)
            if times[0] > 0 and times[-1] / times[0] > 20:
                ax.set_xscale("log")
        ax.set_title(f"{m['name']}\nrun time (ms), one dot per submission", fontsize=8)
        _style(ax, integer_y=False)
        ax.set_yticks([])
    fig.tight_layout()
    return _svg(fig, "spread")
