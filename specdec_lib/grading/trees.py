"""The checks of chapter 12's exercises: a token tree's attention mask and position ids, and
the multi-draft acceptance rule at one node.

:func:`check_tree_mask` compares the student's mask and positions with the reference on
about 40 trees and names each kind of wrong cell it finds (a node that sees a non-ancestor,
misses itself, the context or an ancestor; positions numbered by slot).
:func:`check_verify_children` computes the exact distribution of the token the student's
rule lets leave the node, by enumerating every ordered draw of the children and every
branch of the rule's own random draws
(:func:`~specdec_lib.analysis.enumeration.enumerate_outcomes`), and compares it with p;
where it differs, the known slip whose exact distribution it reproduces is named.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from specdec_lib.analysis.enumeration import enumerate_outcomes
from specdec_lib.engine.tree import (
    ancestor_mask,
    draw_child,
    node_depths,
    remaining,
    tree_layout,
    walk_sampled,
)
from specdec_lib.analysis.trees import sibling_draws

from .mistakes import MISTAKES, REFERENCES
from .report import Diagnosis as D
from .report import Report
from .sandbox import Abort, as_int, as_tokens, call_student, forbidden, run_check
from .tree_slips import multi_draft_thresholds

# --- the mask and the positions ---------------------------------------------------------

#: What the mask exercise says not to call (``TokenTree.depths`` calls ``node_depths``).
_LAYOUT = forbidden(ancestor_mask, node_depths, tree_layout)

#: What the multi-draft exercise says not to call: the walk, and the draw without
#: replacement's distribution (``draw_child`` calls ``remaining``).
_WALK = forbidden(walk_sampled, remaining, draw_child)

#: The diagnoses of a wrong layout, the most specific first.
_LAYOUT_ORDER = (
    D.POSITIONS_BY_INDEX,
    D.SEES_NON_ANCESTOR,
    D.MISSES_SELF,
    D.MISSES_CONTEXT,
    D.MISSES_ANCESTORS,
    D.WRONG_ANSWER,
)


def _trees(seed: int) -> list[tuple[list[int], int]]:
    """(parents, n_context): a single node, a chain, a star, the chapter's tree, a binary
    tree, then 35 random trees of 2 to 12 nodes after 1 to 12 context tokens."""
    rng = random.Random(f"tree-mask/{seed}")
    cases = [([-1], 1), ([-1, 0, 1, 2], 3), ([-1, -1, -1, -1], 2), ([-1, -1, 0, 0, 1, 2], 5)]
    cases.append(([-1, 0, 0, 1, 1, 2, 2], 1))
    for _ in range(35):
        n = rng.randint(2, 12)
        cases.append(([rng.randint(-1, i - 1) for i in range(n)], rng.randint(1, 12)))
    return cases


def _as_mask(value: Any, shape: tuple[int, int]) -> np.ndarray:
    """A bool array of ``shape`` from a tensor, an array or nested lists of bools or 0/1."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    try:
        mask = np.asarray(value)
    except ValueError:
        mask = np.asarray(None)
    if mask.shape != shape or not (mask.dtype == bool or np.isin(mask, (0, 1)).all()):
        raise Abort(
            D.WRONG_TYPE,
            f"The mask must be True/False with shape {shape} (one row per node, one column "
            f"per slot: the context's, then the nodes'); got {value!r:.80}.",
        )
    return mask.astype(bool)


def _layout_answer(fn: Callable, name: str, parents: list[int], n_context: int) -> tuple:
    got = call_student(fn, name, list(parents), n_context)
    if not isinstance(got, tuple | list) or len(got) != 2:
        raise Abort(D.WRONG_TYPE, f"Return a pair (mask, positions), got {got!r:.80}.")
    mask = _as_mask(got[0], (len(parents), n_context + len(parents)))
    positions = as_tokens(got[1], "positions")
    if len(positions) != len(parents):
        raise Abort(D.WRONG_TYPE, f"Return one position per node, got {len(positions)}.")
    return mask, positions


