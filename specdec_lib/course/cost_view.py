"""Estimated cost per token of each drafter against k: one figure, and a widget.

The counts come from ``benchmarks/tokens_per_pass.py`` (rows with ``workload``,
``drafter``, ``k``, ``emitted``, ``target_passes``, ``draft_passes``); the price
of a draft pass (``c``) and of an n-gram lookup (``o``), both in target passes,
are inputs, because they belong to the hardware, not to the drafter, and so is the
cost of a verification pass by its length (``pass_cost``), measured on the same
hardware. See :mod:`specdec_lib.analysis.costs` for the cost model.

The benchmark ran both drafters on the same prompts at every k and kept each prompt's
counts (``per_prompt``), so every figure here can carry an interval over prompts:
:func:`cost_estimate` for one row, :func:`crossover_estimate` for the crossover (the
price of a draft pass below which the draft model, at its best k, is the cheaper
drafter), resampling the same prompts for both drafters.

The widget draws the figure for every offered (c, o) when the cell runs, each into
an ``ipywidgets.Image`` with its verdict in an ``ipywidgets.HTML``, and stacks them;
the controls only choose which is shown, linked in the browser. So it responds on
the static website (which has the saved widget state and no kernel) as in a
running notebook, and executing the cell prints nothing but the widget: the stored
notebook, a fresh nbval run and the website all agree.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from specdec_lib.analysis.costs import cost_per_token, verified_cost_per_token
from specdec_lib.analysis.intervals import Estimate, ratio_estimate
from specdec_lib.checks import check_real
from specdec_lib.course.plotting import COLORS, legend_outside, new_figure
from specdec_lib.course.widgets import linked_stack, widget_png
from specdec_lib.engine.generate import SpeculationStats

Row = Mapping[str, Any]
#: Cost of a verification pass by the positions it scores (one-position passes), or None:
#: every pass costs one.
PassCost = Mapping[int, float] | None

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


def counts_cost(counts: Row, drafter: str, c: float, o: float, pass_cost: PassCost = None) -> float:
    """Estimated target passes per emitted token for one run's ``counts`` (a benchmark
    row, or one prompt's counts in its ``per_prompt``) of ``drafter``.

    A draft model pays ``c`` per draft pass; the n-gram drafter pays ``o`` per
    lookup, one per round, and at batch one there is one round per target pass. With
    ``pass_cost`` (:func:`~specdec_lib.analysis.costs.pass_costs`) each verification pass
    is charged what a pass over its positions costs; without it, one.
    """
    if drafter not in NAMES:
        raise ValueError(f"drafter must be one of {sorted(NAMES)}, got {drafter!r}")
    lookups = counts["target_passes"] if drafter == "ngram" else 0
    if pass_cost is None:
        return cost_per_token(
            counts["target_passes"], counts["draft_passes"], counts["emitted"], c, lookups, o
        )
    return verified_cost_per_token(
        counts["target_passes"],
        counts["position_proposed"],
        counts["draft_passes"],
        counts["emitted"],
        c,
        pass_cost,
        lookups,
        o,
    )


def row_cost(row: Row, c: float, o: float, pass_cost: PassCost = None) -> float:
    """:func:`counts_cost` of one benchmark row, whose ``drafter`` it names."""
    return counts_cost(row, row["drafter"], c, o, pass_cost)


def index_rows(rows: Sequence[Row]) -> dict[tuple[str, str, int], Row]:
    """The rows keyed by ``(workload, drafter, k)``."""
    return {(r["workload"], r["drafter"], r["k"]): r for r in rows}


def prompt_stats(row: Row) -> list[SpeculationStats]:
    """A benchmark row's ``per_prompt`` counts as one stats object per prompt, for the
    intervals that resample prompts (:mod:`specdec_lib.analysis.intervals`)."""
    if not row.get("per_prompt"):
        raise ValueError("row must hold per_prompt counts (tokens_per_pass.py records them)")
    return [SpeculationStats(**dict(counts)) for counts in row["per_prompt"]]


def cost_estimate(
    row: Row, c: float, o: float, pass_cost: PassCost = None, seed: int = 0
) -> Estimate:
    """:func:`row_cost` with its 95% interval over prompts (a ratio of sums: each prompt's
    priced passes over its emitted tokens)."""
    priced = [
        counts_cost(p, row["drafter"], c, o, pass_cost) * p["emitted"] for p in row["per_prompt"]
    ]
    return ratio_estimate(priced, [p["emitted"] for p in row["per_prompt"]], seed)


def _crossover_parts(
    rows: Sequence[Row], workload: str, o: float, pass_cost: PassCost
) -> tuple[list[int], torch.Tensor]:
    """Per prompt, for every k of the n-gram drafter then of the draft model, the columns
    (priced target side, draft passes, emitted) of its counts at c = 0."""
    table = index_rows(rows)
    ks = sorted(k for w, d, k in table if (w, d) == (workload, "draft"))
    if not ks or any((workload, "ngram", k) not in table for k in ks):
        raise ValueError(f"rows must hold both drafters at the same k on workload={workload!r}")
    n = {len(table[workload, d, k]["per_prompt"]) for d in NAMES for k in ks}
    if len(n) != 1:
        raise ValueError("rows must hold per_prompt counts of the same prompts in every row")
    columns = []
    for drafter in ("ngram", "draft"):
        for k in ks:
            each = table[workload, drafter, k]["per_prompt"]
            columns += [
                [counts_cost(p, drafter, 0.0, o, pass_cost) * p["emitted"] for p in each],
                [float(p["draft_passes"]) for p in each],
                [float(p["emitted"]) for p in each],
            ]
    return ks, torch.tensor(columns, dtype=torch.float64).T


def _crossover_of(sums: torch.Tensor, n_k: int) -> torch.Tensor:
    """The crossover c for each row of column sums laid out as :func:`_crossover_parts`."""
    ngram, draft = sums[:, : 3 * n_k], sums[:, 3 * n_k :]
    best_ngram = (ngram[:, 0::3] / ngram[:, 2::3]).min(dim=1, keepdim=True).values
    return ((best_ngram * draft[:, 2::3] - draft[:, 0::3]) / draft[:, 1::3]).max(dim=1).values


def crossover_c(rows: Sequence[Row], workload: str, o: float, pass_cost: PassCost = None) -> float:
    """The price of a draft pass c below which the draft model, at its best k, costs less per
    token on ``workload`` than the n-gram drafter at its best k (lookups at ``o``,
    ``pass_cost`` as in :func:`counts_cost`); at or below 0, it never does.

    At k the draft model costs (V + c·D) / E, so it beats the n-gram drafter's best cost N
    while c < (N·E − V) / D; the crossover is the largest of these over k.
    """
    ks, parts = _crossover_parts(rows, workload, o, pass_cost)
    return float(_crossover_of(parts.sum(dim=0, keepdim=True), len(ks))[0])


def crossover_estimate(
    rows: Sequence[Row],
    workload: str,
    o: float,
    pass_cost: PassCost = None,
    seed: int = 0,
    resamples: int = 2000,
) -> Estimate:
    """:func:`crossover_c` with its 95% interval over prompts: each resample draws prompts
    with replacement, the same prompts for both drafters and every k (the benchmark ran
    them all on one prompt set), and recomputes both drafters' best costs."""
    if resamples < 100:
        raise ValueError(f"resamples must be >= 100, got {resamples}")
    ks, parts = _crossover_parts(rows, workload, o, pass_cost)
    n, rng = parts.shape[0], random.Random(seed)
    counts = [[0] * n for _ in range(resamples)]
    for draw in counts:
        for _ in range(n):
            draw[rng.randrange(n)] += 1
    weights = torch.tensor(counts, dtype=torch.float64)  # how often each prompt was drawn
    boot = sorted(_crossover_of(weights @ parts, len(ks)).tolist())
    value = crossover_c(rows, workload, o, pass_cost)
    low, high = boot[int(0.025 * (resamples - 1))], boot[round(0.975 * (resamples - 1))]
    return Estimate(value, low, high)


