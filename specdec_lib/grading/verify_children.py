"""Chapter 12's exercise on the multi-draft acceptance rule at one node of a token tree, in
one module: the answer in the student's form, its slips (each the answer with one rule
changed), and the check.

``verify_children(p, q, children, generator=None) -> int``: ``children`` were drawn in
turn without replacement from ``q``; the token that leaves the node must be distributed
as ``p``. The reference is the engine's :func:`~specdec_lib.engine.tree.walk_sampled` on a
tree of root children; the slips are the residual never updated (every sibling tested
against p), the engine's own ``update_residual=False`` (the residual updated from p, not
from the last one), and every child divided by q (the rule for draws with replacement).

:func:`check_verify_children` computes the exact distribution of the token the student's
rule lets leave the node, by enumerating every ordered draw of the children and every
branch of the rule's own random draws
(:func:`~specdec_lib.analysis.enumeration.enumerate_outcomes`), and compares it with p;
where it differs, the slip whose exact distribution it reproduces is named.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch

from specdec_lib.analysis.enumeration import enumerate_outcomes
from specdec_lib.engine.sampling import SamplingParams, sample
from specdec_lib.engine.tree import TokenTree, draw_child, remaining, walk_sampled
from specdec_lib.engine.verify import residual_distribution
from specdec_lib.experiments.sibling_draws import sibling_draws

from .mistakes import register
from .report import Diagnosis as D
from .report import Report
from .sandbox import Abort, as_int, call_student, forbidden, run_check

# --- the answer, and its slips ---------------------------------------------------------

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


def _thresholds(p: torch.Tensor, q: torch.Tensor, children: Sequence[int]) -> list:
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
_children_reference = _children("drawn")

#: The slips: ``(label, function, diagnosis)``, registered below.
_SLIPS = (
    ("residual not updated: each child against p", _against_p, D.STALE_RESIDUAL),
    (
        "residual not updated: the last residual from p",
        _children("drawn", functools.partial(walk_sampled, update_residual=False)),
        D.STALE_RESIDUAL,
    ),
    ("with-replacement rule on draws without replacement", _children("parent"), D.DIVIDES_BY_Q),
)

register("check_verify_children", _children_reference, *_SLIPS)


# --- the check -------------------------------------------------------------------------

#: What the multi-draft exercise says not to call: the walk, and the draw without
#: replacement's distribution (``draw_child`` calls ``remaining``).
_WALK = forbidden(walk_sampled, remaining, draw_child)

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

        guesses = dict(enumerate(_thresholds(p, q, children)))
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
def _slip_laws(seed: int) -> list[tuple[D, list[torch.Tensor]]]:
    """Each slip's diagnosis, and its exact distribution in each situation of ``seed``
    (computed once)."""
    situations = _situations(seed)
    return [
        (diagnosis, [_exact(slip, label, *s) for s in situations])
        for label, slip, diagnosis in _SLIPS
    ]


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
        for slip_diagnosis, theirs in _slip_laws(seed):
            differs = [i for i, law in enumerate(theirs) if _tv(law, situations[i][0]) > _TOLERANCE]
            same = {i for i in differs if _tv(laws[i], theirs[i]) <= _TOLERANCE}
            score = (len(same & set(wrong)) / len(wrong), len(same) / max(len(differs), 1))
            if differs and score >= best:
                best, diagnosis = score, slip_diagnosis
        i = wrong[0]
        p, q, m = situations[i]
        details = (
            f"Wrong in {len(wrong)} of {len(situations)} situations; the first: {m} children "
            f"from q = {_show(q)}, p = {_show(p)}: the token that leaves is distributed as "
            f"{_show(laws[i])} (total variation {tv[i]:.3f} from p)."
        )
        raise Abort(diagnosis, details, **evidence)

    return run_check("check_verify_children", verify_children, body, seed, timeout, _WALK)
