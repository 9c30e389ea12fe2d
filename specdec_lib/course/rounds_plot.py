"""Speculation runs drawn round by round: one bar per target pass.

Chapter 0's first figure. Each bar stacks what one round emitted (the accepted
proposals, then the target's own token) with the rejected proposals hatched above
them, so the two facts the chapter opens with are visible at a glance: every
round emits between 1 and k + 1 tokens, and a rejected proposal costs the round
its gain but never its token. The records are those of
:class:`specdec_lib.SpeculationStats`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import matplotlib.pyplot as plt
from matplotlib.artist import Artist
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from specdec_lib.course.plotting import COLORS

__all__ = ["plot_rounds"]


class _Round(Protocol):
    proposed: list[int]
    n_accepted: int
    emitted: list[int]


class _Run(Protocol):
    log: Sequence[_Round]


def plot_rounds(runs: Mapping[str, _Run], k: int) -> Figure:
    """One panel per run (title: its key), each as wide as its number of rounds.

    ``k`` draws the ceiling line at k + 1 tokens. The ceiling and plain decoding
    are both reference lines, so both are grey, told apart by their dashes: the
    vermilion of rejected proposals means only that.
    """
    if not runs:
        raise ValueError("runs must hold at least one run")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if any(not run.log for run in runs.values()):
        raise ValueError("every run must have at least one round in its log")
    widths = [len(run.log) for run in runs.values()]
    fig, axes = plt.subplots(
        1, len(runs), figsize=(8.4, 3.8), sharey=True, width_ratios=widths, squeeze=False
    )
    for ax, (label, run) in zip(axes[0], runs.items(), strict=True):
        _draw_run(ax, run.log)
        ax.axhline(
            1, color=COLORS["baseline"], linestyle="--", linewidth=1.2, label="plain decoding"
        )
        ax.axhline(
            k + 1, color=COLORS["baseline"], linestyle=":", linewidth=1.8, label="ceiling, k + 1"
        )
        ax.set_title(label, fontsize=11)
        ax.set_xlabel("round (one target pass each)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0][0].set_ylabel("tokens (emitted; hatched: rejected)")
    axes[0][0].set_ylim(0, k + 1.6)
    fig.suptitle(
        f"Every round emits between 1 and k + 1 tokens (k = {k})", fontweight="bold", y=1.02
    )
    # The legend is drawn from proxies built with the bars' own colours and hatching,
    # not from a panel's handles: a panel without a rejection has an empty hatched
    # container, whose default patch would show the wrong swatch.
    handles = _legend_handles()
    fig.legend(
        handles,
        [h.get_label() for h in handles],
        loc="upper center",
        bbox_to_anchor=(0.5, 0.0),
        ncols=3,
    )
    return fig


def _legend_handles() -> list[Artist]:
    """One proxy per element of the panels, styled exactly as :func:`_draw_run` and
    :func:`plot_rounds` draw it."""
    return [
        Line2D(
            [], [], color=COLORS["baseline"], linestyle="--", linewidth=1.2, label="plain decoding"
        ),
        Line2D(
            [], [], color=COLORS["baseline"], linestyle=":", linewidth=1.8, label="ceiling, k + 1"
        ),
        Patch(facecolor=COLORS["accepted"], label="accepted proposals"),
        Patch(facecolor=COLORS["target"], label="target's own token"),
        Patch(
            facecolor="none",
            edgecolor=COLORS["rejected"],
            hatch="///",
            linewidth=1.0,
            label="rejected proposals (not emitted)",
        ),
    ]


def _draw_run(ax: plt.Axes, log: Sequence[_Round]) -> None:
    """Stacked bars for one run's rounds, numbered from 1."""
    rounds = list(range(1, len(log) + 1))
    accepted = [r.n_accepted for r in log]
    own = [len(r.emitted) - r.n_accepted for r in log]
    emitted = [len(r.emitted) for r in log]
    rejected = [len(r.proposed) - r.n_accepted for r in log]
    ax.bar(rounds, accepted, width=0.8, color=COLORS["accepted"], label="accepted proposals")
    ax.bar(
        rounds, own, width=0.8, bottom=accepted, color=COLORS["target"], label="target's own token"
    )
    hit = [i for i, n in enumerate(rejected) if n]  # rounds with a rejection
    ax.bar(
        [rounds[i] for i in hit],
        [rejected[i] for i in hit],
        width=0.8,
        bottom=[emitted[i] for i in hit],
        facecolor="none",
        edgecolor=COLORS["rejected"],
        hatch="///",
        linewidth=1.0,
        label="rejected proposals (not emitted)",
    )
