"""Verification: which drafted tokens the target keeps, and the one token it adds.

Every rule here sees the target's logits at the k+1 positions after the context
(row i scores the token that follows ``context + proposed[:i]``) and returns
``(emitted, n_accepted)``: the accepted prefix of the proposal followed by exactly
one token from the target, either the correction at the first rejection or, when
all k were accepted, the bonus token from row k. A round therefore always emits
between 1 and k+1 tokens.

* :func:`accept_greedy`: keep a proposal iff it is the target's argmax. Exact for
  greedy decoding by construction.
* :func:`accept_sampled`: the residual rule (Leviathan et al. 2023; Chen et al.
  2023). Accept x with probability min(1, p(x)/q(x)); on rejection draw from
  norm(max(0, p - q)). The output is distributed exactly as p.
* :func:`accept_sampled_biased`: the plausible bug, resampling from p instead of
  the residual. It exists only as the course's negative control.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from specdec_lib.engine.sampling import SamplingParams, process_logits, sample

# Tolerance for "a probability row sums to 1": loose enough for float32 softmax
# output, tight enough to catch unnormalised scores or a wrong row.
SUM_TOLERANCE = 1e-4


def _check_proposed(proposed: Sequence[int], vocab_size: int) -> list[int]:
    ids = [int(t) for t in proposed]
    for t in ids:
        if not 0 <= t < vocab_size:
            raise ValueError(f"proposed token ids must lie in [0, {vocab_size - 1}], got {t}")
    return ids


def _check_target_logits(target_logits: torch.Tensor, k: int) -> None:
    if target_logits.dim() != 2 or target_logits.shape[0] != k + 1:
        raise ValueError(
            f"target_logits must have shape (k+1, vocab_size) = ({k + 1}, V) for "
            f"k={k} proposals, got {tuple(target_logits.shape)}"
        )
    # NaN would make min(1, p/q) read as 1 (accept) and argmax pick the NaN; +inf or a
    # row that is -inf everywhere has no distribution at all. -inf entries are fine.
    if torch.isnan(target_logits).any() or torch.isposinf(target_logits).any():
        raise ValueError("target_logits must not hold NaN or +inf")
    if torch.isneginf(target_logits).all(-1).any():
        raise ValueError("target_logits must have a finite entry in every row (a row is all -inf)")


def check_draft_probs(draft_probs: torch.Tensor, proposed: Sequence[int], vocab_size: int) -> None:
    """Raise ``ValueError`` unless ``draft_probs`` are k distributions the proposals came from."""
    k = len(proposed)
    if draft_probs.dim() != 2 or tuple(draft_probs.shape) != (k, vocab_size):
        raise ValueError(
            f"draft_probs must have shape (k, vocab_size) = ({k}, {vocab_size}), "
            f"got {tuple(draft_probs.shape)}"
        )
    if k == 0:
        return
    q = draft_probs.detach().to(torch.float64)
    if not torch.isfinite(q).all() or (q < 0).any():
        raise ValueError("draft_probs must be finite and >= 0")
    sums = q.sum(-1)
    if ((sums - 1).abs() > SUM_TOLERANCE).any():
        raise ValueError(
            f"each row of draft_probs must sum to 1 (within {SUM_TOLERANCE}), got sums "
            f"{[round(float(s), 6) for s in sums]}"
        )
    drawn = q[torch.arange(k), torch.as_tensor(list(proposed))]
    if (drawn <= 0).any():
        i = int((drawn <= 0).nonzero()[0])
        raise ValueError(
            f"draft_probs[{i}, proposed[{i}]] must be > 0: a proposal cannot have been "
            "drawn from a distribution that gives it probability 0"
        )


def accept_greedy(target_logits: torch.Tensor, proposed: Sequence[int]) -> tuple[list[int], int]:
    """Keep the longest prefix of ``proposed`` that matches the target's argmax."""
    ids = _check_proposed(proposed, target_logits.shape[-1])
    _check_target_logits(target_logits, len(ids))
    best = target_logits.argmax(-1).tolist()  # the target's own choice at each of k+1 rows
    n = 0
    while n < len(ids) and ids[n] == best[n]:
        n += 1
    return ids[:n] + [best[n]], n


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


def acceptance_probability(p_x: float, q_x: float) -> float:
    """min(1, p(x) / q(x)) for a proposal x drawn with probability q(x) > 0."""
    return min(1.0, p_x / q_x)


Replacement = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def verify_with_replacement(
    target_logits: torch.Tensor,
    draft_probs: torch.Tensor,
    proposed: Sequence[int],
    params: SamplingParams,
    generator: torch.Generator | None,
    replacement: Replacement,
) -> tuple[list[int], int]:
    """The sampled verification loop, with the distribution drawn from after a rejection
    as a parameter: the correct and the biased rule are this loop with one argument changed.
    """
    ids = _check_proposed(proposed, target_logits.shape[-1])
    _check_target_logits(target_logits, len(ids))
    check_draft_probs(draft_probs, ids, target_logits.shape[-1])
    p = process_logits(target_logits, params)  # (k+1, V), the target's processed distribution
    q = draft_probs.detach().to(torch.float64)  # (k, V)
    for i, x in enumerate(ids):
        u = float(torch.rand((), generator=generator, dtype=torch.float64))
        if u < acceptance_probability(float(p[i, x]), float(q[i, x])):
            continue
        return ids[:i] + [sample(replacement(p[i], q[i]), generator)], i
    return ids + [sample(p[len(ids)], generator)], len(ids)


def accept_sampled(
    target_logits: torch.Tensor,
    draft_probs: torch.Tensor,
    proposed: Sequence[int],
    params: SamplingParams,
    generator: torch.Generator | None = None,
) -> tuple[list[int], int]:
    """The residual rule: output tokens are distributed exactly as the target's.

    ``target_logits`` (k+1, V) raw target logits, processed here with ``params``;
    ``draft_probs`` (k, V) the distributions the k ``proposed`` tokens were drawn
    from (one-hot for a deterministic drafter), already processed by the drafter.
    """
    return verify_with_replacement(
        target_logits, draft_probs, proposed, params, generator, residual_distribution
    )


def target_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """The biased rule's replacement: the target's own distribution, ignoring q."""
    return p


def accept_sampled_biased(
    target_logits: torch.Tensor,
    draft_probs: torch.Tensor,
    proposed: Sequence[int],
    params: SamplingParams,
    generator: torch.Generator | None = None,
) -> tuple[list[int], int]:
    """WRONG ON PURPOSE: on rejection, resample from p_target instead of the residual.

    The negative control. The drafted token x already received q(x)·min(1, p/q) of
    mass through acceptance; drawing the replacement from p gives it more, so the
    output leans towards what the drafter liked. For a one-hot drafter proposing d,
    P(d) = p + (1 - p)·p = p(2 - p) instead of p. Never use it to generate.
    """
    return verify_with_replacement(
        target_logits, draft_probs, proposed, params, generator, target_distribution
    )
