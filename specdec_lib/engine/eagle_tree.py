"""EAGLE-2's dynamic draft tree (Li et al. 2024, "EAGLE-2: Faster Inference of Language
Models with Dynamic Draft Trees"): the head grows the tree where it is confident.

A static tree (:class:`~specdec_lib.engine.tree.TreeShape`) spends the same nodes on every
round; EAGLE-2 observes that the draft's own confidence tracks acceptance, so it scores
each node by the product of the draft probabilities along its path (its chance of being
accepted, if the draft were calibrated) and spends the node budget on the likeliest.

* **Expand**: level by level, the ``width`` likeliest nodes of the newest level are fed
  to the head in one pass (the tree layout of :func:`~specdec_lib.engine.tree.tree_layout`
  over the head's own cache: each sees the context and its ancestors), and each gets its
  ``width`` likeliest children (greedy), or ``width`` draws without replacement (sampled).
* **Rerank** (:func:`keep_likeliest`): of every node drawn, the ``budget`` likeliest are
  verified. A node is kept only with its parent and its elder siblings (it is ranked no
  higher than either), so what is verified is a tree, and, sampled, each node's recorded
  distribution (after its elder siblings' tokens were removed) is the one the verifier
  divides by.

Greedy, a node's score is the head's softmax probability (its confidence, as EAGLE-2's);
sampled, the processed distribution's. Either way the score only shapes the tree:
verification is exact whatever it is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from specdec_lib.checks import check_int
from specdec_lib.engine.eagle import EagleDrafter, EagleHead
from specdec_lib.engine.sampling import SamplingParams, process_logits
from specdec_lib.engine.tree import TokenTree, draw_child, tree_layout


def keep_likeliest(parents: Sequence[int], logprobs: Sequence[float], budget: int) -> list[int]:
    """The ``budget`` nodes of a draft tree likeliest to be accepted, kept as a tree
    (EAGLE-2's rerank): their indices, in increasing order.

    ``parents[i]`` is node i's parent, an earlier node, or -1 for a child of the pending
    token; ``logprobs[i]`` is the draft's log-probability of node i's token after its
    parent's (at most 0). A node is accepted only if every node on its path is, so it is
    scored by its path's log-probability: the sum of ``logprobs`` from the pending token
    down to it. It may be kept only with its parent and its elder siblings (its parent's
    earlier children): sampled, siblings are drawn without replacement, and a younger
    sibling's distribution is the draft's with its elders' tokens removed, which the
    verifier may divide by only after testing them. So a node's rank is the lowest of its
    path's log-probability, its parent's rank (0 for the pending token, which is certain)
    and the rank of its next elder sibling; the ``budget`` highest ranks are kept, the lower
    index first on a tie (a parent or an elder sibling ties with a node it bounds). The
    result, ``min(budget, len(parents))`` indices, parents before children, holds every
    kept node's parent and elder siblings.
    """
    budget = check_int("budget", budget, minimum=0)
    if len(logprobs) != len(parents):
        raise ValueError(
            f"logprobs must hold one log-probability per node ({len(parents)}, as parents "
            f"does), got {len(logprobs)}"
        )
    rank: list[float] = []
    path: list[float] = []
    last_child: dict[int, int] = {}  # each parent's latest child so far
    for i, p in enumerate(parents):
        p = check_int(f"parents[{i}]", p, minimum=-1)
        if p >= i:
            raise ValueError(
                f"parents[{i}] must be -1 or an earlier node's index (0 to {i - 1}), got {p}"
            )
        path.append((path[p] if p >= 0 else 0.0) + float(logprobs[i]))
        bound = min(path[i], rank[p] if p >= 0 else 0.0)
        if p in last_child:
            bound = min(bound, rank[last_child[p]])
        last_child[p] = i
        rank.append(bound)
    return sorted(sorted(range(len(rank)), key=lambda i: (-rank[i], i))[:budget])


class EagleTreeDrafter(EagleDrafter):
    """Drafts EAGLE-2's dynamic tree: at most ``budget`` nodes, ``width`` children a node
    and ``width`` nodes expanded a level, as deep as the round allows."""

    def __init__(self, head: EagleHead, width: int = 4, budget: int = 12, name: str = "") -> None:
        super().__init__(head, name or f"EAGLE-2 tree (width {width}, {budget} nodes)")
        self.width = check_int("width", width)
        self.budget = check_int("budget", budget)

    @torch.inference_mode()
    def draft_tree(
        self,
        context: list[int],
        max_depth: int,
        params: SamplingParams,
        generator: torch.Generator | None,
    ) -> TokenTree:
        if max_depth == 0 or not self.ready(context):
            return TokenTree([], [])
        d2t = self.head.d2t
        logits, guess = self.catch_up(context)
        start = len(context) - 1  # the first node's slot in the head's cache
        # every node drawn: token, parent, its own and its path's log-probability, its row
        tokens: list[int] = []
        parents: list[int] = []
        logprobs: list[float] = []
        scores: list[float] = []
        rows: list[torch.Tensor | None] = []
        fed: list[int] = []  # nodes fed to the head so far, in feeding order
        frontier = [(-1, logits, guess[0, 0], 0.0)]  # (node, logits, guess, score) to expand
        passes = 1
        for depth in range(max_depth):
            level = []
            for node, row, _, score in frontier:
                confidence = process_logits(row, params) if not params.greedy else row.softmax(-1)
                drawn: list[int] = []  # draft ids, in draw order
                for rank in range(self.width):
                    pick = draw_child(row, rank, drawn, params, generator)
                    if pick is None:
                        break
                    drawn.append(pick[0])
                    tokens.append(int(d2t[pick[0]]))
                    parents.append(node)
                    logprobs.append(math.log(max(float(confidence[pick[0]]), 1e-30)))
                    scores.append(score + logprobs[-1])
                    rows.append(None if pick[1] is None else self._full(pick[1]))
                    level.append(len(tokens) - 1)
            if depth + 1 == max_depth or not level:
                break
            expand = sorted(level, key=lambda i: (-scores[i], i))[: self.width]
            expand.sort()  # parents before children, as the layout needs
            guesses = {n: g for n, _, g, _ in frontier}
            feats = torch.stack([guesses[parents[i]] for i in expand])[None]  # (1, w, C)
            kept = len(fed)
            fed += expand
            where = {n: j for j, n in enumerate(fed)}
            tree = [where.get(parents[n], -1) for n in fed]
            layout = tree_layout([start + kept], [len(expand)], [tree], kept=[kept])
            ids = torch.tensor([[tokens[i] for i in expand]])
            out, new = self.head(feats, ids, self.cache, layout=layout)
            passes += 1
            frontier = [(n, out[0, j], new[0, j], scores[n]) for j, n in enumerate(expand)]
        return self._rerank(tokens, parents, logprobs, rows, params, passes)

    def _full(self, q: torch.Tensor) -> torch.Tensor:
        """A draft-vocabulary distribution (V_d,) on the full vocabulary, zero elsewhere."""
        full = torch.zeros(self.vocab_size, dtype=torch.float64)
        full[self.head.d2t] = q
        return full

    def _rerank(self, tokens, parents, logprobs, rows, params, passes) -> TokenTree:  # noqa: ANN001
        """The tree of the ``budget`` likeliest nodes (:func:`keep_likeliest`), renumbered."""
        keep = keep_likeliest(parents, logprobs, self.budget)
        new = {old: j for j, old in enumerate(keep)}
        probs = None if params.greedy or not keep else torch.stack([rows[i] for i in keep])
        return TokenTree(
            [tokens[i] for i in keep],
            [new[parents[i]] if parents[i] >= 0 else -1 for i in keep],
            probs,
            passes,
        )
