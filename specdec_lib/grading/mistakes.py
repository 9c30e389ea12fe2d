"""Deliberately wrong implementations of the exercises: the graders' negative controls.

A grader that has never been shown a wrong answer has not been tested. Each
function here is one plausible student mistake, in the exact form the exercise
asks for, and :data:`MISTAKES` says which diagnosis the matching check must give
it. The ``*_reference`` functions are the correct solutions in the student's
form, the positive controls. :func:`catch_rates` runs a check on all of them;
``python -m specdec_lib.grading --seeds 100`` prints the table.

Every search, verification and decoding loop here is the engine's own code
(:mod:`specdec_lib.engine.drafters`, :mod:`specdec_lib.engine.verify`,
:mod:`specdec_lib.engine.generate`) fed altered inputs, given another parameter, or with
its result altered afterwards: a mistake differs from the engine exactly where its
docstring says, and nowhere else, because there is no second implementation to
drift. This module imports no check. Never use it to generate text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from unittest import mock

import torch

from specdec_lib.analysis.exact import residual_decomposition
from specdec_lib.engine.drafters import NgramDrafter, one_hot_probs
from specdec_lib.engine.generate import SpeculationStats, generate, speculative_generate
from specdec_lib.engine.verify import (
    accept_greedy,
    accept_sampled,
    accept_sampled_biased,
    verify_with_replacement,
)

from .report import Diagnosis, Report

# --- the n-gram (prompt-lookup) drafter --------------------------------------
# Student form: propose(context, k, max_n=8, min_n=3) -> list[int]


def _drafter(context: Sequence[int], max_n: int, min_n: int) -> NgramDrafter:
    """The engine's drafter, over a vocabulary just large enough for ``context``."""
    return NgramDrafter(max_n, min_n, vocab_size=max(context, default=0) + 2)


def _after(context: Sequence[int], start: int, k: int) -> list[int]:
    return [int(t) for t in context[start : start + k]]


def ngram_reference(context: list[int], k: int, max_n: int = 8, min_n: int = 3) -> list[int]:
    """Correct: longest suffix first (max_n down to min_n), its latest earlier occurrence."""
    return _drafter(context, max_n, min_n).propose(context, k).tokens


def ngram_earliest_match(context, k, max_n=8, min_n=3):
    """Wrong: takes the first occurrence of the suffix instead of the latest.

    The engine finds the suffix length n; the earliest occurrence is the engine's
    latest one in the reversed context (its last token dropped, as the search does),
    behind a separator no window can match across.
    """
    match = _drafter(context, max_n, min_n).find_match(context)
    if match is None or k == 0:
        return []
    n = match[1]
    before = list(context[:-1])
    view = before[::-1] + [max(context) + 1] + list(context[-n:])[::-1]
    start, _ = _drafter(view, n, n).find_match(view)
    return _after(context, len(before) - start, k)


def ngram_shortest_first(context, k, max_n=8, min_n=3):
    """Wrong: tries min_n first, so a short, ambiguous match beats a long one."""
    return _drafter(context, min_n, min_n).propose(context, k).tokens


def ngram_matches_itself(context, k, max_n=8, min_n=3):
    """Wrong: the search includes the suffix itself, the latest occurrence of all, and
    nothing follows it: it never proposes anything."""
    return _after(context, len(context), k)


def ngram_copies_the_match(context, k, max_n=8, min_n=3):
    """Wrong: off by one, copies from the last matched token instead of the one after it."""
    match = _drafter(context, max_n, min_n).find_match(context) if k else None
    return [] if match is None else _after(context, match[0] + match[1] - 1, k)


def ngram_ignores_k(context, k, max_n=8, min_n=3):
    """Wrong: returns everything that followed the match, however long."""
    return _drafter(context, max_n, min_n).propose(context, len(context)).tokens


def ngram_ignores_min_n(context, k, max_n=8, min_n=3):
    """Wrong: falls back to matching a single token when nothing of length min_n matches."""
    return _drafter(context, max_n, 1).propose(context, k).tokens


