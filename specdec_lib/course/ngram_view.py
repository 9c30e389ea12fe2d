"""See what prompt lookup sees: the suffix, its earlier match, and the tokens it proposes.

:class:`~specdec_lib.engine.drafters.NgramDrafter` takes the last n tokens of the
context (the *suffix*), finds the latest earlier place where they occurred (the
*match*), and proposes the up to k tokens that followed the match. This module
draws those three spans over the context, so a reader can check the drafter's
choice by eye:

* :func:`highlight_match` returns a :class:`MatchView`, which displays as HTML
  in a notebook and on the website, and as bracketed text elsewhere. It asks
  :meth:`NgramDrafter.find_match` and :meth:`NgramDrafter.propose` for the
  answer, so the picture cannot disagree with the drafter that runs.
* :func:`ngram_explorer` wraps it in a menu of texts and a slider for how much of
  a text the drafter has seen so far. It draws every state when the cell runs and
  stores them all in the widget; the controls only choose which one is shown,
  linked in the browser, so the panel responds on the static website as it does
  in a running kernel. The course's other widgets are built the same way, and the
  tests read any of them as that website would.

Like :mod:`specdec_lib.course.rounds_view`, the HTML carries inline styles on an opaque
white card, so it reads the same under the site's light and dark themes, and
colour is never the only cue: the suffix is boxed, the match underlined, the
proposal bold, and every token has a tooltip naming its role and position.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specdec_lib.checks import check_int
from specdec_lib.course.plotting import COLORS
from specdec_lib.course.widgets import linked_stack
from specdec_lib.engine.drafters import NgramDrafter
from specdec_lib.text.tokenizer import Tokenizer

__all__ = ["MatchView", "highlight_match", "ngram_explorer"]

_STYLE = {
    "match": f"background:#f5e1ee;border-bottom:2px solid {COLORS['highlight']};",
    "proposal": f"background:#fdeccc;border-bottom:3px double {COLORS['draft']};font-weight:bold;",
    "suffix": f"background:#d7e8f6;outline:2px solid {COLORS['target']};outline-offset:-1px;",
}
_LABEL = {
    "suffix": "suffix: the last n tokens",
    "match": "match: their latest earlier occurrence",
    "proposal": "proposal: the tokens that followed the match",
}
_CARD = (
    "background:#ffffff;color:#1a1a1a;border:1px solid #c8c8c8;border-radius:6px;"
    "padding:0.6em 0.9em;margin:0.4em 0;font-family:system-ui,-apple-system,'Segoe UI',"
    "Roboto,sans-serif;font-size:0.92em;line-height:1.8;overflow-x:auto;"
)
_LEGEND = (
    "font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,'DejaVu Sans Mono',monospace;"
    "white-space:nowrap;display:inline-block;margin:0.1em 0.2em;padding:0 0.2em;color:#1a1a1a;"
)
_TEXT = (
    "font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,'DejaVu Sans Mono',monospace;"
    "white-space:pre-wrap;word-break:break-all;color:#1a1a1a;"
)


_KEY = "<strong>Key:</strong> " + " ".join(
    f'<span style="{_LEGEND}{_STYLE[role]}">{html.escape(label)}</span>'
    for role, label in _LABEL.items()
)


def _visible(text: str) -> str:
    return text.replace("\n", "↵").replace("\t", "⇥")


@dataclass(frozen=True)
class MatchView:
    """What :class:`NgramDrafter` does with one context, ready to display.

    ``match`` is ``(start, n)`` as returned by :meth:`NgramDrafter.find_match`
    (``None`` if no suffix of length ``min_n``..``max_n`` occurred before);
    ``proposal`` is what :meth:`NgramDrafter.propose` returns for ``k``.
    """

    context: list[int]
    k: int
    max_n: int
    min_n: int
    match: tuple[int, int] | None
    proposal: list[int]

    def roles(self) -> list[str | None]:
        """The role of each context position: ``"suffix"``, ``"proposal"``, ``"match"`` or None.

        Spans can overlap (in ``"abababab"`` the match runs into the suffix); the
        suffix wins over the proposal, and the proposal over the match.
        """
        roles: list[str | None] = [None] * len(self.context)
        if self.match is None:
            return roles
        start, n = self.match
        spans = (
            ("match", start, start + n),
            ("proposal", start + n, start + n + len(self.proposal)),
            ("suffix", len(self.context) - n, len(self.context)),
        )
        for role, lo, hi in spans:  # later spans overwrite earlier ones
            for i in range(lo, hi):
                roles[i] = role
        return roles

    def summary(self) -> str:
        tok = Tokenizer()
        head = f"k = {self.k}, n from {self.max_n} down to {self.min_n}: "
        if self.match is None:
            return head + "no suffix of those lengths occurred earlier, so nothing is proposed"
        start, n = self.match
        return (
            head + f"the last {n} tokens {_visible(tok.decode(self.context[-n:]))!r} occurred "
            f"at position {start}; proposing {len(self.proposal)} token(s) "
            f"{_visible(tok.decode(self.proposal))!r}"
        )

    def _runs(self) -> list[tuple[str | None, int, int]]:
        runs: list[tuple[str | None, int, int]] = []
        for i, role in enumerate(self.roles()):
            if runs and runs[-1][0] == role:
                runs[-1] = (role, runs[-1][1], i + 1)
            else:
                runs.append((role, i, i + 1))
        return runs

    def _repr_html_(self) -> str:
        return self.html()

    def html(self, key: bool = True) -> str:
        """The card the notebook shows; ``key=False`` leaves out the key to the three marks.

        The explorer stores one card per state and shows the key once above them.
        """
        tok = Tokenizer()
        parts = []
        for role, lo, hi in self._runs():
            text = html.escape(tok.decode(self.context[lo:hi]))
            if role is None:
                parts.append(text)
            else:
                title = html.escape(f"{_LABEL[role]} (positions {lo}..{hi - 1})")
                parts.append(f'<span title="{title}" style="{_STYLE[role]}">{text}</span>')
        return (
            f'<div class="specdec-ngram" style="{_CARD}">'
            + (f'<div style="margin-bottom:0.3em;">{_KEY}</div>' if key else "")
            + f'<div style="{_TEXT}margin:0.3em 0;">{"".join(parts)}</div>'
            f'<div style="color:#444444;">{html.escape(self.summary())}</div>'
            "</div>"
        )

    def __repr__(self) -> str:
        tok = Tokenizer()
        marks = {"suffix": ("[", "]"), "match": ("{", "}"), "proposal": ("<", ">")}
        text = ""
        for role, lo, hi in self._runs():
            piece = _visible(tok.decode(self.context[lo:hi]))
            if role is not None:
                piece = marks[role][0] + piece + marks[role][1]
            text += piece
        key = "key: {match} <proposal> [suffix]"
        return f"{key}\n{text}\n{self.summary()}"


def highlight_match(
    context: Sequence[int] | str, k: int = 4, max_n: int = 4, min_n: int = 1
) -> MatchView:
    """Show where :class:`NgramDrafter` finds its match in ``context`` and what it proposes.

    ``context`` is token ids or text (encoded with the course tokenizer).
    """
    ids = Tokenizer().encode(context) if isinstance(context, str) else [int(t) for t in context]
    drafter = NgramDrafter(max_n=max_n, min_n=min_n)
    proposal = drafter.propose(ids, k).tokens
    match = drafter.find_match(ids) if k > 0 else None
    return MatchView(ids, k, max_n, min_n, match, proposal)


def ngram_explorer(
    prompts: Mapping[str, str] | str,
    k: int = 4,
    max_n: int = 4,
    min_n: int = 1,
    rewind: int | None = None,
) -> Any:
    """An ipywidgets panel: pick a text, and slide how many of its tokens the drafter has seen.

    ``prompts`` maps a label to a text (or is one text). Cutting the text is how
    the context grows during decoding; the slider runs from ``rewind`` tokens
    before the end of each text (``None``: from its first token) to its end,
    where it starts. Every cut is drawn by :func:`highlight_match` now, in
    Python, and stored in an ``ipywidgets.Stack``; the menu's and the slider's
    ``index`` are ``jslink``-ed to the stacks' ``selected_index``. So the panel
    responds with no kernel (the static website shows the saved widget state) and
    the pictures are the library's own. Each state costs under 2 kB of widget
    state, so keep ``rewind`` to a few dozen tokens. Returns the ``ipywidgets.VBox``;
    display it as the last expression of a cell.
    """
    import ipywidgets as widgets

    texts = {"prompt": prompts} if isinstance(prompts, str) else dict(prompts)
    if not texts:
        raise ValueError("prompts must hold at least one text")
    check_int("k", k, 0)
    check_int("min_n", min_n)
    check_int("max_n", max_n, min_n)
    if rewind is not None:
        check_int("rewind", rewind, 0)
    # One layout and one style shared by every state: two models, not two a state.
    layout, style = widgets.Layout(), widgets.widget_string.HTMLStyle()
    panels = []
    for label, text in texts.items():
        ids = Tokenizer().encode(text)
        if not ids:
            raise ValueError(f"prompts[{label!r}] must not be empty")
        cuts = list(range(1 if rewind is None else max(1, len(ids) - rewind), len(ids) + 1))
        seen = widgets.SelectionSlider(
            options=[str(cut) for cut in cuts],
            index=len(cuts) - 1,
            description="tokens seen",
            style={"description_width": "initial"},
            layout=widgets.Layout(width="100%", max_width="640px"),
        )
        states = [
            widgets.HTML(
                highlight_match(ids[:cut], k, max_n, min_n).html(key=False),
                layout=layout,
                style=style,
            )
            for cut in cuts
        ]
        panels.append(widgets.VBox([seen, linked_stack(seen, states)]))
    key = widgets.HTML(f'<div class="specdec-ngram" style="{_CARD}">{_KEY}</div>')
    if len(panels) == 1:
        return widgets.VBox([panels[0], key])
    menu = widgets.Dropdown(
        options=list(texts),
        index=0,
        description="text",
        style={"description_width": "initial"},
        layout=widgets.Layout(width="auto", max_width="100%"),
    )
    return widgets.VBox([menu, linked_stack(menu, panels), key])