def _layout_findings(mask: np.ndarray, positions: list[int], parents: list[int], n_context: int):
    """``{diagnosis: what shows it}`` for one tree."""
    ref_mask, ref_positions = REFERENCES["check_tree_mask"](parents, n_context)
    ancestors = ancestor_mask(parents).numpy()
    nodes, n = mask[:, n_context:], len(parents)
    found = {}
    if positions != ref_positions:
        by_index = positions == [n_context + i for i in range(n)]
        rule = f"a child of -1 at n_context = {n_context}, every other node one past its parent"
        what = f"positions {positions}, expected {ref_positions} ({rule})"
        shift = {a - b for a, b in zip(positions, ref_positions, strict=True)}
        if len(shift) == 1 and not by_index:  # depth counted from another origin
            what += (
                f"; yours are all {abs(next(iter(shift)))} too "
                f"{'high' if shift.pop() > 0 else 'low'}: the pending token sits at "
                f"n_context - 1 and its children, depth 0, at n_context"
            )
        found[D.POSITIONS_BY_INDEX if by_index else D.WRONG_ANSWER] = what
    if (extra := np.argwhere(nodes & ~ancestors)).size:
        i, j = extra[0]
        found[D.SEES_NON_ANCESTOR] = f"node {i} sees node {j}, which is not its ancestor"
    if not nodes.diagonal().all():
        found[D.MISSES_SELF] = f"node {int(np.argmin(nodes.diagonal()))} does not see itself"
    if (hidden := np.argwhere(~mask[:, :n_context])).size:
        found[D.MISSES_CONTEXT] = f"node {hidden[0][0]} does not see context slot {hidden[0][1]}"
    if (missing := np.argwhere(ancestors & ~np.eye(n, dtype=bool) & ~nodes)).size:
        i, j = missing[0]
        found[D.MISSES_ANCESTORS] = f"node {i} does not see its ancestor {j}"
    if not found and not np.array_equal(mask, ref_mask.numpy()):
        found[D.WRONG_ANSWER] = "the mask differs from the reference"
    return found


def check_tree_mask(
    tree_mask_and_positions: Callable, seed: int = 0, timeout: float | None = 60.0
) -> Report:
    """Check ``tree_mask_and_positions(parents, n_context) -> (mask, positions)`` on about 40
    trees (a chain, a star, random trees): each node sees the context, itself and its
    ancestors only, and sits at position n_context plus its depth (the pending token's
    children, parent -1, at depth 0: right after the pending token, which sits at
    n_context - 1, so at n_context)."""

    def body(name: str) -> Report:
        cases = _trees(seed)
        seen: dict[D, str] = {}
        wrong = 0
        for parents, n_context in cases:
            answer = _layout_answer(tree_mask_and_positions, name, parents, n_context)
            found = _layout_findings(*answer, parents, n_context)
            wrong += bool(found)
            for diagnosis, what in found.items():
                seen.setdefault(diagnosis, f"parents = {parents}, n_context = {n_context}: {what}")
        evidence: dict[str, Any] = {"trees": len(cases), "wrong": wrong}
        if not seen:
            passed = f"Correct on all {len(cases)} trees: masks and positions."
            return Report("check_tree_mask", name, True, passed, None, evidence)
        first, *others = sorted(seen, key=_LAYOUT_ORDER.index)
        if others:
            evidence["also seen"] = ", ".join(d.headline for d in others)
        details = f"Wrong on {wrong} of {len(cases)} trees; the first: {seen[first]}."
        raise Abort(first, details, **evidence)

    return run_check("check_tree_mask", tree_mask_and_positions, body, seed, timeout, _LAYOUT)


# --- the multi-draft rule ---------------------------------------------------------------

_V = 6
_TOLERANCE = 1e-6  # float32 uniforms move an exact law by ~1e-7; every slip moves it more


def _distribution(g: torch.Generator, support: int, sharpness: float = 1.5) -> torch.Tensor:
    """A random distribution over ``support`` random tokens of the vocabulary."""
    weights = torch.zeros(_V, dtype=torch.float64)
    tokens = torch.randperm(_V, generator=g)[:support]
    weights[tokens] = torch.exp(sharpness * torch.randn(support, generator=g, dtype=torch.float64))
    return weights / weights.sum()


def _situations(seed: int) -> list[tuple[torch.Tensor, torch.Tensor, int]]:
    """(p, q, number of children): random p and q of wide and narrow support, a q whose
    favourite takes most of its mass (where dividing by q is furthest off), p == q, one
    child and three."""
    g = torch.Generator().manual_seed(seed)
    peaked = _distribution(g, 4, 3.0)
    return [
        (_distribution(g, 6), _distribution(g, 6), 2),
        (_distribution(g, 4), _distribution(g, 5), 2),
        (_distribution(g, 6), peaked, 2),
        (peaked.clone(), peaked, 2),
        (_distribution(g, 6), _distribution(g, 4), 3),
        (_distribution(g, 5), _distribution(g, 6), 1),
    ]


