"""Speculative decoding with token trees: tree drafters, and the loop that verifies a tree
per request in one target pass.

A static tree's shape is a list of rank paths, as Medusa writes its trees: ``(0,)`` is
the drafter's first choice for the first position, ``(1,)`` its second, ``(0, 0)`` the
first choice after the first choice. Sampled, "first" and "second" are the first and
second draws *without replacement*, and each node keeps the distribution it was drawn
from (:class:`~specdec_lib.engine.tree.TokenTree`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
import torch

from specdec_lib.checks import check_ids, check_int, check_prompts
from specdec_lib.engine.drafters import DraftModelDrafter
from specdec_lib.engine.generate import PAD_ID, RoundRecord, SpeculationStats
from specdec_lib.engine.model import TinyGPT
from specdec_lib.engine.sampling import SamplingParams
from specdec_lib.engine.tree import (
    TokenTree,
    TreeShape,
    draw_child,
    elder_tokens,
    keep_path,
    tree_layout,
    walk_greedy,
    walk_sampled,
)

Walk = Callable[
    [torch.Tensor, TokenTree, SamplingParams, torch.Generator | None], tuple[list[int], list[int]]
]


class TreeDrafter(Protocol):
    name: str

    def draft_tree(
        self,
        context: list[int],
        max_depth: int,
        params: SamplingParams,
        generator: torch.Generator | None,
    ) -> TokenTree: ...


class DraftModelTreeDrafter(DraftModelDrafter):
    """A draft model filling a static :class:`TreeShape`, one draft pass per level.

    Level by level: the first pass scores the context (the cache keeps it, as for a
    chain); each further pass feeds the newest level's nodes with the tree layout, the
    earlier levels already in the draft's cache, so every node is scored after its own
    ancestors. The tree's entries are cropped away after drafting. Greedy, a node's
    rank-r child is the draft's r-th likeliest token; sampled, its r-th draw without
    replacement from the draft's processed distribution, recorded with the distribution
    it was drawn from.
    """

    def __init__(self, draft_model: TinyGPT, shape: TreeShape, name: str = "") -> None:
        super().__init__(draft_model, name or f"draft-model tree ({len(shape)} nodes)")
        self.shape = shape

    @torch.inference_mode()
    def draft_tree(
        self,
        context: list[int],
        max_depth: int,
        params: SamplingParams,
        generator: torch.Generator | None,
    ) -> TokenTree:
        n_context = len(context)
        logits = {(): self.logits_after(context)}  # rank path -> logits of its next token
        tokens: list[int] = []
        parents: list[int] = []
        rows: list[torch.Tensor] = []
        index: dict[tuple[int, ...], int] = {}
        passes = 1
        for depth in range(1, min(self.shape.depth, max_depth) + 1):
            if depth > 1:  # score the last level's nodes, after their ancestors (cached)
                done = sum(len(p) < depth - 1 for p in index)  # nodes of earlier levels
                layout = (  # a chain so far is a plain pass: no layout needed
                    None
                    if parents == list(range(-1, len(parents) - 1))
                    else tree_layout(
                        [n_context + done], [len(tokens) - done], [parents], kept=[done]
                    )
                )
                out = self.model(torch.tensor([tokens[done:]]), self.cache, layout=layout)[0]
                passes += 1
                logits.update({p: out[i - done] for p, i in index.items() if len(p) == depth - 1})
            for path in (p for p in self.shape.paths if len(p) == depth):
                if path[:-1] not in logits:  # its parent was not drawn
                    continue
                elder = elder_tokens(index, tokens, path)
                if elder is None:  # an elder sibling had nothing left to draw
                    continue
                drawn = draw_child(logits[path[:-1]], path[-1], elder, params, generator)
                if drawn is None:
                    continue
                token, row = drawn
                index[path] = len(tokens)
                parents.append(index.get(path[:-1], -1))
                tokens.append(token)
                rows.append(row)
        self.cache.crop(n_context)  # the tree's entries go; the context stays cached
        probs = None if params.greedy else torch.stack(rows) if rows else None
        return TokenTree(tokens, parents, probs, draft_passes=passes)


class NgramTreeDrafter:
    """Prompt lookup with several matches: a trie of what followed each earlier occurrence
    of the context's suffix (longest suffix first, latest occurrence first), up to
    ``max_nodes`` nodes and ``max_paths`` occurrences (1: the course's chain,
    :class:`~specdec_lib.engine.drafters.NgramDrafter`'s proposal). Deterministic: every
    node is drawn with probability 1."""

    def __init__(
        self, max_nodes: int = 7, max_n: int = 4, min_n: int = 1, max_paths: int | None = None
    ) -> None:
        self.max_nodes = check_int("max_nodes", max_nodes)
        self.min_n = check_int("min_n", min_n)
        self.max_n = check_int("max_n", max_n, min_n)
        self.max_paths = None if max_paths is None else check_int("max_paths", max_paths)
        kind = "chain" if max_paths == 1 else "tree"
        self.name = f"n-gram {kind} ({max_nodes} nodes)"

    def continuations(self, context: Sequence[int], length: int) -> list[list[int]]:
        """What followed each earlier occurrence of the suffix, up to ``length`` tokens."""
        ids = np.asarray(context)
        L, out = len(ids), []
        for n in range(min(self.max_n, L - 1), self.min_n - 1, -1):
            suffix = ids[L - n :]
            windows = np.lib.stride_tricks.sliding_window_view(ids[: L - 1], n)  # each with a next
            starts = np.flatnonzero((windows == suffix).all(1))
            out += [ids[s + n : s + n + length].tolist() for s in starts[::-1]]
        return out

    def draft_tree(
        self,
        context: list[int],
        max_depth: int,
        params: SamplingParams,
        generator: torch.Generator | None,
    ) -> TokenTree:
        tokens: list[int] = []
        parents: list[int] = []
        for continuation in self.continuations(context, max_depth)[: self.max_paths]:
            node = -1
            for token in continuation:
                child = next(
                    (i for i, p in enumerate(parents) if p == node and tokens[i] == token), None
                )
                if child is None:
                    if len(tokens) == self.max_nodes:
                        break
                    child = len(tokens)
                    tokens.append(token)
                    parents.append(node)
                node = child
            if len(tokens) == self.max_nodes:
                break
        return TokenTree(tokens, parents)


def _record(
    stats: SpeculationStats, tree: TokenTree, path: list[int], emitted: list[int], first: bool
) -> None:
    """Count a tree round: proposed counts nodes, accepted the path, positions by depth."""
    depth = max(tree.depths, default=-1) + 1
    stats.rounds += 1
    stats.target_passes += int(first)
    stats.draft_passes += tree.draft_passes
    stats.proposed += len(tree)
    stats.accepted += len(path)
    stats.emitted += len(emitted)
    for counts in (stats.position_proposed, stats.position_accepted):
        counts += [0] * (depth - len(counts))
    for d in range(depth):
        stats.position_proposed[d] += 1
        stats.position_accepted[d] += int(d < len(path))
    stats.log.append(RoundRecord(list(tree.tokens), len(path), emitted, len(tree)))


def _check_drafted(tree: TokenTree, drafter: object, max_nodes: int, depth: int, vocab: int):
    """A drafter's tree is input: at most ``max_nodes`` nodes, ``depth`` levels, valid ids."""
    name = getattr(drafter, "name", type(drafter).__name__)
    if len(tree) > max_nodes or (len(tree) and max(tree.depths) >= depth):
        raise ValueError(
            f"{name} drafted {len(tree)} nodes over {max(tree.depths) + 1} levels; "
            f"max_nodes is {max_nodes}, the depth allowed {depth}"
        )
    check_ids(f"{name}'s tree tokens", tree.tokens, vocab)
    if tree.probs is not None and tuple(tree.probs.shape) != (len(tree), vocab):
        raise ValueError(f"{name}'s tree probs must have shape {(len(tree), vocab)}")


@torch.inference_mode()
def tree_speculate(
    target: TinyGPT,
    drafters: Sequence[TreeDrafter],
    prompts: Sequence[Sequence[int]],
    params: SamplingParams,
    max_depth: int = 8,
    generator: torch.Generator | None = None,
    stats: SpeculationStats | None = None,
    walk: Walk | None = None,
    max_nodes: int = 32,
) -> list[list[int]]:
    """Speculative decoding with a token tree per request, all verified in one target pass.

    Each round feeds, per request, what the cache lacks (the pending token) and its tree;
    the tree layout gives each node its depth's position and its ancestors' attention.
    ``walk`` is the verifier: by default :func:`walk_greedy` (greedy) or
    :func:`walk_sampled` (sampled); pass another to test a wrong one. Greedy output equals
    :func:`~specdec_lib.engine.generate.generate`'s; sampled, it is distributed as the
    target's. ``stats.proposed`` counts tree nodes, ``accepted`` the accepted path. A tree
    may hold up to ``max_nodes`` nodes, and the window must have room for them after the
    longest prompt and ``max_tokens``: a tree is written past the tokens it may keep.
    """
    check_int("max_depth", max_depth)
    check_int("max_nodes", max_nodes)
    seqs = check_prompts(prompts, target.config, params.max_tokens)
    room = target.config.block_size - max(len(s) for s in seqs) - params.max_tokens
    if max_nodes > room:
        raise ValueError(
            f"max_nodes must be <= {room} here (prompt + max_tokens + max_nodes "
            f"<= block_size={target.config.block_size}), got {max_nodes}"
        )
    if len(drafters) != len(seqs):
        raise ValueError(f"drafters must hold one per prompt ({len(seqs)}), got {len(drafters)}")
    if walk is None:
        walk = (lambda lg, t, _p, _g: walk_greedy(lg, t)) if params.greedy else walk_sampled
    n_prompt = [len(s) for s in seqs]
    cache = target.new_cache(len(seqs))
    vocab = target.config.vocab_size
    while True:
        left = [params.max_tokens - len(s) + n for s, n in zip(seqs, n_prompt, strict=True)]
        active = [b for b, r in enumerate(left) if r > 0]
        if not active:
            return [s[n:] for s, n in zip(seqs, n_prompt, strict=True)]
        # Never draft past max_tokens: a round emits up to depth + 1 tokens.
        trees = [
            drafters[b].draft_tree(seqs[b], min(max_depth, left[b] - 1), params, generator)
            if left[b] > 1
            else TokenTree([], [])
            for b in range(len(seqs))
        ]
        for b, t in enumerate(trees):
            _check_drafted(t, drafters[b], max_nodes, min(max_depth, left[b] - 1), vocab)
        cached = list(cache.lengths)
        fed = [s[c:] + t.tokens for s, c, t in zip(seqs, cached, trees, strict=True)]
        width = max(len(f) for f in fed)
        scored = max(width - len(fed[b]) + len(trees[b]) + 1 for b in active)
        layout = tree_layout(cached, [len(f) for f in fed], [t.parents for t in trees])
        ids = torch.tensor([f + [PAD_ID] * (width - len(f)) for f in fed])
        logits, hidden = target(ids, cache, logits_to_keep=scored, layout=layout, hidden=True)
        keep = cached  # finished requests ride along and keep what they had
        for b in active:
            tree, end = trees[b], len(fed[b]) - width + scored
            first = end - len(tree) - 1  # the row scoring the root's children
            path, emitted = walk(logits[b, first:end], tree, params, generator)
            keep_path(cache, b, len(seqs[b]), path)  # after the pending token: the path
            keep[b] = len(seqs[b]) + len(path)
            seqs[b] += emitted
            if getattr(drafters[b], "reads_hidden", False):  # heads read the state that
                last = first + (path[-1] + 1 if path else 0)  # produced the new pending token
                drafters[b].observe(hidden[b, last], len(seqs[b]))
            if stats is not None:  # the shared pass counts once, with the first request
                _record(stats, tree, path, emitted, b == active[0])
        cache.crop(keep)


def tree_speculative_generate(
    target: TinyGPT,
    drafter: TreeDrafter,
    prompt_token_ids: Sequence[int],
    params: SamplingParams,
    max_depth: int = 8,
    generator: torch.Generator | None = None,
    stats: SpeculationStats | None = None,
    walk: Walk | None = None,
    max_nodes: int = 32,
) -> list[int]:
    """:func:`tree_speculate` for one request."""
    return tree_speculate(
        target, [drafter], [prompt_token_ids], params, max_depth, generator, stats, walk, max_nodes
    )[0]
