"""Chapter 13's exercise, predicting greedy prompt lookup's counts before the run: the answer
in the student's form, and its slips, each the answer with one rule changed.

``predict_counts(prompt, output, k) -> (target_passes, proposed, accepted)``: greedy
speculation writes ``output`` exactly, so each round drafts ``min(k, tokens left - 1)``
tokens from ``prompt + output[:done]``, keeps the prefix ``output[done:]`` starts with, and
writes it plus one token of the target's. The reference is the library's
:func:`~specdec_lib.analysis.replay.replay_greedy`. The pass count alone cannot show a
draft left uncapped (the last round ends the run either way), which is why the counts of
proposed and accepted drafts are part of the answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from specdec_lib.analysis.replay import common_prefix, replay_greedy
from specdec_lib.engine.drafters import NgramDrafter

from .report import Diagnosis as D


def counts_reference(prompt: Sequence[int], output: Sequence[int], k: int) -> tuple[int, int, int]:
    """The library's answer: the replay's target passes, proposed and accepted drafts."""
    stats = replay_greedy(prompt, output, k)
    return stats.target_passes, stats.proposed, stats.accepted


def _counts_as(
    advance: Callable[[int], int] = lambda accepted: accepted + 1,
    lag: int = 0,
    cap: bool = True,
    draft: Callable = lambda drafter, context, text, m: (
        drafter.draft(context, m, None, None).tokens
    ),
) -> Callable:
    """The rounds counted with one rule changed: a round writes ``advance(accepted)`` tokens;
    the next context stops ``lag`` tokens short of what was written; the draft is capped
    at the tokens left (or only at k); ``draft(drafter, context, text, m)`` proposes,
    where ``text`` is the whole ``prompt + output``."""

    def predict_counts(prompt, output, k):
        prompt, output, drafter = list(prompt), list(output), NgramDrafter()
        done = seen = passes = proposed = accepted = 0
        while done < len(output):
            m = min(k, len(output) - done - 1) if cap else k
            tokens = draft(drafter, prompt + output[:seen], prompt + output, m)
            n = common_prefix(tokens, output[done:])
            passes, proposed, accepted = passes + 1, proposed + len(tokens), accepted + n
            done += advance(n)
            seen = max(done - lag, 0)
        return passes, proposed, accepted

    return predict_counts


def _copies_past_the_context(drafter, context, text, m):
    """The match found in the context, but the copy read from the whole text, so near the
    context's end it runs on into tokens not yet written."""
    match = drafter.find_match(context) if m else None
    return [] if match is None else text[sum(match) : sum(match) + m]


#: The slips, as ``(label, function, diagnosis)`` rows of :data:`~.mistakes.MISTAKES`.
REPLAY_SLIPS = (
    ("no target token", _counts_as(advance=lambda n: max(n, 1)), D.NO_TARGET_TOKEN),
    (
        "drafts from the whole output",
        _counts_as(draft=lambda d, context, text, m: d.draft(text, m, None, None).tokens),
        D.SEES_THE_FUTURE,
    ),
    ("copies past the context", _counts_as(draft=_copies_past_the_context), D.SEES_THE_FUTURE),
    ("draft not capped", _counts_as(cap=False), D.DRAFTS_PAST_THE_END),
    ("context without the target's token", _counts_as(lag=1), D.LAGGING_CONTEXT),
)
