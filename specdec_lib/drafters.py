"""Drafters: cheap proposers of the next k tokens.

A drafter returns a :class:`Proposal`: up to k token ids and, for each, the
distribution it was drawn from. Verification needs those distributions to be
the real ones: the residual rule divides by them. A deterministic drafter's
distribution is one-hot.

* :class:`NgramDrafter` (prompt lookup): find the latest earlier place where the
  context's last n tokens occurred and propose what followed. No model, no
  training, no memory; it proposes nothing when there is no match.
* :class:`DraftModelDrafter`: a smaller model with the same vocabulary, run
  autoregressively with the same sampling processing as the target.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import torch
from numpy.lib.stride_tricks import sliding_window_view

from .model import KVCache, TinyGPT
from .sampling import SamplingParams, process_logits, sample


@dataclass(frozen=True)
class Proposal:
    """``tokens`` (m <= k of them), ``probs`` (m, V) they were drawn from, draft passes spent."""

    tokens: list[int]
    probs: torch.Tensor
    draft_passes: int = 0


@runtime_checkable
class Drafter(Protocol):
    """Anything with a ``name`` that proposes up to ``k`` tokens after ``context``."""

    name: str

    def propose(
        self,
        context: Sequence[int],
        k: int,
        params: SamplingParams,
        generator: torch.Generator | None = None,
    ) -> Proposal: ...


def one_hot_probs(tokens: Sequence[int], vocab_size: int) -> torch.Tensor:
    """(len(tokens), V) rows that put all mass on each token: a deterministic drafter's q."""
    # Built in NumPy: this runs every round, and small torch ops cost more than the search.
    probs = np.zeros((len(tokens), vocab_size), dtype=np.float64)
    probs[np.arange(len(tokens)), np.asarray(list(tokens), dtype=np.int64)] = 1.0
    return torch.from_numpy(probs)


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"k must be an integer >= 0, got {k!r}")


class NgramDrafter:
    """Prompt lookup: copy what followed the latest earlier occurrence of the suffix.

    Tries suffix lengths from ``max_n`` down to ``min_n`` and uses the longest that
    occurred before; among its occurrences, the latest. Byte tokens make short
    n-grams ambiguous ("the" is everywhere), hence ``min_n=3`` by default.
    """

    def __init__(self, max_n: int = 8, min_n: int = 3, vocab_size: int = 256) -> None:
        if isinstance(min_n, bool) or not isinstance(min_n, int) or min_n < 1:
            raise ValueError(f"min_n must be an integer >= 1, got {min_n!r}")
        if isinstance(max_n, bool) or not isinstance(max_n, int) or max_n < min_n:
            raise ValueError(f"max_n must be an integer >= min_n={min_n}, got {max_n!r}")
        self.max_n = max_n
        self.min_n = min_n
        self.vocab_size = vocab_size
        self.name = f"n-gram (n={min_n}..{max_n})"

    def find_match(self, context: Sequence[int]) -> tuple[int, int] | None:
        """``(start, n)`` of the latest earlier occurrence of the longest matching suffix."""
        ctx = np.asarray(context, dtype=np.int64)
        L = len(ctx)
        for n in range(min(self.max_n, L - 1), self.min_n - 1, -1):
            # Windows of ctx[:-1] all end before the last token, so each one has a
            # follower to propose, and the suffix itself is never its own match.
            windows = sliding_window_view(ctx[: L - 1], n)  # (L - n, n)
            hits = np.flatnonzero((windows == ctx[L - n :]).all(axis=1))
            if hits.size:
                return int(hits[-1]), n
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
        return Proposal(tokens, one_hot_probs(tokens, self.vocab_size), draft_passes=0)


class DraftModelDrafter:
    """A small TinyGPT proposing k tokens, one forward pass each.

    It keeps its KV cache between calls: when the new context extends what is
    cached, only the new tokens are fed; where the context diverges (the target
    rejected some drafted tokens), the cache is cropped back to the common prefix.
    """

    def __init__(self, draft_model: TinyGPT, name: str = "draft model") -> None:
        if not isinstance(draft_model, TinyGPT):
            raise ValueError(f"draft_model must be a TinyGPT, got {type(draft_model).__name__}")
        self.model = draft_model
        self.name = name
        self._cache: KVCache | None = None
        self._cached: list[int] = []

    def reset(self) -> None:
        """Forget the cache (done automatically when the context changes wholesale)."""
        self._cache = None
        self._cached = []

    def _logits_after(self, context: list[int]) -> torch.Tensor:
        if self._cache is None:
            self._cache = self.model.new_cache(1)
            self._cached = []
        common = 0
        limit = min(len(self._cached), len(context) - 1)  # always feed at least one token
        while common < limit and self._cached[common] == context[common]:
            common += 1
        self._cache.crop(common)
        new = context[common:]
        logits = self.model(torch.tensor([new]), self._cache)[0, -1]
        self._cached = list(context)
        return logits

    @torch.inference_mode()
    def propose(
        self,
        context: Sequence[int],
        k: int,
        params: SamplingParams,
        generator: torch.Generator | None = None,
    ) -> Proposal:
        _check_k(k)
        vocab = self.model.config.vocab_size
        if k == 0:
            return Proposal([], torch.zeros(0, vocab, dtype=torch.float64), 0)
        ctx = [int(t) for t in context]
        tokens: list[int] = []
        rows: list[torch.Tensor] = []
        logits = self._logits_after(ctx)
        for i in range(k):
            probs = process_logits(logits, params)  # same processing as the target
            token = int(probs.argmax()) if params.greedy else sample(probs, generator)
            tokens.append(token)
            rows.append(probs)
            if i + 1 < k:
                logits = self._logits_after(ctx + tokens)
        return Proposal(tokens, torch.stack(rows), draft_passes=k)
