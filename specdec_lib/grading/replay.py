"""The check of chapter 13's exercise: greedy prompt lookup's target passes, proposed and
accepted drafts, predicted from the prompt and the output before any model runs.

Inputs are text whose characters are the token ids, so a failing case reads as text:
edge cases built so that each known slip (:data:`~.replay_slips.REPLAY_SLIPS`) and the
truth part ways, then random strings over alphabets of two to four letters (repeats and
partial matches everywhere), then workload text, its continuation cut at random lengths
(budgets ending mid-round), each at k from 1 to 8.
"""

from __future__ import annotations

import functools
import random
from typing import Any

from specdec_lib.analysis.replay import replay_greedy
from specdec_lib.text.language import WORKLOADS, workload_examples

from .answers import ExactCheck
from .report import Diagnosis
from .sandbox import Abort, as_int, call_student, forbidden

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
        raise Abort(Diagnosis.WRONG_TYPE, what)
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
