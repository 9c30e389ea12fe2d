"""Deliberately wrong implementations of the exercises: the graders' negative controls.

A grader that has never been shown a wrong answer has not been tested. Each function
here is one plausible student mistake, in the exact form its exercise asks for, and
:data:`MISTAKES` says which diagnosis its check must give it; :data:`REFERENCES` are
the correct solutions in the same form. :func:`catch_rates` runs a check on all of
them; ``python -m specdec_lib.grading --seeds 100`` prints the table.

Every mistake is the library's own code fed altered inputs, given another parameter,
or with its result altered afterwards, so it differs from the library exactly where
its docstring says. This module imports no check. Never use it to generate text.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from unittest import mock

import torch

from specdec_lib.analysis.costs import kv_cache_bytes_per_token, stats_cost_per_token, weight_bytes
from specdec_lib.analysis.exact import residual_decomposition
from specdec_lib.analysis.hypothesis import first_tokens, z_score
from specdec_lib.analysis.replication import crossover
from specdec_lib.engine.drafters import NgramDrafter, one_hot_probs
from specdec_lib.engine.generate import SpeculationStats, generate, speculative_generate
from specdec_lib.engine.sampling import SamplingParams, process_logits
from specdec_lib.engine.verify import (
    accept_greedy,
    accept_sampled,
    accept_sampled_biased,
    verify_with_replacement,
)

from .report import Diagnosis

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
    with mock.patch(f"{speculative_generate.__module__}.greedy_rule", _accepted_only):
        return speculative_reference(target, drafter, prompt_token_ids, params, k)


def speculative_plain_decoding(target, drafter, prompt_token_ids, params, k):
    """Wrong: ignores the drafter and decodes one token per pass (right tokens, no speed-up)."""
    return generate(target, prompt_token_ids, params)


# --- bytes read per decode step (chapter 1) ------------------------------------------
# Student form: decode_step_bytes(model, context_len) -> int


def bytes_reference(model, context_len):
    """Correct: every weight once (the tied embedding too), plus the cache of the context."""
    return weight_bytes(model) + kv_cache_bytes_per_token(model.config) * context_len


def bytes_tied_twice(model, context_len):
    """Wrong: sums the state dict, where the tied embedding appears under two names."""
    tensors = model.state_dict().values()
    cache = kv_cache_bytes_per_token(model.config) * context_len
    return sum(t.numel() * t.element_size() for t in tensors) + cache


def bytes_no_kv_cache(model, context_len):
    """Wrong: the weights alone."""
    return weight_bytes(model)


def bytes_counts_parameters(model, context_len):
    """Wrong: counts numbers, not bytes (weights and cache alike)."""
    return model.num_parameters() + kv_cache_bytes_per_token(model.config, 1) * context_len


def bytes_keys_only(model, context_len):
    """Wrong: a key per layer per token, but no value."""
    return weight_bytes(model) + kv_cache_bytes_per_token(model.config) // 2 * context_len


# --- the break-even draft cost (chapter 5) ---------------------------------------------
# Student form: break_even_c(stats) -> float


def break_even_reference(stats):
    """Correct: the c at which the library's cost per token is 1 (it is linear in c)."""
    at_zero = stats_cost_per_token(stats, 0.0)
    return (1 - at_zero) / (stats_cost_per_token(stats, 1.0) - at_zero)


def break_even_inverted(stats):
    """Wrong: draft passes per target pass saved, D / (E - T)."""
    return stats.draft_passes / (stats.emitted - stats.target_passes)


def break_even_target_free(stats):
    """Wrong: leaves out the target passes, E / D."""
    return stats.emitted / stats.draft_passes


def break_even_per_token(stats):
    """Wrong: passes saved per emitted token, (E - T) / E."""
    return (stats.emitted - stats.target_passes) / stats.emitted


# --- a distribution test (chapter 7) ---------------------------------------------------
# Student form: distribution_test(rule, seed) -> float, the p-value; the check calls it on
# accept_sampled and accept_sampled_biased. The situation: a vocabulary of 8 at
# temperature 0.5, a one-hot drafter proposing the favourite token d, p(d) = 0.47.

_WEIGHTS = torch.tensor([0.0, 6, 4, 3, 3, 2, 1, 1], dtype=torch.float64)
LOGITS = torch.where(_WEIGHTS > 0, _WEIGHTS.log(), torch.full_like(_WEIGHTS, -1e4))
PARAMS = SamplingParams(temperature=0.5)
P_TARGET = process_logits(LOGITS, PARAMS)
DRAFTED = int(P_TARGET.argmax())


def _upper_tail(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2))


def _z_test(rule, seed, n=60, p=float(P_TARGET[DRAFTED]), tail=1, looks=(60,)):
    tokens = first_tokens(rule, LOGITS, one_hot_probs([DRAFTED], 8)[0], PARAMS, n, seed)
    return min(_upper_tail(tail * z_score(int((tokens[:m] == DRAFTED).sum()), m, p)) for m in looks)


