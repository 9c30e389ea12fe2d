"""The probes of the residual-rule check: fixed situations, each run many seeded times.

Each probe puts the student's ``accept_sampled`` in one situation (fixed target
logits, draft distributions and sampling parameters, on a vocabulary of 8 so that
every probability is seen many times) and returns an :class:`Outcome`: the
evidence to show, the mistakes its numbers reveal, and a phrase for the passing
message. Some outcomes are certain for a correct rule (p == q accepts everything);
the others are tested with :mod:`specdec_lib.analysis.hypothesis` (z-scores, chi-square) at
thresholds a correct rule almost never crosses. Each classic mistake has a
signature no correct rule can produce, so a diagnosis comes with its evidence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from specdec_lib.analysis.exact import exact_first_token_distribution
from specdec_lib.analysis.hypothesis import chi_square, z_score
from specdec_lib.engine.drafters import one_hot_probs
from specdec_lib.engine.sampling import SamplingParams, process_logits
from specdec_lib.engine.verify import target_distribution

from .harness import Abort, as_verification, call_student
from .report import Diagnosis

V = 8
T1 = SamplingParams(temperature=1.0)
Z_LIMIT = 4.0  # |z| beyond this is a failure: two-sided p ~ 6e-5 for a correct rule
P_LIMIT = 1e-4  # chi-square p-values below this are failures

Finding = tuple[Diagnosis, str]


@dataclass
class Outcome:
    """What one probe saw: evidence to show, mistakes revealed, a phrase for a pass."""

    evidence: dict[str, Any] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    summary: str = ""


@dataclass
class Trial:
    proposed: list[int]
    emitted: list[int]
    n: int


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


class Runner:
    """Runs the student's rule in one situation many times, checking each round's shape."""

    def __init__(self, fn: Callable, name: str, seed: int) -> None:
        self.fn, self.name, self.seed = fn, name, seed
        self.calls = 0

    def run(
        self,
        probe: int,
        logits: torch.Tensor,
        q: torch.Tensor,
        params: SamplingParams,
        trials: int,
        proposals: Callable[[torch.Generator], list[int]],
    ) -> list[Trial]:
        gen = torch.Generator().manual_seed(self.seed * 1009 + probe)  # for the student
        proposal_gen = torch.Generator().manual_seed(self.seed * 1009 + probe + 500)  # for us
        out = []
        for _ in range(trials):
            proposed = proposals(proposal_gen)
            args = (logits.clone(), q.clone(), list(proposed), params, gen)
            result = call_student(
                self.fn, self.name, args, during=f"with k = {q.shape[0]} proposals"
            )
            self.calls += 1
            emitted, n = as_verification(result, self.name)
            self._check_shape(emitted, n, proposed)
            out.append(Trial(proposed, emitted, n))
        return out

    def _check_shape(self, emitted: list[int], n: int, proposed: list[int]) -> None:
        k = len(proposed)
        problem = None
        if not 0 <= n <= k:
            problem = f"n_accepted = {n} with k = {k} proposals; it must lie in [0, {k}]"
        elif emitted[:n] != proposed[:n]:
            problem = (
                f"emitted = {emitted} does not start with the {n} accepted proposals {proposed[:n]}"
            )
        elif len(emitted) == n < k:
            problem = (
                f"after rejecting proposal {n} you emitted no replacement token "
                f"(emitted = {emitted}); a rejection must emit one token from the residual"
            )
        elif len(emitted) not in (n, n + 1):
            problem = (
                f"emitted {len(emitted)} tokens with n_accepted = {n}; a round emits the "
                "accepted proposals plus exactly one token from the target"
            )
        if problem:
            raise Abort(
                Diagnosis.INVALID_OUTPUT,
                f"`{self.name}` returned an impossible round: {problem}. (proposed = {proposed})",
            )


def probe_equal(runner: Runner) -> Outcome:
    """p == q at every position: min(1, p/q) = 1, so all k are accepted and a bonus follows."""
    p = _probs(0, 1, 2, 3, 1.5, 1.5, 1, 0)
    k = 3
    logits = _logits_for(p).repeat(k + 1, 1)
    q = process_logits(logits[:k], T1)
    trials = runner.run(
        1, logits, q, T1, 60, lambda g: torch.multinomial(q, 1, generator=g)[:, 0].tolist()
    )
    all_in = [t for t in trials if t.n == k]
    missing = sum(len(t.emitted) == k for t in all_in)
    out = Outcome(
        {
            "p==q: rounds accepting all 3": f"{len(all_in)}/{len(trials)}",
            "p==q: bonus token present": f"{len(all_in) - missing}/{len(all_in)}",
        }
    )
    if missing:
        out.findings.append(
            (
                Diagnosis.NO_BONUS,
                "When all k proposals are accepted the round must still emit one more token, "
                "the bonus, drawn from the target's last row target_logits[k] (that is why "
                "there are k + 1 rows). With p_target == p_draft every proposal is accepted; "
                f"in {missing} of {len(all_in)} such rounds you returned {k} tokens instead "
                f"of {k + 1}.",
            )
        )
    if len(all_in) < len(trials):
        out.findings.append(
            (
                Diagnosis.WRONG_ACCEPTANCE,
                "With p_target == p_draft, min(1, p/q) = 1 and every proposal must be "
                f"accepted; you rejected one in {len(trials) - len(all_in)} of {len(trials)} "
                "rounds.",
            )
        )
    return out


def probe_shift(runner: Runner) -> Outcome:
    """Row 0 rules the proposal out, row 1 makes it certain: only row 0 may count."""
    x = 5
    logits = torch.stack(
        [_logits_for(_probs(0, 3, 3, 2, 2, 0, 0, 0)), _logits_for(_probs(0, 0, 0, 0, 0, 1, 0, 0))]
    )
    trials = runner.run(2, logits, one_hot_probs([x], V), T1, 40, lambda g: [x])
    accepted = sum(t.n for t in trials)
    out = Outcome({"row 0 gives p(x)=0, row 1 gives p(x)=1: accepted": f"{accepted}/{len(trials)}"})
    if accepted >= len(trials) / 2:
        out.findings.append(
            (
                Diagnosis.OFF_BY_ONE,
                "Row i of target_logits scores the token after context + proposed[:i], so "
                "proposed[i] must be checked against row i. Here row 0 gives proposed[0] "
                "probability 0 (it must always be rejected) and row 1 gives it probability "
                f"1; you accepted it in {accepted} of {len(trials)} trials, so you are "
                "verifying proposed[i] against row i + 1.",
            )
        )
    elif accepted:
        out.findings.append(
            (
                Diagnosis.WRONG_ACCEPTANCE,
                f"You accepted a proposal the target gives probability 0 in {accepted} of "
                f"{len(trials)} trials; min(1, p(x)/q(x)) is 0 for it.",
            )
        )
    return out


def probe_ratio(runner: Runner) -> Outcome:
    """p(x) = 0.6 > q(x) = 0.2: min(1, p/q) = 1, so the proposal is always accepted."""
    p, q = _probs(0, 6, 1, 1, 1, 1, 0, 0), _probs(0, 2, 2, 2, 2, 2, 0, 0)
    trials = runner.run(3, _logits_for(p).repeat(2, 1), q[None], T1, 60, lambda g: [1])
    accepted = sum(t.n for t in trials)
    out = Outcome({"p(x)=0.6 > q(x)=0.2: accepted": f"{accepted}/{len(trials)}"})
    if accepted == len(trials):
        return out
    z = z_score(accepted, len(trials), float(p[1]))
    if abs(z) <= Z_LIMIT:
        out.findings.append(
            (
                Diagnosis.ACCEPT_WITH_P_TARGET,
                "Accept a proposal x with probability min(1, p_target(x)/p_draft(x)), not "
                "p_target(x). Here p_target(x) = 0.60 and p_draft(x) = 0.20, so it must be "
                f"accepted every time; you accepted it {accepted} of {len(trials)} times "
                f"({accepted / len(trials):.2f}, z = {z:+.1f} against p_target(x) = 0.60).",
            )
        )
    else:
        out.findings.append(
            (
                Diagnosis.WRONG_ACCEPTANCE,
                "With p_target(x) = 0.60 > p_draft(x) = 0.20, min(1, p/q) = 1 and x must always "
                f"be accepted; you accepted it {accepted} of {len(trials)} times.",
            )
        )
    return out


def probe_rate(runner: Runner) -> Outcome:
    """p(x) = 0.3, q(x) = 0.6: accepted with probability 0.5; replacements from the residual."""
    p, q = _probs(0, 3, 2, 2, 3, 0, 0, 0), _probs(0, 6, 1, 1, 1, 1, 0, 0)
    trials = runner.run(4, _logits_for(p).repeat(2, 1), q[None], T1, 150, lambda g: [1])
    accepted = sum(t.n for t in trials)
    rate = accepted / len(trials)
    z = z_score(accepted, len(trials), 0.5)
    out = Outcome(
        {"p(x)=0.3, q(x)=0.6: acceptance (expect 0.5)": f"{rate:.3f}, z = {z:+.2f}"},
        summary=f"acceptance rate: z = {z:+.2f}",
    )
    if abs(z) > Z_LIMIT:
        out.findings.append(
            (
                Diagnosis.WRONG_ACCEPTANCE,
                "Accept x with probability min(1, p(x)/q(x)). With p(x) = 0.3 and q(x) = 0.6 "
                f"that is 0.5; you accepted {accepted} of {len(trials)} ({rate:.3f}, z = "
                f"{z:+.1f}).",
            )
        )
    residual = (p - q).clamp(min=0)
    replacements = [t.emitted[0] for t in trials if t.n == 0]
    outside = sum(not 0 <= y < V or residual[y] <= 0 for y in replacements)
    if outside:
        out.findings.append(
            (
                Diagnosis.WRONG_DISTRIBUTION,
                "After a rejection the replacement must come from the residual max(0, p - q), "
                f"which is zero wherever p <= q; {outside} of {len(replacements)} replacements "
                "landed outside it.",
            )
        )
    return out


def probe_one_hot(runner: Runner) -> Outcome:
    """A one-hot drafter proposing d: P(d) must be p(d), and a replacement is never d."""
    d = 1
    p = _probs(0, 5, 1, 1, 1, 1, 1, 0)
    q = one_hot_probs([d], V)
    trials = runner.run(5, _logits_for(p).repeat(2, 1), q, T1, 200, lambda g: [d])
    first = [t.emitted[0] for t in trials]
    rejections = [t for t in trials if t.n == 0]
    replaced_by_d = sum(t.emitted[0] == d for t in rejections)
    impossible = [
        t.emitted[0] for t in rejections if not 0 <= t.emitted[0] < V or p[t.emitted[0]] <= 0
    ]
    n_d = sum(y == d for y in first)
    exact = float(exact_first_token_distribution(p, q[0])[d])  # = p(d): the rule is exact
    exact_biased = float(exact_first_token_distribution(p, q[0], target_distribution)[d])
    z = z_score(n_d, len(first), exact)
    pvalue = _chi_square_p(first, p)
    out = Outcome(
        {
            "one-hot draft: P(drafted token)": (
                f"{n_d / len(first):.3f} vs p_target {exact:.3f} (z = {z:+.2f}, N = {len(first)})"
            ),
            "one-hot draft: chi-square p-value": pvalue,
        },
        summary=f"one-hot draft: z = {z:+.2f}",
    )
    if replaced_by_d:
        out.findings.append(
            (
                Diagnosis.RESAMPLE_FROM_TARGET,
                "On rejection, draw the replacement from the residual norm(max(0, p_target - "
                "p_draft)), not from p_target. With a one-hot drafter proposing d the "
                "residual is 0 at d, so the replacement can never be d; you emitted d in "
                f"{replaced_by_d} of {len(rejections)} rejections. Overall P(d) = "
                f"{n_d / len(first):.3f} where p_target(d) = {exact:.2f} (z = {z:+.1f}); "
                f"resampling from p_target predicts p(2 - p) = {exact_biased:.2f} (exact "
                "enumeration). The text stays fluent, but it leans towards what the drafter "
                "liked.",
            )
        )
    if impossible:
        mass = float((p - q[0]).clamp(min=0).sum())
        out.findings.append(
            (
                Diagnosis.UNNORMALISED_RESIDUAL,
                "Divide the residual max(0, p_target - p_draft) by its sum before sampling "
                f"from it. Here it sums to {mass:.2f}, and in {len(impossible)} of "
                f"{len(rejections)} rejections ({len(impossible) / len(rejections):.2f}) you "
                "emitted a token the target gives probability 0 (ids "
                f"{sorted(set(impossible))}): a draw from weights summing to {mass:.2f} falls "
                f"off the end about {1 - mass:.2f} of the time.",
            )
        )
    if abs(z) > Z_LIMIT or pvalue < P_LIMIT:
        out.findings.append(
            (
                Diagnosis.WRONG_DISTRIBUTION,
                "With a one-hot drafter the first emitted token must be distributed as "
                f"p_target. P(drafted token) = {n_d / len(first):.3f} vs {exact:.3f} (z = "
                f"{z:+.1f}); chi-square p-value over all tokens = {pvalue:.2g}.",
            )
        )
    return out


def probe_filtered(runner: Runner) -> Outcome:
    """Temperature 0.8 and top-k 5, a broad draft: the token at position 2 must follow p[1]."""
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
    # Row 0 of the draft equals the target's, so position 1 is always accepted and
    # the second emitted token is exactly the output of verifying position 2.
    q = torch.stack([process_logits(raw[0], params), process_logits(draft_raw, params)])
    trials = runner.run(
        6, raw, q, params, 200, lambda g: torch.multinomial(q, 1, generator=g)[:, 0].tolist()
    )
    second = [t.emitted[1] for t in trials if len(t.emitted) > 1]
    pvalue = _chi_square_p(second, process_logits(raw[1], params))
    out = Outcome(
        {"temperature 0.8, top-k 5: chi-square p-value (position 2)": pvalue},
        summary=f"temperature/top-k case: chi-square p = {pvalue:.2g}",
    )
    if pvalue >= P_LIMIT:
        return out
    pvalue_raw = _chi_square_p(second, torch.softmax(raw[1], -1))
    if pvalue_raw >= P_LIMIT:
        out.findings.append(
            (
                Diagnosis.IGNORES_PARAMS,
                "Process the target's logits with the sampling parameters "
                "(process_logits(target_logits, params)) before comparing with the draft: the "
                "draft's probabilities already had temperature 0.8 and top-k 5 applied. Your "
                "second-position tokens fit softmax of the raw logits (chi-square p = "
                f"{pvalue_raw:.2g}), not the processed p_target (p = {pvalue:.2g}).",
            )
        )
    else:
        out.findings.append(
            (
                Diagnosis.WRONG_DISTRIBUTION,
                "With temperature 0.8 and top-k 5 the token at the second position must be "
                "distributed as the processed p_target at row 1; chi-square p-value = "
                f"{pvalue:.2g} over {len(second)} rounds.",
            )
        )
    return out


#: (the situation, in words for a message; the probe), in the order they run.
PROBES: list[tuple[str, Callable[[Runner], Outcome]]] = [
    ("p_target == p_draft", probe_equal),
    ("row 0 rules the proposal out and row 1 makes it certain", probe_shift),
    ("p_target(x) = 0.6 > p_draft(x) = 0.2", probe_ratio),
    ("p_target(x) = 0.3 < p_draft(x) = 0.6", probe_rate),
    ("the drafter is one-hot", probe_one_hot),
    ("temperature is 0.8 and top-k is 5", probe_filtered),
]
