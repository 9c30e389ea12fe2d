"""Chapter 11's profile figure: where each generation's time goes, per generated token.

It draws what :func:`~specdec_lib.experiments.hf_profile.profile_jobs` measured.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specdec_lib.course.plotting import CYCLE, legend_outside, new_figure
from specdec_lib.experiments.generation_profile import FORWARD_PARTS, HOST_PARTS
from specdec_lib.experiments.hf_profile import Profile, check_profiles

#: How the figure groups the parts: every host part in one bar segment.
_FIGURE_GROUPS: dict[str, tuple[str, ...]] = {
    **{part: (part,) for part in FORWARD_PARTS},
    "outside the passes": HOST_PARTS,
}


def plot_profiles(profiles: Mapping[str, Profile], tokens: int) -> Any:
    """Horizontal bars, one per job, of profiled milliseconds per generated token (each
    job generated ``tokens``), stacked by part (:data:`_FIGURE_GROUPS`).

    Per generated token, so plain and speculative jobs compare the same output: a
    speculative pass scores several positions and takes longer than a plain one, and per
    pass the bars would read as if speculation were slower. Each job's label says how
    many target passes it made and how many tokens each produced on average."""
    names = check_profiles(profiles)
    if tokens < 1:
        raise ValueError(f"tokens must be positive, got {tokens}")
    labels = [
        f"{n}\n{profiles[n].passes} passes, {tokens / profiles[n].passes:.1f} tokens per pass"
        for n in names
    ]
    fig, ax = new_figure("profiled time per generated token (ms)", "job", figsize=(7.0, 4.2))
    left = [0.0] * len(names)
    for (group, parts), color in zip(_FIGURE_GROUPS.items(), CYCLE, strict=False):
        widths = [1e3 * sum(profiles[n].seconds[p] for p in parts) / tokens for n in names]
        ax.barh(labels, widths, left=left, color=color, label=group, height=0.6)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.invert_yaxis()
    ax.grid(axis="y", visible=False)
    legend_outside(ax)
    return fig
