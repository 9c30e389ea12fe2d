"""The drawing kit of the mechanism diagrams (:mod:`.diagrams`): token boxes whose labels
shrink to fit, arrows, a borderless canvas at the book's width, the palette's light tints,
and the argument checks the diagrams share.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.patches import FancyArrowPatch, Rectangle
from matplotlib.text import Text

from specdec_lib.course.plotting import INK

# Light tints of the palette: dark ink stays readable on every box.
TINT = {
    "context": "#e6e6e6",
    "draft": "#fbe8c4",
    "accepted": "#cdeee2",
    "rejected": "#f7d5c2",
    "target": "#cfe3f3",
    "highlight": "#f3dcea",
    "stale": "#ffffff",
    "masked": "#ffffff",
}
_WIDTH = 8.0  # inches: the book's text width
MAX_TOKENS = 16  # more boxes than this would not leave room for their text


def show_token(token: str, limit: int = 7) -> str:
    """A token as a box shows it: visible whitespace, at most ``limit`` characters."""
    if not token.strip():
        text = token.replace(" ", "␣").replace("\n", "⏎").replace("\t", "⇥") or "∅"
    else:
        text = token.strip().replace("\n", "⏎")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def box(
    ax: Axes,
    x: float,
    y: float,
    text: str,
    face: str,
    edge: str = INK,
    *,
    w: float = 0.9,
    h: float = 0.8,
    dashed: bool = False,
    hatch: str | None = None,
    size: float = 9.5,
    ink: str = INK,
) -> None:
    """A box centred on (x, y) with ``text`` inside."""
    ax.add_patch(
        Rectangle(
            (x - w / 2, y - h / 2),
            w,
            h,
            facecolor=face,
            edgecolor=edge,
            linewidth=1.6,
            linestyle="--" if dashed else "-",
            hatch=hatch,
        )
    )
    label = ax.text(x, y, text, ha="center", va="center", fontsize=size, color=ink)
    _shrink_to_fit(ax, label, 0.88 * w)


def _shrink_to_fit(ax: Axes, label: Text, width: float) -> None:
    """Lower ``label``'s font size until it is at most ``width`` data units wide: a wide
    token ("mimuma") must stay inside its box at any figure size."""
    renderer = ax.figure.canvas.get_renderer()
    to_data = ax.transData.inverted()
    while label.get_fontsize() > 5:
        box = label.get_window_extent(renderer)
        (x0, _), (x1, _) = to_data.transform([(box.x0, 0), (box.x1, 0)])
        if x1 - x0 <= width:
            return
        label.set_fontsize(label.get_fontsize() - 0.5)


def arrow(ax: Axes, start: tuple[float, float], end: tuple[float, float], **kwargs) -> None:
    """An arrow from ``start`` to ``end`` in data units, in the ink colour unless told."""
    style = dict(arrowstyle="-|>", mutation_scale=11, color=INK, linewidth=1.1) | kwargs
    ax.add_patch(FancyArrowPatch(start, end, shrinkA=0, shrinkB=0, **style))


def canvas(height: float, xlim: tuple[float, float], ylim: tuple[float, float]):
    """A figure at the book's width with one axis-less axes over all of it: a diagram is
    drawn in data units, not plotted."""
    fig, ax = plt.subplots(figsize=(_WIDTH, height))
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("auto")
    ax.axis("off")
    fig.subplots_adjust(left=0, right=1, bottom=0, top=1)  # the boxes get the whole width
    return fig, ax


def check_tokens(name: str, tokens: Sequence[str], least: int, most: int = MAX_TOKENS) -> None:
    """``ValueError`` naming ``name`` unless ``tokens`` holds ``least`` to ``most`` strings."""
    if isinstance(tokens, str) or not all(isinstance(t, str) for t in tokens):
        raise ValueError(f"{name} must be a list of token strings, got {tokens!r:.80}")
    if not least <= len(tokens) <= most:
        raise ValueError(f"{name} must hold {least} to {most} tokens, got {len(tokens)}")


def check_count(name: str, value: int, low: int, high: int) -> None:
    """``ValueError`` naming ``name`` unless ``value`` is an integer in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in [{low}, {high}], got {value!r}")
