"""One figure style for every chapter.

The site has a light and a dark theme, and a figure cannot know which one a
reader chose. So every figure is drawn on an opaque white background with dark
ink: it reads the same on either theme, and in a notebook, in Colab and in a
printout. Colours come from the Okabe-Ito palette, which stays distinguishable
for the common forms of colour blindness; the same three meanings
(accepted, rejected, target's own token) use the same colours here and in
:mod:`specdec_lib.course.rounds_view`.

A chapter calls :func:`use_course_style` once, then builds each figure with
:func:`new_figure`, which insists on axis labels. Put the unit in the label,
in brackets: ``"time per forward pass (ms)"``, ``"tokens per target pass"``
(a count needs no unit), ``"draft length k (tokens)"``.
"""

from __future__ import annotations

import io
from typing import Any

import matplotlib as mpl
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

#: Okabe-Ito colours, by what they mean in this course.
COLORS: dict[str, str] = {
    "accepted": "#009E73",  # bluish green: a drafted token the target agreed with
    "rejected": "#D55E00",  # vermillion: a drafted token the target overruled
    "target": "#0072B2",  # blue: a token the target chose itself (correction or bonus)
    "baseline": "#555555",  # grey: plain decoding, theory lines, references
    "draft": "#E69F00",  # orange: the drafter's cost or output
    "highlight": "#CC79A7",  # reddish purple: anything else worth pointing at
}

#: Cycle used for series that carry no fixed meaning.
CYCLE: list[str] = [
    COLORS["target"],
    COLORS["draft"],
    COLORS["accepted"],
    COLORS["rejected"],
    COLORS["highlight"],
    "#56B4E9",  # sky blue
    COLORS["baseline"],
]

INK = "#1a1a1a"
_BACKGROUND = "#ffffff"

_COURSE_RC: dict[str, Any] = {
    "figure.figsize": (6.4, 3.8),
    "figure.dpi": 110,
    "savefig.dpi": 150,
    "figure.facecolor": _BACKGROUND,
    "figure.edgecolor": _BACKGROUND,
    "savefig.facecolor": _BACKGROUND,
    "savefig.edgecolor": _BACKGROUND,
    "savefig.transparent": False,
    "savefig.bbox": "tight",
    "axes.facecolor": _BACKGROUND,
    "axes.edgecolor": INK,
    "axes.labelcolor": INK,
    "axes.titlecolor": INK,
    "axes.titlesize": 12,
    "axes.titleweight": "bold",
    "axes.labelsize": 11,
    "axes.grid": True,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.prop_cycle": mpl.cycler(color=CYCLE),
    "grid.color": "#d0d0d0",
    "grid.linewidth": 0.6,
    "xtick.color": INK,
    "ytick.color": INK,
    "xtick.labelsize": 10,
    "ytick.labelsize": 10,
    "text.color": INK,
    "legend.frameon": True,
    "legend.facecolor": _BACKGROUND,
    "legend.edgecolor": "#d0d0d0",
    "legend.framealpha": 1.0,
    "legend.fontsize": 10,
    "lines.linewidth": 2.0,
    "lines.markersize": 6,
    "font.size": 11,
    # Text stays text in SVG and the PNGs do not depend on which fonts a machine has.
    "svg.fonttype": "none",
    "font.family": "DejaVu Sans",
}


def use_course_style() -> None:
    """Apply the course's figure style to every figure drawn after this call.

    Also asks the notebook's inline backend for PNG output with an opaque
    background, so what is stored in the notebook (and shown on the site) is
    what the style promises.
    """
    mpl.rcParams.update(_COURSE_RC)
    try:
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:  # not running under IPython's inline backend
        return
    set_matplotlib_formats("png", facecolor=_BACKGROUND)


def new_figure(
    xlabel: str,
    ylabel: str,
    title: str | None = None,
    *,
    figsize: tuple[float, float] | None = None,
) -> tuple[Figure, Axes]:
    """A figure with one set of axes, labelled. Put units in the labels.

    Labels are required arguments because an unlabelled axis is the most
    common way a figure misleads. Returns ``(fig, ax)`` like ``plt.subplots``.
    """
    if not xlabel.strip() or not ylabel.strip():
        raise ValueError("xlabel and ylabel must be non-empty: name the quantity and its unit")
    fig, ax = plt.subplots(figsize=figsize or _COURSE_RC["figure.figsize"])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    return fig, ax


def legend_outside(ax: Axes, ncols: int | None = None, **kwargs: Any) -> None:
    """A legend under the axes, outside the data: it never hides a point.

    A legend placed inside the axes covers whatever falls under it, and where that is
    depends on the data, which changes when a benchmark is re-run. Under the x-axis
    label it covers nothing, whatever the data.
    """
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return
    n = len(handles) if ncols is None else ncols
    ax.legend(
        loc="upper center",
        bbox_to_anchor=(0.5, -0.2),
        ncols=min(n, 3),
        **kwargs,
    )


def log_axis(ax: Axes, axis: str = "y") -> None:
    """Put ``axis`` on a log scale labelled at 1, 2 and 5 times each power of ten.

    Matplotlib's default log axis labels only the powers of ten, so data spanning
    2 to 9 ms shows a single label ("10^1") and no way to read a point off it. Here
    the labels are plain numbers ("2", "5", "10", "0.5"); the unlabelled minor ticks
    stay. Call it after plotting, instead of ``ax.set_yscale("log")``.
    """
    if axis not in ("x", "y"):
        raise ValueError(f"axis must be 'x' or 'y', got {axis!r}")
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    scale = ax.xaxis if axis == "x" else ax.yaxis
    scale.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    scale.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    scale.set_minor_formatter(NullFormatter())


def _figure_png(fig: Figure, dpi: int = 90) -> bytes:
    """The figure as PNG bytes, and closed: what an ``ipywidgets.Image`` redraw displays.

    Widgets show a PNG rather than a live matplotlib output, so the saved widget state
    renders the same picture on the website as in a running kernel.
    """
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    plt.close(fig)
    return buffer.getvalue()
