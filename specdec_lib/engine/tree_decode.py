"""Speculative decoding with token trees: the tree drafters, and the speculation loop's
defaults for trees (:func:`~specdec_lib.engine.generate.speculate` takes any drafter).

A static tree's shape is a list of rank paths, as Medusa writes its trees: ``(0,)`` is
the drafter's first choice for the first position, ``(1,)`` its second, ``(0, 0)`` the
first choice after the first choice. Sampled, "first" and "second" are the first and
second draws *without replacement*, and each node keeps the distribution it was drawn
from (:class:`~specdec_lib.engine.tree.TokenTree`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import torch

from specdec_lib.checks import check_int
from specdec_lib.engine.drafters import DraftModelDrafter, NgramDrafter
from specdec_lib.engine.generate import speculate
from specdec_lib.engine.model import TinyGPT
from specdec_lib.engine.sampling import SamplingParams
from specdec_lib.engine.tree import GrowingTree, TokenTree, TreeShape, is_chain, tree_layout


class TreeDrafter:
    """A drafter that proposes a token tree a round. The engine calls :meth:`draft_tree` on
    its own context and checks the tree it gets; a drafter draws its nodes in :meth:`fill`,
    into the :class:`GrowingTree` it is handed, which holds the round's sampling."""

    name: str

    @torch.inference_mode()
    def draft_tree(
        self,
        context: list[int],
        max_depth: int,
        params: SamplingParams,
        generator: torch.Generator | None,
    ) -> TokenTree:
        """Up to ``max_depth`` levels of nodes after ``context`` (none at depth 0)."""
        tree = GrowingTree(params, generator)
        if max_depth > 0:
            self.fill(tree, context, max_depth)
        return tree.tree()

    def fill(self, tree: GrowingTree, context: list[int], max_depth: int) -> None:
        """Draw up to ``max_depth`` levels of nodes after ``context`` into ``tree``."""
        raise NotImplementedError


class DraftModelTreeDrafter(DraftModelDrafter, TreeDrafter):
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

    def fill(self, tree: GrowingTree, context: list[int], max_depth: int) -> None:
        logits = {(): self.logits_after(context)}  # rank path -> logits of its next token
        tree.draft_passes = 1
        for depth in range(1, min(self.shape.depth, max_depth) + 1):
            if depth > 1:  # score the last level's nodes, after their ancestors (cached)
                done = sum(len(p) < depth - 1 for p in tree.index)  # nodes of earlier levels
                if done == len(tree.tokens):  # the last level drew nothing: nothing to grow
                    break
                fed = tree.tokens[done:]
                layout = None  # a chain so far is a plain pass
                if not is_chain(tree):
                    cached = [len(context) + done]
                    layout = tree_layout(cached, [len(fed)], [tree.parents], kept=[done])
                out = self.model(torch.tensor([fed]), self.cache, layout=layout)[0]
                tree.draft_passes += 1
                logits.update(
                    {p: out[i - done] for p, i in tree.index.items() if len(p) == depth - 1}
                )
            tree.grow([p for p in self.shape.paths if len(p) == depth], lambda p: logits[p[:-1]])
        self.cache.crop(len(context))  # the tree's entries go; the context stays cached


class NgramTreeDrafter(TreeDrafter):
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
        self._lookup = NgramDrafter(self.max_n, self.min_n)
        kind = "chain" if max_paths == 1 else "tree"
        self.name = f"n-gram {kind} ({max_nodes} nodes)"

    def continuations(self, context: Sequence[int], length: int) -> list[list[int]]:
        """What followed each earlier occurrence of the suffix, up to ``length`` tokens."""
        return list(self._continuations(context, length))

    def _continuations(self, context: Sequence[int], length: int) -> Iterator[list[int]]:
        """:meth:`continuations` one at a time, found by the chain's own search
        (:meth:`~specdec_lib.engine.drafters.NgramDrafter.matches`), each occurrence only
        when the ones before it are used up: a trie filled by its latest, longest match
        (every round on copy) costs one search, as the chain's lookup does."""
        for start, n in self._lookup.matches(context):
            yield list(context[start + n : start + n + length])

    def fill(self, tree: GrowingTree, context: list[int], max_depth: int) -> None:
        node_of: dict[tuple[int, int], int] = {}  # (parent, token) -> the node, if drafted
        for continuation in itertools.islice(
            self._continuations(context, max_depth), self.max_paths
        ):
            node = -1
            for token in continuation:
                child = node_of.get((node, token))
                if child is None:
                    if len(tree.tokens) == self.max_nodes:
                        break
                    child = node_of[node, token] = tree.add(token, node)
                node = child
            if len(tree.tokens) == self.max_nodes:
                break


def tree_speculate(
    target: TinyGPT,
    drafters: Sequence[TreeDrafter],
    prompts: Sequence[Sequence[int]],
    params: SamplingParams,
    k: int = 8,
    **options: Any,
) -> list[list[int]]:
    """:func:`~specdec_lib.engine.generate.speculate` with a tree's defaults: up to ``k`` = 8
    levels a round, and ``max_nodes`` = 32 nodes a tree, for which the window needs room."""
    options.setdefault("max_nodes", 32)
    return speculate(target, drafters, prompts, params, k, **options)


def tree_speculative_generate(
    target: TinyGPT,
    drafter: TreeDrafter,
    prompt_token_ids: Sequence[int],
    params: SamplingParams,
    k: int = 8,
    **options: Any,
) -> list[int]:
    """:func:`tree_speculate` for one request."""
    return tree_speculate(target, [drafter], [prompt_token_ids], params, k, **options)[0]
