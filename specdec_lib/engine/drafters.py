"""Drafters: cheap proposers of the next k tokens, with the distributions they drew them
from (the residual rule divides by it). Prompt lookup needs no model; a draft model does.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

from specdec_lib.checks import check_draft_params, check_ids, check_int
from specdec_lib.engine.model import TinyGPT
from specdec_lib.engine.sampling import SamplingParams, process_logits, sample
from specdec_lib.text.tokenizer import Tokenizer

VOCAB_SIZE = Tokenizer().vocab_size
_ID = array("I")  # the n-gram search's encoding of a token id: a C unsigned int
Params = SamplingParams | None  # None: the drafter's default (greedy for the n-gram drafter)
Generator = torch.Generator | None


@dataclass(frozen=True)
class Proposal:
    """Up to k drafted ``tokens``, the (m, V) ``probs`` they were drawn from, draft passes spent.
    ``probs=None`` means deterministic (one-hot), so greedy decoding never builds it."""

    tokens: list[int]
    probs: torch.Tensor | None = None
    draft_passes: int = 0

    def dense_probs(self, vocab_size: int) -> torch.Tensor:
        """``probs``, or the one-hot rows a deterministic proposal stands for."""
        return one_hot_probs(self.tokens, vocab_size) if self.probs is None else self.probs


@runtime_checkable
class Drafter(Protocol):
    """Anything with a ``name`` that proposes up to ``k`` tokens after ``context``."""

    name: str

    def propose(
        self, context: Sequence[int], k: int, params: SamplingParams, generator: Generator = None
    ) -> Proposal: ...


def one_hot_probs(tokens: Sequence[int], vocab_size: int) -> torch.Tensor:
    """(len(tokens), V) rows that put all mass on each token: a deterministic drafter's q."""
    ids = torch.as_tensor(list(tokens), dtype=torch.long)
    return torch.nn.functional.one_hot(ids, vocab_size).to(torch.float64)


class LibraryDrafter:
    """The library's drafters: ``propose`` checks its arguments, then calls ``draft``, which
    the engine calls directly on its own context; other drafters' proposals are checked."""

    name: str
    vocab_size: int

    def propose(
        self, context: Sequence[int], k: int, params: Params = None, generator: Generator = None
    ) -> Proposal:
        check_int("k", k, 0)
        ids = check_ids("context", context, self.vocab_size)
        if not ids:
            raise ValueError("context must hold at least 1 token")
        return self.draft(ids, k, params, generator)

    def draft(self, context: list[int], k: int, params: Params, generator: Generator) -> Proposal:
        """Up to ``k`` tokens after a checked, non-empty ``context``."""
        raise NotImplementedError


class NgramDrafter(LibraryDrafter):
    """Prompt lookup: copy what followed the latest earlier occurrence of the suffix.

    Tries suffix lengths from ``max_n`` down to ``min_n`` and uses the longest that
    occurred before; among its occurrences, the latest. With word tokens a single
    token already says a lot (a content word is nearly unique in its passage), but
    function words (" the", " of") are everywhere, so a one-token match is only the
    last resort.
    """

    def __init__(self, max_n: int = 4, min_n: int = 1, vocab_size: int = VOCAB_SIZE) -> None:
        check_int("min_n", min_n)
        check_int("max_n", max_n, min_n)
        self.max_n = max_n
        self.min_n = min_n
        self.vocab_size = check_int("vocab_size", vocab_size)
        self.name = f"n-gram (n={min_n}..{max_n})"

    def find_match(self, context: Sequence[int]) -> tuple[int, int] | None:
        """``(start, n)`` of the latest earlier occurrence of the longest matching suffix."""
        return next(self.matches(context), None)

    def matches(self, context: Sequence[int]) -> Iterator[tuple[int, int]]:
        """``(start, n)`` of every earlier occurrence of a suffix of the context: the
        longest suffix first, and each suffix's occurrences latest first (a tree drafter
        reads on past the first; the chain stops at it, so it pays for one search).

        The search runs every round, so it runs at C speed: each id becomes a C unsigned int and
        ``bytes.rfind`` looks for the suffix's bytes, accepting a hit only where it starts
        on a token boundary. The search ends before the last token, so every match has a
        token after it to propose, and the suffix is never its own match.
        """
        L, w = len(context), _ID.itemsize
        data = array(_ID.typecode, context).tobytes()  # token i is data[w*i : w*(i+1)]
        for n in range(min(self.max_n, L - 1), self.min_n - 1, -1):
            suffix = data[w * (L - n) :]
            end = w * (L - 1)
            while (hit := data.rfind(suffix, 0, end)) >= 0:
                if hit % w == 0:
                    yield hit // w, n
                end = hit + len(suffix) - 1  # look earlier (a hit may overlap the last)

    def draft(self, context: list[int], k: int, params: Params, generator: Generator) -> Proposal:
        match = self.find_match(context) if k > 0 else None
        if match is None:
            return Proposal([])
        start, n = match
        return Proposal(context[start + n : start + n + k])  # deterministic: probs=None


class DraftModelDrafter(LibraryDrafter):
    """A small TinyGPT proposing k tokens, one forward pass each.

    It keeps its KV cache (``cache``, holding the tokens ``cached``) between calls: when
    the new context extends what is cached, only the new tokens are fed; where the context
    diverges (the target rejected some drafted tokens), the cache is cropped back to the
    common prefix.
    """

    def __init__(self, draft_model: TinyGPT, name: str = "draft model") -> None:
        if not isinstance(draft_model, TinyGPT):
            raise ValueError(f"draft_model must be a TinyGPT, got {type(draft_model).__name__}")
        self.model = draft_model
        self.vocab_size = draft_model.config.vocab_size
        self.name = name
        self.cache = draft_model.new_cache(1)
        self.cached: list[int] = []

    def logits_after(self, context: list[int]) -> torch.Tensor:
        """Logits (V,) of the token after ``context``: the cache is cropped to the prefix it
        shares with ``context``, and one pass feeds the rest (at least the last token)."""
        common = 0
        limit = min(len(self.cached), len(context) - 1)  # always feed at least one token
        while common < limit and self.cached[common] == context[common]:
            common += 1
        self.cache.crop(common)
        logits = self.model(torch.tensor([context[common:]]), self.cache)[0, -1]
        self.cached = list(context)
        return logits

    @torch.inference_mode()
    def draft(self, context: list[int], k: int, params: Params, generator: Generator) -> Proposal:
        check_draft_params(params)
        tokens: list[int] = []
        rows = torch.zeros(k, self.vocab_size, dtype=torch.float64)
        for i in range(k):  # one pass per token; the cache already holds all but the last
            probs = process_logits(self.logits_after(context + tokens), params)  # as the target
            tokens.append(int(probs.argmax()) if params.greedy else sample(probs, generator))
            rows[i] = probs
        return Proposal(tokens, rows, draft_passes=k)
