"""Exact output distributions of a verification rule: enumeration, no random numbers.

For one draft position the first emitted token y has probability

    P(y) = q(y)·a(y) + R · r(y),   a(x) = min(1, p(x)/q(x)),   R = sum_x q(x)·(1 - a(x)),

where p is the target's (processed) distribution, q the draft's and r the rule's
replacement distribution: the residual norm(max(0, p - q)) for the correct rule, p itself
for the biased one. Summing over the proposal x is the enumeration. It proves the
*formula* right, to rounding error; :mod:`specdec_lib.analysis.hypothesis` checks the
*code*, by sampling it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from specdec_lib.engine.sampling import SamplingParams, process_logits
from specdec_lib.engine.verify import (
    Replacement,
    accept_sampled,
    accept_sampled_biased,
    residual_distribution,
    target_distribution,
)

Rule = Callable[..., tuple[list[int], int]]

#: The replacement distribution each library rule draws from after a rejection.
REPLACEMENTS: dict[Rule, Replacement] = {
    accept_sampled: residual_distribution,
    accept_sampled_biased: target_distribution,
}

# --- exact enumeration -------------------------------------------------------------


def as_distribution(x: torch.Tensor, name: str) -> torch.Tensor:
    x = torch.as_tensor(x).detach().to(torch.float64)
    if x.dim() != 1:
        raise ValueError(f"{name} must be one distribution of shape (V,), got {tuple(x.shape)}")
    if not torch.isfinite(x).all() or (x < 0).any() or abs(float(x.sum()) - 1) > 1e-6:
        raise ValueError(f"{name} must be finite, >= 0 and sum to 1")
    return x


def exact_first_token_distribution(
    p: torch.Tensor, q: torch.Tensor, replacement: Replacement = residual_distribution
) -> torch.Tensor:
    """Exact distribution of the first emitted token for target ``p``, draft ``q`` (both (V,))."""
    p = p.to(torch.float64)
    q = q.to(torch.float64)
    support = q > 0
    accept = torch.zeros_like(q)
    accept[support] = torch.clamp(p[support] / q[support], max=1.0)
    reject_mass = float((q * (1 - accept)).sum())
    return q * accept + reject_mass * replacement(p, q)


def exact_mismatched_distribution(
    p: torch.Tensor,
    drawn_from: torch.Tensor,
    claimed: torch.Tensor,
    replacement: Replacement = residual_distribution,
) -> torch.Tensor:
    """First-token distribution when the proposal is drawn from ``drawn_from`` but the
    verifier is told it came from ``claimed``.

    This is the bug of a drafter that samples at one temperature and reports the
    probabilities of another. The verifier divides by ``claimed`` and subtracts it
    in the residual, while proposals arrive with frequencies ``drawn_from``:

        P(y) = drawn(y)·a(y) + sum_x drawn(x)·(1 - a(x)) · r(y),  a = min(1, p/claimed).

    With ``claimed == drawn_from`` this is :func:`exact_first_token_distribution`.
    """
    p = as_distribution(p, "p")
    drawn = as_distribution(drawn_from, "drawn_from")
    claimed = as_distribution(claimed, "claimed")
    if ((drawn > 0) & (claimed <= 0)).any():
        raise ValueError(
            "claimed must be > 0 wherever drawn_from is: the verifier refuses a proposal "
            "its draft distribution says is impossible"
        )
    accept = torch.zeros_like(p)
    support = claimed > 0
    accept[support] = torch.clamp(p[support] / claimed[support], max=1.0)
    reject_mass = float((drawn * (1 - accept)).sum())
    return drawn * accept + reject_mass * replacement(p, claimed)


def exact_output_distribution(
    rule: Rule,
    target_logits: torch.Tensor,
    draft_probs: torch.Tensor,
    params: SamplingParams,
    drawn_from: torch.Tensor | None = None,
) -> torch.Tensor:
    """Exact first-token distribution of a library ``rule`` with sampling ``params``.

    ``target_logits`` (V,) are raw; they are processed (temperature, top-k, top-p)
    exactly as the rule processes them, by :func:`~specdec_lib.engine.sampling.process_logits`.
    ``draft_probs`` (V,) is what the drafter reports; ``drawn_from`` (default: the
    same) is what it really sampled from. Only the rules in :data:`REPLACEMENTS` can
    be enumerated; any other function can only be sampled (:func:`sample_first_tokens`).
    """
    if rule not in REPLACEMENTS:
        raise ValueError(
            "rule must be accept_sampled or accept_sampled_biased to be enumerated; "
            "sample other functions with sample_first_tokens"
        )
    if params.greedy:
        raise ValueError("params.temperature must be > 0: greedy verification is not sampled")
    p = process_logits(torch.as_tensor(target_logits), params)
    if p.dim() != 1:
        raise ValueError(f"target_logits must have shape (V,), got {tuple(p.shape)}")
    q = as_distribution(draft_probs, "draft_probs")
    drawn = q if drawn_from is None else drawn_from
    return exact_mismatched_distribution(p, drawn, q, REPLACEMENTS[rule])


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
    p = as_distribution(p, "p")
    q = as_distribution(q, "q")
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
