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
from specdec_lib.engine.sampling import process_logits
from specdec_lib.engine.tree import GrowingTree, draw_child, tree_layout
from specdec_lib.engine.tree_decode import TreeDrafter


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


class EagleTreeDrafter(EagleDrafter, TreeDrafter):
    """Drafts EAGLE-2's dynamic tree: at most ``budget`` nodes, ``width`` children a node
    and ``width`` nodes expanded a level, as deep as the round allows."""

    def __init__(self, head: EagleHead, width: int = 4, budget: int = 12, name: str = "") -> None:
        super().__init__(head, name or f"EAGLE-2 tree (width {width}, {budget} nodes)")
        self.width = check_int("width", width)
        self.budget = check_int("budget", budget)

    def fill(self, tree: GrowingTree, context: list[int], max_depth: int) -> None:
        if not self.ready(context):
            return
        d2t = self.head.d2t
        logits, guess = self.catch_up(context)
        start = len(context) - 1  # the first node's slot in the head's cache
        logprobs: list[float] = []  # each node's own log-probability
        scores: list[float] = []  # and its path's
        fed: list[int] = []  # nodes fed to the head so far, in feeding order
        frontier = [(-1, logits, guess[0, 0], 0.0)]  # (node, logits, guess, score) to expand
        tree.draft_passes = 1
        for depth in range(max_depth):
            level = []
            for node, row, _, score in frontier:
                confidence = (
                    row.softmax(-1) if tree.params.greedy else process_logits(row, tree.params)
                )
                drawn: list[int] = []  # draft ids, in draw order
                for rank in range(self.width):
                    pick = draw_child(row, rank, drawn, tree.params, tree.generator)
                    if pick is None:
                        break
                    drawn.append(pick[0])
                    q = None if pick[1] is None else self._full(pick[1])
                    level.append(tree.add(int(d2t[pick[0]]), node, q))
                    logprobs.append(math.log(max(float(confidence[pick[0]]), 1e-30)))
                    scores.append(score + logprobs[-1])
            if depth + 1 == max_depth or not level:
                break
            expand = sorted(level, key=lambda i: (-scores[i], i))[: self.width]
            expand.sort()  # parents before children, as the layout needs
            guesses = {n: g for n, _, g, _ in frontier}
            feats = torch.stack([guesses[tree.parents[i]] for i in expand])[None]  # (1, w, C)
            kept = len(fed)
            fed += expand
            where = {n: j for j, n in enumerate(fed)}
            parents = [where.get(tree.parents[n], -1) for n in fed]
            layout = tree_layout([start + kept], [len(expand)], [parents], kept=[kept])
            ids = torch.tensor([[tree.tokens[i] for i in expand]])
            out, new = self.head(feats, ids, self.cache, layout=layout)
            tree.draft_passes += 1
            frontier = [(n, out[0, j], new[0, j], scores[n]) for j, n in enumerate(expand)]
        tree.keep(keep_likeliest(tree.parents, logprobs, self.budget))  # the rerank

    def _full(self, q: torch.Tensor) -> torch.Tensor:
        """A draft-vocabulary distribution (V_d,) on the full vocabulary, zero elsewhere."""
        full = torch.zeros(self.vocab_size, dtype=torch.float64)
        full[self.head.d2t] = q
        return full
