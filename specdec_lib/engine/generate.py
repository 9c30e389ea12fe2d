"""Plain decoding and speculative decoding, with honest counting.

After each round the cache holds every request's context but its last, "pending" token,
so the first round feeds the whole prompt plus the proposal: prefill and the first
verification share one pass. Without a cache (the textbook version) every round re-runs
the target over the whole context.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from specdec_lib.checks import check_drafters, check_int, check_k, check_prompt, check_proposal
from specdec_lib.engine.drafters import Drafter, LibraryDrafter, Proposal
from specdec_lib.engine.model import TinyGPT
from specdec_lib.engine.sampling import SamplingParams, argmax, process_logits, sample
from specdec_lib.engine.verify import greedy_rule, sampled_rule

PAD_ID = 0  # any valid id: padded positions lie beyond each row's length and are never attended


def next_token(
    logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None
) -> int:
    """Pick one token from a row of logits: argmax if greedy, else sample the processed p."""
    if params.greedy:
        return argmax(logits)
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
    logits = model(torch.tensor([ids]), cache, logits_to_keep=1)[0, -1]  # prefill
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

    Hugging Face's "heuristic" schedule for assisted generation (+2 / -1), within
    ``[min_k, max_k]``; a round that proposed nothing leaves k unchanged. Any object with
    ``min_k``, ``max_k`` and ``next_k`` can steer :func:`speculate` (as ``CostAwareK`` does).
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
    """Counts from one or more ``speculative_generate`` calls (pass the same object to pool
    them). ``emitted`` counts only tokens returned: the loop never drafts past ``max_tokens``."""

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

    def record(self, r: RoundRecord, draft_passes: int, target_passes: int = 1) -> None:
        """Count one request's round. A batched pass serving many requests counts once."""
        m = len(r.proposed)
        self.rounds += 1
        self.target_passes += target_passes
        self.draft_passes += draft_passes
        self.proposed += m
        self.accepted += r.n_accepted
        self.emitted += len(r.emitted)
        for counts in (self.position_proposed, self.position_accepted):
            counts += [0] * (m - len(counts))
        for i in range(m):
            self.position_proposed[i] += 1
            self.position_accepted[i] += int(i < r.n_accepted)
        self.log.append(r)


def _propose(
    drafter: Drafter,
    context: list[int],
    k: int,
    params: SamplingParams,
    generator: torch.Generator | None,
    vocab: int,
) -> Proposal:
    """Up to ``k`` tokens after the engine's own context. The library's drafters are
    trusted with it; anyone else's proposal is input, so it is checked."""
    if isinstance(drafter, LibraryDrafter):
        return drafter.draft(context, k, params, generator)
    return check_proposal(
        drafter.propose(context, k, params, generator), drafter.name, k, params, vocab
    )


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
    cache = target.new_cache(len(seqs)) if use_kv_cache else None
    vocab = target.config.vocab_size
    while True:
        left = [params.max_tokens - len(s) + n for s, n in zip(seqs, n_prompt, strict=True)]
        active = [b for b, r in enumerate(left) if r > 0]
        if not active:
            return [s[n:] for s, n in zip(seqs, n_prompt, strict=True)]
        # Never draft past max_tokens: a round emits up to m+1 tokens.
        proposals = {
            b: _propose(drafters[b], seqs[b], min(ks[b], left[b] - 1), params, generator, vocab)
            for b in active
        }
        # Feed what the cache lacks (all but the pending token) and the proposal; only the
        # last m+1 fed positions are scored: they score the m drafted tokens and the bonus.
        cached = [0] * len(seqs) if cache is None else cache.lengths
        fed = [s[c:] for s, c in zip(seqs, cached, strict=True)]
        for b in active:
            fed[b] += proposals[b].tokens
        width = max(len(f) for f in fed)
        scored = max(width - len(fed[b]) + len(proposals[b].tokens) + 1 for b in active)
        ids = torch.tensor([f + [PAD_ID] * (width - len(f)) for f in fed])
        logits = target(ids, cache, logits_to_keep=scored)
        keep = list(cached)
        for b in active:
            proposal, end = proposals[b], len(fed[b]) - width + scored
            m = len(proposal.tokens)
            rows = logits[b, end - m - 1 : end]  # scores of the m drafted tokens and the bonus
            if params.greedy:
                emitted, n_acc = greedy_rule(rows, proposal.tokens)
            else:
                q = proposal.dense_probs(vocab)
                emitted, n_acc = sampled_rule(rows, q, proposal.tokens, params, generator)
            keep[b] = len(seqs[b]) + n_acc  # pending + accepted; the rest rolls back
            seqs[b] += emitted
            if stats is not None:  # the shared pass counts once, with the first request
                r = RoundRecord(
                    proposal.tokens, n_acc, emitted, ks[b], None if cache is None else keep[b]
                )
                stats.record(r, proposal.draft_passes, int(b == active[0]))
            if adaptive_k is not None:
                rounds[b].append((m, n_acc))
                ks[b] = adaptive_k.next_k(ks[b], rounds[b])
        if cache is not None:
            cache.crop(keep)


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

    Greedy returns exactly what :func:`generate` returns; sampled, the output is distributed
    exactly as the target's. ``use_kv_cache=False`` re-runs the target over the whole context
    each round. With ``adaptive_k``, ``k`` is only the first round's draft length.
    """
    k = check_k(k, adaptive_k)
    prompt = check_prompt(prompt_token_ids, target.config, params.max_tokens)
    check_drafters([drafter], 1)
    return speculate(
        target, [drafter], [prompt], params, k, generator, stats, use_kv_cache, adaptive_k
    )[0]
