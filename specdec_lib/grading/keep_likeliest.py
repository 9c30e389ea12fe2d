"""Chapter 13's exercise on EAGLE-2's dynamic tree, which drafted nodes to verify, in one
module: the answer in the student's form, its slips, the cases and the check.

``keep_likeliest(parents, logprobs, budget) -> list[int]``: ``parents[i]`` is node i's
parent (an earlier node, or -1 for a child of the pending token) and ``logprobs[i]`` the
draft's log-probability of its token after its parent's. A node is accepted only with its
whole path, so it is scored by its path's log-probability; it may be kept only with its
parent and its elder siblings, so its rank is the lowest of that score, its parent's rank
and its elder sibling's rank. The ``budget`` highest ranks are kept (the lower index first
on a tie) and returned in increasing order. The reference is the engine's own
:func:`~specdec_lib.engine.eagle_tree.keep_likeliest`.

The slips, each the answer with one rule changed: nodes ranked by their own
log-probability (with the bounds, or alone); no elder-sibling bound (which is the top
``budget`` by path alone: a path's log-probability never rises from a parent to its
child, so the parent's bound only decides ties); a node bounded by its elder sibling's or
its parent's path instead of its rank (a younger sibling, or a child, kept above a node
that its own elder had bounded); the kept nodes in rank order; ties to the later index
(``np.argsort(rank, kind="stable")[::-1]``); one node too many or too few.

Every log-probability in the cases is a multiple of 2**-10 above -64, so every path's sum
is exact in float64 and float32, whatever the order it is added in; a student who works
with probabilities instead (products) keeps every tie, and every other pair of paths
differs by a factor of at least exp(2**-10), far beyond rounding. A student's answer is
matched with the slips first (as :class:`~.answers.ExactCheck` does); failing that, its
first broken rule is named (the count, the order, an orphan, a skipped elder sibling).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from specdec_lib.engine import eagle_tree

from .answers import closest_mistake
from .mistakes import register
from .report import Diagnosis as D
from .report import Report
from .sandbox import Abort, as_int, call_student, forbidden, run_check

_NAME = "check_keep_likeliest"
_STEP = 2.0**-10  # every log-probability of a case is a multiple of it

_Case = tuple[tuple[int, ...], tuple[float, ...], int, str]  # parents, logprobs, budget, what


# --- the answer, and its slips ---------------------------------------------------------


def _reference(parents: Sequence[int], logprobs: Sequence[float], budget: int) -> list[int]:
    """The library's answer (a function of the grader's, so that a student handing in the
    library's own ``keep_likeliest`` is told so)."""
    return eagle_tree.keep_likeliest(list(parents), list(logprobs), budget)


def _keep_as(
    score: str = "path",
    parent: str | None = "rank",
    elder: str | None = "rank",
    ties: int = 1,
    tree_order: bool = True,
    extra: int = 0,
) -> Callable:
    """The rerank with one rule changed: a node scored by its ``"path"``'s log-probability
    or its ``"own"``; bounded by its parent's and its elder sibling's ``"rank"``, their
    ``"score"``, or not at all (``None``); ties to the lower index (``ties=1``) or the higher
    (``-1``); the kept nodes in increasing order or in rank order; ``budget + extra`` kept
    (sliced as Python slices, so ``budget - 1`` keeps all but one at budget 0)."""

    def keep_likeliest(parents, logprobs, budget):
        path: list[float] = []
        own: list[float] = []
        rank: list[float] = []
        last: dict[int, int] = {}
        for i, p in enumerate(parents):
            path.append((path[p] if p >= 0 else 0.0) + float(logprobs[i]))
            own.append(path[i] if score == "path" else float(logprobs[i]))
            bounds = [own[i]]
            if p >= 0 and parent is not None:
                bounds.append(rank[p] if parent == "rank" else own[p])
            if p in last and elder is not None:
                bounds.append(rank[last[p]] if elder == "rank" else own[last[p]])
            last[p] = i
            rank.append(min(bounds))
        kept = sorted(range(len(rank)), key=lambda i: (-rank[i], ties * i))[: budget + extra]
        return sorted(kept) if tree_order else kept

    return keep_likeliest


