"""Checks of exercises with one right answer per input: the student's answers against the
reference's on many inputs and, when they differ, the known mistake whose answers the
student's reproduce.

Most graded exercises ask for such a function (a proposal, a count, a byte total, a
crossover, draft lengths, kept nodes); their modules give :class:`ExactCheck` the cases
and the way to read an answer, and register the reference and the mistakes it compares
with (:func:`~.mistakes.register`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from types import CodeType
from typing import Any

from .mistakes import MISTAKES, REFERENCES
from .report import Diagnosis, Report
from .sandbox import Abort, run_check


def closest_mistake(
    expected: Sequence, got: Sequence, wrong: Sequence[int], mistakes: Iterable[tuple[Any, list]]
) -> tuple[Any, dict[str, str]]:
    """The mistake, of ``(diagnosis, its answers)`` pairs, that the student's answers
    ``got`` reproduce: it agrees with the student on at least 90% of the cases where the
    mistake is wrong, and explains at least 60% of the student's ``wrong`` answers (the
    best on both, in that order); ``(None, {})`` when none does."""
    best, diagnosis, evidence = (0.6, 0.9), None, {}
    for mistake, theirs in mistakes:
        differs = [i for i in range(len(expected)) if theirs[i] != expected[i]]
        agree = sum(got[i] == theirs[i] for i in differs) / max(len(differs), 1)
        score = (sum(got[i] == theirs[i] for i in wrong) / len(wrong), agree)
        if differs and score[0] >= 0.6 and agree >= 0.9 and score >= best:
            best, diagnosis = score, mistake
            evidence = {"agrees with this mistake on": f"{agree:.0%} of its wrong answers"}
    return diagnosis, evidence


class ExactCheck:
    """A check with one right answer per input: ``check(fn, seed=0, timeout=60.0, **inputs)``;
    ``cases(seed, **inputs)`` makes the inputs, ``answer(fn, case)`` is ``fn``'s answer as
    plain data, ``describe(case)`` a case in words, ``show(answer)`` an answer in words;
    ``forbid`` is the library's own implementations of the exercise
    (:func:`~.sandbox.forbidden`)."""

    def __init__(
        self,
        name: str,
        cases,
        answer,
        describe,
        doc: str,
        forbid: dict[CodeType, str] | None = None,
        show: Callable[[Any], str] = repr,
    ) -> None:
        self.__name__, self.__doc__ = name, doc
        self.cases, self.answer, self.describe = cases, answer, describe
        self.forbid, self.show = forbid or {}, show

    def __call__(self, fn: Callable, seed: int = 0, timeout: float | None = 60.0, **inputs: Any):
        def body(name: str) -> Report:
            cases = self.cases(seed, **inputs)
            expected = [self.answer(REFERENCES[self.__name__], c) for c in cases]
            got = [self.answer(fn, c) for c in cases]
            wrong = [i for i in range(len(cases)) if got[i] != expected[i]]
            evidence: dict[str, Any] = {"cases": len(cases), "wrong": len(wrong)}
            if not wrong:
                return Report(
                    self.__name__, name, True, f"Correct on all {len(cases)} cases.", None, evidence
                )
            answers = (
                (m.diagnosis, [self.answer(m.function, c) for c in cases])
                for m in MISTAKES[self.__name__].values()
            )
            diagnosis, agreement = closest_mistake(expected, got, wrong, answers)
            evidence |= agreement
            i, first = wrong[0], self.describe(cases[wrong[0]])
            details = (
                f"Wrong on {len(wrong)} of {len(cases)} cases; the first: {first}: "
                f"expected {self.show(expected[i]):.200}, got {self.show(got[i]):.200}."
            )
            diagnosis = Diagnosis.WRONG_ANSWER if diagnosis is None else diagnosis
            raise Abort(diagnosis, details, **evidence)

        return run_check(self.__name__, fn, body, seed, timeout, self.forbid)