def dist_reference(rule, seed):
    """Correct: 60 rounds, a one-sided z-test on the drafted token (the bug raises it)."""
    return _z_test(rule, seed)


def dist_too_few_rounds(rule, seed):
    """Wrong: 15 rounds, the fewest a z-score allows: too little power."""
    return _z_test(rule, seed, n=15, looks=(15,))


def dist_peeks(rule, seed):
    """Wrong: tests every prefix from 15 rounds on and reports the smallest p-value."""
    return _z_test(rule, seed, looks=range(15, 61))


def dist_untempered_target(rule, seed):
    """Wrong: compares with softmax(logits), forgetting the temperature of the rule's p."""
    return _z_test(rule, seed, p=float(torch.softmax(LOGITS, -1)[DRAFTED]))


def dist_ignores_seed(rule, seed):
    """Wrong: draws every run from seed 0."""
    return _z_test(rule, 0)


def dist_wrong_tail(rule, seed):
    """Wrong: a one-sided test of 'too rarely', where the bug makes d too frequent."""
    return _z_test(rule, seed, tail=-1)


# --- cache lengths (chapter 8) ---------------------------------------------------------
# Student form: expected_cache_lengths(n_prompt, log) -> list[int]


def _lengths(n_prompt, log, grows, keep=-1):
    lengths, context = [], n_prompt
    for record in log:
        context += grows(record)
        lengths.append(context + keep)
    return lengths


def cache_reference(n_prompt, log):
    """Correct: the whole context but its pending last token."""
    return _lengths(n_prompt, log, lambda r: len(r.emitted))


def cache_counts_pending(n_prompt, log):
    """Wrong: the whole context, the pending token included."""
    return _lengths(n_prompt, log, lambda r: len(r.emitted), keep=0)


def cache_no_rollback(n_prompt, log):
    """Wrong: keeps every position a verification pass wrote, rejected ones too."""
    return _lengths(n_prompt, log, lambda r: len(r.proposed) + 1)


def cache_accepted_only(n_prompt, log):
    """Wrong: grows by the accepted proposals, forgetting the target's own token."""
    return _lengths(n_prompt, log, lambda r: r.n_accepted)


# --- reading a batch sweep (chapter 10) ------------------------------------------------
# Student form: slower_from(rows) -> int | None; rows hold batch, speedup, speedup_low,
# speedup_high.


def slower_reference(rows):
    """Correct: the smallest batch size whose speed-up interval lies wholly below 1."""
    return min(crossover(rows)["slower_at"], default=None)


def slower_point_estimate(rows):
    """Wrong: reads the point estimate, claiming crossovers the interval does not resolve."""
    return min((r["batch"] for r in rows if r["speedup"] < 1), default=None)


def slower_wrong_end(rows):
    """Wrong: calls it slower when the interval's lower end is below 1."""
    return min((r["batch"] for r in rows if r["speedup_low"] < 1), default=None)


def slower_assumes_sorted(rows):
    """Wrong: the first row resolved slower, in the order the rows came."""
    return next((r["batch"] for r in rows if r["speedup_high"] < 1), None)


@dataclass(frozen=True)
class Mistake:
    """One wrong implementation and the diagnosis its grader must give."""

    function: Callable
    diagnosis: Diagnosis
    description: str


def _table(*rows: tuple[str, Callable, Diagnosis, str]) -> dict[str, Mistake]:
    return {label: Mistake(fn, diagnosis, text) for label, fn, diagnosis, text in rows}


