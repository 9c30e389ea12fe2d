"""Estimated cost per token of each drafter against k: one figure, and a widget.

The counts come from ``benchmarks/tokens_per_pass.py`` (rows with ``workload``,
``drafter``, ``k``, ``emitted``, ``target_passes``, ``draft_passes``); the price
of a draft pass (``c``) and of an n-gram lookup (``o``), both in target passes,
are inputs, because they belong to the hardware, not to the drafter, and so is the
cost of a verification pass by its length (``pass_cost``), measured on the same
hardware. The cost model, the intervals over prompts and the cheapest k are
:mod:`specdec_lib.analysis.costs`'s; this module only draws them.

The widget draws the figure for every offered (c, o) when the cell runs, each into
an ``ipywidgets.Image`` with its verdict in an ``ipywidgets.HTML``, and stacks them;
the controls only choose which is shown, linked in the browser. So it responds on
the static website (which has the saved widget state and no kernel) as in a
running notebook, and executing the cell prints nothing but the widget: the stored
notebook, a fresh nbval run and the website all agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from specdec_lib.analysis.costs import (
    BenchmarkRow,
    PassCostTable,
    best_k,
    cost_estimate,
    index_rows,
    row_cost,
)
from specdec_lib.checks import check_real
from specdec_lib.course.plotting import COLORS, legend_outside, new_figure
from specdec_lib.course.widgets import linked_stack, widget_png

NAMES = {"draft": "draft model", "ngram": "n-gram"}
#: (colour, marker, line style) per (workload, drafter): colour is the drafter, line the workload.
_STYLES = {
    ("copy", "ngram"): (COLORS["accepted"], "o", "-"),
    ("novel", "ngram"): (COLORS["accepted"], "s", "--"),
    ("edit", "ngram"): (COLORS["accepted"], "^", (0, (6, 2))),
    ("answer", "ngram"): (COLORS["accepted"], "D", "-."),
    ("copy", "draft"): (COLORS["target"], "o", "-"),
    ("novel", "draft"): (COLORS["target"], "s", "--"),
    ("edit", "draft"): (COLORS["target"], "^", (0, (6, 2))),
    ("answer", "draft"): (COLORS["target"], "D", "-."),
}
#: The prices the widget offers: c from a free draft pass to one as dear as a target
#: pass, and o about what a lookup costs in chapter 5 and ten times that.
_C_VALUES = tuple(i / 10 for i in range(11))
_O_VALUES = (0.03, 0.3)


def plot_costs(
    ax: Axes,
    rows: Sequence[BenchmarkRow],
    c: float,
    o: float,
    k_mark: int | None = None,
    pass_cost: PassCostTable | None = None,
) -> None:
    """Cost per token against k for every (workload, drafter) in ``rows``, plain decoding at 1
    (``pass_cost`` as in :func:`~specdec_lib.analysis.costs.counts_cost`)."""
    table = index_rows(rows)
    ks = sorted({r["k"] for r in rows})
    for (workload, drafter), (color, marker, line) in _STYLES.items():
        if (workload, drafter, ks[0]) not in table:
            continue
        ax.plot(
            ks,
            [row_cost(table[workload, drafter, k], c, o, pass_cost) for k in ks],
            color=color,
            marker=marker,
            linestyle=line,
            label=f'{NAMES[drafter]}, "{workload}"',
        )
    ax.axhline(1, color=COLORS["baseline"], linestyle=":", linewidth=1.5, label="plain decoding")
    if k_mark is not None:
        ax.axvline(k_mark, color=COLORS["highlight"], linewidth=1.2, alpha=0.8)
    ax.set_xticks(ks)
    ax.set_ylim(0, max(2.0, ax.get_ylim()[1]))
    legend_outside(ax)


def plot_cost_panels(
    rows: Sequence[BenchmarkRow],
    c: float,
    o: float,
    pass_cost: PassCostTable | None = None,
    title: str = "",
) -> Figure:
    """One panel per workload: both drafters' cost per token against k with its 95%
    interval over prompts (:func:`~specdec_lib.analysis.costs.cost_estimate`), and plain
    decoding's 1."""
    table = index_rows(rows)
    workloads = list(dict.fromkeys(w for w, _ in _STYLES if any(key[0] == w for key in table)))
    if not workloads:
        raise ValueError("rows must hold at least one workload of _STYLES")
    fig, axes = plt.subplots(1, len(workloads), figsize=(2.9 * len(workloads) + 1.0, 4.2))
    axes = list(axes) if len(workloads) > 1 else [axes]
    fig.suptitle(title)
    axes[0].set_ylabel("estimated cost per token\n(one-position target passes)")
    for ax, workload in zip(axes, workloads, strict=True):
        for drafter in NAMES:
            ks = sorted(k for w, d, k in table if (w, d) == (workload, drafter))
            if not ks:
                continue
            est = [cost_estimate(table[workload, drafter, k], c, o, pass_cost) for k in ks]
            color, marker, _ = _STYLES[workload, drafter]
            ax.errorbar(
                ks,
                [e.value for e in est],
                yerr=[[e.value - e.low for e in est], [e.high - e.value for e in est]],
                color=color,
                marker=marker,
                markersize=4,
                capsize=2,
                label=NAMES[drafter],
            )
        ax.axhline(
            1, color=COLORS["baseline"], linestyle=":", linewidth=1.5, label="plain decoding"
        )
        ax.set_title(f'"{workload}"', fontsize=10)
        ax.set_xlabel("draft length k (tokens)")
        ax.set_xscale("log", base=2)
        ax.set_xticks([1, 2, 4, 8, 16], ["1", "2", "4", "8", "16"])
        ax.set_ylim(bottom=0)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.legend(handles, labels, loc="lower center", ncols=3)
    return fig


