"""The n-gram drafter's rule, searched at C speed: for timing, not for teaching.

:class:`~specdec_lib.drafters.NgramDrafter` states the prompt-lookup rule with
NumPy sliding windows, which reads well but costs a noticeable fraction of a
TinyGPT forward pass per round (it rebuilds an array from the context and
compares every window, for every suffix length). At batch one on a CPU that
overhead is paid in every round, so it decides whether speculation on text that
never repeats stays within a few per cent of plain decoding.

:class:`FastNgramDrafter` proposes exactly the same tokens (the tests check it on
random and real contexts): the latest earlier occurrence of the longest suffix of
length ``max_n`` down to ``min_n``. With byte tokens (ids below 256) the search
is ``bytes.rfind``, whose end bound keeps every match strictly before the last
token, just as the windows of ``context[:-1]`` do. Larger vocabularies fall back
to the NumPy search.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from .drafters import NgramDrafter, Proposal, _check_k
from .sampling import SamplingParams


def _one_hot(tokens: list[int], vocab_size: int) -> torch.Tensor:
    """Same values and dtype as :func:`~specdec_lib.drafters.one_hot_probs`, built in NumPy."""
    probs = np.zeros((len(tokens), vocab_size), dtype=np.float64)
    probs[np.arange(len(tokens)), tokens] = 1.0
    return torch.from_numpy(probs)


class FastNgramDrafter(NgramDrafter):
    """:class:`NgramDrafter` with the same proposals, searched with ``bytes.rfind``."""

    def __init__(self, max_n: int = 8, min_n: int = 3, vocab_size: int = 256) -> None:
        super().__init__(max_n=max_n, min_n=min_n, vocab_size=vocab_size)

    def find_match(self, context: Sequence[int]) -> tuple[int, int] | None:
        """``(start, n)`` of the latest earlier occurrence of the longest matching suffix."""
        L = len(context)
        try:
            data = bytes(context)
        except ValueError:  # an id outside 0..255: use the general search
            return super().find_match(context)
        for n in range(min(self.max_n, L - 1), self.min_n - 1, -1):
            start = data.rfind(data[L - n :], 0, L - 1)
            if start >= 0:
                return start, n
        return None

    def propose(
        self,
        context: Sequence[int],
        k: int,
        params: SamplingParams | None = None,
        generator: torch.Generator | None = None,
    ) -> Proposal:
        _check_k(k)
        match = self.find_match(context) if k > 0 else None
        tokens: list[int] = []
        if match is not None:
            start, n = match
            tokens = [int(t) for t in context[start + n : start + n + k]]
        return Proposal(tokens, _one_hot(tokens, self.vocab_size), draft_passes=0)
