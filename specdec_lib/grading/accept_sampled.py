"""Chapter 6's exercise, the residual rule, in one module: the answer in the student's form,
its slips, and the check.

``accept_sampled(target_logits, draft_probs, proposed, params, generator=None) ->
(emitted, n_accepted)``: proposal x at row i is accepted with probability min(1, p(x) /
q(x)), p the target's distribution after ``params``; the first rejection emits a draw
from norm(max(0, p - q)) instead; k acceptances are followed by a bonus token from row k.
Each slip is the engine's rule with one thing changed, the classic mistakes of this rule:
resampling from p on rejection (the biased rule chapter 7 tests), accepting with p(x)
alone (every proposal taken as certain, q(x) = 1), no bonus token, the rows read one
position late (the last two shared with the greedy rule, :mod:`.accept_greedy`), a
residual not renormalised (what an inverse-CDF draw from max(0, p - q) samples), and the
sampling parameters not applied to the target (its raw softmax verified instead).

Each probe of :func:`check_accept_sampled` runs the student's rule many seeded times in
one situation on a vocabulary of 8; some outcomes are certain for a correct rule, the
others are tested with :mod:`specdec_lib.analysis.hypothesis` at thresholds a correct
rule almost never crosses, and each slip leaves a trace no correct rule can (the most
specific diagnosis wins). Every draw must come from the generator handed in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import torch

from specdec_lib.analysis.exact_distributions import (
    exact_first_token_distribution,
    residual_decomposition,
)
from specdec_lib.analysis.hypothesis import chi_square, z_score
from specdec_lib.engine.drafters import one_hot_probs
from specdec_lib.engine.sampling import SamplingParams, process_logits
from specdec_lib.engine.tree import walk_sampled
from specdec_lib.engine.verify import (
    accept_sampled,
    accept_sampled_biased,
    sampled_rule,
    target_distribution,
)

from .accept_greedy import one_row_late, without_bonus
from .mistakes import register
from .report import Diagnosis as D
from .report import Report
from .sandbox import Abort, as_verification, call_student, forbidden, run_check

# --- the answer, and its slips ---------------------------------------------------------


def _sampled_reference(target_logits, draft_probs, proposed, params, generator=None):
    """Correct: the engine's residual rule (a function of the grader's, so that a student
    handing in the engine's own ``accept_sampled`` is told so)."""
    return accept_sampled(target_logits, draft_probs, proposed, params, generator)