#: The slips: ``(label, function, diagnosis)``, registered below.
_SLIPS = (
    ("ranks by its own log-probability", _keep_as(score="own"), D.OWN_PROBABILITY),
    (
        "the top budget by its own log-probability alone",
        _keep_as(score="own", parent=None, elder=None),
        D.OWN_PROBABILITY,
    ),
    ("no elder-sibling bound (the top budget by path alone)", _keep_as(elder=None), D.SKIPS_ELDER),
    ("bounded by the elder sibling's path, not its rank", _keep_as(elder="score"), D.SKIPS_ELDER),
    ("bounded by the parent's path, not its rank", _keep_as(parent="score"), D.ORPHANS),
    ("in rank order, not tree order", _keep_as(tree_order=False), D.RANK_ORDER),
    ("ties to the later node", _keep_as(ties=-1), D.TIES_REVERSED),
    ("one node too many", _keep_as(extra=1), D.BUDGET_OFF_BY_ONE),
    ("one node too few", _keep_as(extra=-1), D.BUDGET_OFF_BY_ONE),
)

register(_NAME, _reference, *_SLIPS)


# --- the cases ---------------------------------------------------------------------------

#: Trees where each slip shows, whatever the seed: (parents, logprobs, budget, what).
HAND_MADE: tuple[_Case, ...] = (
    ((-1, -1), (-1.5, -0.25), 1, "sampled: the younger sibling is the likelier"),
    ((-1, -1, 0), (-0.75, -1.0, -0.75), 2, "two likely steps against one less likely"),
    ((-1, -1, 0), (-1.0, -2.0, -0.5), 3, "a child likelier than its uncle"),
    ((-1, -1, 1), (-1.0, -0.25, -0.125), 2, "a younger sibling's likely child"),
    ((-1, -1, -1), (-2.0, -1.0, -0.5), 1, "three siblings, each likelier than the last"),
    ((-1, -1, 0, 1), (-0.5, -0.5, -0.25, -0.125), 1, "two equally likely siblings"),
    (
        (-1, 0, 1, 2, 3, 4, 5, 6, 7, 8),
        (-0.25, -0.5, -0.125, 0.0, -1.0, -0.0625, -2.0, 0.0, -0.5, -0.25),
        3,
        "a deep chain with a certain step (probability 1)",
    ),
    (
        (-1,) * 8,
        (-2.0, -0.5, -3.0, -0.25, -1.0, -4.0, -0.75, -2.5),
        3,
        "a wide root, drawn without replacement",
    ),
    ((-1, 0, 0, 1, 2), (-0.5, -1.0, -0.25, -0.5, -0.75), 0, "budget 0"),
    ((-1, -1, 0, 2), (-0.5, -1.25, -0.375, -2.0), 7, "a budget larger than the tree"),
    ((-1, -1, 0, 0, 1), (-0.25, -1.5, -1.0, -0.5, -0.125), 5, "a budget of the whole tree"),
)


def _logprob(q: float) -> float:
    """log q rounded down to a multiple of :data:`_STEP` (still a log-probability)."""
    return math.floor(math.log(q) / _STEP) * _STEP


def _children(rng: random.Random, width: int, sampled: bool) -> list[float]:
    """The log-probabilities of up to ``width`` children of one node: the likeliest tokens
    of a random distribution, in order (greedy), or draws without replacement, in the order
    drawn (sampled); a certain token (probability 1) an eighth of the time."""
    if rng.random() < 0.125:
        return [0.0]
    size = rng.randint(max(width, 2), 10)
    weights = [math.exp(rng.gauss(0.0, rng.choice((0.5, 1.5, 3.0)))) for _ in range(size)]
    q = [max(w / sum(weights), 1e-4) for w in weights]
    if not sampled:
        return [_logprob(x) for x in sorted(q, reverse=True)[:width]]
    left, drawn = list(range(size)), []
    for _ in range(width):
        pick = rng.choices(left, weights=[q[t] for t in left])[0]
        left.remove(pick)
        drawn.append(_logprob(q[pick]))
    return drawn


