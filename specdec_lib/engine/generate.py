"""Plain decoding and speculative decoding, with honest counting.

``generate`` is the baseline: one target forward pass per new token, KV-cached.
``speculative_generate`` proposes up to k tokens with a drafter, scores all of them
in one target pass over k+1 positions, keeps what verification accepts plus one
token from the target, and repeats. Both return only the new tokens, and exactly
``params.max_tokens`` of them.

Cached speculation keeps the target's KV cache across rounds. The invariant: after
every round the cache holds every context token except the last one, which is
"pending". A round feeds what the cache lacks plus the proposal: ``[pending] +
proposal`` (m+1 tokens), whose last m+1 rows of logits are exactly what verification
needs; then the cache is cropped to drop the rejected proposals, and the round's last
emitted token becomes the new pending token. The first round feeds the whole prompt
with its proposal: prefill and verification share one pass, just as plain decoding's
first pass is both its prefill and its first token. So both sides count every forward
pass of the target, and ``SpeculationStats.target_passes`` equals the rounds.

Rollback is a crop (lowering the cache's length), not an erase: the static cache
is written by position, so the rejected entries are simply overwritten by the
next round. Each round's record carries the cache length it left behind, so the
invariant is checked by tests rather than trusted.

The draft length can be fixed (``k``) or adaptive (:class:`AdaptiveK`, the
heuristic popular engines use: grow after a fully accepted proposal, shrink after
a rejection). Neither choice changes which tokens come out, only how many target
passes they cost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import torch

from specdec_lib.checks import check_ids, check_int
from specdec_lib.engine.drafters import Drafter
from specdec_lib.engine.model import TinyGPT
from specdec_lib.engine.sampling import SamplingParams, process_logits, sample
from specdec_lib.engine.verify import accept_greedy, accept_sampled


def check_prompt(
    prompt_token_ids: Sequence[int], model: TinyGPT, params: SamplingParams
) -> list[int]:
    """The prompt as a list of ints, or a ``ValueError`` saying what is wrong with it."""
    if isinstance(prompt_token_ids, str | bytes):
        raise ValueError("prompt_token_ids must be a sequence of token ids; encode text first")
    vocab, block = model.config.vocab_size, model.config.block_size
    ids = check_ids("prompt_token_ids", prompt_token_ids, vocab)
    if not ids:
        raise ValueError("prompt_token_ids must contain at least 1 token, got an empty prompt")
    if len(ids) >= block:
        raise ValueError(
            f"prompt_token_ids must be shorter than the context window ({block} tokens), "
            f"got {len(ids)}"
        )
    if len(ids) + params.max_tokens > block:
        raise ValueError(
            f"max_tokens must be <= {block - len(ids)} for this {len(ids)}-token prompt "
            f"(context window {block}), got {params.max_tokens}"
        )
    return ids


def next_token(
    logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None
) -> int:
    """Pick one token from a row of logits: argmax if greedy, else sample the processed p."""
    if params.greedy:
        return int(logits.argmax())
    return sample(process_logits(logits, params), generator)


@torch.inference_mode()
def generate(
    model: TinyGPT,
    prompt_token_ids: Sequence[int],
    params: SamplingParams,
    generator: torch.Generator | None = None,
) -> list[int]:
    """Plain autoregressive decoding with a KV cache: one forward pass per new token."""
    ids = check_prompt(prompt_token_ids, model, params)
    cache = model.new_cache(1)
    logits = model(torch.tensor([ids]), cache)[0, -1]  # prefill
    out: list[int] = []
    while True:
        out.append(next_token(logits, params, generator))
        if len(out) == params.max_tokens:
            return out
        logits = model(torch.tensor([[out[-1]]]), cache)[0, -1]


@dataclass(frozen=True)
class RoundRecord:
    """One speculation round: what was proposed, how much was accepted, what came out.

    ``k`` is the draft length asked for that round (it varies with :class:`AdaptiveK`);
    ``cache_length`` is the target cache's length after rollback (``None`` when no
    cache was kept). Both default to ``None`` for records made without them.
    """

    proposed: list[int]
    n_accepted: int
    emitted: list[int]
    k: int | None = None
    cache_length: int | None = None


@dataclass(frozen=True)
class AdaptiveK:
    """Adaptive draft length: grow after a fully accepted proposal, shrink after a rejection.

    This is Hugging Face's "heuristic" schedule for assisted generation (+2 / -1, opt-in
    there; its default keeps k constant), kept within ``[min_k, max_k]``. A round whose
    drafter proposed nothing (the n-gram drafter found no match) says nothing about the
    draft length and leaves it unchanged.
    Any object with ``min_k``, ``max_k`` and this ``next_k`` can steer
    :func:`speculative_generate` (the cost model's policy is
    :class:`specdec_lib.analysis.theory.CostAwareK`).
    """

    min_k: int = 1
    max_k: int = 16
    grow: int = 2
    shrink: int = 1

    def __post_init__(self) -> None:
        for name in ("min_k", "grow", "shrink"):
            value = getattr(self, name)
            check_int(name, value)
        if (
            isinstance(self.max_k, bool)
            or not isinstance(self.max_k, int)
            or self.max_k < self.min_k
        ):
            raise ValueError(f"max_k must be an integer >= min_k={self.min_k}, got {self.max_k!r}")

    def next_k(self, k: int, rounds: Sequence[tuple[int, int]]) -> int:
        """The next round's draft length, given this request's rounds so far as
        ``(proposed, accepted)`` pairs; only the last one matters to this schedule."""
        n_proposed, n_accepted = rounds[-1]
        if n_proposed == 0:
            return k
        if n_accepted == n_proposed:
            return min(self.max_k, k + self.grow)
        return max(self.min_k, k - self.shrink)


class DraftLength(Protocol):
    """What :func:`speculative_generate` needs of an adaptive draft-length policy."""

    min_k: int
    max_k: int

    def next_k(self, k: int, rounds: Sequence[tuple[int, int]]) -> int: ...


@dataclass
class SpeculationStats:
    """Counts from one or more ``speculative_generate`` calls (pass the same object to pool them).

    ``emitted`` counts only tokens returned to the caller; nothing cut off by
    ``max_tokens`` is counted, because the generator never drafts past it.
    """

    rounds: int = 0
    target_passes: int = 0
    draft_passes: int = 0
    proposed: int = 0
    accepted: int = 0
    emitted: int = 0
    position_proposed: list[int] = field(default_factory=list)
    position_accepted: list[int] = field(default_factory=list)
    log: list[RoundRecord] = field(default_factory=list)

    @property
    def acceptance_rate(self) -> float:
        """Accepted / proposed (nan if nothing was proposed)."""
        return self.accepted / self.proposed if self.proposed else float("nan")

    @property
    def tokens_per_pass(self) -> float:
        """Emitted tokens per target forward pass; plain decoding scores exactly 1."""
        return self.emitted / self.target_passes if self.target_passes else float("nan")

    @property
    def acceptance_per_position(self) -> list[float]:
        """P(draft position i accepted | it was proposed), for i = 0, 1, ..."""
        return [
            a / p if p else float("nan")
            for a, p in zip(self.position_accepted, self.position_proposed, strict=True)
        ]

    def record(
        self,
        proposal_tokens: list[int],
        n_accepted: int,
        emitted: list[int],
        draft_passes: int,
        target_passes: int = 1,
        k: int | None = None,
        cache_length: int | None = None,
    ) -> None:
        """Count one request's round. A batched pass serving many requests counts once."""
        m = len(proposal_tokens)
        self.rounds += 1
        self.target_passes += target_passes
        self.draft_passes += draft_passes
        self.proposed += m
        self.accepted += n_accepted
        self.emitted += len(emitted)
        while len(self.position_proposed) < m:
            self.position_proposed.append(0)
            self.position_accepted.append(0)
        for i in range(m):
            self.position_proposed[i] += 1
            self.position_accepted[i] += int(i < n_accepted)
        self.log.append(
            RoundRecord(list(proposal_tokens), n_accepted, list(emitted), k, cache_length)
        )


