"""Test helpers the course's tests share: they check a figure against the style and play
the browser's part for a widget. Nothing a chapter runs needs them, so they live here,
not in the library."""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure

from specdec_lib.checks import check_int


def check_figure(fig: Figure) -> None:
    """Raise ``ValueError`` unless every axes of ``fig`` is labelled and opaque: the
    course's figure style (:mod:`specdec_lib.course.plotting`)."""
    if fig.get_facecolor()[3] < 1.0:
        raise ValueError("figure background must be opaque (readable on light and dark themes)")
    for ax in fig.get_axes():
        if not ax.get_xlabel().strip() or not ax.get_ylabel().strip():
            raise ValueError(f"axes {ax.get_title()!r} has an unlabelled axis")


def pick(control: Any, index: int) -> None:
    """Set ``control.index`` and follow its ``jslink``-s, as the browser does with saved state.

    With no browser attached (a test), a ``jslink`` does nothing; this plays the browser's
    part, so a test can move a control of a ``linked_stack`` and read :func:`shown`.
    """
    from ipywidgets.widgets.widget import _instances
    from ipywidgets.widgets.widget_link import Link

    control.index = check_int("index", index, 0)
    for link in [w for w in _instances.values() if isinstance(w, Link)]:
        if link.source == (control, "index"):
            setattr(*link.target, index)


def shown(widget: Any) -> list[Any]:
    """The leaf widgets a reader sees in ``widget``: a ``Stack`` shows only its selected child."""
    import ipywidgets as widgets

    if isinstance(widget, widgets.Stack):
        return shown(widget.children[widget.selected_index])
    if isinstance(widget, widgets.Box):
        return [leaf for child in widget.children for leaf in shown(child)]
    return [widget]
