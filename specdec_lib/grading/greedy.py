"""The check of the greedy verification exercise.

Greedy verification has one right answer per input, so the check compares the
student's rule with :func:`specdec_lib.accept_greedy` on random logits over small
synthetic vocabularies (5 and 256 tokens) and, when they differ, names the known
mistake the student's outputs reproduce
(:data:`~specdec_lib.grading.mistakes.GREEDY_MISTAKES`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from specdec_lib.engine.verify import accept_greedy as library_accept_greedy

from .harness import (
    as_verification,
    call_student,
    check_signature,
    failure,
    fingerprint,
    run_check,
)
from .mistakes import GREEDY_MISTAKES
from .report import Diagnosis, Report


@dataclass(frozen=True)
class _Case:
    logits: torch.Tensor  # (k+1, V)
    proposed: tuple[int, ...]


def _cases(seed: int) -> list[_Case]:
    gen = torch.Generator().manual_seed(seed)
    cases = []
    for vocab in (5, 256):
        for k in range(7):
            for n_match in range(k + 1):
                for _ in range(2):
                    logits = torch.randn(k + 1, vocab, generator=gen)  # (k+1, V)
                    best = logits.argmax(-1).tolist()
                    proposed = best[:n_match]
                    for i in range(n_match, k):
                        # After the first mismatch, sometimes match again: a correct
                        # rule must not keep those.
                        shift = 0 if i > n_match and torch.rand((), generator=gen) < 0.5 else None
                        if shift is None:
                            shift = int(torch.randint(1, vocab, (), generator=gen))
                        proposed.append((best[i] + shift) % vocab)
                    cases.append(_Case(logits, tuple(proposed)))
    return cases


_ADVICE = {
    Diagnosis.NO_BONUS: "When all k proposals match, the round still emits one more token: the "
    "target's argmax at row k, the bonus token (that is why target_logits has k + 1 rows).",
    Diagnosis.OFF_BY_ONE: "Row i of target_logits is the target's prediction for the token after "
    "context + proposed[:i], so compare proposed[i] with the argmax of row i, not row i + 1.",
    Diagnosis.EMITS_REJECTED: "At the first mismatch, emit the target's own token (the argmax of "
    "that row), not the rejected proposal.",
    Diagnosis.KEEPS_GOING: "Stop at the first mismatch: later proposals were drafted after a "
    "token that will not be emitted, so none of them can be kept, even if they happen to match.",
}


def check_accept_greedy(
    accept_greedy: Callable, seed: int = 0, timeout: float | None = 60.0
) -> Report:
    """Check greedy verification against :func:`specdec_lib.accept_greedy`.

    The exercise implements::

        def accept_greedy(target_logits, proposed) -> tuple[list[int], int]:
            '''target_logits: (k+1, V), row i scores the token after context + proposed[:i].
            Return (emitted, n_accepted): the longest prefix of ``proposed`` that equals
            the target's argmax, then one token from the target (the correction at the
            first mismatch, or the bonus from row k when all k match).'''

    About 110 random cases (``seed`` picks them): vocabularies of 5 and 256, k from 0 to
    6, every number of matching proposals, and proposals that match again after a
    mismatch.
    """

    def body(name: str) -> Report:
        check_signature(accept_greedy, name, 2, f"{name}(target_logits, proposed)")
        cases = _cases(seed)
        expected = [library_accept_greedy(c.logits, list(c.proposed)) for c in cases]
        got = []
        for c in cases:
            args = (c.logits.clone(), list(c.proposed))
            result = call_student(accept_greedy, name, args, during=f"with k = {len(c.proposed)}")
            got.append(as_verification(result, name))
        wrong = [i for i in range(len(cases)) if got[i] != expected[i]]
        evidence: dict[str, Any] = {"cases": len(cases), "wrong": len(wrong)}
        if not wrong:
            return Report(
                "check_accept_greedy",
                name,
                True,
                f"Correct on all {len(cases)} cases: every number of matching proposals from 0 "
                "to k (k = 0..6), the bonus token, and proposals that match again after a "
                "mismatch.",
                None,
                evidence,
            )
        i = wrong[0]
        c = cases[i]
        example = (
            f"First failing case: k = {len(c.proposed)}, the target's argmax per row = "
            f"{c.logits.argmax(-1).tolist()}, proposed = {list(c.proposed)}: expected "
            f"{expected[i]}, got {got[i]}."
        )
        found = fingerprint(
            GREEDY_MISTAKES.values(),
            cases,
            expected,
            got,
            lambda fn, case: fn(case.logits, list(case.proposed)),
        )
        bad_count = any(got[j][1] != len(got[j][0]) - 1 for j in wrong)
        hint = " n_accepted must equal the number of proposals kept, len(emitted) - 1."
        differs = (
            Diagnosis.GREEDY_MISMATCH,
            f"Wrong on {len(wrong)} of {len(cases)} cases.{hint if bad_count else ''}",
        )
        raise failure(found, _ADVICE, differs, example, evidence)

    return run_check("check_accept_greedy", accept_greedy, body, seed, timeout)