Acceptor = Callable[..., tuple[list[int], int]]


@torch.inference_mode()
def speculative_generate(
    target: TinyGPT,
    drafter: Drafter,
    prompt_token_ids: Sequence[int],
    params: SamplingParams,
    k: int = 4,
    generator: torch.Generator | None = None,
    stats: SpeculationStats | None = None,
    use_kv_cache: bool = True,
    acceptor: Acceptor = accept_sampled,
    adaptive_k: DraftLength | None = None,
) -> list[int]:
    """Speculative decoding: draft up to ``k`` tokens, verify them in one target pass.

    Greedy (``temperature=0``) returns exactly what :func:`generate` returns. With
    sampling, ``acceptor`` (default :func:`accept_sampled`) decides; pass
    ``accept_sampled_biased`` only to demonstrate the bug. ``use_kv_cache=False``
    is the textbook version that re-runs the target over the whole context each
    round. With ``adaptive_k``, ``k`` is the first round's draft length and later
    rounds follow ``adaptive_k.next_k`` (:class:`AdaptiveK`, or any :class:`DraftLength`).
    """
    check_int("k", k)
    if adaptive_k is not None and not adaptive_k.min_k <= k <= adaptive_k.max_k:
        raise ValueError(
            f"k must lie in [{adaptive_k.min_k}, {adaptive_k.max_k}] for this adaptive_k, got {k}"
        )
    tokens = check_prompt(prompt_token_ids, target, params)
    n_prompt = len(tokens)
    cache = target.new_cache(1) if use_kv_cache else None
    rounds: list[tuple[int, int]] = []  # (proposed, accepted) per round, for adaptive_k
    while len(tokens) - n_prompt < params.max_tokens:
        remaining = params.max_tokens - (len(tokens) - n_prompt)
        # Never draft past max_tokens: a round emits up to m+1 tokens.
        proposal = drafter.propose(tokens, min(k, remaining - 1), params, generator)
        m = len(proposal.tokens)
        if m > min(k, remaining - 1):
            raise ValueError(f"drafter {drafter.name!r} proposed {m} tokens, more than k={k}")
        # Feed what the cache lacks (everything, without one) and the proposal. The last
        # m+1 rows score the m drafted tokens, the first one included, and the bonus.
        fed = 0 if cache is None else int(cache.lengths[0])
        new = torch.tensor([tokens[fed:] + proposal.tokens])
        logits = target(new, cache)[0, -(m + 1) :]
        if params.greedy:
            emitted, n_acc = accept_greedy(logits, proposal.tokens)
        else:
            emitted, n_acc = acceptor(logits, proposal.probs, proposal.tokens, params, generator)
        if cache is not None and n_acc < m:
            cache.crop(len(tokens) + n_acc)  # keep pending + accepted; drop rejected proposals
        tokens.extend(emitted)
        if stats is not None:
            cache_length = None if cache is None else int(cache.lengths[0])
            stats.record(
                proposal.tokens,
                n_acc,
                emitted,
                proposal.draft_passes,
                k=k,
                cache_length=cache_length,
            )
        if adaptive_k is not None:
            rounds.append((m, n_acc))
            k = adaptive_k.next_k(k, rounds)
    return tokens[n_prompt:]
