"""Pictures of the residual rule: one figure, and a widget that redraws it.

:func:`plot_residual_rule` shows, token by token, where the residual rule's
output comes from: the part that arrives by accepting a proposal, min(p, q),
and the part that arrives through a rejection, max(0, p - q). The two stack up
to exactly p_target; the biased rule's output is marked beside them, so the
picture shows the proof and the bug at once.

:func:`residual_rule_widget` lets a reader pick a preset and move p_draft toward
p_target, and shows that figure for each choice. Every choice is drawn when the
cell runs and stored in the widget as PNG bytes in an ``ipywidgets.Image``; the
controls only pick which one is shown, linked in the browser. So the widget
responds on the static website, which has the saved widget state and no kernel,
as in a running notebook; and executing the cell prints nothing but the widget,
so the stored notebook, a fresh nbval run and the website all agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure

from specdec_lib.analysis.exact_distributions import residual_decomposition
from specdec_lib.checks import check_real
from specdec_lib.course.plotting import COLORS, INK
from specdec_lib.course.widgets import linked_stack, widget_png

Pair = tuple[Sequence[float], Sequence[float]]

#: Shapes worth looking at, as unnormalised weights (p_target, p_draft) over 5 tokens.
PRESETS: dict[str, Pair] = {
    "draft close to target": ([4, 3, 2, 1, 0.5], [3.5, 3, 2.5, 1, 0.5]),
    "draft too confident": ([3, 3, 2, 1, 1], [9, 1, 0.5, 0.25, 0.25]),
    "draft prefers other tokens": ([5, 3, 1, 0.5, 0.5], [0.5, 1, 3, 4, 1.5]),
    "one-hot draft (n-gram)": ([3, 4, 2, 1, 1], [0, 1, 0, 0, 0]),
    "draft equals target": ([3, 2, 2, 1, 1], [3, 2, 2, 1, 1]),
}
#: How far the widget moves p_draft toward p_target: (1 - t) q + t p for each t.
TOWARD = (0.0, 0.25, 0.5, 0.75, 1.0)


def _normalise(weights: Sequence[float], name: str) -> torch.Tensor:
    w = torch.as_tensor(weights, dtype=torch.float64)
    if w.dim() != 1 or (w < 0).any() or float(w.sum()) <= 0:
        raise ValueError(f"{name} must be non-negative weights with a positive sum")
    return w / w.sum()


def plot_residual_rule(
    p_target: Sequence[float],
    p_draft: Sequence[float],
    labels: Sequence[str] | None = None,
    title: str | None = None,
) -> Figure:
    """Two panels: p and q per token; then min(p, q) + max(0, p - q) stacked up to p.

    Inputs are weights (normalised here). The right panel also marks the biased
    rule's output, min(p, q) + P(reject) · p, which overshoots where q was large.
    """
    p = _normalise(p_target, "p_target")
    q = _normalise(p_draft, "p_draft")
    if p.shape != q.shape:
        raise ValueError(
            f"p_target and p_draft must have the same length, got {p.shape}, {q.shape}"
        )
    parts = residual_decomposition(p, q)
    biased = (parts.accepted + parts.rejected_mass * p).numpy()
    accepted, shortfall = parts.accepted.numpy(), parts.shortfall.numpy()
    p, q = p.numpy(), q.numpy()
    names = list(labels) if labels is not None else [f"t{i}" for i in range(len(p))]
    x = np.arange(len(p))
    w = 0.38
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.6, 3.6))
    left.bar(x - w / 2, p, w, color=COLORS["target"], label="p_target")
    left.bar(x + w / 2, q, w, color=COLORS["draft"], label="p_draft (proposes)")
    left.set_xlabel("token")
    left.set_ylabel("probability")
    left.set_title("what is wanted, what is proposed")
    right.bar(x, accepted, 0.6, color=COLORS["accepted"], label="accepted: min(p, q)")
    right.bar(
        x,
        shortfall,
        0.6,
        bottom=accepted,
        color=COLORS["target"],
        alpha=0.55,
        label="from the residual: max(0, p - q)",
    )
    right.scatter(
        x,
        p,
        marker="_",
        s=900,
        color=COLORS["target"],
        linewidths=2.5,
        label="p_target: what the stack must reach",
        zorder=3,
    )
    right.scatter(
        x,
        biased,
        marker="D",
        s=36,
        color=COLORS["highlight"],
        edgecolors=INK,
        linewidths=0.6,
        label="biased rule",
        zorder=4,
    )
    right.set_xlabel("token")
    right.set_ylabel("probability of being emitted")
    right.set_title(
        f"accepted {1 - parts.rejected_mass:.2f}, rejected {parts.rejected_mass:.2f}",
        fontsize=11,
    )
    for ax in (left, right):
        ax.set_xticks(x, names)
    top = float(max(p.max(), q.max(), biased.max()))
    for ax in (left, right):
        ax.set_ylim(0, top * 1.45)
    if title:
        fig.suptitle(title, fontsize=12, fontweight="bold")
    # One legend for both panels, under them: two per-panel legends would collide.
    handles = [h for ax in (left, right) for h in ax.get_legend_handles_labels()[0]]
    fig.legend(handles=handles, loc="lower center", ncols=3, bbox_to_anchor=(0.5, 0.0))
    fig.tight_layout(rect=(0, 0.17, 1, 1))
    return fig


def residual_rule_widget(
    presets: Mapping[str, Pair] = PRESETS,
    labels: Sequence[str] | None = None,
    toward: Sequence[float] = TOWARD,
) -> Any:
    """A preset menu and a slider that moves p_draft toward p_target, over
    :func:`plot_residual_rule`. Returns an ``ipywidgets.VBox``.

    Moving q toward p shows the rejected mass shrink to nothing at q = p, and the
    biased rule's error with it. Every (preset, t) is drawn now, in Python, and
    stored in the widget; the controls' ``index`` is ``jslink``-ed to stacks of
    the pictures, so the widget responds with no kernel (on the static website) as
    in a live notebook. Each picture is a PNG of about 10 kB: keep
    ``len(presets) * len(toward)`` to a few dozen. The panels of one preset share
    their y-axis, so what moves is the bars, not the scale.
    """
    import ipywidgets as widgets

    if not presets:
        raise ValueError("presets must hold at least one (p_target, p_draft) pair")
    ts = [
        check_real("toward", t, "a list of numbers in [0, 1]", lambda v: 0 <= v <= 1)
        for t in toward
    ]
    if not ts:
        raise ValueError("toward must hold at least one number in [0, 1]")
    menu = widgets.Dropdown(
        options=list(presets),
        index=0,
        description="preset",
        layout=widgets.Layout(width="auto", max_width="100%"),
    )
    slider = widgets.SelectionSlider(
        options=[f"{t:.0%}" for t in ts],
        index=0,
        description="p_draft moved toward p_target by",
        style={"description_width": "initial"},
        layout=widgets.Layout(width="100%", max_width="560px"),
    )
    layout = widgets.Layout(max_width="100%")  # one model shared by every picture
    stacks = []
    for name, (p_weights, q_weights) in presets.items():
        p, q = _normalise(p_weights, "p_target"), _normalise(q_weights, "p_draft")
        if p.shape != q.shape:
            raise ValueError(f"presets[{name!r}] must give p_target and p_draft the same length")
        figures = [
            plot_residual_rule(
                p, (1 - t) * q + t * p, labels, title=f"{name}, q moved {t:.0%} toward p"
            )
            for t in ts
        ]
        top = max(ax.get_ylim()[1] for fig in figures for ax in fig.axes)
        for fig in figures:
            for ax in fig.axes:
                ax.set_ylim(0, top)
        images = [
            widgets.Image(value=widget_png(fig, tight=False), format="png", layout=layout)
            for fig in figures
        ]
        stacks.append(linked_stack(slider, images))
    return widgets.VBox([menu, slider, linked_stack(menu, stacks)])
