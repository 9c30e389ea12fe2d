"""Token trees: several drafts at once, verified in one target pass.

A chain proposes one continuation; a tree proposes several that share their prefixes
(SpecInfer, Miao et al. 2024; Medusa, Cai et al. 2024; EAGLE-2, Li et al. 2024). Node i
holds ``tokens[i]`` and hangs under ``parents[i]`` (-1: under the pending token, the last
token of the context, which the cache does not hold yet). Parents come before children.

One pass scores every node: the nodes take the next slots of the cache in index order,
but each sits at the rotary position of its *depth* and attends only to the context and
its own ancestors (:func:`tree_layout`), so node i's logits are those a chain ending in
node i would get. The verifier then walks down from the root (:func:`walk_greedy`,
:func:`walk_sampled`) and :func:`keep_path` moves the accepted path's keys and values
into place, so the cache reads as if the path had been decoded one token at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from specdec_lib.checks import check_int
from specdec_lib.engine.model import KVCache, Layout
from specdec_lib.engine.sampling import SamplingParams, argmax, process_logits, sample
from specdec_lib.engine.verify import residual_distribution


@dataclass(frozen=True)
class TokenTree:
    """Drafted tokens as a tree under the pending token.

    ``probs`` row i (when given) is the distribution ``tokens[i]`` was drawn from, given
    the siblings drawn before it: a node drawn without replacement after siblings x1, x2
    was drawn from q with x1 and x2 removed, and exact multi-draft verification divides by
    that, not by q. ``None`` means deterministic: every node drawn with probability 1.
    """

    tokens: list[int]
    parents: list[int]
    probs: torch.Tensor | None = None
    draft_passes: int = 0

    def __post_init__(self) -> None:
        _check_tree(self.tokens, self.parents)
        if self.probs is not None and tuple(self.probs.shape[:1]) != (len(self.tokens),):
            raise ValueError(f"probs must have one row per node ({len(self.tokens)})")

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def depths(self) -> list[int]:
        """Each node's depth: 0 for the root's children, the first drafted position."""
        return node_depths(self.parents)

    def children(self, node: int) -> list[int]:
        """The children of ``node`` (-1: the root), in the order they were drawn."""
        return [i for i, p in enumerate(self.parents) if p == node]

    def path(self, node: int) -> list[int]:
        """The nodes from the root's child down to ``node``."""
        out = []
        while node >= 0:
            out.append(node)
            node = self.parents[node]
        return out[::-1]


@dataclass(frozen=True)
class TreeShape:
    """A static tree: rank paths, each one's prefix also present, ranks 0..r-1 before r."""

    paths: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        paths = tuple(sorted({tuple(p) for p in self.paths}, key=lambda p: (len(p), p)))
        if not paths:
            raise ValueError("paths must hold at least one rank path, got none")
        have = set(paths)
        for p in paths:
            if not p or any(not isinstance(r, int) or r < 0 for r in p):
                raise ValueError(f"paths must be non-empty tuples of ranks >= 0, got {p}")
            if len(p) > 1 and p[:-1] not in have:
                raise ValueError(f"path {p}'s parent {p[:-1]} must be in the tree too")
            if p[-1] > 0 and p[:-1] + (p[-1] - 1,) not in have:
                raise ValueError(f"path {p} needs its elder sibling {p[:-1] + (p[-1] - 1,)}")
        object.__setattr__(self, "paths", paths)

    @classmethod
    def chain(cls, k: int) -> TreeShape:
        """k nodes, each the first choice after the one before: a chain of k."""
        check_int("k", k)
        return cls(tuple((0,) * d for d in range(1, k + 1)))

    @classmethod
    def branching(cls, widths: Sequence[int]) -> TreeShape:
        """Every node at depth d has ``widths[d]`` children: prod(widths[:d+1]) at depth d."""
        level: list[tuple[int, ...]] = [()]
        paths: list[tuple[int, ...]] = []
        for w in widths:
            check_int("widths", w)
            level = [p + (r,) for p in level for r in range(w)]
            paths += level
        return cls(tuple(paths))

    def __len__(self) -> int:
        return len(self.paths)

    @property
    def depth(self) -> int:
        return max(len(p) for p in self.paths)


def _check_tree(tokens: Sequence[int], parents: Sequence[int]) -> None:
    """``ValueError`` unless ``parents`` has one entry per token and each is -1 or an
    earlier node (so the nodes are in an order where a parent comes first)."""
    if len(tokens) != len(parents):
        raise ValueError(f"tokens and parents must be as long, got {len(tokens)}, {len(parents)}")
    _check_parents(parents)


