"""Estimated cost per token of each drafter against k: one figure, and a widget.

The counts come from ``benchmarks/tokens_per_pass.py`` (rows with ``workload``,
``drafter``, ``k``, ``emitted``, ``target_passes``, ``draft_passes``); the price
of a draft pass (``c``) and of an n-gram lookup (``o``), both in target passes,
are inputs, because they belong to the hardware, not to the drafter. See
:mod:`specdec_lib.analysis.costs` for the cost model.

The widget draws the figure for every offered (c, o) when the cell runs, each into
an ``ipywidgets.Image`` with its verdict in an ``ipywidgets.HTML``, and stacks them;
the controls only choose which is shown, linked in the browser. So it responds on
the static website (which has the saved widget state and no kernel) as in a
running notebook, and executing the cell prints nothing but the widget: the stored
notebook, a fresh nbval run and the website all agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.axes import Axes

from specdec_lib.analysis.costs import cost_per_token
from specdec_lib.checks import check_real
from specdec_lib.course.plotting import COLORS, legend_outside, new_figure
from specdec_lib.course.widgets import linked_stack, widget_png

Row = Mapping[str, Any]

NAMES = {"draft": "draft model", "ngram": "n-gram"}
#: (colour, marker, line style) per (workload, drafter): colour is the drafter, line the workload.
STYLES = {
    ("copy", "ngram"): (COLORS["accepted"], "o", "-"),
    ("novel", "ngram"): (COLORS["accepted"], "s", "--"),
    ("copy", "draft"): (COLORS["target"], "o", "-"),
    ("novel", "draft"): (COLORS["target"], "s", "--"),
}
#: The prices the widget offers: c from a free draft pass to one as dear as a target
#: pass, and o about what a lookup costs in chapter 5 and ten times that.
_C_VALUES = tuple(i / 10 for i in range(11))
_O_VALUES = (0.03, 0.3)


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


def best_k(rows: Sequence[Row], workload: str, drafter: str, c: float, o: float) -> int:
    """The k at which ``drafter`` costs least on ``workload`` (the smallest such k on a tie)."""
    table = index_rows(rows)
    ks = sorted(k for w, d, k in table if (w, d) == (workload, drafter))
    if not ks:
        raise ValueError(f"rows must hold {drafter!r} on {workload!r}")
    return min(ks, key=lambda k: row_cost(table[workload, drafter, k], c, o))


def verdict(rows: Sequence[Row], c: float, o: float) -> list[str]:
    """One line per workload: each drafter's cost at its own best k, and which is cheaper.

    Each drafter at its best k, because that is how each would be deployed: a
    comparison at one shared k would favour whichever drafter that k suits.
    """
    table = index_rows(rows)
    lines = []
    for workload in ("copy", "novel"):
        kd, kn = (best_k(rows, workload, d, c, o) for d in ("draft", "ngram"))
        d = row_cost(table[workload, "draft", kd], c, o)
        n = row_cost(table[workload, "ngram", kn], c, o)
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
) -> Any:
    """Sliders for c and o over :func:`plot_costs` and :func:`verdict`.

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
    top = max(2.0, 1.05 * max(row_cost(r, max(cs), max(o_list)) for r in rows))
    texts, images = [], []
    for ov in o_list:
        text_row, image_row = [], []
        for cv in cs:
            fig, ax = new_figure(
                "draft length k (tokens)",
                "estimated cost per token (target passes)",
                f"Cost per token at c = {cv:g}, o = {ov:g}",
            )
            plot_costs(ax, rows, cv, ov)
            ax.set_ylim(0, top)
            image_row.append(widgets.Image(value=widget_png(fig), format="png", layout=layout))
            text_row.append(widgets.HTML("<br>".join(verdict(rows, cv, ov)), layout=layout))
        texts.append(linked_stack(c_pick, text_row))
        images.append(linked_stack(c_pick, image_row))
    return widgets.VBox([c_pick, o_pick, linked_stack(o_pick, texts), linked_stack(o_pick, images)])
