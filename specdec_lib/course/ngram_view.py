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
* :func:`ngram_explorer` wraps it in sliders (ipywidgets) for n, k and how much
  of a prompt the drafter has seen so far. The widget needs a running kernel to
  respond; chapters show a static :class:`MatchView` beside it for the website.

Like :mod:`specdec_lib.course.rounds_view`, the HTML carries inline styles on an opaque
white card, so it reads the same under the site's light and dark themes, and
colour is never the only cue: the suffix is boxed, the match underlined, the
proposal bold, and every token has a tooltip naming its role and position.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from specdec_lib.course.plotting import COLORS
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
        tok = Tokenizer()
        parts = []
        for role, lo, hi in self._runs():
            text = html.escape(tok.decode(self.context[lo:hi]))
            if role is None:
                parts.append(text)
            else:
                title = html.escape(f"{_LABEL[role]} (positions {lo}..{hi - 1})")
                parts.append(f'<span title="{title}" style="{_STYLE[role]}">{text}</span>')
        legend = " ".join(
            f'<span style="{_LEGEND}{_STYLE[role]}">{html.escape(label)}</span>'
            for role, label in _LABEL.items()
        )
        return (
            f'<div class="specdec-ngram" style="{_CARD}">'
            f'<div style="margin-bottom:0.3em;"><strong>Key:</strong> {legend}</div>'
            f'<div style="{_TEXT}margin:0.3em 0;">{"".join(parts)}</div>'
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
    cut: int | None = None,
):
    """An ipywidgets panel: pick a prompt, n, k and how much of it the drafter has seen.

    ``prompts`` maps a label to a text (or is one text). The "tokens seen"
    slider cuts the text, which is how the context grows during decoding; the
    panel redraws :func:`highlight_match` for the cut text. Returns the
    ``ipywidgets.VBox``; display it as the last expression of a cell.
    """
    import ipywidgets as widgets

    texts = {"prompt": prompts} if isinstance(prompts, str) else dict(prompts)
    if not texts:
        raise ValueError("prompts must hold at least one text")
    first = next(iter(texts.values()))
    length = len(Tokenizer().encode(first))
    style = {"description_width": "initial"}
    choose = widgets.Dropdown(options=list(texts), description="text", style=style)
    seen = widgets.IntSlider(
        value=length if cut is None else cut,
        min=1,
        max=length,
        description="tokens seen",
        style=style,
        continuous_update=False,
    )
    n_hi = widgets.IntSlider(value=max_n, min=1, max=16, description="max n", style=style)
    n_lo = widgets.IntSlider(value=min_n, min=1, max=16, description="min n", style=style)
    k_slider = widgets.IntSlider(value=k, min=0, max=16, description="k", style=style)
    out = widgets.HTML()

    def redraw(_change=None) -> None:
        if n_lo.value > n_hi.value:
            n_lo.value = n_hi.value  # triggers another redraw with a valid pair
            return
        ids = Tokenizer().encode(texts[choose.value])[: seen.value]
        out.value = highlight_match(ids, k_slider.value, n_hi.value, n_lo.value)._repr_html_()

    def new_text(_change) -> None:
        seen.max = len(Tokenizer().encode(texts[choose.value]))
        seen.value = seen.max
        redraw()

    choose.observe(new_text, names="value")
    for control in (seen, n_hi, n_lo, k_slider):
        control.observe(redraw, names="value")
    redraw()
    controls = [seen, widgets.HBox([n_hi, n_lo, k_slider])]
    if len(texts) > 1:
        controls.insert(0, choose)
    return widgets.VBox([*controls, out])