def _eagle_tree(rng: random.Random) -> tuple[list[int], list[float], str]:
    """A tree grown as EAGLE-2 grows it: level by level, the ``width`` likeliest nodes of
    the newest level each get ``width`` children, greedy or sampled."""
    width, depth, sampled = rng.randint(1, 4), rng.randint(1, 5), rng.random() < 0.6
    parents: list[int] = []
    logprobs: list[float] = []
    path: list[float] = []
    frontier = [-1]
    for _ in range(depth):
        level = []
        for node in frontier:
            for lp in _children(rng, width, sampled):
                parents.append(node)
                logprobs.append(lp)
                path.append((path[node] if node >= 0 else 0.0) + lp)
                level.append(len(parents) - 1)
        frontier = sorted(sorted(level, key=lambda i: (-path[i], i))[:width])
    what = f"EAGLE-2's tree, width {width}, {'sampled' if sampled else 'greedy'}"
    return parents, logprobs, what


def _random_tree(rng: random.Random) -> tuple[list[int], list[float], str]:
    """Any tree of 1 to 16 nodes: each parent an earlier node or -1; log-probabilities
    from -4 to 0, some of them repeated and some 0."""
    n = rng.randint(1, 16)
    parents = [rng.randint(-1, i - 1) for i in range(n)]
    choices = [-rng.randint(0, 4096) * _STEP for _ in range(4)]
    logprobs = [
        rng.choice(choices) if rng.random() < 0.3 else -rng.randint(0, 4096) * _STEP
        for _ in range(n)
    ]
    return parents, logprobs, "a random tree"


def cases(seed: int) -> list[_Case]:
    """The hand-made trees, then 70 random ones (EAGLE-2's and any), smallest first, with
    budgets from 0 to one past the tree's size."""
    rng = random.Random(f"keep-likeliest/{seed}")
    drawn = []
    for k in range(70):
        parents, logprobs, what = (_eagle_tree if k % 2 else _random_tree)(rng)
        n = len(parents)
        budget = rng.randint(0, n + 1) if rng.random() < 0.2 else rng.randint(1, max(n - 1, 1))
        drawn.append((tuple(parents), tuple(logprobs), budget, what))
    return list(HAND_MADE) + sorted(drawn, key=lambda c: len(c[0]))


# --- the check -----------------------------------------------------------------------------


def _answer(fn: Callable, name: str, case: _Case) -> tuple[int, ...]:
    """The student's kept indices as a tuple of ints, each a node's, none twice."""
    parents, logprobs, budget, _ = case
    got = call_student(fn, name, list(parents), list(logprobs), budget)
    if isinstance(got, torch.Tensor | np.ndarray) and got.ndim == 1:
        got = got.tolist()
    if not isinstance(got, list | tuple):
        hint = " (is a `return` missing?)" if got is None else ""
        raise Abort(D.WRONG_TYPE, f"Return a list of node indices{hint}; got {got!r:.80}.")
    kept = tuple(as_int(i, "each kept index") for i in got)
    if any(not 0 <= i < len(parents) for i in kept) or len(set(kept)) != len(kept):
        what = f"Return each kept node's index once, from 0 to {len(parents) - 1}; got {kept}."
        raise Abort(D.WRONG_TYPE, what)
    return kept


def _ranks(parents: Sequence[int], logprobs: Sequence[float]) -> tuple[list[float], list[float]]:
    """Each node's path log-probability and its rank, as the reference computes them."""
    path: list[float] = []
    rank: list[float] = []
    last: dict[int, int] = {}
    for i, p in enumerate(parents):
        path.append((path[p] if p >= 0 else 0.0) + logprobs[i])
        bounds = [path[i], rank[p] if p >= 0 else 0.0]
        bounds += [rank[last[p]]] if p in last else []
        last[p] = i
        rank.append(min(bounds))
    return path, rank


def _broken(case: _Case, kept: tuple[int, ...]) -> tuple[D, str] | None:
    """The first rule ``kept`` breaks on ``case``, in plain words: its size, its order, a
    node kept without its parent or an elder sibling; None for a well-formed tree."""
    parents, _, budget, _ = case
    size = min(budget, len(parents))
    if len(kept) != size:
        return D.KEEPS_WRONG_COUNT, f"{len(kept)} nodes kept, not min(budget, n) = {size}"
    if list(kept) != sorted(kept):
        return D.RANK_ORDER, "the kept indices are not in increasing order"
    chosen = set(kept)
    for i in kept:
        if parents[i] >= 0 and parents[i] not in chosen:
            return D.ORPHANS, f"node {i} is kept without its parent, node {parents[i]}"
    for i in kept:
        elders = [j for j in range(i) if parents[j] == parents[i] and j not in chosen]
        if elders:
            return D.SKIPS_ELDER, f"node {i} is kept without its elder sibling, node {elders[0]}"
    return None