def _check_parents(parents: Sequence[int]) -> None:
    for i, p in enumerate(parents):
        if not (isinstance(p, int) and -1 <= p < i):
            raise ValueError(f"parents[{i}] must lie in [-1, {i - 1}] (an earlier node), got {p}")


def node_depths(parents: Sequence[int]) -> list[int]:
    depths: list[int] = []
    for p in parents:
        depths.append(0 if p < 0 else depths[p] + 1)
    return depths


def chain(tokens: Sequence[int], probs: torch.Tensor | None = None, passes: int = 0) -> TokenTree:
    """A chain is the tree where every node hangs under the one before."""
    return TokenTree(list(tokens), list(range(-1, len(tokens) - 1)), probs, passes)


def ancestor_mask(parents: Sequence[int]) -> torch.Tensor:
    """(n, n) bool: ``mask[i, j]`` iff node j is node i or one of its ancestors."""
    mask = np.eye(len(parents), dtype=bool)
    for i, p in enumerate(parents):
        if p >= 0:
            mask[i] |= mask[p]  # a parent's row is complete before its child's
    return torch.from_numpy(mask)


def tree_layout(
    cached: Sequence[int],
    fed: Sequence[int],
    parents: Sequence[Sequence[int]],
    kept: Sequence[int] | None = None,
) -> Layout:
    """The layout of a pass whose rows each feed some tokens in a line, then a tree.

    Row b has ``cached[b]`` tokens in the cache and feeds ``fed[b]`` tokens (padding after
    them up to the widest row), of which the last are its tree's nodes in index order. A
    line token sits at its slot and sees every slot up to its own; a node sits at the
    position after the last line token plus its depth and sees the line (the context)
    and its ancestors, never a sibling or a cousin. Each node's key smears with its
    parent's (with the last line token's, for the root's children). ``kept[b]`` of the
    tree's first nodes may already be in the cache from an earlier pass (a drafter
    growing its tree level by level): then the row feeds only the rest, and nothing else.
    """
    rows = len(cached)
    kept = [0] * rows if kept is None else list(kept)
    if not len(fed) == len(parents) == len(kept) == rows:
        raise ValueError(
            f"cached, fed, parents and kept must have one entry per row, got {rows}, "
            f"{len(fed)}, {len(parents)}, {len(kept)}"
        )
    starts = []
    for c, f, tree, k in zip(cached, fed, parents, kept, strict=True):
        _check_parents(tree)
        new = len(tree) - k
        start = c - k + f - new  # the tree's first slot; the last line token sits before it
        if not (0 <= k <= min(len(tree), c) and new <= f and start >= 1) or (k and f != new):
            raise ValueError(
                f"a row must feed its tree's {new} new nodes after >= 1 token (only them "
                f"if {k} are kept), got fed={f}, cached={c}"
            )
        starts.append(start)
    width = max(fed)
    L = max(c + width for c in cached)
    # Built in NumPy, a handful of array operations per row, then handed over in one piece:
    # the loop runs every round, and each torch call on tensors this small is mostly overhead.
    slots = np.asarray(cached)[:, None] + np.arange(width)  # (rows, width)
    positions = slots.copy()
    mask = np.arange(L)[None, None, :] <= slots[:, :, None]  # the line, and padding
    before = np.repeat(np.maximum(np.arange(L) - 1, 0)[None], rows, axis=0)
    for b, (f, tree, k, start) in enumerate(zip(fed, parents, kept, starts, strict=True)):
        n = len(tree)
        if n == k:
            continue
        rows_fed = slice(f - (n - k), f)
        parent = np.asarray(tree)
        positions[b, rows_fed] = start + np.asarray(node_depths(tree))[k:]
        mask[b, rows_fed, start:] = False
        mask[b, rows_fed, start : start + n] = ancestor_mask(tree).numpy()[k:]
        before[b, start : start + n] = np.where(parent < 0, start - 1, start + parent)
    return Layout(
        torch.from_numpy(positions), torch.from_numpy(mask)[:, None], torch.from_numpy(before)
    )


