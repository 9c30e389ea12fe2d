"""Plain decoding and speculative decoding, with honest counting.

After each round the cache holds every request's context but its last, "pending" token,
so the first round feeds the whole prompt plus the proposal: prefill and the first
verification share one pass. Every proposal is a token tree (a chain drafter's has one
child a node, and takes a plain causal pass). Without a cache (the textbook version,
chains only) every round re-runs the target over the whole context.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from specdec_lib.checks import (
    check_drafters,
    check_ids,
    check_int,
    check_ints,
    check_k,
    check_prompt,
    check_prompts,
    check_proposal,
    check_tree,
)
from specdec_lib.engine import tree as trees
from specdec_lib.engine.drafters import Drafter, LibraryDrafter, one_hot_probs
from specdec_lib.engine.model import KVCache, TinyGPT
from specdec_lib.engine.sampling import SamplingParams, argmax, process_logits, sample
from specdec_lib.engine.verify import greedy_rule, sampled_rule

PAD_ID = 0  # any valid id: padded positions lie beyond each row's length and are never attended


@torch.inference_mode()
def generate(
    model: TinyGPT,
    prompt_token_ids: Sequence[int],
    params: SamplingParams,
    generator: torch.Generator | None = None,
    stop_token_ids: Sequence[int] = (),
) -> list[int]:
    """Plain autoregressive decoding with a KV cache: one forward pass per new token, until
    ``max_tokens`` or a token of ``stop_token_ids`` (kept, as transformers keeps its EOS)."""
    ids = check_prompt(prompt_token_ids, model.config, params.max_tokens)
    stop = set(check_ids("stop_token_ids", stop_token_ids, model.config.vocab_size))
    cache = model.new_cache(1)
    logits = model(torch.tensor([ids]), cache, logits_to_keep=1)[0, -1]  # prefill
    out: list[int] = []
    while True:
        out.append(next_token(logits, params, generator))
        if len(out) == params.max_tokens or out[-1] in stop:
            return out
        logits = model(torch.tensor([[out[-1]]]), cache)[0, -1]


def next_token(
    logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None
) -> int:
    """Pick one token from a row of logits: argmax if greedy, else sample the processed p."""
    if params.greedy:
        return argmax(logits)
    return sample(process_logits(logits, params), generator)


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
        check_ints(self, ("min_k", "grow", "shrink"))
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

    def record(
        self, r: RoundRecord, draft_passes: int, target_passes: int = 1, depth: int | None = None
    ) -> None:
        """Count one request's round. A batched pass serving many requests counts once. Every
        node of a tree counts as proposed, and positions count by ``depth`` (levels drafted;
        ``None``: a chain, whose depth is its length), the accepted path down from the root."""
        depth = len(r.proposed) if depth is None else depth
        self.rounds += 1
        self.target_passes += target_passes
        self.draft_passes += draft_passes
        self.proposed += len(r.proposed)
        self.accepted += r.n_accepted
        self.emitted += len(r.emitted)
        for counts in (self.position_proposed, self.position_accepted):
            counts += [0] * (depth - len(counts))
        for i in range(depth):
            self.position_proposed[i] += 1
            self.position_accepted[i] += int(i < r.n_accepted)
        self.log.append(r)


def _draft(
    drafter: Drafter,
    context: list[int],
    depth: int,
    params: SamplingParams,
    generator: torch.Generator | None,
    vocab: int,
    max_nodes: int | None,
) -> trees.TokenTree:
    """Up to ``depth`` levels of drafted tokens after the engine's own context, as a tree: a
    chain drafter's proposal is the tree with one child a node. The library's chain drafters
    are trusted with the context; anyone else's proposal, and every tree, is checked."""
    if hasattr(drafter, "draft_tree"):  # a tree drafter: nothing to draft at depth 0
        tree = drafter.draft_tree(context, depth, params, generator) if depth else trees.chain([])
        return check_tree(tree, drafter, max_nodes, depth, vocab)
    if isinstance(drafter, LibraryDrafter):
        p = drafter.draft(context, depth, params, generator)
    else:
        p = drafter.propose(context, depth, params, generator)
        p = check_proposal(p, drafter.name, depth, params, vocab)
    return trees.chain(p.tokens, p.probs, p.draft_passes)


