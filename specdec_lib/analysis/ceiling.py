"""The most tokens per target pass a run of a given length can reach.

A round emits at most k + 1 tokens, so ``k + 1`` is the limit of tokens per target
pass. A run that stops after ``n`` tokens cannot always reach it: the engine never
drafts past ``max_tokens`` (a round drafts ``min(k, remaining - 1)``), so the last
round of a run is cut short unless ``k + 1`` divides ``n``. Even a drafter that is
always right then needs ``ceil(n / (k + 1))`` rounds, one target pass each, and
reaches ``n / ceil(n / (k + 1))`` tokens per pass: at ``n = 64``, 5.82, 6.4, 8 and 8
for k = 5..8, not 6, 7, 8 and 9. Tokens per pass measured on runs of a fixed length
should be read against this reachable ceiling, not against ``k + 1``: a run that
equals it has lost nothing to rejections.
"""

from __future__ import annotations

from collections.abc import Sequence

from specdec_lib.checks import check_int


def _lengths(tokens: int | Sequence[int]) -> list[int]:
    if isinstance(tokens, Sequence) and not isinstance(tokens, str | bytes):
        if not tokens:
            raise ValueError("tokens must hold at least one run length, got an empty sequence")
        return [check_int("tokens", n) for n in tokens]
    return [check_int("tokens", tokens)]


def fewest_rounds(tokens: int | Sequence[int], k: int) -> int:
    """Fewest target passes that can emit ``tokens`` new tokens at draft length ``k``.

    ``tokens`` is one run's length or a sequence of them (one per prompt); the result
    is the total, ``sum(ceil(n / (k + 1)))``, which a drafter that is always right
    reaches exactly.
    """
    k = check_int("k", k, minimum=0)
    return sum(-(-n // (k + 1)) for n in _lengths(tokens))


def reachable_tokens_per_pass(tokens: int | Sequence[int], k: int) -> float:
    """The most tokens per target pass that runs of these lengths can reach at ``k``.

    Pooled as the benchmarks pool: total tokens over total passes, at the fewest
    rounds. Equals ``k + 1`` exactly when ``k + 1`` divides every run's length.
    """
    lengths = _lengths(tokens)
    return sum(lengths) / fewest_rounds(lengths, k)
