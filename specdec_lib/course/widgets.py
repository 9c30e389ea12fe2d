"""What makes a widget respond on the website, where no kernel runs.

A widget on the static site has only its saved state. So a chapter's widget draws
every state its controls can reach when the notebook runs (:func:`widget_png` keeps
each picture small), stacks them, and links each control to its stack in the
browser (:func:`linked_stack`). The tests play the browser's part (``tests/helpers.py``):
they move a control and read what a reader would see.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

__all__ = ["linked_stack", "widget_png"]


def widget_png(fig: Figure, dpi: int = 90, tight: bool = True) -> bytes:
    """The figure as a PNG with a palette of 32 colours, and closed.

    A widget that responds with no kernel stores every state's picture; a palette
    PNG of a chart is about a quarter of the full-colour one and looks the same.
    ``tight=False`` saves the figure as laid out, for one that fits itself (by
    ``tight_layout``): a tight crop draws the figure twice, and dozens of states
    make that the cell's run time.
    """
    from PIL import Image

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight" if tight else None)
    plt.close(fig)
    image = Image.open(buffer).convert("RGB").quantize(colors=32)
    buffer = io.BytesIO()
    image.save(buffer, format="png", optimize=True)
    return buffer.getvalue()


def linked_stack(control: Any, children: Sequence[Any]) -> Any:
    """An ``ipywidgets.Stack`` of ``children`` showing the one ``control.index`` points at.

    The link is made in the browser (``jslink``), so it holds on a page with no
    kernel, where the saved widget state is all there is. Link ``index``, never
    ``value``: a selection widget's ``value`` is not synced to the browser.
    """
    import ipywidgets as widgets

    stack = widgets.Stack(list(children), selected_index=control.index)
    widgets.jslink((control, "index"), (stack, "selected_index"))
    return stack
