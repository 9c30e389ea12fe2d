"""Chapter 12's exercise on a token tree's attention mask and position ids, in one module:
the answer in the student's form, its slips (each the answer with one rule changed), and
the check.

``tree_mask_and_positions(parents, n_context) -> (mask, positions)``: the context takes
slots and positions 0 .. n_context - 1 (its last token is the pending one); node i takes
slot n_context + i. ``mask[i, j]`` says whether node i attends to slot j: every context
slot, itself and its ancestors, nothing else. Its position is n_context plus its depth,
so siblings share a position. The slips are the mistakes tree engines made: positions by
slot, a plain causal mask (a node sees its elder siblings and cousins), a node that misses
itself, the context, or the ancestors above its parent.

:func:`check_tree_mask` compares the student's mask and positions with the reference on
about 40 trees (a single node, a chain, a star, the chapter's tree, a binary tree, random
trees) and names each kind of wrong cell it finds, the most specific first.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from specdec_lib.engine.tree import ancestor_mask, node_depths, tree_layout

from .mistakes import register
from .report import Diagnosis as D
from .report import Report
from .sandbox import Abort, as_tokens, call_student, forbidden, run_check

# --- the answer, and its slips ---------------------------------------------------------


def _layout(
    node_mask: Callable[[list[int]], torch.Tensor],
    positions: Callable[[list[int], int], list[int]],
    context: bool = True,
) -> Callable:
    """``(mask, positions)`` with the nodes' block of the mask from ``node_mask(parents)``,
    the context's columns all ``context``, and ``positions(parents, n_context)``."""

    def tree_mask_and_positions(parents, n_context):
        parents = list(parents)
        mask = torch.full((len(parents), n_context + len(parents)), context, dtype=torch.bool)
        mask[:, n_context:] = node_mask(parents)
        return mask, positions(parents, n_context)

    return tree_mask_and_positions


def _by_depth(parents: list[int], n_context: int) -> list[int]:
    return [n_context + d for d in node_depths(parents)]


def _by_index(parents: list[int], n_context: int) -> list[int]:
    return [n_context + i for i in range(len(parents))]


def _causal(parents: list[int]) -> torch.Tensor:
    return torch.ones(len(parents), len(parents), dtype=torch.bool).tril()


def _without_self(parents: list[int]) -> torch.Tensor:
    return ancestor_mask(parents) & ~torch.eye(len(parents), dtype=torch.bool)


def _parent_only(parents: list[int]) -> torch.Tensor:
    mask = torch.eye(len(parents), dtype=torch.bool)
    for i, p in enumerate(parents):
        if p >= 0:
            mask[i, p] = True
    return mask


#: Correct: the context, the node itself and its ancestors; the position of its depth.
_layout_reference = _layout(ancestor_mask, _by_depth)

#: The slips: ``(label, function, diagnosis)``, registered below.
_SLIPS = (
    ("positions by index", _layout(ancestor_mask, _by_index), D.POSITIONS_BY_INDEX),
    ("a causal mask: sees siblings", _layout(_causal, _by_depth), D.SEES_NON_ANCESTOR),
    ("does not see itself", _layout(_without_self, _by_depth), D.MISSES_SELF),
    ("does not see the context", _layout(ancestor_mask, _by_depth, False), D.MISSES_CONTEXT),
    ("sees its parent only", _layout(_parent_only, _by_depth), D.MISSES_ANCESTORS),
)

register("check_tree_mask", _layout_reference, *_SLIPS)


# --- the check -------------------------------------------------------------------------

#: What the mask exercise says not to call (``TokenTree.depths`` calls ``node_depths``).
_LAYOUT = forbidden(ancestor_mask, node_depths, tree_layout)

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
    ref_mask, ref_positions = _layout_reference(parents, n_context)
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
