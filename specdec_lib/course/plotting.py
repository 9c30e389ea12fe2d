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

After :func:`use_course_style`, every figure a notebook shows also stores, in its PNG
output's metadata under :data:`LEGEND_RECORD`, what each of its legends draws
(:func:`legend_swatches`): the label and the swatch of every entry. The reader never sees
it; ``tests/test_book_claims.py`` reads it from the stored notebooks and fails on a legend
in which two labels share one swatch (chapter 0's "rejected proposals" once showed the
blue box of "target's own token").
"""

from __future__ import annotations

import hashlib
import io
from typing import Any

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.collections import Collection, PathCollection
from matplotlib.colors import to_hex, to_rgba
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.offsetbox import DrawingArea, HPacker, TextArea
from matplotlib.patches import Patch
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
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:  # not running under IPython's inline backend
        return
    set_matplotlib_formats("png", facecolor=_BACKGROUND)
    shell = get_ipython()
    if shell is not None:
        png = shell.display_formatter.formatters["image/png"]
        png.for_type(Figure, _with_legend_record(png.lookup_by_type(Figure)))


#: The key, in a figure's PNG output metadata, of what its legends draw.
LEGEND_RECORD = "specdec_legends"


def _with_legend_record(draw: Any) -> Any:
    """IPython's PNG formatter ``draw``, returning with the PNG what the legends draw.

    A formatter may return ``(data, metadata)``; the notebook stores the metadata with
    the output, where ``tests/test_book_claims.py`` reads it.
    """

    def png_and_legends(fig: Figure) -> Any:
        data = draw(fig)
        try:
            record: Any = legend_swatches(fig)
        except Exception as exc:  # never lose a figure to its record; the test flags this
            record = f"not recorded: {exc!r}"
        return data, {LEGEND_RECORD: record}

    return png_and_legends


def legend_swatches(fig: Figure) -> list[list[list[str]]]:
    """Every legend of ``fig`` (the figure's own, then each axes'), as its entries in
    order, each ``[label, swatch]``: the swatch says what the entry draws (colour, line
    style, marker, hatch of every artist in it), so two entries that look alike have the
    same swatch. An entry that draws nothing has the swatch ``""``.
    """
    legends: list[Legend] = list(fig.legends)
    legends += [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    found = []
    for legend in legends:
        entries = []
        # Legend packs each entry as an HPacker of its swatch's box and its label's box.
        for box in legend.findobj(lambda a: isinstance(a, HPacker)):
            parts = box.get_children()
            swatch = [p for p in parts if isinstance(p, DrawingArea)]
            label = [p for p in parts if isinstance(p, TextArea)]
            if len(parts) == 2 and len(swatch) == 1 and len(label) == 1:
                drawn = [_artist_swatch(a) for a in swatch[0].get_children() if a.get_visible()]
                entries.append([label[0].get_text(), " + ".join(sorted(filter(None, drawn)))])
        found.append(entries)
    return found


def _colour(colour: Any, alpha: float | None = None) -> str:
    rgba = to_rgba(colour, alpha)
    return "none" if rgba[3] == 0 else to_hex(rgba, keep_alpha=True)


def _colours(colours: Any) -> str:
    return "/".join(sorted({_colour(tuple(c)) for c in np.atleast_2d(colours)})) or "none"


def _style(style: Any) -> str:
    """A line style by name: ``"--"``, ``"dashed"`` and ``(0, (3.7, 1.6))`` alike."""
    if isinstance(style, tuple):  # (offset, dashes), as collections and patches keep it
        dashes = style[1]
        return "solid" if not dashes else "dashes " + ",".join(f"{d:g}" for d in dashes)
    return {"-": "solid", "--": "dashed", ":": "dotted", "-.": "dashdot"}.get(style, str(style))


def _artist_swatch(artist: Artist) -> str:
    """What ``artist`` draws in a legend swatch, as text; ``""`` if it draws nothing."""
    if isinstance(artist, Line2D):
        drawn = []
        style = artist.get_linestyle()
        if style not in ("None", "none", "", " ") and artist.get_linewidth() > 0:
            colour = _colour(artist.get_color(), artist.get_alpha())
            drawn.append(f"line {colour} {_style(style)}")
        marker = artist.get_marker()
        if marker not in (None, "None", "none", "", " "):
            face = _colour(artist.get_markerfacecolor(), artist.get_alpha())
            edge = _colour(artist.get_markeredgecolor(), artist.get_alpha())
            drawn.append(f"marker {marker} {face} {edge}")
        return " ".join(drawn)
    if isinstance(artist, Patch):
        face = _colour(artist.get_facecolor()) if artist.get_fill() else "none"
        edge = _colour(artist.get_edgecolor()) if artist.get_linewidth() > 0 else "none"
        hatch = artist.get_hatch() or ""
        if face == "none" and edge == "none" and not hatch:
            return ""
        style = "" if edge == "none" else f" {_style(artist.get_linestyle())}"
        return f"patch {face} {edge}{style} {hatch}".rstrip()
    if isinstance(artist, Collection):
        shape = ""
        if isinstance(artist, PathCollection) and artist.get_paths():
            vertices = np.round(artist.get_paths()[0].vertices, 2).tobytes()
            shape = " shape " + hashlib.sha1(vertices).hexdigest()[:8]
        edge = _colours(artist.get_edgecolor())
        if edge != "none" and any(w > 0 for w in np.atleast_1d(artist.get_linewidth())):
            edge += " " + "/".join(sorted({_style(s) for s in artist.get_linestyle()}))
        else:
            edge = "none"
        hatch = artist.get_hatch() or ""
        return f"collection {_colours(artist.get_facecolor())} {edge}{shape} {hatch}".rstrip()
    return type(artist).__name__


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
