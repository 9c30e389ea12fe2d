"""Deliberately wrong implementations of the exercises: the graders' negative controls.

A grader never shown a wrong answer has not been tested. Each mistake is one plausible
slip in the exercise's own form, made of the library's code with one input, parameter or
result altered, and :data:`MISTAKES` says which diagnosis its check must give it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch

from specdec_lib.analysis.costs import kv_cache_bytes_per_token, stats_cost_per_token, weight_bytes
from specdec_lib.analysis.exact import residual_decomposition
from specdec_lib.analysis.hypothesis import first_tokens, z_score
from specdec_lib.analysis.replication import crossover
from specdec_lib.engine.drafters import NgramDrafter, one_hot_probs
from specdec_lib.engine.sampling import SamplingParams, process_logits
from specdec_lib.engine.verify import (
    accept_greedy,
    accept_sampled,
    accept_sampled_biased,
)

from .cache_slips import CACHE_SLIPS, cache_reference
from .goodput_slips import GOODPUT_SLIPS, goodput_reference
from .per_pass import PER_PASS_SLIPS, per_pass_reference
from .replay_slips import REPLAY_SLIPS, counts_reference
from .report import Diagnosis as D
from .rollback import in_dict_order, in_row_order, rollback_as
from .speculative_slips import SPECULATIVE_SLIPS, speculative_reference
from .tree_slips import CHILDREN_SLIPS, LAYOUT_SLIPS, children_reference, layout_reference


def _drafter(context: Sequence[int], max_n: int, min_n: int) -> NgramDrafter:
    """The engine's drafter, over a vocabulary just large enough for ``context``."""
    return NgramDrafter(max_n, min_n, vocab_size=max(context, default=0) + 2)


def _after(context: Sequence[int], start: int, k: int) -> list[int]:
    return [int(t) for t in context[start : start + k]]


def _ngram_earliest_match(context, k, max_n=8, min_n=3):
    """The engine finds the suffix length n; the earliest occurrence is its latest one in
    the reversed context (last token dropped), behind a separator no window matches."""
    match = _drafter(context, max_n, min_n).find_match(context)
    if match is None or k == 0:
        return []
    before, n = list(context[:-1]), match[1]
    view = before[::-1] + [max(context) + 1] + list(context[-n:])[::-1]
    return _after(context, len(before) - _drafter(view, n, n).find_match(view)[0], k)


def _ngram_copies_the_match(context, k, max_n=8, min_n=3):
    match = _drafter(context, max_n, min_n).find_match(context) if k else None
    return [] if match is None else _after(context, match[0] + match[1] - 1, k)


def _one_row_late(target_logits: torch.Tensor) -> torch.Tensor:
    """Row i becomes row i + 1 (the last row stays): proposed[i] meets the wrong row."""
    return torch.cat([target_logits[1:], target_logits[-1:]])  # (k+1, V)


def _without_bonus(result: tuple[list[int], int], k: int) -> tuple[list[int], int]:
    emitted, n = result
    return (emitted[:-1], n) if n == k > 0 else (emitted, n)


def _greedy_emits_rejected(target_logits, proposed):
    emitted, n = accept_greedy(target_logits, proposed)
    return (emitted[:-1] + [int(proposed[n])] if n < len(proposed) else emitted), n


def _greedy_keeps_going(target_logits, proposed):
    """Each proposal verified on its own, as a one-token proposal; the bonus from row k."""
    rows = enumerate(proposed)
    kept = [int(x) for i, x in rows if accept_greedy(target_logits[i : i + 2], [x])[1]]
    return kept + accept_greedy(target_logits[len(proposed) :], [])[0], len(kept)


