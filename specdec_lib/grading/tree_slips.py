"""Chapter 12's exercises in the student's form, and their slips, each the answer with one
rule changed: the tree's attention mask and position ids, and the multi-draft rule at one
node.

``tree_mask_and_positions(parents, n_context) -> (mask, positions)``: the context takes
slots and positions 0 .. n_context - 1 (its last token is the pending one); node i takes
slot n_context + i. ``mask[i, j]`` says whether node i attends to slot j: every context
slot, itself and its ancestors, nothing else. Its position is n_context plus its depth,
so siblings share a position. The slips are the mistakes tree engines made: positions by
slot, a plain causal mask (a node sees its elder siblings and cousins), a node that misses
itself, the context, or the ancestors above its parent.

``verify_children(p, q, children, generator=None) -> int``: ``children`` were drawn in
turn without replacement from ``q``; the token that leaves the node must be distributed
as ``p``. The reference is the engine's :func:`~specdec_lib.engine.tree.walk_sampled` on a
tree of root children; the slips are the residual never updated (every sibling tested
against p), the engine's own ``update_residual=False`` (the residual updated from p, not
from the last one), and every child divided by q (the rule for draws with replacement).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import torch

from specdec_lib.engine.sampling import SamplingParams, sample
from specdec_lib.engine.tree import TokenTree, ancestor_mask, node_depths, remaining, walk_sampled
from specdec_lib.engine.verify import residual_distribution

from .report import Diagnosis as D

# --- the tree's mask and positions ------------------------------------------------------


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
layout_reference = _layout(ancestor_mask, _by_depth)

#: The slips, as ``(label, function, diagnosis)`` rows of :data:`~.mistakes.MISTAKES`.
LAYOUT_SLIPS = (
    ("positions by index", _layout(ancestor_mask, _by_index), D.POSITIONS_BY_INDEX),
    ("a causal mask: sees siblings", _layout(_causal, _by_depth), D.SEES_NON_ANCESTOR),
    ("does not see itself", _layout(_without_self, _by_depth), D.MISSES_SELF),
    ("does not see the context", _layout(ancestor_mask, _by_depth, False), D.MISSES_CONTEXT),
    ("sees its parent only", _layout(_parent_only, _by_depth), D.MISSES_ANCESTORS),
)


# --- the multi-draft rule at one node ---------------------------------------------------

_T1 = SamplingParams(temperature=1.0)


def _logits_for(p: torch.Tensor) -> torch.Tensor:
    """Logits whose softmax is ``p`` (V,); probability 0 becomes -1e4, exactly 0 after it."""
    p = p.to(torch.float64)
    return torch.where(p > 0, p.log(), torch.full_like(p, -1e4))


def _children(recorded: str, walk: Callable = walk_sampled) -> Callable:
    """The engine's walk over root ``children`` whose rows record, for each child, the
    distribution it was drawn from (``"drawn"``) or q itself (``"parent"``). (Recording
    nothing, every child taken as certain, is no slip: for candidates chosen by any rule
    independent of the walk's uniforms, such as the top k, the walk is then exact too.)"""

    def verify_children(p, q, children, generator=None):
        children = [int(x) for x in children]
        q = q.to(torch.float64)
        rows = {
            "drawn": lambda: [remaining(q, children[:j]) for j in range(len(children))],
            "parent": lambda: [q] * len(children),
        }
        probs = torch.stack(rows[recorded]()) if children else None
        tree = TokenTree(children, [-1] * len(children), probs)
        logits = _logits_for(p).repeat(len(children) + 1, 1)  # (m + 1, V); row 0 is read
        return walk(logits, tree, _T1, generator)[1][0]

    return verify_children


def multi_draft_thresholds(p: torch.Tensor, q: torch.Tensor, children: Sequence[int]) -> list:
    """The correct rule's acceptance probabilities, child by child (while it keeps
    rejecting): where each of its uniforms switches the outcome. A guess the enumerator
    confirms in two runs instead of finding by bisection; a rule that switches elsewhere
    is followed all the same."""
    r, out = p.to(torch.float64), []
    for j, x in enumerate(children):
        qx = remaining(q, children[:j])
        out.append(min(1.0, float(r[x]) / float(qx[x])))
        shortfall = (r - qx).clamp(min=0)
        if float(shortfall.sum()) <= 1e-12:
            break
        r = shortfall / shortfall.sum()
    return out


def _against_p(p, q, children, generator=None):
    """Every child tested against p itself, each residual taken from p: the residual
    never updated (the engine's ``update_residual=False`` updates it once, from p)."""
    q = q.to(torch.float64)
    r = p = p.to(torch.float64)
    for j, x in enumerate(children):
        qx = remaining(q, children[:j])
        if float(torch.rand((), generator=generator, dtype=torch.float64)) < float(p[x] / qx[x]):
            return int(x)
        r = residual_distribution(p, qx)
    return sample(r, generator)


#: Correct: each child against what the earlier rejections left, divided by what it was
#: drawn from (q without the earlier siblings); if all are rejected, a draw from the rest.
children_reference = _children("drawn")

CHILDREN_SLIPS = (
    ("residual not updated: each child against p", _against_p, D.STALE_RESIDUAL),
    (
        "residual not updated: the last residual from p",
        _children("drawn", functools.partial(walk_sampled, update_residual=False)),
        D.STALE_RESIDUAL,
    ),
    ("with-replacement rule on draws without replacement", _children("parent"), D.DIVIDES_BY_Q),
)
