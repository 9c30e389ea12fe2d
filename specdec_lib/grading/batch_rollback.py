"""Chapter 8's exercise on a batch's rollback in a paged cache, in one module: the answer in
the student's form, its slips, and the check.

``rollback_batch(rows, lengths, proposed, accepted, block_size) -> (new_lengths, freed)``:
after one verification pass over a batch, row b (request ``rows[b]``, ``lengths[b]``
positions cached before the pass, which wrote its pending token and ``proposed[b]``
drafts) keeps its pending token and its own accepted drafts, ``accepted[rows[b]]`` of
them, and frees the blocks it no longer needs, keeping a partly used last block. The
reference and the slips are each :func:`rollback_as` with one rule changed, the mistakes
of a batched rollback: a reset instead of a crop, one rollback for the whole batch (its
smallest), the accepted counts read in the dict's order instead of by request id, the
pending token dropped, the correction kept as well, no rollback, a partly used block
freed. The cases are edge cases (one row, nothing proposed, everything accepted, crops
onto a block boundary), then random batches whose accepted counts come keyed by request
id, mostly not in row order.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from .answers import ExactCheck
from .mistakes import register
from .report import Diagnosis as D
from .sandbox import Abort, as_tokens, call_student

# --- the answer, and its slips ---------------------------------------------------------


def _held_blocks(lengths: list[int], proposed: list[int], block_size: int) -> list[int]:
    """Blocks each row holds after the pass, which wrote its pending token and drafts."""
    return [-(-(n + 1 + m) // block_size) for n, m in zip(lengths, proposed, strict=True)]


def rollback_as(new_length: Callable, count: Callable, kept_blocks: Callable | None = None):
    """A batch's rollback in a paged cache, if each row kept ``new_length(n, m, a, shared)``
    positions (n cached before the pass, m drafts fed, a accepted, ``shared`` the batch's
    smallest rollback) and ``kept_blocks(length, block_size)`` blocks (default: all it
    needs, ceil); ``count`` reads the accepted counts, one per row, in what it takes for
    row order."""
    keep = kept_blocks or (lambda x, size: -(-x // size))

    def rollback_batch(rows, lengths, proposed, accepted, block_size):
        counts = count(rows, accepted)
        shared = min(m - a for m, a in zip(proposed, counts, strict=True))
        new = [new_length(*nma, shared) for nma in zip(lengths, proposed, counts, strict=True)]
        held = _held_blocks(lengths, proposed, block_size)
        return new, [h - keep(x, block_size) for h, x in zip(held, new, strict=True)]

    return rollback_batch


def in_row_order(rows, accepted):
    """The counts looked up by each row's request id."""
    return [accepted[r] for r in rows]


def _in_dict_order(rows, accepted):
    """The counts in the order the dict holds them, as if that were the batch's order."""
    return list(accepted.values())


#: Correct: each row keeps its pending token and its own accepted drafts, and the blocks
#: that hold them, a partly used last block included.
_rollback_reference = rollback_as(lambda n, m, a, shared: n + 1 + a, in_row_order)

register(
    "check_batch_rollback",
    _rollback_reference,
    ("reset instead of crop", rollback_as(lambda n, m, a, s: 0, in_row_order), D.RESETS_CACHE),
    (
        "one rollback for the batch",
        rollback_as(lambda n, m, a, s: n + 1 + m - s, in_row_order),
        D.SHARED_ROLLBACK,
    ),
    (
        "counts of the wrong rows",
        rollback_as(lambda n, m, a, s: n + 1 + a, _in_dict_order),
        D.WRONG_ROW,
    ),
    (
        "drops the pending token",
        rollback_as(lambda n, m, a, s: n + a, in_row_order),
        D.DROPS_PENDING,
    ),
    (
        "keeps the correction",
        rollback_as(lambda n, m, a, s: n + 2 + a, in_row_order),
        D.COUNTS_PENDING,
    ),
    ("no rollback", rollback_as(lambda n, m, a, s: n + 1 + m, in_row_order), D.NO_ROLLBACK),
    (
        "frees a partly used block",
        rollback_as(lambda n, m, a, s: n + 1 + a, in_row_order, lambda x, size: x // size),
        D.FREES_PARTIAL_BLOCK,
    ),
)


# --- the check -------------------------------------------------------------------------


def _rollback_cases(seed: int) -> list[tuple]:
    """(rows, lengths, proposed, accepted, block_size): edge cases (one row, nothing
    proposed, everything accepted, crops onto a block boundary), then random batches
    whose accepted counts come keyed by request id, mostly not in row order."""
    rng, cases = random.Random(f"rollback/{seed}"), []
    edge = [
        ([30], [4], [1], 8),  # keeps 32 = 4 whole blocks: frees the fifth
        ([31], [4], [0], 8),  # keeps 32 of 36: crops onto a boundary
        ([10, 50], [3, 3], [3, 0], 4),
        ([7, 7, 7], [0, 5, 2], [0, 5, 0], 16),
        ([0, 12], [6, 6], [2, 6], 1),
        ([15, 40, 3], [4, 1, 8], [0, 1, 5], 8),
    ]
    for lengths, proposed, accepted, size in edge:
        rows = [f"req-{rng.randrange(1000)}-{b}" for b in range(len(lengths))]
        order = rows[::-1]
        cases.append((rows, lengths, proposed, dict(zip(order, accepted[::-1], strict=True)), size))
    for i in range(60):
        B = rng.randint(2, 6)
        rows = [f"req-{rng.randrange(1000)}-{b}" for b in range(B)]
        lengths = [rng.randrange(0, 200) for _ in rows]
        proposed = [rng.randint(0, 8) for _ in rows]
        counts = [rng.randint(0, m) for m in proposed]
        keyed = list(zip(rows, counts, strict=True))
        if i % 5:
            rng.shuffle(keyed)  # the sampler's order, not the batch's
        cases.append((rows, lengths, proposed, dict(keyed), rng.choice([4, 8, 16])))
    return cases


def _rollback_answer(fn: Callable, case: tuple) -> tuple[tuple[int, ...], tuple[int, ...]]:
    rows, lengths, proposed, accepted, size = case
    got = call_student(
        fn, "rollback_batch", list(rows), list(lengths), list(proposed), dict(accepted), size
    )
    shape = f"(new_lengths, freed): two lists of {len(rows)} ints, one per row"
    if not isinstance(got, tuple | list) or len(got) != 2:
        raise Abort(D.WRONG_TYPE, f"Return {shape}; got {got!r:.80}.")
    new, freed = (as_tokens(part, "each list") for part in got)
    if len(new) != len(rows) or len(freed) != len(rows):
        raise Abort(D.WRONG_TYPE, f"Return {shape}; got {got!r:.80}.")
    return tuple(new), tuple(freed)


check_batch_rollback = ExactCheck(
    "check_batch_rollback",
    _rollback_cases,
    _rollback_answer,
    lambda c: (
        f"rows = {c[0]}, lengths = {c[1]}, proposed = {c[2]}, accepted = {c[3]}, "
        f"block_size = {c[4]}"
    ),
    """Check ``rollback_batch(rows, lengths, proposed, accepted, block_size) -> (new_lengths,
    freed)`` on about 70 batches: edge cases, then random batches whose accepted counts come
    keyed by request id in another order than the rows.""",
)
