"""Chapter 12's sampled-tree experiment: several drafts at one node, the root's children
drawn without replacement from the drafter's q, and what a tree walk then emits.

:func:`sibling_draws` enumerates every ordered draw of m children with its probability
(each child's row recorded as what it was drawn from, or, as the with-replacement rule
wrongly assumes, q for all); :func:`exact_first_token` turns those draws into the exact
distribution of the first token a walk emits, and :func:`sampled_first_tokens` draws
seeded rounds of it, the sample a distribution test reads against the target's.
(Which static tree to draft, from measured ranks, is the ``benchmarks/trees.py``
benchmark's own calibration.)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from specdec_lib.analysis.enumeration import enumerate_outcomes
from specdec_lib.checks import check_int
from specdec_lib.engine.sampling import SamplingParams
from specdec_lib.engine.tree import TokenTree, Walk, remaining

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
