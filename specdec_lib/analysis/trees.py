"""Which static tree to draft: the shape the measured ranks ask for (Medusa's recipe).

A static tree is worth the expected length of its accepted path. Under greedy
verification, a node is on the accepted path when every token on its path is the
target's choice, and a depth-d node of rank r is the target's choice when the drafter's
r-th guess for that depth is. So with ``hits[d][r]``, the measured chance that the
drafter's rank-r guess at depth d is the target's token, a node's chance is the product
of its path's hits (assuming depths independent, which chapter 9 showed fails for chains
far out), the tree's expected accepted length is the sum over its nodes, and the best
tree of n nodes takes the n likeliest nodes, each with its parent and elder siblings.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np
import torch

from specdec_lib.analysis.enumeration import enumerate_outcomes
from specdec_lib.checks import check_int
from specdec_lib.engine.generate import generate
from specdec_lib.engine.heads import MedusaHeads
from specdec_lib.engine.model import TinyGPT
from specdec_lib.engine.sampling import SamplingParams
from specdec_lib.engine.tree import TokenTree, TreeShape, remaining
from specdec_lib.engine.tree_decode import Walk


def _ranks(logits: torch.Tensor, truth: torch.Tensor) -> torch.Tensor:
    """The rank (0: likeliest) of each true token among each row's logits (ties: stable)."""
    above = logits > logits.gather(-1, truth[..., None])
    return above.sum(-1)


@torch.inference_mode()
def rank_hits(
    target: TinyGPT,
    prompts: Sequence[list[int]],
    max_tokens: int,
    depth: int,
    ranks: int,
    draft: TinyGPT | None = None,
    heads: MedusaHeads | None = None,
) -> np.ndarray:
    """``hits[d][r]``: how often the drafter's rank-r guess at depth d is the token the
    target writes (greedy), over the target's continuations of ``prompts``.

    A draft model guesses every depth from the true prefix, so its row is the same at
    every depth; head d + 1 guesses depth d from the hidden state before the pending token.
    """
    check_int("depth", depth)
    check_int("ranks", ranks)
    if (draft is None) == (heads is None):
        raise ValueError("give exactly one of draft and heads")
    counts = np.zeros((depth, ranks))
    total = np.zeros(depth)
    params = SamplingParams(max_tokens=max_tokens)
    for prompt in prompts:
        ids = list(prompt) + generate(target, prompt, params)
        x = torch.tensor([ids])
        first = len(prompt) - 1  # the position whose next token is the first written
        if draft is not None:
            r = _ranks(draft(x)[0, first:-1], x[0, first + 1 :])  # (written,)
            for d in range(depth):
                counts[d] += np.bincount(r.clamp(max=ranks).numpy(), minlength=ranks + 1)[:ranks]
                total[d] += len(r)
        else:
            _, hidden = target(x, hidden=True)
            guesses = heads(hidden[0])  # (n_heads, T, V)
            for d in range(min(depth, heads.n_heads)):
                # head d + 1 at position t guesses token t + 2 + d; t ranges over the
                # positions before each pending token (the pending token is written)
                t = torch.arange(first, len(ids) - 2 - d)
                r = _ranks(guesses[d, t], x[0, t + 2 + d])
                counts[d] += np.bincount(r.clamp(max=ranks).numpy(), minlength=ranks + 1)[:ranks]
                total[d] += len(t)
    return counts / np.maximum(total, 1)[:, None]


def best_shape(hits: np.ndarray, n_nodes: int) -> tuple[TreeShape, float]:
    """The static tree of ``n_nodes`` nodes with the largest expected accepted length under
    ``hits`` (see the module), and that length. Greedy over a heap of candidate nodes: a
    node becomes a candidate once its parent and its elder sibling are in the tree."""
    check_int("n_nodes", n_nodes)
    depth, ranks = hits.shape
    heap: list[tuple[float, tuple[int, ...]]] = [(-float(hits[0, 0]), (0,))]
    chosen: list[tuple[int, ...]] = []
    value: dict[tuple[int, ...], float] = {(): 1.0}
    while heap and len(chosen) < n_nodes:
        neg, path = heapq.heappop(heap)
        chosen.append(path)
        value[path] = -neg
        d, r = len(path) - 1, path[-1]
        if r + 1 < ranks:  # the next sibling
            sibling = path[:-1] + (r + 1,)
            heapq.heappush(heap, (-value[path[:-1]] * float(hits[d, r + 1]), sibling))
        if d + 1 < depth:  # the first child
            heapq.heappush(heap, (-value[path] * float(hits[d + 1, 0]), path + (0,)))
    if len(chosen) < n_nodes:
        raise ValueError(f"n_nodes must be at most {len(chosen)} for hits of shape {hits.shape}")
    return TreeShape(tuple(chosen)), sum(value[p] for p in chosen)


