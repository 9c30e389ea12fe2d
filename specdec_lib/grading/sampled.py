"""The check of the residual-rule exercise (sampled verification).

Exact, then sampled: the probes of :mod:`.sampled_probes` first put the rule in
situations whose correct outcome has probability 1, then compare seeded outputs
with the exact output distribution. When several mistakes show, the most
specific diagnosis wins (:data:`PRIORITY`); a crash in one probe does not hide
what the others reveal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .harness import Abort, check_signature, run_check
from .report import Diagnosis, Report
from .sampled_probes import PROBES, Finding, Runner

# The most specific diagnosis wins; generic ones last.
PRIORITY = [
    Diagnosis.NO_BONUS,
    Diagnosis.OFF_BY_ONE,
    Diagnosis.ACCEPT_WITH_P_TARGET,
    Diagnosis.RESAMPLE_FROM_TARGET,
    Diagnosis.UNNORMALISED_RESIDUAL,
    Diagnosis.IGNORES_PARAMS,
    Diagnosis.WRONG_ACCEPTANCE,
    Diagnosis.WRONG_DISTRIBUTION,
]


def check_accept_sampled(
    accept_sampled: Callable, seed: int = 0, timeout: float | None = 60.0
) -> Report:
    """Check the residual rule, and name the classic mistake if it finds one.

    The exercise implements (same signature as :func:`specdec_lib.accept_sampled`)::

        def accept_sampled(target_logits, draft_probs, proposed, params, generator=None):
            '''target_logits (k+1, V) raw logits (process them with params);
            draft_probs (k, V) the distributions the k proposals were drawn from.
            Accept proposed[i] = x with probability min(1, p(x)/q(x)); at the first
            rejection emit a token drawn from norm(max(0, p - q)) and stop; if all k
            are accepted, emit a bonus token drawn from row k. Return (emitted, n_accepted).'''

    About 700 seeded calls on a vocabulary of 8 (``seed`` changes every draw):

    * exact probes, whose correct outcome has probability 1: p == q (accept all k,
      then a bonus token); a proposal that row 0 rules out but row 1 makes certain
      (must be rejected); p(x) > q(x) (must be accepted);
    * distribution probes: a one-hot drafter (P(drafted token) must equal p, and the
      replacement can never be the drafted token), an acceptance rate against
      min(1, p/q), and a draft-model-like case with temperature 0.8 and top-k 5
      (chi-square of the token at the second position against the filtered p).

    Recognised by name: resampling from p_target on rejection, accepting with
    probability p_target(x) alone, no bonus token, an off-by-one between proposals
    and target rows, a residual that is not renormalised, and sampling parameters
    not applied.
    """

    def body(name: str) -> Report:
        check_signature(
            accept_sampled,
            name,
            5,
            f"{name}(target_logits, draft_probs, proposed, params, generator=None)",
        )
        runner = Runner(accept_sampled, name, seed)
        evidence: dict[str, Any] = {}
        findings: list[Finding] = []
        summaries: list[str] = []
        errors: list[tuple[str, Abort]] = []
        for situation, probe in PROBES:
            # A crash in one probe must not hide what the others reveal: the
            # "accept with p(x)" mistake, for one, may divide 0 by 0 when p == q.
            try:
                outcome = probe(runner)
            except Abort as abort:
                if abort.diagnosis is Diagnosis.NOT_IMPLEMENTED:
                    raise
                errors.append((situation, abort))
                continue
            evidence.update(outcome.evidence)
            findings += outcome.findings
            summaries += [outcome.summary] if outcome.summary else []
        evidence["calls"] = runner.calls
        if findings:
            findings.sort(key=lambda f: PRIORITY.index(f[0]))
            diagnosis, message = findings[0]
            others = [d for d in PRIORITY if d in {d for d, _ in findings[1:]} - {diagnosis}]
            if others:
                evidence["also seen"] = ", ".join(d.value for d in others)
            if errors:
                evidence["also raised"] = f"{errors[0][1].message} (when {errors[0][0]})"
            raise Abort(diagnosis, message, **evidence)
        if errors:
            situation, abort = errors[0]
            raise Abort(
                abort.diagnosis,
                f"{abort.message} This happened when {situation}.",
                **{**evidence, **abort.evidence},
            )
        return Report(
            "check_accept_sampled",
            name,
            True,
            "Correct: all exact probes behave as the residual rule must (accept everything "
            "and add a bonus when p == q, reject what row 0 rules out, accept when p > q), "
            f"and the sampled outputs match p_target ({'; '.join(summaries)}). No classic "
            "mistake detected.",
            None,
            evidence,
        )

    return run_check("check_accept_sampled", accept_sampled, body, seed, timeout)