def _verify(
    logits: torch.Tensor,
    tree: trees.TokenTree,
    params: SamplingParams,
    generator: torch.Generator | None,
) -> tuple[list[int], list[int]]:
    """The accepted path (tree indices) and the emitted tokens. A chain goes to the chain
    rules, which are the walks with one child a node and nothing to search."""
    if not trees.is_chain(tree):
        if params.greedy:
            return trees.walk_greedy(logits, tree)
        return trees.walk_sampled(logits, tree, params, generator)
    if params.greedy:
        emitted, n = greedy_rule(logits, tree.tokens)
    else:
        q = one_hot_probs(tree.tokens, logits.shape[-1]) if tree.probs is None else tree.probs
        emitted, n = sampled_rule(logits, q, tree.tokens, params, generator)
    return list(range(n)), emitted


@dataclass
class Row:
    """One request in flight: its tokens so far (prompt first), its own sampling parameters
    (``max_tokens`` says when it is done), its drafter, the draft length of its next round
    (0: a plain step), its rounds so far as ``(proposed, accepted)`` pairs, the depth each
    round asked for (``k``, less near ``max_tokens``) and the tokens that end it (``stop``)."""

    seq: list[int]
    n_prompt: int
    params: SamplingParams
    drafter: Drafter
    k: int
    rounds: list[tuple[int, int]] = field(default_factory=list)
    asked: list[int] = field(default_factory=list)
    stop: frozenset[int] = frozenset()

    @property
    def left(self) -> int:
        """Tokens still to emit (none once a stop token was emitted)."""
        if len(self.seq) > self.n_prompt and self.seq[-1] in self.stop:
            return 0
        return self.params.max_tokens - len(self.seq) + self.n_prompt

    @property
    def output(self) -> list[int]:
        """The tokens emitted so far."""
        return self.seq[self.n_prompt :]


@torch.inference_mode()
def speculation_round(
    target: TinyGPT,
    cache: KVCache | None,
    rows: Sequence[Row],
    generator: torch.Generator | None = None,
    stats: SpeculationStats | None = None,
    max_nodes: int | None = None,
) -> list[int]:
    """One round for the rows of ``cache`` (checked requests): each unfinished row drafts up
    to its own ``k``, one target pass verifies every row, and each row accepts its own prefix
    and rolls back its own rejected positions. Returns the rows that took part; a finished
    row rides along with nothing proposed (in a static batch) until the caller removes it.

    Every proposal is a token tree up to ``k`` deep, a chain being the tree with one child a
    node. While every row is a chain, the pass is a plain causal one; otherwise the tree
    layout places each node at its depth's position, seeing only its ancestors (:mod:`.tree`).
    """
    vocab = target.config.vocab_size
    active = [b for b, row in enumerate(rows) if row.left > 0]
    # Never draft past max_tokens: a round emits up to depth + 1 tokens.
    drafted = [trees.chain([]) for _ in rows]
    for b in active:
        row = rows[b]
        depth = min(row.k, row.left - 1)
        row.asked.append(depth)
        drafted[b] = _draft(row.drafter, row.seq, depth, row.params, generator, vocab, max_nodes)
    # Feed what the cache lacks (all but the pending token) and the tree; only the last
    # n+1 fed positions are scored: they score the n drafted tokens and the bonus.
    cached = [0] * len(rows) if cache is None else cache.lengths
    fed = [r.seq[c:] + t.tokens for r, c, t in zip(rows, cached, drafted, strict=True)]
    width = max(len(f) for f in fed)
    scored = max(width - len(fed[b]) + len(drafted[b]) + 1 for b in active)
    ids = torch.tensor([f + [PAD_ID] * (width - len(f)) for f in fed])
    chains = all(trees.is_chain(t) for t in drafted)
    reads_hidden = [getattr(r.drafter, "reads_hidden", False) for r in rows]
    if chains and not any(reads_hidden):
        logits = target(ids, cache, logits_to_keep=scored)
    else:
        parents = [t.parents for t in drafted]
        layout = None if chains else trees.tree_layout(cached, [len(f) for f in fed], parents)
        logits, hidden = target(ids, cache, logits_to_keep=scored, layout=layout, hidden=True)
    keep = list(cached)
    for b in active:
        row, tree, end = rows[b], drafted[b], len(fed[b]) - width + scored
        first = end - len(tree) - 1  # the row scoring the root's children
        path, emitted = _verify(logits[b, first:end], tree, row.params, generator)
        if ends := [i for i, t in enumerate(emitted) if t in row.stop]:  # the request ends
            emitted, path = emitted[: ends[0] + 1], path[: ends[0]]  # at its first stop token
        if reads_hidden[b]:  # the states of what this round settled: the context fed, the path
            n_fed = len(row.seq) - cached[b]
            settled = [*range(n_fed), *(n_fed + i for i in path)]
            row.drafter.observe(hidden[b, settled], len(row.seq) + len(emitted))
        if cache is not None:  # a chain's path is already where decoding puts it
            trees.keep_path(cache, b, len(row.seq), path)
        keep[b] = len(row.seq) + len(path)  # pending + accepted; the rest rolls back
        row.seq += emitted
        row.rounds.append((len(tree), len(path)))
        if stats is not None:  # the shared pass counts once, with the first request
            kept = None if cache is None else keep[b]
            r = RoundRecord(tree.tokens, len(path), emitted, row.k, kept)
            depth = None if trees.is_chain(tree) else max(tree.depths, default=-1) + 1
            stats.record(r, tree.draft_passes, int(b == active[0]), depth)
    if cache is not None:
        cache.crop(keep)
    return active