# --- multi-draft sampling at one node: exact, and sampled ------------------------------

_RECORDED = ("drawn", "parent")


def _sibling_tree(tokens: list[int], q: torch.Tensor, recorded: str) -> TokenTree:
    """Root children ``tokens`` drawn in turn without replacement from ``q``; each row is
    what its token was drawn from (``"drawn"``), or q for all (``"parent"``: the
    with-replacement rule's assumption, wrong for these draws)."""
    rows = [remaining(q, tokens[:i]) if recorded == "drawn" else q for i in range(len(tokens))]
    return TokenTree(list(tokens), [-1] * len(tokens), torch.stack(rows))


def sibling_draws(
    q: torch.Tensor, m: int, recorded: str = "drawn"
) -> list[tuple[float, TokenTree]]:
    """Every ordered draw of ``m`` root children without replacement from ``q`` (V,), with
    its probability and its tree (see :func:`_sibling_tree` for ``recorded``)."""
    check_int("m", m)
    if recorded not in _RECORDED:
        raise ValueError(f"recorded must be one of {_RECORDED}, got {recorded!r}")
    q = q.to(torch.float64)
    out: list[tuple[float, TokenTree]] = []

    def extend(prefix: list[int], prob: float, left: torch.Tensor) -> None:
        if len(prefix) == m or float(left.sum()) <= 1e-12:
            out.append((prob, _sibling_tree(prefix, q, recorded)))
            return
        total = float(left.sum())
        for x in torch.nonzero(left > 0).flatten().tolist():
            rest = left.clone()
            rest[x] = 0.0
            extend(prefix + [x], prob * float(left[x]) / total, rest)

    extend([], 1.0, q.clone())
    return out


def exact_first_token(
    walk: Walk,
    logits: torch.Tensor,
    draws: Sequence[tuple[float, TokenTree]],
    params: SamplingParams,
) -> torch.Tensor:
    """The exact distribution (V,) of the first token ``walk`` emits: the draws of the
    tree enumerated (``draws``, as from :func:`sibling_draws`), the walk's own random
    draws by :func:`~specdec_lib.analysis.enumeration.enumerate_outcomes`. ``logits``
    (n + 1, V) must have a row for every node of the largest tree."""
    vocab = logits.shape[-1]
    out = torch.zeros(vocab, dtype=torch.float64)
    checked: set[bytes] = set()
    for prob, tree in draws:
        rows = logits[: len(tree) + 1]

        def call(g, tree=tree, rows=rows):  # noqa: ANN001, ANN202
            path, emitted = walk(rows, tree, params, g)
            return emitted, len(path)

        for o in enumerate_outcomes(call, checked=checked):
            out += prob * o.probability * o.token_distribution(0, vocab)
    return out


def sampled_first_tokens(
    walk: Walk,
    logits: torch.Tensor,
    q: torch.Tensor,
    m: int,
    params: SamplingParams,
    n: int,
    seed: int,
    recorded: str = "drawn",
) -> np.ndarray:
    """The first token of ``n`` seeded rounds: ``m`` root children drawn without
    replacement from ``q``, then ``walk``; the sample the distribution test reads."""
    check_int("n", n)
    generator = torch.Generator().manual_seed(seed)
    tokens = np.empty(n, dtype=np.int64)
    q = q.to(torch.float64)
    for i in range(n):
        drawn: list[int] = []
        while len(drawn) < m and (left := remaining(q, drawn)) is not None:
            drawn.append(int(torch.multinomial(left, 1, generator=generator)))
        tree = _sibling_tree(drawn, q, recorded)
        tokens[i] = walk(logits[: len(tree) + 1], tree, params, generator)[1][0]
    return tokens
