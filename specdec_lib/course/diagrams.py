"""Mechanism diagrams: what one verification pass computes, which keys it may see,
and what a rollback does to the KV cache.

Data plots show what was measured; these show how the machine works, the picture
every good explanation of speculative decoding leads with. Each function takes the
tokens as strings, so a chapter draws the diagram of a round it really ran instead
of a made-up one. Colours keep the meanings of :data:`COLORS`: a drafted token is
orange until verified, then green (accepted) or vermillion (rejected); a token the
target chose itself is blue (a correction) or purple (a bonus); the context is grey.
Colour is never the only cue: every box also says in words what it is.
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from specdec_lib.course.diagram_kit import (
    MAX_TOKENS,
    TINT,
    arrow,
    box,
    canvas,
    check_count,
    check_tokens,
    show_token,
)
from specdec_lib.course.plotting import COLORS, INK

__all__ = ["cache_crop_diagram", "causal_mask_diagram", "verification_pass_diagram"]


def verification_pass_diagram(
    tokens: Sequence[str], n_accepted: int, target_tokens: Sequence[str] | None = None
) -> Figure:
    """One verification pass: k + 1 inputs in, k + 1 rows of logits out, and which row
    scores which drafted token.

    ``tokens`` is the pending token (the context's last, not yet fed) followed by the k
    drafted tokens; ``n_accepted`` how many drafts the target accepted (0 to k), and
    ``target_tokens`` optionally the target's choice at each of the k + 1 rows. The shift
    by one is the point: row i holds the target's distribution *after* input i, so it
    scores draft i + 1, and the pending token is fed only so that row 0 exists to score
    the first draft. Rows after the first rejection are computed and thrown away; when
    every draft is accepted, the last row gives a bonus token for free.
    """
    check_tokens("tokens", tokens, 2)
    k = len(tokens) - 1
    check_count("n_accepted", n_accepted, 0, k)
    if target_tokens is not None:
        check_tokens("target_tokens", target_tokens, k + 1, k + 1)
    fig, ax = canvas(4.4, (-1.9, k + 0.6), (-1.15, 5.05))
    y_in, y_row, y_out = 0.0, 2.6, 3.85
    ax.add_patch(
        Rectangle((-0.5, 0.75), k + 1, 1.1, facecolor="#f4f4f4", edgecolor=COLORS["target"], lw=1.6)
    )
    ax.text(
        k / 2,
        1.3,
        f"target model: one forward pass over {k + 1} positions",
        ha="center",
        va="center",
        fontsize=10.5,
    )
    labels = [(-1.2, y_in, "input"), (-1.2, y_row, "output row"), (-1.2, y_out, "verdict")]
    for x, y, text in labels:
        ax.text(x, y, text, ha="center", va="center", fontsize=10, fontweight="bold")
    for i, token in enumerate(tokens):
        if i == 0:
            box(ax, i, y_in, show_token(token), TINT["context"], COLORS["baseline"])
            ax.text(i, y_in - 0.62, "pending", ha="center", va="top", fontsize=9)
        else:
            box(ax, i, y_in, show_token(token), TINT["draft"], COLORS["draft"])
            ax.text(i, y_in - 0.62, f"draft {i}", ha="center", va="top", fontsize=9)
        arrow(ax, (i, y_in + 0.42), (i, 0.75))
        arrow(ax, (i, 1.85), (i, y_row - 0.42))
        choice = f"\n→ {show_token(target_tokens[i], 6)}" if target_tokens is not None else ""
        box(ax, i, y_row, f"row {i}{choice}", TINT["target"], COLORS["target"], size=9)
        if i < n_accepted:
            kind, text = "accepted", f"✓ draft {i + 1}\naccepted"
        elif i == n_accepted < k:
            kind, text = "rejected", f"✗ draft {i + 1}\nrejected:\ncorrection"
        elif i == n_accepted == k:
            kind, text = "highlight", "bonus\ntoken"
        elif i == k:
            kind, text = "stale", "bonus row:\nunused"
        else:
            kind, text = "stale", f"scores\ndraft {i + 1}:\nunused"
        edge = COLORS["baseline"] if kind == "stale" else COLORS[kind]
        arrow(ax, (i, y_row + 0.42), (i, y_out - 0.52), color=edge)
        ink = COLORS["baseline"] if kind == "stale" else INK
        box(ax, i, y_out, text, TINT[kind], edge, h=1.0, size=8.5, dashed=kind == "stale", ink=ink)
    emitted = n_accepted + 1
    ax.text(
        k / 2,
        4.75,
        f"row i scores draft i + 1: {n_accepted} of {k} drafts accepted, "
        f"{emitted} token{'s' if emitted > 1 else ''} emitted by this pass",
        ha="center",
        va="center",
        fontsize=10,
    )
    return fig


def causal_mask_diagram(tokens: Sequence[str], n_cached: int, first_position: int = 0) -> Figure:
    """The causal mask of one cached verification pass: which keys each new query sees.

    ``tokens`` are the positions from ``first_position`` on: the first ``n_cached`` are
    in the cache from earlier passes, the rest (the pending token and the drafts) are
    this pass's inputs, one query row each. Each row sees every cached key and the new
    keys up to its own position, never a later one: that is what makes row i depend only
    on the context and drafts 1..i, so one pass scores every draft as k separate decoding
    steps would. It is also why a rolled-back (stale) entry past the cache's length is
    harmless: no query is ever allowed to look past itself.
    """
    check_tokens("tokens", tokens, 2)
    check_count("n_cached", n_cached, 0, len(tokens) - 1)
    check_count("first_position", first_position, 0, 10**6)
    n, new = len(tokens), len(tokens) - n_cached
    fig, ax = canvas(1.3 + 0.42 * new + 1.2, (-3.2, n + 0.3), (-new - 2.05, 1.6))
    cell = 0.92
    for r in range(new):
        query = n_cached + r
        y = -r - 0.5
        label = f"{'pending' if r == 0 else f'draft {r}'}: {show_token(tokens[query], 8)}"
        ax.text(-0.2, y, label, ha="right", va="center", fontsize=9)
        for c in range(n):
            x = c + 0.5
            if c <= query:
                cached = c < n_cached
                face = TINT["context"] if cached else TINT["draft"]
                edge = COLORS["baseline"] if cached else COLORS["draft"]
                box(ax, x, y, "", face, edge, w=cell, h=cell * 0.9)
            else:
                box(ax, x, y, "×", TINT["masked"], "#bdbdbd", w=cell, h=cell * 0.9, size=9)
                ax.texts[-1].set_color("#9a9a9a")
    for c, token in enumerate(tokens):
        ax.text(
            c + 0.5,
            0.25,
            show_token(token, 8),
            ha="center",
            va="bottom",
            fontsize=8.5,
            rotation=45 if n > 10 else 0,
        )
        ax.text(
            c + 0.5,
            -new - 0.25,
            str(first_position + c),
            ha="center",
            va="top",
            fontsize=8,
            color=COLORS["baseline"],
        )
    ax.text(-0.2, -new - 0.25, "position", ha="right", va="top", fontsize=8.5)
    ax.text(-0.2, 0.25, "key:", ha="right", va="bottom", fontsize=9, fontweight="bold")
    ax.text(
        -3.1,
        1.3,
        "query (one row per input of this pass)",
        ha="left",
        va="center",
        fontsize=9,
        fontweight="bold",
    )
    if n_cached:
        ax.plot([n_cached, n_cached], [0.2, -new - 0.05], color=INK, lw=1.8)
    spans = [
        (0, n_cached, "keys in the cache (earlier passes)", COLORS["baseline"]),
        (n_cached, n, "keys this pass writes", COLORS["draft"]),
    ]
    for start, end, text, colour in spans:
        if end > start:
            ax.plot([start + 0.05, end - 0.05], [-new - 0.95] * 2, color=colour, lw=3)
            ax.text((start + end) / 2, -new - 1.15, text, ha="center", va="top", fontsize=9)
    ax.text(
        n / 2 - 1.6,
        -new - 1.75,
        "filled: attended    ×: masked (a later position)",
        ha="center",
        va="center",
        fontsize=9,
        color=COLORS["baseline"],
    )
    return fig


def cache_crop_diagram(
    context: Sequence[str],
    pending: str,
    drafts: Sequence[str],
    n_accepted: int,
    next_pending: str,
    first_position: int = 0,
) -> Figure:
    """The KV cache before a round, after its verification pass, and after the crop.

    ``context`` are the last cached tokens (the first at ``first_position``), ``pending``
    the context's last token, which the cache does not hold yet; the pass writes it and
    the ``drafts``, and ``n_accepted`` of them survive. ``crop`` lowers the length to keep
    the pending token and the accepted drafts; the rejected entries stay in memory past the
    length, *stale*: masked, and overwritten by the next pass, which starts with
    ``next_pending`` (the target's correction, or its bonus token if every draft was
    accepted) at the first stale position. Nothing is erased, which is why rollback costs
    one integer; and why a cache that forgets to lower it attends to text never emitted.
    """
    check_tokens("context", context, 1, MAX_TOKENS - 3)
    check_tokens("drafts", drafts, 1, MAX_TOKENS - 3)
    for name, token in (("pending", pending), ("next_pending", next_pending)):
        if not isinstance(token, str):
            raise ValueError(f"{name} must be a token string, got {token!r:.80}")
    if len(context) + len(drafts) + 2 > MAX_TOKENS:
        raise ValueError(
            f"context and drafts must hold at most {MAX_TOKENS - 2} tokens together, "
            f"got {len(context) + len(drafts)}: pass only the last few context tokens"
        )
    m = len(drafts)
    check_count("n_accepted", n_accepted, 0, m)
    check_count("first_position", first_position, 0, 10**6)
    c = len(context)
    n = c + 1 + m + 1  # cells: context, pending, drafts, one spare
    before, written, after = c, c + 1 + m, c + 1 + n_accepted
    limit, size = (7, 8.5) if n <= 12 else (6, 8.0)

    def show(token: str) -> str:
        return show_token(token, limit)

    elided = first_position > 0
    left = -1.0 if elided else -0.2
    fig, ax = canvas(6.4, (left, n + 0.1), (-9.9, 1.75))
    panels = [
        (0.0, "1. before the round", before),
        (-3.5, "2. after the verification pass", written),
        (-7.0, f"3. after crop({first_position + after})", after),
    ]
    for y, title, length in panels:
        ax.text(left, y + 1.45, title, ha="left", va="center", fontsize=10, fontweight="bold")
        if elided:
            ax.text(-0.5, y, "…", ha="center", va="center", fontsize=12)
        for i in range(n):
            x = i + 0.5
            if i < c:
                box(ax, x, y, show(context[i]), TINT["context"], COLORS["baseline"], size=size)
            elif i >= length:
                box(ax, x, y, "", "#ffffff", "#c8c8c8")
            elif i == c:
                box(ax, x, y, show(pending), TINT["context"], COLORS["baseline"], size=size)
            else:
                kind = "accepted" if i - c - 1 < n_accepted else "rejected"
                box(ax, x, y, show(drafts[i - c - 1]), TINT[kind], COLORS[kind], size=size)
            ax.text(
                x,
                y - 0.47,
                str(first_position + i),
                ha="center",
                va="top",
                fontsize=7.5,
                color=COLORS["baseline"],
            )
        ax.plot([length, length], [y - 0.6, y + 0.6], color=INK, lw=3)
        ax.text(
            length + 0.08,
            y + 0.5,
            f"length {first_position + length}",
            ha="left",
            va="bottom",
            fontsize=8.5,
        )
    # panel 1: the pending token, outside the cache
    box(ax, c + 0.5, -1.3, show(pending), "#ffffff", COLORS["baseline"], dashed=True, size=size)
    ax.text(
        c + 1.05,
        -1.3,
        "pending: not in the cache;\nthe pass feeds it with the drafts",
        ha="left",
        va="center",
        fontsize=8.5,
    )
    # panel 2: what the pass wrote
    ax.text(
        c + 0.5 + (m + 1) / 2 - 0.5,
        -4.45,
        f"written by the pass: pending + drafts ({n_accepted} of {m} accepted)",
        ha="center",
        va="center",
        fontsize=8.5,
    )
    # panel 3: stale entries, still in memory, and the next pending token over the first;
    # notes go on whichever side of the new length has room for them
    y, room = -7.0, after <= n / 2
    for i in range(after, written):
        box(
            ax,
            i + 0.5,
            y,
            show(drafts[i - c - 1]),
            "#ffffff",
            "#d9a184",
            hatch="///",
            ink=COLORS["baseline"],
            size=size,
        )
    if written > after:
        ax.text(
            after + (1.0 if room else 0.0),
            y - 1.15,
            "stale: still in memory past the length,\nmasked, overwritten by the next pass",
            ha="left" if room else "right",
            va="center",
            fontsize=8.5,
        )
        arrow(ax, (written, y + 1.05), (after + 0.05, y + 1.05), color=COLORS["rejected"])
        ax.text(
            (after + written) / 2,
            y + 1.1,
            "crop",
            ha="center",
            va="bottom",
            fontsize=8.5,
            color=COLORS["rejected"],
        )
    role, colour = ("correction", "target") if n_accepted < m else ("bonus", "highlight")
    box(
        ax,
        after + 0.5,
        y - 2.2,
        show(next_pending),
        "#ffffff",
        COLORS[colour],
        dashed=True,
        size=size,
    )
    arrow(ax, (after + 0.5, y - 1.78), (after + 0.5, y - 0.75), linestyle="--")
    ax.text(
        after + (1.05 if room else -0.05),
        y - 2.2,
        f"new pending ({role}): not in the cache;\nthe next pass writes it here",
        ha="left" if room else "right",
        va="center",
        fontsize=8.5,
    )
    return fig
