"""The registry of the graders' negative controls: every graded exercise's reference solution
and named mistakes, and how often its check catches them.

A grader never shown a wrong answer has not been tested. Each mistake is one plausible
slip in the exercise's own form, made of the library's code with one input, parameter or
result altered. Each exercise's module defines its reference and its mistakes beside its
check and enters them here with :func:`register`, saying which diagnosis the check must
give each one. The sandbox reads :data:`MISTAKES` and :data:`REFERENCES` when a check runs
(the grader's own functions run unwatched); :func:`catch_rates` runs a check on them
(``python -m specdec_lib.grading`` prints every check's rates).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .report import Diagnosis as D


@dataclass(frozen=True)
class Mistake:
    """One wrong implementation and the diagnosis its grader must give."""

    function: Callable
    diagnosis: D


def register(check: str, reference: Callable, *slips: tuple[str, Callable, D]) -> None:
    """Enter ``check``'s reference solution and its slips, ``(label, function, diagnosis)``."""
    if check in REFERENCES:
        raise ValueError(f"{check} is registered already")
    REFERENCES[check] = reference
    MISTAKES[check] = {label: Mistake(fn, diagnosis) for label, fn, diagnosis in slips}


#: ``{check name: {mistake: Mistake}}``: every graded exercise's named mistakes, entered
#: by its own module when the package imports it (:func:`register`), by check name.
MISTAKES: dict[str, dict[str, Mistake]] = {}

#: ``{check name: the correct solution in the student's form}``, entered the same way.
REFERENCES: dict[str, Callable] = {}


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