def _explain(case: _Case, expected: tuple[int, ...], got: tuple[int, ...]) -> str:
    """Why ``got`` is wrong on ``case``: the rule it breaks, or the nodes it swapped."""
    broken = _broken(case, got)
    if broken is not None:
        return broken[1]
    path, rank = _ranks(case[0], case[1])
    extra, missing = min(set(got) - set(expected)), min(set(expected) - set(got))
    return (
        f"a tree of the right size, but node {extra} (path log-probability {path[extra]:g}, "
        f"rank {rank[extra]:g}) is kept instead of node {missing} (path "
        f"{path[missing]:g}, rank {rank[missing]:g})"
    )


def _describe(case: _Case) -> str:
    parents, logprobs, budget, what = case
    return f"{what}: parents = {list(parents)}, logprobs = {list(logprobs)}, budget = {budget}"


def _diagnosis(
    cases: list[_Case], got: list[tuple[int, ...]], wrong: list[int], expected: list
) -> tuple[D, dict[str, Any]]:
    """The slip the student's answers reproduce (:func:`~.answers.closest_mistake`), else
    the first rule broken, in the order :func:`_broken` tests them, else a wrong answer."""
    answers = (
        (slip_diagnosis, [tuple(fn(list(c[0]), list(c[1]), c[2])) for c in cases])
        for _, fn, slip_diagnosis in _SLIPS
    )
    diagnosis, evidence = closest_mistake(expected, got, wrong, answers)
    if diagnosis is not None:
        return diagnosis, evidence
    order = (D.KEEPS_WRONG_COUNT, D.RANK_ORDER, D.ORPHANS, D.SKIPS_ELDER)
    seen = {b[0] for i in wrong if (b := _broken(cases[i], got[i])) is not None}
    if not seen:
        return D.WRONG_ANSWER, {}
    first = min(seen, key=order.index)
    if first is D.KEEPS_WRONG_COUNT:
        sizes = {len(got[i]) - len(expected[i]) for i in wrong if len(got[i]) != len(expected[i])}
        first = D.BUDGET_OFF_BY_ONE if sizes <= {1, -1} else first
    return first, {}


def check_keep_likeliest(
    keep_likeliest: Callable, seed: int = 0, timeout: float | None = 60.0
) -> Report:
    """Check ``keep_likeliest(parents, logprobs, budget) -> list[int]`` against the library's
    rerank on 81 trees: hand-made ones where each mistake shows (a younger sibling likelier
    than its elder, ties, a certain step, budget 0 and a budget past the tree, a deep chain,
    a wide root), then EAGLE-2's trees, greedy and sampled, and random ones."""

    def body(name: str) -> Report:
        trees = cases(seed)
        expected = [tuple(_reference(*c[:3])) for c in trees]
        got = [_answer(keep_likeliest, name, c) for c in trees]
        wrong = [i for i in range(len(trees)) if got[i] != expected[i]]
        evidence: dict[str, Any] = {"trees": len(trees), "wrong": len(wrong)}
        if not wrong:
            passed = f"Correct on all {len(trees)} trees."
            return Report(_NAME, name, True, passed, None, evidence)
        diagnosis, found = _diagnosis(trees, got, wrong, expected)
        i = wrong[0]
        details = (
            f"Wrong on {len(wrong)} of {len(trees)} trees; the first, {_describe(trees[i])}: "
            f"expected {list(expected[i])}, got {list(got[i])}: "
            f"{_explain(trees[i], expected[i], got[i])}."
        )
        raise Abort(diagnosis, details, **evidence, **found)

    forbid = forbidden(eagle_tree.keep_likeliest)
    return run_check(_NAME, keep_likeliest, body, seed, timeout, forbid)
