"""Chapter 8's exercise on the two caches of a draft-model run, in the student's form:
``expected_cache_lengths(n_prompt, log) -> [(target, draft), ...]``, one pair per round.

``target`` is the target's cache length after the round (the context but its pending
token). ``draft`` is what the draft model keeps of its own cache once the round is over:
the longest prefix of what it cached that the new context shares, which its next call
crops to. A round that drafts m tokens feeds the first m - 1 of them into the draft's
cache (the last is never fed), so it keeps the context the round started from and
min(n, m - 1) of the drafts; a round that drafts nothing leaves the draft's cache alone.
Each slip below changes one of these.
"""

from __future__ import annotations

from collections.abc import Callable

from .report import Diagnosis as D


def _cache_pairs(
    drafts_kept: Callable[[int, int], int],
    target_grows: Callable = lambda r: len(r.emitted),
    pending: int = -1,
    empty_rounds_move: bool = False,
) -> Callable:
    """The lengths if the draft keeps ``drafts_kept(m, n)`` drafts of a round that drafted
    m and had n accepted, and the target's context grows by ``target_grows(record)``."""

    def expected_cache_lengths(n_prompt, log):
        pairs, context, target, kept = [], n_prompt, n_prompt, 0
        for r in log:
            m, n = len(r.proposed), r.n_accepted
            if m or empty_rounds_move:
                kept = context + drafts_kept(m, n)
            context += len(r.emitted)
            target += target_grows(r)
            pairs.append((target + pending, kept))
        return pairs

    return expected_cache_lengths


#: Correct: the target holds the context but its pending token; the draft keeps the
#: round's starting context and the accepted drafts it had fed, at most m - 1.
cache_reference = _cache_pairs(lambda m, n: min(n, m - 1))

#: ``(name, function, diagnosis)``: the slips the check names.
CACHE_SLIPS = (
    (
        "target counts the pending token",
        _cache_pairs(lambda m, n: min(n, m - 1), pending=0),
        D.COUNTS_PENDING,
    ),
    (
        "target not rolled back",
        _cache_pairs(lambda m, n: min(n, m - 1), lambda r: len(r.proposed) + 1),
        D.NO_ROLLBACK,
    ),
    (
        "target grows by the accepted only",
        _cache_pairs(lambda m, n: min(n, m - 1), lambda r: r.n_accepted),
        D.ACCEPTED_ONLY,
    ),
    ("draft keeps its last draft", _cache_pairs(lambda m, n: n), D.DRAFT_LAST_DRAFT),
    ("draft not rolled back", _cache_pairs(lambda m, n: m - 1), D.DRAFT_NO_ROLLBACK),
    (
        "draft rewound by the rejected count",
        _cache_pairs(lambda m, n: n - 1 if n < m else m - 1),
        D.DRAFT_REWINDS_BY_COUNT,
    ),
    (
        "draft moved by a round that drafted nothing",
        _cache_pairs(lambda m, n: min(n, m - 1), empty_rounds_move=True),
        D.DRAFT_EMPTY_ROUND,
    ),
)