def verdict(
    rows: Sequence[BenchmarkRow], c: float, o: float, pass_cost: PassCostTable | None = None
) -> list[str]:
    """One line per workload in ``rows``: each drafter's cost at its own best k, and which is
    cheaper (``pass_cost`` as in :func:`~specdec_lib.analysis.costs.counts_cost`).

    Each drafter at its best k, because that is how each would be deployed: a
    comparison at one shared k would favour whichever drafter that k suits.
    """
    table = index_rows(rows)
    lines = []
    present = {(w, d) for w, d, _ in table}
    for workload in dict.fromkeys(w for w, _ in _STYLES if {(w, "draft"), (w, "ngram")} <= present):
        kd, kn = (best_k(rows, workload, d, c, o, pass_cost) for d in ("draft", "ngram"))
        d = row_cost(table[workload, "draft", kd], c, o, pass_cost)
        n = row_cost(table[workload, "ngram", kn], c, o, pass_cost)
        cheaper = NAMES["draft"] if d < n else NAMES["ngram"]
        lines.append(
            f'"{workload}": draft model {d:.2f} (k = {kd}), n-gram {n:.2f} (k = {kn}) target '
            f"passes per token; {cheaper} cheaper"
        )
    return lines


def _prices(name: str, values: Sequence[float], start: float) -> tuple[list[float], int]:
    """``values`` checked (non-negative numbers) and the index of ``start`` among them."""
    checked = [check_real(name, v, "non-negative numbers", lambda x: x >= 0) for v in values]
    if not checked:
        raise ValueError(f"{name} must offer at least one price")
    if start not in checked:
        raise ValueError(f"the starting price must be one of {name}, got {start!r}")
    return checked, checked.index(start)


def cost_widget(
    rows: Sequence[BenchmarkRow],
    c: float = 0.2,
    o: float = 0.03,
    c_values: Sequence[float] = _C_VALUES,
    o_values: Sequence[float] = _O_VALUES,
    pass_cost: PassCostTable | None = None,
) -> Any:
    """Sliders for c and o over :func:`plot_costs` and :func:`verdict` (``pass_cost`` as in
    :func:`~specdec_lib.analysis.costs.counts_cost`, the same in every state).

    Every (c, o) offered is drawn now, in Python, and stored in the widget; the
    controls' ``index`` is ``jslink``-ed to stacks of the pictures, so the widget
    responds on the static website, where there is no kernel, as in a live one.
    Each state is a PNG of about 10 kB, so offer a few dozen at most. Every state
    has the same y-axis, so what moves is the curves, not the scale. ``c`` and
    ``o`` are where it starts, and must be among the offered values. Returns an
    ``ipywidgets.VBox``.
    """
    import ipywidgets as widgets

    cs, c_at = _prices("c_values", c_values, c)
    o_list, o_at = _prices("o_values", o_values, o)
    if not rows:
        raise ValueError("rows must hold the benchmark's counts")
    # Sliders, not buttons: the buttons' icon fonts are not among the site's files.
    c_pick, o_pick = (
        widgets.SelectionSlider(
            options=[f"{v:g}" for v in values],
            index=at,
            description=f"{name}: price of {what} (target passes)",
            style={"description_width": "initial"},
            layout=widgets.Layout(width="100%", max_width="640px"),
        )
        for name, what, values, at in (
            ("c", "a draft pass", cs, c_at),
            ("o", "a lookup", o_list, o_at),
        )
    )
    layout = widgets.Layout(max_width="100%")  # one model shared by every state
    # One y-axis for every state, so what moves is the curves, not the scale.
    top = max(2.0, 1.05 * max(row_cost(r, max(cs), max(o_list), pass_cost) for r in rows))
    texts, images = [], []
    for ov in o_list:
        text_row, image_row = [], []
        for cv in cs:
            fig, ax = new_figure(
                "draft length k (tokens)",
                "estimated cost per token (target passes)",
                f"Cost per token at c = {cv:g}, o = {ov:g}",
            )
            plot_costs(ax, rows, cv, ov, pass_cost=pass_cost)
            ax.set_ylim(0, top)
            image_row.append(widgets.Image(value=widget_png(fig), format="png", layout=layout))
            lines = verdict(rows, cv, ov, pass_cost)
            text_row.append(widgets.HTML("<br>".join(lines), layout=layout))
        texts.append(linked_stack(c_pick, text_row))
        images.append(linked_stack(c_pick, image_row))
    return widgets.VBox([c_pick, o_pick, linked_stack(o_pick, texts), linked_stack(o_pick, images)])