def speculate(
    target: TinyGPT,
    drafters: Sequence[Drafter] | Callable[[], Drafter],
    prompts: Sequence[Sequence[int]],
    params: SamplingParams,
    k: int = 4,
    generator: torch.Generator | None = None,
    stats: SpeculationStats | None = None,
    adaptive_k: AdaptiveK | None = None,
    use_kv_cache: bool = True,
    max_nodes: int | None = None,
    stop_token_ids: Sequence[int] = (),
) -> list[list[int]]:
    """Speculative decoding of a static batch, each request drafting up to ``k`` tokens a
    round (a tree up to ``k`` deep), all verified together in one target pass a round:
    :func:`speculation_round` until every request is done (``max_tokens``, or a token of
    ``stop_token_ids``). Greedy, each output is exactly what :func:`generate` returns for
    the request alone; sampled, it is distributed as the target's.

    ``drafters`` holds one drafter per prompt, or is a factory called once per prompt (a
    drafter may keep per-request state, such as a draft model's cache). With ``adaptive_k``,
    ``k`` is only the first round's draft length. ``use_kv_cache=False`` re-runs the target
    over the whole context each round (chains only). A tree may hold up to ``max_nodes``
    nodes (``None``: any number). The cache holds every request from the start, so a
    request that finishes early rides along until the slowest is done (:mod:`.server` lets
    it leave): after the longest prompt and ``max_tokens``, the window must have room for a
    padded round's drafts (more than one request) and for ``max_nodes``: a tree is written
    past the tokens it may keep.
    """
    k = check_k(k, adaptive_k)
    k_max = k if adaptive_k is None else adaptive_k.max_k
    seqs = check_prompts(prompts, target.config, params.max_tokens, k_max, max_nodes)
    if callable(drafters):
        drafters = [drafters() for _ in seqs]
    pairs = zip(seqs, check_drafters(drafters, len(seqs)), strict=True)
    stop = frozenset(check_ids("stop_token_ids", stop_token_ids, target.config.vocab_size))
    rows = [Row(s, len(s), params, d, k, stop=stop) for s, d in pairs]
    cache = target.new_cache(len(rows)) if use_kv_cache else None
    while any(row.left > 0 for row in rows):
        active = speculation_round(target, cache, rows, generator, stats, max_nodes)
        if adaptive_k is not None:
            for b in active:
                rows[b].k = adaptive_k.next_k(rows[b].k, rows[b].rounds)
    return [row.output for row in rows]


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
    stop_token_ids: Sequence[int] = (),
) -> list[int]:
    """Speculative decoding of one request: draft up to ``k`` tokens, verify them in one pass.

    Greedy returns exactly what :func:`generate` returns (with the same ``stop_token_ids``);
    sampled, the output is distributed exactly as the target's. It is :func:`speculate`
    with one drafter and one prompt, whose docstring says what the other arguments do.
    """
    options = dict(adaptive_k=adaptive_k, use_kv_cache=use_kv_cache, stop_token_ids=stop_token_ids)
    [out] = speculate(target, [drafter], [prompt_token_ids], params, k, generator, stats, **options)
    return out
