"""Plain decoding and speculative decoding, with honest counting.

``generate`` is the baseline: one KV-cached target pass per new token.
:func:`speculate` is speculative decoding of one or many requests: each round, every
unfinished request's drafter proposes up to k tokens, one target pass scores them all,
and each request keeps what verification accepts plus one token from the target.
``speculative_generate`` is a batch of one; ``speculative_generate_batch`` (in
:mod:`~specdec_lib.engine.batched`) is B. Each returns ``params.max_tokens`` new tokens.

The cache's invariant: after every round it holds each request's context except the
last, "pending" token. A round feeds what the cache lacks plus the proposal (the first
round the whole prompt, so prefill and the first verification share a pass; later
ones ``[pending] + proposal``), right-padded to the longest row; padding lies past each
row's length and is never attended to. Rollback then crops each row's length to drop
its rejected proposals. So ``SpeculationStats.target_passes`` counts every target pass.
Without a cache (``use_kv_cache=False``, the textbook version) every round re-runs
the target over the whole context. The draft length is fixed or adaptive
(:class:`AdaptiveK`); neither changes which tokens come out, only what they cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from specdec_lib.checks import check_draft_probs, check_ids, check_int, check_k, check_prompt
from specdec_lib.engine.drafters import Drafter, LibraryDrafter, Proposal
from specdec_lib.engine.model import TinyGPT
from specdec_lib.engine.sampling import SamplingParams, process_logits, sample
from specdec_lib.engine.verify import greedy_rule, sampled_rule

PAD = 0  # any valid id: padded positions lie beyond each row's length and are never attended


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
    ids = check_prompt(prompt_token_ids, model.config, params.max_tokens)
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
    """One request's round: what was proposed, how much was accepted, what came out, the
    draft length asked for and the cache length after rollback (``None`` if unknown)."""

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
    draft length and leaves it unchanged. Any object with ``min_k``, ``max_k`` and this
    ``next_k`` can steer :func:`speculate` (the cost model's policy is
    :class:`specdec_lib.analysis.theory.CostAwareK`).
    """

    min_k: int = 1
    max_k: int = 16
    grow: int = 2
    shrink: int = 1

    def __post_init__(self) -> None:
        for name in ("min_k", "grow", "shrink"):
            check_int(name, getattr(self, name))
        check_int("max_k", self.max_k, self.min_k)

    def next_k(self, k: int, rounds: Sequence[tuple[int, int]]) -> int:
        """The next round's draft length, given this request's rounds so far as
        ``(proposed, accepted)`` pairs; only the last one matters to this schedule."""
        n_proposed, n_accepted = rounds[-1]
        if n_proposed == 0:
            return k
        if n_accepted == n_proposed:
            return min(self.max_k, k + self.grow)
        return max(self.min_k, k - self.shrink)


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


def _propose(
    drafter: Drafter,
    context: list[int],
    k: int,
    params: SamplingParams,
    generator: torch.Generator | None,
    vocab_size: int,
) -> Proposal:
    """A proposal of at most ``k`` tokens. The library's drafters are trusted with the
    engine's own context; anyone else's proposal is input, so it is checked."""
    if isinstance(drafter, LibraryDrafter):
        return drafter.draft(context, k, params, generator)
    proposal = drafter.propose(context, k, params, generator)
    tokens = check_ids(f"tokens proposed by drafter {drafter.name!r}", proposal.tokens, vocab_size)
    if len(tokens) > k:
        raise ValueError(f"drafter {drafter.name!r} proposed {len(tokens)} tokens, more than k={k}")
    if not params.greedy:
        check_draft_probs(proposal.dense_probs(vocab_size), tokens, vocab_size)
    return Proposal(tokens, proposal.probs, proposal.draft_passes)


