"""Exact output distributions of a verification rule: enumeration, no random numbers.

Two kinds of exactness, kept apart on purpose.

*The formula.* For one draft position the first emitted token y has probability

    P(y) = q(y)·a(y) + R · r(y),   a(x) = min(1, p(x)/q(x)),   R = sum_x q(x)·(1 - a(x)),

where p is the target's (processed) distribution, q the draft's and r the rule's
replacement distribution: the residual norm(max(0, p - q)) for the correct rule, p itself
for the biased one. :func:`exact_first_token_distribution` evaluates it, summing over the
proposal x. That proves the *formula* right, to rounding error; it never runs a rule.

*The code.* :func:`exact_output_distribution` runs the rule itself, the shipped
``accept_sampled`` or anyone's function with its signature, once per branch of its
random draws (:func:`~specdec_lib.analysis.enumeration.enumerate_outcomes`). The result
is the exact output distribution of the code that ships, to within 2^-53, the spacing of
``torch.rand``'s float64 draws. :func:`exact_round_outcomes` does the same for a whole
round of k drafted tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from specdec_lib.analysis.enumeration import Outcome, enumerate_outcomes
from specdec_lib.engine.sampling import SamplingParams, process_logits
from specdec_lib.engine.verify import Replacement, residual_distribution

Rule = Callable[..., tuple[list[int], int]]


def _as_distribution(x: torch.Tensor, name: str) -> torch.Tensor:
    x = torch.as_tensor(x).detach().to(torch.float64)
    if x.dim() != 1:
        raise ValueError(f"{name} must be one distribution of shape (V,), got {tuple(x.shape)}")
    if not torch.isfinite(x).all() or (x < 0).any() or abs(float(x.sum()) - 1) > 1e-6:
        raise ValueError(f"{name} must be finite, >= 0 and sum to 1")
    return x


def exact_first_token_distribution(
    p: torch.Tensor,
    q: torch.Tensor,
    replacement: Replacement = residual_distribution,
    drawn_from: torch.Tensor | None = None,
) -> torch.Tensor:
    """The formula: first-token distribution for target ``p``, draft ``q`` (both (V,)) and
    the rule that draws from ``replacement`` after a rejection. Runs no rule.

    ``drawn_from`` (default ``q``) is where proposals really come from, when the drafter
    reports ``q`` but samples from another distribution (a drafter that samples at one
    temperature and reports the probabilities of another). The verifier divides by ``q``
    and subtracts it in the residual, while proposals arrive with frequencies ``drawn``:

        P(y) = drawn(y)·a(y) + sum_x drawn(x)·(1 - a(x)) · r(y),  a = min(1, p/q).
    """
    p = p.to(torch.float64)
    q = q.to(torch.float64)
    drawn = q if drawn_from is None else _as_distribution(drawn_from, "drawn_from")
    if ((drawn > 0) & (q <= 0)).any():
        raise ValueError(
            "q must be > 0 wherever drawn_from is: the verifier refuses a proposal "
            "its draft distribution says is impossible"
        )
    support = q > 0
    accept = torch.zeros_like(q)
    accept[support] = torch.clamp(p[support] / q[support], max=1.0)
    reject_mass = float((drawn * (1 - accept)).sum())
    return drawn * accept + reject_mass * replacement(p, q)


def exact_output_distribution(
    rule: Rule,
    target_logits: torch.Tensor,
    draft_probs: torch.Tensor,
    params: SamplingParams,
    drawn_from: torch.Tensor | None = None,
) -> torch.Tensor:
    """Exact first-token distribution (V,) of ``rule``, by running it on every branch.

    For each proposal x that ``drawn_from`` (default: ``draft_probs``) can produce, the
    rule is called as :func:`~specdec_lib.engine.generate.speculative_generate` calls it
    for a one-token draft, ``rule(logits, draft_probs[None], [x], params, generator)``,
    with an :class:`~specdec_lib.analysis.enumeration.EnumeratedDraws` for the generator;
    the branches' first tokens, weighted by ``drawn_from[x]`` and their probabilities,
    are the distribution. ``target_logits`` (V,) are raw, as the rule receives them;
    ``draft_probs`` (V,) is what the drafter reports. Any function with the rule's
    signature can be enumerated, provided its randomness comes from the generator.
    """
    if params.greedy:
        raise ValueError("params.temperature must be > 0: greedy verification is not sampled")
    logits = torch.as_tensor(target_logits).detach()
    if logits.dim() != 1:
        raise ValueError(f"target_logits must have shape (V,), got {tuple(logits.shape)}")
    q = _as_distribution(draft_probs, "draft_probs")
    drawn = q if drawn_from is None else _as_distribution(drawn_from, "drawn_from")
    if q.shape != logits.shape or drawn.shape != logits.shape:
        raise ValueError("target_logits, draft_probs and drawn_from must all have shape (V,)")
    if ((drawn > 0) & (q <= 0)).any():
        raise ValueError(
            "draft_probs must be > 0 wherever drawn_from is: the verifier refuses a proposal "
            "its draft distribution says is impossible"
        )
    p = process_logits(logits, params)  # only to guess where each acceptance switches
    rows = logits.unsqueeze(0).repeat(2, 1)  # (k+1, V) with k = 1; row 1 is the bonus row
    reported = q.unsqueeze(0)  # (1, V)
    vocab_size = logits.shape[-1]
    out = torch.zeros(vocab_size, dtype=torch.float64)
    checked: set[bytes] = set()
    for x in torch.nonzero(drawn > 0).flatten().tolist():
        branches = enumerate_outcomes(
            lambda g, x=x: rule(rows, reported, [x], params, g),
            {0: min(1.0, float(p[x]) / float(q[x]))},
            checked,
        )
        for o in branches:
            out += float(drawn[x]) * o.probability * o.token_distribution(0, vocab_size)
    return out


def exact_round_outcomes(
    rule: Rule,
    target_logits: torch.Tensor,
    draft_probs: torch.Tensor,
    proposed: Sequence[int],
    params: SamplingParams,
) -> list[Outcome]:
    """Every branch of one whole verification round of ``rule``, with its probability.

    ``target_logits`` (k+1, V), ``draft_probs`` (k, V) and ``proposed`` (k tokens) are
    the rule's own arguments; the rule runs once per branch (:func:`enumerate_outcomes`),
    with uniform draw i guessed to decide position i at min(1, p(x_i)/q(x_i)).
    """
    if params.greedy:
        raise ValueError("params.temperature must be > 0: greedy verification is not sampled")
    logits = torch.as_tensor(target_logits).detach()
    q = torch.as_tensor(draft_probs).detach().to(torch.float64)
    ids = [int(t) for t in proposed]
    if (
        logits.dim() != 2
        or q.dim() != 2
        or logits.shape[0] != len(ids) + 1
        or q.shape[0] != len(ids)
    ):
        raise ValueError(
            "target_logits must have shape (k+1, V) and draft_probs (k, V) for k proposed tokens"
        )
    p = process_logits(logits, params)
    guesses = {
        i: min(1.0, float(p[i, x]) / float(q[i, x])) for i, x in enumerate(ids) if q[i, x] > 0
    }
    return enumerate_outcomes(lambda g: rule(logits, q, ids, params, g), guesses)


@dataclass(frozen=True)
class ResidualDecomposition:
    """The pieces of the residual rule for one draft position (all (V,) float64).

    ``accepted`` = q·min(1, p/q) = min(p, q), the mass that arrives by acceptance;
    ``shortfall`` = max(0, p - q), what acceptance leaves each token short of p;
    ``rejected_mass`` = the chance of a rejection, which equals ``shortfall.sum()``;
    ``residual`` = the shortfall normalised; ``output`` = accepted + rejected_mass · residual.
    """

    p: torch.Tensor
    q: torch.Tensor
    accepted: torch.Tensor
    shortfall: torch.Tensor
    residual: torch.Tensor
    rejected_mass: float
    output: torch.Tensor


def residual_decomposition(p: torch.Tensor, q: torch.Tensor) -> ResidualDecomposition:
    """Split the residual rule's output into what acceptance and rejection each contribute."""
    p = _as_distribution(p, "p")
    q = _as_distribution(q, "q")
    accepted = torch.minimum(p, q)
    shortfall = (p - q).clamp(min=0)
    rejected_mass = 1.0 - float(accepted.sum())
    residual = residual_distribution(p, q)
    return ResidualDecomposition(
        p=p,
        q=q,
        accepted=accepted,
        shortfall=shortfall,
        residual=residual,
        rejected_mass=rejected_mass,
        output=accepted + rejected_mass * residual,
    )
