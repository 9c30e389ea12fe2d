"""Pictures of the residual rule: one figure, and a widget that redraws it.

:func:`plot_residual_rule` shows, token by token, where the residual rule's
output comes from: the part that arrives by accepting a proposal, min(p, q),
and the part that arrives through a rejection, max(0, p - q). The two stack up
to exactly p_target; the biased rule's output is marked beside them, so the
picture shows the proof and the bug at once.

:func:`residual_rule_widget` lets a reader shape p and q with sliders (or pick
a preset) and redraws that figure. The figure is rendered to PNG bytes inside
an ``ipywidgets.Image``, not printed into an ``Output`` widget, so executing
the cell prints nothing but the widget: the stored notebook, a fresh nbval run
and the website (which shows the saved widget state) all agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.figure import Figure

from specdec_lib.analysis.exact import residual_decomposition
from specdec_lib.course.plotting import _INK, COLORS, _figure_png

Pair = tuple[Sequence[float], Sequence[float]]

#: Shapes worth looking at, as unnormalised weights (p_target, p_draft) over 5 tokens.
PRESETS: dict[str, Pair] = {
    "draft close to target": ([4, 3, 2, 1, 0.5], [3.5, 3, 2.5, 1, 0.5]),
    "draft too confident": ([3, 3, 2, 1, 1], [9, 1, 0.5, 0.25, 0.25]),
    "draft prefers other tokens": ([5, 3, 1, 0.5, 0.5], [0.5, 1, 3, 4, 1.5]),
    "one-hot draft (n-gram)": ([3, 4, 2, 1, 1], [0, 1, 0, 0, 0]),
    "draft equals target": ([3, 2, 2, 1, 1], [3, 2, 2, 1, 1]),
}


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
        edgecolors=_INK,
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
) -> Any:
    """Sliders for p_target and p_draft (weights, normalised on the fly), a preset menu,
    and :func:`plot_residual_rule` redrawn on every change. Returns an ``ipywidgets.VBox``."""
    import ipywidgets as widgets

    first = next(iter(presets.values()))
    n = len(first[0])
    names = list(labels) if labels is not None else [f"t{i}" for i in range(n)]
    layout = widgets.Layout(width="150px")
    style = {"description_width": "28px"}

    def sliders(values: Sequence[float]) -> list[Any]:
        return [
            widgets.FloatSlider(
                value=float(v),
                min=0.0,
                max=10.0,
                step=0.25,
                description=names[i],
                continuous_update=False,
                readout_format=".2f",
                layout=layout,
                style=style,
            )
            for i, v in enumerate(values)
        ]

    p_sliders, q_sliders = sliders(first[0]), sliders(first[1])
    menu = widgets.Dropdown(options=list(presets), description="preset")
    image = widgets.Image(format="png")
    note = widgets.HTML()
    updating = {"now": False}

    def redraw(*_: Any) -> None:
        if updating["now"]:
            return
        p = [s.value for s in p_sliders]
        q = [s.value for s in q_sliders]
        if sum(p) <= 0 or sum(q) <= 0:
            note.value = "<b>Give p_target and p_draft some weight.</b>"
            return
        note.value = ""
        image.value = _figure_png(plot_residual_rule(p, q, names))

    def load(change: Any) -> None:
        updating["now"] = True
        p, q = presets[change["new"]]
        for s, v in zip(p_sliders, p, strict=True):
            s.value = float(v)
        for s, v in zip(q_sliders, q, strict=True):
            s.value = float(v)
        updating["now"] = False
        redraw()

    menu.observe(load, names="value")
    for s in p_sliders + q_sliders:
        s.observe(redraw, names="value")
    redraw()
    rows = widgets.VBox(
        [
            widgets.HBox(
                [widgets.Label("p_target weights", layout=widgets.Layout(width="120px"))]
                + p_sliders
            ),
            widgets.HBox(
                [widgets.Label("p_draft weights", layout=widgets.Layout(width="120px"))] + q_sliders
            ),
        ]
    )
    return widgets.VBox([menu, rows, note, image])
