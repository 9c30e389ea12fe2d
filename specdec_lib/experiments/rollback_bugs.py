"""Shipped KV-cache rollback bugs, as one-change mutants of the course's cache and drafter,
and a drafter that puts every accept/reject boundary where a test wants it.

Each mutant changes one thing the correct code does at rollback, the way a real engine got
it wrong, so a chapter can measure what the bug costs on the course's own models:

* :class:`ResettingCache`: rollback empties the cache's memory, while the engine's record
  of what it holds stays (paiml/aprender#2014: a GPU cache reset where a rollback was
  meant; every verification then sees almost no context).
* :class:`UniformRollbackCache`: a batch's rows are rolled back by one shared count, the
  smallest any row needs, instead of each by its own (Blaizzy/mlx-vlm#1155: under-accepting
  rows kept rejected drafts and positions that ran ahead of their text).
* :class:`MisrewindingDrafter`: the draft model's cache is rewound by a count that is off by
  a constant, never recovered (lablup/mlxcel#994: two entries too many per rejecting round).

The target verifies every proposal, so a drafter bug costs only speed; a target-cache bug
changes what the target sees, so it costs speed *and* output.

:class:`SpoilingDrafter` is the probe: it proposes the target's known greedy continuation
with one chosen position spoiled, so the engine must accept exactly the tokens before it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import torch

from specdec_lib.engine.drafters import VOCAB_SIZE, DraftModelDrafter, Proposal
from specdec_lib.engine.model import KVCache, ModelConfig, TinyGPT


class ResettingCache(KVCache):
    """A cache whose rollback wipes every stored key and value; the lengths the engine
    reads are set as asked, so the engine goes on believing the context is cached."""

    def crop(self, lengths: int | Sequence[int]) -> None:
        super().crop(lengths)
        for buffer in (*self.k, *self.v):
            buffer.zero_()


class UniformRollbackCache(KVCache):
    """A batched cache rolled back by one count for every row, the smallest rollback any
    row asked for, while the engine's per-row record of each row's length stays right.

    So a row that accepted fewer drafts than the best row keeps the difference: its
    rejected drafts (and its padding) stay in memory *below* where the next pass writes,
    attended to, and its positions run ahead of its text. The engine reads the lengths it
    asked for (``lengths`` between passes); the model writes and masks by the positions
    the cache really holds (``lengths`` during a pass, after ``_advance``).
    """

    def __init__(self, config: ModelConfig, batch_size: int = 1) -> None:
        self._stale: list[int] = [0] * batch_size  # per row: entries kept that should not be
        self._in_pass = False
        super().__init__(config, batch_size)

    @property
    def lengths(self) -> list[int]:
        if self._in_pass:
            return self._held
        return [h - s for h, s in zip(self._held, self._stale, strict=True)]

    @lengths.setter
    def lengths(self, value: list[int]) -> None:
        self._held = list(value)

    def _advance(self, n: int) -> torch.Tensor:
        self._in_pass = True
        return super()._advance(n)

    def crop(self, lengths: int | Sequence[int]) -> None:
        wanted = [int(lengths)] * self.batch_size if isinstance(lengths, int) else list(lengths)
        self._in_pass = False
        rollback = [c - n for c, n in zip(self.lengths, wanted, strict=True)]  # per row
        shared = min(rollback)
        self._held = [h - shared for h in self._held]
        self._stale = [s + r - shared for s, r in zip(self._stale, rollback, strict=True)]


@contextmanager
def cache_bug(model: TinyGPT, cache_class: type[KVCache]) -> Iterator[TinyGPT]:
    """``model`` with ``new_cache`` making ``cache_class`` caches, for the block's duration:
    the engine runs unchanged and meets the mutant cache."""

    def new_cache(batch_size: int = 1) -> KVCache:
        return cache_class(model.config, batch_size)

    model.new_cache = new_cache  # an instance attribute shadows the method
    try:
        yield model
    finally:
        del model.new_cache


class MisrewindingDrafter(DraftModelDrafter):
    """A draft model that rewinds its cache by counting: ``rejected + error`` entries
    when the context diverges from what it cached, where the correct count is
    ``rejected``. With ``error > 0`` the cache falls ``error`` positions further behind
    the text at every rejecting round and never catches up."""

    def __init__(self, draft_model: TinyGPT, error: int = 2, name: str = "") -> None:
        super().__init__(draft_model, name or f"draft model, rewind off by {error}")
        self.error = error

    def logits_after(self, context: list[int]) -> torch.Tensor:
        common = 0
        limit = min(len(self.cached), len(context) - 1)
        while common < limit and self.cached[common] == context[common]:
            common += 1
        rejected = len(self.cached) - common
        if rejected:  # rewind by a count, not to a position
            held = self.cache.lengths[0]
            self.cache.crop(max(held - rejected - self.error, 0))
        logits = self.model(torch.tensor([context[common:]]), self.cache)[0, -1]
        self.cached = list(context)
        return logits


class SpoilingDrafter:
    """Proposes the continuation the target will write (``reference``, from plain greedy
    decoding of the same prompt), with the token at ``spoil(round)`` changed (``None``:
    nothing changed). Greedy verification must then accept exactly the drafts before the
    spoiled one, so every round's boundary between accepted and rejected is known; the
    positions spoiled are kept in ``spoiled_at``, one per round."""

    name = "spoiling"

    def __init__(
        self,
        n_prompt: int,
        reference: Sequence[int],
        spoil: Callable[[int], int | None],
        vocab_size: int = VOCAB_SIZE,
    ) -> None:
        self.n_prompt, self.reference, self.spoil = n_prompt, list(reference), spoil
        self.vocab_size = vocab_size
        self.spoiled_at: list[int | None] = []

    def propose(
        self, context: Sequence[int], k: int, params: object = None, generator: object = None
    ) -> Proposal:
        done = len(context) - self.n_prompt
        tokens = self.reference[done : done + k]
        at = self.spoil(len(self.spoiled_at)) if tokens else None
        if at is not None and at < len(tokens):
            tokens[at] = (tokens[at] + 1) % self.vocab_size
        else:
            at = None
        self.spoiled_at.append(at)
        return Proposal(tokens)