def keep_path(cache: KVCache, row: int, start: int, nodes: Sequence[int]) -> None:
    """Move the keys and values of tree ``nodes`` (a root-to-node path, tree indices) in
    ``row`` from slots ``start + node`` to ``start, start + 1, ...``. Cropped to the
    path's end, the cache then holds what decoding the path one token at a time would
    have put there: the rotary positions were the path's own (depths), and the keys are
    stored before the smear, which reads each key's predecessor when it attends."""
    if list(nodes) != sorted(set(nodes)) or (nodes and (nodes[0] < 0 or start < 1)):
        raise ValueError(f"nodes must be a path, in increasing tree order, got {list(nodes)}")
    if list(nodes) == list(range(len(nodes))):
        return  # the path is the tree's first branch, already where decoding puts it
    src = torch.tensor([start + i for i in nodes], dtype=torch.long)
    dst = torch.arange(start, start + len(nodes))
    for buffers in (cache.k, cache.v):
        for layer in buffers:
            layer[row, :, dst] = layer[row, :, src]  # gathered first, so overlaps are safe


def ranked(logits: torch.Tensor, rank: int) -> int:
    """The ``rank``-th likeliest token of a row of logits (0: the argmax), ties to the lower
    id, as a stable sort would order them; ``topk``, not a full sort, which costs ten times
    as much on a 4,255-token row and runs for every node of every tree."""
    if rank == 0:
        return argmax(logits)
    top = torch.topk(logits, rank + 1)
    order = sorted(zip((-top.values).tolist(), top.indices.tolist(), strict=True))
    return order[rank][1]


def _one_hot(token: int, vocab_size: int) -> torch.Tensor:
    return torch.nn.functional.one_hot(torch.tensor(token), vocab_size).to(torch.float64)


def walk_greedy(logits: torch.Tensor, tree: TokenTree) -> tuple[list[int], list[int]]:
    """Greedy verification of a tree: from the root, follow the child whose token is the
    target's argmax; stop where no child is. ``logits`` (n+1, V): row 0 scores the
    root's children, row 1 + i node i's. Returns the path (tree indices) and the
    emitted tokens (the path's, then the target's own next token)."""
    best = argmax(logits)
    node, path = -1, []
    while True:
        choice = best[node + 1]
        nxt = next((c for c in tree.children(node) if tree.tokens[c] == choice), None)
        if nxt is None:
            return path, [tree.tokens[i] for i in path] + [choice]
        node = nxt
        path.append(node)


def walk_sampled(
    logits: torch.Tensor,
    tree: TokenTree,
    params: SamplingParams,
    generator: torch.Generator | None,
    update_residual: bool = True,
) -> tuple[list[int], list[int]]:
    """Multi-draft verification (SpecInfer's rule): exact for any tree, sampled or not.

    At a node, the target's distribution r = p starts the test of its children, in the
    order they were drawn. Child x, drawn from q_x (``tree.probs``), is accepted with
    probability min(1, r(x) / q_x(x)); on rejection, r becomes norm(max(0, r - q_x)), the
    mass the rejected child did not cover, and the next child is tested against that. If
    every child is rejected, the token comes from r. Each test is chapter 6's rule with r
    as its target, so by induction the token that leaves a node is distributed as p.
    ``update_residual=False`` is WRONG ON PURPOSE: each residual is taken from p and the
    last rejected child only, forgetting the siblings rejected before it.
    """
    p = process_logits(logits, params)  # (n+1, V)
    q = None if tree.probs is None else tree.probs.detach().to(torch.float64)
    node, path = -1, []
    while True:
        r = p[node + 1]
        for child in tree.children(node):
            x = tree.tokens[child]
            qx = _one_hot(x, r.shape[-1]) if q is None else q[child]
            u = float(torch.rand((), generator=generator, dtype=torch.float64))
            if u < min(1.0, float(r[x]) / float(qx[x])):
                node = child
                path.append(child)
                break
            r = residual_distribution(r if update_residual else p[node + 1], qx)
        else:
            return path, [tree.tokens[i] for i in path] + [sample(r, generator)]


def typical_walk(
    logits: torch.Tensor,
    tree: TokenTree,
    params: SamplingParams,
    generator: torch.Generator | None,
    threshold: float = 0.09,
    alpha: float = 0.3,
) -> tuple[list[int], list[int]]:
    """LOSSY ON PURPOSE: Medusa's typical acceptance (Cai et al. 2024, section 2.3.1).

    A child is accepted if the target gives it more than min(threshold,
    alpha * exp(-entropy of p)); the first such child (in drawn order) is taken, and where
    none is, the token is drawn from p. It accepts more than the exact rule and its output
    is not distributed as p; how far it lands from p is measured, not assumed."""
    p = process_logits(logits, params)
    node, path = -1, []
    while True:
        r = p[node + 1]
        entropy = float(-(r[r > 0] * r[r > 0].log()).sum())
        bar = min(threshold, alpha * float(torch.exp(torch.tensor(-entropy))))
        nxt = next((c for c in tree.children(node) if float(r[tree.tokens[c]]) > bar), None)
        if nxt is None:
            return path, [tree.tokens[i] for i in path] + [sample(r, generator)]
        node = nxt
        path.append(nxt)


