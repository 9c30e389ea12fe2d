"""Estimated cost per token of each drafter against k: one figure, and a widget.

The counts come from ``benchmarks/tokens_per_pass.py`` (rows with ``workload``,
``drafter``, ``k``, ``emitted``, ``target_passes``, ``draft_passes``); the price
of a draft pass (``c``) and of an n-gram lookup (``o``), both in target passes,
are inputs, because they belong to the hardware, not to the drafter. See
:mod:`specdec_lib.analysis.costs` for the cost model.

The widget draws the figure into an ``ipywidgets.Image`` and writes its verdict
into an ``ipywidgets.HTML``, never into an ``Output`` widget: executing the cell
prints nothing but the widget, so the stored notebook, a fresh nbval run and the
website (which shows the saved widget state) all agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.axes import Axes

from specdec_lib.analysis.costs import cost_per_token
from specdec_lib.course.plotting import COLORS, _figure_png, legend_outside, new_figure

Row = Mapping[str, Any]

NAMES = {"draft": "draft model", "ngram": "n-gram"}
#: (colour, marker, line style) per (workload, drafter): colour is the drafter, line the workload.
STYLES = {
    ("copy", "ngram"): (COLORS["accepted"], "o", "-"),
    ("novel", "ngram"): (COLORS["accepted"], "s", "--"),
    ("copy", "draft"): (COLORS["target"], "o", "-"),
    ("novel", "draft"): (COLORS["target"], "s", "--"),
}


def row_cost(row: Row, c: float, o: float) -> float:
    """Estimated target passes per emitted token for one benchmark row.

    A draft model pays ``c`` per draft pass; the n-gram drafter pays ``o`` per
    lookup, one per round, and at batch one there is one round per target pass.
    """
    lookups = row["target_passes"] if row["drafter"] == "ngram" else 0
    return cost_per_token(
        row["target_passes"], row["draft_passes"], row["emitted"], c, rounds=lookups, o=o
    )


def index_rows(rows: Sequence[Row]) -> dict[tuple[str, str, int], Row]:
    """The rows keyed by ``(workload, drafter, k)``."""
    return {(r["workload"], r["drafter"], r["k"]): r for r in rows}


def plot_costs(
    ax: Axes, rows: Sequence[Row], c: float, o: float, k_mark: int | None = None
) -> None:
    """Cost per token against k for every (workload, drafter) in ``rows``, plain decoding at 1."""
    table = index_rows(rows)
    ks = sorted({r["k"] for r in rows})
    for (workload, drafter), (color, marker, line) in STYLES.items():
        if (workload, drafter, ks[0]) not in table:
            continue
        ax.plot(
            ks,
            [row_cost(table[workload, drafter, k], c, o) for k in ks],
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


def verdict(rows: Sequence[Row], c: float, o: float, k: int) -> list[str]:
    """One line per workload: both drafters' cost at ``k`` and which is cheaper."""
    table = index_rows(rows)
    lines = []
    for workload in ("copy", "novel"):
        d = row_cost(table[workload, "draft", k], c, o)
        n = row_cost(table[workload, "ngram", k], c, o)
        cheaper = NAMES["draft"] if d < n else NAMES["ngram"]
        lines.append(
            f'"{workload}", k = {k}: draft model {d:.2f}, n-gram {n:.2f} target passes '
            f"per token; {cheaper} cheaper"
        )
    return lines


def cost_widget(rows: Sequence[Row], c: float = 0.5, o: float = 0.01, k: int = 4) -> Any:
    """Sliders for c, o and k over :func:`plot_costs`; returns an ``ipywidgets.VBox``."""
    import ipywidgets as widgets

    ks = sorted({r["k"] for r in rows})
    c_slider = widgets.FloatSlider(
        value=c, min=0.0, max=1.0, step=0.05, description="c", continuous_update=False
    )
    o_slider = widgets.FloatSlider(
        value=o, min=0.0, max=0.3, step=0.01, description="o", continuous_update=False
    )
    k_slider = widgets.IntSlider(
        value=k, min=ks[0], max=ks[-1], description="k", continuous_update=False
    )
    image = widgets.Image(format="png")
    text = widgets.HTML()

    def redraw(*_: Any) -> None:
        cv, ov, kv = c_slider.value, o_slider.value, k_slider.value
        fig, ax = new_figure(
            "draft length k (tokens)",
            "estimated cost per token (target passes)",
            f"Cost per token at c = {cv:.2f}, o = {ov:.2f}",
        )
        plot_costs(ax, rows, cv, ov, k_mark=kv)
        image.value = _figure_png(fig)
        text.value = "<br>".join(verdict(rows, cv, ov, kv))

    for slider in (c_slider, o_slider, k_slider):
        slider.observe(redraw, names="value")
    redraw()
    return widgets.VBox([widgets.HBox([c_slider, o_slider, k_slider]), text, image])