def plot_costs(
    ax: Axes,
    rows: Sequence[Row],
    c: float,
    o: float,
    k_mark: int | None = None,
    pass_cost: PassCost = None,
) -> None:
    """Cost per token against k for every (workload, drafter) in ``rows``, plain decoding at 1
    (``pass_cost`` as in :func:`counts_cost`)."""
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
    rows: Sequence[Row], c: float, o: float, pass_cost: PassCost = None, title: str = ""
) -> Figure:
    """One panel per workload: both drafters' cost per token against k with its 95%
    interval over prompts (:func:`cost_estimate`), and plain decoding's 1."""
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


def best_k(
    rows: Sequence[Row],
    workload: str,
    drafter: str,
    c: float,
    o: float,
    pass_cost: PassCost = None,
) -> int:
    """The k at which ``drafter`` costs least on ``workload`` (the smallest such k on a tie)."""
    table = index_rows(rows)
    ks = sorted(k for w, d, k in table if (w, d) == (workload, drafter))
    if not ks:
        raise ValueError(f"rows must hold {drafter!r} on {workload!r}")
    return min(ks, key=lambda k: row_cost(table[workload, drafter, k], c, o, pass_cost))


def verdict(rows: Sequence[Row], c: float, o: float, pass_cost: PassCost = None) -> list[str]:
    """One line per workload in ``rows``: each drafter's cost at its own best k, and which is
    cheaper (``pass_cost`` as in :func:`counts_cost`).

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
    rows: Sequence[Row],
    c: float = 0.2,
    o: float = 0.03,
    c_values: Sequence[float] = _C_VALUES,
    o_values: Sequence[float] = _O_VALUES,
    pass_cost: PassCost = None,
) -> Any:
    """Sliders for c and o over :func:`plot_costs` and :func:`verdict` (``pass_cost`` as in
    :func:`counts_cost`, the same in every state).

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