D = Diagnosis
#: ``{check name: {mistake label: Mistake}}``, for every check.
MISTAKES: dict[str, dict[str, Mistake]] = {
    "check_ngram_drafter": _table(
        ("earliest match", ngram_earliest_match, D.EARLIEST_MATCH, "first occurrence, not latest"),
        ("shortest first", ngram_shortest_first, D.SHORTEST_FIRST, "tries min_n before max_n"),
        ("matches itself", ngram_matches_itself, D.NEVER_PROPOSES, "the suffix matches itself"),
        ("copies the match", ngram_copies_the_match, D.COPIES_THE_MATCH, "copies one too early"),
        ("ignores k", ngram_ignores_k, D.IGNORES_K, "returns more than k tokens"),
        ("ignores min_n", ngram_ignores_min_n, D.IGNORES_MIN_N, "suffixes shorter than min_n"),
        ("ignores max_n", ngram_ignores_max_n, D.IGNORES_MAX_N, "suffixes longer than max_n"),
    ),
    "check_accept_greedy": _table(
        ("no bonus token", greedy_no_bonus, D.NO_BONUS, "all accepted, no token from row k"),
        ("off-by-one rows", greedy_off_by_one_rows, D.OFF_BY_ONE, "proposed[i] vs row i + 1"),
        ("emits the rejected proposal", greedy_emits_rejected, D.EMITS_REJECTED, "wrong token"),
        ("keeps going after a mismatch", greedy_keeps_going, D.KEEPS_GOING, "accepts later"),
    ),
    "check_accept_sampled": _table(
        ("resample from p_target", sampled_resample_from_target, D.RESAMPLE_FROM_TARGET, "p"),
        ("accept with p_target(x)", sampled_accept_with_target_prob, D.ACCEPT_WITH_P_TARGET, ""),
        ("no bonus token", sampled_no_bonus, D.NO_BONUS, "all accepted, no token from row k"),
        ("off-by-one rows", sampled_off_by_one_rows, D.OFF_BY_ONE, "proposed[i] vs row i + 1"),
        ("residual not renormalised", sampled_unnormalised_residual, D.UNNORMALISED_RESIDUAL, ""),
    ),
    "check_speculative_generate": _table(
        ("overshoots max_tokens", speculative_overshoots, D.WRONG_LENGTH, "drafts k near the end"),
        ("off-by-one rows", speculative_off_by_one_rows, D.OUTPUT_MISMATCH, "logits one early"),
        ("drops the correction token", speculative_drops_correction, D.NO_PROGRESS, "emits 0"),
        ("plain decoding", speculative_plain_decoding, D.NOT_SPECULATING, "one pass per token"),
    ),
    "check_decode_step_bytes": _table(
        ("tied embedding twice", bytes_tied_twice, D.TIED_TWICE, "sums the state dict"),
        ("no KV cache", bytes_no_kv_cache, D.NO_KV_CACHE, "the weights alone"),
        ("parameters, not bytes", bytes_counts_parameters, D.COUNTS_PARAMETERS, "numbers"),
        ("keys only", bytes_keys_only, D.KEYS_ONLY, "half the cache"),
    ),
    "check_break_even_c": _table(
        ("inverted", break_even_inverted, D.INVERTED_RATIO, "D / (E - T)"),
        ("target passes free", break_even_target_free, D.TARGET_PASSES_FREE, "E / D"),
        ("per emitted token", break_even_per_token, D.PER_TOKEN, "(E - T) / E"),
    ),
    "check_distribution_test": _table(
        ("too few rounds", dist_too_few_rounds, D.MISSES_BUG, "15 rounds"),
        ("peeks at every prefix", dist_peeks, D.FALSE_ALARMS, "smallest of 46 p-values"),
        ("untempered target", dist_untempered_target, D.WRONG_NULL, "softmax(logits) as p"),
        ("ignores the seed", dist_ignores_seed, D.IGNORES_SEED, "always seed 0"),
        ("wrong tail", dist_wrong_tail, D.WRONG_TAIL, "tests 'too rarely'"),
    ),
    "check_cache_lengths": _table(
        ("counts the pending token", cache_counts_pending, D.COUNTS_PENDING, "context"),
        ("no rollback", cache_no_rollback, D.NO_ROLLBACK, "keeps rejected positions"),
        ("accepted only", cache_accepted_only, D.ACCEPTED_ONLY, "forgets the target's token"),
    ),
    "check_slower_from": _table(
        ("point estimate", slower_point_estimate, D.POINT_ESTIMATE, "speedup < 1"),
        ("wrong end", slower_wrong_end, D.WRONG_END, "speedup_low < 1"),
        ("assumes sorted rows", slower_assumes_sorted, D.ASSUMES_SORTED, "first in order"),
    ),
}

#: ``{check name: the correct solution in the student's form}``.
REFERENCES: dict[str, Callable] = {
    "check_ngram_drafter": ngram_reference,
    "check_accept_greedy": greedy_reference,
    "check_accept_sampled": sampled_reference,
    "check_speculative_generate": speculative_reference,
    "check_decode_step_bytes": bytes_reference,
    "check_break_even_c": break_even_reference,
    "check_distribution_test": dist_reference,
    "check_cache_lengths": cache_reference,
    "check_slower_from": slower_reference,
}


def catch_rates(
    check: Callable, seeds: Sequence[int], **check_kwargs: object
) -> dict[str, tuple[int, int]]:
    """``{mistake: (caught, runs)}``: how often ``check`` gives each of its mistakes their
    diagnosis over ``seeds``; under ``"false alarms"``, how often the reference failed."""
    rates = {
        label: (
            sum(check(m.function, seed=s, **check_kwargs).diagnosis is m.diagnosis for s in seeds),
            len(seeds),
        )
        for label, m in MISTAKES[check.__name__].items()
    }
    reference = REFERENCES[check.__name__]
    failed = sum(not check(reference, seed=s, **check_kwargs).passed for s in seeds)
    rates["false alarms"] = (failed, len(seeds))
    return rates
