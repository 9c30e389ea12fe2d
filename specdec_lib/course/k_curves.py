"""Tokens per target pass against k, measured, beside the two models that predict it.

A row of ``benchmarks/tokens_per_pass.py`` holds, for one workload, drafter and k, the
pooled counts, their interval over prompts and the counts per draft position. From the
row at the largest k this module reads the rates the models need, and draws both:

* the textbook model, E(α, k) = (1 − α^(k+1)) / (1 − α), drawn at α = r₀, the share of
  first drafts kept (position 0; ``alpha0``): every draft kept independently with the
  same probability, which under that model r₀ estimates;
* the same sum with a rate per position (:func:`~specdec_lib.analysis.theory.kept_prefix_rates`):
  independence dropped, every round still assumed to draft k tokens.

Where the data leave the textbook curve but follow the per-position one, acceptance is
not independent along a draft; where they leave both, rounds drafted fewer than k
tokens (the n-gram drafter drafts nothing when the context holds no match).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from specdec_lib.analysis.theory import (
    expected_tokens_per_pass,
    expected_tokens_per_pass_from_rates,
    kept_prefix_rates,
)
from specdec_lib.course.plotting import COLORS

#: The two models' curves, as each panel draws them: (field of :class:`KCurves`, colour,
#: line style, label).
_MODELS = (
    ("textbook", "baseline", "--", "textbook E(α, k) at α = r₀, the first draft's rate"),
    ("per_position", "highlight", "-.", "a rate per position, full drafts"),
)


@dataclass(frozen=True)
class KCurves:
    """One workload and drafter: measured tokens per pass at each k, its 95% interval
    over prompts, and the two models' predictions, from the rates of the largest k."""

    workload: str
    drafter: str
    ks: list[int]
    measured: list[float]
    low: list[float]
    high: list[float]
    alpha0: float
    rates: list[float]
    textbook: list[float]
    per_position: list[float]


def k_curves(rows: Sequence[dict], workload: str, drafter: str) -> KCurves:
    """The :class:`KCurves` of ``workload`` and ``drafter`` from a tokens-per-pass sweep."""
    mine = sorted(
        (r for r in rows if r["workload"] == workload and r["drafter"] == drafter),
        key=lambda r: r["k"],
    )
    if not mine:
        raise ValueError(f"rows hold no sweep of workload={workload!r}, drafter={drafter!r}")
    ks = [r["k"] for r in mine]
    rates = kept_prefix_rates(mine[-1]["position_proposed"], mine[-1]["position_accepted"])
    return KCurves(
        workload=workload,
        drafter=drafter,
        ks=ks,
        measured=[r["tokens_per_pass_interval"]["value"] for r in mine],
        low=[r["tokens_per_pass_interval"]["low"] for r in mine],
        high=[r["tokens_per_pass_interval"]["high"] for r in mine],
        alpha0=rates[0],
        rates=rates,
        textbook=[expected_tokens_per_pass(rates[0], k) for k in ks],
        per_position=[expected_tokens_per_pass_from_rates(rates, k) for k in ks],
    )


def plot_k_curves(curves: Sequence[KCurves], title: str) -> Figure:
    """One panel per workload, each on its own scale (copy reaches k + 1, the others a
    few tokens): the measured points with their intervals, both models and plain
    decoding's one token per pass."""
    if not curves:
        raise ValueError("curves must hold at least one KCurves")
    fig, axes = plt.subplots(1, len(curves), figsize=(2.9 * len(curves) + 1.0, 4.2), squeeze=False)
    axes = list(axes[0])
    fig.suptitle(title)
    axes[0].set_ylabel("tokens per target pass")
    for ax, c in zip(axes, curves, strict=True):
        ax.set_xlabel("draft length k (tokens)")
        ax.errorbar(
            c.ks,
            c.measured,
            yerr=[
                [m - lo for m, lo in zip(c.measured, c.low, strict=True)],
                [hi - m for m, hi in zip(c.measured, c.high, strict=True)],
            ],
            marker="o",
            color=COLORS["accepted"],
            capsize=3,
            label="measured (95% interval over prompts)",
        )
        for field, color, line, label in _MODELS:
            ax.plot(c.ks, getattr(c, field), color=COLORS[color], linestyle=line, label=label)
        ax.axhline(1, color=COLORS["baseline"], linestyle=":", linewidth=1, label="plain decoding")
        ax.set_title(f'"{c.workload}" (r₀ = {c.alpha0:.2f})', fontsize=10)
        ax.set_xscale("log", base=2)
        ax.set_xticks([k for k in c.ks if k & (k - 1) == 0])
        ax.set_xticklabels([str(k) for k in c.ks if k & (k - 1) == 0])
        ax.set_ylim(bottom=0)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.legend(handles, labels, loc="lower center", ncols=2)
    return fig
