"""A batch's rollback in a paged cache, written so that its slips can be made one at a time:
the reference of chapter 8's exercise (``rollback_batch``) and its mistakes, in
:mod:`.mistakes`, are each :func:`rollback_as` with one rule changed.
"""

from __future__ import annotations

from collections.abc import Callable


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


def in_dict_order(rows, accepted):
    """The counts in the order the dict holds them, as if that were the batch's order."""
    return list(accepted.values())
