"""Deliberately wrong implementations of the exercises: the graders' negative controls.

A grader never shown a wrong answer has not been tested. Each mistake is one plausible
student slip in the exact form its exercise asks for, with the diagnosis its check must
give it (:data:`MISTAKES`); :data:`REFERENCES` are the correct solutions in the same
form. Each is the library's own code fed altered inputs, given another parameter or
with its result altered afterwards, so it differs from the library exactly where its
description says. :func:`catch_rates` runs a check on all of them. Never use them.
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

from .report import Diagnosis as D


def _drafter(context: Sequence[int], max_n: int, min_n: int) -> NgramDrafter:
    """The engine's drafter, over a vocabulary just large enough for ``context``."""
    return NgramDrafter(max_n, min_n, vocab_size=max(context, default=0) + 2)


def _after(context: Sequence[int], start: int, k: int) -> list[int]:
    return [int(t) for t in context[start : start + k]]


def _ngram_reference(context, k, max_n=8, min_n=3):
    """Correct: longest suffix first (max_n down to min_n), its latest earlier occurrence."""
    return _drafter(context, max_n, min_n).propose(context, k).tokens


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
    if n < len(proposed):
        emitted[-1] = int(proposed[n])
    return emitted, n


def _greedy_keeps_going(target_logits, proposed):
    """Each proposal verified on its own, as a one-token proposal; the bonus from row k."""
    rows = enumerate(proposed)
    kept = [int(x) for i, x in rows if accept_greedy(target_logits[i : i + 2], [x])[1]]
    return kept + accept_greedy(target_logits[len(proposed) :], [])[0], len(kept)


