"""Show speculative decoding round by round, as HTML a reader can scan.

Each round of speculation drafts up to k tokens, keeps the prefix the target
agrees with, and adds exactly one token of the target's own: the correction at
the first mismatch, or a bonus token when every draft was accepted.
:func:`render_rounds` turns the per-round log that
:class:`specdec_lib.SpeculationStats` records into a table with those four
kinds of token marked, plus the finished text.

The HTML carries its own inline styles on an opaque white card, because a
notebook output on the website has no stylesheet of its own and must read the
same under the light and the dark theme. Colour is never the only cue:
rejected drafts are struck through, the target's tokens are underlined, and
every token has a tooltip with its id.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from specdec_lib.course.plotting import COLORS

__all__ = ["RoundsView", "render_rounds"]


class _Decoder(Protocol):
    def decode(self, token_ids: Sequence[int]) -> str: ...


class _Round(Protocol):
    proposed: list[int]
    n_accepted: int
    emitted: list[int]


# (background, border or ink) per kind of token; text is always dark ink on a light tint.
_STYLE = {
    "accepted": f"background:#d9f2e9;border-bottom:2px solid {COLORS['accepted']};",
    "rejected": (
        "background:#fbe3d6;color:#8c3500;text-decoration:line-through;"
        f"text-decoration-color:{COLORS['rejected']};text-decoration-thickness:2px;"
    ),
    "correction": (
        f"background:#d7e8f6;border-bottom:3px solid {COLORS['target']};"
        "text-decoration:underline;font-weight:bold;"
    ),
    "bonus": (
        f"background:#f5e1ee;border-bottom:3px double {COLORS['highlight']};"
        "text-decoration:underline;font-weight:bold;"
    ),
    "plain": (
        f"background:#e9e9e9;border-bottom:3px dotted {COLORS['baseline']};"
        "text-decoration:underline;"
    ),
}
_LABEL = {
    "accepted": "accepted draft",
    "rejected": "rejected draft",
    "correction": "target's correction",
    "bonus": "target's bonus token",
    "plain": "target's token, nothing drafted",
}
_CARD = (
    "background:#ffffff;color:#1a1a1a;border:1px solid #c8c8c8;border-radius:6px;"
    "padding:0.6em 0.9em;margin:0.4em 0;font-family:system-ui,-apple-system,'Segoe UI',"
    "Roboto,sans-serif;font-size:0.92em;line-height:1.9;overflow-x:auto;"
)
_TOKEN = (
    "font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,'DejaVu Sans Mono',monospace;"
    "white-space:pre-wrap;padding:0.05em 0.1em;border-radius:2px;color:#1a1a1a;"
)
_CELL = "padding:0.15em 0.6em;border-bottom:1px solid #e4e4e4;text-align:left;color:#1a1a1a;"


@dataclass(frozen=True)
class _RoundView:
    """One round split into what a reader needs to see."""

    index: int
    accepted: list[int]
    rejected: list[int]
    target_token: list[int]  # zero or one token: empty only if max_tokens cut the round short
    kind: str  # "correction", "bonus" (all drafts accepted) or "plain" (nothing drafted)
    n_proposed: int


def _split(index: int, record: _Round) -> _RoundView:
    proposed = list(record.proposed)
    n_acc = int(record.n_accepted)
    emitted = list(record.emitted)
    if not 0 <= n_acc <= len(proposed):
        raise ValueError(f"round {index}: n_accepted={n_acc} outside [0, {len(proposed)}]")
    if emitted[:n_acc] != proposed[: len(emitted[:n_acc])]:
        raise ValueError(f"round {index}: emitted tokens do not start with the accepted drafts")
    if not proposed:
        kind = "plain"
    elif n_acc == len(proposed):
        kind = "bonus"
    else:
        kind = "correction"
    return _RoundView(
        index=index,
        accepted=emitted[:n_acc],
        rejected=proposed[n_acc:],
        target_token=emitted[n_acc : n_acc + 1],
        kind=kind,
        n_proposed=len(proposed),
    )


def _visible(text: str) -> str:
    """Make line breaks and tabs visible inside a one-line token run."""
    return text.replace("\n", "↵").replace("\t", "⇥")


def _styled(kind: str, text: str, title: str) -> str:
    return (
        f'<span title="{html.escape(title)}" style="{_TOKEN}{_STYLE[kind]}">'
        f"{html.escape(_visible(text))}</span>"
    )


def _span(kind: str, ids: Sequence[int], tokenizer: _Decoder) -> str:
    if not ids:
        return ""
    return _styled(kind, tokenizer.decode(list(ids)), f"{_LABEL[kind]}: token ids {list(ids)}")


@dataclass(frozen=True)
class RoundsView:
    """Rich display of a speculation log: HTML in notebooks and on the site, text elsewhere."""

    rounds: list[_RoundView]
    tokenizer: _Decoder
    max_rounds: int | None = None

    @property
    def n_emitted(self) -> int:
        return sum(len(r.accepted) + len(r.target_token) for r in self.rounds)

    def _shown(self) -> list[_RoundView]:
        return self.rounds if self.max_rounds is None else self.rounds[: self.max_rounds]

    def _summary(self) -> str:
        n = len(self.rounds)
        per = self.n_emitted / n if n else 0.0
        return (
            f"{n} rounds emitted {self.n_emitted} tokens: "
            f"{per:.2f} tokens per round (one target pass each)"
        )

    def _repr_html_(self) -> str:
        legend = " ".join(_styled(kind, label, label) for kind, label in _LABEL.items())
        head = "".join(
            f'<th style="{_CELL}font-weight:600;">{h}</th>'
            for h in ("round", "drafted", "accepted", "what happened")
        )
        rows = []
        for r in self._shown():
            target = _span(r.kind, r.target_token, self.tokenizer)
            cells = (
                str(r.index),
                str(r.n_proposed),
                str(len(r.accepted)),
                _span("accepted", r.accepted, self.tokenizer)
                + _span("rejected", r.rejected, self.tokenizer)
                + target,
            )
            rows.append("<tr>" + "".join(f'<td style="{_CELL}">{c}</td>' for c in cells) + "</tr>")
        hidden = len(self.rounds) - len(self._shown())
        if hidden:
            rows.append(
                f'<tr><td colspan="4" style="{_CELL}font-style:italic;">'
                f"… {hidden} more rounds not shown</td></tr>"
            )
        text = "".join(
            _span("accepted", r.accepted, self.tokenizer)
            + _span(r.kind, r.target_token, self.tokenizer)
            for r in self.rounds
        )
        return (
            f'<div class="specdec-rounds" style="{_CARD}">'
            f'<div style="margin-bottom:0.3em;"><strong>Key:</strong> {legend}</div>'
            f'<table style="border-collapse:collapse;margin:0.3em 0;background:#ffffff;">'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
            f'<div style="margin-top:0.4em;"><strong>Output</strong> '
            f"(drafted tokens the target accepted, and the target's own tokens):</div>"
            f'<div style="margin:0.2em 0;">{text}</div>'
            f'<div style="margin-top:0.3em;color:#444444;">{html.escape(self._summary())}</div>'
            "</div>"
        )

    def __repr__(self) -> str:
        lines = [
            "key: [accepted] ~rejected~ <correction> <+bonus> <=target's token, nothing drafted>",
        ]
        for r in self._shown():
            text = ""
            if r.accepted:
                text += f"[{_visible(self.tokenizer.decode(r.accepted))}]"
            if r.rejected:
                text += f"~{_visible(self.tokenizer.decode(r.rejected))}~"
            if r.target_token:
                mark = {"bonus": "+", "plain": "="}.get(r.kind, "")
                text += f"<{mark}{_visible(self.tokenizer.decode(r.target_token))}>"
            lines.append(
                f"round {r.index:>3}: drafted {r.n_proposed}, accepted {len(r.accepted)}  {text}"
            )
        hidden = len(self.rounds) - len(self._shown())
        if hidden:
            lines.append(f"... {hidden} more rounds not shown")
        lines.append(self._summary())
        return "\n".join(lines)


def render_rounds(
    log: Iterable[_Round], tokenizer: _Decoder, *, max_rounds: int | None = None
) -> RoundsView:
    """Display a speculation log round by round.

    ``log`` is ``SpeculationStats().log`` after a run: records with
    ``proposed``, ``n_accepted`` and ``emitted``. Make it the last expression
    of a cell to see it; ``max_rounds`` shortens long runs in the table (the
    output text below it is always complete).
    """
    if max_rounds is not None and max_rounds < 1:
        raise ValueError(f"max_rounds must be None or at least 1, got {max_rounds}")
    rounds = [_split(i, record) for i, record in enumerate(log, start=1)]
    return RoundsView(rounds=rounds, tokenizer=tokenizer, max_rounds=max_rounds)