def ngram_ignores_max_n(context, k, max_n=8, min_n=3):
    """Wrong: starts from the longest suffix that fits, however long, instead of max_n."""
    return _drafter(context, max(len(context), min_n), min_n).propose(context, k).tokens


# --- verification ------------------------------------------------------------------
# Student forms: accept_greedy(target_logits, proposed) -> (emitted, n_accepted);
# accept_sampled(target_logits, draft_probs, proposed, params, generator=None).


def _one_row_late(target_logits: torch.Tensor) -> torch.Tensor:
    """Row i becomes row i + 1 (the last row stays): proposed[i] meets the wrong row."""
    return torch.cat([target_logits[1:], target_logits[-1:]])  # (k+1, V)


def _without_bonus(result: tuple[list[int], int], k: int) -> tuple[list[int], int]:
    emitted, n = result
    return (emitted[:-1], n) if n == k > 0 else (emitted, n)


def greedy_reference(target_logits: torch.Tensor, proposed: Sequence[int]) -> tuple[list[int], int]:
    """Correct: keep the prefix that matches the argmax, then one token from the target."""
    return accept_greedy(target_logits, proposed)


def greedy_no_bonus(target_logits, proposed):
    """Wrong: when every proposal matches, emits nothing from the target's last row."""
    return _without_bonus(accept_greedy(target_logits, proposed), len(proposed))


def greedy_off_by_one_rows(target_logits, proposed):
    """Wrong: checks proposed[i] against row i + 1 (and takes the bonus from the last row)."""
    return accept_greedy(_one_row_late(target_logits), proposed)


def greedy_emits_rejected(target_logits, proposed):
    """Wrong: at the first mismatch, emits the rejected proposal instead of the target's token."""
    emitted, n = accept_greedy(target_logits, proposed)
    if n < len(proposed):
        emitted[-1] = int(proposed[n])
    return emitted, n


def greedy_keeps_going(target_logits, proposed):
    """Wrong: does not stop at the first mismatch; keeps every proposal that matches its row
    (each verified on its own, as a one-token proposal)."""
    kept = [
        int(x) for i, x in enumerate(proposed) if accept_greedy(target_logits[i : i + 2], [x])[1]
    ]
    bonus, _ = accept_greedy(target_logits[len(proposed) :], [])
    return kept + bonus, len(kept)


def sampled_reference(target_logits, draft_probs, proposed, params, generator=None):
    """Correct: accept x with min(1, p(x)/q(x)); on rejection draw from norm(max(0, p - q))."""
    return accept_sampled(target_logits, draft_probs, proposed, params, generator)


def sampled_resample_from_target(target_logits, draft_probs, proposed, params, generator=None):
    """Wrong: on rejection resample from p_target (the library's own negative control)."""
    return accept_sampled_biased(target_logits, draft_probs, proposed, params, generator)


def sampled_accept_with_target_prob(target_logits, draft_probs, proposed, params, generator=None):
    """Wrong: ignores p_draft, as if each proposal were certain (q(x) = 1): it accepts x
    with probability p_target(x) and takes the residual against that one-hot."""
    certain = one_hot_probs(proposed, target_logits.shape[-1])
    return accept_sampled(target_logits, certain, proposed, params, generator)


def sampled_no_bonus(target_logits, draft_probs, proposed, params, generator=None):
    """Wrong: when all k proposals are accepted, returns them without the bonus token."""
    result = accept_sampled(target_logits, draft_probs, proposed, params, generator)
    return _without_bonus(result, len(proposed))


def sampled_off_by_one_rows(target_logits, draft_probs, proposed, params, generator=None):
    """Wrong: verifies proposed[i] against target row i + 1 (the bonus from the last row)."""
    shifted = _one_row_late(target_logits)
    return accept_sampled(shifted, draft_probs, proposed, params, generator)