def _falls_off_the_end(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """What an inverse-CDF draw from max(0, p - q), not divided by its sum, samples: the
    shortfall, and the mass it lacks on the last token id, where u falls off the end."""
    parts = residual_decomposition(p, q)
    weights = parts.shortfall.clone()
    weights[-1] += 1 - parts.rejected_mass
    return weights


def _speculative_reference(target, drafter, prompt_token_ids, params, k):
    """Correct (the textbook version without a KV cache): draft, verify in one pass, repeat."""
    return speculative_generate(target, drafter, prompt_token_ids, params, k, use_kv_cache=False)


def _speculative_overshoots(target, drafter, prompt_token_ids, params, k):
    """Drafts as if max_tokens were k larger and stops after the round that reaches it."""
    stats, longer = SpeculationStats(), replace(params, max_tokens=params.max_tokens + k)
    out = speculative_generate(target, drafter, prompt_token_ids, longer, k, None, stats, False)
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
        self.target, self.config = target, target.config

    def forward(self, idx: torch.Tensor, cache: object = None) -> torch.Tensor:
        logits = self.target(idx, cache)  # (B, T, V)
        return torch.cat([logits[:, :1], logits[:, :-1]], dim=1)


def _speculative_drops_correction(target, drafter, prompt_token_ids, params, k):
    """The engine's loop with its greedy rule swapped for one that drops the target's token."""
    rule = f"{speculative_generate.__module__}.greedy_rule"
    with mock.patch(rule, _without_target):
        return _speculative_reference(target, drafter, prompt_token_ids, params, k)


def _without_target(logits: torch.Tensor, proposed: list[int]) -> tuple[list[int], int]:
    emitted, n = accept_greedy(logits, proposed)
    return emitted[:n], n


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
    """A one-sided z-test of the drafted token's frequency after ``n`` rounds, the smallest
    p-value over the prefixes ``looks``, against ``p`` (default: the right p(d))."""

    def distribution_test(rule, seed_):
        p_d = float(process_logits(_LOGITS, _PARAMS)[_DRAFTED]) if p is None else p
        q = one_hot_probs([_DRAFTED], 8)[0]
        tokens = first_tokens(rule, _LOGITS, q, _PARAMS, n, seed_ if seed is None else seed)
        z = [tail * z_score(int((tokens[:m] == _DRAFTED).sum()), m, p_d) for m in looks]
        return min(0.5 * math.erfc(v / math.sqrt(2)) for v in z)

    return distribution_test


#: Correct: 60 rounds, a one-sided z-test on the drafted token (the bug raises its frequency).
dist_reference = _dist()


def _cache(grows: Callable, keep: int = -1) -> Callable:
    """Cache lengths if each round grew the context by ``grows(record)`` and the cache held
    all of it but ``-keep`` tokens."""

    def expected_cache_lengths(n_prompt, log):
        lengths, context = [], n_prompt
        for record in log:
            context += grows(record)
            lengths.append(context + keep)
        return lengths

    return expected_cache_lengths


#: Correct: the whole context but its pending last token.
_cache_reference = _cache(lambda r: len(r.emitted))


def _slower_reference(rows):
    """Correct: the smallest batch size whose speed-up interval lies wholly below 1."""
    return min(crossover(rows)["slower_at"], default=None)


def _first(rows, slower):
    return min((r["batch"] for r in rows if slower(r)), default=None)


@dataclass(frozen=True)
class Mistake:
    """One wrong implementation and the diagnosis its grader must give."""

    function: Callable
    diagnosis: D
    description: str


def _table(*rows: tuple[str, Callable, D]) -> dict[str, Mistake]:
    """Rows of (description, function, diagnosis); the description is the label too."""
    return {text: Mistake(fn, diagnosis, text) for text, fn, diagnosis in rows}


def _ngram(max_n=None, min_n=None, k=None):
    """The engine's drafter with another max_n, min_n or k (a function of the inputs)."""

    def propose(context, k_, max_n_=8, min_n_=3):
        hi = max_n_ if max_n is None else max_n(context, max_n_, min_n_)
        lo = min_n_ if min_n is None else min_n
        return _drafter(context, hi, lo).propose(context, k_ if k is None else len(context)).tokens

    return propose


def _sampled(wrap: Callable) -> Callable:
    return lambda logits, q, proposed, params, gen=None: wrap(logits, q, proposed, params, gen)


#: ``{check name: {mistake: Mistake}}``, for every check.
MISTAKES: dict[str, dict[str, Mistake]] = {
    "check_ngram_drafter": _table(
        ("earliest match", _ngram_earliest_match, D.EARLIEST_MATCH),
        ("shortest first", _ngram(max_n=lambda c, hi, lo: lo), D.SHORTEST_FIRST),
        ("matches itself", lambda c, k, hi=8, lo=3: _after(c, len(c), k), D.NEVER_PROPOSES),
        ("copies the match", _ngram_copies_the_match, D.COPIES_THE_MATCH),
        ("ignores k", _ngram(k=True), D.IGNORES_K),
        ("ignores min_n", _ngram(min_n=1), D.IGNORES_MIN_N),
        ("ignores max_n", _ngram(max_n=lambda c, hi, lo: max(len(c), lo)), D.IGNORES_MAX_N),
    ),
    "check_accept_greedy": _table(
        ("no bonus token", lambda t, x: _without_bonus(accept_greedy(t, x), len(x)), D.NO_BONUS),
        ("off-by-one rows", lambda t, x: accept_greedy(_one_row_late(t), x), D.OFF_BY_ONE),
        ("emits the rejected proposal", _greedy_emits_rejected, D.EMITS_REJECTED),
        ("keeps going after a mismatch", _greedy_keeps_going, D.KEEPS_GOING),
    ),
    "check_accept_sampled": _table(
        ("resample from p_target", _sampled(accept_sampled_biased), D.RESAMPLE_FROM_TARGET),
        (
            "accept with p_target(x)",
            _sampled(
                lambda t, q, x, p, g: accept_sampled(t, one_hot_probs(x, t.shape[-1]), x, p, g)
            ),
            D.ACCEPT_WITH_P_TARGET,
        ),
        (
            "no bonus token",
            _sampled(lambda t, q, x, p, g: _without_bonus(accept_sampled(t, q, x, p, g), len(x))),
            D.NO_BONUS,
        ),
        (
            "off-by-one rows",
            _sampled(lambda t, q, x, p, g: accept_sampled(_one_row_late(t), q, x, p, g)),
            D.OFF_BY_ONE,
        ),
        (
            "residual not renormalised",
            _sampled(
                lambda t, q, x, p, g: verify_with_replacement(t, q, x, p, g, _falls_off_the_end)
            ),
            D.UNNORMALISED_RESIDUAL,
        ),
    ),
    "check_speculative_generate": _table(
        ("overshoots max_tokens", _speculative_overshoots, D.WRONG_LENGTH),
        (
            "off-by-one rows",
            lambda t, d, ids, p, k: _speculative_reference(
                _LogitsOnePositionEarly(t), d, ids, p, k
            ),
            D.OUTPUT_MISMATCH,
        ),
        ("drops the correction token", _speculative_drops_correction, D.NO_PROGRESS),
        ("plain decoding", lambda t, d, ids, p, k: generate(t, ids, p), D.NOT_SPECULATING),
    ),
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
    ),
    "check_break_even_c": _table(
        ("inverted", lambda s: s.draft_passes / (s.emitted - s.target_passes), D.INVERTED_RATIO),
        ("target passes free", lambda s: s.emitted / s.draft_passes, D.TARGET_PASSES_FREE),
        ("per emitted token", lambda s: (s.emitted - s.target_passes) / s.emitted, D.PER_TOKEN),
    ),
    "check_distribution_test": _table(
        ("too few rounds", _dist(n=15, looks=(15,)), D.MISSES_BUG),
        ("peeks at every prefix", _dist(looks=range(15, 61)), D.FALSE_ALARMS),
        ("untempered target", _dist(p=float(torch.softmax(_LOGITS, -1)[_DRAFTED])), D.WRONG_NULL),
        ("ignores the seed", _dist(seed=0), D.IGNORES_SEED),
        ("wrong tail", _dist(tail=-1), D.WRONG_TAIL),
    ),
    "check_cache_lengths": _table(
        ("counts the pending token", _cache(lambda r: len(r.emitted), 0), D.COUNTS_PENDING),
        ("no rollback", _cache(lambda r: len(r.proposed) + 1), D.NO_ROLLBACK),
        ("accepted only", _cache(lambda r: r.n_accepted), D.ACCEPTED_ONLY),
    ),
    "check_slower_from": _table(
        ("point estimate", lambda rows: _first(rows, lambda r: r["speedup"] < 1), D.POINT_ESTIMATE),
        ("wrong end", lambda rows: _first(rows, lambda r: r["speedup_low"] < 1), D.WRONG_END),
        (
            "assumes sorted rows",
            lambda rows: next((r["batch"] for r in rows if r["speedup_high"] < 1), None),
            D.ASSUMES_SORTED,
        ),
    ),
}

#: ``{check name: the correct solution in the student's form}``.
REFERENCES: dict[str, Callable] = {
    "check_ngram_drafter": _ngram_reference,
    "check_accept_greedy": accept_greedy,
    "check_accept_sampled": accept_sampled,
    "check_speculative_generate": _speculative_reference,
    "check_decode_step_bytes": _bytes_reference,
    "check_break_even_c": _break_even_reference,
    "check_distribution_test": dist_reference,
    "check_cache_lengths": _cache_reference,
    "check_slower_from": _slower_reference,
}


def catch_rates(check: Callable, seeds: Sequence[int], **kwargs: object) -> dict[str, tuple]:
    """``{mistake: (caught, runs)}``: how often ``check`` gives each of its mistakes their
    diagnosis over ``seeds``; under ``"false alarms"``, how often the reference failed."""
    name, n = check.__name__, len(seeds)
    rates = {
        label: (sum(check(m.function, seed=s, **kwargs).diagnosis is m.diagnosis for s in seeds), n)
        for label, m in MISTAKES[name].items()
    }
    rates["false alarms"] = (sum(not check(REFERENCES[name], seed=s, **kwargs) for s in seeds), n)
    return rates
