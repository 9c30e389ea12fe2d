"""Chapter 3's exercise, prompt lookup's proposal, in one module: the answer in the
student's form, its slips, and the check.

``propose(context, k, max_n=8, min_n=3) -> list[int]``: the longest suffix of the context,
from ``max_n`` tokens down to ``min_n``, that occurred earlier in it, and the (at most
``k``) tokens that followed its latest earlier occurrence. Each slip is the engine's
drafter with one rule of that search changed, the slips a first n-gram search makes: the
earliest occurrence instead of the latest, short suffixes tried first, the suffix matched
with itself (nothing follows it: nothing proposed), the copy started one token early (the
match's own last token), more than ``k`` tokens, ``min_n`` or ``max_n`` ignored. The cases
are edge cases where they show, random contexts over tiny alphabets (repeats and partial
matches everywhere) and copy-workload text, as ASCII codes, so a failing case reads as
text.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from specdec_lib.engine.drafters import NgramDrafter
from specdec_lib.engine.tree_decode import NgramTreeDrafter
from specdec_lib.text.language import workload_examples

from .answers import ExactCheck
from .mistakes import register
from .report import Diagnosis as D
from .sandbox import as_tokens, call_student, forbidden

# --- the answer, and its slips ---------------------------------------------------------


def _drafter(context: Sequence[int], max_n: int, min_n: int) -> NgramDrafter:
    """The engine's drafter, over a vocabulary just large enough for ``context``."""
    return NgramDrafter(max_n, min_n, vocab_size=max(context, default=0) + 2)


def _after(context: Sequence[int], start: int, k: int) -> list[int]:
    return [int(t) for t in context[start : start + k]]


def _ngram_earliest_match(context, k, max_n=8, min_n=3):
    """The engine finds the suffix length n; the earliest occurrence is its latest one in
    the reversed context (last token dropped), behind a separator no window matches."""
    match = _drafter(context, max_n, min_n).find_match(context)
    if match is None or k == 0:
        return []
    before, n = list(context[:-1]), match[1]
    view = before[::-1] + [max(context) + 1] + list(context[-n:])[::-1]
    return _after(context, len(before) - _drafter(view, n, n).find_match(view)[0], k)


def _ngram_copies_the_match(context, k, max_n=8, min_n=3):
    match = _drafter(context, max_n, min_n).find_match(context) if k else None
    return [] if match is None else _after(context, match[0] + match[1] - 1, k)


def _ngram(hi=lambda c, hi, lo: hi, lo=lambda lo: lo, k=lambda c, k: k):
    """The engine's drafter with another max_n, min_n or k (functions of the inputs)."""
    return lambda c, k_, max_n=8, min_n=3: _after(
        _drafter(c, hi(c, max_n, min_n), lo(min_n)).propose(c, k(c, k_)).tokens, 0, len(c)
    )


register(
    "check_ngram_drafter",
    _ngram(),  # correct: longest suffix first, its latest earlier occurrence
    ("earliest match", _ngram_earliest_match, D.EARLIEST_MATCH),
    ("shortest first", _ngram(hi=lambda c, hi, lo: lo), D.SHORTEST_FIRST),
    ("matches itself", lambda c, k, hi=8, lo=3: _after(c, len(c), k), D.NEVER_PROPOSES),
    ("copies the match", _ngram_copies_the_match, D.COPIES_THE_MATCH),
    ("ignores k", _ngram(k=lambda c, k: len(c)), D.IGNORES_K),
    ("ignores min_n", _ngram(lo=lambda lo: 1), D.IGNORES_MIN_N),
    ("ignores max_n", _ngram(hi=lambda c, hi, lo: max(len(c), lo)), D.IGNORES_MAX_N),
)


# --- the check -------------------------------------------------------------------------


def _ngram_cases(seed: int) -> list[tuple[tuple[int, ...], int, int, int]]:
    """(context, k, max_n, min_n): edge cases, random contexts over tiny alphabets, copy text."""
    edge = "abcdefgh 4 8 3|ab 3 8 3|xyzabcQRSTabc 3 8 3|abcdabc 8 8 3|1abcd2_9bcd3_zabcd 4 8 3|"
    edge += "abcX_abcY_abcZ_abc 2 8 3|abcX_abcY_abcZ_abc 1 8 3|abcX_abcY_abcZ_abc 0 8 3|"
    edge += "abXYZab 4 8 3|abcdef1xcdef2abcdef 4 4 2|aaaaaaaaaaaa 4 8 3|abababab 3 8 3|"
    edge += "the_cat_sat._the_cat_sat._the_c 6 8 3|zqabcdefghijXabcdefghij 5 8 3"
    cases = []
    for row in edge.split("|"):
        text, *numbers = row.split()
        cases.append((tuple(text.replace("_", " ").encode("ascii")), *map(int, numbers)))
    rng = random.Random(f"ngram/{seed}")
    for _ in range(60):
        context = tuple(rng.randrange(rng.choice([2, 3, 4])) for _ in range(rng.randint(4, 40)))
        cases.append((context, rng.randint(1, 8), *rng.choice([(8, 3), (4, 2), (5, 5), (3, 1)])))
    for ex in workload_examples("copy", 4, seed=100 + seed):
        for _ in range(6):
            text = (ex.prompt + ex.reference)[: len(ex.prompt) + rng.randint(0, len(ex.reference))]
            cases.append((tuple(text.encode("ascii")), rng.randint(1, 8), 8, 3))
    return cases


def _printable(tokens) -> bool:
    return bool(tokens) and all(32 <= t < 127 or t == 10 for t in tokens)


def _context(tokens: tuple[int, ...]) -> str:
    """A context as its ids, or, when every id is a printable ASCII code, as that text."""
    if not _printable(tokens):
        return str(list(tokens))
    return f"{bytes(tokens).decode('ascii')!r} (the ASCII codes of its {len(tokens)} characters)"


def _proposal(tokens: Any) -> str:
    """A proposal as its ids, and as text when they are printable ASCII codes."""
    text = f" = {bytes(tokens).decode('ascii')!r}" if _printable(tokens) else ""
    return f"{list(tokens)!r}{text}"


check_ngram_drafter = ExactCheck(
    "check_ngram_drafter",
    lambda seed: _ngram_cases(seed),
    lambda fn, c: as_tokens(call_student(fn, "propose", list(c[0]), *c[1:]), "the proposal"),
    lambda c: f"context = {_context(c[0])}, k = {c[1]}, max_n = {c[2]}, min_n = {c[3]}",
    """Check ``propose(context, k, max_n=8, min_n=3) -> list[int]`` against prompt lookup on
    about 100 contexts: edge cases, random contexts over tiny alphabets, copy-workload text
    (the last two kinds as lists of ASCII codes, so that a failing case reads as text).""",
    forbidden(
        NgramDrafter.find_match,
        NgramDrafter.draft,
        NgramTreeDrafter.continuations,
        NgramTreeDrafter.fill,
    ),
    _proposal,
)