def _token(value: Any) -> int:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.reshape(())
    return as_int(value, "the token that leaves the node")


def _exact(fn: Callable, name: str, p: torch.Tensor, q: torch.Tensor, m: int) -> torch.Tensor:
    """The exact distribution (V,) of ``fn``'s token over every ordered draw of ``m``
    children from ``q`` without replacement and every branch of its random draws."""
    out, checked = torch.zeros(_V, dtype=torch.float64), set()
    for prob, tree in sibling_draws(q, m):
        children = tree.tokens

        def call(g, children=children):  # noqa: ANN001, ANN202
            args = (p.clone(), q.clone(), list(children), g)
            return [_token(call_student(fn, name, *args, own_generator=True))], 0

        guesses = dict(enumerate(multi_draft_thresholds(p, q, children)))
        try:
            outcomes = enumerate_outcomes(call, guesses, checked)
        except ValueError as exc:  # the enumerator could not follow the rule's draws
            details = (
                f"The check follows every random draw exactly and could not follow yours "
                f"({exc}): return the token torch.multinomial drew as it is."
            )
            raise Abort(D.WRONG_TYPE, details) from None
        for o in outcomes:
            try:
                out += prob * o.probability * o.token_distribution(0, _V)
            except ValueError:
                raise Abort(D.WRONG_TYPE, f"Return a token id in [0, {_V - 1}].") from None
    return out


@functools.lru_cache(maxsize=128)
def _slip_laws(seed: int) -> dict[str, list[torch.Tensor]]:
    """Each slip's exact distribution in each situation of ``seed`` (computed once)."""
    situations = _situations(seed)
    return {
        label: [_exact(mistake.function, label, *s) for s in situations]
        for label, mistake in MISTAKES["check_verify_children"].items()
    }


def _tv(a: torch.Tensor, b: torch.Tensor) -> float:
    return 0.5 * float((a - b).abs().sum())


def _show(d: torch.Tensor) -> str:
    return "[" + ", ".join(f"{v:.3f}" for v in d.tolist()) + "]"


def check_verify_children(
    verify_children: Callable, seed: int = 0, timeout: float | None = 60.0
) -> Report:
    """Check ``verify_children(p, q, children, generator=None) -> int`` exactly: in six
    situations (one to three children drawn without replacement from q), the distribution
    of the token that leaves the node, every draw enumerated, must be p to 1e-6."""

    def body(name: str) -> Report:
        situations = _situations(seed)
        laws = [_exact(verify_children, name, *s) for s in situations]
        tv = [_tv(law, s[0]) for law, s in zip(laws, situations, strict=True)]
        wrong = [i for i, t in enumerate(tv) if t > _TOLERANCE]
        evidence: dict[str, Any] = {"situations": len(situations), "wrong": len(wrong)}
        if not wrong:  # no distance shown: at 1e-16 it would differ from machine to machine
            passed = f"Correct: in all {len(situations)} situations the output is exactly p."
            return Report("check_verify_children", name, True, passed, None, evidence)
        evidence["largest total variation from p"] = max(tv)
        best, diagnosis = (0.6, 0.9), D.WRONG_DISTRIBUTION
        for label, theirs in _slip_laws(seed).items():
            differs = [i for i, law in enumerate(theirs) if _tv(law, situations[i][0]) > _TOLERANCE]
            same = {i for i in differs if _tv(laws[i], theirs[i]) <= _TOLERANCE}
            score = (len(same & set(wrong)) / len(wrong), len(same) / max(len(differs), 1))
            if differs and score >= best:
                best, diagnosis = score, MISTAKES["check_verify_children"][label].diagnosis
        i = wrong[0]
        p, q, m = situations[i]
        details = (
            f"Wrong in {len(wrong)} of {len(situations)} situations; the first: {m} children "
            f"from q = {_show(q)}, p = {_show(p)}: the token that leaves is distributed as "
            f"{_show(laws[i])} (total variation {tv[i]:.3f} from p)."
        )
        raise Abort(diagnosis, details, **evidence)

    return run_check("check_verify_children", verify_children, body, seed, timeout, _WALK)