@torch.inference_mode()
def speculate(
    target: TinyGPT,
    drafters: Sequence[Drafter],
    prompts: Sequence[list[int]],
    params: SamplingParams,
    k: int,
    generator: torch.Generator | None = None,
    stats: SpeculationStats | None = None,
    use_kv_cache: bool = True,
    adaptive_k: AdaptiveK | None = None,
) -> list[list[int]]:
    """The speculation loop, for checked prompts and one drafter per request.

    Every round is one target pass for all unfinished requests; finished ones ride
    along with nothing proposed until the slowest is done.
    """
    seqs = [list(p) for p in prompts]
    n_prompt = [len(s) for s in seqs]
    ks = [k] * len(seqs)
    rounds: list[list[tuple[int, int]]] = [[] for _ in seqs]  # (proposed, accepted), for adaptive_k
    vocab = target.config.vocab_size
    cache = target.new_cache(len(seqs)) if use_kv_cache else None
    while True:
        remaining = [params.max_tokens - (len(s) - n) for s, n in zip(seqs, n_prompt, strict=True)]
        active = [b for b, r in enumerate(remaining) if r > 0]
        if not active:
            return [s[n:] for s, n in zip(seqs, n_prompt, strict=True)]
        # Never draft past max_tokens: a round emits up to m+1 tokens.
        proposals = {
            b: _propose(
                drafters[b], seqs[b], min(ks[b], remaining[b] - 1), params, generator, vocab
            )
            for b in active
        }
        # Feed what the cache lacks (everything but the pending token is cached) and the
        # proposal; the last m+1 fed positions score the m drafted tokens and the bonus.
        cached = [0] * len(seqs) if cache is None else cache.lengths.tolist()
        fed = [
            s[c:] + (proposals[b].tokens if b in proposals else [])
            for b, (s, c) in enumerate(zip(seqs, cached, strict=True))
        ]
        width = max(len(f) for f in fed)
        logits = target(torch.tensor([f + [PAD] * (width - len(f)) for f in fed]), cache)
        keep = list(cached)
        for b in active:
            proposal = proposals[b]
            m = len(proposal.tokens)
            rows = logits[b, len(fed[b]) - m - 1 : len(fed[b])]
            if params.greedy:
                emitted, n_acc = greedy_rule(rows, proposal.tokens)
            else:
                q = proposal.dense_probs(vocab)
                emitted, n_acc = sampled_rule(rows, q, proposal.tokens, params, generator)
            keep[b] = len(seqs[b]) + n_acc  # pending + accepted; the rest rolls back
            seqs[b].extend(emitted)
            if stats is not None:
                stats.record(
                    proposal.tokens,
                    n_acc,
                    emitted,
                    proposal.draft_passes,
                    target_passes=int(b == active[0]),  # one pass serves every request
                    k=ks[b],
                    cache_length=None if cache is None else keep[b],
                )
            if adaptive_k is not None:
                rounds[b].append((m, n_acc))
                ks[b] = adaptive_k.next_k(ks[b], rounds[b])
        if cache is not None:
            cache.crop(torch.tensor(keep))


def speculative_generate(
    target: TinyGPT,
    drafter: Drafter,
    prompt_token_ids: Sequence[int],
    params: SamplingParams,
    k: int = 4,
    generator: torch.Generator | None = None,
    stats: SpeculationStats | None = None,
    use_kv_cache: bool = True,
    adaptive_k: AdaptiveK | None = None,
) -> list[int]:
    """Speculative decoding of one request: draft up to ``k`` tokens, verify them in one pass.

    Greedy (``temperature=0``) returns exactly what :func:`generate` returns; with
    sampling, the residual rule makes the output distributed exactly as the target's.
    ``use_kv_cache=False`` is the textbook version that re-runs the target over the whole
    context each round. With ``adaptive_k``, ``k`` is the first round's draft length and
    later rounds follow ``adaptive_k.next_k`` (:class:`AdaptiveK`).
    """
    k = check_k(k, adaptive_k)
    prompt = check_prompt(prompt_token_ids, target.config, params.max_tokens)
    if not isinstance(drafter, Drafter):
        raise ValueError(f"drafter must have a name and a propose method, got {drafter!r}")
    return speculate(
        target, [drafter], [prompt], params, k, generator, stats, use_kv_cache, adaptive_k
    )[0]