def _falls_off_the_end(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """What an inverse-CDF draw from max(0, p - q), not renormalised, samples."""
    parts = residual_decomposition(p, q)
    weights = parts.shortfall.clone()
    weights[-1] += 1 - parts.rejected_mass
    return weights


def _unfiltered(params: SamplingParams) -> SamplingParams:
    """Temperature 1, no top-k, no top-p: the target's raw softmax, whatever was asked."""
    return replace(params, temperature=1.0, top_k=None, top_p=1.0)


def _rule_as(
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
        return result if bonus else without_bonus(result, len(proposed))

    return accept_sampled_


register(
    "check_accept_sampled",
    _sampled_reference,
    ("resample from p_target", _rule_as(rule=accept_sampled_biased), D.RESAMPLE_FROM_TARGET),
    ("accept with p_target(x)", _rule_as(certain=True), D.ACCEPT_WITH_P_TARGET),
    ("no bonus token", _rule_as(bonus=False), D.NO_BONUS),
    ("off-by-one rows", _rule_as(rows=one_row_late), D.OFF_BY_ONE),
    ("residual not renormalised", _rule_as(residual=_falls_off_the_end), D.UNNORMALISED_RESIDUAL),
    ("sampling parameters not applied", _rule_as(settings=_unfiltered), D.IGNORES_PARAMS),
)


# --- the check -------------------------------------------------------------------------

_V = 8
_T1 = SamplingParams(temperature=1.0)
_Z_LIMIT = 4.0  # |z| beyond this is a failure: two-sided p ~ 6e-5 for a correct rule
_P_LIMIT = 1e-4  # chi-square p-values below this are failures
_PASSED = (
    "Correct: every exact probe behaves as the residual rule must, and the sampled "
    "outputs match p_target (acceptance rate, one-hot draft, temperature and top-k)."
)
_Trials = list[tuple[list[int], list[int], int]]  # (proposed, emitted, n_accepted) per round
_Seen = tuple[dict[str, Any], list[tuple[D, str]]]  # evidence, findings


def _probs(*weights: float) -> torch.Tensor:
    p = torch.tensor(weights, dtype=torch.float64)
    return p / p.sum()


def _logits_for(p: torch.Tensor) -> torch.Tensor:
    """Logits whose softmax is ``p``; zero probability becomes -1e4 (exactly 0 after softmax)."""
    return torch.where(p > 0, p.log(), torch.full_like(p, -1e4))


def _chi_square_p(tokens: list[int], p: torch.Tensor) -> float:
    """p-value of ``tokens`` against ``p``; a token outside the vocabulary gives 0."""
    if not tokens or any(not 0 <= t < len(p) for t in tokens):
        return 0.0
    counts = torch.bincount(torch.tensor(tokens, dtype=torch.long), minlength=len(p))
    return chi_square(counts, p).p_value


def _round_problem(emitted: list[int], n: int, proposed: list[int]) -> str | None:
    k = len(proposed)
    if not 0 <= n <= k:
        return f"n_accepted = {n} with k = {k} proposals"
    if emitted[:n] != proposed[:n]:
        return f"emitted = {emitted} does not start with the accepted {proposed[:n]}"
    if len(emitted) == n < k:
        return f"no replacement after rejecting proposal {n} (emitted = {emitted})"
    if len(emitted) not in (n, n + 1):
        return f"{len(emitted)} tokens emitted with n_accepted = {n}"
    return None


class _Runner:
    """Runs the student's rule in one situation many times, checking each round's shape."""

    def __init__(self, fn: Callable, name: str, seed: int) -> None:
        self.fn, self.name, self.seed, self.calls = fn, name, seed, 0

    def run(self, probe: int, logits, q, params, trials: int, propose: Callable) -> _Trials:
        gen = torch.Generator().manual_seed(self.seed * 1009 + probe)  # for the student
        ours = torch.Generator().manual_seed(self.seed * 1009 + probe + 500)  # for proposals
        out = []
        for _ in range(trials):
            proposed = propose(ours)
            args = (logits.clone(), q.clone(), list(proposed), params, gen)
            during = f"with k = {q.shape[0]}"
            result = call_student(self.fn, self.name, *args, during=during, own_generator=True)
            self.calls += 1
            emitted, n = as_verification(result, self.name)
            if problem := _round_problem(emitted, n, proposed):
                raise Abort(D.INVALID_OUTPUT, f"An impossible round: {problem}.")
            out.append((proposed, emitted, n))
        return out


def _proposals_from(q: torch.Tensor) -> Callable[[torch.Generator], list[int]]:
    return lambda g: torch.multinomial(q, 1, generator=g)[:, 0].tolist()


def _probe_equal(runner: _Runner) -> _Seen:
    """p == q at every position: min(1, p/q) = 1, so all k are accepted and a bonus follows."""
    logits = _logits_for(_probs(0, 1, 2, 3, 1.5, 1.5, 1, 0)).repeat(4, 1)
    q = process_logits(logits[:3], _T1)
    trials = runner.run(1, logits, q, _T1, 60, _proposals_from(q))
    all_in = [t for t in trials if t[2] == 3]
    missing = sum(len(t[1]) == 3 for t in all_in)
    findings = []
    if missing:
        findings.append((D.NO_BONUS, f"p == q: {missing} of {len(all_in)} rounds had no bonus."))
    if len(all_in) < len(trials):
        rejected = len(trials) - len(all_in)
        findings.append((D.WRONG_ACCEPTANCE, f"p == q, yet {rejected} rounds rejected."))
    return {"p==q: rounds accepting all 3": f"{len(all_in)}/{len(trials)}"}, findings


def _probe_shift(runner: _Runner) -> _Seen:
    """Row 0 rules the proposal out, row 1 makes it certain: only row 0 may count."""
    logits = torch.stack(
        [_logits_for(_probs(0, 3, 3, 2, 2, 0, 0, 0)), _logits_for(_probs(0, 0, 0, 0, 0, 1, 0, 0))]
    )
    trials = runner.run(2, logits, one_hot_probs([5], _V), _T1, 40, lambda g: [5])
    accepted = sum(t[2] for t in trials)
    details = f"Row 0 gives proposed[0] probability 0, row 1 gives it 1: accepted {accepted}/40."
    found = D.OFF_BY_ONE if accepted >= 20 else D.WRONG_ACCEPTANCE if accepted else None
    return {"p(x)=0 at row 0, 1 at row 1: accepted": accepted}, [(found, details)] if found else []


def _probe_ratio(runner: _Runner) -> _Seen:
    """p(x) = 0.6 > q(x) = 0.2: min(1, p/q) = 1, so the proposal is always accepted."""
    p, q = _probs(0, 6, 1, 1, 1, 1, 0, 0), _probs(0, 2, 2, 2, 2, 2, 0, 0)
    trials = runner.run(3, _logits_for(p).repeat(2, 1), q[None], _T1, 60, lambda g: [1])
    accepted = sum(t[2] for t in trials)
    evidence = {"p(x)=0.6 > q(x)=0.2: accepted": f"{accepted}/60"}
    if accepted == 60:
        return evidence, []
    z = z_score(accepted, 60, 0.6)
    details = f"p(x) = 0.6 > q(x) = 0.2: accepted {accepted}/60 (z = {z:+.1f} against 0.6)."
    found = D.ACCEPT_WITH_P_TARGET if abs(z) <= _Z_LIMIT else D.WRONG_ACCEPTANCE
    return evidence, [(found, details)]


def _probe_rate(runner: _Runner) -> _Seen:
    """p(x) = 0.3, q(x) = 0.6: accepted with probability 0.5; replacements from the residual."""
    p, q = _probs(0, 3, 2, 2, 3, 0, 0, 0), _probs(0, 6, 1, 1, 1, 1, 0, 0)
    trials = runner.run(4, _logits_for(p).repeat(2, 1), q[None], _T1, 150, lambda g: [1])
    accepted = sum(t[2] for t in trials)
    z = z_score(accepted, 150, 0.5)
    findings = []
    if abs(z) > _Z_LIMIT:
        findings.append((D.WRONG_ACCEPTANCE, f"min(1, 0.3/0.6) = 0.5; accepted {accepted}/150."))
    residual = (p - q).clamp(min=0)
    outside = sum(not 0 <= t[1][0] < _V or residual[t[1][0]] <= 0 for t in trials if t[2] == 0)
    if outside:
        findings.append((D.WRONG_DISTRIBUTION, f"{outside} replacements outside max(0, p - q)."))
    return {"p(x)=0.3, q(x)=0.6: acceptance (expect 0.5)": f"{accepted / 150:.3f}"}, findings


def _probe_one_hot(runner: _Runner) -> _Seen:
    """A one-hot drafter proposing d: P(d) must be p(d), and a replacement is never d."""
    d, p = 1, _probs(0, 5, 1, 1, 1, 1, 1, 0)
    q = one_hot_probs([d], _V)
    trials = runner.run(5, _logits_for(p).repeat(2, 1), q, _T1, 200, lambda g: [d])
    first = [t[1][0] for t in trials]
    replacements = [t[1][0] for t in trials if t[2] == 0]
    impossible = sorted({y for y in replacements if not 0 <= y < _V or p[y] <= 0})
    n_d = first.count(d)
    exact = float(exact_first_token_distribution(p, q[0])[d])
    biased = float(exact_first_token_distribution(p, q[0], target_distribution)[d])
    z, pvalue = z_score(n_d, 200, exact), _chi_square_p(first, p)
    freq = f"P(d) = {n_d / 200:.3f} where p_target(d) = {exact:.2f} (z = {z:+.1f})"
    findings = []
    if d in replacements:
        details = (
            f"{replacements.count(d)} of {len(replacements)} replacements were d; {freq}; "
            f"resampling from p_target predicts p(2 - p) = {biased:.2f} (exact enumeration)."
        )
        findings.append((D.RESAMPLE_FROM_TARGET, details))
    if impossible:
        details = f"Replacements the target gives probability 0: ids {impossible}."
        findings.append((D.UNNORMALISED_RESIDUAL, details))
    if abs(z) > _Z_LIMIT or pvalue < _P_LIMIT:
        findings.append((D.WRONG_DISTRIBUTION, f"{freq}; chi-square p-value {pvalue:.2g}."))
    evidence = {"one-hot draft: P(drafted token)": freq, "one-hot draft: chi-square p": pvalue}
    return evidence, findings


def _probe_filtered(runner: _Runner) -> _Seen:
    """Temperature 0.8 and top-k 5: the token at position 2 must follow the filtered p[1]."""
    params = SamplingParams(temperature=0.8, top_k=5)
    raw = torch.tensor(
        [
            [-1e4, 1.0, 0.5, 0.2, 0.0, -0.3, -0.5, -1e4],
            [-1e4, 0.2, 0.9, -0.4, 0.6, 0.0, 0.4, -1e4],
            [-1e4, -0.5, 0.0, 0.3, -0.2, 1.2, 0.8, -1e4],
        ],
        dtype=torch.float64,
    )
    draft_raw = torch.tensor([-1e4, 0.8, 0.1, 0.7, 0.3, 0.2, -0.2, -1e4], dtype=torch.float64)
    # Row 0 of the draft equals the target's, so position 1 is always accepted and the
    # second emitted token is exactly the output of verifying position 2.
    q = torch.stack([process_logits(raw[0], params), process_logits(draft_raw, params)])
    trials = runner.run(6, raw, q, params, 200, _proposals_from(q))
    second = [t[1][1] for t in trials if len(t[1]) > 1]
    pvalue = _chi_square_p(second, process_logits(raw[1], params))
    evidence = {"temperature 0.8, top-k 5: chi-square p (position 2)": pvalue}
    if pvalue >= _P_LIMIT:
        return evidence, []
    raw_p = _chi_square_p(second, torch.softmax(raw[1], -1))
    details = f"Position 2 against the processed p: chi-square p = {pvalue:.2g}; raw: {raw_p:.2g}."
    return evidence, [(D.IGNORES_PARAMS if raw_p >= _P_LIMIT else D.WRONG_DISTRIBUTION, details)]


_PROBES = [_probe_equal, _probe_shift, _probe_ratio, _probe_rate, _probe_one_hot, _probe_filtered]

#: The library's residual rule, however reached (chapter 12's walk runs it at every node).
_RULES = forbidden(accept_sampled, sampled_rule, walk_sampled)


def check_accept_sampled(
    accept_sampled: Callable, seed: int = 0, timeout: float | None = 60.0
) -> Report:
    """Check ``accept_sampled(target_logits, draft_probs, proposed, params, generator=None)``
    in about 700 seeded calls: p == q accepts all and adds a bonus, a proposal row 0 rules
    out is rejected, p(x) > q(x) is accepted; the acceptance rate is min(1, p/q); with a
    one-hot drafter P(d) = p(d) and no replacement is d; at temperature 0.8 and top-k 5
    the second token follows the filtered p. Every draw must come from ``generator``."""

    def body(name: str) -> Report:
        runner = _Runner(accept_sampled, name, seed)
        evidence: dict[str, Any] = {}
        findings: list[tuple[D, str]] = []
        errors: list[Abort] = []
        for probe in _PROBES:
            try:
                seen, found = probe(runner)
            except Abort as abort:  # "accept with p(x)" may divide 0 by 0 when p == q
                if abort.diagnosis is D.NOT_IMPLEMENTED:
                    raise
                errors.append(abort)
                continue
            evidence.update(seen)
            findings += found
        evidence["calls"] = runner.calls
        if findings:
            findings.sort(key=lambda f: list(D).index(f[0]))  # the most specific first
            others = {d.headline for d, _ in findings[1:]} - {findings[0][0].headline}
            if others:
                evidence["also seen"] = ", ".join(sorted(others))
            raise Abort(*findings[0], **evidence)
        if errors:
            errors[0].evidence.update(evidence)
            raise errors[0]
        return Report("check_accept_sampled", name, True, _PASSED, None, evidence)

    return run_check("check_accept_sampled", accept_sampled, body, seed, timeout, _RULES)