def _falls_off_the_end(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """What an inverse-CDF draw from max(0, p - q), not divided by its sum, samples: the
    shortfall itself, and the mass it lacks on the last token id, where u falls off the end."""
    parts = residual_decomposition(p, q)
    weights = parts.shortfall.clone()
    weights[-1] += 1 - parts.rejected_mass
    return weights


def sampled_unnormalised_residual(target_logits, draft_probs, proposed, params, generator=None):
    """Wrong: samples the replacement from max(0, p - q) without dividing by its sum."""
    return verify_with_replacement(
        target_logits, draft_probs, proposed, params, generator, _falls_off_the_end
    )


# --- speculative decoding (greedy) ---------------------------------------------------
# Student form: speculative_generate(target, drafter, prompt_token_ids, params, k) -> list[int]


def speculative_reference(target, drafter, prompt_token_ids, params, k):
    """Correct (the textbook version without a KV cache): draft, verify in one pass, repeat."""
    return speculative_generate(target, drafter, prompt_token_ids, params, k, use_kv_cache=False)


def speculative_overshoots(target, drafter, prompt_token_ids, params, k):
    """Wrong: drafts k tokens even near the end (as if max_tokens were k larger) and stops
    after the round that reaches max_tokens, so the last round can overrun it."""
    stats = SpeculationStats()
    longer = replace(params, max_tokens=params.max_tokens + k)
    out = speculative_generate(
        target, drafter, prompt_token_ids, longer, k, stats=stats, use_kv_cache=False
    )
    emitted = 0
    for record in stats.log:
        emitted += len(record.emitted)
        if emitted >= params.max_tokens:
            break
    return out[:emitted]


class _LogitsOnePositionEarly(torch.nn.Module):
    """The target, its logits read one position too early: row t holds row t - 1."""

    def __init__(self, target: torch.nn.Module) -> None:
        super().__init__()
        self.target = target
        self.config = target.config

    def forward(self, idx: torch.Tensor, cache: object = None) -> torch.Tensor:
        logits = self.target(idx, cache)  # (B, T, V)
        return torch.cat([logits[:, :1], logits[:, :-1]], dim=1)


def speculative_off_by_one_rows(target, drafter, prompt_token_ids, params, k):
    """Wrong: verifies with the logits one position too early."""
    early = _LogitsOnePositionEarly(target)
    return speculative_generate(early, drafter, prompt_token_ids, params, k, use_kv_cache=False)


def _accepted_only(target_logits, proposed):
    emitted, n = accept_greedy(target_logits, proposed)
    return emitted[:n], n


def speculative_drops_correction(target, drafter, prompt_token_ids, params, k):
    """Wrong: emits only the accepted proposals, so a fully rejected round emits nothing.

    The engine's loop with its greedy verifier swapped for one that drops the
    target's token (as chapter 4 swaps it for one that trusts the drafter).
    """
    with mock.patch(f"{speculative_generate.__module__}.accept_greedy", _accepted_only):
        return speculative_reference(target, drafter, prompt_token_ids, params, k)


def speculative_plain_decoding(target, drafter, prompt_token_ids, params, k):
    """Wrong: ignores the drafter and decodes one token per pass (right tokens, no speed-up)."""
    return generate(target, prompt_token_ids, params)


@dataclass(frozen=True)
class Mistake:
    """One wrong implementation and the diagnosis its grader must give."""

    function: Callable
    diagnosis: Diagnosis
    description: str


D = Diagnosis
NGRAM_MISTAKES = {
    "earliest match": Mistake(
        ngram_earliest_match, D.EARLIEST_MATCH, "first occurrence instead of the latest"
    ),
    "shortest first": Mistake(ngram_shortest_first, D.SHORTEST_FIRST, "tries min_n before max_n"),
    "matches itself": Mistake(
        ngram_matches_itself, D.NEVER_PROPOSES, "the suffix matches itself, so nothing follows"
    ),
    "copies the match": Mistake(
        ngram_copies_the_match, D.COPIES_THE_MATCH, "off by one: copies from the last matched token"
    ),
    "ignores k": Mistake(ngram_ignores_k, D.IGNORES_K, "returns more than k tokens"),
    "ignores min_n": Mistake(
        ngram_ignores_min_n, D.IGNORES_MIN_N, "matches suffixes shorter than min_n"
    ),
    "ignores max_n": Mistake(
        ngram_ignores_max_n, D.IGNORES_MAX_N, "matches suffixes longer than max_n"
    ),
}
GREEDY_MISTAKES = {
    "no bonus token": Mistake(greedy_no_bonus, D.NO_BONUS, "all accepted, no token from row k"),
    "off-by-one rows": Mistake(
        greedy_off_by_one_rows, D.OFF_BY_ONE, "proposed[i] checked against row i + 1"
    ),
    "emits the rejected proposal": Mistake(
        greedy_emits_rejected, D.EMITS_REJECTED, "the correction is the rejected token"
    ),
    "keeps going after a mismatch": Mistake(
        greedy_keeps_going, D.KEEPS_GOING, "accepts matches after the first mismatch"
    ),
}
SAMPLED_MISTAKES = {
    "resample from p_target": Mistake(
        sampled_resample_from_target,
        D.RESAMPLE_FROM_TARGET,
        "on rejection draws from p_target, not the residual",
    ),
    "accept with p_target(x)": Mistake(
        sampled_accept_with_target_prob,
        D.ACCEPT_WITH_P_TARGET,
        "acceptance probability p(x) instead of min(1, p/q)",
    ),
    "no bonus token": Mistake(sampled_no_bonus, D.NO_BONUS, "all accepted, no token from row k"),
    "off-by-one rows": Mistake(
        sampled_off_by_one_rows, D.OFF_BY_ONE, "proposed[i] verified against row i + 1"
    ),
    "residual not renormalised": Mistake(
        sampled_unnormalised_residual,
        D.UNNORMALISED_RESIDUAL,
        "samples max(0, p - q) without dividing by its sum",
    ),
}
SPECULATIVE_MISTAKES = {
    "overshoots max_tokens": Mistake(
        speculative_overshoots, D.WRONG_LENGTH, "drafts k tokens even when fewer remain"
    ),
    "off-by-one rows": Mistake(
        speculative_off_by_one_rows, D.OUTPUT_MISMATCH, "verifies with logits one position early"
    ),
    "drops the correction token": Mistake(
        speculative_drops_correction, D.NO_PROGRESS, "a fully rejected round emits nothing"
    ),
    "plain decoding": Mistake(
        speculative_plain_decoding, D.NOT_SPECULATING, "one target pass per token"
    ),
}

#: ``{check name: {mistake label: Mistake}}``, for every check.
MISTAKES: dict[str, dict[str, Mistake]] = {
    "check_ngram_drafter": NGRAM_MISTAKES,
    "check_accept_greedy": GREEDY_MISTAKES,
    "check_accept_sampled": SAMPLED_MISTAKES,
    "check_speculative_generate": SPECULATIVE_MISTAKES,
}

#: ``{check name: the correct solution in the student's form}``.
REFERENCES: dict[str, Callable] = {
    "check_ngram_drafter": ngram_reference,
    "check_accept_greedy": greedy_reference,
    "check_accept_sampled": sampled_reference,
    "check_speculative_generate": speculative_reference,
}


def catch_rates(
    check: Callable[..., Report], seeds: Sequence[int], **check_kwargs: object
) -> dict[str, tuple[int, int]]:
    """How often ``check`` gives each of its mistakes their diagnosis, over ``seeds``.

    ``check`` is one of the ``check_*`` functions; its mistakes are
    ``MISTAKES[check.__name__]``. Returns ``{mistake: (caught, runs)}`` and, under
    ``"false alarms"``, how often the correct reference failed: ``(failed, runs)``.
    """
    rates = {}
    for label, mistake in MISTAKES[check.__name__].items():
        caught = sum(
            check(mistake.function, seed=seed, **check_kwargs).diagnosis is mistake.diagnosis
            for seed in seeds
        )
        rates[label] = (caught, len(seeds))
    reference = REFERENCES[check.__name__]
    failed = sum(not check(reference, seed=seed, **check_kwargs).passed for seed in seeds)
    rates["false alarms"] = (failed, len(seeds))
    return rates
