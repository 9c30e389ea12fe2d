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

from .drafters import NgramDrafter


class FastNgramDrafter(NgramDrafter):
    """:class:`NgramDrafter` with the same proposals, searched with ``bytes.rfind``."""

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