def _falls_off_the_end(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """What an inverse-CDF draw from max(0, p - q), not renormalised, samples."""
    parts = residual_decomposition(p, q)
    weights = parts.shortfall.clone()
    weights[-1] += 1 - parts.rejected_mass
    return weights


def _greedy_reference(target_logits, proposed):
    """Correct: the engine's rule (a function of the grader's, so that a student handing in
    the engine's own ``accept_greedy`` is told so)."""
    return accept_greedy(target_logits, proposed)


def _sampled_reference(target_logits, draft_probs, proposed, params, generator=None):
    """Correct: the engine's residual rule (a function of the grader's, as above)."""
    return accept_sampled(target_logits, draft_probs, proposed, params, generator)


def _bytes_reference(model, context_len):
    """Correct: every weight once (the tied embedding too), plus the cache of the context."""
    return weight_bytes(model) + kv_cache_bytes_per_token(model.config) * context_len


def _break_even_reference(stats):
    """Correct: the c at which the library's cost per token is 1 (it is linear in c)."""
    at_zero = stats_cost_per_token(stats, 0.0)
    return (1 - at_zero) / (stats_cost_per_token(stats, 1.0) - at_zero)


# The distribution test's situation: a vocabulary of 8 at temperature 0.5, a one-hot
# drafter proposing the favourite token d, p(d) = 0.47.
_WEIGHTS = torch.tensor([0.0, 6, 4, 3, 3, 2, 1, 1], dtype=torch.float64)
_LOGITS = torch.where(_WEIGHTS > 0, _WEIGHTS.log(), torch.full_like(_WEIGHTS, -1e4))
_PARAMS = SamplingParams(temperature=0.5)
_DRAFTED = int(process_logits(_LOGITS, _PARAMS).argmax())


def _dist(n=60, p=None, tail=1, looks=(60,), seed=None) -> Callable:
    """A one-sided z-test of the drafted token after ``n`` rounds, the least p over ``looks``."""

    def distribution_test(rule, seed_):
        p_d = float(process_logits(_LOGITS, _PARAMS)[_DRAFTED]) if p is None else p
        q = one_hot_probs([_DRAFTED], 8)[0]
        tokens = first_tokens(rule, _LOGITS, q, _PARAMS, n, seed_ if seed is None else seed)
        z = [tail * z_score(int((tokens[:m] == _DRAFTED).sum()), m, p_d) for m in looks]
        return min(0.5 * math.erfc(v / math.sqrt(2)) for v in z)

    return distribution_test


#: Correct: 60 rounds, a one-sided z-test on the drafted token (the bug raises its frequency).
dist_reference = _dist()


#: Correct: each row keeps its pending token and its own accepted drafts, and the blocks
#: that hold them, a partly used last block included.
_rollback_reference = rollback_as(lambda n, m, a, shared: n + 1 + a, in_row_order)


def _slower_reference(rows):
    """Correct: the smallest batch size whose speed-up interval lies wholly below 1."""
    return min(crossover(rows)["slower_at"], default=None)


def _first(rows, slower):
    return min((r["batch"] for r in rows if slower(r)), default=None)


def _bernoulli(spoil_if_kept: bool = False, per_round: bool = False, cap: bool = True) -> type:
    """The chapter 9 drafter: the reference's next k tokens, each spoiled (its id + 1) with
    probability 1 - alpha; or with probability alpha, one coin per round, or past k."""

    class BernoulliDrafter:
        def __init__(self, n_prompt, reference, alpha, seed):
            self.n_prompt, self.reference, self.alpha = n_prompt, reference, alpha
            self.rng = torch.Generator().manual_seed(seed)

        def propose(self, context, k, params=None, generator=None):
            done = len(context) - self.n_prompt
            tokens = list(self.reference[done : done + k if cap else None])
            coins = torch.rand(1 if per_round else len(tokens), generator=self.rng).tolist()
            kept = [(c < self.alpha) != spoil_if_kept for c in coins * len(tokens)]
            return [t if keep else t + 1 for t, keep in zip(tokens, kept, strict=False)]

    return BernoulliDrafter


@dataclass(frozen=True)
class Mistake:
    """One wrong implementation and the diagnosis its grader must give."""

    function: Callable
    diagnosis: D


def _table(*rows: tuple[str, Callable, D]) -> dict[str, Mistake]:
    return {label: Mistake(fn, diagnosis) for label, fn, diagnosis in rows}


def _ngram(hi=lambda c, hi, lo: hi, lo=lambda lo: lo, k=lambda c, k: k):
    """The engine's drafter with another max_n, min_n or k (functions of the inputs)."""
    return lambda c, k_, max_n=8, min_n=3: _after(
        _drafter(c, hi(c, max_n, min_n), lo(min_n)).propose(c, k(c, k_)).tokens, 0, len(c)
    )


def _unfiltered(params: SamplingParams) -> SamplingParams:
    """Temperature 1, no top-k, no top-p: the target's raw softmax, whatever was asked."""
    return replace(params, temperature=1.0, top_k=None, top_p=1.0)


def _sampled(
    rows=None, certain=False, bonus=True, residual=None, rule=accept_sampled, settings=None
):
    """The residual rule with its rows shifted, each proposal taken as certain (q(x) = 1),
    no bonus token, another residual, other sampling settings for the target, or another
    rule altogether."""

    def accept_sampled_(logits, q, proposed, params, generator=None):
        logits = logits if rows is None else rows(logits)
        q = one_hot_probs(proposed, logits.shape[-1]) if certain else q
        params = params if settings is None else settings(params)
        args = (logits, q, proposed, params, generator)
        result = rule(*args) if residual is None else accept_sampled(*args, residual)
        return result if bonus else _without_bonus(result, len(proposed))

    return accept_sampled_


#: ``{check name: {mistake: Mistake}}``, for every check (a check whose one module holds its
#: reference and its mistakes, as :mod:`.rerank` does, adds its own two rows when imported).
MISTAKES: dict[str, dict[str, Mistake]] = {
    "check_ngram_drafter": _table(
        ("earliest match", _ngram_earliest_match, D.EARLIEST_MATCH),
        ("shortest first", _ngram(hi=lambda c, hi, lo: lo), D.SHORTEST_FIRST),
        ("matches itself", lambda c, k, hi=8, lo=3: _after(c, len(c), k), D.NEVER_PROPOSES),
        ("copies the match", _ngram_copies_the_match, D.COPIES_THE_MATCH),
        ("ignores k", _ngram(k=lambda c, k: len(c)), D.IGNORES_K),
        ("ignores min_n", _ngram(lo=lambda lo: 1), D.IGNORES_MIN_N),
        ("ignores max_n", _ngram(hi=lambda c, hi, lo: max(len(c), lo)), D.IGNORES_MAX_N),
    ),
    "check_accept_greedy": _table(
        ("no bonus token", lambda t, x: _without_bonus(accept_greedy(t, x), len(x)), D.NO_BONUS),
        ("off-by-one rows", lambda t, x: accept_greedy(_one_row_late(t), x), D.OFF_BY_ONE),
        ("emits the rejected proposal", _greedy_emits_rejected, D.EMITS_REJECTED),
        ("keeps going after a mismatch", _greedy_keeps_going, D.KEEPS_GOING),
    ),
    "check_accept_sampled": _table(
        ("resample from p_target", _sampled(rule=accept_sampled_biased), D.RESAMPLE_FROM_TARGET),
        ("accept with p_target(x)", _sampled(certain=True), D.ACCEPT_WITH_P_TARGET),
        ("no bonus token", _sampled(bonus=False), D.NO_BONUS),
        ("off-by-one rows", _sampled(rows=_one_row_late), D.OFF_BY_ONE),
        (
            "residual not renormalised",
            _sampled(residual=_falls_off_the_end),
            D.UNNORMALISED_RESIDUAL,
        ),
        ("sampling parameters not applied", _sampled(settings=_unfiltered), D.IGNORES_PARAMS),
    ),
    "check_speculative_generate": _table(*SPECULATIVE_SLIPS),
    "check_decode_step_bytes": _table(
        (
            "tied embedding twice",
            lambda m, n: (
                _bytes_reference(m, n)
                - weight_bytes(m)
                + sum(t.nbytes for t in m.state_dict().values())
            ),
            D.TIED_TWICE,
        ),
        ("no KV cache", lambda m, n: weight_bytes(m), D.NO_KV_CACHE),
        (
            "parameters, not bytes",
            lambda m, n: m.num_parameters() + kv_cache_bytes_per_token(m.config, 1) * n,
            D.COUNTS_PARAMETERS,
        ),
        (
            "keys only",
            lambda m, n: weight_bytes(m) + kv_cache_bytes_per_token(m.config) // 2 * n,
            D.KEYS_ONLY,
        ),
        (
            "every query head cached",
            lambda m, n: weight_bytes(m) + 2 * m.config.n_layer * m.config.n_embd * 4 * n,
            D.IGNORES_GQA,
        ),
    ),
    "check_break_even_c": _table(
        ("inverted", lambda s: s.draft_passes / (s.emitted - s.target_passes), D.INVERTED_RATIO),
        ("target passes free", lambda s: s.emitted / s.draft_passes, D.TARGET_PASSES_FREE),
        ("per emitted token", lambda s: (s.emitted - s.target_passes) / s.emitted, D.PER_TOKEN),
    ),
    "check_distribution_test": _table(
        ("too few rounds", _dist(n=15, looks=(15,)), D.MISSES_BUG),
        ("peeks at every prefix", _dist(n=200, looks=range(15, 201)), D.FALSE_ALARMS),
        ("untempered target", _dist(p=float(torch.softmax(_LOGITS, -1)[_DRAFTED])), D.WRONG_NULL),
        ("ignores the seed", _dist(seed=0), D.IGNORES_SEED),
        ("wrong tail", _dist(tail=-1), D.WRONG_TAIL),
    ),
    "check_cache_lengths": _table(*CACHE_SLIPS),
    "check_batch_rollback": _table(
        ("reset instead of crop", rollback_as(lambda n, m, a, s: 0, in_row_order), D.RESETS_CACHE),
        (
            "one rollback for the batch",
            rollback_as(lambda n, m, a, s: n + 1 + m - s, in_row_order),
            D.SHARED_ROLLBACK,
        ),
        (
            "counts of the wrong rows",
            rollback_as(lambda n, m, a, s: n + 1 + a, in_dict_order),
            D.WRONG_ROW,
        ),
        (
            "drops the pending token",
            rollback_as(lambda n, m, a, s: n + a, in_row_order),
            D.DROPS_PENDING,
        ),
        (
            "keeps the correction",
            rollback_as(lambda n, m, a, s: n + 2 + a, in_row_order),
            D.COUNTS_PENDING,
        ),
        ("no rollback", rollback_as(lambda n, m, a, s: n + 1 + m, in_row_order), D.NO_ROLLBACK),
        (
            "frees a partly used block",
            rollback_as(lambda n, m, a, s: n + 1 + a, in_row_order, lambda x, size: x // size),
            D.FREES_PARTIAL_BLOCK,
        ),
    ),
    "check_bernoulli_drafter": _table(
        ("spoils with probability alpha", _bernoulli(spoil_if_kept=True), D.INVERTED_SPOIL),
        ("one coin per round", _bernoulli(per_round=True), D.DEPENDENT_SPOILS),
        ("ignores k", _bernoulli(cap=False), D.IGNORES_K),
    ),
    "check_tokens_per_pass": _table(*PER_PASS_SLIPS),
    "check_tree_mask": _table(*LAYOUT_SLIPS),
    "check_verify_children": _table(*CHILDREN_SLIPS),
    "check_predict_counts": _table(*REPLAY_SLIPS),
    "check_slower_from": _table(
        ("point estimate", lambda rows: _first(rows, lambda r: r["speedup"] < 1), D.POINT_ESTIMATE),
        ("wrong end", lambda rows: _first(rows, lambda r: r["speedup_low"] < 1), D.WRONG_END),
        (
            "assumes sorted rows",
            lambda rows: next((r["batch"] for r in rows if r["speedup_high"] < 1), None),
            D.ASSUMES_SORTED,
        ),
    ),
    "check_goodput_ks": _table(*GOODPUT_SLIPS),
}

#: ``{check name: the correct solution in the student's form}``.
REFERENCES: dict[str, Callable] = {
    "check_ngram_drafter": _ngram(),  # longest suffix first, its latest earlier occurrence
    "check_accept_greedy": _greedy_reference,
    "check_accept_sampled": _sampled_reference,
    "check_speculative_generate": speculative_reference,
    "check_decode_step_bytes": _bytes_reference,
    "check_break_even_c": _break_even_reference,
    "check_distribution_test": dist_reference,
    "check_cache_lengths": cache_reference,
    "check_batch_rollback": _rollback_reference,
    "check_bernoulli_drafter": _bernoulli(),
    "check_slower_from": _slower_reference,
    "check_goodput_ks": goodput_reference,
    "check_tokens_per_pass": per_pass_reference,
    "check_tree_mask": layout_reference,
    "check_verify_children": children_reference,
    "check_predict_counts": counts_reference,
}
