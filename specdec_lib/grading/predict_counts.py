"""Chapter 13's exercise, predicting greedy prompt lookup's counts before the run, in one
module: the answer in the student's form, its slips (each the answer with one rule
changed), and the check.

``predict_counts(prompt, output, k) -> (target_passes, proposed, accepted)``: greedy
speculation writes ``output`` exactly, so each round drafts ``min(k, tokens left - 1)``
tokens from ``prompt + output[:done]``, keeps the prefix ``output[done:]`` starts with, and
writes it plus one token of the target's. The reference is the library's
:func:`~specdec_lib.analysis.greedy_replay.replay_greedy`. The slips are the ways such a replay
goes wrong: no target token at the end of a round, drafting from the whole output,
copying past the context, a draft not capped at the tokens left, a context without the
target's last token. The pass count alone cannot show a draft left uncapped (the last
round ends the run either way), which is why the counts of proposed and accepted drafts
are part of the answer.

Inputs are text whose characters are the token ids, so a failing case reads as text:
edge cases built so that each slip and the truth part ways, then random strings over
alphabets of two to four letters (repeats and partial matches everywhere), then workload
text, its continuation cut at random lengths (budgets ending mid-round), each at k from
1 to 8.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Sequence
from typing import Any

from specdec_lib.analysis.greedy_replay import common_prefix, replay_greedy
from specdec_lib.engine.drafters import NgramDrafter
from specdec_lib.text.language import WORKLOADS, workload_examples

from .answers import ExactCheck
from .mistakes import register
from .report import Diagnosis as D
from .sandbox import Abort, as_int, call_student, forbidden

# --- the answer, and its slips ---------------------------------------------------------


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


#: The slips: ``(label, function, diagnosis)``, registered below.
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

register("check_predict_counts", counts_reference, *REPLAY_SLIPS)


# --- the check -------------------------------------------------------------------------

# (prompt, output, k): a quote, loops, a partial match, an edit, budgets of one and two
# tokens; on them alone every slip parts from the truth and from every other slip.
_EDGE = [
    ("Text: the cat sat. Quote:", " the cat sat.", 4),
    ("abcabc", "abcabcabca", 3),
    ("xyzxyq", "xyzxyqxyz", 2),
    ("one two. ", "one two. one", 7),
    ("red fox ran. ", "red box ran. red", 4),
    ("abab", "ab", 1),
    ("hello", "h", 5),
    ("aaaa", "aaaaaaa", 1),
]


@functools.cache
def _workload_texts() -> tuple[tuple[str, str], ...]:
    """(prompt, reference) of three examples per workload, made once: the seed cuts them."""
    return tuple((e.prompt, e.reference) for w in WORKLOADS for e in workload_examples(w, 3, 200))


def _cases(seed: int) -> list[tuple[str, str, int]]:
    """The edge cases, 32 random strings over tiny alphabets, 12 cut workload texts."""
    rng, cases = random.Random(f"replay/{seed}"), list(_EDGE)
    for _ in range(32):
        letters = "abcd"[: rng.randint(2, 4)]
        text = "".join(rng.choice(letters) for _ in range(rng.randint(6, 40)))
        cut = rng.randint(1, len(text) - 2)
        cases.append((text[:cut], text[cut:], rng.randint(1, 8)))
    for prompt, reference in _workload_texts():
        cut = (prompt[-rng.randint(40, 120) :], reference[: rng.randint(1, 60)])
        cases.append((*cut, rng.randint(1, 8)))
    return cases


def _answer(fn: Any, case: tuple[str, str, int]) -> tuple[int, int, int]:
    prompt, output, k = case
    got = call_student(fn, "predict_counts", list(prompt.encode()), list(output.encode()), k)
    if not isinstance(got, tuple | list) or len(got) != 3:
        what = f"Return three ints (target_passes, proposed, accepted); got {got!r:.80}."
        raise Abort(D.WRONG_TYPE, what)
    names = ("target_passes", "proposed", "accepted")
    return tuple(as_int(v, name) for v, name in zip(got, names, strict=True))  # type: ignore[return-value]


check_predict_counts = ExactCheck(
    "check_predict_counts",
    _cases,
    _answer,
    lambda c: f"prompt = {c[0]!r}, output = {c[1]!r}, k = {c[2]}",
    """Check ``predict_counts(prompt, output, k) -> (target_passes, proposed, accepted)``
    against the library's replay of greedy prompt lookup (``NgramDrafter()``) on 52 cases:
    quotes, loops, partial matches, random strings, workload text cut anywhere.""",
    forbidden(replay_greedy),
)
