"""The picture of a token tree: the tree, and the mask and positions its pass runs with.

Both panels are drawn from the engine's own objects: the tree from a
:class:`~specdec_lib.engine.tree.TokenTree`, the mask and the rotary positions from the
:class:`~specdec_lib.engine.model.Layout` that :func:`~specdec_lib.engine.tree.tree_layout`
builds for the pass, so the figure shows what the model is given, not a redrawing of it.
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure

from specdec_lib.course.diagram_kit import TINT, arrow, box, canvas, check_count, show_token
from specdec_lib.course.plotting import COLORS, INK
from specdec_lib.engine.tree import TokenTree, tree_layout


def _rows(tree: TokenTree) -> list[float]:
    """A vertical slot per node: leaves in order, a parent centred over its children."""
    rows: dict[int, float] = {}
    leaf = 0

    def place(node: int) -> float:
        nonlocal leaf
        kids = tree.children(node)
        if not kids:
            rows[node] = leaf
            leaf += 1
        else:
            spots = [place(k) for k in kids]
            rows[node] = sum(spots) / len(spots)
        return rows[node]

    place(-1)
    return [rows[i] for i in range(-1, len(tree))]


def tree_diagram(
    tree: TokenTree,
    labels: Sequence[str],
    pending: str,
    n_context: int,
    accepted: Sequence[int] = (),
) -> Figure:
    """Left: the tree under the pending token, the ``accepted`` path (tree indices) shaded.
    Right: one row per input of the pass (the pending token, then the nodes in slot
    order), one column per slot from the pending token on: filled where the row may
    attend, with each input's rotary position beneath. ``n_context`` tokens precede the
    pending one (all of them visible to every row, not drawn)."""
    n = len(tree)
    check_count("nodes", n, 1, 15)
    check_count("n_context", n_context, 0, 10**6)
    if len(labels) != n:
        raise ValueError(f"labels must hold one string per node ({n}), got {len(labels)}")
    layout = tree_layout([n_context], [1 + n], [tree.parents])
    mask = layout.mask[0, 0, :, n_context : n_context + 1 + n]  # (1 + n, 1 + n)
    positions = layout.positions[0].tolist()
    depth = max(tree.depths) + 1
    rows = _rows(tree)
    height = max(rows) + 1
    left = depth * 1.05 + 2.0  # room for the row labels between the panels
    fig, ax = canvas(0.55 * max(height, n + 1) + 1.2, (-0.8, left + n + 2.2), (-n - 1.6, 1.5))
    # the tree: x by depth, y by row
    scale = (n + 0.5) / max(height, 1)

    def spot(node: int) -> tuple[float, float]:
        return (node_depth(node) * 1.05, -rows[node + 1] * scale)

    def node_depth(node: int) -> int:
        return 0 if node < 0 else tree.depths[node] + 1

    box(ax, *spot(-1), show_token(pending, 8), TINT["context"], COLORS["baseline"])
    for i in range(n):
        face = TINT["accepted"] if i in accepted else TINT["draft"]
        x, y = spot(i)
        px, py = spot(tree.parents[i])
        arrow(ax, (px + 0.45, py), (x - 0.45, y), color=COLORS["baseline"])
        box(ax, x, y, show_token(labels[i], 8), face, COLORS["draft"])
        ax.text(
            x, y - 0.5, f"node {i}", ha="center", va="top", fontsize=7, color=COLORS["baseline"]
        )
    ax.text(0, 1.0, "the tree (x: depth)", ha="left", va="center", fontsize=9, fontweight="bold")
    # the mask: rows = inputs (pending, nodes), columns = their slots
    names = ["pending"] + [f"node {i}" for i in range(n)]
    for r in range(1 + n):
        y = -r - 0.3
        ax.text(left - 0.05, y, names[r], ha="right", va="center", fontsize=8)
        for c in range(1 + n):
            x = left + c + 0.5
            if bool(mask[r, c]):
                face = TINT["context"] if c == 0 else TINT["draft"]
                box(ax, x, y, "", face, COLORS["draft"] if c else COLORS["baseline"], w=0.9, h=0.85)
            else:
                box(ax, x, y, "×", TINT["masked"], "#bdbdbd", w=0.9, h=0.85, size=8)
                ax.texts[-1].set_color("#9a9a9a")
    for c in range(1 + n):
        ax.text(left + c + 0.5, 0.35, "p" if c == 0 else str(c - 1), ha="center", fontsize=8)
        ax.text(
            left + c + 0.5,
            -n - 1.0,
            str(positions[c]),
            ha="center",
            va="top",
            fontsize=8,
            color=INK,
        )
    ax.text(left - 0.15, -n - 1.0, "position", ha="right", va="top", fontsize=8)
    ax.text(
        left,
        1.0,
        f"its mask (every row also sees the {n_context} context slots)",
        ha="left",
        va="center",
        fontsize=9,
        fontweight="bold",
    )
    return fig