def remaining(q: torch.Tensor, drawn: Sequence[int]) -> torch.Tensor | None:
    """``q`` with the tokens already ``drawn`` removed and the rest renormalised: the
    distribution the next draw without replacement comes from (``None``: nothing left)."""
    left = q.to(torch.float64).clone()
    left[list(drawn)] = 0.0
    total = float(left.sum())
    return None if total <= 1e-12 else left / total


def draw_child(
    logits: torch.Tensor,
    rank: int,
    elder: Sequence[int],
    params: SamplingParams,
    generator: torch.Generator | None,
) -> tuple[int, torch.Tensor | None] | None:
    """A node's rank-``rank`` child from its drafter's ``logits``, after its ``elder``
    siblings' tokens: greedy, the rank-th likeliest token (no distribution); sampled, a
    draw without replacement, with the distribution it was drawn from (``None``: the
    drafter's processed distribution has nothing left to draw)."""
    if params.greedy:
        return ranked(logits, rank), None
    q = remaining(process_logits(logits, params), elder)
    return None if q is None else (sample(q, generator), q)


class GrowingTree:
    """A tree a drafter is drawing, with the round's sampling ``params`` and ``generator``:
    greedy, a node's rank-r child is the r-th likeliest token; sampled, the r-th draw without
    replacement, kept with the distribution it was drawn from. ``index`` maps each rank path
    drawn from a :class:`TreeShape` (:meth:`grow`) to its node."""

    def __init__(self, params: SamplingParams, generator: torch.Generator | None) -> None:
        self.params, self.generator = params, generator
        self.index: dict[tuple[int, ...], int] = {}
        self.tokens: list[int] = []
        self.parents: list[int] = []
        self.rows: list[torch.Tensor | None] = []
        self.draft_passes = 0

    def add(self, token: int, parent: int, row: torch.Tensor | None = None) -> int:
        """Node ``token`` under ``parent`` (-1: the root), drawn from ``row``; its index."""
        self.tokens.append(token)
        self.parents.append(parent)
        self.rows.append(row)
        return len(self.tokens) - 1

    def grow(
        self,
        paths: Sequence[tuple[int, ...]],
        logits_for: Callable[[tuple[int, ...]], torch.Tensor],
    ) -> None:
        """Draw each of ``paths`` in order, from the drafter's ``logits_for(path)``, after its
        parent and its elder siblings (ranks below ``path[-1]``). A node is drawn without
        replacement after all its elders, and a restrictive top-k or top-p can leave fewer
        tokens than a node has children: a node whose parent or elder was left out (nothing
        left to draw) is left out too, so the tree stays valid."""
        for path in paths:
            elders = [path[:-1] + (r,) for r in range(path[-1])]
            if any(p not in self.index for p in [path[:-1], *elders] if p):
                continue
            elder = [self.tokens[self.index[p]] for p in elders]
            drawn = draw_child(logits_for(path), path[-1], elder, self.params, self.generator)
            if drawn is not None:
                self.index[path] = self.add(drawn[0], self.index.get(path[:-1], -1), drawn[1])

    def keep(self, nodes: Sequence[int]) -> None:
        """Keep only ``nodes`` (in increasing order, each with its parent), renumbered."""
        new = {old: j for j, old in enumerate(nodes)}
        self.parents = [new[self.parents[i]] if self.parents[i] >= 0 else -1 for i in nodes]
        self.tokens = [self.tokens[i] for i in nodes]
        self.rows = [self.rows[i] for i in nodes]
        self.index = {path: new[i] for path, i in self.index.items() if i in new}

    def tree(self) -> TokenTree:
        """The tree drawn, with its nodes' distributions only if they were sampled (a
        deterministic drafter adds its nodes without one: each drawn with probability 1)."""
        sampled = not self.params.greedy and self.rows and self.rows[0] is not None
        probs = torch.stack(self.rows) if sampled else None
        return TokenTree(self.tokens, self.parents, probs, self.draft_passes)


def is_chain(tree: TokenTree | GrowingTree) -> bool:
    """Every node under the one before (or no node at all): a chain drafter's proposal, which
    the loop verifies with a plain causal pass and the chain rules."""
    return tree.parents == list(range(-1, len(tree.parents) - 1))


Walk = Callable[
    [torch.Tensor, TokenTree, SamplingParams, torch.Generator | None], tuple[list[int], list[int]]
]
