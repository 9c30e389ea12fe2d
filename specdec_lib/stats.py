"""Exact and sampled output distributions of a verification rule.

Exact enumeration removes sampling noise from correctness claims: for one draft
position, the first emitted token y has probability

    P(y) = q(y)·a(y) + sum_x q(x)·(1 - a(x)) · r(y),   a(x) = min(1, p(x)/q(x)),

where r is the rule's replacement distribution (the residual for the correct
rule, p itself for the biased one). Summing over the proposal x is the
enumeration; no random numbers are drawn.
"""

from __future__ import annotations

import torch

from .verify import Replacement, residual_distribution


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
