"""Verification: which drafted tokens the target keeps, and the one token it adds.

Each rule sees the target's logits at the k+1 positions after the context (row i scores
the token after ``context + proposed[:i]``) and returns ``(emitted, n_accepted)``: the
accepted prefix, then one target token (the correction, or the bonus from row k). The
rules trust their inputs (the engine's own tensors); ``accept_*`` check anyone else's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from specdec_lib.checks import check_draft_probs, check_target_logits
from specdec_lib.engine.sampling import SamplingParams, argmax, process_logits, sample

Replacement = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def greedy_rule(target_logits: torch.Tensor, proposed: list[int]) -> tuple[list[int], int]:
    """Keep the longest prefix of ``proposed`` that matches the target's argmax."""
    best = argmax(target_logits)  # the target's own choice at each of the k+1 rows
    n = 0
    while n < len(proposed) and proposed[n] == best[n]:
        n += 1
    return proposed[:n] + [best[n]], n


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """norm(max(0, p - q)): exactly the mass that accepting at min(1, p/q) leaves short.

    If p == q nothing is short and rejection has probability 0; return p so the
    function is total (the value is then never used).
    """
    shortfall = (p - q).clamp(min=0)
    total = shortfall.sum(-1, keepdim=True)
    if float(total.min()) <= 1e-12:
        return p.clone()
    return shortfall / total


def target_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """The biased rule's replacement: the target's own distribution, ignoring q."""
    return p


def sampled_rule(
    target_logits: torch.Tensor,
    draft_probs: torch.Tensor,
    proposed: list[int],
    params: SamplingParams,
    generator: torch.Generator | None,
    replacement: Replacement = residual_distribution,
) -> tuple[list[int], int]:
    """The sampled verification loop (Leviathan et al. 2023; Chen et al. 2023).

    Accept x with probability min(1, p(x)/q(x)); on rejection draw from ``replacement``.
    The residual makes the output distributed exactly as p; ``target_distribution``, the
    plausible bug, does not. The correct rule and the biased one differ in one argument.
    """
    p = process_logits(target_logits, params)  # (k+1, V), the target's processed distribution
    q = draft_probs.detach().to(torch.float64)  # (k, V)
    for i, x in enumerate(proposed):
        u = float(torch.rand((), generator=generator, dtype=torch.float64))
        if u < min(1.0, float(p[i, x]) / float(q[i, x])):  # accept x with min(1, p/q)
            continue
        return proposed[:i] + [sample(replacement(p[i], q[i]), generator)], i
    return proposed + [sample(p[len(proposed)], generator)], len(proposed)


def accept_greedy(target_logits: torch.Tensor, proposed: Sequence[int]) -> tuple[list[int], int]:
    """:func:`greedy_rule` on checked inputs."""
    return greedy_rule(*check_target_logits(target_logits, proposed))


def accept_sampled(
    target_logits: torch.Tensor,
    draft_probs: torch.Tensor,
    proposed: Sequence[int],
    params: SamplingParams,
    generator: torch.Generator | None = None,
    replacement: Replacement = residual_distribution,
) -> tuple[list[int], int]:
    """:func:`sampled_rule` on checked inputs: raw (k+1, V) ``target_logits``, processed
    here with ``params``, and the (k, V) ``draft_probs`` the k ``proposed`` tokens were
    drawn from (one-hot for a deterministic drafter), already processed by the drafter."""
    target_logits, ids = check_target_logits(target_logits, proposed)
    check_draft_probs(draft_probs, ids, target_logits.shape[-1])
    return sampled_rule(target_logits, draft_probs, ids, params, generator, replacement)


def accept_sampled_biased(
    target_logits: torch.Tensor,
    draft_probs: torch.Tensor,
    proposed: Sequence[int],
    params: SamplingParams,
    generator: torch.Generator | None = None,
) -> tuple[list[int], int]:
    """WRONG ON PURPOSE, the negative control: on rejection, resample from p, not the residual.

    Acceptance already gave the drafted token its share, so the output leans towards the
    drafter: a one-hot drafter's d gets P(d) = p + (1 - p)·p = p(2 - p), not p.
    """
    args = (target_logits, draft_probs, proposed, params, generator)
    return accept_sampled(*args, replacement=target_distribution)
